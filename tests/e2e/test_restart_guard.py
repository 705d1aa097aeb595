"""A domain with work running on it is not restarted unless the operator says so (1 x 3 bed).

A GPU compute process on one tray (simrack fault busy), or in slurm mode a node Slurm has allocated
(simrack fault slurm), makes a changed domain refuse its restart,
in check mode and for real, naming the tray and the process; nothing is written and no daemon
stops, so the next run still sees the change. imex_allow_busy_restart=true applies it.
"""
from __future__ import annotations

from conftest import HOOK, clear_hook_records, hook_record, requires_rack, restart_hooks, run_playbook

pytestmark = requires_rack
RACK_SHAPE = (1, 3)
REFUSAL = "domain rack1 is not restarted: work runs on it (rack1-tray02: pid 4242 python3)"


def site(rack, tmp_path, check=False, **extravars):
    return run_playbook("site.yml", rack.inventory, check=check, diff=check,
                        extravars=dict({"imex_report_dir": str(tmp_path / "reports"), "imex_validate_timeout_s": 120},
                                       **extravars))


def stops(run):
    return sorted(host for host, task in run.changed_tasks() if task == "Stop IMEX daemon")


def daemon_pids(rack):
    return [rack.ssh(tray, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout.strip()
            for tray in rack.trays_of(1)]


def config_line(rack):
    return rack.ssh("rack1-tray01", "grep", "^LOG_LEVEL=", "/etc/nvidia-imex/config.cfg").stdout.strip()


def test_a_busy_domain_keeps_its_daemons_until_the_operator_allows_the_restart(simulated_rack, tmp_path):
    rack = simulated_rack
    first = site(rack, tmp_path)
    assert first.rc == 0, first.stdout[-3000:]
    before, level = daemon_pids(rack), config_line(rack)
    rack.simrack("fault", "busy", "rack1-tray02", "4242", "python3")
    try:
        change = {"imex_settings": {"LOG_LEVEL": 3}}
        predicted = site(rack, tmp_path, check=True, **change)
        assert predicted.rc != 0 and any(REFUSAL in message for message in predicted.failure_messages()), \
            predicted.stdout[-3000:]

        refused = site(rack, tmp_path, **change)
        assert refused.rc != 0
        message = next(message for message in refused.failure_messages() if REFUSAL in message)
        assert "Its new config (on rack1-tray01, rack1-tray02, rack1-tray03) is held back. Nothing was written." in message
        assert "imex_allow_busy_restart=true" in message
        assert stops(refused) == [] and daemon_pids(rack) == before and config_line(rack) == level

        allowed = site(rack, tmp_path, imex_allow_busy_restart=True, **change)
        assert allowed.rc == 0, allowed.stdout[-3000:]
        assert stops(allowed) == rack.trays_of(1)
        assert config_line(rack) == "LOG_LEVEL=3" and daemon_pids(rack) != before
    finally:
        rack.simrack("fault", "heal", "busy", "rack1-tray02")
    # Idle again: an unchanged domain is left alone.
    again = site(rack, tmp_path, imex_settings={"LOG_LEVEL": 3})
    assert again.rc == 0 and stops(again) == []


def test_a_slurm_allocated_tray_keeps_its_domain_from_a_restart(simulated_rack, tmp_path):
    rack = simulated_rack
    slurm = {"imex_mode": "slurm"}
    first = site(rack, tmp_path, **slurm)
    assert first.rc == 0, first.stdout[-3000:]
    before, level = daemon_pids(rack), config_line(rack)
    # A level no other test of this module sets, so that asking for it is a change.
    assert level != "LOG_LEVEL=1"
    # A drained node whose job still runs is busy; a drained idle one would not be.
    rack.simrack("fault", "slurm", "rack1-tray03", "MIXED+DRAIN")
    try:
        refused = site(rack, tmp_path, imex_settings={"LOG_LEVEL": 1}, **slurm)
        assert refused.rc != 0
        assert any("domain rack1 is not restarted: work runs on it (rack1-tray03: Slurm node rack1-tray03 state MIXED+DRAIN)"
                   in message for message in refused.failure_messages()), refused.stdout[-3000:]
        assert stops(refused) == [] and daemon_pids(rack) == before and config_line(rack) == level
    finally:
        rack.simrack("fault", "heal", "slurm", "rack1-tray03")
    # The same change on an idle Slurm node is applied.
    applied = site(rack, tmp_path, imex_settings={"LOG_LEVEL": 1}, **slurm)
    assert applied.rc == 0, applied.stdout[-3000:]
    assert stops(applied) == rack.trays_of(1) and config_line(rack) == "LOG_LEVEL=1"
    assert site(rack, tmp_path).rc == 0


DRA_REFUSAL = ("domain rack1: the host nvidia-imex is not handed over to the DRA driver while work runs on it "
               "(rack1-tray02: pid 4242 python3)")


def test_a_busy_domain_is_not_handed_over_to_the_dra_driver(simulated_rack, tmp_path):
    rack = simulated_rack
    first = site(rack, tmp_path)
    assert first.rc == 0, first.stdout[-3000:]
    before = daemon_pids(rack)
    rack.simrack("fault", "busy", "rack1-tray02", "4242", "python3")
    try:
        dra = {"imex_mode": "dra", "imex_channel0": False}
        for check in (True, False):
            refused = site(rack, tmp_path, check=check, **dra)
            assert refused.rc != 0 and any(DRA_REFUSAL in message for message in refused.failure_messages()), \
                refused.stdout[-3000:]
            # Refused before the channels: the collection's channel0 drop-in stays, and no daemon stopped.
            assert refused.changed_tasks() == []
            assert daemon_pids(rack) == before
        assert rack.ssh("rack1-tray02", "test", "-e", "/etc/modprobe.d/nvidia-imex.conf").returncode == 0
    finally:
        rack.simrack("fault", "heal", "busy", "rack1-tray02")


def test_operator_tasks_run_around_a_domain_restart_and_only_then(simulated_rack, tmp_path):
    rack = simulated_rack
    assert site(rack, tmp_path).rc == 0
    options = restart_hooks(tmp_path)
    trays = rack.trays_of(1)
    clear_hook_records(rack, trays)

    before = daemon_pids(rack)
    run = site(rack, tmp_path, imex_settings={"LOG_LEVEL": 2}, **options)
    assert run.rc == 0, run.stdout[-3000:]
    after = daemon_pids(rack)
    for tray, old_pid, new_pid in zip(trays, before, after):
        # Before: the old daemon still ran; after: the new one ran and the domain had been proven.
        assert hook_record(rack, tray, "pre") == ["rack1", ",".join(trays), old_pid]
        assert hook_record(rack, tray, "post") == ["rack1", ",".join(trays), new_pid]
        assert old_pid != new_pid
    clear_hook_records(rack, trays)

    # No restart, no hooks.
    unchanged = site(rack, tmp_path, imex_settings={"LOG_LEVEL": 2}, **options)
    assert unchanged.rc == 0 and stops(unchanged) == []
    assert [hook_record(rack, tray, which) for tray in trays for which in ("pre", "post")] == [None] * 6

    # Under --check the pre-restart tasks run (in check mode; these opt out of it to leave a trace),
    # the post-restart tasks do not: nothing restarted, nothing was proven.
    (tmp_path / "eager").mkdir()
    eager = restart_hooks(tmp_path / "eager", lambda which: (HOOK % which).replace(
        "  changed_when: true\n", "  changed_when: true\n  check_mode: false\n"))
    predicted = site(rack, tmp_path, check=True, imex_settings={"LOG_LEVEL": 3}, **eager)
    assert predicted.rc == 0, predicted.stdout[-3000:]
    assert [hook_record(rack, tray, "pre") is not None for tray in trays] == [True] * len(trays)
    assert [hook_record(rack, tray, "post") for tray in trays] == [None] * len(trays)
    assert daemon_pids(rack) == after
    clear_hook_records(rack, trays)
    site(rack, tmp_path)


def test_a_hook_that_is_not_a_controller_file_is_refused_before_any_tray_is_read(simulated_rack, tmp_path):
    run = site(simulated_rack, tmp_path, imex_pre_restart_tasks="hooks/drain.yml",
               imex_post_restart_tasks=str(tmp_path / "absent.yml"))
    assert run.rc != 0
    text = "\n".join(run.failure_messages())
    assert "imex_pre_restart_tasks = 'hooks/drain.yml' is not an absolute path on the controller" in text, text
    assert "imex_post_restart_tasks = '%s' is not a file on the controller" % (tmp_path / "absent.yml") in text, text
    assert run.changed_hosts() == []
