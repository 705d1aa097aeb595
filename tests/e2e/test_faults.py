"""Faults on a simulated bed of two racks: each is detected and named, the other rack is left
alone, nothing is half-written, and once the cause is gone the next site.yml run converges.

Every test starts from a converged bed and heals what it broke, even when it fails: a test whose
run changed the trays converges them again; one whose run was refused before any change checks that
nothing changed and no run lock was left, and needs no run after it. What the plan decides on a
fault (a dead or unreachable tray, a status read, a version skew, a node list edited by hand, the locks
each wave refreshes) is proven by the scenario and unit tests (tests/unit, see tests/README.md), and a
write that fails by the write modules' unit tests; what a run that could not reach a tray records,
test_run_records.py.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os

import pytest

from conftest import clear_hook_records, hook_record, requires_rack, restart_hooks, run_playbook

pytestmark = requires_rack
RACK_SHAPE = (2, 3)
RACK1 = ["rack1-tray01", "rack1-tray02", "rack1-tray03"]
RACK2 = ["rack2-tray01", "rack2-tray02", "rack2-tray03"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return str(tmp_path_factory.mktemp("reports"))


@pytest.fixture(scope="module")
def bed(simulated_rack, reports):
    """The bed, converged once; every test leaves it converged and healthy again."""
    run = site(simulated_rack, reports)
    assert run.rc == 0, run.stdout[-5000:]
    return simulated_rack


def site(rack, reports, **extravars):
    return run_playbook("site.yml", rack.inventory,
                        extravars=dict({"imex_report_dir": reports, "imex_validate_timeout_s": 60}, **extravars))


def report(reports, domain):
    with open(os.path.join(reports, domain + ".json")) as handle:
        return json.load(handle)


def start_times(rack, trays):
    return {tray: rack.ssh(tray, "systemctl", "show", "-p", "ExecMainStartTimestampMonotonic", "nvidia-imex").stdout
            for tray in trays}


def messages(run):
    return "\n".join(run.failure_messages())


RUN_LOCK = "/run/rackscale-imex/run.lock"


def assert_no_run_lock_left(rack, trays):
    """A refused run released every lock it took: the next run is not refused as locked."""
    left = [tray for tray in trays if rack.ssh(tray, "test", "-e", RUN_LOCK).returncode == 0]
    assert left == [], "a run lock was left on %s" % left


def log_level(rack, tray):
    return rack.ssh(tray, "sed", "-n", "s/^LOG_LEVEL=//p", "/etc/nvidia-imex/config.cfg").stdout.strip()


@contextlib.contextmanager
def fault(rack, kind, *trays):
    """Inject a fault on trays; heal it on the way out."""
    rack.simrack("fault", kind, *trays)
    try:
        yield
    finally:
        rack.simrack("fault", "heal", kind, *trays)


def converges(rack, reports):
    """site.yml back to the bed's own state. A setting a test applied stays in config.cfg (a key the
    run does not name is left alone), so the stock LOG_LEVEL is named: every test that asks for
    LOG_LEVEL 3 then asks for a change."""
    run = site(rack, reports, imex_settings={"LOG_LEVEL": "4"})
    assert run.rc == 0, run.stdout[-5000:]
    assert report(reports, "rack1")["verdict"] == "healthy"
    return run


def test_daemon_failing_to_start_is_named_with_its_log_and_the_post_restart_tasks_do_not_run(bed, reports, tmp_path):
    hooks = restart_hooks(tmp_path)
    clear_hook_records(bed, RACK1)
    rack2_before, rack2_level = start_times(bed, RACK2), log_level(bed, "rack2-tray01")
    with fault(bed, "fail-start", "rack1-tray03"):
        # A daemon that will not start never makes its domain healthy: a short wait is enough.
        run = site(bed, reports, imex_settings={"LOG_LEVEL": "3"}, imex_validate_timeout_s=10, **hooks)
        assert run.rc != 0
        failed = {e["event_data"]["host"] for e in run.events if e.get("event") == "runner_on_failed"}
        assert "rack1-tray03" in failed or "rack1-tray03" in messages(run), messages(run)
        # Why, from the daemon's own log on that tray, in the failure and in the report.
        text = messages(run)
        assert "daemon log of rack1-tray03 (/var/log/nvidia-imex.log" in text, text
        assert "NvGpu Library version does not match GPU Driver version" in text
        logs = report(reports, "rack1")["daemon_logs"]
        assert list(logs) == ["rack1-tray03"] and logs["rack1-tray03"]["source"] == "file"
        assert any("NvGpu Library version does not match" in line for line in logs["rack1-tray03"]["lines"])
    # The domain was restarted (its pre-restart tasks ran), then failed its proof: its trays stay as
    # the pre-restart tasks left them.
    assert [hook_record(bed, tray, "pre")[0] for tray in RACK1] == ["rack1"] * 3
    assert [hook_record(bed, tray, "post") for tray in RACK1] == [None] * 3
    # The failed wave ended the run (any_errors_fatal): rack2's wave never ran, nothing of it changed.
    assert start_times(bed, RACK2) == rack2_before and log_level(bed, "rack2-tray01") == rack2_level != "3"
    clear_hook_records(bed, RACK1)
    converges(bed, reports)


def test_second_concurrent_run_fails_clearly(bed, reports):
    # Taken just now by another controller, in the root-only directory of the run lock.
    bed.ssh("rack1-tray01", "sh", "-c", "mkdir -p -m 700 /run/rackscale-imex && echo "
            "'{\"owner\": \"other-run\", \"since\": '$(date +%s)', \"hostname\": \"controller-b\"}'"
            " > /run/rackscale-imex/run.lock")
    try:
        run = site(bed, reports, imex_settings={"LOG_LEVEL": "3"})
        assert run.rc != 0
        assert "locked by other-run" in messages(run), messages(run)
        assert run.changed_hosts() == []
    finally:
        bed.ssh("rack1-tray01", "rm", "-f", RUN_LOCK)
    assert_no_run_lock_left(bed, RACK1 + RACK2)


# A local user's file where the lock goes (the directory is root's 0700, as the module makes it). A lock
# directory every local user could write into: tests/unit/plugins/modules/test_imex_lock.py.
def test_a_lock_place_another_user_controls_is_refused_before_any_change(bed, reports):
    tamper = ("mkdir -p -m 700 /run/rackscale-imex && touch /run/rackscale-imex/run.lock"
              " && chown 1000:1000 /run/rackscale-imex/run.lock")
    expected = ("/run/rackscale-imex/run.lock is owned by uid 1000, not by uid 0 that runs rackscale.imex.imex_lock; "
                "refusing to use it as the run lock")
    bed.ssh("rack1-tray01", "sh", "-c", tamper)
    try:
        before = start_times(bed, RACK1 + RACK2)
        run = site(bed, reports, imex_settings={"LOG_LEVEL": "3"})
        assert run.rc != 0
        assert expected in messages(run), messages(run)
        assert run.changed_hosts() == []
        assert start_times(bed, RACK1 + RACK2) == before
    finally:
        bed.ssh("rack1-tray01", "sh", "-c", "rm -f /run/rackscale-imex/run.lock && chmod 700 /run/rackscale-imex")
    assert_no_run_lock_left(bed, RACK1 + RACK2)


def test_two_controllers_each_on_whole_domains_run_side_by_side(bed, reports, tmp_path):
    # As two AWX jobs (one per rack group) or two operators would: each run limited to one whole
    # domain, started together, with a change that restarts its domain. The locks are per domain.
    # The change: LOG_LEVEL 3, or the stock 4 where the racks already run 3 (a rerun of this test).
    levels = {log_level(bed, "rack1-tray01"), log_level(bed, "rack2-tray01")}
    wanted = "4" if levels == {"3"} else "3"
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(run_playbook, "site.yml", bed.inventory, limit=rack,
                            extravars={"imex_report_dir": str(tmp_path / rack), "imex_validate_timeout_s": 60,
                                       "imex_settings": {"LOG_LEVEL": wanted}})
                for rack in ("rack1", "rack2")]
        first, second = (future.result() for future in runs)
    assert first.rc == 0, first.stdout[-4000:]
    assert second.rc == 0, second.stdout[-4000:]
    assert set(first.changed_hosts()) == set(RACK1) and set(second.changed_hosts()) == set(RACK2)
    assert sorted(os.listdir(tmp_path / "rack1")) == ["rack1.json", "summary.md"]
    assert sorted(os.listdir(tmp_path / "rack2")) == ["rack2.json", "summary.md"]
    assert report(str(tmp_path / "rack1"), "rack1")["verdict"] == report(str(tmp_path / "rack2"), "rack2")["verdict"] \
        == "healthy"
