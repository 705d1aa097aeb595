# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role's argument spec applied on the controller before the role starts: one line per error."""
from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.rackscale.imex.plugins.plugin_utils._arguments import (
    argument_problems,
    entry_point_options,
)

SPEC_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "imex", "meta",
                         "argument_specs.yml")


@pytest.fixture(scope="module")
def main_options():
    with open(SPEC_FILE, encoding="utf-8") as handle:
        return entry_point_options(yaml.safe_load(handle), "main")


def test_one_error_shared_by_every_tray_is_said_once_naming_them(main_options):
    problems = argument_problems(main_options, {"t1": {"imex_mode": "bogus"}, "t2": {"imex_mode": "bogus"}})
    assert problems == ["value of imex_mode must be one of: static, slurm, slurm_per_job, dra, dra_host_managed, "
                        "got: bogus (trays t1, t2)"]


def test_values_as_strings_from_the_command_line_are_accepted_as_the_role_accepts_them(main_options):
    values = {"imex_backup": "yes", "imex_lock_wait_s": "30", "imex_settings": '{"LOG_LEVEL":"4"}',
              "imex_mode": "slurm_per_job"}
    assert argument_problems(main_options, {"t1": values}) == []


def test_each_tray_is_named_with_its_own_error_and_long_lists_are_cut(main_options):
    values = {"t%d" % i: {"imex_lock_wait_s": "soon"} for i in range(1, 9)}
    values["t9"] = {"imex_lock_wait_s": "later"}
    problems = argument_problems(main_options, values)
    assert len(problems) == 2
    assert problems[0].endswith("(trays t1, t2, t3, t4, t5, t6 and 2 more)") and "'soon'" in problems[0]
    assert problems[1].endswith("(tray t9)") and "'later'" in problems[1]


def test_variables_that_are_not_options_are_not_judged(main_options):
    assert argument_problems(main_options, {"t1": {"ansible_host": "198.18.1.11", "imex_address": "x"}}) == []


def test_an_unknown_entry_point_is_named():
    with pytest.raises(ValueError, match="no argument spec entry point 'nope' .*main"):
        entry_point_options({"argument_specs": {"main": {"options": {}}}}, "nope")


@pytest.mark.parametrize("value", ["30.5", 30.5, "5\n", "²", "٥", "５"])
def test_a_whole_number_option_refuses_fractions_and_digits_other_than_ascii(main_options, value):
    assert argument_problems(main_options, {"t1": {"imex_lock_wait_s": value}}) == [
        "imex_lock_wait_s = %r is not a whole number (tray t1)" % (value,)]


@pytest.mark.parametrize("value", ["30", "30.0", 30.0, 30])
def test_a_whole_number_given_as_an_awx_float_or_text_passes(main_options, value):
    assert argument_problems(main_options, {"t1": {"imex_lock_wait_s": value}}) == []


@pytest.mark.parametrize("entry_point", ["main", "validate"])
def test_a_blank_string_passes_for_every_dict_and_list_option(entry_point):
    with open(SPEC_FILE, encoding="utf-8") as handle:
        options = entry_point_options(yaml.safe_load(handle), entry_point)
    collections = [name for name, spec in options.items()
                   if spec.get("type") in ("dict", "list") or isinstance(spec.get("default"), (dict, list))]
    assert collections
    assert argument_problems(options, {"t1": {name: "" for name in collections}}) == []
