"""Node-list entries that are host names, SIGUSR1's re-resolution and the reconnect backoff.

Each node runs in a mount namespace of its own whose /etc/hosts is the node's file (root and
unshare needed, else skipped), as a tray resolves names through its own /etc/hosts.
"""
from __future__ import annotations

import json
import re
import signal
import time

import pytest

from conftest import can_give_own_etc_hosts
from imexsim import wire

pytestmark = pytest.mark.skipif(not can_give_own_etc_hosts(), reason="needs root and unshare for a private /etc/hosts")

SLOTS = ["imex-slot-00", "imex-slot-01", "imex-slot-02"]


def named_cluster(make_cluster, size: int, faults: dict | None = None):
    """SIZE nodes whose node list holds slot names, each resolving them through its own /etc/hosts."""
    cluster = make_cluster(size)
    for index in range(size):
        cluster.configure(index, entries=SLOTS[:size], faults=faults)
        cluster.write_hosts(index, dict(zip(SLOTS, cluster.addresses)))
    return cluster


def status(cluster, index: int) -> dict:
    return wire.query_status(host=cluster.addresses[index], port=cluster.cmd_port)


def cell(cluster, index: int, peer: int) -> str:
    return status(cluster, index)["connections"][str(peer)]


def wait_until(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_host_names_resolve_through_the_trays_own_hosts_file_and_are_logged_as_the_vendor_does(make_cluster):
    cluster = named_cluster(make_cluster, 3)
    cluster.start_all()
    view = cluster.wait_for(0, lambda v: v["status"] == "UP", "UP with host names")
    log = cluster.log_path(1).read_text()
    for slot in SLOTS:
        prefix = r"^\[\w{3} +\d+ \d{4} \d\d:\d\d:\d\d\] \[INFO\] \[tid \d+\] "
        line = prefix + re.escape(f"Treating node config entry '{slot}' as a host name.") + "$"
        assert len(re.findall(line, log, re.MULTILINE)) == 1, log
    # At start: after the configuration lines, before the node is identified (reference §1.4).
    assert log.index("IMEX library communication bind port") < log.index("Treating node config entry") \
        < log.index("Identified this node as ID 1, using bind address of 'imex-slot-01'")
    assert "Connection established to node 2 with address imex-slot-02" in log
    assert status(cluster, 1)["resolved"] == {str(i): address for i, address in enumerate(cluster.addresses)}
    # The ctl shows each node as its node-list entry (it reads the node list), in text and JSON.
    assert [view["nodes"][str(i)]["host"] for i in range(3)] == SLOTS
    text = cluster.ctl(0, "-N").stdout
    assert "Node #2   - imex-slot-02    - READY" in text


def test_an_entry_that_does_not_resolve_stays_unconnected_and_is_looked_up_again(make_cluster):
    cluster = named_cluster(make_cluster, 3)
    cluster.write_hosts(0, dict(zip(SLOTS[:2], cluster.addresses)))   # node 0 has no line for slot 2
    cluster.start_all()
    cluster.wait_for_log(0, "Failed to connect to node 2 with address imex-slot-02: host name 'imex-slot-02' does not resolve")
    assert cell(cluster, 0, 2) == wire.NEVER_CONNECTED and status(cluster, 0)["resolved"]["2"] is None
    cluster.wait_for_cell(2, 0, wire.CONNECTED)      # the others know the name: node 0 is not cut off
    cluster.write_hosts(0, dict(zip(SLOTS, cluster.addresses)))
    cluster.wait_for_cell(0, 2, wire.CONNECTED)      # no signal needed: it never resolved
    assert f"Node config entry 'imex-slot-02' (node 2) now resolves to {cluster.addresses[2]}, was nothing." \
        in cluster.log_path(0).read_text()


def test_sigusr1_resolves_the_names_again_and_reconnects_in_the_same_process(make_cluster):
    """A tray swapped for a board with a new address: only peers that are signalled find it, and
    they stay the same process (same PID), so nothing they imported is lost."""
    cluster = named_cluster(make_cluster, 3)
    cluster.start_all()
    cluster.wait_for(0, lambda v: v["status"] == "UP", "UP with host names")
    pids = [status(cluster, i)["pid"] for i in range(2)]
    old = cluster.addresses[2]

    cluster.stop(2, signal.SIGKILL)                  # the old board is pulled
    new = old.rsplit(".", 1)[0] + ".99"
    cluster.addresses[2] = new
    cluster.configure(2, entries=SLOTS)
    for index in range(3):
        cluster.write_hosts(index, dict(zip(SLOTS, cluster.addresses)))
    cluster.start(2)
    cluster.wait_for_cell(2, 0, wire.CONNECTED)      # the new board resolved the names at its start
    cluster.wait_for_cell(2, 1, wire.CONNECTED)
    # Unsignalled peers keep the address they resolved: the changed /etc/hosts alone moves nothing.
    cluster.wait_for_log(0, "Failed to connect to node 2 with address imex-slot-02")
    assert status(cluster, 0)["resolved"]["2"] == old and cell(cluster, 0, 2) != wire.CONNECTED

    cluster.send(0, signal.SIGUSR1)
    cluster.wait_for_cell(0, 2, wire.CONNECTED)
    resolved_again = f"Node config entry 'imex-slot-02' (node 2) now resolves to {new}, was {old}."
    assert resolved_again in cluster.log_path(0).read_text()
    assert status(cluster, 0)["pid"] == pids[0] == cluster.processes[0].pid
    assert status(cluster, 1)["resolved"]["2"] == old and cell(cluster, 1, 2) != wire.CONNECTED

    # At most one SIGUSR1 per 5 s: one sent at once is ignored, names are not looked up again.
    cluster.write_hosts(0, {**dict(zip(SLOTS, cluster.addresses)), SLOTS[1]: "127.0.0.2"})
    cluster.send(0, signal.SIGUSR1)
    cluster.wait_for_log(0, "Ignoring SIGUSR1")
    assert status(cluster, 0)["resolved"]["1"] == cluster.addresses[1] and cell(cluster, 0, 1) == wire.CONNECTED

    cluster.send(1, signal.SIGUSR1)
    cluster.wait_for(1, lambda v: v["status"] == "UP", "UP once node 1 is signalled too")
    assert status(cluster, 1)["pid"] == pids[1]


def test_the_backoff_schedule_is_followed_step_by_step_and_its_last_step_repeats(make_cluster):
    cluster = make_cluster(2)
    cluster.configure(0, faults={"reconnect_backoff_s": [0.2, 0.4, 0.8]})
    cluster.start(0)                                  # node 1 is down
    log = cluster.wait_for_log(0, "Failed to connect to node 1")
    time.sleep(3)                                     # 0.2 + 0.4 + 0.8 + 0.8 ...: past the last step
    log = cluster.log_path(0).read_text()
    steps = [line.rsplit(" in ", 1)[1] for line in log.splitlines() if "Next connection attempt to node 1 " in line]
    assert steps == ["0.2 s.", "0.4 s.", "0.8 s."]
    cluster.start(1)
    cluster.wait_for(0, lambda v: v["status"] == "UP", "UP once node 1 started")


def test_a_tray_back_from_repair_is_seen_after_the_backoff_unless_its_peers_are_signalled(make_cluster):
    """With the real daemon's schedule a peer that came back waits for the next attempt (15, 31,
    62, 125 s); SIGUSR1 makes it at once. A long first step stands for the real ones."""
    cluster = make_cluster(2)
    cluster.configure(0, faults={"reconnect_backoff_s": [120, 240]})
    cluster.start(1)
    cluster.start(0)                                  # its peer is up: no wait before the first link
    cluster.wait_for(0, lambda v: v["status"] == "UP", "UP")
    pid = status(cluster, 0)["pid"]
    cluster.stop(1)
    cluster.wait_for_cell(0, 1, wire.DISCONNECTED)
    cluster.wait_for_log(0, "Next connection attempt to node 1 with address")
    assert "in 120 s." in cluster.log_path(0).read_text()

    cluster.start(1)                                  # back from repair
    cluster.wait_for_cell(1, 0, wire.CONNECTED)       # it reached its peer at its own start
    time.sleep(2)
    assert cell(cluster, 0, 1) == wire.DISCONNECTED   # the peer is still waiting out its backoff

    cluster.send(0, signal.SIGUSR1)
    cluster.wait_for_cell(0, 1, wire.CONNECTED)
    assert status(cluster, 0)["pid"] == pid


def test_a_schedule_changed_while_running_is_taken_at_the_next_wait_and_a_bad_one_is_ignored(make_cluster):
    cluster = make_cluster(2)
    cluster.start(0)                                  # node 1 is down: 0.5 s retries
    cluster.wait_for_log(0, "Next connection attempt to node 1 with address")
    knobs = cluster.testbed(0) / "faults.json"
    knobs.write_text(json.dumps({"reconnect_backoff_s": "often"}))
    cluster.wait_for_log(0, "Keeping the reconnect schedule: faults.json reconnect_backoff_s must be a list")
    knobs.write_text(json.dumps({"reconnect_backoff_s": [0.3, 60]}))
    cluster.wait_for_log(0, "in 60 s.")
    time.sleep(1)
    log = cluster.log_path(0).read_text()
    assert log.count("Keeping the reconnect schedule") == 1 and log.count("in 60 s.") == 1


def test_a_bad_backoff_schedule_stops_the_daemon_at_start(make_cluster):
    cluster = make_cluster(1)
    cluster.configure(0, faults={"reconnect_backoff_s": [15, 0]})
    assert cluster.launch(0).wait(timeout=20) == 1
    assert "reconnect_backoff_s must be a list of positive numbers" in cluster.log_path(0).read_text()
