"""The runs that need a 1 x 3 bed of their own, on one bed brought up once (each test that needs a
converged domain converges it first, and each leaves the domain converged and static):

- modes switch both ways: static -> dra -> dra_host_managed -> static. Each run ends in the unit state
  its mode wants and, where the host daemon runs, a validated UP domain. The dra mode masks the host
  daemon and leaves the channel device nodes to the DRA driver (only this collection's modprobe drop-in
  goes, and the boot entries of the isolation channels the static mode made); a later run in another
  mode unmasks and starts the daemon and puts the drop-in back. Once those entries are gone, a dra run
  with nothing to do neither runs the channels role nor takes a lock. Leaving dra_host_managed closes the
  command socket again;
- versions are checked before anything is written: a tray whose nvidia-imex is not its driver's release,
  and a domain whose trays run different releases, are refused by the run's one read of the trays,
  naming trays and versions, before any write or restart;
- the operator's pre- and post-restart tasks run around a domain's restart, and only then;
- a restart only for a real change: each daemon site.yml starts has its record (its InvocationID, the
  content of its two files, under /run), and a `touch` of one tray's node list then restarts nothing;
- a run that fails in the operator's pre-restart tasks leaves new files under old daemons: validate.yml
  says so, and the next site.yml run, with no hooks, restarts the domain and proves it.

What the plan decides on each read (the busy guard, a daemon left on another release, host names and the
driver, files newer than the daemon) is proven by the scenario and unit tests (tests/unit).
"""
from __future__ import annotations

import json
import os

from conftest import HOOK, clear_hook_records, hook_record, requires_rack, restart_hooks, run_playbook

pytestmark = requires_rack
RACK_SHAPE = (1, 3)
CHANNEL0 = "/dev/nvidia-caps-imex-channels/channel0"
DROP_IN = "/etc/modprobe.d/nvidia-imex.conf"
# The boot entries of the isolation channels (imex_channels), made in the static mode.
CHANNELS_BOOT_DIR = "/etc/rackscale-imex/channels.d"


def unit_state(rack, tray):
    active = rack.ssh(tray, "systemctl", "is-active", "nvidia-imex").stdout.strip()
    enabled = rack.ssh(tray, "systemctl", "is-enabled", "nvidia-imex").stdout.strip()
    return active, enabled


def site(rack, tmp_path, reports="reports", **extravars):
    """site.yml on the bed, its reports in tmp_path/``reports``, its proof bounded: (the run, its report directory)."""
    directory = str(tmp_path / reports)
    extravars = dict({"imex_report_dir": directory, "imex_validate_timeout_s": 120}, **extravars)
    return run_playbook("site.yml", rack.inventory, extravars=extravars), directory


def site_in_mode(rack, tmp_path, mode, **more):
    """site.yml in ``mode`` (dra without channel0, which the DRA driver gives): (the run, its report directory)."""
    if mode == "dra":
        more = dict({"imex_channel0": False}, **more)
    return site(rack, tmp_path, reports=mode, imex_mode=mode, **more)


def converge(rack, tmp_path, mode, **more):
    run, reports = site_in_mode(rack, tmp_path, mode, **more)
    assert run.rc == 0, "%s:\n%s" % (mode, run.stdout[-3000:])
    return reports


def assert_daemon_up(rack, reports):
    for tray in rack.trays_of(1):
        assert unit_state(rack, tray) == ("active", "enabled"), tray
    with open(os.path.join(reports, "rack1.json")) as handle:
        assert json.load(handle)["verdict"] == "healthy"


def test_every_mode_transition_ends_in_the_wanted_state(simulated_rack, tmp_path):
    rack = simulated_rack
    assert_daemon_up(rack, converge(rack, tmp_path, "static", imex_channels=[{"channel": 5}]))
    for tray in rack.trays_of(1):
        assert rack.ssh(tray, "test", "-d", CHANNELS_BOOT_DIR).returncode == 0, tray

    converge(rack, tmp_path, "dra")
    for tray in rack.trays_of(1):
        assert unit_state(rack, tray) == ("inactive", "masked"), tray
        # The node stays for the DRA driver; only the collection's own drop-in and boot entries go.
        assert rack.ssh(tray, "test", "-c", CHANNEL0).returncode == 0, tray
        assert rack.ssh(tray, "test", "-e", DROP_IN).returncode != 0, tray
        assert rack.ssh(tray, "test", "-e", CHANNELS_BOOT_DIR).returncode != 0, tray
    # The read says the entries are gone: nothing for the channels role, nothing to lock.
    again, _reports = site_in_mode(rack, tmp_path, "dra")
    assert again.rc == 0, again.stdout[-3000:]
    assert again.changed_hosts() == [] and "imex_channels" not in again.roles_run()
    assert again.module_results("rackscale.imex.imex_lock") == []

    # Out of dra straight into another mode whose daemon runs on the host.
    assert_daemon_up(rack, converge(rack, tmp_path, "dra_host_managed"))
    for tray in rack.trays_of(1):
        assert "NVreg_CreateImexChannel0=1" in rack.ssh(tray, "cat", DROP_IN).stdout, tray
    config = rack.ssh("rack1-tray02", "grep", "^IMEX_CMD_UNIX_DOMAIN_PATH=", "/etc/nvidia-imex/config.cfg").stdout
    assert config.strip() == "IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock"

    assert_daemon_up(rack, converge(rack, tmp_path, "static"))
    config = rack.ssh("rack1-tray02", "grep", "^IMEX_CMD_UNIX_DOMAIN_PATH=", "/etc/nvidia-imex/config.cfg").stdout
    assert config.strip() == "IMEX_CMD_UNIX_DOMAIN_PATH="


# --- versions --------------------------------------------------------------------------------------

WRITES = ("rackscale.imex.imex_nodes_config", "rackscale.imex.imex_config", "rackscale.imex.imex_channel")


# A setting the refused runs ask for: without the refusal it would be written on every tray.
CHANGE = {"imex_settings": {"LOG_LEVEL": 3}}


def assert_refused_before_any_write(rack, run, fragment):
    assert run.rc != 0
    assert any(fragment in message for message in run.failure_messages()), run.failure_messages()
    assert [action for _, _, action, _ in run.ok_results() if action in WRITES] == []
    assert run.changed_hosts() == []
    for tray in rack.trays_of(1):
        assert "LOG_LEVEL=3" not in rack.ssh(tray, "cat", "/etc/nvidia-imex/config.cfg").stdout, tray


def test_a_package_of_another_release_and_a_skewed_domain_are_refused_before_any_write(simulated_rack, tmp_path):
    # Refused by the read, before any write, whatever state the trays are in: no converge first.
    rack = simulated_rack
    rack.simrack("fault", "driver-version", "rack1-tray03", "580.105.08")
    try:
        assert_refused_before_any_write(
            rack, site(rack, tmp_path, **CHANGE)[0],
            "tray rack1-tray03 (domain rack1): nvidia-imex 580.95.09 does not match the driver 580.105.08")
        # The package follows the driver on that tray: now the domain runs two releases.
        rack.simrack("fault", "version", "rack1-tray03", "580.105.08")
        try:
            assert_refused_before_any_write(
                rack, site(rack, tmp_path, **CHANGE)[0],
                "domain rack1 runs different driver releases: 580.105.08 on rack1-tray03; "
                "580.95.09 on rack1-tray01, rack1-tray02; the daemons would answer !V!")
        finally:
            rack.simrack("fault", "heal", "version", "rack1-tray03")
    finally:
        rack.simrack("fault", "heal", "driver-version", "rack1-tray03")


# --- the operator's tasks around a restart --------------------------------------------------------

def hooks_site(rack, tmp_path, check=False, **extravars):
    return run_playbook("site.yml", rack.inventory, check=check, diff=check,
                        extravars=dict({"imex_report_dir": str(tmp_path / "reports"), "imex_validate_timeout_s": 120},
                                       **extravars))


def stops(run):
    return sorted(host for host, task in run.changed_tasks() if task == "Stop IMEX daemon")


def daemon_pids(rack):
    return [rack.ssh(tray, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout.strip()
            for tray in rack.trays_of(1)]


def test_operator_tasks_run_around_a_domain_restart_and_only_then(simulated_rack, tmp_path):
    rack = simulated_rack
    assert hooks_site(rack, tmp_path).rc == 0
    options = restart_hooks(tmp_path)
    trays = rack.trays_of(1)
    clear_hook_records(rack, trays)

    before = daemon_pids(rack)
    run = hooks_site(rack, tmp_path, imex_settings={"LOG_LEVEL": 2}, **options)
    assert run.rc == 0, run.stdout[-3000:]
    after = daemon_pids(rack)
    for tray, old_pid, new_pid in zip(trays, before, after):
        # Before: the old daemon still ran; after: the new one ran and the domain had been proven.
        assert hook_record(rack, tray, "pre") == ["rack1", ",".join(trays), old_pid]
        assert hook_record(rack, tray, "post") == ["rack1", ",".join(trays), new_pid]
        assert old_pid != new_pid
    clear_hook_records(rack, trays)

    # No restart, no hooks.
    unchanged = hooks_site(rack, tmp_path, imex_settings={"LOG_LEVEL": 2}, **options)
    assert unchanged.rc == 0 and stops(unchanged) == []
    assert [hook_record(rack, tray, which) for tray in trays for which in ("pre", "post")] == [None] * 6

    # Under --check the pre-restart tasks run (in check mode; these opt out of it to leave a trace),
    # the post-restart tasks do not: nothing restarted, nothing was proven.
    (tmp_path / "eager").mkdir()
    eager = restart_hooks(tmp_path / "eager", lambda which: (HOOK % which).replace(
        "  changed_when: true\n", "  changed_when: true\n  check_mode: false\n"))
    predicted = hooks_site(rack, tmp_path, check=True, imex_settings={"LOG_LEVEL": 3}, **eager)
    assert predicted.rc == 0, predicted.stdout[-3000:]
    assert [hook_record(rack, tray, "pre") is not None for tray in trays] == [True] * len(trays)
    assert [hook_record(rack, tray, "post") for tray in trays] == [None] * len(trays)
    assert daemon_pids(rack) == after
    clear_hook_records(rack, trays)


# --- a restart only for a real change ----------------------------------------------------------------

RECORD = "/run/rackscale-imex/loaded/nvidia-imex.json"


def unit_property(rack, tray, prop):
    return rack.ssh(tray, "systemctl", "show", "-p", prop, "--value", "nvidia-imex").stdout.strip()


def test_a_touch_of_a_node_list_restarts_nothing(simulated_rack, tmp_path):
    rack = simulated_rack
    trays = rack.trays_of(1)
    reports = {"imex_report_dir": str(tmp_path / "reports")}
    # Each daemon is one the collection started or restarted (this run's converge, or the restart of the
    # test before this one), and asks for nothing new: the setting of the domain stays as it is.
    first = run_playbook("site.yml", rack.inventory, extravars=reports)
    assert first.rc == 0, first.stdout[-3000:]
    for tray in trays:
        record = json.loads(rack.ssh(tray, "cat", RECORD).stdout)
        assert record["invocation_id"] == unit_property(rack, tray, "InvocationID")
        digests = rack.ssh(tray, "sha256sum", "/etc/nvidia-imex/nodes_config.cfg", "/etc/nvidia-imex/config.cfg").stdout
        assert {path: digest for digest, path in (line.split() for line in digests.splitlines())} == record["files"]
    pids = {tray: unit_property(rack, tray, "MainPID") for tray in trays}

    # What a backup tool, restorecon or a no-op chmod does: the change time moves, the content stays.
    rack.ssh(trays[1], "touch", "/etc/nvidia-imex/nodes_config.cfg")
    again = run_playbook("site.yml", rack.inventory, extravars=reports)
    assert again.rc == 0, again.stdout[-3000:]
    assert {tray: unit_property(rack, tray, "MainPID") for tray in trays} == pids
    assert [task for _host, task in again.changed_tasks() if "IMEX daemon" in task] == []
    plans = again.module_results("rackscale.imex.imex_plan")
    assert plans and not any("no record of what the running IMEX daemon loaded" in json.dumps(res)
                             for _host, res in plans)


# --- a run cut before its restart, healed by the next ----------------------------------------------

FAIL_BEFORE_RESTART = """---
- name: Drain the trays (fails)
  ansible.builtin.fail:
    msg: the drain of {{ imex_hook_domain }} failed
"""


def log_levels(rack):
    return [rack.ssh(tray, "grep", "^LOG_LEVEL=", "/etc/nvidia-imex/config.cfg").stdout.strip()
            for tray in rack.trays_of(1)]


def test_a_run_failing_before_its_restart_is_healed_by_the_next_plain_run(simulated_rack, tmp_path):
    rack = simulated_rack
    reports = str(tmp_path / "reports")
    level = {"imex_settings": {"LOG_LEVEL": 1}}
    before = daemon_pids(rack)
    assert "0" not in before and "LOG_LEVEL=1" not in log_levels(rack)
    pre = tmp_path / "pre.yml"
    pre.write_text(FAIL_BEFORE_RESTART)

    failed = hooks_site(rack, tmp_path, imex_pre_restart_tasks=str(pre), **level)
    assert failed.rc != 0
    assert "the drain of rack1 failed" in "\n".join(failed.failure_messages()), failed.failure_messages()
    # Cut between the writes and the restart: new config on disk, the old daemons run.
    assert log_levels(rack) == ["LOG_LEVEL=1"] * 3
    assert daemon_pids(rack) == before

    # validate.yml does not call such a domain healthy: its daemons run another config.
    checked = run_playbook("validate.yml", rack.inventory,
                           extravars={"imex_report_dir": reports, "imex_validate_timeout_s": 10})
    assert checked.rc != 0, checked.stdout[-3000:]
    assert any("rack1" in line and "restart" in line for message in checked.failure_messages()
               for line in message.splitlines()), checked.failure_messages()
    assert daemon_pids(rack) == before

    # The next plain run, asking for the same, restarts the domain and proves it.
    healed = hooks_site(rack, tmp_path, **level)
    assert healed.rc == 0, healed.stdout[-5000:]
    after = daemon_pids(rack)
    assert [old == new or new == "0" for old, new in zip(before, after)] == [False] * 3, (before, after)
    with open(os.path.join(reports, "rack1.json")) as handle:
        assert json.load(handle)["verdict"] == "healthy"

    again = hooks_site(rack, tmp_path, **level)
    assert again.rc == 0, again.stdout[-5000:]
    assert again.changed_hosts() == []
    assert daemon_pids(rack) == after
