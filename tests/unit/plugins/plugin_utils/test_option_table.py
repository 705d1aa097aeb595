# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The option table is the argument spec's, both ways, and what the role gathers and converts is derived from it."""
from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.rackscale.imex.plugins.plugin_utils._option_table import (
    DOMAIN,
    GATHERED,
    NOT_GATHERED,
    OPTIONS,
    Option,
    RUN,
    SCOPES,
    TRAY,
    convert_option,
    convert_options,
    kind_of,
    options_of,
)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _load(*parts):
    with open(os.path.join(ROOT, "roles", "imex", *parts)) as handle:
        return yaml.safe_load(handle)


ENTRY_POINTS = _load("meta", "argument_specs.yml")["argument_specs"]
SPEC = {}
for _entry_point in ENTRY_POINTS.values():
    SPEC.update(_entry_point["options"])
DEFAULTS = _load("defaults", "main.yml")
GATHERING = _load("vars", "main.yml")["__imex_options"]


def table_mismatches(table, spec):
    """Each way an option table and an argument spec's options disagree, one sentence each."""
    found = ["%s: in the argument spec, not in the table" % name for name in sorted(set(spec) - set(table))]
    found += ["%s: in the table, not in the argument spec" % name for name in sorted(set(table) - set(spec))]
    for name in sorted(set(spec) & set(table)):
        option = table[name]
        if option.type != spec[name]["type"]:
            found.append("%s: type %s in the table, %s in the argument spec" % (name, option.type, spec[name]["type"]))
        if option.scope not in SCOPES:
            found.append("%s: scope %s is none of %s" % (name, option.scope, ", ".join(SCOPES)))
        # What a raw option holds is the table's to say; no other type takes text to parse.
        if (option.type == "raw") != (option.parsed in ("list", "dict")) or (option.type != "raw" and option.parsed):
            found.append("%s: a %s option parsed as %s" % (name, option.type, option.parsed))
        if option.type == "list" and spec[name].get("elements") != "str":
            found.append("%s: a list of %s, converted as text" % (name, spec[name].get("elements")))
    return found


def gathering_mismatches(gathering, gathered, converge_options):
    """Each way the role's gathering (vars/main.yml) and the table's GATHERED disagree."""
    found = [] if list(gathering) == list(gathered) else ["the gathered options are not GATHERED, in its order"]
    found += ["%s is computed, not wired: %s" % (name, template) for name, template in gathering.items()
              if template != "{{ %s }}" % name]
    # Gathered are the converge entry point's options, but those the role reads otherwise (NOT_GATHERED).
    if sorted(gathered) != sorted(set(converge_options) - set(NOT_GATHERED)):
        found.append("GATHERED is not the converge entry point's options but NOT_GATHERED")
    return found


def test_the_table_is_the_argument_spec_both_ways():
    assert table_mismatches(OPTIONS, SPEC) == []
    assert set(NOT_GATHERED) < set(OPTIONS)


def test_the_role_gathers_each_option_of_the_table_on_each_tray_as_it_is():
    assert gathering_mismatches(GATHERING, GATHERED, ENTRY_POINTS["main"]["options"]) == []


def test_a_table_or_a_gathering_that_strays_from_the_spec_is_caught():
    seeded = dict(OPTIONS, imex_tsl=Option("bool", DOMAIN), imex_server_port=Option("str", DOMAIN),
                  imex_settings=Option("raw", DOMAIN), imex_mode=Option("str", "rack"),
                  imex_domain=Option("str", TRAY, "dict"))
    del seeded["imex_tls"]
    assert table_mismatches(seeded, SPEC) == [
        "imex_tls: in the argument spec, not in the table", "imex_tsl: in the table, not in the argument spec",
        "imex_domain: a str option parsed as dict", "imex_mode: scope rack is none of run, domain, tray",
        "imex_server_port: type str in the table, int in the argument spec",
        "imex_settings: a raw option parsed as None"]
    gathering = dict(GATHERING, imex_tls="{{ imex_tls | bool }}")
    del gathering["imex_mode"]
    assert gathering_mismatches(gathering, GATHERED, dict(ENTRY_POINTS["main"]["options"], imex_new={})) == [
        "the gathered options are not GATHERED, in its order", "imex_tls is computed, not wired: {{ imex_tls | bool }}",
        "GATHERED is not the converge entry point's options but NOT_GATHERED"]


def test_the_scopes_are_those_the_run_checks():
    assert options_of(DOMAIN) == ("imex_mode", "imex_channels", "imex_settings", "imex_server_port", "imex_cmd_port",
                                  "imex_cmd_bind_own_address", "imex_tls", "imex_tls_target_override", "imex_node_names")
    assert len(options_of(RUN)) == 20 and "imex_trays_out_of_service" in options_of(RUN)
    assert len(options_of(TRAY)) == len(OPTIONS) - 20 - 9 and "imex_node_index" in options_of(TRAY)
    with pytest.raises(ValueError, match="scope 'rack'"):
        options_of("rack")


# Null: none given, the plan decides it (plan/defaults.py).
@pytest.mark.parametrize("name", [name for name in GATHERED if DEFAULTS[name] is not None])
def test_every_default_is_already_of_its_type(name):
    """The role's own defaults convert to themselves: the converter and the defaults agree on each type."""
    converted, problem = convert_option(name, DEFAULTS[name])
    assert problem is None
    assert converted == DEFAULTS[name]
    expected = {"bool": bool, "int": int, "str": str, "list": list, "dict": dict}[kind_of(name)]
    # A boolean is an int to Python, never a whole number here.
    assert isinstance(converted, expected) and (expected is bool or not isinstance(converted, bool))


# --- the converter, at the boundary: one example per type from -e or an AWX survey ----------------

TEXT_GIVEN = {"bool": ("yes", True), "int": (" 30 ", 30), "str": (580, "580"),
              "list": ('["tray1"]', ["tray1"]), "dict": ("LOG_LEVEL: 2", {"LOG_LEVEL": 2})}


@pytest.mark.parametrize("name", sorted(GATHERED))
def test_every_gathered_option_given_as_text_is_converted_to_its_type(name):
    given, converted = TEXT_GIVEN[kind_of(name)]
    if name == "imex_channels":
        given, converted = "[{channel: 5}]", [{"channel": 5}]
    assert convert_option(name, given) == (converted, None)


@pytest.mark.parametrize(("name", "given", "kind"), [
    ("imex_tls", "maybe", "boolean"), ("imex_tls", "", "boolean"), ("imex_rolling", 2, "boolean"),
    ("imex_server_port", "5e4", "whole number"), ("imex_server_port", True, "whole number"),
    ("imex_settings", "[1]", "mapping"), ("imex_trays_out_of_service", "tray1: x", "list"),
])
def test_a_value_not_of_its_type_is_named_with_its_option(name, given, kind):
    assert convert_option(name, given) == (given, "%s = %r is not a %s" % (name, given, kind))


@pytest.mark.parametrize(("given", "number"), [("30", 30), (" 30 ", 30), ("30.0", 30), ("30.", 30), (30.0, 30), ("+5", 5),
                                               (30, 30), ("-1", -1)])
def test_a_whole_number_is_taken_as_yaml_e_and_awx_give_it(given, number):
    assert convert_option("imex_lock_wait_s", given) == (number, None)


@pytest.mark.parametrize("given", ["30.5", 30.5, "5\n", "²", "٥", "５", "1e3", "0x10", "", True, "30,0"])
def test_anything_else_where_a_whole_number_is_needed_is_refused_naming_the_option(given):
    assert convert_option("imex_lock_wait_s", given) == (given, "imex_lock_wait_s = %r is not a whole number" % given)


@pytest.mark.parametrize("blank", ["", " ", "\n", "null", None])
def test_a_blank_or_null_list_or_mapping_is_empty(blank):
    collections = sorted(name for name in OPTIONS if kind_of(name) in ("dict", "list"))
    assert collections == ["imex_channels", "imex_settings", "imex_trays_out_of_service"]
    for name in collections:
        assert convert_option(name, blank) == ({} if kind_of(name) == "dict" else [], None), name


def test_a_null_scalar_stays_null_and_an_option_the_table_lacks_passes_unchanged():
    assert convert_option("imex_server_port", None) == (None, None)
    assert convert_option("imex_tls", None) == (None, None)
    assert convert_option("imex_something_new", {"a": 1}) == ({"a": 1}, None)
    assert kind_of("imex_config_path") == "str"


def test_convert_options_converts_each_and_names_every_bad_one():
    options, problems = convert_options({"imex_tls": "yes", "imex_server_port": "50100", "imex_channels": "",
                                         "imex_cmd_port": "fifty", "imex_rolling": "sometimes"})
    assert options == {"imex_tls": True, "imex_server_port": 50100, "imex_channels": [],
                       "imex_cmd_port": "fifty", "imex_rolling": "sometimes"}
    assert problems == ["imex_cmd_port = 'fifty' is not a whole number", "imex_rolling = 'sometimes' is not a boolean"]
