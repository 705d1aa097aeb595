# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a no-change site.yml costs the controller, counted from the role's task files: the task results each tray
gets (every task it reaches, skipped ones included: each costs a worker and the tray's variables), and those of
the run_once tasks, which a run pays once whatever the number of trays.

The count follows Ansible's rules: a task reached by a tray gives it one result, whatever its loop (the items
are one result); a meta task gives one only when its ``when`` skips it (``flush_handlers`` without one gives
none); an imported file is part of its parent; an included file (``include_tasks``, ``include_role``) is one
result for the include, and its tasks are reached only by the trays whose ``when`` holds for the item (the file
name may be templated, per item); a run_once task is one result for the run, per inclusion of its file; tags
``never`` leave a task out. The plan is the one a converged 1 x 18 rack gets from its read and its status read
(every tray READY, nothing written), so that the conditions of the includes are evaluated as the run would.
"""
from __future__ import annotations

import os

import jinja2
import yaml

from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import all_ready, planned

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TASKS = os.path.join(ROOT, "roles", "imex", "tasks")
TRAYS = ["rack1-tray%02d" % number for number in range(1, 19)]
# The budget of a no-change run: each tray's own results, and every result of the run per tray on 1 x 18.
PER_TRAY_BUDGET = 5
PER_TRAY_ON_ONE_RACK = 6.0
# The gates of wave.yml (the channels' role, the write, the reload or restart): one result each on a tray that
# includes a wave without reaching any of them, the runner of a wave in which no tray has anything to do.
WAVE_GATES = 3

_JINJA = jinja2.Environment()
_INCLUDES = ("ansible.builtin.include_tasks", "include_tasks")
_IMPORTS = ("ansible.builtin.import_tasks", "import_tasks")
_ROLES = ("ansible.builtin.include_role", "include_role")
_META = ("ansible.builtin.meta", "meta")
_KEYWORDS = {"name", "when", "loop", "loop_control", "tags", "run_once", "register", "delegate_to", "vars",
             "notify", "changed_when", "failed_when", "ignore_unreachable", "no_log", "check_mode", "block",
             "rescue", "always", "apply"}


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or []


def _action(task):
    return next(key for key in task if key not in _KEYWORDS)


def _holds(task, variables):
    conditions = task.get("when", [])
    for condition in conditions if isinstance(conditions, list) else [conditions]:
        if isinstance(condition, bool):
            if not condition:
                return False
            continue
        if not _JINJA.compile_expression(str(condition))(**variables):
            return False
    return True


def _render(value, variables):
    return _JINJA.from_string(str(value)).render(**variables) if "{{" in str(value) else str(value)


def _loop_items(task, variables):
    """(loop variables) of each item of an include's loop, or one without a loop."""
    if "loop" not in task:
        return [{}]
    control = task.get("loop_control") or {}
    items = _JINJA.compile_expression(str(task["loop"]).strip()[2:-2])(**variables)
    return [{control.get("loop_var", "item"): item, **({control["index_var"]: index} if "index_var" in control else {})}
            for index, item in enumerate(items)]


class Count:
    """The results of one walk: {tray: n} and the run_once results (one per task and inclusion)."""

    def __init__(self):
        self.per_tray = {}
        self.run_once = set()
        self.names = {}

    def add(self, task, tray, inclusion):
        if task.get("run_once"):
            self.run_once.add((task.get("name"), _action(task), inclusion))
        else:
            self.per_tray[tray] = self.per_tray.get(tray, 0) + 1
            self.names.setdefault(tray, []).append(task.get("name"))


def walk(tasks, tray, variables, count, inclusion=(), folder=TASKS):
    """Count the results ``tray`` gets from ``tasks`` (a task file's list) with ``variables``."""
    for task in tasks:
        if "never" in (task.get("tags") or []):
            continue
        if "block" in task:
            walk(task["block"], tray, variables, count, inclusion, folder)
            walk(task.get("always") or [], tray, variables, count, inclusion, folder)
            continue
        action = _action(task)
        if action in _IMPORTS:
            walk(_load(os.path.join(folder, task[action])), tray, {**variables, **(task.get("vars") or {})}, count,
                 inclusion, folder)
            continue
        if action in _META:
            if "when" in task and not _holds(task, variables):
                count.add(task, tray, inclusion)
            continue
        count.add(task, tray, inclusion)
        if action in _INCLUDES or action in _ROLES:
            for item in _loop_items(task, variables):
                scope = {**variables, **item}
                if not _holds(task, scope):
                    continue
                assert action in _INCLUDES, "%s: a no-change tray includes the role %s" % (tray, task[action]["name"])
                target = task[action]["file"] if isinstance(task[action], dict) else task[action]
                name = _render(target, scope)
                walk(_load(os.path.join(folder, name)), tray, scope, count, inclusion + (name, repr(sorted(item.items()))),
                     folder)


def no_change_plan():
    """The plan of a converged 1 x 18 rack after its read and each wave's status read (every tray READY)."""
    _model, _options, plan = planned(domains={"rack1": TRAYS})
    for wave in plan["waves"]:
        plan = run_plan.restart.restart(plan, wave, {}, all_ready(plan, wave))
    return plan


def site_count(plan):
    """The results of a no-change site.yml on the trays of ``plan``: its first play's (on the controller), and the
    role's on every tray."""
    count = Count()
    first = _load(os.path.join(ROOT, "playbooks", "tasks", "check_parent.yml"))
    walk(first, "localhost", {}, count, ("check_parent",))
    count.per_tray.pop("localhost")
    count.run_once.update(("check_parent", index) for index in range(2))
    defaults = _load(os.path.join(ROOT, "roles", "imex", "defaults", "main.yml"))
    for tray in plan["trays"]:
        variables = dict(defaults, inventory_hostname=tray, ansible_check_mode=False, __imex_run=plan,
                         __imex_tray=plan["trays"][tray], __imex_domain=plan["domains"][plan["trays"][tray]["domain"]])
        walk(_load(os.path.join(TASKS, "main.yml")), tray, variables, count)
    return count


def test_a_no_change_run_costs_each_tray_at_most_its_budget_and_the_run_at_most_six_results_per_tray():
    plan = no_change_plan()
    count = site_count(plan)
    # The tray that runs the first wave's run_once tasks (a plan without wave_trays has none of its own).
    runner = (plan.get("wave_trays") or [[None]])[0][0]
    others = {tray: n for tray, n in count.per_tray.items() if tray != runner}
    # Every tray but the wave's runner alike: the options, the read, the leave of the trays out of service or
    # not reached, the wave.
    assert len(set(others.values())) == 1 and max(others.values()) <= PER_TRAY_BUDGET, count.names[TRAYS[-1]]
    # The runner includes wave.yml for the wave's run_once tasks and skips its gates.
    assert count.per_tray[runner] == max(others.values()) + WAVE_GATES, count.names[runner]
    assert count.per_tray[runner] <= PER_TRAY_BUDGET + WAVE_GATES, count.names[runner]
    total = sum(count.per_tray.values()) + len(count.run_once)
    assert total / len(TRAYS) <= PER_TRAY_ON_ONE_RACK, (total, len(count.run_once))


def test_the_count_sees_a_gate_added_for_every_tray(tmp_path):
    """A skipped include in every wave costs every tray of it a result (the count this budget guards)."""
    plan = no_change_plan()
    # Every tray a worker of the wave with nothing to write: each reaches the wave's gates, as before the plan
    # gave each wave its trays.
    plan["wave_trays"] = [list(TRAYS)]
    count = site_count(plan)
    assert count.per_tray[TRAYS[-1]] == site_count(no_change_plan()).per_tray[TRAYS[-1]] + WAVE_GATES, count.names[TRAYS[-1]]
