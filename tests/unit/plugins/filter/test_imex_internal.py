# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role's glue filters hand explicit data to the controller-side code."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.filter.imex_internal import (
    imex_internal_domain_report,
    imex_internal_is_pem,
    imex_internal_tls_file_problems,
    imex_internal_trays_to_explain,
    imex_internal_with_daemon_logs,
)

MODEL = {"domains": {"rack1": {"name": "rack1", "addresses": ["198.18.1.11", "198.18.1.12"],
                               "nodes": [{"host": "t1", "address": "198.18.1.11", "index": 0},
                                         {"host": "t2", "address": "198.18.1.12", "index": 1}]}},
         "host_domain": {"t1": "rack1", "t2": "rack1"}}
HEALTHY = {"domain_state": "UP", "healthy": True, "nodes": [], "broken_pairs": [], "problems": []}


def loop(*results):
    """What a registered run_once loop over domains holds: one result per domain, its name as item."""
    return {"changed": False, "results": [dict(result, item=domain) for domain, result in results]}


# A loop whose every item was skipped by its condition, and a task skipped as a whole.
EMPTY_LOOP = {"changed": False, "skipped": True, "results": []}
SKIPPED_TASK = {"changed": False, "skipped": True}


def test_a_domain_the_proof_did_not_read_is_judged_on_the_read_before_the_restarts():
    report = imex_internal_domain_report("rack1", MODEL, ["t1", "t2"], EMPTY_LOOP, loop(("rack1", HEALTHY)))
    assert report["verdict"] == "healthy" and report["status"]["domain_state"] == "UP" and report["leader"] == "t1"


def test_a_proof_that_ran_wins_over_the_earlier_read():
    waited = dict(HEALTHY, domain_state="DEGRADED", healthy=False, problems=["node 1 (198.18.1.12) is UNAVAILABLE"])
    report = imex_internal_domain_report("rack1", MODEL, ["t1", "t2"], loop(("rack1", waited)), loop(("rack1", HEALTHY)))
    assert report["verdict"] == "unhealthy" and report["problems"] == ["node 1 (198.18.1.12) is UNAVAILABLE"]


def test_each_domain_takes_its_own_item_of_the_loop():
    other = dict(HEALTHY, domain_state="DOWN", healthy=False, problems=["domain state is DOWN, not UP"])
    report = imex_internal_domain_report("rack1", MODEL, ["t1", "t2"], loop(("rack2", other), ("rack1", HEALTHY)))
    assert report["verdict"] == "healthy"


def test_the_leader_is_the_first_tray_of_the_domain_left_in_the_play():
    report = imex_internal_domain_report("rack1", MODEL, ["t2"], loop(("rack1", HEALTHY)))
    assert report["leader"] == "t2" and report["trays_not_in_run"] == ["t1"]


def test_without_any_read_the_verdict_is_unknown():
    for earlier in ({}, None, SKIPPED_TASK, EMPTY_LOOP):
        report = imex_internal_domain_report("rack1", MODEL, ["t1", "t2"], SKIPPED_TASK, earlier)
        assert report["verdict"] == "unknown"


def test_tls_files_are_checked_per_tray_with_tls_on_only(tmp_path):
    present = tmp_path / "ca.crt"
    present.write_text("x")
    problems = imex_internal_tls_file_problems(
        ["t1", "t2", "t3"], ["true", "no", True], [str(present)] * 3, [str(present), "", ""],
        [str(tmp_path / "missing.key"), "", str(present)])
    assert problems == [
        "tray t1: imex_tls is true but imex_tls_key is unset or not a file on the controller (nor PEM text)",
        "tray t3: imex_tls is true but imex_tls_cert is unset or not a file on the controller (nor PEM text)",
    ]
    assert imex_internal_tls_file_problems(["t1"], [True], [str(present)], [str(present)], [str(present)]) == []
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    assert imex_internal_tls_file_problems(["t1"], [True], [pem], [pem], [str(present)]) == []
    assert imex_internal_tls_file_problems(["t1"], [True], ["BEGIN nothing"], [pem], [pem]) == [
        "tray t1: imex_tls is true but imex_tls_ca is unset or not a file on the controller (nor PEM text)"]


def test_a_failed_proof_names_the_trays_whose_log_explains_it_and_the_excerpts_join_the_message():
    down = dict(HEALTHY, domain_state="DEGRADED", healthy=False, problems=["node 1 (198.18.1.12, t2) is UNAVAILABLE"],
                nodes=[{"index": 0, "status": "READY", "reported": True},
                       {"index": 1, "status": "UNAVAILABLE", "reported": True}])
    verdict = imex_internal_domain_report("rack1", MODEL, ["t1", "t2"], loop(("rack1", down)))
    assert imex_internal_trays_to_explain([verdict], MODEL, ["t1", "t2"]) == ["t2"]
    reads = {"results": [{"item": "t2", "source": "file", "path": "/var/log/nvidia-imex.log",
                          "lines": ["[ERROR] No matching network interface found"], "truncated": False}]}
    explained = imex_internal_with_daemon_logs([verdict], MODEL, reads)[0]
    assert explained["daemon_logs"] == {"t2": {"source": "file", "path": "/var/log/nvidia-imex.log",
                                               "lines": ["[ERROR] No matching network interface found"],
                                               "truncated": False}}
    assert explained["message"].endswith("daemon log of t2 (/var/log/nvidia-imex.log, last 1 lines):\n"
                                         "      [ERROR] No matching network interface found")
    failed = imex_internal_with_daemon_logs([verdict], MODEL, {"results": [{"item": "t2", "failed": True, "msg": "no"}]})
    assert failed[0]["daemon_logs"] == {"t2": {"error": "no"}}


def test_a_healthy_domain_needs_no_log_and_an_unread_status_asks_its_leader():
    healthy = imex_internal_domain_report("rack1", MODEL, ["t1", "t2"], loop(("rack1", HEALTHY)))
    assert imex_internal_trays_to_explain([healthy], MODEL, ["t1", "t2"]) == []
    unknown = imex_internal_domain_report("rack1", MODEL, ["t1", "t2"], SKIPPED_TASK)
    assert imex_internal_trays_to_explain([unknown], MODEL, ["t1", "t2"]) == ["t1"]
    assert imex_internal_with_daemon_logs([healthy], MODEL, EMPTY_LOOP) == [healthy]


def test_pem_text_is_told_from_a_controller_path():
    assert imex_internal_is_pem("\n  -----BEGIN CERTIFICATE-----\nMIIB...\n-----END CERTIFICATE-----\n")
    assert not imex_internal_is_pem("/srv/pki/ca.crt")
    assert not imex_internal_is_pem("")
    assert not imex_internal_is_pem(None)
