# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each role's defaults and argument specs say the same thing: one default per option.

defaults/main.yml is what Ansible uses; meta/argument_specs.yml is what validates and documents.
Every option of every entry point has its default in defaults/main.yml, with the same value
where the spec states one. No default computes: one that depends on other options (or on the run) is
null in defaults/main.yml and absent from the spec, whose description says what the plan decides. The imex role's option table in Python
(plugins/plugin_utils/_option_table.py) is checked against the spec by test_option_table.py.
"""
from __future__ import annotations

import os

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = sorted(name for name in os.listdir(os.path.join(ROOT, "roles"))
               if os.path.isfile(os.path.join(ROOT, "roles", name, "meta", "argument_specs.yml")))


def load(role, *parts):
    with open(os.path.join(ROOT, "roles", role, *parts)) as handle:
        return yaml.safe_load(handle) or {}


def test_the_roles_are_found():
    assert ROLES == ["imex", "imex_channels", "imex_slurm"]


def default_mismatches(defaults, entry_points):
    """Each way a role's defaults and the options of its entry points disagree, one sentence each. Every
    entry point is compared: an option that two of them state must hold its one default in each."""
    named = set()
    found = []
    for entry_point, spec in entry_points.items():
        for name, option in spec["options"].items():
            named.add(name)
            if name not in defaults:
                found.append("%s (%s): no default in defaults/main.yml" % (name, entry_point))
            elif isinstance(defaults[name], str) and "{{" in defaults[name]:
                found.append("%s (%s): its default computes (leave it null: the plan decides it)" % (name, entry_point))
            elif option.get("default") != defaults[name]:
                found.append("%s (%s): default %r in the spec, %r in defaults/main.yml"
                             % (name, entry_point, option.get("default"), defaults[name]))
    found.extend("%s: in defaults/main.yml, in no entry point" % name for name in sorted(set(defaults) - named))
    return found


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_an_option_and_every_option_has_its_default(role):
    assert default_mismatches(load(role, "defaults", "main.yml"),
                              load(role, "meta", "argument_specs.yml")["argument_specs"]) == []


def test_a_default_that_differs_in_one_entry_point_is_found():
    entry_points = {"main": {"options": {"imex_max_nodes": {"type": "int", "default": 18},
                                         "imex_channel0": {"type": "bool", "default": True}}},
                    "discover": {"options": {"imex_max_nodes": {"type": "int", "default": 16},
                                             "imex_discover_output": {"type": "str"}}}}
    defaults = {"imex_max_nodes": 18, "imex_channel0": "{{ imex_mode == 'static' }}", "imex_old": 1}
    assert default_mismatches(defaults, entry_points) == [
        "imex_channel0 (main): its default computes (leave it null: the plan decides it)",
        "imex_max_nodes (discover): default 16 in the spec, 18 in defaults/main.yml",
        "imex_discover_output (discover): no default in defaults/main.yml",
        "imex_old: in defaults/main.yml, in no entry point"]


@pytest.mark.parametrize("role", ROLES)
def test_every_variable_of_the_role_carries_its_prefix(role):
    names = list(load(role, "defaults", "main.yml")) + list(load(role, "vars", "main.yml"))
    stray = [name for name in names if not name.lstrip("_").startswith(role + "_")]
    assert stray == []


def test_the_validate_entry_point_takes_a_subset_of_the_converge_options():
    entry_points = load("imex", "meta", "argument_specs.yml")["argument_specs"]
    assert set(entry_points["validate"]["options"]) < set(entry_points["main"]["options"])
    for name, spec in entry_points["validate"]["options"].items():
        assert spec == entry_points["main"]["options"][name], name


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys without a word: a default written twice is refused here."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(key, deep=deep) for key, _value in node.value]
        repeated = sorted({str(key) for key in keys if keys.count(key) > 1})
        if repeated:
            raise yaml.constructor.ConstructorError(None, None, "key %s written twice" % ", ".join(repeated),
                                                    node.start_mark)
        return super().construct_mapping(node, deep=deep)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("parts", [("defaults", "main.yml"), ("vars", "main.yml"), ("meta", "argument_specs.yml")])
def test_no_option_or_default_is_written_twice_in_one_file(role, parts):
    path = os.path.join(ROOT, "roles", role, *parts)
    if os.path.isfile(path):
        with open(path) as handle:
            yaml.load(handle, Loader=_UniqueKeyLoader)


def test_a_key_written_twice_is_found():
    with pytest.raises(yaml.constructor.ConstructorError, match="imex_tls written twice"):
        yaml.load("imex_tls: false\nimex_mode: static\nimex_tls: true\n", Loader=_UniqueKeyLoader)
