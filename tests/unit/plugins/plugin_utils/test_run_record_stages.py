# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a stopped run stopped, from what the plan recorded (the stage it reached, a refusal's stopped_at)
(plugins/plugin_utils/_run_record.py)."""
from __future__ import annotations

import calendar

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils import _run_record
from ansible_collections.rackscale.imex.plugins.plugin_utils._run_record import (
    stage_of,
    stopped_record,
)

DOMAINS = {
    "rackA": {"trays": ["a1", "a2"], "addresses": ["198.18.1.11", "198.18.1.12"]},
    "rackB": {"trays": ["b1", "b2"], "addresses": ["198.18.2.11", "198.18.2.12"]},
}
UNREACHABLE = "Task failed: Failed to connect to the host via ssh: ssh: connect to host 198.18.1.11 port 22: timed out"
NOW = calendar.timegm((2026, 11, 27, 19, 0, 0))
# The operator's own task (a pre-restart hook, say): the table knows neither its action nor a register.
HOOK = {"action": "community.general.slurm_drain", "name": "Drain the trays"}
WRITE = {"action": "ansible.builtin.copy", "name": "Install the prolog", "tags": ["imex_daemon"]}
TRAY_READ = {"action": "rackscale.imex.imex_tray_info", "register": "__imex_tray_info"}
LOCK_REFRESH = {"action": "rackscale.imex.imex_lock", "name": "Refresh the locks of this wave's domains"}
ASSERT = {"action": "ansible.builtin.assert", "name": "Stop unless every domain is healthy"}


@pytest.mark.parametrize(("task", "reached", "stage"), [
    # A task the table does not know stopped the run where the plan had brought it.
    (HOOK, "preflight", "lock"),
    (HOOK, "read", "channels"),
    (HOOK, "restart", "restart"),
    (HOOK, "verdicts", "proof"),
    # Before any plan, the task alone says.
    (HOOK, None, "run"),
    # Among the stages a run can stop at after the one it reached, the task says which.
    (TRAY_READ, "preflight", "read"),
    (WRITE, "read", "write"),
    (ASSERT, "verdicts", "proof"),
    # The next wave's lock and writes come after the verdicts of the one before.
    (LOCK_REFRESH, "verdicts", "lock"),
    (WRITE, "verdicts", "write"),
    # A task the table places before the stage the run reached cannot take the run back there.
    (TRAY_READ, "verdicts", "proof"),
    (LOCK_REFRESH, "read", "channels"),
])
def test_the_stage_of_a_failed_task_comes_from_the_stage_the_plan_reached(task, reached, stage):
    assert stage_of(task, {"failed": True, "msg": "x"}, reached) == stage


def test_a_refusal_of_the_plan_stopped_the_run_where_its_result_says():
    task = {"action": "rackscale.imex.imex_plan", "args": {"stage": "read"}, "run_once": True}
    assert stage_of(task, {"failed": True, "stopped_at": "gate"}, "preflight") == "gate"
    # Without a recorded stopped_at (a result registered by an older action), the table says.
    assert stage_of(task, {"failed": True}, "preflight") == "gate"


def _stage_of_a_stop(reached):
    record = stopped_record([("a1", HOOK, {"failed": True, "msg": "drain refused"})], {}, DOMAINS, reached=reached)
    return record["stage"]


def test_the_record_of_a_stop_takes_its_stage_from_the_recorded_stage():
    assert _stage_of_a_stop("restart") == "restart"
    assert _stage_of_a_stop("verdicts") == "proof"


def test_a_seeded_wrong_table_is_caught(monkeypatch):
    # Seeded: the table says a restart is followed by the proof. The record follows the table it is given, and
    # the test above would fail on it: the recorded stage is what decides.
    monkeypatch.setitem(_run_record.AFTER, "restart", ("proof",))
    assert _stage_of_a_stop("restart") == "proof"
    with pytest.raises(AssertionError):
        test_the_record_of_a_stop_takes_its_stage_from_the_recorded_stage()


def test_a_seeded_wrong_guess_of_the_task_cannot_move_the_stage_out_of_where_the_run_was(monkeypatch):
    # Seeded: the action table takes the tray read for the proof. After the preflight, the run was at its locks
    # or its read, never at its proof: the recorded stage keeps the record there.
    monkeypatch.setitem(_run_record.ACTION_STAGES, "rackscale.imex.imex_tray_info", "proof")
    assert stage_of({"action": "rackscale.imex.imex_tray_info"}, {"failed": True}, "preflight") == "lock"
    assert stage_of({"action": "rackscale.imex.imex_tray_info"}, {"failed": True}, None) == "proof"
