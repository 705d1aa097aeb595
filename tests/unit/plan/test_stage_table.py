# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stage table (plugins/plugin_utils/plan/stages.py) against what it is the one declaration of: the role's
imex_plan tasks and registers, the action that dispatches from it, the records of a stopped run, and the public
``stopped_at`` values of reports, artifacts and gauges."""
from __future__ import annotations

import glob
import os
import re

import yaml

from ansible_collections.rackscale.imex.plugins.action import imex_plan as action_plugin
from ansible_collections.rackscale.imex.plugins.plugin_utils import _run_record
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import stages

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# Where a run can stop, as reports, artifacts and the node_exporter gauges name it: public, never renamed. In the
# order a run reaches them: the read of each tray comes before the locks (a run with nothing to do takes none).
PUBLIC_STOPPED_AT = ("arguments", "preflight", "read", "gate", "lock", "channels", "write", "restart", "proof", "run")


def _task_files():
    return glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml")) + glob.glob(
        os.path.join(ROOT, "roles", "*", "handlers", "*.yml")) + glob.glob(
        os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True)


def _tasks(node):
    """Every task of a task file or playbook, blocks and plays opened."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            yield from _tasks(node.get(key))


def _plan_tasks():
    for path in _task_files():
        with open(path, encoding="utf-8") as handle:
            for task in _tasks(yaml.safe_load(handle)):
                if "rackscale.imex.imex_plan" in task:
                    yield os.path.relpath(path, ROOT), task


def test_the_public_stopped_at_values_stay_as_they_are():
    assert stages.RUN_STAGE_NAMES == PUBLIC_STOPPED_AT
    assert _run_record.STAGES == PUBLIC_STOPPED_AT
    assert {stage.stopped_at for stage in stages.STAGES} <= set(PUBLIC_STOPPED_AT)
    # Where a refusal of each of the plan's stages stops the run, as the records have always said it.
    assert {name: _run_record.stage_of({"action": "imex_plan", "args": {"stage": name}}) for name in stages.BY_NAME} == {
        "arguments": "arguments", "preflight": "preflight", "read": "gate", "reread": "gate", "restart": "restart",
        "guard": "restart",
        "verdicts": "proof", "discover": "run", "channels": "channels", "stopped": "run"}


def test_the_records_of_a_stopped_run_take_the_stage_of_each_register_from_the_table():
    assert _run_record.REGISTER_STAGES == stages.REGISTER_STAGES == {
        "__imex_locks": "lock", "__imex_lock_release": "lock", "__imex_lock_left": "lock", "__imex_tray_info": "read", "__imex_nodes_result": "write",
        "__imex_config_result": "write", "__imex_tls_result": "write", "__imex_wave_status": "restart",
        "__imex_activity": "restart", "__imex_daemon_start": "restart", "__imex_validate_status": "proof",
        "__imex_slurm_probe": "proof", "__imex_daemon_logs": "proof"}
    assert _run_record.PLAN_STAGES == stages.STOPPED_AT
    assert set(stages.BY_NAME["stopped"].reads.values()) == set(stages.REGISTER_STAGES)


def test_each_stage_is_a_module_of_its_own_named_as_the_design_names_it():
    for stage in stages.STAGES:
        assert stage.decide.__module__.rsplit(".", 1)[-1] == stage.name, stage


def test_the_action_dispatches_every_stage_of_the_table_and_spells_no_register_itself():
    for stage in stages.STAGES:
        assert callable(getattr(action_plugin.ActionModule, "_" + stage.name, None)), stage.name
    with open(action_plugin.__file__, encoding="utf-8") as handle:
        source = handle.read()
    assert re.findall(r"[\"']__imex_\w+", source) == []
    # The action's own stage methods are those of the table, and no other.
    assert {name[1:] for name in re.findall(r"def (_[a-z]+)\(self, stage, ", source)} == set(stages.BY_NAME)


def test_the_role_calls_every_stage_of_the_table_and_no_other():
    called = {}
    for path, task in _plan_tasks():
        called.setdefault(task["rackscale.imex.imex_plan"]["stage"], []).append(path)
    assert set(called) == set(stages.BY_NAME), called


def test_each_imex_plan_task_registers_the_register_its_stage_declares():
    found = {}
    for path, task in _plan_tasks():
        stage = stages.BY_NAME[task["rackscale.imex.imex_plan"]["stage"]]
        if task.get("register") != stage.register:
            found["%s: %s" % (path, task.get("name"))] = (task.get("register"), stage.register)
    assert found == {}
    # The run's plan is carried by one register (the tasks and handlers read the plan of the stage before them
    # through it); every other stage has its own.
    assert {stage.name for stage in stages.STAGES if stage.register == stages.PLAN} == set(stages.AFTER) == {
        "preflight", "read", "reread", "restart", "verdicts"}
    others = [stage.register for stage in stages.STAGES if stage.register not in (stages.PLAN, None)]
    assert len(others) == len(set(others))


def test_where_a_run_can_stop_after_each_stage_of_its_plan_is_a_public_stage_at_or_after_the_stage():
    for name, after in stages.AFTER.items():
        assert after and set(after) <= set(PUBLIC_STOPPED_AT), name
    # The read follows the preflight; the channels and the first wave's writes follow the read's plan (and the locks
    # and the second read, where the run has something to do) and the reread's; the proof the verdicts.
    assert {name: after[0] for name, after in stages.AFTER.items()} == {
        "preflight": "read", "read": "channels", "reread": "channels", "restart": "restart", "verdicts": "proof"}
    assert set(stages.AFTER["read"]) == {"channels", "write", "lock", "read"}


def test_every_register_a_stage_reads_is_registered_or_set_by_the_role():
    written = set()
    for path in _task_files():
        with open(path, encoding="utf-8") as handle:
            for task in _tasks(yaml.safe_load(handle)):
                if isinstance(task.get("register"), str):
                    written.add(task["register"])
                facts = task.get("ansible.builtin.set_fact")
                if isinstance(facts, dict):
                    written.update(facts)
    read = {register for stage in stages.STAGES for register in stage.reads.values()} | {stages.PLAN}
    assert read <= written, sorted(read - written)
