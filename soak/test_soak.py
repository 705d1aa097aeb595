"""Unit tests of the soak's series and invariants (no bed): `.venv/bin/python -m pytest soak -q`."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import invariants as inv  # noqa: E402
import plan  # noqa: E402
import run as soak_run  # noqa: E402

TOPOLOGY = {"rack1": ["rack1-tray01", "rack1-tray02"], "rack2": ["rack2-tray01", "rack2-tray02"]}
ADDRESSES = {"rack1-tray01": "198.18.1.11", "rack1-tray02": "198.18.1.12",
             "rack2-tray01": "198.18.2.11", "rack2-tray02": "198.18.2.12"}
DOMAIN_OF = {t: d for d, ts in TOPOLOGY.items() for t in ts}
CONFIG_TEXT = "IMEX_CMD_PORT=50005\nLOG_LEVEL=4\n"


def probe(nodes="198.18.1.11\n198.18.1.12\n", mode="0644", config=CONFIG_TEXT, leftovers=(), events=(), boot=100.0):
    files = {inv.CONFIG: {"mode": "0644", "uid": 0, "sha256": str(hash(config)), "text": config},
             inv.NODES: {"mode": mode, "uid": 0, "sha256": str(hash(nodes)), "text": nodes}}
    return {"files": files, "leftovers": list(leftovers), "lock": None, "events": list(events), "boot": boot}


# ---------------------------------------------------------------- the series
def test_a_seed_draws_the_same_series_and_another_seed_another():
    assert plan.draw_series(7, 30, 2, 4) == plan.draw_series(7, 30, 2, 4)
    assert plan.draw_series(7, 30, 2, 4) != plan.draw_series(8, 30, 2, 4)


def test_a_series_never_draws_an_active_fault_again_nor_two_mount_faults_on_a_tray():
    for seed in range(40):
        active = {}
        for entry in plan.draw_series(seed, 40, 2, 4):
            for fault in entry["faults"]:
                key = plan.fault_key(fault)
                if fault["kind"] in plan.LASTING:
                    assert key not in active, (seed, fault)
                    if fault["kind"] in plan.MOUNT_FAULTS:
                        assert not any(k in plan.MOUNT_FAULTS and t == key[1] for k, t in active)
                    active[key] = fault["id"]
            for fid in entry["action"].get("heal", []):
                key = next(k for k, v in active.items() if v == fid)
                del active[key]
            if entry["action"]["kind"] == "heal_all":
                assert not active


def test_every_fault_kind_and_action_is_drawn_and_about_a_third_land_during_a_run():
    series = [e for seed in range(20) for e in plan.draw_series(seed, 50, 2, 4)]
    faults = [f for e in series for f in e["faults"]]
    assert {f["kind"] for f in faults} == set(plan.KINDS)
    assert {e["action"]["kind"] for e in series} == set(plan.ACTIONS)
    share = sum(f["during"] for f in faults) / len(faults)
    assert 0.25 < share < 0.42


def test_link_cut_is_a_pair_of_one_rack_and_heal_arguments_mirror_the_injection():
    fault = {"kind": "version", "trays": ["rack1-tray02"], "extra": ["580.105.08", "--restart"]}
    assert plan.simrack_args(fault) == ["version", "rack1-tray02", "580.105.08", "--restart"]
    assert plan.simrack_args(fault, heal=True) == ["heal", "version", "rack1-tray02", "--restart"]
    kill = {"kind": "daemon-kill-no-restart", "trays": ["rack2-tray01"]}
    assert plan.simrack_args(kill) == ["daemon-kill", "rack2-tray01", "--no-restart"]
    assert plan.simrack_args(kill, heal=True) == ["heal", "daemon-kill", "rack2-tray01"]
    cuts = [f for seed in range(10) for e in plan.draw_series(seed, 50, 2, 4) for f in e["faults"] if f["kind"] == "link-cut"]
    assert cuts and all(len(f["trays"]) == 2 and f["trays"][0][:5] == f["trays"][1][:5] and f["trays"][0] != f["trays"][1] for f in cuts)


def test_a_share_of_the_series_runs_with_tls_on_without_changing_its_faults_and_actions():
    for seed in (35, 424242, 7):
        series = plan.draw_series(seed, 30, 2, 4)
        on = [e["step"] for e in series if e.get("tls")]
        assert len(on) == 10 and on == list(range(on[0], on[0] + 10))
    assert [e["step"] for e in plan.draw_series(35, 10, 2, 4) if e.get("tls")] == [5, 6, 7]
    # Seed 424242's first steps, as the issue's run drew them before TLS was drawn.
    series = plan.draw_series(424242, 30, 2, 4)
    assert [e["action"]["kind"] for e in series[:3]] == ["concurrent", "check_then_run", "site"]
    assert [(f["kind"], f["trays"]) for f in series[1]["faults"]] == [("daemon-kill", ["rack1-tray02"])]
    assert series[17]["action"] == {"kind": "site_change", "change": {"imex_settings": {"LOG_LEVEL": "4"}}}
    assert all("tls" in e for e in plan.keep_faults(series, [])[11:21])


def test_keep_faults_drops_the_others_and_their_heals():
    series = plan.draw_series(3, 30, 2, 4)
    ids = plan.all_fault_ids(series)
    kept = ids[:2]
    shrunk = plan.keep_faults(series, kept)
    assert plan.all_fault_ids(shrunk) == kept
    assert all(set(e["action"].get("heal", [])) <= set(kept) for e in shrunk)
    assert [e["action"]["kind"] for e in shrunk] == [e["action"]["kind"] for e in series]


def test_ddmin_finds_the_one_minimal_failing_subset():
    calls = []

    def fails(subset):
        calls.append(subset)
        return {"3", "7"} <= set(subset)
    found, count, minimal = plan.ddmin([str(i) for i in range(10)], fails)
    assert sorted(found) == ["3", "7"] and count == len(calls) and minimal is True
    found, count, minimal = plan.ddmin([str(i) for i in range(10)], fails, budget=2)
    assert count == 2 and {"3", "7"} <= set(found) and minimal is False


def test_ddmin_says_when_its_budget_ran_out_before_a_minimal_subset():
    # The soak's own shrink on the bed: faults 1.0 and 5.0 fail together, 2.0 is noise. Four re-runs
    # try the three singletons and one complement: not enough to drop 2.0.
    def fails(subset):
        return {"1.0", "5.0"} <= set(subset)
    assert plan.ddmin(["1.0", "2.0", "5.0"], fails, budget=4) == (["1.0", "2.0", "5.0"], 4, False)
    found, count, minimal = plan.ddmin(["1.0", "2.0", "5.0"], fails)
    assert sorted(found) == ["1.0", "5.0"] and minimal is True


# ---------------------------------------------------------------- 1 and 2
def test_files_whole_passes_designed_files_and_names_each_defect():
    assert inv.files_whole({"rack1-tray01": probe()})[0] is True
    bad = {"rack1-tray01": probe(mode="0600"), "rack1-tray02": probe(config="LOG_LEVEL=4\nIMEX_CMD_P"),
           "rack2-tray01": probe(leftovers=["/etc/nvidia-imex/.nodes_config.cfg.x1.tmp"])}
    ok, detail = inv.files_whole(bad)
    assert ok is False
    assert "rack1-tray01: /etc/nvidia-imex/nodes_config.cfg mode 0600, designed 0644" in detail
    assert "rack1-tray02: /etc/nvidia-imex/config.cfg does not parse" in detail
    assert "temporary file left: /etc/nvidia-imex/.nodes_config.cfg.x1.tmp" in detail
    assert inv.files_whole({"rack1-tray01": None}, excused={"rack1-tray01"})[0] is None


def test_a_tray_unread_is_not_checked_and_unread_without_a_fault_of_the_step_fails_the_soak():
    probes = {"rack1-tray01": probe(), "rack1-tray02": None}
    # Rebooted by the step's own fault: not read, not checked, said.
    ok, detail = inv.files_whole(probes, excused={"rack1-tray02"})
    assert ok is True and "not read, the step's own faults: rack1-tray02" in detail
    # No fault of the step explains it: the soak's own reads failed, and that is a failure.
    ok, detail = inv.files_whole(probes)
    assert ok is False and "the soak could not read rack1-tray02, which no fault of this step touches" in detail
    assert inv.files_whole({"rack1-tray01": None, "rack1-tray02": None}, excused={"rack1-tray01", "rack1-tray02"})[0] is None
    lists = {t: probe(nodes="198.18.1.11\n198.18.1.12\n") for t in TOPOLOGY["rack1"]}
    lists.update({t: None for t in TOPOLOGY["rack2"]})
    ok, detail = inv.node_lists(lists, TOPOLOGY, ADDRESSES)
    assert ok is False and "could not read rack2-tray01, rack2-tray02" in detail
    assert inv.node_lists(lists, TOPOLOGY, ADDRESSES, excused=set(TOPOLOGY["rack2"]))[0] is True
    nothing = {t: None for ts in TOPOLOGY.values() for t in ts}
    assert inv.node_lists(nothing, TOPOLOGY, ADDRESSES, excused=set(nothing))[0] is None


def test_node_lists_must_match_within_a_domain_and_stay_inside_it():
    same = {t: probe(nodes="198.18.1.11\n198.18.1.12\n") for t in TOPOLOGY["rack1"]}
    same.update({t: probe(nodes="198.18.2.11\n198.18.2.12\n") for t in TOPOLOGY["rack2"]})
    assert inv.node_lists(same, TOPOLOGY, ADDRESSES)[0] is True
    differ = dict(same, **{"rack1-tray02": probe(nodes="198.18.1.12\n198.18.1.11\n")})
    ok, detail = inv.node_lists(differ, TOPOLOGY, ADDRESSES)
    assert ok is False and "domain rack1: node lists differ" in detail
    assert inv.node_lists(differ, TOPOLOGY, ADDRESSES, edited_trays={"rack1-tray02"})[0] is True
    foreign = dict(same, **{t: probe(nodes="198.18.1.11\n198.18.2.11\n") for t in TOPOLOGY["rack1"]})
    ok, detail = inv.node_lists(foreign, TOPOLOGY, ADDRESSES)
    assert ok is False and "lists another domain's trays: ['198.18.2.11']" in detail


def test_another_rack_must_keep_its_files_and_daemon_starts():
    start = {"event": "start", "pid": 10, "time": 1.0}
    before = {"rack2-tray01": probe(events=[start])}
    assert inv.other_rack_untouched(before, {"rack2-tray01": probe(events=[start])}, ["rack2-tray01"])[0] is True
    restarted = {"rack2-tray01": probe(events=[start, {"event": "start", "pid": 11, "time": 2.0}])}
    ok, detail = inv.other_rack_untouched(before, restarted, ["rack2-tray01"])
    assert ok is False and "daemon started again ([11])" in detail


# ---------------------------------------------------------------- 3
def test_a_stop_on_a_busy_domain_fails_unless_the_soak_itself_caused_it():
    events = {"rack1-tray02": [{"event": "stop", "pid": 5, "time": 50.0}]}
    busy = [("rack1-tray01", 40.0, None)]
    ok, detail = inv.busy_guard(events, {}, TOPOLOGY, busy, [], step_start=30.0)
    assert ok is False and "daemon stop (PID 5) on rack1-tray02 at 50.0 while domain rack1 was busy (rack1-tray01)" in detail
    own = [{"trays": ["rack1-tray02"], "start": 49.0, "end": 49.5}]
    assert inv.busy_guard(events, {}, TOPOLOGY, busy, own, step_start=30.0)[0] is True
    assert inv.busy_guard(events, {}, TOPOLOGY, [("rack1-tray01", 60.0, None)], [], step_start=30.0)[0] is True
    assert inv.busy_guard(events, {}, TOPOLOGY, [("rack2-tray01", 40.0, None)], [], step_start=30.0)[0] is True
    assert inv.busy_guard({}, {"rack1-tray01": [55.0]}, TOPOLOGY, busy, [], step_start=30.0)[0] is False


def test_a_busy_tray_healed_before_the_guard_looked_is_no_reason_to_refuse_a_restart():
    # Seed 424242, step 26 of its replay: a full heal ended rack1-tray04's busy at 16.0, the run's
    # guard read the trays at 33.4, and its restart stopped rack1's daemons at 35.8.
    events = {"rack1-tray02": [{"event": "stop", "pid": 44, "time": 35.8}]}
    healed = [("rack1-tray01", 5.0, 16.0)]
    assert inv.busy_guard(events, {}, TOPOLOGY, healed, [], step_start=10.0, guard_reads=[33.4])[0] is True
    # Busy until after the guard looked: the guard saw it, and the stop fails.
    late = [("rack1-tray01", 5.0, 34.0)]
    ok, detail = inv.busy_guard(events, {}, TOPOLOGY, late, [], step_start=10.0, guard_reads=[33.4])
    assert ok is False and "daemon stop (PID 44) on rack1-tray02 at 35.8 while domain rack1 was busy" in detail
    # A stop no guard read preceded: busy at any moment of the step before it fails it.
    assert inv.busy_guard(events, {}, TOPOLOGY, healed, [], step_start=10.0)[0] is False


# ---------------------------------------------------------------- 4 and 5
def run_events(start, end, hosts, owner="run-a", lock_ok=True, check_failed=False):
    events = [{"type": "task_start", "task": inv.LOCK_TASK, "time": start - 5},
              {"type": "ok" if lock_ok else "failed", "task": inv.LOCK_TASK, "host": hosts[0], "time": start - 4,
               "items": [{"item": {"domain": DOMAIN_OF[hosts[0]]}, "failed": not lock_ok, "owner": owner}]}]
    if check_failed:
        events.append({"type": "failed", "task": inv.LOCK_CHECK_TASK, "host": hosts[0], "time": start - 1})
    events.append({"type": "task_start", "task": "Stop IMEX daemon", "time": start})
    events += [{"type": "ok", "task": "Stop IMEX daemon", "host": h, "changed": True, "time": start + 1} for h in hosts]
    events.append({"type": "task_start", "task": "Start IMEX daemon", "time": start + 1})
    events += [{"type": "ok", "task": "Start IMEX daemon", "host": h, "changed": True, "time": end} for h in hosts]
    return events


def test_restart_intervals_of_one_domain_may_not_overlap_between_runs():
    a = {"name": "a", "events": run_events(10, 20, TOPOLOGY["rack1"])}
    b = {"name": "b", "events": run_events(25, 30, TOPOLOGY["rack1"], owner="run-b")}
    assert inv.restart_intervals(a["events"], DOMAIN_OF) == {"rack1": (10, 20)}
    assert inv.no_overlapping_restarts([a, b], DOMAIN_OF)[0] is True
    c = {"name": "c", "events": run_events(15, 30, TOPOLOGY["rack1"], owner="run-c")}
    ok, detail = inv.no_overlapping_restarts([a, c], DOMAIN_OF)
    assert ok is False and "a and c restarted rack1 at once" in detail


def test_a_restart_after_losing_the_lock_is_found_on_the_lock_s_tray_not_the_run_once_host():
    # The check runs once, on the play's first host (rack1-tray01), each item delegated to the lock
    # tray of a restarting domain: rack2's lock, lost, is on rack2-tray01.
    events = run_events(10, 20, TOPOLOGY["rack2"])
    events.insert(2, {"type": "failed", "task": inv.LOCK_CHECK_TASK, "host": "rack1-tray01", "time": 9, "items": [
        {"item": "rack2", "failed": True, "delegated": "rack2-tray01", "msg": "rack tray is locked by run-x"}]})
    assert inv.lock_lost_before_restart(events, DOMAIN_OF) == {"rack2"}
    ok, detail = inv.no_overlapping_restarts([{"name": "y", "events": events}], DOMAIN_OF)
    assert ok is False and "y restarted rack2 after losing its lock" in detail
    # An item that held its lock is no loss.
    events[2]["items"][0]["failed"] = False
    assert inv.lock_lost_before_restart(events, DOMAIN_OF) == set()


def test_a_restart_without_the_lock_or_after_losing_it_fails():
    unlocked = {"name": "x", "events": run_events(10, 20, TOPOLOGY["rack1"], lock_ok=False)}
    assert "restarted rack1 without holding its lock" in inv.no_overlapping_restarts([unlocked], DOMAIN_OF)[1]
    lost = {"name": "y", "events": run_events(10, 20, TOPOLOGY["rack1"], check_failed=True)}
    assert "restarted rack1 after losing its lock" in inv.no_overlapping_restarts([lost], DOMAIN_OF)[1]


def test_a_lock_item_refused_with_locked_by_is_not_taken():
    events = [{"type": "failed", "task": inv.LOCK_TASK, "host": "rack1-tray01", "time": 1, "items": [
        {"item": {"domain": "rack1", "holder": "rack1-tray01"}, "failed": False, "msg": "rack tray is locked by run-a since ..."}]}]
    assert inv.locked_domains(events, DOMAIN_OF) == set()
    assert "locked by run-a" in inv.failure_text(events)


def test_the_soak_callback_records_the_lock_owner_the_module_returns():
    # The lock module's results carry no invocation: the owner comes from the result itself, or
    # every run's owner was unknown (and "no lock of a finished run is left" could not fail).
    spec = importlib.util.spec_from_file_location("soak_events", os.path.join(HERE, "callback_plugins", "soak_events.py"))
    events = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(events)
    assert events._owner({"owner": "run-a", "took_over": False}) == "run-a"
    assert events._owner({"invocation": {"module_args": {"owner": "run-b"}}}) == "run-b"
    assert events._owner({"changed": False}) is None


def test_locks_left_by_finished_runs_and_two_holders():
    runs = [{"owner": "run-a", "killed": False}, {"owner": "run-k", "killed": True}]
    assert inv.locks_after({"rack1": None, "rack2": "run-k"}, runs, {"rack2": "run-k"})[0] is True
    ok, detail = inv.locks_after({"rack1": "run-a", "rack2": None}, runs, {})
    assert ok is False and "domain rack1: lock left by run-a, a run that finished" in detail
    assert inv.locks_after({"rack1": "?", "rack2": "?"}, runs, {})[0] is None
    both = [{"name": "a", "events": run_events(1, 2, TOPOLOGY["rack1"]), "start": 0, "end": 10},
            {"name": "b", "events": run_events(3, 4, TOPOLOGY["rack1"], owner="run-b"), "start": 5, "end": 12}]
    assert inv.two_holders(both, DOMAIN_OF) == (False, "rack1 held by a and b")
    one_after_the_other = [dict(both[0]), dict(both[1], start=11, end=20)]
    assert inv.two_holders(one_after_the_other, DOMAIN_OF) == (True, "ok")


def release_events(domain, tray, unreachable):
    """The release task's result as the soak's callback records it: each item is the lock take's
    result, whose own item names the domain and the lock tray."""
    return [{"type": "unreachable" if unreachable else "ok", "task": inv.RELEASE_TASK, "host": tray,
             "items": [{"item": {"item": {"domain": domain, "holder": tray}, "owner": "run-a"},
                        "unreachable": unreachable, "failed": False, "skipped": False}]}]


def test_a_lock_its_release_could_not_reach_is_not_blamed_on_the_finished_run():
    # Seed 20261127, step 9: ssh to rack1-tray01 blocked during the run; its release could not reach
    # the tray, so the lock stays there until it goes stale. Only that tray's lock is excused.
    read_on = {"rack1": "rack1-tray01", "rack2": "rack2-tray01"}
    cut_off = [{"owner": "run-a", "killed": False, "events": release_events("rack1", "rack1-tray01", True)}]
    ok, detail = inv.locks_after({"rack1": "run-a", "rack2": None}, cut_off, {}, read_on)
    assert ok is True and "rack1's lock stays on rack1-tray01, which its release did not reach" in detail
    # Released where ssh reached: a lock left there is the run's fault.
    reached = [{"owner": "run-a", "killed": False, "events": release_events("rack1", "rack1-tray01", False)}]
    ok, detail = inv.locks_after({"rack1": "run-a", "rack2": None}, reached, {}, read_on)
    assert ok is False and "domain rack1: lock left by run-a, a run that finished" in detail
    # The release missed another tray than the one read: no excuse for the lock found on this one.
    elsewhere = [{"owner": "run-a", "killed": False, "events": release_events("rack1", "rack1-tray02", True)}]
    assert inv.locks_after({"rack1": "run-a", "rack2": None}, elsewhere, {}, read_on)[0] is False


def test_a_run_during_a_killed_run_s_fresh_lock_must_refuse_with_locked_by():
    refused = {"name": "r", "rc": 2, "output": "rack1-tray01 is locked by run-k since ..."}
    assert inv.refused_while_locked(refused, "rack1", stale_at=100, examined=(50, 51))[0] is True
    ran = {"name": "r", "rc": 0, "output": "ok"}
    ok, detail = inv.refused_while_locked(ran, "rack1", stale_at=100, examined=(50, 51))
    assert ok is False and "r examined the lock of rack1 49 s before the killed run's lock went stale" in detail
    assert inv.refused_while_locked(ran, "rack1", stale_at=100, examined=(101, 102))[0] is True
    assert inv.refused_while_locked(ran, "rack1", stale_at=100, examined=None)[0] is True


def lock_stage(start, examined_at, took_over, owner="run-b", holder="run-k", since=40.0):
    """A run's events: it starts at `start` and its lock stage looks at rack1's lock at `examined_at`
    (and takes it over then, writing its own lock with that since, when took_over)."""
    return [{"type": "task_start", "task": "Plan the run on the controller", "time": start + 1},
            {"type": "task_start", "task": inv.LOCK_TASK, "time": examined_at - 0.5},
            {"type": "ok", "task": inv.LOCK_TASK, "host": "rack1-tray01", "time": examined_at + 0.5, "items": [
                {"item": {"domain": "rack1", "holder": "rack1-tray01"}, "owner": owner, "holder": holder,
                 "since": since, "took_over": took_over, "delegated": "rack1-tray01",
                 "taken_at": examined_at if took_over else None}]}]


def test_a_run_that_started_before_a_killed_lock_went_stale_may_take_it_over_at_its_lock_stage():
    # Seed 424242 (step 17 in the issue, step 16 in its replay): the run started 2 s before the
    # killed run's lock went stale (since 40, stale_after 60: stale at 100), reached its lock stage
    # later and took the lock over at 100.8 (the since of its own new lock).
    events = lock_stage(start=98.0, examined_at=100.8, took_over=True)
    run = {"name": "16/site-a", "rc": 0, "output": "... took over the abandoned lock ...", "start": 98.0,
           "events": events}
    assert inv.lock_examined(events, "rack1") == (100.8, 100.8)
    assert inv.refused_while_locked(run, "rack1", stale_at=100.0, examined=inv.lock_examined(events, "rack1"))[0] is True
    # A takeover before the lock was stale fails, whenever the run started.
    early = lock_stage(start=90.0, examined_at=95.0, took_over=True)
    ok, detail = inv.refused_while_locked(dict(run, events=early), "rack1", 100.0, inv.lock_examined(early, "rack1"))
    assert ok is False and "5 s before the killed run's lock went stale" in detail
    # Without the moment of its own lock (a take that recorded none): the lock task's span.
    untaken = lock_stage(start=98.0, examined_at=103.0, took_over=False)
    assert inv.lock_examined(untaken, "rack1") == (102.5, 103.5)
    assert inv.lock_examined([{"type": "task_start", "task": "Plan the run", "time": 1}], "rack1") is None
    # A run that took only another domain's lock (it had nothing to do on rack1) never looked at rack1's.
    assert inv.lock_examined(untaken, "rack2") is None


# ---------------------------------------------------------------- 6, 7, 8
def test_rc_zero_needs_every_domain_up_and_a_health_fault_needs_a_failure_naming_it():
    run = {"name": "s", "rc": 0, "domains": ["rack1", "rack2"], "events": []}
    assert inv.rc_truth(run, {"rack1": "UP", "rack2": "UP"}, [], ADDRESSES)[0] is True
    assert inv.rc_truth(run, {"rack1": "UP", "rack2": "DEGRADED"}, [], ADDRESSES) == (False, "s rc 0 but rack2 DEGRADED")
    cut = {"kind": "link-cut", "trays": ["rack1-tray01", "rack1-tray02"]}
    assert inv.rc_truth(run, {"rack1": "UP", "rack2": "UP"}, [cut], ADDRESSES)[0] is False
    failed = {"name": "s", "rc": 2, "domains": ["rack1"], "events": [
        {"type": "failed", "host": "rack1-tray01", "msg": "pair 0 (198.18.1.11) -> 1 (198.18.1.12): RECOVERING"}]}
    assert inv.rc_truth(failed, {"rack1": "DEGRADED"}, [cut], ADDRESSES)[0] is True
    mute = {"name": "s", "rc": 2, "domains": ["rack1"], "events": [
        {"type": "failed", "host": "rack1-tray01", "msg": "domain rack1 is not healthy (198.18.1.111)"}]}
    assert inv.rc_truth(mute, {"rack1": "DEGRADED"}, [cut], ADDRESSES)[0] is False
    skew = {"kind": "version", "trays": ["rack2-tray01"]}
    gated = {"name": "v", "rc": 2, "domains": ["rack1", "rack2"], "events": [
        {"type": "failed", "host": "rack1-tray01", "msg": "domain rack2 runs different driver releases: 580.105.08 on rack2-tray01"}]}
    ok, detail = inv.rc_truth(gated, {}, [cut, skew], ADDRESSES)
    assert ok is True and "link-cut on rack1-tray01 rack1-tray02 not reached (the run stopped at version on rack2-tray01)" in detail
    # A run stopped at its read by a tray the step rebooted during it: the health fault behind is not
    # reached (seed 20261127, step 31); a reboot it does not name masks nothing.
    hang = {"kind": "ctl-hang", "trays": ["rack1-tray01"]}
    reboot = {"kind": "reboot", "trays": ["rack1-tray02"]}
    read_stop = {"name": "s", "rc": 2, "domains": ["rack1"], "events": [
        {"type": "failed", "host": "rack1-tray01", "msg": "The run stopped at its read stage (domains rack1); trays rack1-tray02"}]}
    ok, detail = inv.rc_truth(read_stop, {"rack1": "UP"}, [hang], ADDRESSES, stoppers=[reboot])
    assert ok is True and "ctl-hang on rack1-tray01 not reached (the run stopped at reboot on rack1-tray02)" in detail
    assert inv.rc_truth(read_stop, {"rack1": "UP"}, [hang], ADDRESSES)[0] is False
    assert inv.rc_truth(mute, {"rack1": "DEGRADED"}, [hang], ADDRESSES, stoppers=[reboot])[0] is False


def test_a_hung_ctl_fails_a_run_only_on_the_tray_where_the_run_reads_the_status():
    # Seed 20261128, steps 39 and 40 (summary.md): nvidia-imex-ctl hung on rack2-tray02, where no run calls it; rack2's
    # status, read on rack2-tray01, was UP, and the runs passed.
    topology = {"rack1": ["rack1-tray01", "rack1-tray02"], "rack2": ["rack2-tray01", "rack2-tray02"]}
    health = {"ctl-hang", "link-cut"}
    hang = {"kind": "ctl-hang", "trays": ["rack2-tray02"]}
    assert not inv.fails_the_run(hang, health, ["rack2"], topology)
    assert inv.fails_the_run(dict(hang, trays=["rack2-tray01"]), health, ["rack1", "rack2"], topology)
    assert not inv.fails_the_run(dict(hang, trays=["rack2-tray01"]), health, ["rack1"], topology)
    cut = {"kind": "link-cut", "trays": ["rack2-tray02"]}
    assert inv.fails_the_run(cut, health, ["rack2"], topology)
    assert not inv.fails_the_run(dict(cut, kind="reboot"), health, ["rack2"], topology)


def test_a_fabric_health_remark_is_said_naming_its_tray_not_failed():
    # Seed 20261128, step 95 (summary.md): rack1-tray02's GPUs showed Health Summary Unhealthy (registered, IMEX runs).
    topology = {"rack1": ["rack1-tray01", "rack1-tray02"]}
    unhealthy = {"kind": "fabric", "trays": ["rack1-tray02"], "extra": ["health=Unhealthy"]}
    assert not inv.fails_the_run(unhealthy, {"fabric"}, ["rack1"], topology)
    assert inv.fails_the_run(dict(unhealthy, extra=["clique_id=0"]), {"fabric"}, ["rack1"], topology)
    run = {"name": "s", "rc": 0, "domains": ["rack1"], "events": [],
           "output": "rack1-tray02 ok\n"}
    ok, detail = inv.rc_truth(run, {"rack1": "UP"}, [], ADDRESSES, said=[unhealthy])
    assert ok is False and detail == "s rc 0 without saying fabric on rack1-tray02"
    run["output"] += "tray rack1-tray02: GPUs 0-3: fabric health is Unhealthy (Bandwidth: Full)\n"
    assert inv.rc_truth(run, {"rack1": "UP"}, [], ADDRESSES, said=[unhealthy])[0] is True


def test_heal_converges_within_two_runs_then_passes_and_changes_nothing():
    assert inv.heal_converges(2, set(), 0)[0] is True
    assert inv.heal_converges(None, set(), 0)[0] is False
    assert inv.heal_converges(1, {("rack1-tray01", "Write config")}, 0)[0] is False
    # A once-more run that fails before it changes anything is no convergence.
    assert inv.heal_converges(1, set(), 2) == (False, "UP after 1 run(s), but the run after UP failed (rc 2)")


def test_rc_truth_asks_rc_zero_on_a_healthy_rack():
    failed = {"name": "s", "rc": 2, "domains": ["rack1"], "output": "", "events": [
        {"type": "failed", "host": "rack1-tray01", "msg": "domain rack1 is not healthy"}]}
    ok, detail = inv.rc_truth(failed, {"rack1": "UP"}, [], ADDRESSES, healthy=True)
    assert ok is False and "s rc 2 on a healthy rack: domain rack1 is not healthy" in detail
    # The same failure where the rack is not known healthy proves nothing either way.
    assert inv.rc_truth(failed, {"rack1": "UP"}, [], ADDRESSES)[0] is True
    passed = dict(failed, rc=0, events=[])
    assert inv.rc_truth(passed, {"rack1": "UP"}, [], ADDRESSES, healthy=True)[0] is True
    # Healthy: converged by its last site.yml and no fault on it in the step.
    assert inv.healthy_rack(["rack1"], {"rack1", "rack2"}, TOPOLOGY, {"rack2-tray01"}) is True
    assert inv.healthy_rack(["rack1", "rack2"], {"rack1", "rack2"}, TOPOLOGY, {"rack2-tray01"}) is False
    assert inv.healthy_rack(["rack1"], {"rack2"}, TOPOLOGY, set()) is False


def test_check_must_predict_the_real_changes_and_change_nothing():
    change = [{"type": "ok", "task": "Write config", "host": "rack1-tray01", "changed": True, "time": 1}]
    before = {"rack1-tray01": probe()}
    assert inv.check_predicts(change, change, before, {"rack1-tray01": probe()})[0] is True
    ok, detail = inv.check_predicts([], change, before, {"rack1-tray01": probe()})
    assert ok is False and "made but not predicted: [('rack1-tray01', 'Write config')]" in detail
    ok, detail = inv.check_predicts(change, change, before, {"rack1-tray01": probe(boot=200.0)})
    assert ok is False and "the check run changed rack1-tray01" in detail
    assert inv.check_predicts(change, change, before, {"rack1-tray01": None})[0] is None


def test_a_prediction_is_judged_only_when_both_runs_pass_settled_and_undisturbed():
    """The verdict the --check steps and the full heals share."""
    before = {"rack1-tray01": probe()}
    passed = {"rc": 0, "events": []}
    failed = {"rc": 2, "events": [{"type": "failed", "host": "rack1-tray01", "task": "prove", "msg": "not UP"}]}
    verdict = soak_run.Soak.prediction_verdict
    assert verdict(passed, passed, before, before, [], [])[0] is True
    ok, detail = verdict(failed, passed, before, before, [], [])
    assert ok is False and "the check run failed (rc 2) where the real run passed" in detail
    assert verdict(passed, failed, before, before, [], [])[0] is None
    assert verdict(passed, passed, before, before, ["rack1-tray01 rebooting"], [])[0] is None
    assert verdict(passed, passed, before, before, [], [{"id": "3.0"}])[0] is None
    assert verdict(passed, passed, before, {"rack1-tray01": probe(boot=200.0)}, [], [])[0] is False


def test_check_predicts_digests_the_modprobe_options_and_the_channel_devices():
    change = [{"type": "ok", "task": "Write config", "host": "rack1-tray01", "changed": True, "time": 1}]
    before = probe()
    before["files"][inv.MODPROBE] = {"mode": "0644", "uid": 0, "sha256": "a"}
    before["devices"] = {"channel0": "c 234:0 0666 0:0"}
    modprobe = probe()
    modprobe["files"][inv.MODPROBE] = {"mode": "0644", "uid": 0, "sha256": "b"}
    modprobe["devices"] = dict(before["devices"])
    ok, detail = inv.check_predicts(change, change, {"rack1-tray01": before}, {"rack1-tray01": modprobe})
    assert ok is False and "the check run changed rack1-tray01 (/etc/modprobe.d/nvidia-imex.conf changed)" in detail
    device = probe()
    device["files"][inv.MODPROBE] = dict(before["files"][inv.MODPROBE])
    device["devices"] = dict(before["devices"], channel3="c 234:3 0660 0:0")
    ok, detail = inv.check_predicts(change, change, {"rack1-tray01": before}, {"rack1-tray01": device})
    assert ok is False and "channel3 appeared" in detail


def test_a_check_baseline_waits_for_systemd_to_restart_a_killed_daemon():
    # Seed 424242, step 1: daemon-kill rack1-tray02 [before] at 100.0; systemd starts the daemon
    # again about 1 s later (Restart=on-failure). A baseline read at 100.5 misses that start, and
    # the check run was blamed for it.
    kill = {"kind": "daemon-kill", "trays": ["rack1-tray02"], "injected": True, "at": 100.0}
    old = {"event": "start", "pid": 90, "time": 50.0}
    again = {"event": "start", "pid": 101, "time": 101.0}
    too_early = {"rack1-tray02": probe(events=[old])}
    assert inv.unsettled([kill], too_early, now=100.5) == ["daemon-kill rack1-tray02 (0 s ago)"]
    settled = {"rack1-tray02": probe(events=[old, again])}
    assert inv.unsettled([kill], settled, now=102.0) == []
    # What the old baseline saw: the start between the two reads counted against the check run.
    ok, detail = inv.check_predicts([], [], too_early, settled)
    assert ok is False and "the check run changed rack1-tray02 (daemon started (PID 101))" in detail
    # The settled baseline: the check run changed nothing.
    assert inv.check_predicts([], [], settled, {"rack1-tray02": probe(events=[old, again])})[0] is True
    # A start the check run itself makes still fails it.
    started = {"rack1-tray02": probe(events=[old, again, {"event": "start", "pid": 120, "time": 110.0}])}
    assert inv.check_predicts([], [], settled, started)[0] is False
    # A rebooted tray settles once read back with its daemon started after the boot.
    boot = {"kind": "reboot", "trays": ["rack1-tray02"], "injected": True, "at": 100.0}
    assert inv.unsettled([boot], {"rack1-tray02": None}, now=101.0) == ["reboot rack1-tray02 (1 s ago)"]
    assert inv.unsettled([boot], {"rack1-tray02": probe(events=[old], boot=103.0)}, now=104.0) != []
    assert inv.unsettled([boot], {"rack1-tray02": probe(events=[old, dict(again, time=105.0)], boot=103.0)}, now=106.0) == []
    assert inv.unsettled([dict(kill, injected=False)], too_early, now=100.5) == []


# ---------------------------------------------------------------- 9, 10
def test_key_leak_finds_a_pem_header_or_a_body_line():
    body = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
    assert inv.no_key_leak({"out": "all fine"}, [body])[0] is True
    assert inv.no_key_leak({"out": "x\n-----BEGIN OPENSSH PRIVATE KEY-----\n"}, [body])[0] is False
    assert inv.no_key_leak({"report": "..." + body + "..."}, [body]) == (False, "report holds a private key line")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI needed (tools/bootstrap installs it)")
def test_with_tls_on_a_leaked_tls_key_fails_no_key_leak_and_the_run_variables_hold_none(tmp_path):
    soak = soak_run.Soak.__new__(soak_run.Soak)
    soak.out = str(tmp_path)
    soak.topology = TOPOLOGY
    soak.addresses = ADDRESSES
    key_lines = soak.make_pki()
    with open(tmp_path / "pki" / "rack2-tray02.key") as handle:
        tray_key = [line.strip() for line in handle if line.strip() and not line.startswith("-----")]
    assert tray_key and set(tray_key) <= set(key_lines)
    # The key as the TLS steps give it to a run: paths and lookups, never the key itself.
    variables = json.dumps(soak.tls)
    assert soak.tls["imex_tls"] is True and not any(line in variables for line in key_lines)
    assert soak.tls["soak_pem_trays"] == ["rack1-tray01", "rack2-tray01"]
    leaked = {"3/site output": "TASK [Write TLS files]\n" + tray_key[1] + "\n"}
    assert inv.no_key_leak(leaked, key_lines) == (False, "3/site output holds a private key line")
    assert inv.no_key_leak({"3/site output": "ok"}, key_lines)[0] is True


def test_run_bound_grows_with_domains_and_timeouts_and_flags_slow_runs():
    assert inv.run_bound_s(2, 20, 5) == 180 + 60 + 2 * (20 + 10 + 30)
    assert inv.run_bound_s(2, 300, 30) > inv.run_bound_s(2, 20, 5)
    runs = [{"name": "a", "seconds": 100, "bound_s": 300}, {"name": "k", "seconds": 900, "bound_s": 300, "killed": True}]
    assert inv.run_bounds(runs)[0] is True
    assert inv.run_bounds(runs + [{"name": "b", "seconds": 301, "bound_s": 300}]) == (False, "b took 301 s > 300 s")
    overdue = {"name": "w", "seconds": 360, "bound_s": 300, "killed": "watchdog"}
    assert inv.run_bounds(runs + [overdue]) == (False, "w killed by the watchdog after 360 s (bound 300 s)")


def test_the_watchdog_marks_the_run_it_kills_as_killed(tmp_path):
    class Runner:
        def wait(self, process):
            process.wait()
            return process.returncode, "", ""
    soak = soak_run.Soak.__new__(soak_run.Soak)
    soak.runner = Runner()
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    run = {"name": "w", "dir": str(tmp_path), "process": process, "bound_s": -59.8, "start": time.time(),
           "killed": False}
    try:
        done = soak.finish_run(run)
    finally:
        if process.poll() is None:
            process.kill()
    assert done["killed"] == "watchdog" and done["rc"] == -9
    assert inv.run_bounds([done])[0] is False


def test_descendants_finds_the_whole_tree_of_a_process_also_in_sessions_of_their_own():
    # A parent whose child starts a session of its own, as ansible-playbook's workers do.
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\n"
                               "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(30)'])\n"
                               "time.sleep(30)"])
    try:
        deadline = time.time() + 10
        while time.time() < deadline and not soak_run.descendants(parent.pid):
            time.sleep(0.05)
        found = soak_run.descendants(parent.pid)
        assert len(found) == 1
        with open("/proc/%d/stat" % found[0]) as handle:
            assert int(handle.read().rsplit(")", 1)[1].split()[1]) == parent.pid
    finally:
        for pid in soak_run.descendants(parent.pid):
            os.kill(pid, 9)
        parent.kill()
        parent.wait()


def test_the_trays_addresses_come_from_the_bed_s_inventory_whatever_its_slot(tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("""all:
  children:
    imex_domains:
      children:
        rack1:
          hosts:
            rack1-tray01:
              ansible_host: 198.19.1.11
              imex_address: 198.19.1.11
        rack2:
          hosts:
            rack2-tray01:
              ansible_host: 198.19.2.11
              imex_address: 198.19.2.11
""")
    assert soak_run.bed_addresses(str(inventory)) == {"rack1-tray01": "198.19.1.11", "rack2-tray01": "198.19.2.11"}
    assert soak_run.parse_args(["--slot", "1"]).slot == 1
    with pytest.raises(SystemExit):
        soak_run.parse_args(["--slot", "2"])
