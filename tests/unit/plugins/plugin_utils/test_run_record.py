# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for plugins/plugin_utils/_run_record.py: what a run that stopped leaves on record."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils._run_outputs import render_summary
from ansible_collections.rackscale.imex.plugins.plugin_utils._run_record import (
    NO_LOG_REASON,
    NOT_PROVEN,
    artifacts,
    reasons_of,
    stage_of,
    stopped_record,
)

DOMAINS = {
    "rackA": {"trays": ["a1", "a2"], "addresses": ["198.18.1.11", "198.18.1.12"]},
    "rackB": {"trays": ["b1", "b2"], "addresses": ["198.18.2.11", "198.18.2.12"]},
}
KEY = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
UNREACHABLE = "Task failed: Failed to connect to the host via ssh: Connection timed out during banner exchange"


def plan_task(stage, **fields):
    return dict({"action": "rackscale.imex.imex_plan", "args": {"stage": stage}, "name": "Plan", "run_once": True},
                **fields)


def refusal(*problems):
    return {"failed": True, "msg": "\n".join(problems), "problems": list(problems)}


@pytest.mark.parametrize("task, stage", [
    (plan_task("arguments"), "arguments"),
    (plan_task("preflight"), "preflight"),
    (plan_task("read"), "gate"),
    (plan_task("restart"), "restart"),
    (plan_task("guard"), "restart"),
    (plan_task("verdicts"), "proof"),
    ({"action": "rackscale.imex.imex_lock", "register": "__imex_locks"}, "lock"),
    ({"action": "rackscale.imex.imex_tray_info", "register": "__imex_tray_info"}, "read"),
    # The read right before a restart is the restart's.
    ({"action": "rackscale.imex.imex_tray_info", "register": "__imex_activity"}, "restart"),
    ({"action": "ansible.builtin.command", "tags": ["imex_channels"]}, "channels"),
    ({"action": "rackscale.imex.imex_nodes_config", "tags": ["imex_daemon"]}, "write"),
    ({"action": "ansible.builtin.copy", "tags": ["imex_daemon"]}, "write"),
    # A handler stops and starts the daemons.
    ({"action": "ansible.builtin.systemd_service", "listen": [], "tags": ["imex_daemon"]}, "restart"),
    # The operator's pre-restart tasks run inside the wave's restart.
    ({"action": "ansible.builtin.shell", "tags": ["imex_daemon"]}, "restart"),
    ({"action": "ansible.builtin.assert", "name": "Stop unless every domain is healthy"}, "proof"),
    ({"action": "ansible.builtin.debug"}, "run"),
    (None, "run"),
])
def test_the_stage_comes_from_the_failed_task(task, stage):
    assert stage_of(task) == stage


def test_reasons_are_the_plans_problems_or_the_message_and_each_failed_item():
    assert reasons_of(refusal("first", "second")) == ["first", "second"]
    assert reasons_of({"failed": True, "msg": "boom"}) == ["boom"]
    loop = {"failed": True, "msg": "One or more items failed", "results": [
        {"item": {"domain": "rackA", "holder": "a1"}, "_ansible_item_label": "rackA", "failed": True,
         "msg": "lock held by run-x"},
        {"item": {"domain": "rackB", "holder": "b1"}, "changed": False},
        {"item": "rackB", "unreachable": True, "msg": UNREACHABLE}]}
    assert reasons_of(loop) == ["rackA: lock held by run-x", "rackB: " + UNREACHABLE]


def test_reasons_never_hold_a_private_key_nor_what_no_log_hides():
    found = reasons_of({"failed": True, "msg": "cannot write tray.key: " + KEY + " (denied)"})
    assert found == ["cannot write tray.key: [private key removed] (denied)"]
    # A key cut off by a bound, without its END line, is removed to the end.
    assert reasons_of({"failed": True, "msg": "key: " + KEY[:40]}) == ["key: [private key removed]"]
    assert reasons_of({"failed": True, "censored": "the output has been hidden", "msg": KEY}) == [NO_LOG_REASON]
    assert reasons_of({"failed": True, "msg": "x" * 5000})[0].endswith(" [...]")


def test_a_refusal_before_any_tray_holds_every_domain_of_the_run():
    record = stopped_record([("a1", plan_task("preflight"), refusal(
        "IMEX domain model: 1 problem(s) in the inventory:", "- tray a2: imex_address 'x' is not an address"))],
        {}, DOMAINS)
    assert record["stage"] == "preflight" and record["task"] == "Plan"
    assert record["trays"] == ["a2"] and record["domains"] == ["rackA", "rackB"] and record["not_reached"] == []
    reports = {report["domain"]: report for report in record["reports"]}
    assert list(reports) == ["rackA", "rackB"]
    assert reports["rackA"]["verdict"] == NOT_PROVEN and reports["rackA"]["ok"] is False
    assert reports["rackA"]["stopped_at"] == "preflight" and reports["rackA"]["failed_trays"] == ["a2"]
    # The problem's own list bullet is dropped: the summary and the report put theirs ("- - " before).
    assert reports["rackA"]["problems"] == ["tray a2: imex_address 'x' is not an address"]
    assert "  - tray a2: imex_address" in reports["rackA"]["message"] and "- -" not in reports["rackA"]["message"]
    summary = render_summary(record["reports"], "run-1", "2026-11-27T12:00:00Z", "0.3.0", stopped=record)
    assert "\n- tray a2: imex_address 'x' is not an address\n" in summary and "- -" not in summary
    # rackB's trays are not named: it gets every reason.
    assert reports["rackB"]["problems"] == record["reasons"] and reports["rackB"]["failed_trays"] == []
    assert reports["rackA"]["expected_nodes"] == DOMAINS["rackA"]["addresses"]
    assert record["message"].startswith("The run stopped at its preflight stage (domains rackA, rackB); trays a2")


def test_the_fabric_gate_names_its_domain_and_the_others_are_not_reached():
    problems = ["NVLink fabric or versions do not match the inventory; nothing was changed:",
                "domain rackB: tray b2 is on NVLink partition (c, 7), the others on (c, 32766)"]
    record = stopped_record([("a1", plan_task("read"), refusal(*problems))], {}, DOMAINS)
    assert (record["stage"], record["domains"], record["trays"], record["not_reached"]) == ("gate", ["rackB"], ["b2"], ["rackA"])
    reports = {report["domain"]: report for report in record["reports"]}
    assert reports["rackB"]["problems"] == [problems[1]]
    assert reports["rackA"]["problems"] == [
        "not reached: the run stopped at its gate stage (domains rackB) before it proved this domain"]


def test_a_tray_ssh_does_not_reach_is_named_from_the_registered_read():
    # any_errors_fatal fails the other trays without a failed task: the read registered on the tray says why.
    registered = {"__imex_tray_info": {"a1": {"changed": False}, "a2": {"unreachable": True, "msg": UNREACHABLE},
                                       "b1": {"changed": False}}}
    record = stopped_record([], registered, DOMAINS)
    assert (record["stage"], record["trays"], record["domains"]) == ("read", ["a2"], ["rackA"])
    assert record["reasons"] == ["a2: " + UNREACHABLE]
    assert [report["domain"] for report in record["reports"]] == ["rackA", "rackB"]


def test_a_lock_holder_ssh_does_not_reach_is_named_from_the_registered_locks():
    locks = {"unreachable": True, "results": [
        {"item": {"domain": "rackA", "holder": "a1"}, "_ansible_item_label": "rackA", "unreachable": True,
         "msg": UNREACHABLE, "_ansible_delegated_vars": {"ansible_delegated_host": "a1"}}]}
    # Registered on every tray of the play (run_once): one reason, one tray.
    record = stopped_record([], {"__imex_locks": {"a2": locks, "b1": locks}}, DOMAINS)
    assert (record["stage"], record["trays"], record["domains"]) == ("lock", ["a1"], ["rackA"])
    assert record["reasons"] == ["rackA: " + UNREACHABLE]


def test_a_failed_task_decides_the_stage_over_an_earlier_tray_left_out():
    # validate.yml goes on without a tray it could not read; it stops at the proof.
    registered = {"__imex_tray_info": {"a2": {"unreachable": True, "msg": UNREACHABLE}}}
    assert_task = {"action": "ansible.builtin.assert", "name": "Stop unless every domain is healthy", "run_once": True}
    record = stopped_record([("a1", assert_task, {"failed": True, "msg": "domain rackA: DOWN (unhealthy):\n  - x"})],
                            registered, DOMAINS, judged=["rackA", "rackB"])
    assert record["stage"] == "proof" and record["domains"] == ["rackA"] and record["trays"] == ["a2"]
    # Both domains were judged: their reports stand, nothing more to report.
    assert record["reports"] == [] and record["not_reached"] == []
    assert record["message"].endswith("not proven by this run: none")


def test_a_stop_in_a_later_wave_keeps_the_domains_judged_before_it():
    write_task = {"action": "rackscale.imex.imex_nodes_config", "name": "Write the domain's node list",
                  "tags": ["imex_daemon"], "register": "__imex_nodes_result"}
    record = stopped_record([("b2", write_task, {"failed": True, "msg": "cannot replace nodes_config.cfg: read-only"})],
                            {}, DOMAINS, judged=["rackA"])
    assert (record["stage"], record["domains"], record["trays"]) == ("write", ["rackB"], ["b2"])
    assert [report["domain"] for report in record["reports"]] == ["rackB"]
    assert record["reports"][0]["problems"] == ["cannot replace nodes_config.cfg: read-only"]
    judged = {"domain": "rackA", "verdict": "healthy", "problems": []}
    data = artifacts(record, "run-1", "/srv/reports", [judged])
    assert data["imex_domains"] == {"rackA": "healthy", "rackB": NOT_PROVEN}
    assert data["imex_domain_problems"]["rackB"] == ["cannot replace nodes_config.cfg: read-only"]
    assert data["imex_run"]["id"] == "run-1" and data["imex_run"]["report_dir"] == "/srv/reports"
    assert data["imex_run"]["stopped"]["stage"] == "write" and data["imex_run"]["stopped"]["trays"] == ["b2"]


def test_a_domain_name_inside_a_tray_name_is_not_taken_for_the_domain():
    domains = {"rack1": {"trays": ["rack1-tray01"], "addresses": []},
               "rack10": {"trays": ["rack10-tray01"], "addresses": []}}
    record = stopped_record([("rack1-tray01", plan_task("guard"), refusal(
        "domain rack10 is not restarted: work runs on it (rack10-tray01: GPU processes 4242 python3)"))],
        {}, domains)
    assert record["domains"] == ["rack10"] and record["trays"] == ["rack10-tray01"]
    assert record["not_reached"] == ["rack1"]


def test_a_stop_without_any_message_still_says_where():
    record = stopped_record([], {}, DOMAINS)
    assert record["stage"] == "run" and record["domains"] == ["rackA", "rackB"]
    assert record["reasons"] == ["the run stopped at its run stage without a message (see the run's output)"]


def test_a_run_that_reached_none_of_its_trays_is_stopped_at_their_read():
    from ansible_collections.rackscale.imex.plugins.plugin_utils._run_record import none_reached
    dark = {"unreachable": True, "msg": UNREACHABLE}
    assert none_reached({"a1": dark, "a2": dark}) == [
        "ssh reached none of the trays of the run; nothing was read or changed:",
        "tray a1: " + UNREACHABLE, "tray a2: " + UNREACHABLE]
    # One tray read is a run that goes on (validate.yml) or stops at that tray (site.yml).
    assert none_reached({"a1": dark, "a2": {"changed": False, "fabric": {}}}) == []
    assert none_reached({}) == []


def test_every_tray_of_a_domain_dark_still_records_the_domain_not_proven():
    # Every tray of the run unreachable: the plan refuses at its read stage (while the trays are still in the
    # play), and the record says the run stopped at the read, on every tray, with ssh's reasons.
    dark = {"unreachable": True, "msg": UNREACHABLE}
    registered = {"__imex_tray_info": {"a1": dark, "a2": dark}}
    problems = ["ssh reached none of the trays of the run; nothing was read or changed:",
                "tray a1: " + UNREACHABLE, "tray a2: " + UNREACHABLE]
    domains = {"rackA": DOMAINS["rackA"]}
    record = stopped_record([("a1", plan_task("read"), refusal(*problems))], registered, domains)
    assert (record["stage"], record["domains"], record["trays"]) == ("read", ["rackA"], ["a1", "a2"])
    assert record["reasons"][:3] == problems
    (report,) = record["reports"]
    assert report["domain"] == "rackA" and report["verdict"] == NOT_PROVEN and report["ok"] is False
    assert report["stopped_at"] == "read" and report["failed_trays"] == ["a1", "a2"]
    assert any("ssh" in problem for problem in report["problems"])


def test_one_dark_domain_of_two_is_recorded_as_the_run_s_stop():
    # validate.yml: the trays of rackB were read, those of rackA none; the proof of rackA fails from its dark
    # leader. The run reached trays, so the failed task decides the stage; rackA is named with its trays.
    dark = {"unreachable": True, "msg": UNREACHABLE}
    registered = {"__imex_tray_info": {"a1": dark, "a2": dark, "b1": {"changed": False}, "b2": {"changed": False}}}
    status_task = {"action": "rackscale.imex.imex_status", "register": "__imex_validate_status", "run_once": True}
    status = {"unreachable": True, "results": [
        {"item": "rackA", "unreachable": True, "msg": UNREACHABLE,
         "_ansible_delegated_vars": {"ansible_delegated_host": "a1"}}]}
    record = stopped_record([("b1", status_task, status)], registered, DOMAINS)
    assert record["stage"] == "proof" and record["domains"] == ["rackA"] and record["trays"] == ["a1", "a2"]
    assert [report["domain"] for report in record["reports"]] == ["rackA", "rackB"]
