# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host names in the node list (imex_node_names): whole runs on the simulated 1 x 3 domain. The node list names
slots; a swapped tray (another address) takes its slot without a restart of its peers, which are sent SIGUSR1;
moving between addresses and names is a restart; every refusal names what it refuses, before any write."""
from __future__ import annotations

import re
import time

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import describe, split
from ansible_collections.rackscale.imex.plugins.plugin_utils._domain import build_model
from ansible_collections.rackscale.imex.plugins.plugin_utils._option_table import convert_option
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import node_names
from ansible_collections.rackscale.imex.tests.unit.plan.scenario import Bed, Run, run
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import NODES_PATH
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import material

T1, T2, T3 = "rack1-tray01", "rack1-tray02", "rack1-tray03"
ALL = [T1, T2, T3]
NAMES = {"imex_node_names": True}
SLOTS = ["rack1-slot-00", "rack1-slot-01", "rack1-slot-02"]
NEW_ADDRESS = "198.18.1.99"
ADDRESS_2 = "198.18.1.12"  # rack1-tray02 before its swap


def named_bed():
    """The healthy domain, its trays with imex_node_index, after the run that turned names on."""
    bed = Bed(node_index=True)
    first = run(bed, every=NAMES)
    assert first.restarted == ALL and not first.refused, first.problems
    return bed


def instances(bed):
    return {tray: (entry.running, entry.started) for tray, entry in bed.trays.items()}


def block_of(bed, tray):
    return [line.split() for line in split(bed.trays[tray].hosts)[1].splitlines()[1:-1]]


# --- the slot names --------------------------------------------------------------------------------

@pytest.mark.parametrize("domain, index, name", [
    ("rack1", 0, "rack1-slot-00"),
    ("rack07", 17, "rack07-slot-17"),
    ("GB200_r1.p0", 3, "gb200-r1-p0-slot-03"),
    ("__", 1, "imex-slot-01"),
    ("r" * 80, 2, "r" * 55 + "-slot-02"),
    ("nvl_3f2a_32766", 100, "nvl-3f2a-32766-slot-100"),
])
def test_a_slot_name_is_one_dns_label_made_from_the_domain(domain, index, name):
    assert node_names.slot_name(domain, index) == name
    assert re.fullmatch(r"(?!-)[a-z0-9-]{1,63}(?<!-)", name) and not name.isdigit()


# --- turning names on and off: a restart, guarded as any other --------------------------------------

def test_turning_names_on_restarts_the_domain_once_with_slot_names_and_a_hosts_block_on_every_tray():
    bed = Bed(node_index=True)
    first = run(bed, every=NAMES)
    assert first.written == {tray: ["node list", "hosts block"] for tray in ALL}
    assert first.restarted == ALL and first.verdicts == {bed.domain: "healthy"}
    for tray in ALL:
        assert bed.trays[tray].files[NODES_PATH]["content"] == "".join(slot + "\n" for slot in SLOTS)
        assert block_of(bed, tray) == [[address, slot] for address, slot in zip(bed.model["domains"]["rack1"]["addresses"], SLOTS)]
        # Everything outside the block is as it was.
        assert bed.trays[tray].hosts.startswith(split(bed.trays[tray].hosts)[0]) and "ip6-allrouters" in bed.trays[tray].hosts
    again = run(bed, every=NAMES)
    assert (again.written, again.restarted, again.started, again.reconnected) == ({}, [], [], [])


def test_turning_names_on_under_work_is_refused_as_any_restart_and_nothing_is_written():
    bed = Bed(node_index=True)
    bed.trays[T2].work = [{"pid": 4242, "name": "python3"}]
    refused = run(bed, every=NAMES)
    assert refused.stopped_at == "restart" and refused.written == {}, refused.problems
    said = "\n".join(refused.problems)
    assert "work runs on it" in said and "pid 4242 python3" in said and "Nothing was written" in said
    assert all(split(bed.trays[tray].hosts)[1] is None for tray in ALL)


def test_turning_names_off_restarts_with_addresses_and_removes_the_block():
    bed = named_bed()
    off = run(bed)
    assert off.restarted == ALL and off.written == {tray: ["node list", "hosts block"] for tray in ALL}
    assert all(split(bed.trays[tray].hosts)[1] is None for tray in ALL)
    assert bed.trays[T1].files[NODES_PATH]["content"].splitlines() == bed.model["domains"]["rack1"]["addresses"]


# --- a swapped tray: the hosts blocks change, the node list does not: no restart ---------------------

def test_a_swapped_tray_takes_its_slot_the_peers_reconnect_and_keep_their_instances():
    bed = named_bed()
    before = instances(bed)
    bed.swap(T2, NEW_ADDRESS)
    swap = run(bed, every=NAMES)
    assert not swap.refused, swap.problems
    assert swap.restarted == [] and swap.started == [T2]
    assert swap.written == {T1: ["hosts block"], T2: ["node list", "hosts block", "config"], T3: ["hosts block"]}
    assert swap.reconnected == [T1, T3]
    assert {tray: instances(bed)[tray] for tray in (T1, T3)} == {tray: before[tray] for tray in (T1, T3)}
    assert swap.verdicts == {bed.domain: "healthy"}
    for tray in ALL:
        assert block_of(bed, tray)[1] == [NEW_ADDRESS, SLOTS[1]]
        assert bed.trays[tray].files[NODES_PATH]["content"] == "".join(slot + "\n" for slot in SLOTS)
    restart_plan = dict(swap.plans)["restart"]
    assert restart_plan["trays"][T1]["reconnect"] == ("new addresses of slot names in /etc/hosts (written on %s)"
                                                      % ", ".join(ALL))
    assert "sending SIGUSR1" in restart_plan["trays"][T3]["action"]
    report = swap.reports[bed.domain]
    assert report["slots_moved"] == {T2: NEW_ADDRESS}
    assert report["message"].endswith("; rack1-tray02 took its slot at a new address without a restart of its peers "
                                      "(rack1-tray02: %s)" % NEW_ADDRESS), report["message"]
    settled = run(bed, every=NAMES)
    assert (settled.written, settled.restarted, settled.started, settled.reconnected) == ({}, [], [], [])


def test_a_swap_while_work_runs_on_the_peers_is_made_without_touching_their_daemons():
    bed = named_bed()
    before = instances(bed)
    for tray in (T1, T3):
        bed.trays[tray].work = [{"pid": 4242, "name": "python3"}]
    bed.swap(T2, NEW_ADDRESS)
    swap = run(bed, every=NAMES)
    assert not swap.refused, swap.problems
    assert swap.restarted == [] and swap.started == [T2] and swap.reconnected == [T1, T3]
    assert {tray: instances(bed)[tray] for tray in (T1, T3)} == {tray: before[tray] for tray in (T1, T3)}
    assert swap.verdicts == {bed.domain: "healthy"}


def started_by_hand(bed, tray, address):
    """A replacement board whose daemon the operator already started with its peer's files: only the
    addresses in the hosts blocks are left to change, and no tray starts in the run."""
    bed.swap(tray, address)
    peer = bed.trays[T1]
    bed.trays[tray].files = {path: dict(found) for path, found in peer.files.items()}
    bed.trays[tray].hosts = peer.hosts
    bed.trays[tray].start()


def test_new_addresses_alone_signal_every_running_daemon_and_restart_nothing():
    bed = named_bed()
    before = instances(bed)
    started_by_hand(bed, T2, NEW_ADDRESS)
    moved = run(bed, every=NAMES)
    assert moved.written == {tray: ["hosts block"] for tray in ALL} and moved.restarted == [] and moved.started == []
    assert moved.reconnected == ALL and moved.verdicts == {bed.domain: "healthy"}, moved.problems
    assert {tray: instances(bed)[tray] for tray in (T1, T3)} == {tray: before[tray] for tray in (T1, T3)}


def test_without_the_signal_the_daemons_keep_dialling_the_old_address_and_the_proof_fails(monkeypatch):
    """The reconnect is what makes new addresses work: a plan that forgot it fails its proof."""
    bed = named_bed()
    started_by_hand(bed, T2, NEW_ADDRESS)
    monkeypatch.setattr(node_names, "reconnects", lambda *_args: {})
    forgot = run(bed, every=NAMES)
    assert forgot.stopped_at == "prove" and forgot.reconnected == [] and forgot.restarted == []
    assert "cannot reach the moved slots" in "\n".join(forgot.problems)


def test_a_swap_under_check_predicts_and_changes_nothing():
    bed = named_bed()
    bed.swap(T2, NEW_ADDRESS)
    before = (bed.snapshot(), {tray: entry.hosts for tray, entry in bed.trays.items()}, instances(bed))
    checked = run(bed, every=NAMES, check=True)
    assert (bed.snapshot(), {tray: entry.hosts for tray, entry in bed.trays.items()}, instances(bed)) == before
    assert checked.written == {} and checked.restarted == [] and checked.reconnected == []
    assert checked.would_write == {T1: ["hosts block"], T2: ["node list", "hosts block", "config"], T3: ["hosts block"]}
    real = run(bed, every=NAMES)
    assert real.restarted == [] and real.started == [T2]
    assert checked.decisions()["restart"] == real.decisions()["restart"] == []


def test_a_swap_with_a_peer_needing_a_restart_under_work_is_refused():
    """Only the replacement tray may join under work: a peer whose own files change still needs the restart."""
    bed = named_bed()
    bed.swap(T2, NEW_ADDRESS)
    bed.trays[T1].work = [{"pid": 4242, "name": "python3"}]
    refused = run(bed, every=dict(NAMES, imex_server_port=50010))
    assert refused.stopped_at == "restart" and "work runs on it" in "\n".join(refused.problems)
    assert refused.restarted == [] and refused.reconnected == []
    # Nothing was written: no hosts block is left that its running daemon did not resolve.
    assert refused.written == {} and all(block_of(bed, tray)[1] == [ADDRESS_2, SLOTS[1]] for tray in (T1, T3))


# --- refusals before any write -----------------------------------------------------------------------

@pytest.mark.parametrize("options, phrase", [
    (dict(NAMES, imex_mode="dra_host_managed"), "imex_mode=dra_host_managed does not take imex_node_names=true"),
    (dict(NAMES, imex_mode="slurm_per_job", imex_channel0=False),
     "imex_mode=slurm_per_job does not take imex_node_names=true"),
    (dict(NAMES, imex_mode="dra", imex_channel0=False), "imex_mode=dra does not take imex_node_names=true"),
    (dict(NAMES, imex_driver_version="570.148.08"),
     "imex_node_names needs driver 570.158.01 or newer (host names in nodes_config.cfg), imex_driver_version is "
     "570.148.08"),
])
def test_names_are_refused_by_name_before_any_tray_is_read(options, phrase):
    bed = Bed(node_index=True)
    refused = run(bed, every=options)
    assert refused.stopped_at == "preflight" and refused.written == {}
    assert phrase in "\n".join(refused.problems), refused.problems


def test_the_slurm_mode_takes_names():
    bed = Bed("mode_slurm", node_index=True)
    outcome = run(bed, every=dict(NAMES, imex_mode="slurm", imex_channel0=False))
    assert outcome.restarted == ALL and not outcome.refused, outcome.problems


def test_names_need_a_slot_on_every_tray():
    refused = run(Bed(), every=NAMES)
    assert refused.stopped_at == "preflight"
    assert ("domain rack1: imex_node_names needs imex_node_index on every tray (its slot, 0..2), so that a "
            "replacement tray takes the old one's slot; set on none of %s" % ", ".join(ALL)) in refused.problems


def test_names_on_one_tray_only_are_refused_naming_who_holds_which_value():
    refused = run(Bed(node_index=True), by_tray={T2: NAMES})
    assert refused.stopped_at == "preflight" and "imex_node_names" in "\n".join(refused.problems)
    assert T2 in "\n".join(refused.problems)


def test_a_driver_too_old_for_names_is_refused_naming_tray_and_release_before_any_write():
    bed = Bed(node_index=True)
    for tray in ALL:
        bed.trays[tray].template.update(driver_version="570.148.08", imex_version="570.148.08")
    refused = run(bed, every=NAMES)
    assert refused.stopped_at == "read" and refused.written == {}
    assert ("tray rack1-tray01 (domain rack1) runs driver 570.148.08: imex_node_names needs 570.158.01 or newer"
            in "\n".join(refused.problems))


def test_a_slot_name_mapped_outside_the_block_is_refused_naming_tray_and_line():
    bed = Bed(node_index=True)
    bed.trays[T3].hosts += "10.0.0.7 rack1-slot-02\n"
    refused = run(bed, every=NAMES)
    assert refused.stopped_at == "read" and refused.written == {}
    assert ("tray rack1-tray03: /etc/hosts maps rack1-slot-02 outside the block of rackscale.imex (line 8)"
            in "\n".join(refused.problems)), refused.problems


def test_an_address_that_is_a_host_name_is_refused_with_names():
    problems = node_names.preflight_problems(
        {"host_domain": {"a": "r"}, "domains": {"r": {"order": "explicit", "nodes": [
            {"host": "a", "address": "a.example", "index": 0}]}}},
        {"a": {"imex_node_names": True}}, ["a"])
    assert problems == ["domain r: tray a: its IMEX address 'a.example' is a host name; with imex_node_names the "
                        "managed block of /etc/hosts maps each slot name to an address: set imex_address to the "
                        "tray's IP address"]


# --- TLS: peers check the certificate against the slot name -----------------------------------------

def test_with_tls_the_certificate_must_carry_the_slot_name():
    addresses = ["198.18.1.%d" % (11 + index) for index in range(3)]
    by_address = material(ips=addresses, now=time.time(), days=3650)
    refused = run(Bed(node_index=True), every=dict(NAMES, imex_tls=True, **by_address))
    assert refused.stopped_at == "preflight"
    assert "rack1-slot-00" in "\n".join(refused.problems), refused.problems
    by_name = material(dns=SLOTS, now=time.time(), days=3650)
    accepted = run(Bed(node_index=True), every=dict(NAMES, imex_tls=True, **by_name))
    assert accepted.stopped_at != "preflight", accepted.problems


# --- options as -e and AWX surveys give them ---------------------------------------------------------

def test_names_and_slots_given_as_text_are_taken_as_their_values():
    """-e imex_node_names=yes and an INI inventory's imex_node_index=2 arrive as strings."""
    assert convert_option("imex_node_names", "yes") == (True, None)
    assert convert_option("imex_node_names", "maybe")[1] == "imex_node_names = 'maybe' is not a boolean"
    model = build_model({"imex_domains": ALL, "rack1": ALL},
                        {tray: {"imex_address": "198.18.1.%d" % (11 + index), "imex_node_index": str(2 - index)}
                         for index, tray in enumerate(ALL)}, domain_groups=["rack1"])
    options = {tray: {"imex_node_names": convert_option("imex_node_names", "true")[0]} for tray in ALL}
    assert node_names.preflight_problems(model, options, ALL) == []
    assert node_names.node_list("rack1", model["domains"]["rack1"], True) == SLOTS
    first = node_names.hosts_entries("rack1", model["domains"]["rack1"], True)[0]
    assert first == {"address": "198.18.1.13", "name": "rack1-slot-00"}


# --- what a running daemon resolved: a run that stopped between the blocks and the signal -------------

def readdressed(bed, tray, address):
    """The tray's IMEX address changes in the inventory (a re-addressed network); its daemon keeps running."""
    bed.trays[tray].address = address
    bed.model = bed.build_model()


def stopped_after_the_write(bed, **kwargs):
    """A run that wrote the hosts blocks and was killed before its restarts and signals."""
    killed = Run(bed, **kwargs)
    for stage in killed:
        if stage == "restart":
            break
    return killed.outcome


def test_a_run_stopped_after_writing_the_blocks_and_before_the_signal_is_signalled_by_the_next_run():
    bed = named_bed()
    before = instances(bed)
    readdressed(bed, T2, NEW_ADDRESS)
    killed = stopped_after_the_write(bed, every=NAMES)
    assert killed.written == {tray: ["hosts block"] for tray in ALL} and killed.reconnected == []
    assert all(block_of(bed, tray)[1] == [NEW_ADDRESS, SLOTS[1]] for tray in ALL)
    following = run(bed, every=NAMES)
    assert following.written == {} and following.restarted == [] and following.started == []
    assert following.reconnected == ALL and following.verdicts == {bed.domain: "healthy"}, following.problems
    assert instances(bed) == before
    reason = dict(following.plans)["restart"]["trays"][T1]["reconnect"]
    assert re.fullmatch(r"its daemon resolved another hosts block \([0-9a-f]{12}\) than the one on disk \([0-9a-f]{12}\): "
                        r"written by a run that stopped before it signalled", reason), reason
    # The signal moved the records on: the run after it signals nothing.
    settled = run(bed, every=NAMES)
    assert (settled.written, settled.restarted, settled.started, settled.reconnected) == ({}, [], [], [])


def test_before_the_records_knew_the_hosts_block_the_next_run_did_not_signal_and_the_proof_failed(monkeypatch):
    """What the record adds: without it the blocks look done and the daemons keep dialling the old address."""
    bed = named_bed()
    readdressed(bed, T2, NEW_ADDRESS)
    stopped_after_the_write(bed, every=NAMES)
    monkeypatch.setattr(node_names, "resolved_hosts", lambda *_args: ("", ""))
    following = run(bed, every=NAMES)
    assert following.reconnected == [] and following.stopped_at == "prove"


def block_digest(bed, tray):
    """The digest of the hosts block on the tray's disk (None: no block)."""
    return describe(bed.trays[tray].hosts)["sha256"]


def test_a_daemon_whose_record_holds_the_block_on_disk_is_not_signalled():
    bed = named_bed()
    for tray in ALL:
        assert bed.trays[tray].instance["loaded"]["hosts_block"] == block_digest(bed, tray)
    again = run(bed, every=NAMES)
    assert again.reconnected == [] and again.planned_reconnect == []
    read_plan = dict(again.plans)["read"]["trays"]
    assert {tray: (read_plan[tray]["hosts_unresolved"], read_plan[tray]["hosts_resolved_unknown"]) for tray in ALL} == {
        tray: ("", "") for tray in ALL}


def test_a_daemon_without_a_record_of_its_hosts_block_keeps_todays_rule_and_the_read_says_why():
    bed = named_bed()
    readdressed(bed, T2, NEW_ADDRESS)
    stopped_after_the_write(bed, every=NAMES)
    del bed.trays[T1].instance["loaded"]["hosts_block"]  # recorded by an older release of the collection
    bed.trays[T3].instance["loaded"] = None  # started by hand
    following = run(bed, every=NAMES)
    assert following.reconnected == [T2]
    read_plan = dict(following.plans)["read"]["trays"]
    for tray in (T1, T3):
        assert read_plan[tray]["hosts_unresolved"] == ""
        assert read_plan[tray]["hosts_resolved_unknown"].startswith(
            "no record of the hosts block its running daemon resolved"), read_plan[tray]
    assert read_plan[T2]["hosts_resolved_unknown"] == ""


def test_the_signal_a_stopped_run_left_is_predicted_under_check_and_made_under_work():
    bed = named_bed()
    readdressed(bed, T2, NEW_ADDRESS)
    stopped_after_the_write(bed, every=NAMES)
    before = (bed.snapshot(), instances(bed), {tray: dict(bed.trays[tray].instance["loaded"]) for tray in ALL})
    checked = run(bed, every=NAMES, check=True)
    assert checked.planned_reconnect == ALL and checked.reconnected == []
    assert (bed.snapshot(), instances(bed), {tray: dict(bed.trays[tray].instance["loaded"]) for tray in ALL}) == before
    for tray in ALL:
        bed.trays[tray].work = [{"pid": 4242, "name": "python3"}]
    busy = run(bed, every=NAMES)
    assert not busy.refused, busy.problems
    assert busy.reconnected == ALL and busy.restarted == [] and busy.verdicts == {bed.domain: "healthy"}
    assert instances(bed) == before[1]
