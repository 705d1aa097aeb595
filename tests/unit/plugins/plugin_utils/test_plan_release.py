# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan's rule for a daemon that runs another IMEX release than the installed one (a package
changed under a running daemon): its domain restarts, as for files newer than the daemon, under the
same busy guard and for the whole domain only; a release the tray could not tell decides nothing."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import (
    BEFORE,
    DRIVER,
    SERVICE,
    SKIPPED,
    all_ready,
    judge,
    planned,
    read_of,
    refused,
    status_of,
)

# The release the soak left running on one tray after the installed one was changed back.
OLD = "580.105.08"
BUSY = {"compute_apps": [{"pid": 4242, "name": "python3"}]}


def running(release, source="log"):
    """A tray read's daemon_release: the running daemon's release as imex_tray_info reports it."""
    return {"daemon_release": {"running": release, "source": source, "executable": "/usr/bin/nvidia-imex (deleted)",
                               "replaced": True, "unknown": None if release else "no start line"}}


def test_a_daemon_on_another_release_than_the_installed_one_is_pending_naming_tray_and_both_releases():
    _model, _options, plan = planned(reads={"a2": running(OLD)})
    assert plan["domains"]["rackA"]["pending"] == {"a2": "the daemon on a2 runs IMEX 580.105.08, but 580.95.09 is "
                                                         "installed"}
    assert plan["domains"]["rackA"]["pending_release"] == plan["domains"]["rackA"]["pending"]
    assert plan["domains"]["rackB"]["pending"] == {} and plan["domains"]["rackB"]["pending_release"] == {}


@pytest.mark.parametrize("read", [
    running(DRIVER),                                   # the installed release runs
    running(None),                                     # the tray could not tell: no decision on it
    {},                                                # a read of an older collection: no daemon_release
    dict(running(OLD), imex_version=None),             # the installed release is unknown
    dict(running(OLD), active=False),                  # nothing runs: a start runs the installed release
])
def test_no_release_restart_without_two_known_releases_that_differ(read):
    _model, _options, plan = planned(reads={"a2": read})
    assert plan["domains"]["rackA"]["pending"] == {} and plan["domains"]["rackA"]["pending_release"] == {}


def test_release_restart_needs_a_running_daemon():
    read = dict(running(OLD), imex_version=DRIVER, services={SERVICE: "failed"}, services_started={SERVICE: None})
    assert run_plan.release_restart("a2", read, SERVICE) is None
    read.update(services={SERVICE: "active"}, services_started={SERVICE: BEFORE})
    assert run_plan.release_restart("a2", read, SERVICE) == "the daemon on a2 runs IMEX 580.105.08, but 580.95.09 is installed"


def test_the_domain_of_a_daemon_on_another_release_restarts_whole_with_the_reason():
    _model, _options, plan = planned(reads={"a2": running(OLD)})
    after = run_plan.restart.restart(plan, ["rackA"], {"a1": SKIPPED, "a2": SKIPPED}, all_ready(plan, ["rackA"]))
    domain = after["domains"]["rackA"]
    assert domain["restart"] is True and after["restarting"] == ["rackA"]
    assert domain["restart_reasons"] == {"a2": "pending restart: the daemon on a2 runs IMEX 580.105.08, but 580.95.09 "
                                               "is installed"}
    assert [after["trays"][tray]["restart"] for tray in ("a1", "a2")] == [True, True]
    assert after["trays"]["a1"]["action"] == (
        "restarting all 2 trays of domain rackA together: one of its trays: a2: pending restart: the daemon on a2 runs "
        "IMEX 580.105.08, but 580.95.09 is installed")
    # The restart puts the installed release in force: the proof judges the new daemons.
    assert domain["pending"] == {} and domain["pending_release"] == {}


def test_files_newer_than_the_daemon_and_another_release_are_both_named():
    _model, _options, plan = planned(reads={"a2": dict(running(OLD), started=BEFORE - 60)})
    assert plan["domains"]["rackA"]["pending"]["a2"] == (
        "daemon started at 2025-11-25T12:59:00Z, before /etc/nvidia-imex/config.cfg, /etc/nvidia-imex/nodes_config.cfg "
        "were written at 2025-11-25T13:00:00Z; the daemon on a2 runs IMEX 580.105.08, but 580.95.09 is installed")


def test_a_busy_domain_on_another_release_is_refused_naming_the_release():
    _model, _options, plan = planned(reads={"a1": BUSY, "a2": running(OLD)})
    (problem,) = refused(run_plan.restart.restart, plan, ["rackA"], {"a1": SKIPPED, "a2": SKIPPED}, {})
    assert problem.startswith("domain rackA is not restarted: work runs on it (a1: pid 4242 python3).")
    assert ("Its daemons on a2 do not run what is on disk (the daemon on a2 runs IMEX 580.105.08, but 580.95.09 is "
            "installed).") in problem


def test_a_domain_partly_in_the_run_is_refused_for_a_release_restart():
    _model, _options, plan = planned(domains={"rack1": ["t1", "t2", "t3"]}, play_hosts=["t1", "t2"],
                                     reads={"t2": running(OLD)})
    (problem,) = refused(run_plan.restart.restart, plan, ["rack1"], {"t1": SKIPPED, "t2": SKIPPED}, {})
    assert problem.startswith("tray t2 needs a restart (pending restart: the daemon on t2 runs IMEX 580.105.08, but "
                              "580.95.09 is installed), which takes a restart of every tray of its domain together, "
                              "but this run leaves out t3.")


def test_the_guard_at_the_last_moment_holds_a_release_restart_too():
    _model, _options, plan = planned(reads={"a2": running(OLD)})
    after = run_plan.restart.restart(plan, ["rackA"], {"a1": SKIPPED, "a2": SKIPPED}, all_ready(plan, ["rackA"]))
    reads = {tray: read_of(after, tray) for tray in ("a1", "a2")}
    reads["a1"].update(BUSY)
    (problem,) = refused(run_plan.guard.guard, after, ["rackA"], reads)
    assert "a2: pending restart: the daemon on a2 runs IMEX 580.105.08, but 580.95.09 is installed" in problem


def test_validate_names_a_daemon_on_another_release_as_stale():
    model, _options, plan = planned(reads={"a2": running(OLD)}, converge=False)
    pending = {name: plan["domains"][name]["pending"] for name in plan["judge_now"]}
    stale, healthy = judge(plan, model, {"rackA": status_of(plan, "rackA"), "rackB": status_of(plan, "rackB")},
                           pending=pending)
    assert (stale["verdict"], healthy["verdict"]) == ("stale", "healthy")
    assert stale["problems"] == [
        "tray a2 runs another IMEX release than the one installed (the daemon on a2 runs IMEX 580.105.08, but "
        "580.95.09 is installed): a restart of the domain is pending; run site.yml to restart it"]
