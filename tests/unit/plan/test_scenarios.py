# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whole runs on recorded reads: each row a state of the simulated rack's 1 x 3 domain, a run's options,
and what the run must do (write, restart, start, refuse) and say. See scenario.py for the harness."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.tests.unit.plan import scenario
from ansible_collections.rackscale.imex.tests.unit.plan.scenario import Bed, Run, run
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import NODES_PATH, TLS_PEM

T1, T2, T3 = "rack1-tray01", "rack1-tray02", "rack1-tray03"
ALL = [T1, T2, T3]
NEW_PORT = {"imex_server_port": 50010}


def case(name, state="healthy", *, written=None, restarted=(), started=(), stopped_at=None, says=(),
         verdict="healthy", **run_kwargs):
    """One row: run_kwargs go to the run; written {tray: [what]}; says: phrases the refusal holds."""
    return pytest.param(state, run_kwargs, {"written": written or {}, "restarted": list(restarted),
                                            "started": list(started), "stopped_at": stopped_at,
                                            "says": list(says), "verdict": verdict}, id=name)


CASES = [
    # Converge and no change.
    # The simulated trays come with the stock config.cfg, and no node list.
    case("first converge writes every tray's node list and starts the domain", "fresh",
         written={tray: ["node list"] for tray in ALL}, started=ALL),
    case("a healthy domain: nothing written, restarted or started"),
    case("a healthy domain under TLS: nothing written, restarted or reloaded", "tls",
         every=dict(TLS_PEM, imex_tls=True)),
    # Restart.
    case("a new config restarts every tray together", written={tray: ["config"] for tray in ALL},
         restarted=ALL, every=NEW_PORT),
    case("a config written after the daemon started restarts the domain", "pending_restart", restarted=ALL),
    case("daemons left on another release than the installed one restart", "other_release", restarted=ALL),
    # Start.
    case("a stopped daemon is started alone", "stopped", started=[T2]),
    case("a stopped daemon's new config: the running trays restart with it", "stopped",
         written={tray: ["config"] for tray in ALL}, restarted=ALL, every=NEW_PORT),
    # Refuse.
    case("work on a tray refuses the restart, nothing written", "busy_gpu", stopped_at="restart",
         says=["work runs on it", "pid 4242 python3", "is held back", "Nothing was written"], verdict=None, every=NEW_PORT),
    case("work on a tray that needs no restart is left alone", "busy_gpu"),
    case("work on a tray: the operator allows the restart", "busy_gpu", written={tray: ["config"] for tray in ALL},
         restarted=ALL, every=dict(NEW_PORT, imex_allow_busy_restart=True)),
    case("a Slurm job on a tray refuses the restart, nothing written", "busy_slurm", stopped_at="restart",
         says=["work runs on it", "Slurm node rack1-tray02 state ALLOCATED", "Nothing was written"], verdict=None,
         every=NEW_PORT),
    case("a busy domain is not handed over to the DRA driver", "mode_dra", stopped_at="read",
         says=["not handed over to the DRA driver while work runs on it", "pid 4242 python3", "Nothing was stopped"],
         verdict=None, every={"imex_mode": "dra", "imex_channel0": False}, busy=[T2]),
    case("a pending restart on a busy domain is refused, naming the stale daemon", "pending_restart",
         stopped_at="restart", says=["work runs on it", T2], verdict=None, busy=[T2]),
    case("--limit to part of a domain refuses its restart, nothing written", stopped_at="restart",
         says=["leaves out %s" % T3, "Nothing was written"], verdict=None, every=NEW_PORT, limit=[T1, T2]),
    case("--limit to part of a domain with nothing to do passes", limit=[T1, T2]),
    case("an unreachable tray stops the run before any write", "unreachable", stopped_at="read",
         says=[T3], verdict=None),
    case("a tray on another NVLink partition is refused before any write", "fabric_split", stopped_at="read",
         says=["spans several NVLink partitions", "nothing was changed"], verdict=None, every=NEW_PORT),
    case("a tray not yet on the fabric is refused by name before any write", "fabric_in_progress",
         stopped_at="read", says=[T2, "nothing was changed"], verdict=None, every=NEW_PORT),
    # Out of service.
    case("a tray out of service: its peers restart together without it",
         written={T1: ["config"], T2: ["config"]}, restarted=[T1, T2], every=NEW_PORT, out_of_service=[T3]),
    case("the first tray out of service: its peers restart together without it",
         written={T2: ["config"], T3: ["config"]}, restarted=[T2, T3], every=NEW_PORT, out_of_service=[T1]),
    case("a tray out of service and a pending restart on a peer", "pending_restart", restarted=[T1, T2],
         out_of_service=[T3]),
    # Modes the simulated rack runs without Slurm.
    case("dra_host_managed opens the unix socket: a new config restarts the domain", "mode_dra_host_managed",
         written={tray: ["config"] for tray in ALL}, restarted=ALL,
         every={"imex_mode": "dra_host_managed", "imex_channel0": True}),
    case("dra hands the host daemon over: stopped, nothing proven", "mode_dra", verdict=None,
         every={"imex_mode": "dra", "imex_channel0": False}),
]


@pytest.mark.parametrize(("state", "run_kwargs", "expected"), CASES)
def test_a_run_on_recorded_reads(state, run_kwargs, expected):
    bed = Bed(state)
    for tray in run_kwargs.pop("busy", []):
        bed.trays[tray].work = [{"pid": 4242, "name": "python3"}]
    outcome = run(bed, **run_kwargs)
    found = {"written": outcome.written, "restarted": outcome.restarted, "started": outcome.started,
             "stopped_at": outcome.stopped_at}
    assert found == {key: expected[key] for key in found}, outcome.problems
    said = "\n".join(outcome.problems)
    assert all(phrase in said for phrase in expected["says"]), said
    if expected["verdict"]:
        assert outcome.verdicts == {bed.domain: expected["verdict"]}, outcome.problems
    if not outcome.refused:
        assert outcome.problems == []


def test_check_mode_predicts_the_writes_and_restart_and_changes_nothing():
    bed = Bed()
    before = bed.snapshot()
    checked = run(bed, every=NEW_PORT, check=True)
    assert bed.snapshot() == before and checked.restarted == [] and checked.written == {}
    real = run(bed, every=NEW_PORT)
    assert checked.decisions() == real.decisions()
    assert real.restarted == ALL


def test_work_started_after_the_read_keeps_the_domain_from_its_restart_and_the_next_run_restarts_it():
    """A job scheduled between the read and the restart (or started by the operator's pre-restart tasks):
    the guard sees it; the refusal says exactly what was written, and the next idle run restarts."""
    bed = Bed()

    def job_starts(_run, _wave):
        bed.trays[T2].work = [{"pid": 4343, "name": "python3"}]

    refused = run(bed, every=NEW_PORT, pre_restart=job_starts)
    assert refused.stopped_at == "guard" and refused.restarted == [], refused.problems
    said = "\n".join(refused.problems)
    assert "rack1-tray02: pid 4343 python3), as read just before its daemons would stop" in said
    assert ("Written before this refusal: config on rack1-tray01; config on rack1-tray02; config on rack1-tray03."
            in said)
    bed.trays[T2].work = []
    again = run(bed, every=NEW_PORT)
    assert again.written == {} and again.restarted == ALL and again.verdicts == {bed.domain: "healthy"}


def test_a_tray_back_from_repair_gets_its_files_and_joins():
    bed = Bed()
    assert run(bed, every=NEW_PORT, out_of_service=[T3]).restarted == [T1, T2]
    back = run(bed, every=NEW_PORT)
    assert back.written == {T3: ["config"]} and not back.refused and back.verdicts == {bed.domain: "healthy"}
    assert run(bed, every=NEW_PORT).written == {}


def test_two_runs_of_one_domain_exclude_each_other_whatever_their_out_of_service_lists():
    """Run A (nothing out of service) is in its pre-restart tasks when run B, with the first tray out of
    service, starts: B must meet A's lock before it writes anything, and A restart on its own config."""
    bed = Bed()
    seen = {}

    def during_pre_restart(run_a, wave):
        seen["b"] = run(bed, run_id="run-b", every={"imex_server_port": 50020}, out_of_service=[T1])

    a = run(bed, run_id="run-a", every=NEW_PORT, pre_restart=during_pre_restart)
    assert seen["b"].stopped_at == "lock" and seen["b"].written == {}, seen["b"].problems
    assert a.restarted == ALL and not a.refused
    runs = {tray: bed.trays[tray].runs for tray in ALL}
    assert len({str(sorted(found.items())) for found in runs.values()}) == 1


@pytest.mark.parametrize("out_a, out_b, limit_b", [
    ((), (T1,), None), ((T1,), (), None), ((T1,), (T2,), None), ((), (), [T3]), ((), (T2,), [T3]), ((T3,), (T1,), None),
])
def test_the_lock_never_moves_with_the_out_of_service_list_or_limit(out_a, out_b, limit_b):
    # Both bring a change: a run with nothing to do takes no lock.
    bed = Bed()
    a = Run(bed, run_id="run-a", every=NEW_PORT, out_of_service=out_a)
    stages = iter(a)
    for stage in stages:
        if stage == "lock":
            break
    else:
        raise AssertionError("run A took no lock: %s" % (a.outcome.problems,))
    b = run(bed, run_id="run-b", every=NEW_PORT, out_of_service=out_b, limit=limit_b)
    for _stage in stages:
        pass
    assert b.stopped_at == "lock" and a.outcome.stopped_at is None, (a.outcome.problems, b.problems)


def test_a_run_with_nothing_to_do_takes_no_lock_and_is_not_held_back_by_another_runs():
    """It changes nothing, so it proves the domain from its read, as validate.yml does."""
    bed = Bed()
    bed.locks[T1] = bed.locks[T2] = "run-a"
    outcome = run(bed, run_id="run-b")
    assert not outcome.refused and outcome.verdicts == {bed.domain: "healthy"}, outcome.problems
    assert bed.locks == {T1: "run-a", T2: "run-a"} and (outcome.written, outcome.restarted) == ({}, [])


def test_a_domain_handed_over_to_the_dra_driver_is_not_locked_by_the_next_run():
    """The handover stops and masks the host daemons, under the domain's lock; the next dra run reads them
    stopped and masked, has nothing to do, and takes no lock (else every run would block the next). A daemon
    unmasked behind the run's back is handed over again."""
    bed = Bed("mode_dra")
    dra = {"imex_mode": "dra", "imex_channel0": False}
    first = run(bed, every=dra)
    assert not first.refused and dict(first.plans)["read"]["locks"], first.problems
    assert all(bed.trays[tray].masked and not bed.trays[tray].running for tray in ALL)
    bed.locks[T1] = bed.locks[T2] = "run-a"
    again = run(bed, run_id="run-b", every=dra)
    assert not again.refused and dict(again.plans)["read"]["locks"] == [], again.problems
    assert bed.locks == {T1: "run-a", T2: "run-a"}
    del bed.locks[T1], bed.locks[T2]
    bed.trays[T2].masked = False
    unmasked = run(bed, every=dra)
    plan = dict(unmasked.plans)["reread"]
    assert not unmasked.refused and [tray for tray in ALL if plan["trays"][tray]["handover"]] == [T2]
    assert bed.trays[T2].masked


def _read_during_anothers_restart(bed):
    """Run B reads the domain while run A, which wrote a new config, runs its pre-restart tasks (its daemons
    still run the old files: a restart is pending); A then restarts the domain and ends; B goes on."""
    b = Run(bed, run_id="run-b", every=NEW_PORT)
    stages = iter(b)

    def b_reads(_run_a, _wave):
        for stage in stages:
            if stage == "read":
                return
    a = run(bed, run_id="run-a", every=NEW_PORT, pre_restart=b_reads)
    assert a.restarted == ALL and not a.refused, a.problems
    assert dict(b.outcome.plans)["read"]["domains"][bed.domain]["pending"], "B's read saw no pending restart"
    for _stage in stages:
        pass
    return b.outcome


def test_a_run_plans_from_its_second_read_under_the_lock_not_from_the_read_before_it():
    """B's first read saw the restart A had pending; by the time B holds the lock, A has made it. Planned from
    the read under the lock, B restarts nothing again."""
    outcome = _read_during_anothers_restart(Bed())
    assert not outcome.refused and (outcome.written, outcome.restarted) == ({}, []), outcome.problems
    assert outcome.verdicts == {"rack1": "healthy"}


def test_a_run_planned_from_its_first_read_would_restart_the_domain_again(monkeypatch):
    # Seeded: the plan under the lock is the first read's. The test above fails on it.
    monkeypatch.setattr(scenario.run_plan.reread, "after_reread", lambda plan, *args, **kwargs: plan)
    assert _read_during_anothers_restart(Bed()).restarted == ALL


def test_too_many_lock_trays_out_of_service_refuse_the_run_before_any_tray_is_contacted():
    """Two runs could then hold disjoint lock trays (one with the first tray away, one with the others)."""
    bed = Bed()
    before = bed.snapshot()
    outcome = run(bed, every=NEW_PORT, out_of_service=[T1, T2])
    assert outcome.stopped_at == "preflight" and bed.snapshot() == before and bed.locks == {}
    assert outcome.problems == [
        "domain rack1: its lock is held on 2 of its lock trays rack1-tray01, rack1-tray02, rack1-tray03 (its first "
        "trays in node order), but rack1-tray01, rack1-tray02 are out of service (imex_trays_out_of_service): two "
        "runs could then miss each other. Bring rack1-tray01 or rack1-tray02 back into service first"]


def test_the_first_lock_tray_unreachable_stops_the_run_until_it_is_marked_out_of_service():
    """The real rack: the domain's first tray dies. A run that still counts it in service stops at its read,
    before any lock or write; marked out of service, the next lock tray in service takes its place and its
    peers restart together."""
    bed = Bed()
    bed.trays[T1].reachable = False
    before = bed.snapshot()
    stopped = run(bed, every=NEW_PORT)
    assert stopped.stopped_at == "read" and T1 in stopped.problems[0] and bed.snapshot() == before and bed.locks == {}
    away = run(bed, every=NEW_PORT, out_of_service=[T1])
    assert not away.refused and away.restarted == [T2, T3], away.problems
    assert [lock["holder"] for lock in away.plans[0][1]["locks"]] == [T2, T3]


# Two racks, each its own domain, rolled one wave after the other.
RACK2 = ["rack2-tray01", "rack2-tray02", "rack2-tray03"]


def test_a_node_list_edited_behind_our_back_is_rewritten_and_restarts_that_rack_only():
    """Someone swapped the first two entries of one tray's node list and restarted its daemon, which then
    disagrees with its peers: the run rewrites that one file, restarts that rack's trays together (its
    operator's pre-restart tasks run for that wave only), proves it, and leaves the other rack alone."""
    bed = Bed(racks=2)
    edited = bed.trays[T2]
    lines = edited.files[NODES_PATH]["content"].splitlines(True)
    edited.write(NODES_PATH, "".join([lines[1], lines[0]] + lines[2:]))
    edited.start()
    rack2_before = {tray: bed.trays[tray].started for tray in RACK2}
    assert edited.runs[NODES_PATH] != bed.trays[T1].runs[NODES_PATH]
    waves_with_restarts = []
    repaired = run(bed, pre_restart=lambda _run, wave: waves_with_restarts.append(wave))
    assert (repaired.written, repaired.restarted, repaired.started) == ({T2: ["node list"]}, ALL, []), repaired.problems
    assert waves_with_restarts == [["rack1"]]
    assert repaired.verdicts == {"rack1": "healthy", "rack2": "healthy"}
    assert {tray: bed.trays[tray].started for tray in RACK2} == rack2_before
    assert run(bed).written == {} and bed.trays[T1].runs == bed.trays[T2].runs


def test_each_wave_refreshes_the_locks_of_its_own_domains_before_it_writes():
    """Every domain's lock is taken at the start of the run; each later wave refreshes those of its own domains
    as it begins, so that a long run is not taken for a crashed one while it works."""
    bed = Bed(racks=2)
    outcome = run(bed, every=NEW_PORT)
    plan = dict(outcome.plans)["read"]
    assert plan["waves"] == [["rack1"], ["rack2"]]
    rack2_locks = [lock["holder"] for lock in plan["locks"] if lock["domain"] == "rack2"]
    assert rack2_locks and [[lock["holder"] for lock in locks] for locks in plan["wave_locks"]] == [[], rack2_locks]
    # rack2's locks are refreshed after rack1's wave ended (restarted and proven), before rack2's first write.
    steps = [(event[0], event[2]) for event in bed.events if event[0] in ("refresh", "restart")]
    assert steps == [("restart", "rack1"), ("refresh", ["rack2"]), ("restart", "rack2")]
    first_write = next(index for index, event in enumerate(bed.events) if event[0] == "write" and event[2] in RACK2)
    assert [event[0] for event in bed.events].index("refresh") < first_write
    assert outcome.restarted == ALL + RACK2 and outcome.verdicts == {"rack1": "healthy", "rack2": "healthy"}
    assert bed.locks == {}


def test_a_wave_whose_lock_was_taken_over_stops_before_it_writes():
    """Another run took rack2's lock over (the locks went stale) while rack1's wave ran: rack2's wave stops at
    its refresh, before any write of it."""
    bed = Bed(racks=2)

    def taken_over(run_a, wave):
        for lock in dict(run_a.outcome.plans)["read"]["locks"]:
            if lock["domain"] == "rack2":
                bed.locks[lock["holder"]] = "run-b"

    outcome = run(bed, every=NEW_PORT, pre_restart=taken_over)
    assert outcome.stopped_at == "lock" and "domain rack2: this run no longer holds its lock" in outcome.problems[0]
    assert outcome.restarted == ALL and sorted(outcome.written) == ALL
