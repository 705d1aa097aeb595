"""Around a domain's restart on the bed (1 x 3): the operator's pre- and post-restart tasks run around it.
What the busy guard decides on each read (GPU work, a Slurm job, the operator's allowance, the DRA
hand-over) is proven by the scenario tests (tests/unit/plan) on recorded reads.
"""
from __future__ import annotations

from conftest import HOOK, clear_hook_records, hook_record, requires_rack, restart_hooks, run_playbook

pytestmark = requires_rack
RACK_SHAPE = (1, 3)


def site(rack, tmp_path, check=False, **extravars):
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

