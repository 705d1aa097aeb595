# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A restart is pending only for a real change: where a record says what the running daemon instance
loaded (written when a run started it, tied to systemd's InvocationID), the content on disk decides, so
a touch, a no-op chmod or chown, an identical rewrite or a clock step restarts nothing. Without a record
of the running instance (a daemon started by hand or by an older release of the collection, a tray
rebooted since) the change times since the unit began to start decide, and the plan says so once."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import (
    CONFIG_PATH,
    NODES_PATH,
    SERVICE,
    STARTED,
    TWO_RACKS,
    described,
    instance_of,
    judge,
    model_of,
    options_of,
    preflight,
    read_of,
    status_of,
    wanted_files,
)

LATER = STARTED + 600


def after(reads=None, converge=True, domains=None):
    """The plan after the read of converged trays; ``reads``: {tray: function(plan, tray) -> read_of keywords}."""
    model = model_of(domains or TWO_RACKS)
    options = options_of(model)
    plan = preflight(model, options)
    found = {tray: read_of(plan, tray, **(reads or {}).get(tray, lambda _plan, _tray: {})(plan, tray))
             for tray in plan["trays"]}
    return model, run_plan.read.after_read(plan, model, options, found, converge=converge)


def loaded_files(plan, tray, **replaced):
    """What a run that started the daemon recorded: the wanted files, ``replaced`` ({path: text}) aside."""
    nodes_text, config_text = wanted_files(plan, tray)
    return dict({NODES_PATH: nodes_text, CONFIG_PATH: config_text}, **replaced)


def touched(plan, tray):
    """touch, chmod, chown, setfacl, restorecon, a backup tool, an identical rewrite or a clock step: the
    change times move after the daemon's start, the content stays what the daemon loaded."""
    return {"ctime": LATER, "loaded": loaded_files(plan, tray)}


def edited(plan, tray):
    """The node list edited on disk after a run started the daemon with the wanted one."""
    return {"ctime": LATER, "nodes": "198.18.9.9\n", "loaded": loaded_files(plan, tray)}


def by_hand(plan, tray):
    """A daemon started by hand (or by an older release of the collection) after its files changed."""
    return {"ctime": LATER, "loaded": None}


def test_a_touch_of_the_files_under_a_recorded_daemon_restarts_nothing():
    _model, plan = after({"a2": touched})
    assert plan["domains"]["rackA"]["pending"] == {} and plan["domains"]["rackA"]["pending_reload"] == {}
    assert plan["warnings"] == []


def test_a_touch_under_a_recorded_daemon_leaves_a_healthy_domain_healthy_in_a_proof():
    model, plan = after({"a1": touched, "a2": touched}, converge=False)
    pending = {name: plan["domains"][name]["pending"] for name in plan["judge_now"]}
    reports = judge(plan, model, {"rackA": status_of(plan, "rackA"), "rackB": status_of(plan, "rackB")},
                    pending=pending)
    assert [report["verdict"] for report in reports] == ["healthy", "healthy"]


def test_a_real_change_of_the_content_restarts_naming_the_file():
    _model, plan = after({"a2": edited})
    assert plan["domains"]["rackA"]["pending"] == {
        "a2": "daemon started at 2025-11-25T14:00:00Z loaded another /etc/nvidia-imex/nodes_config.cfg than the one "
              "on disk"}
    assert plan["warnings"] == []


def test_a_real_change_restarts_even_when_the_change_time_is_older_than_the_daemon():
    """A clock stepped back, or a copy that kept its times: the content still decides."""
    _model, plan = after({"a2": lambda plan, tray: dict(edited(plan, tray), ctime=STARTED - 3600)})
    assert list(plan["domains"]["rackA"]["pending"]) == ["a2"]


def test_a_daemon_started_by_hand_falls_back_to_change_times_and_the_plan_says_so_once():
    _model, plan = after({"a1": by_hand, "a2": by_hand, "b1": lambda plan, tray: {"loaded": None}})
    assert plan["domains"]["rackA"]["pending"] == {
        tray: "daemon started at 2025-11-25T14:00:00Z, before /etc/nvidia-imex/config.cfg, "
              "/etc/nvidia-imex/nodes_config.cfg were written at 2025-11-25T14:10:00Z" for tray in ("a1", "a2")}
    # b1, also without a record, runs files older than itself: nothing pending, but judged the same way.
    assert plan["domains"]["rackB"]["pending"] == {}
    assert plan["warnings"] == [
        "trays a1, a2, b1: no record of what the running IMEX daemon loaded (it was started at boot, by hand or by an older "
        "release of rackscale.imex): a restart is pending there when its config.cfg or node list changed after the "
        "daemon began to start, so even a no-op chmod, touch or identical rewrite of them restarts its domain. The "
        "next start of the daemon by this collection records it"]


def test_a_record_of_an_earlier_instance_is_no_record():
    """The daemon restarted since (by hand, or by systemd after a crash): another InvocationID."""
    def earlier(plan, tray):
        read = touched(plan, tray)
        instance = instance_of(tray, STARTED, read.pop("loaded"))
        instance["invocation_id"] = "0" * 32
        return dict(read, services_instance={SERVICE: instance})
    _model, plan = after({"a2": earlier})
    assert plan["domains"]["rackA"]["pending"]["a2"].startswith("daemon started at 2025-11-25T14:00:00Z, before ")
    assert len(plan["warnings"]) == 1 and plan["warnings"][0].startswith("tray a2: no record of what")


def test_after_a_reboot_no_record_and_files_older_than_the_daemon_restart_nothing():
    """/run is cleared with the instance: the new daemon began to start after every file was written."""
    _model, plan = after({tray: lambda plan, tray: {"loaded": None} for tray in ("a1", "a2", "b1", "b2")})
    assert all(domain["pending"] == {} for domain in plan["domains"].values())
    assert len(plan["warnings"]) == 1


def test_without_a_record_the_unit_s_start_of_activation_bounds_the_change_times():
    """systemd sets ExecMainStartTimestamp after the daemon read its files: a file changed while the unit
    was activating may not be in force; InactiveExitTimestamp is before it."""
    def activating(plan, tray):
        instance = instance_of(tray, STARTED, None)
        instance["inactive_exit"] = STARTED - 5
        return {"ctime": STARTED - 2, "loaded": None, "services_instance": {SERVICE: instance}}
    _model, plan = after({"a2": activating})
    assert plan["domains"]["rackA"]["pending"] == {
        "a2": "daemon started at 2025-11-25T13:59:55Z, before /etc/nvidia-imex/config.cfg, "
              "/etc/nvidia-imex/nodes_config.cfg were written at 2025-11-25T13:59:58Z"}


@pytest.mark.parametrize("loaded, on_disk, pending", [
    # Absent when the daemon started, absent now.
    (None, {"exists": False, "sha256": None, "ctime": None, "error": None}, False),
    # Loaded, gone since.
    ("a" * 64, {"exists": False, "sha256": None, "ctime": None, "error": None}, True),
    # Unreadable now: its change time decides.
    ("a" * 64, {"exists": None, "sha256": None, "ctime": LATER, "error": "denied"}, True),
    ("a" * 64, {"exists": None, "sha256": None, "ctime": STARTED - 60, "error": "denied"}, False),
])
def test_absent_and_unreadable_files_under_a_record(loaded, on_disk, pending):
    read = {"services": {SERVICE: "active"}, "services_started": {SERVICE: STARTED},
            "services_instance": {SERVICE: {"invocation_id": "1" * 32, "inactive_exit": STARTED,
                                             "loaded": {"invocation_id": "1" * 32, "files": {CONFIG_PATH: loaded}}}},
            "files": {CONFIG_PATH: on_disk}}
    assert (run_plan.pending_restart(read, SERVICE, [CONFIG_PATH]) is not None) is pending


def test_a_file_the_record_does_not_cover_is_judged_by_its_change_time():
    """A record of an earlier release or another config path: what it lacks falls back, the rest by content."""
    read = {"services": {SERVICE: "active"}, "services_started": {SERVICE: STARTED},
            "services_instance": {SERVICE: {"invocation_id": "1" * 32, "inactive_exit": STARTED, "loaded": {
                "invocation_id": "1" * 32, "files": {CONFIG_PATH: described("SERVER_PORT=1\n")["sha256"]}}}},
            "files": {CONFIG_PATH: described("SERVER_PORT=1\n", LATER), NODES_PATH: described("198.18.1.1\n", LATER)}}
    assert run_plan.pending_restart(read, SERVICE, [NODES_PATH, CONFIG_PATH]) == (
        "daemon started at 2025-11-25T14:00:00Z, before /etc/nvidia-imex/nodes_config.cfg was written at "
        "2025-11-25T14:10:00Z")


def test_a_stopped_daemon_has_no_record_that_counts():
    read = {"services": {SERVICE: "inactive"}, "services_started": {SERVICE: None},
            "services_instance": {SERVICE: None}}
    assert run_plan.loaded_record(read, SERVICE) is None and run_plan.pending_restart(read, SERVICE, [CONFIG_PATH]) is None


def test_tls_files_keep_their_reload_mark_rule_under_a_record():
    """TLS files are not in the record: a newer one is a pending reload, by change time, as before."""
    tls = "/etc/nvidia-imex/tls/tray.crt"
    read = {"services": {SERVICE: "active"}, "services_started": {SERVICE: STARTED},
            "services_instance": {SERVICE: {"invocation_id": "1" * 32, "inactive_exit": STARTED,
                                             "loaded": {"invocation_id": "1" * 32, "files": {}}}},
            "stat_files": {tls: {"exists": True, "ctime": LATER}}}
    assert run_plan.pending_reload(read, SERVICE, [tls], "/etc/nvidia-imex/tls/reloaded") == (
        "TLS credentials loaded at 2025-11-25T14:00:00Z, before /etc/nvidia-imex/tls/tray.crt was written at "
        "2025-11-25T14:10:00Z")
