# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action: Slurm's block topology of the IMEX domains, from the inventory, on a Slurm controller.

Documented in plugins/modules/imex_slurm_topology.py. The blocks come from the inventory alone (the
domain model the imex role builds; no tray is contacted) and every decision is a pure function of
plugin_utils/_slurm_topology.py: what is refused before any host is contacted, what is refused once
the controller's Slurm was read (a first module run that only reads), the file (a second module run
writes it and reconfigures Slurm), and whether Slurm's topology then matches the inventory.
"""
from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.rackscale.imex.plugins.filter.imex_domain import _plain, model_or_problems
from ansible_collections.rackscale.imex.plugins.plugin_utils import _slurm_topology as topology

MODULE = "rackscale.imex.imex_slurm_topology"
# Host variables of each tray the topology reads.
TRAY_KEYS = ("imex_slurm_node_name", "imex_mode")
# The topology does not care how many trays IMEX allows in a domain: only the model's shape is used.
MAX_NODES = 1024
ARGUMENTS = ("path", "block_sizes", "reconfigure", "backup", "domains_group", "topology_name", "timeout", "force")


class ActionModule(ActionBase):
    """Build, refuse, write through the module, compare."""

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        try:
            return self._run(result, task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

    def _failed(self, result, problems, **more):
        return dict(result, failed=True, problems=problems, msg="\n".join(problems), **more)

    def _tray_vars(self, hostvars, trays):
        found, problems = {}, []
        for tray in trays:
            values = {}
            for key in TRAY_KEYS:
                try:
                    tray_vars = hostvars[tray]
                    values[key] = _plain(tray_vars.get(key)) if isinstance(tray_vars, Mapping) else None
                except (KeyError, AnsibleError) as error:
                    problems.append("tray %s: %s cannot be read: %s" % (tray, key, error))
            found[tray] = values
        return found, problems

    def _run(self, result, task_vars):
        args = dict(self._task.args)
        unknown = sorted(set(args) - set(ARGUMENTS))
        if unknown:
            return self._failed(result, ["unknown argument(s) %s; this action takes %s"
                                         % (", ".join(unknown), ", ".join(ARGUMENTS))])
        path = str(args.get("path") or "/etc/slurm/topology.conf")
        topology_name = str(args.get("topology_name") or "imex")
        try:
            reconfigure = boolean(args.get("reconfigure", True), strict=True)
            backup = boolean(args.get("backup", True), strict=True)
            force = boolean(args.get("force", False), strict=True)
            timeout = int(str(args.get("timeout", 30)).strip())
        except (TypeError, ValueError) as error:
            return self._failed(result, ["reconfigure, backup and force must be booleans and timeout a whole number: %s"
                                         % error])
        sizes, problem = topology.convert_block_sizes(_plain(args.get("block_sizes")))
        if problem:
            return self._failed(result, [problem])

        # 1. From the inventory alone: the domain model exactly as the imex role builds it.
        built = model_or_problems(task_vars["groups"], task_vars["hostvars"], [],
                                  parent=str(args.get("domains_group") or "imex_domains"), max_nodes=MAX_NODES,
                                  allow_mixed_families=True,
                                  require_declared_size=task_vars.get("awx_job_id") is not None)
        if built["problems"]:
            return self._failed(result, ["IMEX domain model: %d problem(s) in the inventory:" % len(built["problems"])]
                                + ["- " + problem for problem in built["problems"]])
        model = built["model"]
        trays = [node["host"] for domain in model["domains"].values() for node in domain["nodes"]]
        tray_vars, problems = self._tray_vars(task_vars["hostvars"], trays)
        if problems:
            return self._failed(result, problems)
        blocks = topology.domain_blocks(model, tray_vars)
        problems = topology.static_problems(blocks, sizes, path, topology_name)
        if problems:
            return self._failed(result, problems, blocks=blocks)
        sizes = topology.block_sizes_for(blocks, sizes)
        result.update(blocks=blocks, block_sizes=sizes, path=path)

        # 2. What the controller's Slurm is, runs and knows: refused here still writes nothing.
        read = self._execute_module(module_name=MODULE, task_vars=task_vars,
                                    module_args=dict(read_nodes=True, timeout=timeout))
        if read.get("failed"):
            return dict(result, **read)
        result.update(slurm_version=read["version_text"], topology_files=read.get("topology_files"))
        problems = topology.slurm_problems(blocks, sizes, path, tuple(read["version"]), read["config"],
                                           read.get("nodes"), topology.per_job_trays(tray_vars),
                                           read.get("topology_files"))
        foreign = topology.foreign_file_problem(path, read.get("existing"), force)
        if foreign:
            problems.append(foreign)
        if problems:
            return self._failed(result, problems)

        # 3. The file, and Slurm's topology afterwards.
        content = topology.render(blocks, sizes, path, topology_name)
        written = self._execute_module(module_name=MODULE, task_vars=task_vars, module_args=dict(
            path=path, content=content, backup=backup, reconfigure=reconfigure, timeout=timeout))
        if written.get("failed"):
            return dict(result, **written)
        for key in ("changed", "backup_file", "diff", "reconfigured", "topology"):
            if key in written:
                result[key] = written[key]
        differences = topology.topology_differences(blocks, sizes, written["topology"])
        result["differences"] = differences
        if not differences:
            result["msg"] = "Slurm runs the inventory's %d block(s) with BlockSizes=%s" % (
                len(blocks), ",".join(str(size) for size in sizes))
            return result
        if written["changed"] and not written.get("reconfigured"):
            # Slurm still runs the previous file: a difference is what the write (or its prediction) is for.
            why = "check mode" if task_vars.get("ansible_check_mode") else "imex_slurm_reconfigure is false"
            result["warnings"] = ["%s: %s changed and Slurm was not reconfigured (%s); until slurmctld reads it: %s"
                                  % (self._task.get_name() or MODULE, path, why, "; ".join(differences))]
            result["msg"] = "%s written; Slurm not reconfigured (%s)" % (path, why)
            return result
        return self._failed(result, ["Slurm's topology differs from the inventory after %s:" % (
            "scontrol reconfigure" if written.get("reconfigured") else "reading %s" % path)]
            + ["- " + difference for difference in differences])
