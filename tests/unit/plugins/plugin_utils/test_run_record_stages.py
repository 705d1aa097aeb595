# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a stopped run stopped, from what the plan recorded (the stage it reached, a refusal's stopped_at), and
the locks its release left on a tray it did not reach (plugins/plugin_utils/_run_record.py)."""
from __future__ import annotations

import calendar
import os

import pytest
import yaml

from ansible_collections.rackscale.imex.plugins.plugin_utils import _run_record
from ansible_collections.rackscale.imex.plugins.plugin_utils._run_outputs import render_summary
from ansible_collections.rackscale.imex.plugins.plugin_utils._run_record import (
    artifacts,
    locks_left,
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
TAKE = {"action": "rackscale.imex.imex_lock", "register": "__imex_locks"}
ASSERT = {"action": "ansible.builtin.assert", "name": "Stop unless every domain is healthy"}


@pytest.mark.parametrize(("task", "reached", "stage"), [
    # A task the table does not know stopped the run where the plan had brought it.
    (HOOK, "preflight", "read"),
    (HOOK, "read", "channels"),
    (HOOK, "restart", "restart"),
    (HOOK, "verdicts", "proof"),
    # Before any plan, the task alone says.
    (HOOK, None, "run"),
    # Among the stages a run can stop at after the one it reached, the task says which.
    (TRAY_READ, "preflight", "read"),
    (WRITE, "read", "write"),
    # Where the run has something to do, the read's plan is followed by the locks and the second read.
    (TAKE, "read", "lock"),
    (TRAY_READ, "read", "read"),
    (ASSERT, "verdicts", "proof"),
    # The next wave's lock and writes come after the verdicts of the one before.
    (LOCK_REFRESH, "verdicts", "lock"),
    (WRITE, "verdicts", "write"),
    # A task the table places before the stage the run reached cannot take the run back there.
    (TRAY_READ, "verdicts", "proof"),
    (TRAY_READ, "reread", "channels"),
    (TAKE, "reread", "channels"),
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
    # Seeded: the action table takes the tray read for the proof. After the preflight, the run was at its read,
    # never at its proof: the recorded stage keeps the record there.
    monkeypatch.setitem(_run_record.ACTION_STAGES, "rackscale.imex.imex_tray_info", "proof")
    assert stage_of({"action": "rackscale.imex.imex_tray_info"}, {"failed": True}, "preflight") == "read"
    assert stage_of({"action": "rackscale.imex.imex_tray_info"}, {"failed": True}, None) == "proof"


# --- the locks a release left --------------------------------------------------------------------

def taken(domain, holder, stale_after=3600, since=NOW - 600):
    """A lock take's registered item result."""
    return {"item": {"domain": domain, "holder": holder}, "changed": True, "owner": "run-1",
            "lock": {"owner": "run-1", "since": since, "stale_after": stale_after}}


def release(*items):
    """The registered result of the release loop, as ignore_unreachable leaves it."""
    return {"changed": False, "unreachable": any(item.get("unreachable") for item in items),
            "msg": "All items completed", "results": list(items)}


def released(lock):
    return {"item": lock, "changed": False, "lock": None}


def not_reached(lock, holder):
    return {"item": lock, "unreachable": True, "msg": UNREACHABLE.replace("198.18.1.11", holder),
            "_ansible_delegated_vars": {"ansible_delegated_host": holder}}


def test_a_lock_whose_holder_the_release_did_not_reach_is_named_with_when_it_goes_stale():
    result = release(not_reached(taken("rackA", "a1"), "a1"), released(taken("rackB", "b1")))
    # Registered on every tray of the play (run_once): one lock.
    left = locks_left({"a2": result, "b1": result}, stale_after_s=7200, now=NOW)
    assert left == [{"domain": "rackA", "holder": "a1", "why": UNREACHABLE.replace("198.18.1.11", "a1"),
                     # The lock's own stale_after, over the option's.
                     "stale_after_s": 3600, "stale_by": "2026-11-27 20:00:00 UTC"}]


def test_a_lock_record_without_stale_after_takes_the_run_s_option_and_zero_never_goes_stale():
    old = taken("rackA", "a1")
    del old["lock"]["stale_after"]
    assert locks_left({"a2": release(not_reached(old, "a1"))}, stale_after_s=1800, now=NOW)[0]["stale_by"] == (
        "2026-11-27 19:30:00 UTC")
    never = locks_left({"a2": release(not_reached(taken("rackA", "a1", stale_after=0), "a1"))}, 1800, NOW)[0]
    assert (never["stale_after_s"], never["stale_by"]) == (0, None)
    assert "never goes stale" in _run_record.lock_left_reason(never)


def test_a_release_that_reached_every_holder_leaves_no_lock():
    assert locks_left({"a1": release(released(taken("rackA", "a1")))}, 3600, NOW) == []
    assert locks_left({"a1": {"skipped": True, "results": []}}, 3600, NOW) == []
    assert locks_left(None, 3600, NOW) == []


LOCK_LEFT_TASK = {"action": "ansible.builtin.fail", "name": "Stop the run when its release left a lock on a tray it "
                  "did not reach", "register": "__imex_lock_left", "run_once": True}
LOCK_LEFT_MSG = "The release of the run's locks did not reach a lock tray; its lock stays until it goes stale."


def test_a_run_that_proved_its_domains_and_left_a_lock_records_it_at_its_lock_stage():
    registered = {"__imex_lock_release": {"a1": release(not_reached(taken("rackA", "a2"), "a2"))}}
    # The stop that follows the release: after the verdicts, at the lock, as its register says.
    failures = [("a1", LOCK_LEFT_TASK, {"failed": True, "msg": LOCK_LEFT_MSG})]
    record = stopped_record(failures, registered, DOMAINS, judged=["rackA", "rackB"], reached="verdicts",
                            lock_stale_after_s=3600, now=NOW)
    assert (record["stage"], record["domains"], record["trays"]) == ("lock", ["rackA"], ["a2"])
    assert record["reports"] == [] and record["not_reached"] == []
    assert record["locks_left"] == [{"domain": "rackA", "holder": "a2", "why": UNREACHABLE.replace("198.18.1.11", "a2"),
                                     "stale_after_s": 3600, "stale_by": "2026-11-27 20:00:00 UTC"}]
    assert record["reasons"] == [
        LOCK_LEFT_MSG,
        "domain rackA: its run lock was left on tray a2, which the release did not reach (%s); another run of the "
        "domain is refused until it goes stale, 3600 s (imex_lock_stale_after_s) after this run last took or "
        "refreshed it: by 2026-11-27 20:00:00 UTC at the latest" % UNREACHABLE.replace("198.18.1.11", "a2")]
    assert record["message"].endswith("not proven by this run: none; locks left: rackA on a2")
    # AWX keeps it, and the summary says it.
    judged = [{"domain": "rackA", "verdict": "healthy", "problems": []},
              {"domain": "rackB", "verdict": "healthy", "problems": []}]
    data = artifacts(record, "run-1", "/srv/reports", judged)
    assert data["imex_run"]["stopped"]["locks_left"] == record["locks_left"]
    assert data["imex_domains"] == {"rackA": "healthy", "rackB": "healthy"}
    summary = render_summary(judged, "run-1", "2026-11-27T19:00:00Z", "0.4.0", stopped=record)
    assert "its run lock was left on tray a2" in summary and "2026-11-27 20:00:00 UTC" in summary


def test_a_lock_left_by_the_release_in_the_rescue_adds_to_the_stop_that_came_first():
    write = {"action": "rackscale.imex.imex_nodes_config", "register": "__imex_nodes_result", "tags": ["imex_daemon"]}
    registered = {"__imex_lock_release": {"b1": release(not_reached(taken("rackB", "b1"), "b1"))}}
    record = stopped_record([("b2", write, {"failed": True, "msg": "read-only file system"})], registered, DOMAINS,
                            judged=["rackA"], reached="read", lock_stale_after_s=3600, now=NOW)
    assert (record["stage"], record["domains"], record["trays"]) == ("write", ["rackB"], ["b2", "b1"])
    assert record["reasons"][0] == "read-only file system"
    assert record["reasons"][1].startswith("domain rackB: its run lock was left on tray b1")
    assert [report["domain"] for report in record["reports"]] == ["rackB"]


def test_the_clock_is_read_by_the_caller_alone():
    # stale_by is None without a time: the record never reads the clock itself.
    left = locks_left({"a1": release(not_reached(taken("rackA", "a1"), "a1"))}, 3600)
    assert left[0]["stale_by"] is None and left[0]["stale_after_s"] == 3600


def test_the_rescue_hands_every_artifact_of_the_record_key_by_key():
    # Key by key, so that each merges into what the run's proof handed before (see roles/imex/tasks/stopped.yml).
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
    with open(os.path.join(root, "roles", "imex", "tasks", "stopped.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    handed = [task["ansible.builtin.set_stats"]["data"] for task in tasks if "ansible.builtin.set_stats" in task]
    record = stopped_record([], {}, DOMAINS)
    assert len(handed) == 1 and set(handed[0]) == set(artifacts(record, "run-1", "/srv/reports"))
    assert all(value == "{{ __imex_stopped.plan.artifacts.%s }}" % key for key, value in handed[0].items())
