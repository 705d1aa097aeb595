# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""imex_mode slurm_per_job against real Slurm: slurmd on every tray runs the installed prolog and
epilog, which drive the simulated IMEX daemon.

One bed per Slurm generation (simrack up --slurm --slurm-suite): 24.11, whose slurmd tells the prolog
whether a job holds its nodes in SLURM_JOB_OVERSUBSCRIBE, and 26.05, which says it in
SLURM_JOB_EXCLUSIVE and sets SLURM_JOB_OVERSUBSCRIBE=NO for every job that did not ask to
oversubscribe. Each bed is 2 racks x 3 trays; slurm.conf has PrologFlags=Alloc,
Prolog=/etc/slurm/prolog.d/*, Epilog=/etc/slurm/epilog.d/*, SwitchType=switch/nvidia_imex, a
hand-written topology/block file with one block per rack, and several CPUs per tray with consumable
cores (select/cons_tres), so that ordinary jobs share a tray as they share a real GPU node. The site's
own prolog and epilog on the bed record the environment slurmd gives them (/run/slurm-job-env), so
each test also checks that the job was the kind it means. Jobs are started with srun or sbatch from
the controller host, as a user would.

Only the tests whose outcome depends on what slurmd tells the prolog (jobs sharing a tray, an exclusive
job) run on both beds; the others (the installation and its second run, validate.yml's probe job, a
job across both racks, failures, leaving the mode) run on the first generation's bed only
(FIRST_GENERATION_ONLY).

validate.yml's probe job (imex_slurm_probe_partition): a real srun whose prolog starts the simulated
daemons proves every idle domain from inside the job, and a domain Slurm has allocated is skipped and
said so. What the plan decides on the Slurm configuration each tray reads (channel0 under Slurm's
channel plugin, a prolog directory slurm.conf does not run) and the verdict on what a probe job saw (a
broken pair names the domain and the pair) are unit tests on recorded output (tests/README.md).
"""
from __future__ import annotations

import json
import re
import shlex
import time

import pytest

from conftest import SLURM_SUITES, run_playbook, simulated_bed  # noqa: E402 (tests/e2e is on sys.path)

RACK_SHAPE = (2, 3)
# The first one also runs the tests of FIRST_GENERATION_ONLY classes (pytest brings each bed up once:
# its tests are grouped by the module-scoped parameter, whose first value those classes share).
GENERATIONS = ("24.11", "26.05")
FIRST_GENERATION_ONLY = GENERATIONS[:1]
assert set(GENERATIONS) == set(SLURM_SUITES), "a bed for every Slurm release simrack runs"
CONTROLLER = "slurmctl"
PER_JOB = {"imex_mode": "slurm_per_job"}
PROBE = dict(PER_JOB, imex_slurm_probe_partition="gpu")
NODE_LIST = "/run/nvidia-imex/nodes_config.cfg"
PROGRAM = "90-rackscale-imex"
JOB_MAP = "/etc/rackscale-imex/slurm-job.json"
JOB_ENV_DIR = "/run/slurm-job-env"     # where the bed's site prolog and epilog record their environment
# What each job step prints: its node, the node list the prolog wrote, this node's view of the domain.
LOOK = ("echo NODE $(hostname); echo LIST $(cat %s | tr '\\n' ' '); "
        "nvidia-imex-ctl -N | grep 'Domain State'" % NODE_LIST)
# What slurmd tells the prolog of each kind of job (recorded on these beds): SLURM_JOB_OVERSUBSCRIBE,
# SLURM_JOB_EXCLUSIVE (None: not set).
JOB_ENV = {
    "24.11": {"ordinary": ("OK", None), "exclusive=user": ("USER", None), "exclusive": ("NO", None)},
    "26.05": {"ordinary": ("NO", "NO"), "exclusive=user": ("NO", "USER"), "exclusive": ("NO", "NODE")},
}


def pytest_generate_tests(metafunc):
    if "generation" in metafunc.fixturenames:
        metafunc.parametrize("generation", getattr(metafunc.cls, "GENERATIONS", GENERATIONS),
                             indirect=True, scope="module")


@pytest.fixture(scope="module")
def generation(request):
    return request.param


@pytest.fixture(scope="module")
def bed(generation):
    with simulated_bed(*RACK_SHAPE, slurm=True, slurm_release=generation) as rack:
        run = run_playbook("site.yml", rack.inventory, cmdline_vars=PER_JOB)
        assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
        yield rack


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


def sbatch(bed, *options):
    """A batch job that marks its start on its node (/run/job-running-<id>: every prolog of the job has
    finished) and runs until cancelled; returns its id."""
    return on(bed, CONTROLLER, "sbatch", "--parsable", "--output=/dev/null", *options,
              "--wrap", "touch /run/job-running-$SLURM_JOB_ID; exec sleep 600").stdout.strip()


def job_state(bed, job):
    out = on(bed, CONTROLLER, "squeue", "--noheader", "--states=all", "--jobs", job, "--format=%T", check=False).stdout
    return out.strip() or "GONE"


def end_job(bed, job):
    """scancel (a job that has ended already is left as it is), then wait until the job's epilogs have
    finished (slurmctld then leaves COMPLETING)."""
    on(bed, CONTROLLER, "scancel", job, check=False)
    wait_for(lambda: job_state(bed, job) not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"),
             "job %s to end, its epilogs done" % job)


def job_env(bed, tray, job, context="prolog_slurmd"):
    """The environment slurmd gave the site's prolog (or epilog) of `job` on `tray`, as a dict."""
    path = "%s/%s.%s" % (JOB_ENV_DIR, job, context)
    wait_for(lambda: on(bed, tray, "test", "-e", path, check=False).returncode == 0, path + " on " + tray)
    return dict(line.split("=", 1) for line in on(bed, tray, "cat", path).stdout.splitlines() if "=" in line)


def assert_job_kind(bed, generation, tray, job, kind):
    """The job is what the test means: slurmd told its prolog what this Slurm release tells a job of `kind`."""
    env = job_env(bed, tray, job)
    told = (env.get("SLURM_JOB_OVERSUBSCRIBE"), env.get("SLURM_JOB_EXCLUSIVE"))
    assert told == JOB_ENV[generation][kind], (generation, kind, job, told)


def daemon_state(bed, tray):
    return on(bed, tray, "systemctl", "is-active", "nvidia-imex", check=False).stdout.strip()


def daemon_run(bed, tray):
    """The daemon's state, main PID and invocation: a stop or a start changes them."""
    out = on(bed, tray, "systemctl", "show", "-p", "ActiveState", "-p", "MainPID", "-p", "InvocationID",
             "nvidia-imex").stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def node_states(bed):
    out = on(bed, CONTROLLER, "sinfo", "--noheader", "--Node", "--format", "%N %T").stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def wait_for(predicate, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.5)


def all_trays(bed):
    return [t for r in range(1, bed.racks + 1) for t in bed.trays_of(r)]


class TestInstallation:
    GENERATIONS = FIRST_GENERATION_ONLY

    def test_every_tray_holds_the_scripts_the_map_and_a_service_left_to_the_prolog(self, bed, generation):
        for tray in all_trays(bed):
            # The map holds the tray's own slurmd release (its read's slurmd -V), whose rule the program applies.
            job_map = json.loads(on(bed, tray, "cat", JOB_MAP).stdout)
            assert str(job_map["slurm_version"]).startswith(generation + "."), (tray, job_map["slurm_version"])
            for directory in ("/etc/slurm/prolog.d", "/etc/slurm/epilog.d"):
                mode = on(bed, tray, "stat", "-c", "%a %U %G", "%s/%s" % (directory, PROGRAM)).stdout.split()
                assert mode == ["755", "root", "root"], (tray, directory, mode)
            assert daemon_state(bed, tray) == "inactive", tray
            enabled = on(bed, tray, "systemctl", "is-enabled", "nvidia-imex", check=False).stdout.strip()
            assert enabled == "disabled", (tray, enabled)
            config = on(bed, tray, "cat", "/etc/nvidia-imex/config.cfg").stdout
            assert "IMEX_NODE_CONFIG_FILE=%s" % NODE_LIST in config.splitlines(), tray


class TestInstallationAgain:
    GENERATIONS = FIRST_GENERATION_ONLY

    def test_a_second_run_changes_nothing_and_validate_proves_the_installation(self, bed):
        again = run_playbook("site.yml", bed.inventory, cmdline_vars=PER_JOB)
        assert again.rc == 0, again.failure_messages()
        assert again.changed_hosts() == [], again.changed_tasks()
        proof = run_playbook("validate.yml", bed.inventory, cmdline_vars=PER_JOB)
        assert proof.rc == 0, proof.failure_messages() or proof.stdout[-3000:]


def probe_results(run):
    return {res["item"]: res for _host, res in run.module_results("rackscale.imex.imex_slurm_probe")}


def all_idle(bed):
    """Every node idle in Slurm and every daemon stopped (the probe job's epilog stops them)."""
    wait_for(lambda: set(node_states(bed).values()) == {"idle"}, "every node idle", timeout=90)
    for tray in all_trays(bed):
        wait_for(lambda: daemon_state(bed, tray) != "active", "the daemon of %s to stop" % tray, timeout=90)


class TestProbe:
    """validate.yml's probe job, on the installation: a real srun in the partition gpu per idle domain."""
    GENERATIONS = FIRST_GENERATION_ONLY

    def test_validate_proves_every_idle_domain_from_inside_a_job(self, bed):
        run = run_playbook("validate.yml", bed.inventory, cmdline_vars=PROBE)
        assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
        probes = probe_results(run)
        assert sorted(probes) == ["rack1", "rack2"], probes
        for name, found in probes.items():
            assert (found["probed"], found["healthy"], found["domain_state"]) == (True, True, "UP"), found
            assert [node["address"] for node in found["nodes"]] == [
                bed.address(tray) for tray in bed.trays_of(int(name[-1]))], found
        trays = ", ".join(bed.trays_of(1))
        assert ("a probe job in partition gpu on %s saw the domain UP, every node READY and every pair connected"
                % trays) in run.stdout
        # The simulated driver has no /proc/driver/nvidia/params: the count is unknown, said, not refused.
        shown = " ".join(run.stdout.split())
        assert re.search(r"\[WARNING\]: domain rack1, trays rack1-tray01, rack1-tray02, rack1-tray03: the "
                         r"driver's NVreg_ImexChannelCount could not be read", shown), shown[-3000:]
        # The job ended: its epilog stopped the daemons.
        all_idle(bed)

    def test_a_busy_domain_is_skipped_and_said_so_while_the_other_is_probed(self, bed):
        trays = bed.trays_of(1)
        job = on(bed, CONTROLLER, "sbatch", "--parsable", "--exclusive", "-N3", "-w", ",".join(trays),
                 "--wrap", "sleep 600").stdout.strip()
        try:
            wait_for(lambda: all(node_states(bed)[tray] == "allocated" for tray in trays), "the job on rack1",
                     timeout=90)
            run = run_playbook("validate.yml", bed.inventory, cmdline_vars=PROBE)
            assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
            assert sorted(probe_results(run)) == ["rack2"]
            assert re.search(r"domain rack1: no probe job: not idle in Slurm \(rack1-tray01: ALLOCATED", run.stdout), \
                run.stdout[-3000:]
        finally:
            on(bed, CONTROLLER, "scancel", job)
            all_idle(bed)


@pytest.fixture
def running_daemon(bed):
    """rack1-tray01's daemon running, started by hand (not by a job) on a one-node list; stopped after."""
    tray = bed.tray(1, 1)
    on(bed, tray, "sh", "-c", "mkdir -p %s && echo %s > %s && systemctl start nvidia-imex"
       % (NODE_LIST.rsplit("/", 1)[0], bed.address(tray), NODE_LIST))
    before = daemon_run(bed, tray)
    assert before["ActiveState"] == "active" and before["MainPID"] != "0", before
    yield tray, before
    on(bed, tray, "sh", "-c", "systemctl stop nvidia-imex; : > %s; rm -f /run/job-running-*" % NODE_LIST)


class TestSharedTrays:
    """Jobs that share a tray get no domain of their own: their prologs and epilogs leave its daemon alone."""

    @pytest.mark.parametrize("kind", ["ordinary", "exclusive=user"])
    def test_two_jobs_on_one_tray_neither_stop_nor_start_its_daemon(self, bed, generation, running_daemon, kind):
        tray, before = running_daemon
        options = ["-N1", "-n1", "-w", tray] + (["--exclusive=user"] if kind == "exclusive=user" else [])
        first = sbatch(bed, *options)
        second = sbatch(bed, *options)
        try:
            for job in (first, second):
                wait_for(lambda: on(bed, tray, "test", "-e", "/run/job-running-" + job, check=False).returncode == 0,
                         "job %s to run on %s" % (job, tray))
                assert_job_kind(bed, generation, tray, job, kind)
            assert {job_state(bed, first), job_state(bed, second)} == {"RUNNING"}, "both jobs at once on " + tray
            assert daemon_run(bed, tray) == before, "a shared job's prolog stopped or started the daemon"
            end_job(bed, first)
            assert daemon_run(bed, tray) == before, "the first job's epilog stopped the daemon under the second"
            # Its program said why it left the daemon alone, naming what slurmd told it.
            log = on(bed, tray, "journalctl", "--no-pager", "-o", "cat", "-t", "rackscale-imex").stdout
            lines = [line for line in log.splitlines() if re.search(r"\bjob %s\b" % first, line)]
            assert any("SLURM_JOB_OVERSUBSCRIBE" in line and "SLURM_JOB_EXCLUSIVE" in line
                       for line in lines), lines or log[-2000:]
        finally:
            for job in (first, second):
                end_job(bed, job)
        assert daemon_run(bed, tray) == before, "the second job's epilog stopped the daemon"


class TestExclusiveJobs:
    def test_an_exclusive_job_lands_in_one_block_and_sees_an_up_domain_of_its_trays(self, bed, generation):
        seen, result = srun(bed, "-N3", "--exclusive", command="echo JOB $SLURM_JOB_ID; " + LOOK)
        job = re.search(r"JOB (\d+)", result.stdout).group(1)
        racks = {name.split("-")[0] for name in seen}
        assert len(seen) == 3 and len(racks) == 1, seen
        assert_job_kind(bed, generation, sorted(seen)[0], job, "exclusive")
        addresses = sorted(bed.address(tray) for tray in seen)
        for tray, view in seen.items():
            assert view["list"] == addresses, (tray, view)
            assert view["state"] == "UP", (tray, view)


class TestJobAcrossRacks:
    GENERATIONS = FIRST_GENERATION_ONLY

    def test_a_job_across_two_racks_gets_one_domain_per_rack_and_its_epilog_stops_them(self, bed):
        seen, _ = srun(bed, "-N%d" % len(all_trays(bed)), "--exclusive")
        assert sorted(seen) == sorted(all_trays(bed)), seen
        for tray, view in seen.items():
            rack = tray.split("-")[0]
            own = [bed.address(t) for t in sorted(seen) if t.startswith(rack + "-")]
            assert view["list"] == own and view["state"] == "UP", (tray, view)
        for tray in all_trays(bed):
            wait_for(lambda: daemon_state(bed, tray) == "inactive", "the daemon of %s to stop" % tray)
            assert on(bed, tray, "cat", NODE_LIST).stdout == "", tray


class TestFailures:
    GENERATIONS = FIRST_GENERATION_ONLY

    def test_a_tray_whose_daemon_cannot_start_fails_the_prolog_and_is_drained_alone(self, bed):
        broken = bed.tray(1, 2)
        bed.simrack("fault", "fail-start", broken)
        try:
            seen, result = srun(bed, "-N%d" % bed.trays, "--exclusive", "-w", ",".join(bed.trays_of(1)),
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


class TestLeavingPerJob:
    """Last: the bed leaves the per-job mode."""
    GENERATIONS = FIRST_GENERATION_ONLY

    def test_a_run_in_another_mode_removes_the_program_and_the_map(self, bed):
        run = run_playbook("site.yml", bed.inventory, cmdline_vars={"imex_mode": "slurm", "imex_channel0": "false"})
        assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
        for tray in all_trays(bed):
            left = on(bed, tray, "ls", "/etc/slurm/prolog.d", "/etc/slurm/epilog.d", "/etc/rackscale-imex",
                      check=False).stdout
            assert PROGRAM not in left and "slurm-job.json" not in left, (tray, left)
            assert daemon_state(bed, tray) == "active", tray
        # An exclusive job no longer stops or restarts the static daemon.
        runs = {t: daemon_run(bed, t) for t in bed.trays_of(1)}
        srun(bed, "-N%d" % bed.trays, "--exclusive", "-w", ",".join(bed.trays_of(1)), command="true")
        assert {t: daemon_run(bed, t) for t in bed.trays_of(1)} == runs
