# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's IMEX channel plugin and the per-job probe, against real Slurm 24.11.

The bed (fixture slurm_bed) is 2 racks x 3 trays; its slurm.conf has SwitchType=switch/nvidia_imex,
SwitchParameters=imex_channel_count=2048, PrologFlags=Alloc, Prolog=/etc/slurm/prolog.d/*,
Epilog=/etc/slurm/epilog.d/* and the partition gpu. The probe job is a real srun whose prolog starts
the simulated daemons. What the plan decides on the Slurm configuration each tray reads (channel0
under Slurm's channel plugin, a prolog directory slurm.conf does not run) is proven on that
configuration's recorded output by the unit tests (test_plan_slurm_channels.py, tests/README.md), and
so is the verdict on what a probe job saw (a broken pair names the domain and the pair).
"""
from __future__ import annotations

import re
import time

import pytest

from conftest import run_playbook  # noqa: E402 (tests/e2e is on sys.path as the rootdir of its conftest)

RACK_SHAPE = (2, 3)
CONTROLLER = "slurmctl"
PER_JOB = {"imex_mode": "slurm_per_job"}
PROBE = dict(PER_JOB, imex_slurm_probe_partition="gpu")


def on(bed, host, *command, check=True):
    result = bed.ssh(host, *command)
    if check:
        assert result.returncode == 0, "%s on %s: %s%s" % (" ".join(command), host, result.stdout, result.stderr)
    return result


def daemon_state(bed, tray):
    return on(bed, tray, "systemctl", "is-active", "nvidia-imex", check=False).stdout.strip()


def wait_for(predicate, what, timeout=90):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(1)


def node_states(bed):
    out = on(bed, CONTROLLER, "sinfo", "--noheader", "--Node", "--format", "%N %T").stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def all_idle(bed):
    wait_for(lambda: set(node_states(bed).values()) == {"idle"}, "every node idle")
    for rack in (1, 2):
        for tray in bed.trays_of(rack):
            wait_for(lambda: daemon_state(bed, tray) != "active", "the daemon of %s to stop" % tray)


def probe_results(run):
    return {res["item"]: res for _host, res in run.module_results("rackscale.imex.imex_slurm_probe")}


@pytest.fixture(scope="module")
def installed(slurm_bed):
    run = run_playbook("site.yml", slurm_bed.inventory, cmdline_vars=PER_JOB)
    assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
    return slurm_bed


class TestProbe:
    def test_validate_proves_every_idle_domain_from_inside_a_job(self, installed):
        bed = installed
        run = run_playbook("validate.yml", bed.inventory, cmdline_vars=PROBE)
        assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
        probes = probe_results(run)
        assert sorted(probes) == ["rack1", "rack2"], probes
        for name, found in probes.items():
            assert (found["probed"], found["healthy"], found["domain_state"]) == (True, True, "UP"), found
            assert [node["address"] for node in found["nodes"]] == [
                "198.18.%s.%d" % (name[-1], 10 + index) for index in (1, 2, 3)], found
        trays = ", ".join(bed.trays_of(1))
        assert ("a probe job in partition gpu on %s saw the domain UP, every node READY and every pair connected"
                % trays) in run.stdout
        # The simulated driver has no /proc/driver/nvidia/params: the count is unknown, said, not refused.
        shown = " ".join(run.stdout.split())
        assert re.search(r"\[WARNING\]: domain rack1, trays rack1-tray01, rack1-tray02, rack1-tray03: the "
                         r"driver's NVreg_ImexChannelCount could not be read", shown), shown[-3000:]
        # The job ended: its epilog stopped the daemons.
        all_idle(bed)

    def test_a_busy_domain_is_skipped_and_said_so_while_the_other_is_probed(self, installed):
        bed = installed
        trays = bed.trays_of(1)
        job = on(bed, CONTROLLER, "sbatch", "--parsable", "--exclusive", "-N3", "-w", ",".join(trays),
                 "--wrap", "sleep 600").stdout.strip()
        try:
            wait_for(lambda: all(node_states(bed)[tray] == "allocated" for tray in trays), "the job on rack1")
            run = run_playbook("validate.yml", bed.inventory, cmdline_vars=PROBE)
            assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
            assert sorted(probe_results(run)) == ["rack2"]
            assert re.search(r"domain rack1: no probe job: not idle in Slurm \(rack1-tray01: ALLOCATED", run.stdout), \
                run.stdout[-3000:]
        finally:
            on(bed, CONTROLLER, "scancel", job)
            all_idle(bed)
