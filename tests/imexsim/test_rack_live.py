"""A healthy 18-node domain of live simulated daemons, checked against the vendor samples."""
from __future__ import annotations

import re
import socket

from conftest import SAMPLES, all_connected, run_tool

from imexsim import ctlformat

TIMESTAMP = re.compile(r"^\d{1,2}/\d{1,2}/\d{4} \d\d:\d\d:\d\d\.\d{3}$", re.MULTILINE)


def substitute(text: str, our_addresses: list[str], sample_addresses: list[str], our_version: str, sample_version: str,
               sample_timestamp: str) -> str:
    """Put the sample's addresses, version and timestamp into our report.

    Replacements include the exact padding the vendor layout prescribes, so a misaligned field
    in our output is left untouched and fails the comparison.
    """
    text = TIMESTAMP.sub(sample_timestamp, text)
    for ours, theirs in zip(our_addresses, sample_addresses):
        text = text.replace(f"- {ours:<15} - ", f"- {theirs:<15} - ")
    return text.replace(f"- Version: {our_version}\n", f"- Version: {sample_version}\n")


def test_healthy_18_node_report_is_the_vendor_sample(healthy_rack):
    sample = (SAMPLES / "ctl-N-570.172-18nodes.txt").read_text()
    sample_addresses = re.findall(r"^Node #\d+ +- (\S+)", sample, re.MULTILINE)
    result = healthy_rack.ctl(0, "-N")
    assert result.returncode == 0
    assert TIMESTAMP.search(result.stdout)
    ours = substitute(result.stdout, healthy_rack.addresses, sample_addresses, "580.95.09", "570.172", TIMESTAMP.search(sample)[0])
    assert ours == sample


def test_healthy_18_node_json(healthy_rack):
    view = healthy_rack.domain(5)
    assert list(view) == ["nodes", "timestamp", "status"]
    assert view["status"] == "UP"
    assert TIMESTAMP.match(view["timestamp"])
    assert sorted(view["nodes"], key=int) == [str(i) for i in range(18)]
    for key, node in view["nodes"].items():
        assert list(node) == ["status", "host", "connections", "changed", "version", "hostName"]
        assert node["host"] == healthy_rack.addresses[int(key)]
        assert (node["status"], node["version"], node["changed"], node["hostName"]) == ("READY", "580.95.09", True, socket.gethostname())
        assert list(node["connections"]) == [str(i) for i in range(18)]
        for target, connection in node["connections"].items():
            assert connection == {"host": healthy_rack.addresses[int(target)], "status": "CONNECTED", "changed": True}


def test_hostname_layout_marks_the_local_node(healthy_rack):
    sample_lines = (SAMPLES / "ctl-N-H-580.173.02-nodes.txt").read_text().splitlines()
    result = healthy_rack.ctl(1, "-N", "-H")
    assert result.returncode == 0
    lines = [line for line in result.stdout.splitlines() if line.startswith("Node #")]
    assert len(lines) == 18
    ours = "\n".join(lines[:2])
    first, second = healthy_rack.addresses[:2]
    ours = ours.replace(f"- {first:<18} - ", f"- {'10.66.6.8':<18} - ")
    ours = ours.replace(f"* {second + ' *':<18} - ", f"* {'10.66.6.9 *':<18} - ")
    ours = ours.replace(f"- Version: {'580.95.09':<15} - ", f"- Version: {'580.173.02':<15} - ")
    hostname = socket.gethostname()
    ours = ours.replace(f"Hostname: {hostname}\n", "Hostname: theia0271\n")
    assert ours.endswith(f"Hostname: {hostname}")
    ours = ours[: -len(hostname)] + "theia0272"
    assert ours.splitlines() == sample_lines
    assert all(line.startswith(f"Node #{i:<4}- ") for i, line in enumerate(lines) if i != 1)


def test_query_reports_the_local_daemon_ready(healthy_rack):
    result = healthy_rack.ctl(7, "-q")
    assert (result.returncode, result.stdout) == (0, "READY\n")


def test_query_by_address_and_port(healthy_rack):
    result = run_tool("ctl", ["-i", healthy_rack.addresses[3], str(healthy_rack.cmd_port), "-q"])
    assert (result.returncode, result.stdout) == (0, "READY\n")


def test_layout_570_00_forced_by_environment(healthy_rack):
    result = healthy_rack.ctl(0, "-N", IMEXSIM_CTL_LAYOUT=ctlformat.LAYOUT_570_00)
    lines = result.stdout.splitlines()
    assert "!V! - Version mismatch, communication disabled." not in lines
    assert lines[-2] != "" and lines[-1] == "Domain State: UP"
    assert " Nodes From\\To  0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15 16 17" in lines
    assert f"Node #17  - {healthy_rack.addresses[17]:<15} - READY" in lines


def test_570_00_daemons_print_the_570_00_sample(make_cluster):
    cluster = make_cluster(2)
    for index in range(2):
        cluster.configure(index, version="570.00")
    cluster.start_all()
    cluster.wait_for(0, all_connected, "2 nodes UP")
    sample = (SAMPLES / "ctl-N-570.00-2nodes.txt").read_text()
    result = cluster.ctl(1, "-N")
    ours = TIMESTAMP.sub(TIMESTAMP.search(sample)[0], result.stdout)
    for address, theirs in zip(cluster.addresses, ("10.136.206.47", "10.136.206.48")):
        ours = ours.replace(f"- {address:<15} - READY", f"- {theirs:<15} - READY")
    assert ours == sample
    view = cluster.domain(0)
    assert "hostName" not in view["nodes"]["0"]  # 570 JSON has no hostName
