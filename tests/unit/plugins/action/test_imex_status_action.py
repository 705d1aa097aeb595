# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the imex_status action (plugins/action/imex_status.py): a long wait runs in slices
of the module's own wait, printing progress between them, and ends with the totals of the wait."""
from __future__ import annotations

from unittest.mock import MagicMock

import pytest

from ansible_collections.rackscale.imex.plugins.action import imex_status as action_plugin
from ansible_collections.rackscale.imex.plugins.module_utils._assess import waited_message

UNHEALTHY = {"healthy": False, "domain_state": "DEGRADED", "problems": ["node 2 (198.18.1.13, rack1-tray03) is UNAVAILABLE"]}
HEALTHY = {"healthy": True, "domain_state": "UP", "problems": []}
REASON = "IMEX domain is not healthy (domain state DEGRADED): node 2 (198.18.1.13, rack1-tray03) is UNAVAILABLE"


class FakeTray:
    """Answers module runs from a script; each run takes the time the slice allows (a fake clock)."""

    def __init__(self, answers):
        self.answers, self.calls, self.now = list(answers), [], 1000.0

    def monotonic(self):
        return self.now

    def execute_module(self, module_name, module_args, task_vars):
        assert module_name == "rackscale.imex.imex_status"
        self.calls.append(dict(module_args))
        answer = dict(self.answers.pop(0))
        if module_args.get("wait") and not answer.get("healthy") and "refused" not in answer:
            self.now += int(module_args["timeout"])  # an unhealthy slice lasts its whole timeout
        else:
            self.now += 1
        if "attempts" not in answer and "refused" not in answer:
            answer["attempts"] = 3
        answer.pop("refused", None)
        return answer


@pytest.fixture
def tray(monkeypatch):
    def make(answers):
        fake = FakeTray(answers)
        monkeypatch.setattr(action_plugin.time, "monotonic", fake.monotonic)
        return fake
    return make


@pytest.fixture
def shown(monkeypatch):
    lines = []
    monkeypatch.setattr(action_plugin.display, "display", lines.append)
    return lines


def run(fake, args):
    task = MagicMock(args=args, check_mode=False, async_val=0, action="rackscale.imex.imex_status")
    connection = MagicMock()
    connection._shell.tmpdir = None
    action = action_plugin.ActionModule(task, connection, MagicMock(), MagicMock(), MagicMock())
    action._execute_module = fake.execute_module
    return action.run(task_vars={"inventory_hostname": "rack1-tray01"})


def test_a_single_read_is_one_module_run_with_the_arguments_unchanged(tray, shown):
    fake = tray([UNHEALTHY])
    result = run(fake, {"expected_nodes": ["198.18.1.11"]})
    assert fake.calls == [{"expected_nodes": ["198.18.1.11"]}]
    assert result["domain_state"] == "DEGRADED" and shown == []


def test_a_wait_within_one_progress_interval_is_not_sliced(tray, shown):
    fake = tray([HEALTHY])
    run(fake, {"wait": "true", "timeout": "30"})
    assert fake.calls == [{"wait": "true", "timeout": "30"}] and shown == []


def test_a_long_wait_shows_what_is_broken_between_slices_and_sums_the_attempts(tray, shown):
    fake = tray([UNHEALTHY, UNHEALTHY, HEALTHY])
    result = run(fake, {"wait": True, "timeout": 300, "fail_unhealthy": True})
    assert [(call["timeout"], call["fail_unhealthy"]) for call in fake.calls] == [(30, False), (30, False), (30, False)]
    assert shown == ["[rack1-tray01] IMEX domain not healthy yet after %d of 300 s: domain DEGRADED: %s"
                     % (waited, UNHEALTHY["problems"][0]) for waited in (30, 60)]
    assert result["healthy"] is True and result["attempts"] == 9 and result["elapsed"] == 61


def test_the_last_slice_gets_the_time_left_and_fails_with_the_totals_of_the_wait(tray, shown):
    unhealthy_end = dict(UNHEALTHY, failed=True, reason=REASON, msg="not healthy after 3 attempt(s) in 10 s. " + REASON)
    fake = tray([UNHEALTHY, UNHEALTHY, unhealthy_end])
    result = run(fake, {"wait": True, "timeout": 70, "fail_unhealthy": True})
    assert [(call["timeout"], call["fail_unhealthy"]) for call in fake.calls] == [(30, False), (30, False), (10, True)]
    assert len(shown) == 2
    assert result["failed"] is True
    assert result["msg"] == waited_message(REASON, 9, 70, unhealthy=True) == \
        "not healthy after 9 attempt(s) in 70 s. " + REASON


def test_a_wait_that_only_warns_warns_once_with_the_totals(tray, shown):
    warned = dict(UNHEALTHY, reason=REASON, warnings=["not healthy after 3 attempt(s) in 10 s. " + REASON])
    fake = tray([UNHEALTHY, UNHEALTHY, warned])
    result = run(fake, {"wait": True, "timeout": 70})
    assert result["warnings"] == ["not healthy after 9 attempt(s) in 70 s. " + REASON]
    assert "failed" not in result


def test_a_daemon_that_never_answers_says_still_failing_with_the_totals(tray, shown):
    ctl_down = {"failed": True, "msg": "still failing after 3 attempt(s) in 30 s: nvidia-imex-ctl -N -j failed (rc 1)",
                "reason": "nvidia-imex-ctl -N -j failed (rc 1)"}
    fake = tray([ctl_down, ctl_down, ctl_down])
    result = run(fake, {"wait": True, "timeout": 61, "fail_unhealthy": True})
    assert shown[0] == "[rack1-tray01] IMEX domain not healthy yet after 30 of 61 s: " + ctl_down["msg"]
    assert result["msg"] == "still failing after 9 attempt(s) in 61 s: nvidia-imex-ctl -N -j failed (rc 1)"


def test_options_the_module_refuses_end_the_wait_at_once(tray, shown):
    fake = tray([{"failed": True, "msg": "interval must be at least 1, got 0", "refused": True}])
    result = run(fake, {"wait": True, "timeout": 300, "interval": 0})
    assert len(fake.calls) == 1 and shown == []
    assert result["msg"] == "interval must be at least 1, got 0"


@pytest.mark.parametrize("args", [{"wait": "maybe", "timeout": 300}, {"wait": True, "timeout": "soon"}])
def test_values_that_are_not_a_bool_or_a_number_go_to_the_module_unsliced(tray, shown, args):
    fake = tray([{"failed": True, "msg": "refused", "refused": True}])
    run(fake, args)
    assert fake.calls == [args]
