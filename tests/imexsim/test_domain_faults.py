"""Fault scenarios on live simulated daemons: the matrix must come from what really happens."""
from __future__ import annotations

import json
import signal

import pytest

from conftest import all_connected, cells


def row(view: dict, index: int) -> list[str]:
    return [connection["status"] for connection in view["nodes"][str(index)]["connections"].values()]


def column(view: dict, index: int, rows) -> list[str | None]:
    """Cells toward node INDEX; None where 580's sparse JSON leaves the connection out."""
    return [cells(view).get((source, index)) for source in rows]


def test_killed_daemon_is_unavailable_and_recovering_then_a_restart_reconnects(make_cluster):
    cluster = make_cluster(3)
    cluster.start_all()
    cluster.wait_for(0, all_connected, "UP")
    cluster.stop(1, signal.SIGKILL)
    view = cluster.wait_for(0, lambda v: column(v, 1, (0, 2)) == ["RECOVERING"] * 2, "cells toward the killed node R")
    node = view["nodes"]["1"]
    assert (node["status"], node["version"], node["changed"]) == ("UNAVAILABLE", "", False)
    assert row(view, 1) == ["INVALID"] * 3
    assert view["status"] == "DEGRADED"
    text = cluster.ctl(2, "-N").stdout
    assert f"Node #1   - {cluster.addresses[1]:<15} - UNAVAILABLE          - Version:\n" in text
    assert "       1        I   I   I\n" in text
    assert "       0        C   R   C\n" in text
    # Restart = new instance: peers reconnect and clean up what they held from the old one.
    cluster.start(1)
    cluster.wait_for(2, all_connected, "UP after restart")
    cluster.wait_for_log(0, "Detected a new IMEX instance on node 1")


def test_clean_shutdown_is_disconnected(make_cluster):
    cluster = make_cluster(3)
    cluster.start_all()
    cluster.wait_for(0, all_connected, "UP")
    assert cluster.stop(2, signal.SIGTERM) == 0
    view = cluster.wait_for(0, lambda v: column(v, 2, (0, 1)) == ["DISCONNECTED"] * 2, "cells toward the stopped node D")
    assert row(view, 2) == ["INVALID"] * 3
    assert "IMEX daemon shutdown complete." in cluster.log_path(2).read_text()  # node 2 has exited
    cluster.wait_for_log(1, "announced its shutdown")  # node 1 hears it on its own thread


def test_frozen_daemon_is_lost_by_heartbeat_and_recovers(make_cluster):
    cluster = make_cluster(2)
    cluster.start_all()
    cluster.wait_for(0, all_connected, "UP")
    cluster.send(1, signal.SIGSTOP)  # sockets stay open: only missing heartbeats reveal it
    try:
        cluster.wait_for_cell(0, 1, "R")
        view = cluster.domain(0)
        assert view["nodes"]["1"]["status"] == "UNAVAILABLE"  # its command service cannot answer either
        assert cells(view)[(0, 1)] == "RECOVERING"
    finally:
        cluster.send(1, signal.SIGCONT)
    cluster.wait_for(0, all_connected, "UP after SIGCONT")
    assert "Detected a new IMEX instance" not in cluster.log_path(0).read_text()  # same instance


def test_grace_time_turns_recovering_into_disconnected(make_cluster):
    cluster = make_cluster(2)
    cluster.configure(0, settings={"IMEX_NODE_DISCONNECTED_GRACE_TIME": "1"})
    cluster.start_all()
    cluster.wait_for(0, all_connected, "UP")
    cluster.stop(1, signal.SIGKILL)
    cluster.wait_for_cell(0, 1, "R")  # within the grace time
    cluster.wait_for_cell(0, 1, "D")
    cluster.wait_for_log(0, "Grace time of 1 s expired for node 1")


def test_version_mismatch(make_cluster):
    cluster = make_cluster(3)
    cluster.configure(2, version="580.65.06")
    cluster.start_all()
    view = cluster.wait_for(
        0, lambda v: row(v, 2) == ["VERSION_MISMATCH", "VERSION_MISMATCH", "CONNECTED"] and column(v, 2, (0, 1)) == ["VERSION_MISMATCH"] * 2
        and row(v, 0)[:2] == row(v, 1)[:2] == ["CONNECTED"] * 2,
        "!V! between node 2 and the others, C between 0 and 1",
    )
    assert [node["status"] for node in view["nodes"].values()] == ["READY"] * 3
    assert view["nodes"]["2"]["version"] == "580.65.06"
    assert cells(view)[(0, 1)] == "CONNECTED"
    assert view["status"] == "DEGRADED"
    assert "       2        !V! !V! C\n" in cluster.ctl(1, "-N").stdout


def test_node_map_mismatch(make_cluster):
    cluster = make_cluster(3)
    # Node 2 was given a list with one more (never started) tray: same order, different map.
    cluster.configure(2, entries=[*cluster.addresses, "127.0.0.1"])
    cluster.start_all()
    view = cluster.wait_for(
        0, lambda v: row(v, 2) == ["NODE_MAP_MISMATCH", "NODE_MAP_MISMATCH", "CONNECTED"] and column(v, 2, (0, 1)) == ["NODE_MAP_MISMATCH"] * 2
        and row(v, 0)[:2] == row(v, 1)[:2] == ["CONNECTED"] * 2,
        "!M! between node 2 and the others, C between 0 and 1",
    )
    assert cells(view)[(1, 0)] == "CONNECTED"
    assert view["status"] == "DEGRADED"
    assert "       0        C   C   !M!\n" in cluster.ctl(0, "-N").stdout


@pytest.mark.parametrize("version", ["570.172.08", "580.95.09"])
def test_three_of_eighteen_up(make_cluster, version):
    cluster = make_cluster(18)
    for index in range(18):
        cluster.configure(index, version=version)
    cluster.start(0, 1, 2)
    view = cluster.wait_for(0, lambda v: all(cells(v).get((a, b)) == "CONNECTED" for a in range(3) for b in range(3)), "3 nodes connected")
    if version.startswith("570."):
        for source in range(3):
            assert row(view, source)[3:] == ["NEVER_CONNECTED"] * 15
        for source in range(3, 18):
            assert view["nodes"][str(source)]["status"] == "UNAVAILABLE"
            assert row(view, source) == ["INVALID"] * 18
    else:  # 580 leaves out the 15 nodes nothing ever reached, and every connection to them
        assert sorted(view["nodes"], key=int) == ["0", "1", "2"]
        for source in range(3):
            assert row(view, source) == ["CONNECTED"] * 3
    assert view["status"] == "DEGRADED"
    assert "       0        C   C   C   N   N   N   N   N   N   N   N   N   N   N   N   N   N   N\n" in cluster.ctl(1, "-N").stdout


def test_nothing_up(make_cluster):
    cluster = make_cluster(3)
    query = cluster.ctl(0, "-q")
    assert (query.returncode, query.stdout) == (1, "Query Status returned error code: 14\n")
    result = cluster.ctl(0, "-N", "-j")
    assert result.returncode == 0  # a report was produced: every node unreachable
    view = json.loads(result.stdout)
    assert view["status"] == "DOWN"
    assert {node["status"] for node in view["nodes"].values()} == {"UNAVAILABLE"}
    assert set(cells(view).values()) == {"INVALID"}
    assert cluster.ctl(0, "-N").stdout.endswith("\nDomain State: DOWN\n")


def test_unreachable_command_service_keeps_the_domain_degraded(make_cluster):
    """Peer links up but the command port closed (reference §8: blocked 50005)."""
    cluster = make_cluster(3)
    cluster.configure(1, settings={"IMEX_CMD_ENABLED": "0"})
    cluster.start(0, 2)
    cluster.launch(1)  # its readiness cannot be polled: it has no command service
    view = cluster.wait_for(0, lambda v: column(v, 1, (0, 2)) == ["CONNECTED"] * 2, "peer links to node 1 up")
    assert view["nodes"]["1"]["status"] == "UNAVAILABLE"
    assert view["nodes"]["1"]["version"] == ""
    assert row(view, 1) == ["INVALID"] * 3
    assert view["status"] == "DEGRADED"


def test_sigusr1_reconnects_without_losing_the_domain(make_cluster):
    cluster = make_cluster(2)
    cluster.start_all()
    cluster.wait_for(0, all_connected, "UP")
    cluster.send(0, signal.SIGUSR1)
    cluster.wait_for_log(0, "Received SIGUSR1, re-establishing all outgoing connections.")
    cluster.send(0, signal.SIGUSR1)  # within 5 s of the first: ignored
    cluster.wait_for_log(0, "Ignoring SIGUSR1")
    # Both outgoing connections (to node 1 and to itself) were really made again.
    for peer in range(2):
        log = cluster.wait_for_log(0, f"Connection established to node {peer} with address", count=2)
    cluster.wait_for(0, all_connected, "UP after SIGUSR1")
    assert log.count("Received SIGUSR1, re-establishing") == 1
    assert "Connection lost" not in log and "Detected a new IMEX instance" not in log
