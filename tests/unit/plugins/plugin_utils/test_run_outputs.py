# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stamp, the Markdown summary and the node_exporter gauges written beside the reports."""
from __future__ import annotations

import json

from ansible_collections.rackscale.imex.plugins.plugin_utils._run_outputs import (
    collection_version,
    last_proven_at,
    render_summary,
    render_textfile,
    stamped,
)


def status(state, ready, versions, broken=0):
    nodes = [{"index": index, "address": "198.18.1.%d" % (11 + index), "status": "READY" if index < ready else "UNAVAILABLE",
              "version": versions[index % len(versions)]} for index in range(3)]
    pairs = [{"from_index": 0, "to_index": 1, "state": "R"}] * broken
    return {"domain_state": state, "nodes": nodes, "broken_pairs": pairs}


HEALTHY = {"domain": "rack1", "verdict": "healthy", "ok": True, "problems": [],
           "expected_nodes": ["198.18.1.11", "198.18.1.12", "198.18.1.13"], "status": status("UP", 3, ["580.95.09"])}
BROKEN = {"domain": "rack2", "verdict": "unhealthy", "ok": False,
          "problems": ["node 2 (198.18.1.13) is UNAVAILABLE", "versions differ | 580.95.09, 580.105.08"],
          "expected_nodes": ["198.18.1.11", "198.18.1.12", "198.18.1.13"],
          "status": status("DEGRADED", 2, ["580.95.09", "580.105.08"], broken=4)}


def gauge(text, name, **labels):
    shown = ",".join('%s="%s"' % item for item in labels.items())
    (line,) = [line for line in text.splitlines() if line.startswith("%s{%s} " % (name, shown))]
    return float(line.rsplit(" ", 1)[1])


def domain_gauges(text, domain, *names):
    """{name: value} of the rackscale_imex_domain_<name> gauges of one domain."""
    return {name: gauge(text, "rackscale_imex_domain_" + name, domain=domain) for name in names}


def test_a_stamp_names_the_run_the_time_and_the_version():
    assert stamped({"domain": "rack1"}, "run-1", "2026-11-24T10:00:00Z", "0.2.0") == {
        "domain": "rack1", "run_id": "run-1", "generated_at": "2026-11-24T10:00:00Z", "collection_version": "0.2.0"}


def test_the_summary_has_a_row_per_domain_and_the_problems_of_those_not_healthy():
    text = render_summary([HEALTHY, BROKEN], "run-1", "2026-11-24T10:00:00Z", "0.2.0")
    assert text.splitlines()[2] == "Run `run-1` at 2026-11-24T10:00:00Z, rackscale.imex 0.2.0."
    assert "| rack1 | healthy | UP | 3/3 | 0 | 580.95.09 | rack1.json |" in text
    # A '|' inside a cell is escaped so the table keeps its columns.
    assert "| rack2 | unhealthy | DEGRADED | 2/3 | 4 | 580.105.08, 580.95.09 | rack2.json |" in text
    assert "## rack1" not in text
    assert "## rack2: unhealthy\n\n- node 2 (198.18.1.13) is UNAVAILABLE\n- versions differ \\| 580.95.09, 580.105.08\n" in text


def test_gauges_of_a_healthy_domain():
    text = render_textfile(HEALTHY, 1764000000.0)
    expected = {"ok": 1, "up": 1, "nodes": 3, "nodes_ready": 3, "broken_pairs": 0, "version_skew": 0,
                "last_success_timestamp_seconds": 1764000000}
    assert domain_gauges(text, "rack1", *expected) == expected
    assert gauge(text, "rackscale_imex_node_ready", domain="rack1", node="2", address="198.18.1.13") == 1
    # Every family is declared once, as a gauge.
    assert text.count("# TYPE rackscale_imex_domain_ok gauge\n") == 1


def test_a_degraded_domain_keeps_its_last_success_time():
    before = render_textfile(dict(BROKEN, ok=True, verdict="tolerated"), 1764000000.0)
    text = render_textfile(BROKEN, 1764000600.0, before)
    expected = {"ok": 0, "up": 0, "nodes_ready": 2, "broken_pairs": 4, "version_skew": 1,
                "last_run_timestamp_seconds": 1764000600, "last_success_timestamp_seconds": 1764000000}
    assert domain_gauges(text, "rack2", *expected) == expected
    assert gauge(text, "rackscale_imex_node_ready", domain="rack2", node="2", address="198.18.1.13") == 0
    # Never healthy: 0.
    assert gauge(render_textfile(BROKEN, 1.0, ""), "rackscale_imex_domain_last_success_timestamp_seconds",
                 domain="rack2") == 0


def test_label_values_are_escaped():
    text = render_textfile(dict(HEALTHY, domain='a"b\\c'), 1.0)
    assert 'rackscale_imex_domain_ok{domain="a\\"b\\\\c"} 1' in text


def test_the_collection_version_comes_from_the_manifest_then_galaxy_yml(tmp_path):
    assert collection_version(str(tmp_path)) == "unknown"
    (tmp_path / "galaxy.yml").write_text("namespace: rackscale\nname: imex\nversion: 0.2.0\n")
    assert collection_version(str(tmp_path)) == "0.2.0"
    (tmp_path / "MANIFEST.json").write_text(json.dumps({"collection_info": {"version": "0.2.1"}}))
    assert collection_version(str(tmp_path)) == "0.2.1"


# A domain a stopped run did not judge (plugin_utils/_run_record.py's not_proven_report).
NOT_PROVEN = {"domain": "rack1", "verdict": "not_proven", "ok": False, "stopped_at": "gate",
              "failed_trays": ["rack1-tray02"], "problems": ["domain rack1: tray rack1-tray02 is on another partition"],
              "expected_nodes": ["198.18.1.11", "198.18.1.12", "198.18.1.13"], "status": {"domain_state": None}}
STOPPED = {"stage": "gate", "domains": ["rack1"], "trays": ["rack1-tray02"], "not_reached": ["rack2"],
           "task": "Plan the writes", "reasons": ["domain rack1: tray rack1-tray02 is on another partition"]}


def test_a_stopped_run_leaves_no_proven_gauge_and_says_since_when_and_where():
    proven = render_textfile(HEALTHY, 1764000000.0)
    text = render_textfile(NOT_PROVEN, 1764000600.0, proven)
    expected = {"ok": 0, "nodes": 3, "last_run_timestamp_seconds": 1764000600,
                "last_success_timestamp_seconds": 1764000000}
    assert domain_gauges(text, "rack1", *expected) == expected
    assert gauge(text, "rackscale_imex_domain_run_stopped_timestamp_seconds", domain="rack1", stage="gate") == 1764000600
    # Nothing this run did not read: no state, no READY node, no pairs of an older run.
    for name in ("rackscale_imex_domain_up", "rackscale_imex_domain_nodes_ready", "rackscale_imex_node_ready",
                 "rackscale_imex_domain_broken_pairs", "rackscale_imex_domain_version_skew"):
        assert name + "{" not in text, name
    # The next run that judges the domain drops the stop.
    assert "run_stopped" not in render_textfile(HEALTHY, 1764001200.0, text)


def test_without_earlier_gauges_the_last_success_comes_from_the_report():
    text = render_textfile(dict(NOT_PROVEN, last_proven_at="2025-11-24T16:00:00Z"), 1764000600.0, "")
    assert gauge(text, "rackscale_imex_domain_last_success_timestamp_seconds", domain="rack1") == 1764000000
    assert gauge(render_textfile(NOT_PROVEN, 1.0, ""), "rackscale_imex_domain_last_success_timestamp_seconds",
                 domain="rack1") == 0


def test_since_when_a_domain_is_proven_is_carried_from_its_previous_report():
    now = "2026-11-24T10:00:00Z"
    assert last_proven_at(HEALTHY, now, {}) == now
    assert last_proven_at(NOT_PROVEN, now, {"ok": True, "generated_at": "2026-11-23T10:00:00Z"}) == "2026-11-23T10:00:00Z"
    assert last_proven_at(NOT_PROVEN, now, {"ok": False, "generated_at": "2026-11-23T10:00:00Z",
                                            "last_proven_at": "2026-11-20T10:00:00Z"}) == "2026-11-20T10:00:00Z"
    assert last_proven_at(NOT_PROVEN, now, {"ok": False, "generated_at": "2026-11-23T10:00:00Z"}) is None
    assert last_proven_at(NOT_PROVEN, now, None) is None


def test_the_summary_of_a_stopped_run_says_where_it_stopped_and_why():
    text = render_summary([HEALTHY, NOT_PROVEN], "run-1", "2026-11-24T10:00:00Z", "0.2.0", STOPPED)
    assert "| rack1 | not_proven | - | -/3 | - | - | rack1.json |" in text
    assert ("## The run stopped at its gate stage\n\nDomains: rack1\nTrays: rack1-tray02\nNot reached: rack2\n"
            "Task: Plan the writes\n\n- domain rack1: tray rack1-tray02 is on another partition\n") in text
    assert "## rack1: not_proven\n" in text
    assert "stopped" not in render_summary([HEALTHY], "run-1", "2026-11-24T10:00:00Z", "0.2.0")
