# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One class per imex_mode (plugins/plugin_utils/plan/modes.py): every mode the argument spec allows has one, and
nothing else on the controller tests a mode by its name."""
from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import TrayRead

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MODE_NAMES = ("static", "slurm", "slurm_per_job", "dra", "dra_host_managed")
# A test of a mode by its name: a comparison or membership of something called *mode*, a mode's name compared
# or listed, or a list of modes.
MODE_TEST = re.compile(r"\b[a-z_]*mode\b\s*(==|!=|not\s+in\b|in\b)"
                       r"|(==|!=|\bin\b)\s*[(\[]?\s*[\"'](%s)[\"']" % "|".join(MODE_NAMES)
                       + r"|\b[A-Z_]+_MODES\b|\bPER_JOB\b")


def _controller_files():
    found = glob.glob(os.path.join(ROOT, "plugins", "plugin_utils", "**", "*.py"), recursive=True)
    found += glob.glob(os.path.join(ROOT, "plugins", "action", "*.py"))
    return sorted(os.path.relpath(path, ROOT) for path in found)


def _mode_tests(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return [line.strip() for line in handle if MODE_TEST.search(line) and "SSL_TLS" not in line]


def test_the_boot_entries_the_plan_asks_after_are_where_the_channels_role_removes_them():
    with open(os.path.join(ROOT, "roles", "imex_channels", "vars", "main.yml"), encoding="utf-8") as handle:
        role_vars = yaml.safe_load(handle)
    assert role_vars["__imex_channels_boot_dir"] == modes.CHANNEL_BOOT_DIR
    assert {name: mode.read_presence() for name, mode in modes.MODES.items()} == {
        "static": [], "dra_host_managed": [], "slurm": [modes.CHANNEL_BOOT_DIR],
        "slurm_per_job": [modes.CHANNEL_BOOT_DIR], "dra": [modes.CHANNEL_BOOT_DIR]}


def test_every_mode_of_the_argument_spec_has_its_class():
    with open(os.path.join(ROOT, "roles", "imex", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        specs = yaml.safe_load(handle)
    choices = specs["argument_specs"]["main"]["options"]["imex_mode"]["choices"]
    assert sorted(modes.MODES) == sorted(choices) == sorted(MODE_NAMES)
    assert all(modes.of(name).name == name for name in MODE_NAMES)
    assert len({type(mode) for mode in modes.MODES.values()}) == len(MODE_NAMES)


def test_no_mode_is_tested_by_its_name_outside_the_mode_classes():
    found = {path: _mode_tests(path) for path in _controller_files() if not path.endswith("plan/modes.py")}
    assert {path: lines for path, lines in found.items() if lines} == {}


def test_the_check_finds_a_mode_tested_by_its_name():
    for line in ('if options["imex_mode"] == "dra":', "per_job = domain['mode'] in SLURM_MODES",
                 'if mode not in ("slurm", "slurm_per_job"):', 'host_daemon = name != "dra"'):
        assert MODE_TEST.search(line), line
    assert not MODE_TEST.search("if modes.of(domain.mode).per_job:")


@pytest.mark.parametrize(("state", "enabled", "handover"), [
    ("active", "enabled", True),       # the host daemon still runs: stop and mask it
    ("inactive", "disabled", True),    # stopped, not masked: something could start it again
    ("inactive", "masked", False),     # handed over already
    ("failed", "masked", False),
    ("active", "masked", True),        # masked under a running daemon: it still has to stop
    ("inactive", None, True),          # the read cannot tell: hand it over again (changes nothing if done)
])
def test_the_dra_mode_hands_the_daemon_over_unless_the_read_shows_it_stopped_and_masked(state, enabled, handover):
    raw = {"services": {"nvidia-imex": state}}
    if enabled is not None:
        raw["services_enabled"] = {"nvidia-imex": enabled}
    read = TrayRead.of(raw)
    assert modes.of("dra").handover(read, "nvidia-imex") is handover
    assert not any(modes.of(name).handover(read, "nvidia-imex") for name in MODE_NAMES if name != "dra")


def test_the_modes_that_leave_the_daemon_to_another_owner_read_its_enablement():
    assert {name for name, mode in modes.MODES.items() if mode.reads_enablement} == {"slurm_per_job", "dra"}
