# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action: the run plan of the rackscale.imex.imex role, one stage at a time, on the controller.

Documented in plugins/modules/imex_plan.py. Dispatches each task (``stage: <name>``) from the stage
table of plugin_utils/plan/stages.py: gathers what the role's earlier tasks registered on each tray
of the play under the registers the stage names (its options, its reads, its writes) and hands it to
the stage's pure function, which decides. Runs once per stage (run_once), in the controller process:
no module, no connection.
"""
from __future__ import annotations

import getpass
import hashlib
import json
import os
import random
import socket
import time
from collections.abc import Mapping

import yaml

from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.rackscale.imex.plugins.filter.imex_domain import _plain, model_or_problems
from ansible_collections.rackscale.imex.plugins.plugin_utils import _run_record
from ansible_collections.rackscale.imex.plugins.plugin_utils._discover import CONNECTION_VARS
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import arguments as argument_stage, stages
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.defaults import decided
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.errors import PlanError
from ansible_collections.rackscale.imex.plugins.plugin_utils._option_table import RUN, convert_options, whole_number
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import variance_problems
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.per_job import SLURM_JOB_SCRIPT
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.verdicts import explain, judged

REPORT_ONLY_TAG = "imex_report"
ROLE_SPECS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "roles", "imex", "meta", "argument_specs.yml")
ROLE_DEFAULTS = os.path.join(os.path.dirname(ROLE_SPECS), "..", "defaults", "main.yml")
PHASE_TAGS = ("all", "imex_daemon", "imex_validate")


def run_id(awx_job_id=None, now=None):
    """Names this run in the locks it takes: who runs it, where, as which process, and when, so that
    an operator who finds a lock can tell whether its run is still alive."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "uid%d" % os.getuid()
    # Workers are forks of ansible-playbook: their parent is the process an operator can look for.
    origin = "%s@%s-pid%d" % (user, socket.gethostname().split(".")[0], os.getppid())
    prefix = "awx-job-%s" % awx_job_id if awx_job_id not in (None, "") else "run"
    return "%s-%s-%s-%d" % (prefix, origin, stamp, random.randint(0, 999999999))


def _by_item(loop_result):
    """{item: result} of a registered loop (results of skipped items left out).

    Read here rather than passed as task arguments: templating a skipped result touches its
    deprecated skip reason, and the role's tasks would print a warning for it."""
    found = {}
    if not isinstance(loop_result, Mapping):
        return found
    for result in loop_result.get("results") or []:
        if isinstance(result, Mapping) and "item" in result and not result.get("skipped"):
            found[_plain(result["item"])] = {key: _plain(value) for key, value in result.items()
                                             if key not in ("skipped_reason", "skip_reason")}
    return found


class ActionModule(ActionBase):
    """One stage of the imex role's plan."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        stage = stages.BY_NAME.get(args.get("stage"))
        if stage is None:
            return dict(result, failed=True, msg="stage must be one of %s, got %r" % (
                ", ".join(stages.BY_NAME), args.get("stage")))
        try:
            plan = getattr(self, "_" + stage.name)(stage, args, task_vars)
        except PlanError as error:
            # The refused stage registers over the plan: the run's id, the domains judged so far and the stage
            # the plan had reached stay with the refusal, and where it stopped the run, for its records.
            return dict(result, failed=True, msg="\n".join(error.problems), problems=error.problems,
                        stopped_at=stage.stopped_at, **self._progress(task_vars))
        if stage.register == stages.PLAN:
            # Where the run is: the records of a run that stops before the next stage read it.
            plan["reached"] = stage.name
        result.update(changed=False, plan=plan)
        if stage.name == "read" and plan.get("warnings"):
            # Shown once, as Ansible shows a module's warnings: what could not be checked.
            result["warnings"] = list(plan["warnings"])
        return result

    # -- inputs -------------------------------------------------------------------------------------

    def _hostvar(self, task_vars, tray, name):
        try:
            return _plain(task_vars["hostvars"][tray].get(name))
        except (KeyError, AnsibleError) as error:
            raise PlanError(["tray %s: %s cannot be read: %s" % (tray, name, error)]) from None

    def _previous(self, task_vars):
        plan = (task_vars.get(stages.PLAN) or {}).get("plan")
        if not isinstance(plan, Mapping):
            raise PlanError(["the preflight stage of the plan has not run in this play"])
        return _plain(dict(plan))

    def _tray_options(self, task_vars, trays, register):
        options, problems = {}, []
        for tray in trays:
            raw = self._hostvar(task_vars, tray, register)
            if not isinstance(raw, Mapping):
                problems.append("tray %s: its options were not gathered (the role's first task did not run on it)"
                                % tray)
                continue
            converted, found = convert_options(raw)
            options[tray] = decided(converted, under_awx="awx_job_id" in task_vars)
            problems.extend("tray %s: %s" % (tray, problem) for problem in found)
        if problems:
            raise PlanError(problems)
        return options

    def _progress(self, task_vars):
        """{run_id, judged, reached} of the plan registered before this stage (none before the preflight)."""
        registered = task_vars.get(stages.PLAN)
        plan = registered.get("plan") if isinstance(registered, Mapping) else None
        if not isinstance(plan, Mapping):
            return {}
        return {"run_id": plan.get("run_id"),
                "judged": [report.get("domain") for report in plan.get("run_verdicts") or []],
                "reached": plan.get("reached")}

    # -- stages -------------------------------------------------------------------------------------

    def _arguments(self, stage, args, task_vars):
        """Before the role starts (the shipped playbooks' first play): the trays' values of the role's
        options against its argument spec."""
        with open(ROLE_SPECS, encoding="utf-8") as handle:
            specs = yaml.safe_load(handle)
        options = argument_stage.options_of(specs, args.get("entry_point") or "main")
        trays = [str(tray) for tray in (task_vars.get("groups") or {}).get(args.get("group") or "imex_domains", [])]
        values = {}
        for tray in trays:
            defined = task_vars["hostvars"][tray]
            values[tray] = {name: self._hostvar(task_vars, tray, name) for name in options if name in defined}
        return stage.decide(options, values)

    def _preflight(self, stage, args, task_vars):
        play_hosts = [str(tray) for tray in task_vars.get("ansible_play_hosts") or []]
        play_hosts_all = [str(tray) for tray in task_vars.get("ansible_play_hosts_all") or play_hosts]
        options = self._tray_options(task_vars, play_hosts, stage.reads["options"])
        differ = variance_problems(RUN, play_hosts, options)
        if differ:
            raise PlanError(differ)
        first = options[play_hosts[0]]
        built = model_or_problems(
            task_vars["groups"], task_vars["hostvars"], play_hosts_all,
            parent=first["imex_domains_group"], max_nodes=first["imex_max_nodes"],
            allow_mixed_families=first["imex_allow_mixed_families"],
            driver_version=first["imex_driver_version"] or None,
            require_declared_size=first["imex_require_declared_size"])
        if built["problems"]:
            raise PlanError(["IMEX domain model: %d problem(s) in the inventory:" % len(built["problems"])]
                            + ["- " + problem for problem in built["problems"]])
        tags = set(task_vars.get("ansible_run_tags") or ["all"])
        report_only = REPORT_ONLY_TAG in tags and not tags & set(PHASE_TAGS)
        plan = stage.decide(built["model"], options, play_hosts, run_id=run_id(task_vars.get("awx_job_id")),
                            check_mode=bool(task_vars.get("ansible_check_mode")), report_only=report_only,
                            converge=bool(args.get("converge", True)))
        plan["model"] = built["model"]
        return plan

    def _read(self, stage, args, task_vars):
        plan = self._previous(task_vars)
        trays = list(plan["trays"])
        options = self._tray_options(task_vars, trays, stage.reads["options"])
        reads = {tray: self._hostvar(task_vars, tray, stage.reads["read"]) or {} for tray in trays}
        unread = _run_record.none_reached(reads)
        if unread:
            raise PlanError(unread)
        first = options[trays[0]]
        script_sha256, slurm_names = None, {}
        if plan.get("per_job_domains"):
            script_sha256 = self._shipped_sha256(SLURM_JOB_SCRIPT)
            # A tray the run does not read is named as the inventory names it.
            slurm_names = {tray: str(self._hostvar(task_vars, tray, "imex_slurm_node_name") or "")
                           for name in plan["per_job_domains"] for tray in plan["domains"][name]["trays"]
                           if tray not in options}
        return stage.decide(plan, plan["model"], options, reads,
                            shared_partition=first["imex_shared_partition"],
                            skip_fabric=first["imex_skip_fabric_check"],
                            converge=bool(args.get("converge", True)),
                            script_sha256=script_sha256, slurm_names=slurm_names)

    def _reread(self, stage, args, task_vars):
        """The plan made again from the second read, under the locks: the inputs of the read's."""
        return self._read(stage, args, task_vars)

    def _shipped_sha256(self, name):
        """The checksum of a file the role ships (its files/), as the copy task installs it."""
        try:
            path = self._find_needle("files", name)
            with open(path, "rb") as handle:
                return hashlib.sha256(handle.read()).hexdigest()
        except (AnsibleError, OSError) as error:
            raise PlanError(["the role's %s cannot be read on the controller: %s" % (name, error)]) from None

    def _wave_registers(self, task_vars, plan, wave, registers):
        """{tray: {key: what the tray registered under each name of ``registers``}} for the wave's trays."""
        return {tray: {key: self._hostvar(task_vars, tray, register) or {} for key, register in registers.items()}
                for name in wave for tray in plan["domains"][name]["trays_in_run"]}

    def _restart(self, stage, args, task_vars):
        plan = self._previous(task_vars)
        wave = list(args.get("wave") or [])
        writes = self._wave_registers(task_vars, plan, wave, stages.WAVE_WRITES)
        return stage.decide(plan, wave, writes, _by_item(task_vars.get(stage.reads["status"])))

    def _guard(self, stage, args, task_vars):
        plan = self._previous(task_vars)
        wave = list(args.get("wave") or [])
        reads = self._wave_registers(task_vars, plan, wave, stage.reads)
        return stage.decide(plan, wave, {tray: found["activity"] for tray, found in reads.items()})

    def _verdicts(self, stage, args, task_vars):
        plan = self._previous(task_vars)
        domains = list(args.get("domains") or [])
        statuses = _by_item(task_vars.get(stage.reads["status"]))
        statuses.update(_by_item(task_vars.get(stage.reads["proof"])))
        with_logs = bool(args.get("with_logs"))
        logs = {}
        for tray, found in (_by_item(task_vars.get(stage.reads["logs"])) if with_logs else {}).items():
            if found.get("failed"):
                logs[tray] = {"error": found.get("msg") or "unknown error"}
            else:
                logs[tray] = {key: found[key] for key in ("source", "path", "lines", "truncated", "refused") if key in found}
        pending = {name: plan["domains"][name].get("pending") or {} for name in domains}
        reports = stage.decide(plan, plan["model"], domains, statuses, list(plan["trays"]),
                               allowed_broken_pairs=int(args.get("allowed_broken_pairs") or 0),
                               logs=logs, pending=pending, probes=_by_item(task_vars.get(stage.reads["probes"])))
        plan = judged(plan, reports)
        plan["explain"] = [] if with_logs else explain(
            reports, plan["model"], [str(tray) for tray in task_vars.get("ansible_play_hosts_all") or []])
        return plan

    def _discover(self, stage, args, task_vars):
        """discover.yml: an inventory skeleton, one group per NVLink partition the trays report."""
        entries = []
        for tray in [str(tray) for tray in task_vars.get("ansible_play_hosts_all") or []]:
            found = {}
            for name in CONNECTION_VARS:
                value = self._hostvar(task_vars, tray, name)
                if value is not None:
                    found[name] = value
            entries.append({"name": tray, "read": self._hostvar(task_vars, tray, stage.reads["discovered"]) or {},
                            "vars": found})
        return stage.decide(entries, int(args.get("max_nodes") or 18))

    def _channels(self, stage, args, task_vars):
        """The imex_channels role, for the tray it runs on."""
        # The role's argument spec has refused what is not a boolean; "false" from -e is False here.
        return stage.decide(str(args.get("mode") or "static"), boolean(args.get("channel0", True), strict=False),
                            args.get("extra") or [], _plain(args.get("observed") or {}),
                            reboot_allowed=boolean(args.get("reboot_allowed", False), strict=False),
                            local=task_vars.get("ansible_connection") == "local")

    def _stopped(self, stage, args, task_vars):
        """The rescue of a run that stopped (before its proof, or at it): gathers what the role registered
        (the failed tasks, the registers of the stage table, the plan so far) for the stopped stage."""
        hostvars = task_vars.get("hostvars") or {}
        groups = task_vars.get("groups") or {}
        parent = str(args.get("group") or "imex_domains")
        in_group = [str(tray) for tray in groups.get(parent) or []]
        play = [str(tray) for tray in task_vars.get("ansible_play_hosts_all") or []]
        trays = [tray for tray in play if tray in in_group] or in_group
        registered = task_vars.get(stages.PLAN) if isinstance(task_vars.get(stages.PLAN), Mapping) else {}
        plan = _plain(dict(registered["plan"])) if isinstance(registered.get("plan"), Mapping) else None
        report_dir = os.path.abspath(self._run_wide(args.get("report_dir"), hostvars, trays, "imex_report_dir"))
        textfile_dir = self._run_wide(args.get("textfile_dir"), hostvars, trays, "imex_textfile_dir")
        if plan:
            judged_reports = list(plan.get("run_verdicts") or [])
            judged_names = [report["domain"] for report in judged_reports]
        else:
            judged_names = [str(name) for name in registered.get("judged") or []]
            judged_reports = _earlier_reports(report_dir, judged_names, registered.get("run_id"))
        the_run_id = (plan or {}).get("run_id") or registered.get("run_id") or run_id(task_vars.get("awx_job_id"))
        failures, registers = [], {name: {} for name in stage.reads.values()}
        for host in play:
            found = self._lenient(hostvars, host, ("ansible_failed_task", "ansible_failed_result") + tuple(registers))
            if found.get("ansible_failed_task") or found.get("ansible_failed_result"):
                failures.append((host, found.get("ansible_failed_task") or {}, found.get("ansible_failed_result") or {}))
            for name in registers:
                if isinstance(found.get(name), Mapping):
                    registers[name][host] = found[name]
        reached = (plan or {}).get("reached") or registered.get("reached")
        try:
            stale_after = whole_number(self._run_wide(args.get("lock_stale_after_s"), hostvars, trays,
                                                      "imex_lock_stale_after_s"))
        except ValueError:
            stale_after = None
        return stage.decide(failures, registers, self._run_domains(plan, task_vars, trays, parent), judged_names,
                            judged_reports, bool(task_vars.get("ansible_check_mode")), the_run_id, report_dir,
                            textfile_dir, reached=reached, lock_stale_after_s=stale_after, now=time.time())

    def _lenient(self, hostvars, host, names):
        """{name: value} of the variables of ``host`` that can be read: a rescue records what it can."""
        found = {}
        try:
            variables = hostvars[host]
        except (KeyError, AnsibleError):
            return found
        for name in names:
            try:
                value = variables.get(name)
            except AnsibleError:
                continue
            if value is not None:
                found[name] = _plain(value)
        return found

    def _run_wide(self, given, hostvars, trays, option):
        """A run-wide option: the trays' value when they agree (a play on the controller before the role
        sees their inventory values, not the role's defaults), else as the task gives it, else the role's
        default."""
        values = {str(self._lenient(hostvars, tray, (option,)).get(option, "")) for tray in trays}
        if len(values) == 1 and option in self._lenient(hostvars, trays[0], (option,)):
            return values.pop()
        if given is not None:
            return str(given)
        return str(_role_defaults().get(option) or "")

    def _run_domains(self, plan, task_vars, trays, parent):
        """{domain: {trays, addresses}} of the run: the plan's, else the inventory's model, else the trays'
        imex_domain (a run refused before its plan may have an inventory the model refuses)."""
        if plan:
            return {name: {"trays": list(domain["trays"]), "addresses": list(domain["addresses"])}
                    for name, domain in plan["domains"].items()}
        hostvars = task_vars.get("hostvars") or {}
        options = self._lenient(hostvars, trays[0], (stages.TRAY_OPTIONS,)).get(stages.TRAY_OPTIONS) if trays else None
        converted = convert_options(dict(options))[0] if isinstance(options, Mapping) else {}
        # As permissive as the model allows: only the domains and their trays are wanted here.
        built = model_or_problems(task_vars.get("groups") or {}, hostvars, trays,
                                  parent=converted.get("imex_domains_group") or parent, max_nodes=10 ** 6,
                                  allow_mixed_families=True, driver_version=None, require_declared_size=False)
        if built["model"]:
            model = built["model"]
            names = sorted({model["host_domain"][tray] for tray in trays if tray in model["host_domain"]})
            return {name: {"trays": [node["host"] for node in model["domains"][name]["nodes"]],
                           "addresses": list(model["domains"][name]["addresses"])} for name in names}
        domains = {}
        for tray in trays:
            name = self._lenient(hostvars, tray, ("imex_domain",)).get("imex_domain")
            if isinstance(name, str) and name:
                domains.setdefault(name, {"trays": [], "addresses": []})["trays"].append(tray)
        return dict(sorted(domains.items()))


def _role_defaults():
    try:
        with open(ROLE_DEFAULTS, encoding="utf-8") as handle:
            return yaml.safe_load(handle) or {}
    except (OSError, yaml.YAMLError):
        return {}


def _earlier_reports(report_dir, names, the_run_id):
    """The reports this run wrote before it stopped (a refused stage registers no plan to hold them)."""
    found = []
    for name in names:
        try:
            with open(os.path.join(report_dir, "%s.json" % name), encoding="utf-8") as handle:
                report = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(report, dict) and report.get("run_id") == the_run_id and report.get("domain") == name:
            found.append({key: value for key, value in report.items()
                          if key not in ("run_id", "generated_at", "collection_version")})
    return found
