# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan's records (plugins/plugin_utils/plan/records.py): every key the role's tasks read from the plan's
register is a declared field, the register round-trips through the records, and a key the records do not
declare is refused by name."""
from __future__ import annotations

import dataclasses
import glob
import os
import re

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import records
from ansible_collections.rackscale.imex.tests.unit.plan.scenario import Bed, Run

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# How the role's tasks name the plan (vars/main.yml): the run, this tray's part, its domain's part.
READS = {
    records.Run: re.compile(r"__imex_run\.(\w+)"),
    records.Domain: re.compile(r"(?:__imex_domain|__imex_run\.domains\[[^\]]+\])\.(\w+)"),
    records.Tray: re.compile(r"(?:__imex_tray|__imex_run\.trays\[[^\]]+\])\.(\w+)"),
}


def _fields(record):
    return {field.name for field in dataclasses.fields(record)}


def _role_text():
    text = ""
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "**", "*.yml"), recursive=True):
        with open(path, encoding="utf-8") as handle:
            text += handle.read()
    return text


@pytest.mark.parametrize("record", list(READS), ids=lambda record: record.__name__)
def test_every_key_the_tasks_read_is_a_declared_field(record):
    read = set(READS[record].findall(_role_text()))
    assert read, "the tasks read nothing of the %s: the pattern is wrong" % record.__name__
    assert read <= _fields(record), sorted(read - _fields(record))


def test_the_register_round_trips_through_the_records_at_every_stage():
    outcome = Run(Bed("healthy"), every={"imex_server_port": 50010}).run()
    assert [stage for stage, _plan in outcome.plans] == ["preflight", "read", "reread", "restart", "guard"]
    for _stage, plan in outcome.plans:
        assert records.to_register(records.from_register(plan)) == plan


def test_a_field_no_stage_has_reached_is_absent_from_the_register():
    outcome = Run(Bed("healthy")).run()
    after_preflight = dict(outcome.plans)["preflight"]
    assert "restart" not in after_preflight["domains"]["rack1"] and "write" not in after_preflight["trays"]["rack1-tray01"]
    assert "restart" in dict(outcome.plans)["restart"]["domains"]["rack1"]


@pytest.mark.parametrize(("where", "said"), [
    (lambda plan: plan.update(written_somewhere=True),
     "the plan has keys the plan does not declare: written_somewhere"),
    (lambda plan: plan["domains"]["rack1"].update(restart_now=True),
     "domain rack1 has keys the plan does not declare: restart_now"),
    (lambda plan: plan["trays"]["rack1-tray01"].update(write_prolog=True),
     "tray rack1-tray01 has keys the plan does not declare: write_prolog"),
])
def test_a_key_the_records_do_not_declare_is_refused_by_name(where, said):
    plan = dict(Run(Bed("healthy")).run().plans)["read"]
    where(plan)
    with pytest.raises(TypeError) as refused:
        records.from_register(plan)
    assert str(refused.value) == said


def test_the_tray_read_keeps_what_the_read_left_out_apart_from_what_it_set_to_null():
    read = records.TrayRead.of({"compute_apps": None, "fabric": {"state": "Completed"}})
    assert read.has("compute_apps") and read.compute_apps is None and not read.has("slurm")
    assert read.get("slurm", {}) == {} and read.raw["fabric"] == {"state": "Completed"}


@pytest.mark.parametrize("state, enabled, stopped", [
    ("inactive", "masked", True), ("failed", "disabled", True), ("active", "enabled", False),
    ("activating", None, False), (None, None, False)])
def test_the_tray_read_says_whether_a_unit_is_stopped_and_how_it_is_enabled(state, enabled, stopped):
    unit = "nvidia-imex.service"
    read = records.TrayRead.of({"services": {unit: state} if state else {},
                                **({"services_enabled": {unit: enabled}} if enabled else {})})
    assert read.stopped(unit) is stopped and read.enablement(unit) == enabled
    assert records.TrayRead.of({"services_enabled": None}).enablement(unit) is None
