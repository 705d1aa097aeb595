"""A tray swapped while GPU work runs on the others, with host names in the node list (imex_node_names).

On a 1 x 4 bed with names on: work runs on three trays, the fourth is swapped for a board with another
address (simrack swap), and site.yml runs with the inventory's new address. No peer restarts (their
MainPIDs stay), the swapped tray starts, validate.yml proves the domain UP, and the report names the swap.
Three playbook runs: the one that turns names on, the one after the swap, the proof.
"""
from __future__ import annotations

import json
import os
import time

import pytest
import yaml

from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import block_digest, split
from conftest import requires_rack, run_playbook

pytestmark = requires_rack
RACK_SHAPE = (1, 4)
TRAYS = ["rack1-tray01", "rack1-tray02", "rack1-tray03", "rack1-tray04"]
SWAPPED = "rack1-tray03"
PEERS = [tray for tray in TRAYS if tray != SWAPPED]
SLOTS = ["rack1-slot-%02d" % index for index in range(4)]
NODE_LIST = "/etc/nvidia-imex/nodes_config.cfg"


def names_inventory(rack, path):
    """The bed's inventory (its current addresses) with imex_node_names on and every tray's slot."""
    with open(rack.inventory, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    domain = data["all"]["children"]["imex_domains"]["children"]["rack1"]
    domain["vars"] = {"imex_node_names": True}
    for index, tray in enumerate(TRAYS):
        domain["hosts"][tray]["imex_node_index"] = index
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def daemon_pids(rack, trays):
    return {tray: rack.ssh(tray, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout.strip()
            for tray in trays}


def resolved_hosts_blocks(rack, trays):
    """{tray: (the hosts block digest its daemon's record says it resolved, the digest of the block on disk)}."""
    found = {}
    for tray in trays:
        record = json.loads(rack.ssh(tray, "cat", "/run/rackscale-imex/loaded/nvidia-imex.json").stdout or "{}")
        on_disk = block_digest(split(rack.ssh(tray, "cat", "/etc/hosts").stdout)[1])
        found[tray] = (record.get("hosts_block", "absent"), on_disk)
    return found


def report(reports):
    with open(os.path.join(reports, "rack1.json"), encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return str(tmp_path_factory.mktemp("reports"))


def test_a_swapped_tray_takes_its_slot_while_work_runs_and_no_peer_restarts(simulated_rack, reports, tmp_path):
    rack = simulated_rack
    options = {"imex_report_dir": reports, "imex_validate_timeout_s": 90}
    first = run_playbook("site.yml", names_inventory(rack, tmp_path / "names.yml"), extravars=options)
    assert first.rc == 0, first.stdout[-6000:]
    for tray in TRAYS:
        assert rack.ssh(tray, "cat", NODE_LIST).stdout.split() == SLOTS, tray
        assert "rack1-slot-02" in rack.ssh(tray, "cat", "/etc/hosts").stdout, tray
    for tray in PEERS:
        rack.simrack("fault", "busy", tray)
    try:
        before = daemon_pids(rack, PEERS)
        assert "0" not in before.values(), before
        new_address = rack.simrack("swap", SWAPPED).stdout.strip().splitlines()[-1]
        # The board's daemon found no address of its own in the old block at boot; systemd retried it
        # (Restart=on-failure) until its start limit, after which it refuses a plain start.
        deadline = time.monotonic() + 60
        while rack.ssh(SWAPPED, "systemctl", "is-failed", "nvidia-imex").stdout.strip() != "failed":
            assert time.monotonic() < deadline, rack.ssh(SWAPPED, "systemctl", "status", "nvidia-imex").stdout
            time.sleep(1)
        swap = run_playbook("site.yml", names_inventory(rack, tmp_path / "swapped.yml"), extravars=options)
        assert swap.rc == 0, swap.stdout[-6000:]
        # The peers are the same instances: their jobs kept what they import; the swapped tray runs.
        assert daemon_pids(rack, PEERS) == before
        assert daemon_pids(rack, [SWAPPED])[SWAPPED] != "0"
        for tray in TRAYS:
            hosts = rack.ssh(tray, "cat", "/etc/hosts").stdout
            assert "%s\track1-slot-02" % new_address in hosts, (tray, hosts)
            assert rack.ssh(tray, "cat", NODE_LIST).stdout.split() == SLOTS, tray
        # What each daemon resolved is in its record: the peers' moved on by their signal, the new board's
        # written at its start. A run that stopped before the signal would leave them behind, and the next
        # run signals where they differ.
        resolved = resolved_hosts_blocks(rack, TRAYS)
        assert all(recorded == on_disk and on_disk for recorded, on_disk in resolved.values()), resolved
        swapped = report(reports)
        assert swapped["slots_moved"] == {SWAPPED: new_address}, swapped
        assert "%s took its slot at a new address without a restart of its peers" % SWAPPED in swapped["message"]
        proof = run_playbook("validate.yml", names_inventory(rack, tmp_path / "swapped.yml"),
                             extravars=dict(options, imex_validate_timeout_s=30))
        assert proof.rc == 0, proof.stdout[-6000:]
        proven = report(reports)
        assert proven["verdict"] == "healthy" and proven["status"]["domain_state"] == "UP", proven
        assert daemon_pids(rack, PEERS) == before
    finally:
        for tray in PEERS:
            rack.simrack("fault", "heal", "busy", tray)
