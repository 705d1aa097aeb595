# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The running peers of a tray the run starts reconnect to it (SIGUSR1) after the start: whole runs on the
recorded reads of the simulated 1 x 3 domain (scenario.py), and the rule on records."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.reconnect import plan_reconnects
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import Domain, Run as RunRecord, Tray
from ansible_collections.rackscale.imex.tests.unit.plan.scenario import Bed, run

T1, T2, T3 = "rack1-tray01", "rack1-tray02", "rack1-tray03"
ALL = [T1, T2, T3]
NEW_PORT = {"imex_server_port": 50010}
WORK = [{"pid": 4242, "name": "python3"}]


def last_plan(outcome, stage="restart"):
    return [plan for name, plan in outcome.plans if name == stage][-1]


def test_a_tray_back_from_repair_starts_and_its_running_peers_reconnect_to_it():
    bed = Bed()
    bed.trays[T3].stop()  # taken away for repair
    away = run(bed, every=NEW_PORT, out_of_service=[T3])
    assert away.restarted == [T1, T2] and away.reconnected == [], away.problems
    pids = {tray: bed.trays[tray].started for tray in (T1, T2)}
    back = run(bed, every=NEW_PORT)
    assert back.written == {T3: ["config"]} and back.started == [T3] and back.restarted == [], back.problems
    assert back.reconnected == [T1, T2] and back.verdicts == {bed.domain: "healthy"}
    # SIGUSR1 is no restart: the peers are the instances they were.
    assert {tray: bed.trays[tray].started for tray in (T1, T2)} == pids
    plan = last_plan(back)
    assert plan["trays"][T1]["reconnect"] == (
        "rack1-tray03 starts in domain rack1: reconnect to it now, not after the reconnect backoff (up to 125 s)")
    assert plan["trays"][T3]["reconnect"] == ""
    assert plan["reconnects"] == [
        {"tray": tray, "service": "nvidia-imex", "reason": plan["trays"][tray]["reconnect"], "hosts_file": ""}
        for tray in (T1, T2)]
    assert run(bed, every=NEW_PORT).reconnected == []


def test_a_stopped_daemon_started_alone_makes_its_peers_reconnect():
    bed = Bed("stopped")
    outcome = run(bed)
    assert outcome.started == [T2] and outcome.reconnected == [T1, T3], outcome.problems


def test_a_whole_domain_restart_signals_nobody():
    outcome = run(Bed(), every=NEW_PORT)
    assert outcome.restarted == ALL and outcome.reconnected == [] and outcome.planned_reconnect == []
    assert all(tray["reconnect"] == "" for tray in last_plan(outcome)["trays"].values())


def test_a_stopped_tray_with_new_files_restarts_the_domain_and_signals_nobody():
    outcome = run(Bed("stopped"), every=NEW_PORT)
    assert outcome.restarted == ALL and outcome.started == [] and outcome.reconnected == []


def test_a_no_change_run_signals_nobody():
    outcome = run(Bed())
    assert outcome.started == [] and outcome.reconnected == [] and last_plan(outcome)["reconnects"] == []


def test_check_mode_predicts_the_reconnects_and_signals_nobody():
    bed = Bed("stopped")
    checked = run(bed, check=True)
    assert checked.planned_reconnect == [T1, T3] and checked.reconnected == [] and bed.events == []
    real = run(bed)
    assert checked.decisions() == real.decisions() and real.reconnected == [T1, T3]


def test_work_on_the_domain_does_not_hold_the_reconnect_back():
    """No restart is involved: the peers stay the same instances, their jobs keep what they imported."""
    bed = Bed("stopped")
    bed.trays[T1].work = list(WORK)
    outcome = run(bed)
    assert not outcome.refused and outcome.started == [T2] and outcome.reconnected == [T1, T3], outcome.problems


def test_only_the_peers_in_the_run_and_in_service_are_signalled():
    bed = Bed("stopped")
    assert run(bed, limit=[T1, T2]).reconnected == [T1]
    bed = Bed("stopped")
    assert run(bed, out_of_service=[T3]).reconnected == [T1]


# --- the rule on records --------------------------------------------------------------------------

def plan_of(start=(), stopped=(), restart=False, unreachable=(), reconnect=None):
    trays = {tray: Tray(domain="rack1", stopped=tray in stopped, restart=restart) for tray in ALL}
    for tray, reason in (reconnect or {}).items():
        trays[tray].reconnect = reason
    domain = Domain(trays=list(ALL), trays_in_run=list(ALL), service="nvidia-imex", restart=restart,
                    start=list(start))
    return RunRecord(domains={"rack1": domain}, trays=trays, unreachable=list(unreachable))


def reasons(plan):
    return {tray: entry.reconnect for tray, entry in plan.trays.items()}


def test_a_tray_ssh_does_not_reach_is_neither_started_nor_signalled():
    plan = plan_reconnects(plan_of(start=[T3], unreachable=[T3]), ["rack1"])
    assert reasons(plan) == {T1: "", T2: "", T3: ""} and plan.reconnects == []


def test_two_trays_started_are_named_together_and_neither_signals_the_other():
    plan = plan_reconnects(plan_of(start=[T2, T3], stopped=[T2, T3]), ["rack1"])
    assert reasons(plan) == {T1: "rack1-tray02, rack1-tray03 start in domain rack1: reconnect to them now, not "
                                 "after the reconnect backoff (up to 125 s)", T2: "", T3: ""}


def test_a_running_tray_that_is_not_ready_signals_its_peers_but_not_itself():
    plan = plan_reconnects(plan_of(start=[T2]), ["rack1"])
    assert [item["tray"] for item in plan.reconnects] == [T1, T3]


def test_a_reason_another_rule_gave_first_is_kept():
    """New addresses in the hosts block alone reconnect every running daemon (the host names' rule)."""
    plan = plan_reconnects(plan_of(reconnect={T1: "new addresses in /etc/hosts", T2: "", T3: ""}), ["rack1"])
    assert reasons(plan) == {T1: "new addresses in /etc/hosts", T2: "", T3: ""}
    assert plan.reconnects == [{"tray": T1, "service": "nvidia-imex", "reason": "new addresses in /etc/hosts",
                                "hosts_file": ""}]
