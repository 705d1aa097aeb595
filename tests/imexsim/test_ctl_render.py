"""Report rendering against the verbatim vendor samples (no daemons involved)."""
from __future__ import annotations

import json
import re

import pytest
from conftest import SAMPLES

from imexsim import ctlformat, wire
from imexsim.ctlformat import DomainReport, NodeReport


def sample_nodes(text: str) -> list[tuple[str, str, str]]:
    """(address, status, version) of the node lines of a sample."""
    return [
        (match[1], match[2], match[3] or "")
        for match in re.finditer(r"^Node #\d+ +- (\S+) +- (\S+)(?: +- Version: (\S+))?$", text, re.MULTILINE)
    ]


def healthy(rows: list[tuple[str, str, str]]) -> list[NodeReport]:
    return [
        NodeReport(index=index, host=host, reachable=True, status=status, version=version, cells=[wire.CONNECTED] * len(rows))
        for index, (host, status, version) in enumerate(rows)
    ]


def timestamp_of(text: str) -> str:
    return re.search(r"^\d+/\d+/\d{4} \d\d:\d\d:\d\d\.\d{3}$", text, re.MULTILINE)[0]


def test_text_layout_570_172_is_the_18_node_sample_byte_for_byte():
    sample = (SAMPLES / "ctl-N-570.172-18nodes.txt").read_text()
    rows = sample_nodes(sample)
    assert len(rows) == 18
    report = DomainReport(nodes=healthy(rows), timestamp=timestamp_of(sample), local_index=0)
    assert ctlformat.render_text(report) == sample


def test_text_layout_570_00_is_the_2_node_sample_byte_for_byte():
    sample = (SAMPLES / "ctl-N-570.00-2nodes.txt").read_text()
    rows = sample_nodes(sample)
    report = DomainReport(nodes=healthy(rows), timestamp=timestamp_of(sample), local_index=0)
    assert ctlformat.render_text(report, layout=ctlformat.LAYOUT_570_00) == sample


def test_hostname_layout_matches_the_580_node_lines():
    sample_lines = (SAMPLES / "ctl-N-H-580.173.02-nodes.txt").read_text().splitlines()
    nodes = [
        NodeReport(index=0, host="10.66.6.8", reachable=True, status="READY", version="580.173.02", hostname="theia0271", cells=["C", "C"]),
        NodeReport(index=1, host="10.66.6.9", reachable=True, status="READY", version="580.173.02", hostname="theia0272", cells=["C", "C"]),
    ]
    text = ctlformat.render_text(DomainReport(nodes=nodes, timestamp="1/2/2026 03:04:05.006", local_index=1), hostnames=True)
    assert [line for line in text.splitlines() if line.startswith("Node #")] == sample_lines


def test_json_matches_the_healthy_2_node_sample():
    sample_text = (SAMPLES / "ctl-N-j-570.172.08-2nodes.json").read_text()
    sample = json.loads(sample_text)
    nodes = [
        NodeReport(index=int(key), host=node["host"], reachable=True, status=node["status"], version=node["version"], cells=["C", "C"])
        for key, node in sorted(sample["nodes"].items())
    ]
    rendered = ctlformat.render_json(DomainReport(nodes=nodes, timestamp=sample["timestamp"], local_index=0), with_hostname=False)
    assert json.loads(rendered) == sample
    # Same key order and one-blank indentation as the vendor's document.
    assert list(json.loads(rendered)) == ["nodes", "timestamp", "status"]
    assert list(json.loads(rendered)["nodes"]["0"]) == list(sample["nodes"]["0"])
    assert rendered.splitlines()[:4] == sample_text.splitlines()[:4]


def test_json_of_an_unreachable_node_matches_the_unconfigured_sample():
    sample = json.loads((SAMPLES / "ctl-N-j-unconfigured.json").read_text())
    unreachable = NodeReport(index=0, host="0.0.0.0", reachable=False, cells=[wire.INVALID])
    report = DomainReport(nodes=[unreachable], timestamp=sample["timestamp"], local_index=None)
    assert json.loads(ctlformat.render_json(report, with_hostname=False)) == sample


def test_json_580_adds_host_name_and_spells_every_cell():
    row = ["C", "N", "R", "D", "A", "!V!", "!M!", "I"]
    nodes = [NodeReport(index=0, host="a", reachable=True, status="READY", version="580.95.09", hostname="tray1", cells=row)]
    nodes += [NodeReport(index=i, host=f"n{i}", reachable=False, cells=["I"] * len(row)) for i in range(1, len(row))]
    node = json.loads(ctlformat.render_json(DomainReport(nodes=nodes, timestamp="t", local_index=0), with_hostname=True))["nodes"]["0"]
    assert node["hostName"] == "tray1"
    assert [connection["status"] for connection in node["connections"].values()] == [
        "CONNECTED", "NEVER_CONNECTED", "RECOVERING", "DISCONNECTED", "AUTHENTICATING", "VERSION_MISMATCH", "NODE_MAP_MISMATCH", "INVALID",
    ]


def _three_nodes(third_seen_as):
    """Nodes 0 and 1 up and connected; node 2 unreachable, seen by them as ``third_seen_as``."""
    up = [NodeReport(index=i, host=f"10.0.0.{i}", reachable=True, status="READY", version="580.95.09",
                     hostname=f"tray{i}", cells=["C", "C", third_seen_as]) for i in range(2)]
    return up + [NodeReport(index=2, host="10.0.0.2", reachable=False, cells=["I", "I", "I"])]


def test_json_580_is_tab_indented_and_leaves_out_a_node_nothing_reached():
    report = DomainReport(nodes=_three_nodes("I"), timestamp="t", local_index=0)
    rendered = ctlformat.render_json(report, with_hostname=True, sparse=True)
    assert rendered.splitlines()[1] == '\t"nodes": {'
    document = json.loads(rendered)
    assert sorted(document["nodes"]) == ["0", "1"] and document["status"] == "DEGRADED"
    assert all(sorted(node["connections"]) == ["0", "1"] for node in document["nodes"].values())


@pytest.mark.parametrize("seen_as", ["R", "D"])
def test_json_580_keeps_a_node_its_peers_were_connected_to(seen_as):
    document = json.loads(ctlformat.render_json(DomainReport(nodes=_three_nodes(seen_as), timestamp="t", local_index=0),
                                                with_hostname=True, sparse=True))
    assert document["nodes"]["2"]["status"] == "UNAVAILABLE" and document["nodes"]["2"]["version"] == ""
    assert document["nodes"]["0"]["connections"]["2"]["status"] == {"R": "RECOVERING", "D": "DISCONNECTED"}[seen_as]


def test_json_580_lists_every_node_of_a_domain_nothing_answered_in():
    nodes = [NodeReport(index=i, host=f"10.0.0.{i}", reachable=False, cells=["I", "I"]) for i in range(2)]
    document = json.loads(ctlformat.render_json(DomainReport(nodes=nodes, timestamp="t", local_index=0),
                                                with_hostname=True, sparse=True))
    assert document["status"] == "DOWN"
    assert {index: node["status"] for index, node in document["nodes"].items()} == {"0": "UNAVAILABLE", "1": "UNAVAILABLE"}


def test_json_before_580_lists_every_node():
    document = json.loads(ctlformat.render_json(DomainReport(nodes=_three_nodes("I"), timestamp="t", local_index=0),
                                                with_hostname=False))
    assert sorted(document["nodes"]) == ["0", "1", "2"] and document["nodes"]["2"]["status"] == "UNAVAILABLE"


def test_three_letter_cells_keep_a_separating_blank_in_narrow_columns():
    nodes = [NodeReport(index=i, host=f"10.0.0.{i}", reachable=True, status="READY", cells=["C", "!V!"]) for i in range(2)]
    text = ctlformat.render_text(DomainReport(nodes=nodes, timestamp="t", local_index=0), layout=ctlformat.LAYOUT_570_00)
    assert "       0        C  !V!\n" in text


@pytest.mark.parametrize(
    "statuses, cell_rows, expected",
    [
        (["READY", "READY"], [["C", "C"], ["C", "C"]], "UP"),
        (["READY", "READY"], [["C", "R"], ["C", "C"]], "DEGRADED"),
        (["READY", "UNAVAILABLE"], [["C", "C"], ["I", "I"]], "DEGRADED"),
        (["READY", "READY"], [["C", "!V!"], ["!V!", "C"]], "DEGRADED"),
        (["INITIALIZING", "UNAVAILABLE"], [["C", "N"], ["I", "I"]], "DOWN"),
        (["UNAVAILABLE", "UNAVAILABLE"], [["I", "I"], ["I", "I"]], "DOWN"),
    ],
)
def test_domain_state_rule(statuses, cell_rows, expected):
    nodes = [
        NodeReport(index=i, host=str(i), reachable=status != "UNAVAILABLE", status=status, cells=row)
        for i, (status, row) in enumerate(zip(statuses, cell_rows))
    ]
    assert DomainReport(nodes=nodes, timestamp="t", local_index=0).status == expected
