# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role's glue filters hand explicit data to the controller-side code."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.filter.imex_internal import imex_internal_domain_report

MODEL = {"domains": {"rack1": {"name": "rack1", "addresses": ["198.18.1.11", "198.18.1.12"],
                               "nodes": [{"host": "t1", "address": "198.18.1.11", "index": 0},
                                         {"host": "t2", "address": "198.18.1.12", "index": 1}]}},
         "host_domain": {"t1": "rack1", "t2": "rack1"}}
HEALTHY = {"domain_state": "UP", "healthy": True, "nodes": [], "broken_pairs": [], "problems": []}
SKIPPED = {"skipped": True, "changed": False}


def test_a_skipped_proof_is_judged_on_the_read_before_the_restarts():
    report = imex_internal_domain_report("rack1", MODEL, ["t1", "t2"], {"t1": SKIPPED, "t2": SKIPPED},
                                         {"t1": HEALTHY, "t2": SKIPPED})
    assert report["verdict"] == "healthy" and report["status"]["domain_state"] == "UP"


def test_a_proof_that_ran_wins_over_the_earlier_read():
    waited = dict(HEALTHY, domain_state="DEGRADED", healthy=False, problems=["node 1 (198.18.1.12) is UNAVAILABLE"])
    report = imex_internal_domain_report("rack1", MODEL, ["t1", "t2"], {"t1": waited}, {"t1": HEALTHY})
    assert report["verdict"] == "unhealthy" and report["problems"] == ["node 1 (198.18.1.12) is UNAVAILABLE"]


def test_without_any_read_the_verdict_is_unknown():
    report = imex_internal_domain_report("rack1", MODEL, ["t1", "t2"], {"t1": SKIPPED}, {})
    assert report["verdict"] == "unknown"
