# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan fields the role's `when:` and loops read instead of deciding in Jinja, each set by the one stage
that decides it: the fabric gate skipped and each wave's locks (preflight), the trays ssh did not reach
(read), the locks checked before the stop and the operator's hooks (restart), and what the imex_channels
role is told and does (preflight, channels)."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import (
    TWO_RACKS,
    all_ready,
    model_of,
    options_of,
    planned,
    preflight,
    reads_of,
    status_of,
    unreachable_read,
    wrote,
)

THREE_RACKS = dict(TWO_RACKS, rackC=["c1", "c2"])
# A task file of the operator's must exist on the controller: any file does.
HOOK = __file__


# --- preflight -----------------------------------------------------------------------------------

# The stages take the options converted (the action converts -e and survey text once, at the boundary).
@pytest.mark.parametrize("skipped", [True, False])
def test_the_fabric_check_skipped_is_the_runs_option(skipped):
    model = model_of(TWO_RACKS)
    plan = preflight(model, options_of(model, {"imex_skip_fabric_check": skipped}))
    assert plan["fabric_check_skipped"] is skipped


def test_each_later_wave_refreshes_the_locks_of_its_own_domains_and_the_first_none():
    model = model_of(THREE_RACKS)
    plan = preflight(model, options_of(model))
    assert plan["waves"] == [["rackA"], ["rackB"], ["rackC"]]
    assert plan["wave_locks"][0] == []
    for index in (1, 2):
        assert plan["wave_locks"][index] and plan["wave_locks"][index] == [
            lock for lock in plan["locks"] if lock["domain"] in plan["waves"][index]]


def test_one_wave_of_every_domain_refreshes_nothing():
    model = model_of(THREE_RACKS)
    plan = preflight(model, options_of(model, {"imex_rolling": False}))
    assert plan["wave_locks"] == [[]]


@pytest.mark.parametrize(("mode", "channel0"), [("static", True), ("dra_host_managed", True), ("slurm", False),
                                                ("slurm_per_job", False), ("dra", False)])
def test_the_channels_role_gets_the_trays_channel0_and_its_domains_mode(mode, channel0):
    model = model_of(TWO_RACKS)
    plan = preflight(model, options_of(model, {"imex_mode": mode, "imex_channel0": channel0}))
    assert {entry["channel0"] for entry in plan["trays"].values()} == {channel0}
    assert {domain["mode"] for domain in plan["domains"].values()} == {mode}


# --- read ----------------------------------------------------------------------------------------

def test_the_trays_ssh_did_not_reach_are_named_and_no_other():
    model = model_of(TWO_RACKS)
    options = options_of(model)
    plan = preflight(model, options)
    reads = reads_of(plan)
    # As the run registers a tray ssh did not reach.
    reads["a2"] = unreachable_read()
    # Past the fabric gate only when it is skipped: else a tray that gave no answer stops the run there.
    plan = run_plan.read.after_read(plan, model, options, reads, skip_fabric=True)
    assert plan["unreachable"] == ["a2"]
    _model, _options, plan = planned()
    assert plan["unreachable"] == []


# --- restart -------------------------------------------------------------------------------------

def _restarted(**every):
    """The plan of a wave of both racks in which a config change on a2 restarts rackA alone."""
    _model, _options, plan = planned(every=every, reads={"a2": {"config": "LOG_LEVEL=4\n"}})
    writes = {"a1": wrote(), "a2": wrote(config=True), "b1": wrote(), "b2": wrote()}
    return run_plan.restart.restart(plan, ["rackA", "rackB"], writes, all_ready(plan, ["rackA", "rackB"]))


def test_the_locks_checked_before_the_stop_are_those_of_the_restarting_domains():
    after = _restarted()
    assert after["restarting"] == ["rackA"]
    assert after["restart_locks"] and after["restart_locks"] == [
        lock for lock in after["locks"] if lock["domain"] == "rackA"]


def test_nothing_restarting_checks_no_lock():
    _model, _options, plan = planned()
    after = run_plan.restart.restart(plan, ["rackA", "rackB"], {tray: wrote() for tray in plan["trays"]},
                                     all_ready(plan, ["rackA", "rackB"]))
    assert after["restart_locks"] == []


def test_the_operators_hooks_run_on_the_restarting_trays_only_and_only_when_given():
    after = _restarted(imex_pre_restart_tasks=HOOK, imex_post_restart_tasks=HOOK)
    assert {tray: (entry["pre_restart_tasks"], entry["post_restart_tasks"]) for tray, entry in after["trays"].items()} == {
        "a1": (True, True), "a2": (True, True), "b1": (False, False), "b2": (False, False)}
    after = _restarted()
    assert {entry["pre_restart_tasks"] or entry["post_restart_tasks"] for entry in after["trays"].values()} == {False}


def test_under_check_the_pre_restart_tasks_run_but_not_the_post_restart_ones():
    # --check proves nothing, so nothing runs "after the proof"; the pre-restart tasks run in check mode.
    _model, _options, plan = planned(every={"imex_pre_restart_tasks": HOOK,
                                            "imex_post_restart_tasks": HOOK}, check_mode=True,
                                     reads={"a2": {"config": "LOG_LEVEL=4\n"}})
    writes = {"a1": wrote(), "a2": wrote(config=True), "b1": wrote(), "b2": wrote()}
    after = run_plan.restart.restart(plan, ["rackA", "rackB"], writes, all_ready(plan, ["rackA", "rackB"]))
    assert after["trays"]["a1"]["restart"] is True
    assert (after["trays"]["a1"]["pre_restart_tasks"], after["trays"]["a1"]["post_restart_tasks"]) == (True, False)


# --- channels ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("mode", "slurm_owns"), [("static", False), ("dra_host_managed", False), ("slurm", True),
                                                  ("slurm_per_job", True), ("dra", False)])
def test_the_channels_stage_says_where_slurm_owns_the_channels(mode, slurm_owns):
    assert run_plan.channels.channels(mode, False, [], {})["slurm_owns"] is slurm_owns


@pytest.mark.parametrize(("mode", "extra", "boot"), [
    ("static", [], False),                     # channel0 alone: nothing for the boot unit
    ("static", [{"channel": 5}], True),        # isolation channels of ours: the boot unit
    ("dra_host_managed", "[{channel: 5}]", True),
    ("slurm", [], True),                       # not ours: their boot entries are removed
    ("dra", [], True),
])
def test_the_channels_stage_says_whether_the_boot_tasks_run(mode, extra, boot):
    assert run_plan.channels.channels(mode, mode in ("static", "dra_host_managed"), extra, {})["boot"] is boot


@pytest.mark.parametrize(("allowed", "local", "reboot"), [(True, False, True), (False, False, False),
                                                          (True, True, False), (False, True, False)])
def test_a_reboot_is_allowed_where_asked_and_never_on_the_controller_itself(allowed, local, reboot):
    assert run_plan.channels.channels("static", True, [], {}, reboot_allowed=allowed, local=local)["reboot"] is reboot


def _restarted_with(check_mode=False, a1=None):
    _model, _options, plan = planned(check_mode=check_mode, reads={"a1": a1 or {}})
    writes = {"a1": wrote(), "a2": wrote(config=True), "b1": wrote(), "b2": wrote()}
    return run_plan.restart.restart(plan, ["rackA", "rackB"], writes, all_ready(plan, ["rackA", "rackB"]))


def test_a_restart_stops_the_running_daemons_only():
    after = _restarted_with(a1={"active": False})
    assert after["trays"]["a1"]["restart"] is True and after["trays"]["a1"]["stopped"] is True
    assert {tray: entry["stop"] for tray, entry in after["trays"].items()} == {
        "a1": False, "a2": True, "b1": False, "b2": False}


@pytest.mark.parametrize("check_mode", [True, False])
def test_under_check_the_start_after_a_stop_is_predicted_as_a_change(check_mode):
    after = _restarted_with(check_mode=check_mode, a1={"active": False})
    assert {tray: entry["start_predicted"] for tray, entry in after["trays"].items()} == {
        "a1": False, "a2": check_mode, "b1": False, "b2": False}


def test_the_restart_tasks_run_where_a_daemon_restarts_or_only_starts():
    # The read found a2's config changed by hand and b2's daemon stopped; both domains in one wave.
    _model, _options, plan = planned(every={"imex_rolling": False},
                                     reads={"a2": {"config": "LOG_LEVEL=4\n"}, "b2": {"active": False}})
    writes = {"a1": wrote(), "a2": wrote(config=True), "b1": wrote(), "b2": wrote()}
    statuses = all_ready(plan, ["rackA", "rackB"])
    statuses["rackB"] = status_of(plan, "rackB", not_ready=["b2"])
    after = run_plan.restart.restart(plan, ["rackA", "rackB"], writes, statuses)
    assert {tray: (entry["restart"], entry["start"], entry["restart_tasks"]) for tray, entry in after["trays"].items()} == {
        "a1": (True, False, True), "a2": (True, False, True), "b1": (False, False, False), "b2": (False, True, True)}
    # One include for the reload, the restart and the start: here the restarts and the start.
    assert {tray: entry["reload_or_restart"] for tray, entry in after["trays"].items()} == {
        "a1": True, "a2": True, "b1": False, "b2": True}
