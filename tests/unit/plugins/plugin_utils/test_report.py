"""Tests for the domain verdict and report (plugins/plugin_utils/_report.py)."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.verdicts import verdicts
from ansible_collections.rackscale.imex.plugins.plugin_utils._report import domain_report

MODEL = {"domains": {"rack1": {
    "addresses": ["198.18.1.11", "198.18.1.12"],
    "nodes": [{"host": "rack1-tray01", "address": "198.18.1.11"},
              {"host": "rack1-tray02", "address": "198.18.1.12"}],
}}}
TRAYS = ["rack1-tray01", "rack1-tray02"]
REPORT_KEYS = {"domain", "expected_nodes", "leader", "trays_not_in_run", "status", "verdict", "ok",
               "problems", "message"}


def node(index, status="READY", version="580.95.09"):
    return {"index": index, "address": MODEL["domains"]["rack1"]["addresses"][index],
            "status": status, "version": version, "hostname": TRAYS[index]}


def status(healthy=True, state="UP", nodes=None, broken_pairs=(), problems=()):
    return {"domain_state": state, "local_state": "READY", "healthy": healthy,
            "nodes": nodes if nodes is not None else [node(0), node(1)],
            "broken_pairs": list(broken_pairs), "problems": list(problems), "source": "json", "elapsed": 0.2}


def statuses(leader_status):
    """Only the leader read a status; the other trays skipped the task."""
    return {"rack1-tray01": leader_status, "rack1-tray02": {"skipped": True}}


def test_healthy_domain_report_holds_exactly_the_documented_keys():
    report = domain_report("rack1", MODEL, TRAYS, statuses(status()))
    assert set(report) == REPORT_KEYS  # no file_problems: files on disk are not judged
    assert report["verdict"] == "healthy" and report["ok"] is True and report["problems"] == []
    assert report["leader"] == "rack1-tray01" and report["trays_not_in_run"] == []
    assert report["message"] == "domain rack1: UP, 2 nodes READY, every pair connected"


def test_only_the_leaders_status_decides_not_the_other_trays_results():
    found = statuses(status())
    found["rack1-tray02"] = status(False, "DOWN", problems=["not the leader's view"])
    assert domain_report("rack1", MODEL, TRAYS, found)["verdict"] == "healthy"


def test_unhealthy_domain_lists_the_status_problems():
    problems = ["domain state is DEGRADED, not UP", "node 1 (198.18.1.12) is UNAVAILABLE"]
    report = domain_report("rack1", MODEL, TRAYS, statuses(status(False, "DEGRADED", [node(0), node(1, "UNAVAILABLE")],
                                                                  problems=problems)))
    assert report["verdict"] == "unhealthy" and report["ok"] is False
    assert report["problems"] == problems
    assert report["message"] == "domain rack1: DEGRADED (unhealthy):\n  - " + "\n  - ".join(problems)


def test_broken_pairs_within_the_allowance_are_tolerated_and_reported():
    pairs = [{"from_index": 0, "to_index": 1, "state": "R"}, {"from_index": 1, "to_index": 0, "state": "R"}]
    leader = status(False, "DEGRADED", broken_pairs=pairs, problems=["pair 0 -> 1: R", "pair 1 -> 0: R"])
    report = domain_report("rack1", MODEL, TRAYS, statuses(leader), allowed_broken_pairs=2)
    assert report["verdict"] == "tolerated" and report["ok"] is True
    assert report["problems"] == ["2 broken pair(s) tolerated (allowed 2): pair 0 -> 1: R; pair 1 -> 0: R"]
    assert domain_report("rack1", MODEL, TRAYS, statuses(leader), allowed_broken_pairs=1)["verdict"] == "unhealthy"


def test_unreadable_status_is_unknown_and_names_the_tray():
    report = domain_report("rack1", MODEL, TRAYS, statuses({"failed": True, "msg": "did not answer"}))
    assert report["verdict"] == "unknown" and report["ok"] is False
    assert report["problems"] == ["status could not be read from tray rack1-tray01: did not answer"]


def test_trays_left_out_of_the_run_are_listed_and_the_first_in_run_leads():
    report = domain_report("rack1", MODEL, ["rack1-tray02"], {"rack1-tray02": status()})
    assert report["leader"] == "rack1-tray02" and report["trays_not_in_run"] == ["rack1-tray01"]


def test_the_plan_judges_each_domain_on_its_leaders_status_with_the_allowance_as_given():
    # The role hands the allowance as the option's text (-e imex_allowed_broken_pairs=1).
    pairs = [{"from_index": 0, "to_index": 1, "state": "R"}]
    leader = status(False, "DEGRADED", broken_pairs=pairs, problems=["pair 0 -> 1: R"])
    plan = {"domains": {"rack1": {"leader": "rack1-tray01"}}}
    (report,) = verdicts(plan, MODEL, ["rack1"], {"rack1": leader}, tuple(TRAYS), allowed_broken_pairs="1")
    assert REPORT_KEYS <= set(report) and report["verdict"] == "tolerated" and report["leader"] == "rack1-tray01"
