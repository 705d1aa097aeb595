# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which trays take part in each wave (plan/work.py): a tray with nothing to do includes no wave, a wave with no
worker is included on one runner for its run_once tasks (its gates skipped there), the channels of every tray are
ensured in the first wave, and a write or a pending restart in a domain whose daemon runs makes every tray of it
work."""
from __future__ import annotations

import random

from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import (
    BEFORE,
    TWO_RACKS,
    model_of,
    options_of,
    planned,
    preflight,
    reads_of,
    unreachable_read,
)

THREE_RACKS = dict(TWO_RACKS, rackC=["c1", "c2"])
THREE_RACKS_TRAYS = [tray for trays in THREE_RACKS.values() for tray in trays]


def included_order(plan, play_hosts):
    """The waves in the order Ansible runs them: the trays' results of the looped include come back one tray
    at a time in the play's order (the include's throttle), and the first result that names a wave places it
    (ansible.playbook.included_file.IncludedFile.process_include_results)."""
    order = []
    for tray in play_hosts:
        for index, trays in enumerate(plan["wave_trays"]):
            if tray in trays and index not in order:
                order.append(index)
    return order


def _after_read(domains, play_hosts, every=None, unreachable=(), **reads):
    model = model_of(domains)
    options = options_of(model, every)
    options = {tray: options[tray] for tray in play_hosts}
    plan = preflight(model, options)
    found = reads_of(plan, **reads)
    for tray in unreachable:
        found[tray] = unreachable_read()
    return run_plan.read.after_read(plan, model, options, found, skip_fabric=True)


def test_a_converged_run_proves_every_domain_in_one_wave_on_one_runner():
    # Nothing to write, restart or start on any tray: no wave has anything to pace, so the run proves its
    # domains at once, as validate.yml does: one wave, one runner, no lock refresh, the include not throttled.
    _model, _options, plan = planned(domains=THREE_RACKS)
    assert plan["waves"] == [["rackA", "rackB", "rackC"]]
    assert plan["wave_workers"] == [[]] and plan["wave_channels"] == [[]]
    assert plan["wave_trays"] == [["a1"]]
    assert plan["wave_locks"] == [[]] and plan["wave_include_throttle"] == 0
    assert plan["wave_status_reads"] == plan["wave_proofs"] == plan["wave_verdicts"] == [["rackA", "rackB", "rackC"]]


def test_the_one_wave_of_a_converged_run_takes_the_domains_in_the_play_s_order():
    plan = _after_read(THREE_RACKS, ["c1", "c2", "a1", "a2", "b1", "b2"])
    assert plan["waves"] == [["rackC", "rackA", "rackB"]] and plan["wave_trays"] == [["c1"]]


def test_work_on_one_tray_keeps_a_wave_per_domain():
    # A write, a pending restart, a stopped daemon or a channel to ensure: the waves pace the domains again.
    for reads in ({"c2": {"config": "LOG_LEVEL=4\n"}}, {"c1": {"started": BEFORE - 60}}, {"c2": {"active": False}},
                  {"c2": {"channels": {"0": {"changed": True}}}}):
        _model, _options, plan = planned(domains=THREE_RACKS, reads=reads)
        assert plan["waves"] == [["rackA"], ["rackB"], ["rackC"]], reads
        assert plan["wave_include_throttle"] == 1


def test_a_write_on_one_tray_makes_every_reached_tray_of_its_domain_work_in_its_wave_only():
    _model, _options, plan = planned(domains=THREE_RACKS, reads={"b2": {"config": "LOG_LEVEL=4\n"}})
    assert plan["trays"]["b2"]["write"] is True
    assert plan["wave_workers"] == [[], ["b1", "b2"], []]
    assert plan["wave_trays"] == [["a1"], ["b1", "b2"], ["c1"]]


def test_a_pending_restart_makes_the_whole_domain_work():
    _model, _options, plan = planned(reads={"a1": {"started": BEFORE - 60}})
    assert plan["domains"]["rackA"]["pending"]
    assert plan["wave_workers"] == [["a1", "a2"], []]


def test_a_daemon_the_read_found_stopped_works_alone():
    _model, _options, plan = planned(reads={"b2": {"active": False}})
    assert plan["wave_workers"] == [[], ["b2"]] and plan["wave_trays"] == [["a1"], ["b2", "b1"]]


def test_the_channels_of_every_tray_are_ensured_in_the_first_wave():
    # Not the collection's channels (slurm), and reads that cannot tell whether another mode's boot entries are
    # there: the imex_channels role runs on every tray, before any wave writes.
    _model, _options, plan = planned(domains=THREE_RACKS, every={"imex_mode": "slurm", "imex_channel0": False})
    assert plan["wave_channels"] == [["a1", "a2", "b1", "b2", "c1", "c2"], [], []]
    assert plan["wave_trays"][0] == ["a1", "a2", "b1", "b2", "c1", "c2"]


def test_one_wave_of_every_domain():
    _model, _options, plan = planned(every={"imex_rolling": False}, reads={"b1": {"config": "LOG_LEVEL=4\n"}})
    assert plan["waves"] == [["rackA", "rackB"]]
    assert plan["wave_workers"] == [["b1", "b2"]] and plan["wave_trays"] == [["b1", "b2"]]


def test_a_tray_ssh_did_not_reach_neither_works_nor_runs_a_wave():
    plan = _after_read(TWO_RACKS, ["a1", "a2", "b1", "b2"], unreachable=["a1"], b2={"config": "LOG_LEVEL=4\n"})
    assert plan["unreachable"] == ["a1"] and plan["leaving"] == ["a1"]
    assert plan["wave_workers"] == [[], ["b1", "b2"]] and plan["wave_trays"] == [["a2"], ["b1", "b2"]]
    # Converged but for the dark tray: one wave, run by the first tray reached.
    plan = _after_read(TWO_RACKS, ["a1", "a2", "b1", "b2"], unreachable=["a1"])
    assert plan["wave_workers"] == [[]] and plan["wave_trays"] == [["a2"]]


def test_the_gate_says_once_what_it_skipped():
    _model, _options, plan = planned(skip_fabric=True)
    assert plan["gate_messages"] == [run_plan.read.FABRIC_SKIPPED]
    _model, _options, plan = planned()
    assert plan["gate_messages"] == []


def test_the_gate_says_a_fabric_health_remark_naming_its_tray_and_goes_on():
    # nvidia-smi shows Health Summary Unhealthy on registered GPUs: IMEX still runs, so no refusal, but a
    # warning of the tray's module says no tray; the gate's message does.
    remark = "GPUs 0-3: fabric health is Unhealthy (Bandwidth: Full)"
    _model, _options, plan = planned(reads={"b2": {"fabric_warnings": [remark]}})
    assert plan["gate_messages"] == ["tray b2: " + remark]
    assert plan["wave_workers"] == [[]]


def test_a_wave_none_of_whose_trays_was_reached_runs_nowhere_and_last():
    # A play without any_errors_fatal goes on without the trays ssh did not reach: rackA's are all dark.
    plan = _after_read(TWO_RACKS, ["a1", "a2", "b1", "b2"], {"imex_mode": "slurm", "imex_channel0": False},
                       unreachable=["a1", "a2"])
    # The dark domain's wave goes last (it is ordered by the first tray of its domains that ssh reached).
    assert plan["waves"] == [["rackB"], ["rackA"]]
    assert plan["wave_trays"] == [["b1", "b2"], []] and plan["wave_channels"] == [["b1", "b2"], []]


def _first_in_play(plan, trays):
    order = list(plan["trays"])
    return min(order.index(tray) for tray in trays)


def test_each_wave_is_included_on_the_first_tray_of_its_domains_so_the_waves_keep_their_order():
    # Ansible places a loop's included files in the order the trays' results came back (the first that names
    # a wave places it): rackA converged, a channel missing on b2 alone, so the first wave's work is b2's
    # channels and the second's its runner b1, which answers first. Each wave is included on the first tray
    # of its domains in the play too, as when every tray of its domains included it.
    _model, _options, plan = planned(reads={"b2": {"channels": {"0": {"changed": True}}}})
    assert plan["wave_channels"] == [["b2"], []]
    assert plan["wave_trays"] == [["b2", "a1"], ["b2", "b1"]]
    firsts = [_first_in_play(plan, trays) for trays in plan["wave_trays"]]
    assert firsts == sorted(firsts) and firsts[0] == 0
    # A worker that is not the first tray of its domain: the runner comes along, as three waves show.
    _model, _options, plan = planned(domains=THREE_RACKS, reads={"b2": {"active": False}})
    assert plan["wave_trays"] == [["a1"], ["b2", "b1"], ["c1"]]
    firsts = [_first_in_play(plan, trays) for trays in plan["wave_trays"]]
    assert firsts == sorted(firsts)


def test_a_tray_whose_channels_the_first_wave_ensures_includes_its_own_domains_wave_for_their_handlers():
    # A reboot for the channel option clears the run's lock under /run: b1 holds rackB's lock, and its reboot in
    # the first wave would leave the second wave's lock refresh nothing to refresh. wave.yml flushes the handlers
    # of its own domains' trays only; b1 and b2 include rackB's wave too, and run their handlers there.
    _model, _options, plan = planned(domains=THREE_RACKS, reads={tray: {"channels": {"0": {"changed": True}}}
                                                                 for tray in ("b1", "b2")})
    assert plan["wave_channels"] == [["b1", "b2"], [], []]
    assert plan["wave_workers"] == [[], [], []]
    assert plan["wave_trays"] == [["b1", "b2", "a1"], ["b1", "b2"], ["c1"]]
    # Every tray whose channels are ensured includes the wave of its own domain.
    for tray in plan["wave_channels"][0]:
        own = next(index for index, wave in enumerate(plan["waves"]) if plan["trays"][tray]["domain"] in wave)
        assert tray in plan["wave_trays"][own]


def test_rolling_takes_the_domains_in_the_order_of_their_first_trays_in_the_play_and_locks_by_name():
    plan = _after_read(TWO_RACKS, ["b1", "b2", "a1", "a2"], a2={"config": "LOG_LEVEL=4\n"},
                       b1={"config": "LOG_LEVEL=4\n"})
    assert plan["waves"] == [["rackB"], ["rackA"]] and plan["wave_include_throttle"] == 1
    assert [lock["domain"] for lock in plan["locks"]] == ["rackA", "rackA", "rackB", "rackB"]
    assert plan["wave_locks"] == [[], [lock for lock in plan["locks"] if lock["domain"] == "rackA"]]
    assert included_order(plan, ["b1", "b2", "a1", "a2"]) == [0, 1]


def test_a_dark_first_tray_moves_its_domains_wave_after_the_domain_whose_tray_answers_first():
    # Interleaved play: a1, b1, a2, b2. a1 is dark, so b1 is the first tray of the play to name a wave.
    play = ["a1", "b1", "a2", "b2"]
    plan = _after_read(TWO_RACKS, play, unreachable=["a1"], a2={"config": "LOG_LEVEL=4\n"})
    assert plan["waves"] == [["rackB"], ["rackA"]]
    assert plan["wave_locks"] == [[], [lock for lock in plan["locks"] if lock["domain"] == "rackA"]]
    assert included_order(plan, [tray for tray in play if tray != "a1"]) == [0, 1]


def test_one_wave_is_not_throttled():
    plan = _after_read(TWO_RACKS, ["a1", "a2", "b1", "b2"], every={"imex_rolling": False})
    assert plan["waves"] == [["rackA", "rackB"]] and plan["wave_include_throttle"] == 0


READS = [{}, {"config": "LOG_LEVEL=4\n"}, {"active": False}, {"started": BEFORE - 60},
         {"channels": {"0": {"changed": True}}}]


def _random_run(rng):
    """A random inventory, play order, batch, dark trays and tray reads, and the plan after its read."""
    domains = {"rack%s" % letter: ["%s%d" % (letter, index) for index in range(1, rng.randint(1, 4) + 1)]
               for letter in "abcd"[:rng.randint(2, 4)]}
    play = [tray for trays in domains.values() for tray in trays]
    rng.shuffle(play)
    unreachable = [tray for tray in play if rng.random() < 0.15]
    every = {"imex_rolling_batch": rng.choice([1, 1, 2])}
    if rng.random() < 0.5:
        every.update({"imex_mode": "slurm", "imex_channel0": False})
    reads = {tray: rng.choice(READS) for tray in play if tray not in unreachable}
    plan = _after_read(domains, play, every, unreachable, **reads)
    return plan, [tray for tray in play if tray not in unreachable]


def _misordered(seeds):
    found = []
    for seed in seeds:
        plan, reached = _random_run(random.Random(seed))
        running = [index for index, trays in enumerate(plan["wave_trays"]) if trays]
        if included_order(plan, reached) != running:
            found.append((seed, plan["waves"], plan["wave_trays"], reached))
    return found


def test_on_random_inventories_and_reads_the_waves_run_in_the_plans_order():
    assert _misordered(range(150)) == []


def test_the_order_check_fails_when_the_waves_are_not_ordered_by_the_play(monkeypatch):
    # A seeded bug: the waves keep preflight's order whatever trays ssh did not reach.
    monkeypatch.setattr(run_plan.work, "order_waves", lambda run, unreachable: None)
    assert _misordered(range(60))


# --- the locks: taken after the read, for the domains with something to do --------------------------------------

def test_a_run_with_nothing_to_do_takes_no_lock_and_reads_nothing_again():
    _model, _options, plan = planned(domains=THREE_RACKS)
    assert (plan["locks"], plan["read_again"], plan["lock_include_trays"], plan["wave_locks"]) == ([], [], [], [[]])


def test_a_run_locks_only_the_domains_it_has_something_to_do_on_and_reads_their_trays_again():
    # a2's config was edited by hand (rackA writes); b2's daemon is stopped (rackB starts it); rackC has nothing.
    _model, _options, plan = planned(domains=THREE_RACKS, reads={"a2": {"config": "LOG_LEVEL=4\n"},
                                                                 "b2": {"active": False}})
    assert [(lock["domain"], lock["holder"]) for lock in plan["locks"]] == [
        ("rackA", "a1"), ("rackA", "a2"), ("rackB", "b1"), ("rackB", "b2")]
    # Every tray of those domains is read again under the locks, not only those the first read gave work to.
    assert plan["read_again"] == ["a1", "a2", "b1", "b2"] and plan["lock_include_trays"] == ["a1", "a2", "b1", "b2"]
    assert plan["waves"] == [["rackA"], ["rackB"], ["rackC"]]
    assert plan["wave_locks"] == [[], [lock for lock in plan["locks"] if lock["domain"] == "rackB"], []]


def test_the_trays_leaving_the_play_include_the_lock_file_without_being_read_again():
    # a2 is dark (it leaves the play); c1's daemon is stopped: rackC alone is locked and read again.
    plan = _after_read(THREE_RACKS, ["a1", "a2", "b1", "b2", "c1", "c2"], unreachable=["a2"], c1={"active": False})
    assert plan["leaving"] == ["a2"]
    assert [lock["domain"] for lock in plan["locks"]] == ["rackC", "rackC"]
    assert plan["read_again"] == ["c1", "c2"] and plan["lock_include_trays"] == ["a2", "c1", "c2"]


def test_a_read_only_proof_takes_no_lock_whatever_the_trays_hold():
    _model, _options, plan = planned(reads={"a2": {"config": "LOG_LEVEL=4\n"}}, converge=False)
    assert (plan["locks"], plan["read_again"]) == ([], [])


def test_the_plan_made_again_under_the_locks_keeps_them_when_the_second_read_finds_nothing_to_do():
    # Another run converged rackA between the first read and the take: the second read finds nothing to do there.
    model, options, plan = planned(reads={"a2": {"config": "LOG_LEVEL=4\n"}})
    taken = plan["locks"]
    again = run_plan.reread.after_reread(plan, model, options, reads_of(plan), skip_fabric=True)
    assert again["locks"] == taken and [lock["domain"] for lock in taken] == ["rackA", "rackA"]
    assert again["read_again"] == plan["read_again"] == ["a1", "a2"]
    assert not any(entry["write"] for entry in again["trays"].values()) and again["wave_workers"] == [[]]


# --- where the channels are slurmd's or the DRA driver's: the role runs only to remove another mode's entries -----

SLURM = {"imex_mode": "slurm", "imex_channel0": False}


def _boot_entries(exists):
    return {"presence": {run_plan.modes.CHANNEL_BOOT_DIR: {"exists": exists, "error": None}}}


def test_where_slurm_owns_the_channels_a_converged_run_runs_no_channels_role_and_takes_no_lock():
    reads = {tray: _boot_entries(False) for tray in THREE_RACKS_TRAYS}
    _model, _options, plan = planned(domains=THREE_RACKS, every=SLURM, reads=reads)
    assert not any(entry["channels_role"] for entry in plan["trays"].values())
    assert (plan["waves"], plan["wave_channels"], plan["locks"]) == ([["rackA", "rackB", "rackC"]], [[]], [])


def test_boot_entries_another_mode_left_are_removed_under_their_domains_lock():
    reads = dict({tray: _boot_entries(False) for tray in THREE_RACKS_TRAYS}, b2=_boot_entries(True))
    _model, _options, plan = planned(domains=THREE_RACKS, every=SLURM, reads=reads)
    assert plan["wave_channels"][0] == ["b2"] and [lock["domain"] for lock in plan["locks"]] == ["rackB", "rackB"]
    assert plan["read_again"] == ["b1", "b2"]
    # A read that could not look counts as entries there: the role finds out.
    reads["b2"] = {"presence": {run_plan.modes.CHANNEL_BOOT_DIR: {"exists": False, "error": "cannot inspect"}}}
    _model, _options, plan = planned(domains=THREE_RACKS, every=SLURM, reads=reads)
    assert plan["wave_channels"][0] == ["b2"]
