# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The house rules that a grep can check: what ships to the trays, and what each role may read."""
from __future__ import annotations

import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLUGINS = os.path.join(ROOT, "plugins")
IMPORT = re.compile(r"^from ansible_collections\.rackscale\.imex\.plugins\.(module_utils|plugin_utils)"
                    r"(?:\.(\w+))? import (.+)$", re.M)


def _imports(path):
    """(package, module) pairs a file imports from the collection's utils."""
    with open(path) as handle:
        text = handle.read()
    found = set()
    for package, module, names in IMPORT.findall(text):
        if module:
            found.add((package, module))
        else:
            found.update((package, name.strip()) for name in names.split(","))
    return found


def _python_files(folder):
    return sorted(os.path.join(PLUGINS, folder, name) for name in os.listdir(os.path.join(PLUGINS, folder))
                  if name.endswith(".py") and name != "__init__.py")


def test_every_module_util_is_used_by_a_module_that_runs_on_the_trays():
    reached, todo = set(), _python_files("modules")
    while todo:
        for package, module in _imports(todo.pop()):
            assert package == "module_utils", "a module imports controller code (plugin_utils.%s)" % module
            if module not in reached:
                reached.add(module)
                todo.append(os.path.join(PLUGINS, "module_utils", module + ".py"))
    shipped = {os.path.basename(path)[:-3] for path in _python_files("module_utils")}
    assert shipped - reached == set(), "module_utils files no module imports: move them to plugin_utils"


def _role_text(role):
    texts = []
    for folder, _dirs, files in os.walk(os.path.join(ROOT, "roles", role)):
        for name in files:
            with open(os.path.join(folder, name)) as handle:
                texts.append(handle.read())
    return "\n".join(texts)


def test_no_role_reads_another_roles_internal_variables():
    imex, channels = _role_text("imex"), _role_text("imex_channels")
    assert re.findall(r"__imex_channels_\w+", imex) == []
    assert [name for name in re.findall(r"__imex_\w+", channels) if not name.startswith("__imex_channels_")] == []


def test_no_plugin_reads_the_inventory_behind_hostvars():
    """The group tree comes from the vars plugin group_tree, not from ansible-core's private objects."""
    readers = []
    for folder in ("filter", "action", "plugin_utils", "module_utils", "modules", "vars"):
        for path in _python_files(folder):
            with open(path) as handle:
                if "_inventory" in handle.read():
                    readers.append(os.path.relpath(path, ROOT))
    assert readers == []


def test_the_imex_role_decides_nothing_in_jinja():
    """Every decision is the plan's: no other tray's registers pulled together in Jinja, and
    vars/main.yml holds constants and wiring only (no filters)."""
    role = _role_text("imex")
    assert "map('extract', hostvars" not in role and 'map("extract", hostvars' not in role
    with open(os.path.join(ROOT, "roles", "imex", "vars", "main.yml")) as handle:
        expressions = re.findall(r"\{\{(.*?)\}\}", handle.read())
    assert [expression for expression in expressions if "|" in expression] == []


def test_the_retired_internal_filters_stay_retired():
    """An operator's plugin list shows only what an operator can use: the roles' glue is gone."""
    shipped = sorted(name for name in os.listdir(os.path.join(PLUGINS, "filter")) if not name.startswith("__"))
    assert shipped == ["imex_domain.py", "imex_domain_model.yml"]
