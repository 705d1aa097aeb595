# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An include whose file name is a template names a file that Ansible can load on every tray.

When Ansible loads an included file that holds a static import (``import_tasks``, ``import_role``), it
resolves the import's relative path by templating the name of each include above it again, with the play's
and the task's variables but without a host (ansible-core, playbook/helpers.py, load_list_of_tasks). A
registered variable, or a fact set on a tray, is undefined there: the include of a wave named by the plan
(``file: "{{ __imex_run.wave_files[__imex_wave_index] }}"``, in a loop) failed on every tray with
``'__imex_plan' is undefined``, while a test that passed the plan as extra vars (defined without a host)
passed. (An include without a loop comes back from the worker with its name already templated and escapes
this, but the rule does not lean on that.)

The rule, for every ``include_tasks``, ``import_tasks`` and ``include_role`` of every role's task and handler
files whose file name (``tasks_from`` for a role) is a template:

  - the template reads no registered variable, no fact set by ``set_fact``, and no name of the role's
    vars/main.yml that reads one (``__imex_run`` reads ``__imex_plan``);
  - no file it can name holds a static import. The files it can name are the role's task files that match
    its literal parts (``wave{{ x }}.yml``: ``wave*.yml``); a name that is a template alone
    (``{{ imex_post_restart_tasks }}``) names the operator's file when it reads role inputs only (an
    option of the role's defaults or argument_specs, defined without a host), and any of the role's task
    files when it reads anything else.

Name a literal file instead, and let the plan's fields gate what runs in it.
"""
from __future__ import annotations

import fnmatch
import glob
import os
import re

import jinja2
import jinja2.meta
import pytest

from ansible_collections.rackscale.imex.tests.unit.roles.role_files import ROOT, load, task_files, walk

ROLES = sorted(os.path.basename(path) for path in glob.glob(os.path.join(ROOT, "roles", "*")) if os.path.isdir(path))

_INCLUDES = {"ansible.builtin.include_tasks", "include_tasks", "ansible.builtin.import_tasks", "import_tasks"}
_ROLES = {"ansible.builtin.include_role", "include_role"}
_IMPORTS = {"ansible.builtin.import_tasks", "import_tasks", "ansible.builtin.import_role", "import_role"}
_SET_FACT = {"ansible.builtin.set_fact", "set_fact"}
# The variables Ansible defines without a host, whatever the role.
_MAGIC = {"role_path", "playbook_dir", "ansible_check_mode", "omit"}
_JINJA = jinja2.Environment()


def _reads(template):
    """The names a template reads."""
    return set(jinja2.meta.find_undeclared_variables(_JINJA.parse(template)))


def _strings(node):
    """Every string of a value (its mappings' values, its lists' items)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def role_names(folder):
    """(names undefined without a host, role inputs, loop variables) of the role in ``folder``."""
    registered, loop_vars = set(), {"item"}
    for path in task_files(folder):
        for task in walk(load(path)):
            if isinstance(task.get("register"), str):
                registered.add(task["register"])
            for action in _SET_FACT & set(task):
                if isinstance(task[action], dict):
                    registered.update(name for name in task[action] if name != "cacheable")
            control = task.get("loop_control") if isinstance(task.get("loop_control"), dict) else {}
            loop_vars.update(control[key] for key in ("loop_var", "index_var") if key in control)
    inputs = set()
    if os.path.exists(os.path.join(folder, "defaults", "main.yml")):
        inputs.update(load(os.path.join(folder, "defaults", "main.yml")) or {})
    if os.path.exists(os.path.join(folder, "meta", "argument_specs.yml")):
        specs = (load(os.path.join(folder, "meta", "argument_specs.yml")) or {}).get("argument_specs") or {}
        inputs.update(option for entry in specs.values() for option in (entry.get("options") or {}))
    wiring = {}
    if os.path.exists(os.path.join(folder, "vars", "main.yml")):
        wiring = {name: set().union(*[_reads(text) for text in _strings(value)])
                  for name, value in (load(os.path.join(folder, "vars", "main.yml")) or {}).items()}
    # A name of vars/main.yml that reads a registered one (or another such name) is undefined without a host
    # too. Repeated until nothing is added (vars may read each other in any order).
    hostbound = set(registered)
    while True:
        added = {name for name, reads in wiring.items() if name not in hostbound and reads & hostbound}
        if not added:
            break
        hostbound |= added
    return hostbound, inputs, loop_vars


def _imports(path):
    return [task.get("name") or path for task in walk(load(path)) if _IMPORTS & set(task)]


def _include_names(task):
    """(action, file name) of an include or import of a task, or None."""
    for action in _INCLUDES & set(task):
        value = task[action]
        return action, value.get("file") if isinstance(value, dict) else value
    for action in _ROLES & set(task):
        value = task[action] if isinstance(task[action], dict) else {}
        return action, value.get("tasks_from")
    return None


def include_problems(folder):
    """Why each include of the role in ``folder`` with a templated file name may not load on a tray."""
    hostbound, inputs, loop_vars = role_names(folder)
    own = glob.glob(os.path.join(folder, "tasks", "*.yml"))
    problems = []
    for path in task_files(folder):
        where = os.path.relpath(path, os.path.dirname(os.path.dirname(folder)))
        for task in walk(load(path)):
            found = _include_names(task)
            if not found or not isinstance(found[1], str) or "{{" not in found[1]:
                continue
            action, name = found
            reads = _reads(name)
            if reads & hostbound:
                problems.append("%s: %s %r reads %s, undefined without a host" % (
                    where, action, name, ", ".join(sorted(reads & hostbound))))
            skeleton = re.sub(r"\{\{.*?\}\}", "*", name)
            if skeleton.strip("*"):
                pattern = skeleton if skeleton.endswith((".yml", ".yaml")) else skeleton + ".yml"
                targets = [target for target in own if fnmatch.fnmatch(os.path.basename(target), os.path.basename(pattern))]
            elif reads <= inputs | loop_vars | _MAGIC:
                targets = []  # the operator's file
            else:
                targets = own
            for target in sorted(targets):
                if _imports(target):
                    problems.append("%s: %s %r can name %s, which holds static imports (%s)" % (
                        where, action, name, os.path.basename(target), "; ".join(_imports(target))))
    return problems


@pytest.mark.parametrize("role", ROLES)
def test_an_include_with_a_templated_name_loads_without_a_host(role):
    assert include_problems(os.path.join(ROOT, "roles", role)) == []


def test_the_role_files_are_seen():
    # The rule reads the include of the waves and the operator's hooks.
    names = {name for role in ROLES for path in task_files(os.path.join(ROOT, "roles", role))
             for task in walk(load(path)) for name in [_include_names(task)] if name}
    assert ("ansible.builtin.include_tasks", "wave.yml") in names
    assert ("ansible.builtin.include_tasks", "{{ imex_post_restart_tasks }}") in names
    assert ("ansible.builtin.include_tasks", "{{ imex_pre_restart_tasks }}") in names


def _role(tmp_path, main, files=None, variables=None):
    folder = tmp_path / "roles" / "x"
    for sub in ("tasks", "vars", "defaults"):
        (folder / sub).mkdir(parents=True)
    (folder / "tasks" / "main.yml").write_text(main)
    (folder / "defaults" / "main.yml").write_text("x_hook_tasks: ''\nx_suffix: a\n")
    (folder / "vars" / "main.yml").write_text(variables or 'x_run: "{{ x_plan.plan }}"\n')
    for name, text in (files or {}).items():
        (folder / "tasks" / name).write_text(text)
    return str(folder)


_PLAN = """
- name: Plan
  ansible.builtin.debug:
    msg: {}
  register: x_plan
"""
_WAVE = "- name: Refresh\n  ansible.builtin.import_tasks: refresh.yml\n"
_REFRESH = "- name: Say\n  ansible.builtin.debug:\n    msg: refreshed\n"


def test_the_include_of_a_wave_named_by_the_plan_is_refused(tmp_path):
    # The include as it was: the file named by the plan, per wave, in a loop; the wave's file imports.
    folder = _role(tmp_path, _PLAN + """
- name: Work wave by wave
  ansible.builtin.include_tasks:
    file: "{{ x_run.wave_files[x_wave_index] }}"
  loop: "{{ x_run.waves }}"
  loop_control:
    loop_var: x_wave
    index_var: x_wave_index
""", {"wave.yml": _WAVE, "refresh.yml": _REFRESH})
    problems = include_problems(folder)
    assert any("reads x_run, undefined without a host" in problem for problem in problems), problems
    assert any("can name wave.yml, which holds static imports" in problem for problem in problems), problems


def test_a_templated_name_whose_files_import_is_refused_even_from_a_role_input(tmp_path):
    folder = _role(tmp_path, "- name: Wave\n  ansible.builtin.include_tasks: \"wave_{{ x_suffix }}.yml\"\n",
                   {"wave_a.yml": _WAVE, "wave_b.yml": _REFRESH, "refresh.yml": _REFRESH})
    assert include_problems(folder) == [
        "roles/x/tasks/main.yml: ansible.builtin.include_tasks 'wave_{{ x_suffix }}.yml' can name wave_a.yml, "
        "which holds static imports (Refresh)"]


def test_a_fact_set_on_the_tray_is_undefined_without_a_host(tmp_path):
    folder = _role(tmp_path, """
- name: Pick
  ansible.builtin.set_fact:
    x_picked: refresh.yml
- name: Run it
  ansible.builtin.include_tasks: "{{ x_picked }}"
""", {"refresh.yml": _REFRESH})
    assert include_problems(folder) == [
        "roles/x/tasks/main.yml: ansible.builtin.include_tasks '{{ x_picked }}' reads x_picked, undefined without a host"]


def test_a_literal_name_and_an_operators_file_named_by_a_role_inputload(tmp_path):
    folder = _role(tmp_path, _PLAN + """
- name: Work wave by wave
  ansible.builtin.include_tasks:
    file: wave.yml
  loop: "{{ x_run.waves }}"
- name: Run the operator's tasks
  ansible.builtin.include_tasks: "{{ x_hook_tasks }}"
  vars:
    x_hook_plan: "{{ x_run }}"
""", {"wave.yml": _WAVE, "refresh.yml": _REFRESH})
    assert include_problems(folder) == []
