"""What the run decides, it decides on the controller from the whole inventory and from what the
trays show at the last moment, and a run cut short is finished by the next plain one.

Two beds, one after the other (one per class, each torn down before the next comes up):

* 1 x 3: a run that fails in the operator's pre-restart tasks, and one killed (SIGKILL) at the same
  point, leave new files under old daemons: validate.yml says so, and the next site.yml run, with
  no hooks, restarts the domain and proves it. Work that starts on a tray after the run read it (here: from
  the pre-restart tasks themselves) still keeps the domain from a restart, and so does a Slurm job
  on a tray whose Slurm node name is not its host name, in the default static mode.
* 2 x 4: a domain membership given as a host var (`imex_domain`, set through each domain group's
  vars) converges without the collection's vars plugin; a daemon option set on one tray of a rack
  is refused, naming the trays holding each value, before any tray is contacted, also when the
  other rack's group vars hold the same value.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from conftest import (ANSIBLE_ENV, PLAYBOOKS, READ_INTERVAL, fresh_ssh_connections, requires_rack, run_playbook,
                      simulated_bed, write_inventory)

pytestmark = requires_rack

CONFIG = "/etc/nvidia-imex/config.cfg"
NODES = "/etc/nvidia-imex/nodes_config.cfg"

# Every module that acts on a tray (the locks are taken on each domain's first tray).
TRAY_MODULES = {"rackscale.imex.imex_tray_info", "rackscale.imex.imex_lock", "rackscale.imex.imex_channel",
                "rackscale.imex.imex_nodes_config", "rackscale.imex.imex_config", "rackscale.imex.imex_status",
                "rackscale.imex.imex_daemon_log", "ansible.builtin.systemd_service", "ansible.builtin.systemd",
                "ansible.builtin.service", "ansible.builtin.file", "ansible.builtin.copy", "ansible.builtin.command",
                "ansible.builtin.shell", "ansible.builtin.raw", "ansible.builtin.stat", "ansible.builtin.slurp",
                "ansible.builtin.reboot", "ansible.builtin.ping", "ansible.builtin.setup"}


def site(rack, reports, inventory=None, envvars=None, **extravars):
    return run_playbook("site.yml", inventory or rack.inventory, envvars=envvars,
                        extravars=dict({"imex_report_dir": reports, "imex_validate_timeout_s": 120}, **extravars))


def validate(rack, reports, inventory=None, envvars=None, **extravars):
    return run_playbook("validate.yml", inventory or rack.inventory, envvars=envvars,
                        extravars=dict({"imex_report_dir": reports, "imex_validate_timeout_s": 10}, **extravars))


def level(value):
    """A daemon setting whose change restarts the domain."""
    return {"imex_settings": {"LOG_LEVEL": value}}


def main_pids(rack, trays):
    """{tray: MainPID of its nvidia-imex} ("0" when it does not run)."""
    return {tray: rack.ssh(tray, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout.strip()
            for tray in trays}


def log_levels(rack, trays):
    return {tray: rack.ssh(tray, "grep", "^LOG_LEVEL=", CONFIG).stdout.strip() for tray in trays}


def assert_all_restarted(before, after):
    assert set(after) == set(before)
    kept = sorted(tray for tray in before if after[tray] == before[tray] or after[tray] in ("", "0"))
    assert kept == [], "these trays still run their old daemon (or none): %s (%s -> %s)" % (kept, before, after)


def verdict(reports, domain):
    with open(os.path.join(reports, domain + ".json")) as handle:
        return json.load(handle)["verdict"]


def messages(run):
    return "\n".join(run.failure_messages())


def message_naming(run, *fragments):
    """The first failure line that holds every fragment, else None."""
    for message in run.failure_messages():
        for line in message.splitlines():
            if all(fragment in line for fragment in fragments):
                return line
    return None


def pre_restart_tasks(tmp_path, text):
    """imex_pre_restart_tasks: a task file of the operator holding `text`."""
    path = tmp_path / "pre.yml"
    path.write_text(text)
    return {"imex_pre_restart_tasks": str(path)}


def simrack_inventory(rack):
    with open(rack.inventory) as handle:
        return yaml.safe_load(handle)


def domain_groups(inventory):
    return inventory["all"]["children"]["imex_domains"]["children"]


# ---------------------------------------------------------------------------------------- 1 x 3

ONE_RACK = ["rack1-tray01", "rack1-tray02", "rack1-tray03"]


@pytest.fixture(scope="class")
def one_rack(tmp_path_factory):
    """A 1 x 3 bed, converged once with the stock config (LOG_LEVEL=4). Each test asks for a
    LOG_LEVEL of its own (1, 2, 0, 3), so that it is a change whatever ran before it."""
    reports = str(tmp_path_factory.mktemp("reports"))
    with simulated_bed(1, 3) as rack:
        run = site(rack, reports)
        assert run.rc == 0, run.stdout[-5000:]
        yield rack, reports


FAIL_BEFORE_RESTART = """---
- name: Drain the trays (fails)
  ansible.builtin.fail:
    msg: the drain of {{ imex_hook_domain }} failed
"""


# Touches the marker on the controller once, then waits there: the test kills the run while it waits,
# after the writes and before any daemon stops. (One task: the process that touches the marker is the
# one that waits, so the test sees the worker that runs it.)
HANG_BEFORE_RESTART = """---
- name: Tell the test that the domain restart is next, then wait until the run is killed
  ansible.builtin.shell: touch {marker} && sleep 120
  delegate_to: localhost
  run_once: true
  changed_when: true
"""


# A lock that goes stale within a minute, for the killed run and the one after it (a run takes another
# one's lock over once it is older than the larger of the two runs' stale_after), with the waits of a
# run below it (a lock must outlive the proof and two ctl calls without a refresh).
SHORT_LOCK = {"imex_lock_stale_after_s": 40, "imex_validate_timeout_s": 15, "imex_ctl_timeout_s": 10}


def process_groups_of(pid):
    """The process group of `pid` and those of its direct children (ansible's workers each lead one)."""
    groups = {pid}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ppid, pgid = int(fields[1]), int(fields[2])
        if ppid == pid and pgid == int(entry):
            groups.add(pgid)
    return groups


def kill_groups(groups):
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass


class TestOneRack:

    def test_a_run_failing_before_its_restart_is_healed_by_the_next_plain_run(self, one_rack, tmp_path):
        rack, reports = one_rack
        before = main_pids(rack, ONE_RACK)
        assert "LOG_LEVEL=1" not in log_levels(rack, ONE_RACK).values()

        failed = site(rack, reports, **level(1), **pre_restart_tasks(tmp_path, FAIL_BEFORE_RESTART))
        assert failed.rc != 0
        assert "the drain of rack1 failed" in messages(failed), messages(failed)
        # Cut between the writes and the restart: new config on disk, the old daemons run.
        assert log_levels(rack, ONE_RACK) == dict.fromkeys(ONE_RACK, "LOG_LEVEL=1")
        assert main_pids(rack, ONE_RACK) == before

        # validate.yml does not call such a domain healthy: its daemons run another config.
        checked = validate(rack, reports)
        assert checked.rc != 0, checked.stdout[-3000:]
        assert message_naming(checked, "rack1", "restart"), messages(checked)
        assert main_pids(rack, ONE_RACK) == before

        # The next plain run, asking for the same, restarts the domain and proves it.
        healed = site(rack, str(tmp_path / "healed"), **level(1))
        assert healed.rc == 0, healed.stdout[-5000:]
        after = main_pids(rack, ONE_RACK)
        assert_all_restarted(before, after)
        assert verdict(str(tmp_path / "healed"), "rack1") == "healthy"

        again = site(rack, reports, **level(1))
        assert again.rc == 0, again.stdout[-5000:]
        assert again.changed_hosts() == []
        assert main_pids(rack, ONE_RACK) == after

    def test_a_run_killed_before_its_restart_is_healed_by_the_next_plain_run(self, one_rack, tmp_path):
        rack, reports = one_rack
        before = main_pids(rack, ONE_RACK)
        assert "LOG_LEVEL=2" not in log_levels(rack, ONE_RACK).values()
        marker = tmp_path / "restart-next"
        hook = pre_restart_tasks(tmp_path, HANG_BEFORE_RESTART.format(marker=marker))
        extravars = tmp_path / "killed-run.json"
        extravars.write_text(json.dumps(dict(READ_INTERVAL, imex_report_dir=reports, **SHORT_LOCK, **level(2), **hook)))
        output = tmp_path / "killed-run.log"
        with open(output, "w") as log:
            playbook = subprocess.Popen(
                [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", rack.inventory,
                 os.path.join(PLAYBOOKS, "site.yml"), "-e", "@%s" % extravars],
                cwd=str(tmp_path), env=dict(os.environ, **ANSIBLE_ENV), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while not marker.exists() and playbook.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
            assert marker.exists(), "the run never reached its pre-restart tasks (rc %s):\n%s" % (
                playbook.poll(), output.read_text()[-5000:])
        finally:
            # As a controller that dies: ansible-playbook and its workers, at once.
            kill_groups(process_groups_of(playbook.pid))
            playbook.wait(timeout=60)
        assert log_levels(rack, ONE_RACK) == dict.fromkeys(ONE_RACK, "LOG_LEVEL=2")
        assert main_pids(rack, ONE_RACK) == before

        # The next run, with no hooks, waits for the killed run's lock to go stale, then finishes its work.
        healed = site(rack, str(tmp_path / "healed"), imex_lock_wait_s=150, **SHORT_LOCK, **level(2))
        assert healed.rc == 0, healed.stdout[-5000:]
        assert_all_restarted(before, main_pids(rack, ONE_RACK))
        assert verdict(str(tmp_path / "healed"), "rack1") == "healthy"

    def test_a_slurm_job_on_a_tray_named_otherwise_in_slurm_keeps_the_domain_from_a_restart(self, one_rack, tmp_path):
        rack, reports = one_rack
        tray, node_name = "rack1-tray02", "gb200-n02"
        inventory = simrack_inventory(rack)
        domain_groups(inventory)["rack1"]["hosts"][tray]["imex_slurm_node_name"] = node_name
        named = write_inventory(tmp_path, inventory)
        before = main_pids(rack, ONE_RACK)
        assert "LOG_LEVEL=3" not in log_levels(rack, ONE_RACK).values()
        # scontrol answers for that name only, with a job on the node.
        rack.simrack("fault", "slurm", tray, "ALLOCATED", "--node-name", node_name)
        try:
            # The default mode (static): Slurm may still run jobs on the trays.
            refused = site(rack, reports, inventory=named, **level(3))
            assert refused.rc != 0, refused.stdout[-5000:]
            assert message_naming(refused, tray, "ALLOCATED"), messages(refused)
            assert main_pids(rack, ONE_RACK) == before
        finally:
            rack.simrack("fault", "heal", "slurm", tray)
        applied = site(rack, reports, **level(3))
        assert applied.rc == 0, applied.stdout[-5000:]
        assert_all_restarted(before, main_pids(rack, ONE_RACK))


# ---------------------------------------------------------------------------------------- 2 x 4

@pytest.fixture(scope="class")
def two_racks():
    """A 2 x 4 bed, as `simrack up` leaves it."""
    with simulated_bed(2, 4) as rack:
        yield rack


def tray_state(rack, trays):
    """{tray: (its daemon files' checksums, its daemon's MainPID)}."""
    return {tray: (rack.ssh(tray, "sh", "-c", "sha256sum %s %s 2>&1" % (CONFIG, NODES)).stdout,
                   rack.ssh(tray, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout.strip())
            for tray in trays}


def all_trays(rack):
    return rack.trays_of(1) + rack.trays_of(2)


def tray_modules_run(run):
    """(host, module) of every result of a module that acts on a tray, unless run on the controller."""
    found = []
    for event in run.events:
        if event.get("event") not in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable"):
            continue
        data = event.get("event_data", {})
        delegated = ((data.get("res") or {}).get("_ansible_delegated_vars") or {}).get("ansible_delegated_host")
        on_controller = (delegated or data.get("host")) in ("localhost", "127.0.0.1")
        if event["event"] == "runner_on_unreachable" or (data.get("task_action") in TRAY_MODULES and not on_controller):
            found.append((delegated or data.get("host"), data.get("task_action")))
    return found


class TestTwoRacks:
    """Membership first: it converges the fresh bed, so that the refusals after it are checked
    against running daemons."""

    def test_domain_membership_from_a_host_var_without_the_vars_plugin(self, two_racks, tmp_path):
        rack = two_racks
        inventory = simrack_inventory(rack)
        for name, group in domain_groups(inventory).items():
            group["vars"] = {"imex_domain": name}
        path = write_inventory(tmp_path, inventory)
        plain_vars = {"ANSIBLE_VARS_ENABLED": "host_group_vars"}

        reports = str(tmp_path / "reports")
        run = site(rack, reports, inventory=path, envvars=plain_vars)
        assert run.rc == 0, run.stdout[-5000:]
        for number in (1, 2):
            trays = rack.trays_of(number)
            addresses = "".join("198.18.%d.%d\n" % (number, 10 + index) for index in range(1, len(trays) + 1))
            assert {tray: rack.ssh(tray, "cat", NODES).stdout for tray in trays} == dict.fromkeys(trays, addresses)
            assert verdict(reports, "rack%d" % number) == "healthy"

        checked = validate(rack, reports, inventory=path, envvars=plain_vars)
        assert checked.rc == 0, checked.stdout[-5000:]

    @pytest.mark.parametrize("rack1_vars", [{"imex_mode": "slurm", "imex_channel0": False}, {}],
                             ids=["other-rack-slurm-by-group-vars", "other-rack-default-mode"])
    def test_a_daemon_option_set_on_one_tray_of_a_rack_is_refused_before_any_tray(self, two_racks, rack1_vars, tmp_path):
        rack = two_racks
        inventory = simrack_inventory(rack)
        groups = domain_groups(inventory)
        if rack1_vars:
            groups["rack1"]["vars"] = rack1_vars
        # One tray of rack2, not its first: rack2's first tray holds the default like the others.
        groups["rack2"]["hosts"]["rack2-tray02"]["imex_mode"] = "slurm"
        path = write_inventory(tmp_path, inventory)
        before = tray_state(rack, all_trays(rack))

        run = site(rack, str(tmp_path / "reports"), inventory=path)
        assert run.rc != 0, run.stdout[-5000:]
        # The domain, the option, each value and the trays holding it.
        assert message_naming(run, "rack2", "imex_mode", "slurm", "rack2-tray02", "static", "rack2-tray01"), \
            messages(run)
        # rack1's trays agree with one another: it is not named.
        assert not message_naming(run, "rack1", "differs"), messages(run)
        assert tray_modules_run(run) == [], "a module ran on a tray before the refusal"
        assert tray_state(rack, all_trays(rack)) == before


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

        # Back from repair as a fresh install: no node list, daemon stopped.
        rack.ssh(away, "systemctl", "stop", "nvidia-imex")
        rack.ssh(away, "rm", "-f", NODES)
        peers = main_pids(rack, FOUR[:3])
        back = site(rack, reports)
        assert back.rc == 0, back.stdout[-5000:]
        assert main_pids(rack, FOUR[:3]) == peers, "a peer was restarted for the tray that rejoined"
        assert main_pids(rack, [away])[away] not in ("", "0")
        assert rack.ssh(away, "cat", NODES).stdout == nodes_before
        assert verdict(reports, "rack1") == "healthy"
