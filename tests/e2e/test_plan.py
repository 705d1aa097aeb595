"""A tray away for repair, on a bed of one rack of four trays: it stays listed in its domain's node
list, is never contacted while it is out of service (imex_trays_out_of_service), its peers are
proven without it, and once back (as a fresh install) it gets its files and joins without a restart
of its peers, which the run makes reconnect to it at once (SIGUSR1) rather than after their backoff.

What the plan decides on the reads (a tray out of service never blocks its peers, work started after
the read, a Slurm job under another node name, a daemon option set apart on one tray) is proven by the
scenario tests (tests/unit/plan); a run failing before its restart and healed by the next is
tests/e2e/test_one_rack.py's, a domain membership given as a host var test_site_rack.py's.
"""
from __future__ import annotations

import json
import os

import pytest

from conftest import fresh_ssh_connections, requires_rack, run_playbook, simulated_bed

pytestmark = requires_rack

NODES = "/etc/nvidia-imex/nodes_config.cfg"

# Every module that acts on a tray (the locks are taken on each domain's first tray).
TRAY_MODULES = {"rackscale.imex.imex_tray_info", "rackscale.imex.imex_lock", "rackscale.imex.imex_channel",
                "rackscale.imex.imex_nodes_config", "rackscale.imex.imex_config", "rackscale.imex.imex_status",
                "rackscale.imex.imex_daemon_log", "ansible.builtin.systemd_service", "ansible.builtin.systemd",
                "ansible.builtin.service", "ansible.builtin.file", "ansible.builtin.copy", "ansible.builtin.command",
                "ansible.builtin.shell", "ansible.builtin.raw", "ansible.builtin.stat", "ansible.builtin.slurp",
                "ansible.builtin.reboot", "ansible.builtin.ping", "ansible.builtin.setup"}


def site(rack, reports, **extravars):
    return run_playbook("site.yml", rack.inventory,
                        extravars=dict({"imex_report_dir": reports, "imex_validate_timeout_s": 120}, **extravars))


def validate(rack, reports, **extravars):
    return run_playbook("validate.yml", rack.inventory,
                        extravars=dict({"imex_report_dir": reports, "imex_validate_timeout_s": 10}, **extravars))


def main_pids(rack, trays):
    """{tray: MainPID of its nvidia-imex} ("0" when it does not run)."""
    return {tray: rack.ssh(tray, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout.strip()
            for tray in trays}


def set_backoff(rack, trays, waits):
    """The simulated daemons' waits between attempts to a peer that is down (faults.json reconnect_backoff_s,
    read before each wait); None: their default 0.5 s retries."""
    for tray in trays:
        path = os.path.join(rack.state_dir, "trays", tray, "faults.json")
        with open(path, encoding="utf-8") as handle:
            knobs = json.load(handle)
        knobs.pop("reconnect_backoff_s", None)
        if waits:
            knobs["reconnect_backoff_s"] = waits
        with open(path + ".new", "w", encoding="utf-8") as handle:
            json.dump(knobs, handle)
        os.replace(path + ".new", path)


def verdict(reports, domain):
    with open(os.path.join(reports, domain + ".json")) as handle:
        return json.load(handle)["verdict"]


def messages(run):
    return "\n".join(run.failure_messages())


# ---------------------------------------------------------------------------------------- 1 x 4

FOUR = ["rack1-tray01", "rack1-tray02", "rack1-tray03", "rack1-tray04"]


@pytest.fixture(scope="class")
def four_trays(tmp_path_factory):
    reports = str(tmp_path_factory.mktemp("reports"))
    with simulated_bed(1, 4) as rack:
        run = site(rack, reports)
        assert run.rc == 0, run.stdout[-5000:]
        yield rack, reports


class TestOutOfService:

    def test_a_tray_away_for_repair_stays_listed_is_never_contacted_and_rejoins_without_a_restart(
            self, four_trays, tmp_path):
        rack, reports = four_trays
        away = "rack1-tray04"
        nodes_before = rack.ssh("rack1-tray01", "cat", NODES).stdout
        # The tray is pulled for repair: its cable is out, so a run that contacted it would fail.
        rack.simrack("fault", "isolate", away)
        try:
            run = site(rack, reports, imex_trays_out_of_service=[away])
            assert run.rc == 0, run.stdout[-5000:]
            contacted = sorted({host for host, _task, action, _res in run.ok_results()
                                if host == away and action in TRAY_MODULES})
            assert contacted == [] and not [e for e in run.events if e.get("event") == "runner_on_unreachable"]
            with open(os.path.join(reports, "rack1.json")) as handle:
                report = json.load(handle)
            assert report["ok"] and report["out_of_service"] == [away], report
            assert report["status"]["domain_state"] == "DEGRADED"
            assert "out of service: %s" % away in " ".join(
                str(res.get("msg")) for _h, task, _a, res in run.ok_results() if task == "Stop unless every domain is healthy")
            # The node list still names it, on every tray in service.
            assert {tray: rack.ssh(tray, "cat", NODES).stdout for tray in FOUR[:3]} == {
                tray: nodes_before for tray in FOUR[:3]}
            # Without the option, the same domain fails naming the tray.
            with fresh_ssh_connections() as ssh:
                missing = validate(rack, reports, **ssh)
            assert missing.rc != 0 and away in messages(missing), messages(missing)
        finally:
            rack.simrack("fault", "heal", "isolate", away)

        # Back from repair as a fresh install: no node list, daemon stopped. Its peers wait 600 s between
        # attempts to reach it (the real daemon's backoff grows to 125 s): only the SIGUSR1 the run sends
        # them after its start brings the domain UP within the proof's 120 s.
        set_backoff(rack, FOUR, [600])
        rack.ssh(away, "systemctl", "stop", "nvidia-imex")
        rack.ssh(away, "rm", "-f", NODES)
        peers = main_pids(rack, FOUR[:3])
        try:
            back = site(rack, reports)
        finally:
            set_backoff(rack, FOUR, None)
        assert back.rc == 0, back.stdout[-5000:]
        reconnected = back.module_results("rackscale.imex.imex_reconnect")
        assert sorted(host for host, _res in reconnected) == FOUR[:3], reconnected
        assert all(res["changed"] and res["main_pid_before"] == res["main_pid_after"] for _host, res in reconnected)
        assert main_pids(rack, FOUR[:3]) == peers, "a peer was restarted for the tray that rejoined"
        assert main_pids(rack, [away])[away] not in ("", "0")
        assert rack.ssh(away, "cat", NODES).stdout == nodes_before
        assert verdict(reports, "rack1") == "healthy"
        with open(os.path.join(reports, "rack1.json")) as handle:
            assert json.load(handle)["status"]["domain_state"] == "UP"
