# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every `when:` of every role's task and handler files reads; it does not decide. The plan decides (on the
controller, unit-tested stage by stage) and the tasks read its fields.

The rule, for each condition of a `when:` (its one string, or each item of its list, which Ansible ANDs):
after an optional ``not``, the condition is one of

    READ                      READ in READ              READ | length > 0
    READ is changed           READ is none              READ is not none

where READ is a name with attributes or indexes (``__imex_run.trays[inventory_hostname].restart``),
optionally ``| default(<literal>)``, whose name is

  - a plan variable: a name of the role's vars/main.yml that reads a plan register (``{{ __imex_plan.plan }}``)
    or another plan variable;
  - a module's outcome: a register of the role's tasks, or a name of vars/main.yml that reads registers only
    (what a module returned, which no plan can know before it ran);
  - a loop variable of the role (``loop_var``, ``item``), ``inventory_hostname`` or ``ansible_check_mode``;
  - a role input (an option of its meta/argument_specs.yml), read as it is: alone, never compared,
    measured or converted (``imex_skip_fabric_check | bool`` converts; the plan converts once).

No literal list or comparison (``imex_channels_mode in ['slurm', 'slurm_per_job']`` repeats the modes' table),
no ``!=``/``==``, no filter but ``default`` and the emptiness test.

``changed_when`` and ``failed_when`` follow the same rule, and may also join conditions with ``or`` (what the
module said, or what the plan predicts under --check).

A ``loop:`` reads one list, ``{{ READ }}``: a plan field (the wave's lists are fields indexed by the wave,
``__imex_run.wave_proofs[__imex_wave_index]``), a module's outcome, a loop variable or a constant of the role's
vars/main.yml; never a ``select``, ``selectattr``, ``flatten`` or other filter over them.
"""
from __future__ import annotations

import os
import re

import pytest

from ansible_collections.rackscale.imex.tests.unit.roles.role_files import ROOT, load, task_files, walk

TASK_FILES = [os.path.relpath(path, ROOT) for path in task_files()]
MAGIC = {"inventory_hostname", "ansible_check_mode", "item"}
_LITERAL = r"(?:'[^']*'|\"[^\"]*\"|\[\]|\{\}|none|None|false|true|\d+)"
_READ = r"(?P<%s>[A-Za-z_]\w*)(?:\.\w+|\[[\w.]+\])*(?:\s*\|\s*default\(" + _LITERAL + r"\))?"
_BARE = re.compile(r"^(?P<root>[A-Za-z_]\w*)$")
_FORMS = [re.compile(r"^%s$" % form) for form in (
    _READ % "root",
    (_READ % "root") + r"\s+in\s+" + (_READ % "other"),
    (_READ % "root") + r"\s*\|\s*length\s*>\s*0",
    (_READ % "root") + r"\s+is\s+(?:changed|none|not\s+none)",
)]
_JINJA_WORDS = {"not", "in", "is", "and", "or", "if", "else", "true", "false", "none", "True", "False", "None"}


def _roots(expression):
    """The names an expression starts its reads from (not attributes, filters, tests or literals)."""
    expression = re.sub(r"'[^']*'|\"[^\"]*\"", "''", expression)
    expression = re.sub(r"\bis\s+(?:not\s+)?\w+|\|\s*\w+|\.\w+", " ", expression)
    return set(re.findall(r"\b[A-Za-z_]\w*\b", expression)) - _JINJA_WORDS


def role_names(role):
    """(plan variables, module outcomes, role inputs) of a role, as the rule names them."""
    folder = os.path.join(ROOT, "roles", role)
    registers = set()
    for path in task_files(folder):
        for task in walk(load(path)):
            if isinstance(task.get("register"), str):
                registers.add(task["register"])
            loop_control = task.get("loop_control") if isinstance(task.get("loop_control"), dict) else {}
            registers.update(loop_control[key] for key in ("loop_var", "index_var") if key in loop_control)
    wiring = {}
    if os.path.exists(os.path.join(folder, "vars", "main.yml")):
        wiring = {name: value for name, value in (load(os.path.join("roles", role, "vars", "main.yml")) or {}).items()
                  if isinstance(value, str) and "{{" in value}
    plan, outcomes = set(), set(registers)
    # A name reads the plan when it reads a register's .plan or another plan variable; it is an outcome when
    # it reads registers alone. Repeated until nothing is added (vars may read each other in any order).
    while True:
        added = False
        for name, value in wiring.items():
            if name in plan or name in outcomes:
                continue
            expression = " ".join(re.findall(r"\{\{(.*?)\}\}", value, re.S)).strip()
            reads_plan = re.fullmatch(r"(\w+)\.plan(?:\.\w+|\[[\w.]+\])*", expression)
            if reads_plan and reads_plan.group(1) in registers or (
                    _FORMS[0].match(expression) and _FORMS[0].match(expression).group("root") in plan):
                plan.add(name)
                added = True
            elif _roots(expression) and _roots(expression) <= registers:
                outcomes.add(name)
                added = True
        if not added:
            break
    specs = load(os.path.join("roles", role, "meta", "argument_specs.yml"))["argument_specs"]
    inputs = {option for entry in specs.values() for option in (entry.get("options") or {})}
    return plan, outcomes, inputs


def condition_problem(condition, plan, outcomes, inputs):
    """Why one condition decides instead of reading (the rule above), or None."""
    if isinstance(condition, bool):
        return None
    text = " ".join(str(condition).split())
    if text.startswith("not "):
        text = text[4:].strip()
    bare = _BARE.match(text)
    if bare and bare.group("root") in inputs:
        return None
    for form in _FORMS:
        found = form.match(text)
        if found:
            names = [found.group("root")] + ([found.group("other")] if "other" in found.groupdict() else [])
            unread = [name for name in names if name not in plan | outcomes | MAGIC]
            if not unread:
                return None
            return "%s is neither a plan field nor a module's outcome%s" % (
                ", ".join(unread), " (a role input is read alone)" if set(unread) & inputs else "")
    return "it computes (the rule allows a read, READ in READ, READ | length > 0, READ is changed/none)"


def when_problems(path, plan, outcomes, inputs):
    """Every condition of a task file that decides, as '<task>: <keyword>: <condition>: <why>'."""
    problems = []
    for task in walk(load(path)):
        for keyword in ("when", "changed_when", "failed_when"):
            if keyword not in task:
                continue
            conditions = task[keyword] if isinstance(task[keyword], list) else [task[keyword]]
            for condition in conditions:
                parts = [condition]
                if keyword != "when" and isinstance(condition, str):
                    parts = re.split(r"\s+or\s+", " ".join(condition.split()))
                for part in parts:
                    problem = condition_problem(part, plan, outcomes, inputs)
                    if problem:
                        problems.append("%s: %s: %s: %s" % (task.get("name", "?"), keyword, condition, problem))
    return problems


def role_constants(role):
    """The names of a role's vars/main.yml that hold no template of their own (lists and mappings of wiring)."""
    path = os.path.join("roles", role, "vars", "main.yml")
    if not os.path.exists(os.path.join(ROOT, path)):
        return set()
    return {name for name, value in (load(path) or {}).items() if not isinstance(value, str)}


def loop_problem(loop, plan, outcomes, constants):
    """Why a ``loop:`` computes instead of reading one list (the rule above), or None."""
    text = " ".join(str(loop).split())
    template = re.fullmatch(r"\{\{\s*(.*?)\s*\}\}", text)
    read = _FORMS[0].match(template.group(1)) if template else None
    if not read:
        return "it computes (a loop reads one list: {{ READ }})"
    if read.group("root") not in plan | outcomes | MAGIC | constants:
        return "%s is neither a plan field, a module's outcome nor a constant of the role" % read.group("root")
    return None


# The older loop keywords (with_<lookup>), told apart from module arguments such as with_logs.
_WITH_LOOP = re.compile(r"^with_(?:items|list|dict|indexed_items|flattened|nested|together|sequence|subelements|"
                        r"fileglob|lines|first_found|random_choice|cartesian|inventory_hostnames)$")


def loop_problems(path, plan, outcomes, constants):
    """Every loop of a task file that computes, as '<task>: <keyword>: <loop>: <why>'."""
    problems = []
    for task in walk(load(path)):
        for keyword in [key for key in task if key == "loop" or _WITH_LOOP.match(str(key))]:
            problem = "use loop:" if keyword != "loop" else loop_problem(task[keyword], plan, outcomes, constants)
            if problem:
                problems.append("%s: %s: %s: %s" % (task.get("name", "?"), keyword, task[keyword], problem))
    return problems


def test_every_role_task_and_handler_file_is_checked():
    roles = {path.split(os.sep)[1] for path in TASK_FILES}
    assert roles == set(os.listdir(os.path.join(ROOT, "roles")))
    assert len(TASK_FILES) >= 3 * len(roles) - 2, TASK_FILES


@pytest.mark.parametrize("path", TASK_FILES)
def test_every_when_reads_a_plan_field_a_module_outcome_or_a_role_input(path):
    plan, outcomes, inputs = role_names(path.split(os.sep)[1])
    assert when_problems(path, plan, outcomes, inputs) == []


@pytest.mark.parametrize("path", TASK_FILES)
def test_every_loop_reads_one_plan_field_module_outcome_or_constant(path):
    role = path.split(os.sep)[1]
    plan, outcomes, _inputs = role_names(role)
    assert loop_problems(path, plan, outcomes, role_constants(role)) == []


@pytest.mark.parametrize(("loop", "why"), [
    ("{{ __imex_wave | select('in', __imex_run.prove_now) | list }}", "it computes"),
    ("{{ __imex_locks.results | default([]) | selectattr('lock', 'defined') | list }}", "it computes"),
    ("{{ __imex_run.waves | flatten }}", "it computes"),
    ("{{ imex_channels }}", "neither a plan field"),
    ("{{ __imex_run.wave_proofs[__imex_wave_index] }}", None),
    ("{{ __imex_run.probe_now | default([]) }}", None),
    ("{{ __imex_tls_files }}", None),
])
def test_a_computing_loop_is_refused_and_a_read_passes(loop, why):
    plan, outcomes, _inputs = role_names("imex")
    problem = loop_problem(loop, plan, outcomes, role_constants("imex"))
    assert problem is None if why is None else why in problem


def test_a_seeded_computing_loop_in_a_task_file_is_found(tmp_path):
    seeded = tmp_path / "seeded.yml"
    seeded.write_text(
        "- name: Reads the plan\n  ansible.builtin.debug:\n  loop: \"{{ __imex_run.wave_proofs[__imex_wave_index] }}\"\n"
        "- name: Selects\n  block:\n    - name: Inside a block\n      ansible.builtin.debug:\n"
        "      loop: \"{{ __imex_wave | select('in', __imex_run.prove_now) | list }}\"\n"
        "- name: Old style\n  ansible.builtin.debug:\n  with_items: \"{{ __imex_run.explain }}\"\n", encoding="utf-8")
    assert [problem.split(": ")[:2] for problem in loop_problems(str(seeded), *role_names("imex")[:2],
                                                                 role_constants("imex"))] == [
        ["Inside a block", "loop"], ["Old style", "with_items"]]


def test_the_plan_variables_are_found():
    assert {"__imex_run", "__imex_tray", "__imex_domain"} <= role_names("imex")[0]
    assert {"__imex_channels_owned", "__imex_channels_boot", "__imex_channels_reboot"} <= role_names("imex_channels")[0]
    assert "__imex_channels_channel0_result" in role_names("imex_channels")[1]


# The computing conditions the plan took over, each refused by the rule.
@pytest.mark.parametrize(("role", "condition", "why"), [
    ("imex", "imex_skip_fabric_check | bool", "it computes"),
    ("imex", "imex_pre_restart_tasks | length > 0", "a role input is read alone"),
    ("imex", "__imex_wave != __imex_run.waves | first", "it computes"),
    ("imex", "__imex_run.locks | selectattr('domain', 'in', __imex_wave) | list", "it computes"),
    ("imex", "ansible_connection | default('ssh') != 'local'", "it computes"),
    ("imex", "imex_mode == 'slurm_per_job'", "it computes"),
    ("imex", "__imex_tray.restart and not __imex_tray.stopped", "it computes"),
    ("imex_channels", "imex_channels_mode in ['slurm', 'slurm_per_job']", "it computes"),
    ("imex_channels", "imex_channels_extra | length > 0", "a role input is read alone"),
    ("imex_channels", "imex_channels_mode in __imex_channels_owned", "a role input is read alone"),
    ("imex_channels", "__imex_undeclared.restart", "neither a plan field nor a module's outcome"),
])
def test_a_computing_condition_is_refused(role, condition, why):
    assert why in condition_problem(condition, *role_names(role))


def test_a_seeded_computing_when_in_a_task_file_is_found(tmp_path):
    seeded = tmp_path / "seeded.yml"
    seeded.write_text(
        "- name: Reads the plan\n  ansible.builtin.debug:\n  when: __imex_tray.restart\n"
        "- name: Decides\n  block:\n    - name: Inside a block\n      ansible.builtin.debug:\n"
        "      when:\n        - __imex_tray.restart\n        - imex_mode in ['slurm', 'slurm_per_job']\n", encoding="utf-8")
    assert when_problems(str(seeded), *role_names("imex")) == [
        "Inside a block: when: imex_mode in ['slurm', 'slurm_per_job']: it computes (the rule allows a read, "
        "READ in READ, READ | length > 0, READ is changed/none)"]


def test_a_seeded_computing_changed_when_is_found_and_an_or_of_reads_is_not(tmp_path):
    seeded = tmp_path / "seeded.yml"
    seeded.write_text(
        "- name: Predicted\n  ansible.builtin.debug:\n  changed_when: __imex_daemon_start.changed or __imex_tray.stop\n"
        "- name: Decides\n  ansible.builtin.debug:\n  failed_when: false\n"
        "  changed_when: __imex_daemon_start.changed or (ansible_check_mode and __imex_tray.restart)\n",
        encoding="utf-8")
    assert [problem.split(": ")[:2] for problem in when_problems(str(seeded), *role_names("imex"))] == [
        ["Decides", "changed_when"]]


@pytest.mark.parametrize("condition", [
    "__imex_tray.write", "not __imex_tray.stop", "inventory_hostname in __imex_run.out_of_service",
    "__imex_tray.domain in __imex_wave", "__imex_run.probe_skipped | default([]) | length > 0",
    "__imex_daemon_start is changed", "__imex_daemon_start.msg | default('') | length > 0", "ansible_check_mode",
    True,
])
def test_a_reading_condition_passes(condition):
    assert condition_problem(condition, *role_names("imex")) is None
