# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""imex_mode slurm_per_job against real Slurm: slurmd on every tray runs the installed prolog and
epilog, which drive the simulated IMEX daemon.

The bed (fixture slurm_bed) is 2 racks x 4 trays; slurm.conf has PrologFlags=Alloc,
Prolog=/etc/slurm/prolog.d/*, Epilog=/etc/slurm/epilog.d/*, SwitchType=switch/nvidia_imex and a
hand-written topology/block file with one block per rack. Jobs are started with srun from the
controller host, as a user would, and look at the IMEX domain from inside.
"""
from __future__ import annotations

import json
import re
import shlex
import time

import pytest

from conftest import run_playbook  # noqa: E402 (tests/e2e is on sys.path as the rootdir of its conftest)

RACK_SHAPE = (2, 4)
CONTROLLER = "slurmctl"
PER_JOB = {"imex_mode": "slurm_per_job"}
NODE_LIST = "/run/nvidia-imex/nodes_config.cfg"
PROGRAM = "90-rackscale-imex"
# What each job step prints: its node, the node list the prolog wrote, this node's view of the domain.
LOOK = ("echo NODE $(hostname); echo LIST $(cat %s | tr '\\n' ' '); "
        "nvidia-imex-ctl -N | grep 'Domain State'" % NODE_LIST)


def on(bed, host, *command, check=True):
    result = bed.ssh(host, *command)
    if check:
        assert result.returncode == 0, "%s on %s: %s%s" % (" ".join(command), host, result.stdout, result.stderr)
    return result


def srun(bed, *options, command=LOOK, check=True, timeout=120):
    """srun from the controller; returns {node: {"list": [...], "state": "UP"|...}} and the result."""
    result = bed.simrack("ssh", CONTROLLER, "timeout %d srun --label %s sh -c %s"
                         % (timeout, " ".join(options), shlex.quote(command)), check=False, timeout=timeout + 30)
    if check:
        assert result.returncode == 0, "srun %s: %s%s" % (" ".join(options), result.stdout, result.stderr)
    by_task = {}             # the tasks' lines interleave: --label says whose each one is
    for line in result.stdout.splitlines():
        task, _, text = line.partition(": ")
        by_task.setdefault(task, []).append(text)
    seen = {}
    for lines in by_task.values():
        view = {"list": [], "state": None}
        for text in lines:
            words = text.split()
            if words[:1] == ["NODE"]:
                seen[words[1]] = view
            elif words[:1] == ["LIST"]:
                view["list"] = words[1:]
            elif text.startswith("Domain State:"):
                view["state"] = text.split(":", 1)[1].strip()
    return seen, result


def address(bed, tray):
    rack, index = re.match(r"rack(\d+)-tray(\d+)", tray).groups()
    return "198.18.%d.%d" % (int(rack), 10 + int(index))


def daemon_state(bed, tray):
    return on(bed, tray, "systemctl", "is-active", "nvidia-imex", check=False).stdout.strip()


def node_states(bed):
    out = on(bed, CONTROLLER, "sinfo", "--noheader", "--Node", "--format", "%N %T").stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def wait_for(predicate, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(1)


@pytest.fixture(scope="module")
def bed(slurm_bed):
    run = run_playbook("site.yml", slurm_bed.inventory, cmdline_vars=PER_JOB)
    assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
    return slurm_bed


def all_trays(bed):
    return [t for r in range(1, bed.racks + 1) for t in bed.trays_of(r)]


class TestInstallation:
    def test_every_tray_holds_the_scripts_the_map_and_a_service_left_to_the_prolog(self, bed):
        for tray in all_trays(bed):
            for directory in ("/etc/slurm/prolog.d", "/etc/slurm/epilog.d"):
                mode = on(bed, tray, "stat", "-c", "%a %U %G", "%s/%s" % (directory, PROGRAM)).stdout.split()
                assert mode == ["755", "root", "root"], (tray, directory, mode)
            assert daemon_state(bed, tray) == "inactive", tray
            enabled = on(bed, tray, "systemctl", "is-enabled", "nvidia-imex", check=False).stdout.strip()
            assert enabled == "disabled", (tray, enabled)
            config = on(bed, tray, "cat", "/etc/nvidia-imex/config.cfg").stdout
            assert "IMEX_NODE_CONFIG_FILE=%s" % NODE_LIST in config.splitlines(), tray

    def test_a_second_run_changes_nothing_and_validate_proves_the_installation(self, bed):
        again = run_playbook("site.yml", bed.inventory, cmdline_vars=PER_JOB)
        assert again.rc == 0, again.failure_messages()
        assert again.changed_hosts() == [], again.changed_tasks()
        proof = run_playbook("validate.yml", bed.inventory, cmdline_vars=PER_JOB)
        assert proof.rc == 0, proof.failure_messages() or proof.stdout[-3000:]


class TestJobs:
    def test_an_exclusive_four_node_job_lands_in_one_block_and_sees_an_up_domain_of_its_trays(self, bed):
        seen, _ = srun(bed, "-N4", "--exclusive")
        racks = {name.split("-")[0] for name in seen}
        assert len(seen) == 4 and len(racks) == 1, seen
        addresses = sorted(address(bed, tray) for tray in seen)
        for tray, view in seen.items():
            assert view["list"] == addresses, (tray, view)
            assert view["state"] == "UP", (tray, view)

    def test_a_job_across_two_racks_gets_one_domain_per_rack(self, bed):
        seen, _ = srun(bed, "-N8", "--exclusive")
        assert sorted(seen) == sorted(all_trays(bed)), seen
        for tray, view in seen.items():
            rack = tray.split("-")[0]
            own = [address(bed, t) for t in sorted(seen) if t.startswith(rack + "-")]
            assert view["list"] == own and view["state"] == "UP", (tray, view)

    def test_the_epilog_stops_the_daemons_and_empties_the_lists(self, bed):
        srun(bed, "-N8", "--exclusive")
        for tray in all_trays(bed):
            wait_for(lambda: daemon_state(bed, tray) == "inactive", "the daemon of %s to stop" % tray)
            assert on(bed, tray, "cat", NODE_LIST).stdout == "", tray

    def test_a_job_that_shares_its_nodes_gets_no_domain_and_the_prolog_says_why(self, bed):
        tray = bed.tray(1, 1)
        _, result = srun(bed, "-N1", "--oversubscribe", "-w", tray,
                         command="systemctl is-active nvidia-imex || true")
        assert result.stdout.split(": ", 1)[-1].strip() == "inactive", result.stdout
        log = on(bed, tray, "journalctl", "--no-pager", "-t", "rackscale-imex").stdout
        assert re.search(r"not .*exclusive|exclusive", log), log[-2000:]


class TestFailures:
    def test_a_tray_whose_daemon_cannot_start_fails_the_prolog_and_is_drained_alone(self, bed):
        broken = bed.tray(1, 2)
        bed.simrack("fault", "fail-start", broken)
        try:
            seen, result = srun(bed, "-N4", "--exclusive", "-w", ",".join(bed.trays_of(1)),
                                check=False, timeout=300)
            assert result.returncode != 0, result.stdout
            wait_for(lambda: all(state in ("idle", "drained") for state in node_states(bed).values()),
                     "the job's other nodes to finish completing")
            states = node_states(bed)
            assert states[broken] == "drained", states
            assert all(state == "idle" for node, state in states.items() if node != broken), states
            reason = on(bed, CONTROLLER, "sinfo", "--noheader", "-R", "--format", "%E|%N").stdout
            assert broken in reason and "rolog" in reason, reason
        finally:
            bed.simrack("fault", "heal", "fail-start", broken)
            on(bed, CONTROLLER, "scontrol", "update", "nodename=" + broken, "state=resume", check=False)
            for tray in bed.trays_of(1):
                wait_for(lambda: daemon_state(bed, tray) != "active", "the daemon of %s to stop" % tray)

    def test_site_yml_under_a_running_job_refuses_from_the_real_slurm_state(self, bed):
        trays = bed.trays_of(1)
        job = on(bed, CONTROLLER, "sbatch", "--parsable", "--exclusive", "-N4", "-w", ",".join(trays),
                 "--wrap", "sleep 600").stdout.strip()
        try:
            wait_for(lambda: all(daemon_state(bed, t) == "active" for t in trays), "the job's daemons", 90)
            pids = {t: on(bed, t, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout for t in trays}
            before = on(bed, trays[0], "cat", "/etc/nvidia-imex/config.cfg").stdout
            run = run_playbook("site.yml", bed.inventory,
                               cmdline_vars=dict(PER_JOB, imex_settings=json.dumps({"LOG_LEVEL": "4"}, separators=(",", ":"))))
            assert run.rc != 0
            message = " ".join(run.failure_messages())
            assert "rack1" in message and re.search(r"busy|job|Slurm", message), message
            assert on(bed, trays[0], "cat", "/etc/nvidia-imex/config.cfg").stdout == before
            assert {t: on(bed, t, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout
                    for t in trays} == pids
        finally:
            on(bed, CONTROLLER, "scancel", job)
            for tray in trays:
                wait_for(lambda: daemon_state(bed, tray) == "inactive", "the daemon of %s to stop" % tray)


class TestLeavingPerJob:
    """Last: the bed leaves the per-job mode."""

    def test_a_run_in_another_mode_removes_the_program_and_the_map(self, bed):
        run = run_playbook("site.yml", bed.inventory, cmdline_vars={"imex_mode": "slurm", "imex_channel0": "false"})
        assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
        for tray in all_trays(bed):
            left = on(bed, tray, "ls", "/etc/slurm/prolog.d", "/etc/slurm/epilog.d", "/etc/rackscale-imex",
                      check=False).stdout
            assert PROGRAM not in left and "slurm-job.json" not in left, (tray, left)
            assert daemon_state(bed, tray) == "active", tray
        # An exclusive job no longer stops or restarts the static daemon.
        pids = {t: on(bed, t, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout
                for t in bed.trays_of(1)}
        srun(bed, "-N4", "--exclusive", "-w", ",".join(bed.trays_of(1)), command="true")
        assert {t: on(bed, t, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout
                for t in bed.trays_of(1)} == pids
