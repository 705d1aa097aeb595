# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-job IMEX prolog and epilog (roles/imex/files/rackscale-imex-slurm-job), with no Slurm.

Each test runs the program's main() as slurmd would (its environment, SLURM_SCRIPT_CONTEXT) against a
map in a temporary directory and a fake tray: fake systemctl, scontrol and nvidia-imex-ctl answers,
and a fake clock that each command and each pause moves, so that time bounds are checked exactly.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import stat
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "roles", "imex", "files", "rackscale-imex-slurm-job")


def _load_script():
    loader = importlib.machinery.SourceFileLoader("rackscale_imex_slurm_job", SCRIPT)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    # No __pycache__ next to the program: the role ships that directory as it is.
    writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes_bytecode
    return module


job_script = _load_script()

RACK_A = [("a%02d" % number, "198.18.1.%d" % (10 + number)) for number in range(1, 19)]
RACK_B = [("b%02d" % number, "198.18.2.%d" % (10 + number)) for number in range(1, 19)]
CTL = "/usr/bin/nvidia-imex-ctl"
CONFIG = "/etc/nvidia-imex/config.cfg"
SERVICE = "nvidia-imex"


def write_map(tmp_path, nodes=RACK_A, this_node="a01", domain="rackA", **bounds):
    the_map = {
        "format": 1, "domain": domain, "this_node": this_node,
        "nodes": [{"name": name, "address": address} for name, address in nodes],
        "service": SERVICE, "nodes_config_path": str(tmp_path / "run" / "nvidia-imex" / "nodes_config.cfg"),
        "config_path": CONFIG, "ctl": CTL,
    }
    the_map.update(bounds)
    path = tmp_path / "slurm-job.json"
    path.write_text(json.dumps(the_map))
    return str(path), the_map


class FakeTray(object):
    """systemctl, scontrol and nvidia-imex-ctl as a tray answers them, on a clock of its own."""

    def __init__(self, hostnames=None, ready_after=0, domain_answers=None, start_rc=0, hang=(), stop_rc=0,
                 survives_kill=False, daemon_active=False):
        self.now = 1000.0
        self.calls = []
        self.hostnames = hostnames or {}
        # READY from the (ready_after + 1)-th -q after a start; None: never.
        self.ready_after = ready_after
        self.queries = 0
        self.domain_answers = list(domain_answers or [])
        self.start_rc = start_rc
        self.stop_rc = stop_rc
        self.hang = set(hang)
        self.survives_kill = survives_kill
        self.active = daemon_active
        self.logs = []
        self.timeouts = []

    # the hooks main() takes
    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def which(self, name):
        return "/usr/bin/" + name

    def log(self, message, error=False):
        self.logs.append(("ERR " if error else "") + message)

    def hooks(self):
        return {"run": self.run, "log": self.log, "clock": self.clock, "sleep": self.sleep, "which": self.which}

    def run(self, argv, timeout):
        self.calls.append(list(argv))
        self.timeouts.append(timeout)
        command = os.path.basename(argv[0])
        key = command + " " + argv[1] if command == "systemctl" else " ".join([command] + argv[3:]) \
            if command == "nvidia-imex-ctl" else " ".join([command] + argv[1:3])
        if key in self.hang:
            self.now += timeout
            return -9, "", "", True
        self.now += 0.01
        if command == "scontrol":
            names = self.hostnames.get(argv[3])
            return (0, "\n".join(names) + "\n", "", False) if names else (1, "", "scontrol: invalid hostlist", False)
        if command == "systemctl":
            verb = argv[1]
            if verb == "stop":
                if self.stop_rc == 0:
                    self.active = False
                return self.stop_rc, "", "" if self.stop_rc == 0 else "Job for nvidia-imex.service failed", False
            if verb == "kill":
                self.active = self.active and self.survives_kill
                return 0, "", "", False
            if verb == "start":
                if self.start_rc == 0:
                    self.active = True
                    self.queries = 0
                return self.start_rc, "", "" if self.start_rc == 0 else "Job failed. See journalctl -xe", False
            if verb == "is-active":
                return (0, "active\n", "", False) if self.active else (3, "inactive\n", "", False)
        if command == "nvidia-imex-ctl":
            assert argv[1:3] == ["-c", CONFIG]
            if argv[3] == "-q":
                self.queries += 1
                ready = self.active and self.ready_after is not None and self.queries > self.ready_after
                return (0, "READY\n", "", False) if ready else (0, "INITIALIZING\n", "", False)
            if argv[3] == "-N":
                if self.domain_answers:
                    return 0, self.domain_answers.pop(0), "", False
                return 0, "Domain State: UP\n", "", False
        raise AssertionError("unexpected command %s" % argv)

    def verbs(self):
        return [" ".join(call[1:2]) if call[0].endswith("systemctl") else os.path.basename(call[0]) + " " + call[-1]
                for call in self.calls]


def environ(context="prolog_slurmd", node="a01", nodelist="a[01-04]", oversubscribe="NO", job="4242", exclusive=None):
    found = {"SLURM_SCRIPT_CONTEXT": context, "SLURMD_NODENAME": node, "SLURM_JOB_ID": job}
    if nodelist is not None:
        found["SLURM_JOB_NODELIST"] = nodelist
    if oversubscribe is not None:
        found["SLURM_JOB_OVERSUBSCRIBE"] = oversubscribe
    if exclusive is not None:
        found["SLURM_JOB_EXCLUSIVE"] = exclusive
    return found


# The environments real slurmds gave the bed's site prolog and epilog (tests/unit/samples/slurm/
# <phase>_env_<release>_<job>.txt): Slurm 24.11.5 (Debian trixie) and 26.05.5 (Debian forky), for an
# ordinary job, --oversubscribe, --exclusive and --exclusive=user|mcs|topo. Through 25.11 only
# SLURM_JOB_OVERSUBSCRIBE tells, from the job's share value; from 26.05 SLURM_JOB_EXCLUSIVE carries
# exclusivity and SLURM_JOB_OVERSUBSCRIBE only whether the job may oversubscribe (NO for an ordinary job).
SAMPLES = os.path.join(ROOT, "tests", "unit", "samples", "slurm")
RELEASES = ("24.11.5", "26.05.5")
JOBS = ("ordinary", "oversubscribe", "exclusive", "exclusive_user", "exclusive_mcs", "exclusive_topo")
ALONE = ("exclusive", "exclusive_topo")
SAMPLE_NODES = [("rack1-tray%02d" % number, "198.18.1.%d" % (10 + number)) for number in range(1, 5)]


def slurmd_environ(phase, release, job):
    """The environment slurmd gave the phase (prolog or epilog) of that job, as recorded."""
    with open(os.path.join(SAMPLES, "%s_env_%s_%s.txt" % (phase, release, job))) as handle:
        return dict(line.rstrip("\n").split("=", 1) for line in handle if "=" in line)


def node_list(the_map):
    with open(the_map["nodes_config_path"]) as handle:
        return handle.read()


def run_main(tray, map_path, env, argv=("/etc/slurm/prolog.d/90-rackscale-imex",)):
    return job_script.main(argv=list(argv), environ=env, map_path=map_path, **tray.hooks())


# --- prolog ----------------------------------------------------------------------------------------

def test_an_exclusive_job_gets_its_nodes_of_the_domain_in_the_maps_order(tmp_path):
    map_path, the_map = write_map(tmp_path)
    # Slurm may print the nodes in any order; every node of the job writes the map's order.
    tray = FakeTray(hostnames={"a[04,02],a01": ["a04", "a02", "a01"]}, ready_after=2, daemon_active=True)
    assert run_main(tray, map_path, environ(nodelist="a[04,02],a01")) == 0
    assert node_list(the_map) == "198.18.1.11\n198.18.1.12\n198.18.1.14\n"
    # the leftover daemon stopped before the new list is in force, then started and waited for
    assert tray.verbs()[:4] == ["scontrol a[04,02],a01", "stop", "start", "nvidia-imex-ctl -q"]
    assert tray.verbs().count("nvidia-imex-ctl -q") == 3
    assert tray.verbs()[-1] == "nvidia-imex-ctl -N"
    mode = os.stat(the_map["nodes_config_path"]).st_mode
    assert stat.S_IMODE(mode) == 0o644
    assert stat.S_IMODE(os.stat(os.path.dirname(the_map["nodes_config_path"])).st_mode) == 0o755
    assert any("job 4242 node a01: IMEX daemon READY with 3 node(s)" in line for line in tray.logs)
    assert not [line for line in tray.logs if line.startswith("ERR")]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("phase", ["prolog", "epilog"])
def test_only_a_job_that_holds_its_nodes_alone_touches_the_daemon_by_its_slurm_release(tmp_path, release, job, phase):
    env = slurmd_environ(phase, release, job)
    map_path, the_map = write_map(tmp_path, nodes=SAMPLE_NODES, this_node="rack1-tray01", slurm_version=release)
    tray = FakeTray(hostnames={env["SLURM_JOB_NODELIST"]: ["rack1-tray01"]}, daemon_active=True)
    assert run_main(tray, map_path, env) == 0
    if job in ALONE:
        assert tray.verbs()[:1] == (["stop"] if phase == "epilog" else ["scontrol " + env["SLURM_JOB_NODELIST"]])
        assert "stop" in tray.verbs()
        return
    # Other jobs on the tray may use the daemon (an ordinary 26.05 job says SLURM_JOB_OVERSUBSCRIBE=NO
    # too): no stop, no start, no list written.
    assert tray.calls == [] and tray.active
    assert not os.path.exists(the_map["nodes_config_path"])
    said = [line for line in tray.logs if "SLURM_JOB_EXCLUSIVE=%s, SLURM_JOB_OVERSUBSCRIBE=%s" % (
        env.get("SLURM_JOB_EXCLUSIVE", "unset"), env["SLURM_JOB_OVERSUBSCRIBE"]) in line]
    assert len(said) == 1 and ("Slurm %s" % release) in said[0]
    assert ("from Slurm 26.05" if release.startswith("26") else "before Slurm 26.05") in said[0]


@pytest.mark.parametrize("map_release, exclusive, said", [
    # a 26.05 slurmd that left out the variable its release sets
    ("26.05.5", None, "slurmd did not set SLURM_JOB_EXCLUSIVE (SLURM_JOB_EXCLUSIVE=unset, SLURM_JOB_OVERSUBSCRIBE=NO; "
                      "Slurm 26.05.5)"),
    # slurmd upgraded after the map was written: the variable only 26.05 sets decides
    ("24.11.5", "USER", "from Slurm 26.05 a job holds its nodes alone with SLURM_JOB_EXCLUSIVE=NODE or TOPO "
                        "(SLURM_JOB_EXCLUSIVE=USER, SLURM_JOB_OVERSUBSCRIBE=NO; Slurm 24.11.5)"),
])
@pytest.mark.parametrize("phase", ["prolog_slurmd", "epilog_slurmd"])
def test_an_environment_that_does_not_fit_the_maps_release_touches_nothing(tmp_path, map_release, exclusive, said,
                                                                           phase):
    map_path, _the_map = write_map(tmp_path, slurm_version=map_release)
    tray = FakeTray(daemon_active=True)
    assert run_main(tray, map_path, environ(context=phase, exclusive=exclusive, oversubscribe="NO")) == 0
    assert tray.calls == []
    assert any(said in line for line in tray.logs), tray.logs


@pytest.mark.parametrize("version", [None, "", "unknown"])
def test_a_map_without_a_release_decides_by_the_variables_slurmd_sets(tmp_path, version):
    map_path, the_map = write_map(tmp_path, slurm_version=version)
    tray = FakeTray(hostnames={"a[01-04]": ["a01", "a02", "a03", "a04"]}, daemon_active=True)
    # 26.05's shared job: SLURM_JOB_EXCLUSIVE is there and says NO.
    assert run_main(tray, map_path, environ(exclusive="NO", oversubscribe="NO")) == 0
    assert tray.calls == []
    # 24.11's exclusive job: no SLURM_JOB_EXCLUSIVE, SLURM_JOB_OVERSUBSCRIBE=NO.
    assert run_main(tray, map_path, environ(oversubscribe="NO")) == 0
    assert "start" in tray.verbs()
    assert any("Slurm release unknown to the map" in line for line in tray.logs)


@pytest.mark.parametrize("text, expected", [
    ("24.11.5", (24, 11)), ("26.05.5", (26, 5)), ("25.11.0-0rc1", (25, 11)), ("25.05", (25, 5)),
    (None, None), ("", None), ("slurm 24.11.5", None), ("x.y", None),
])
def test_the_release_of_a_map_is_read_as_major_and_minor(text, expected):
    assert job_script.release_of(text) == expected


def test_exclusive_topology_segment_counts_as_exclusive(tmp_path):
    map_path, the_map = write_map(tmp_path)
    tray = FakeTray(hostnames={"a[01-02]": ["a01", "a02"]})
    assert run_main(tray, map_path, environ(nodelist="a[01-02]", oversubscribe="TOPO")) == 0
    assert node_list(the_map) == "198.18.1.11\n198.18.1.12\n"


def test_a_node_not_in_the_map_logs_and_exits_zero(tmp_path):
    map_path, the_map = write_map(tmp_path)
    tray = FakeTray()
    assert run_main(tray, map_path, environ(node="c07", nodelist="c[07-08]")) == 0
    assert tray.calls == []
    assert any("node c07 is not in the IMEX map (domain rackA" in line for line in tray.logs)


def test_a_job_across_racks_gets_one_domain_per_rack(tmp_path):
    hostnames = {"a[17-18],b[01-02]": ["a17", "a18", "b01", "b02"]}
    env_a = environ(node="a18", nodelist="a[17-18],b[01-02]")
    env_b = environ(node="b01", nodelist="a[17-18],b[01-02]")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    map_a, the_map_a = write_map(tmp_path / "a", this_node="a18")
    map_b, the_map_b = write_map(tmp_path / "b", nodes=RACK_B, this_node="b01", domain="rackB")
    tray_a, tray_b = FakeTray(hostnames=hostnames), FakeTray(hostnames=hostnames)
    assert run_main(tray_a, map_a, env_a) == 0
    assert run_main(tray_b, map_b, env_b) == 0
    assert node_list(the_map_a) == "198.18.1.27\n198.18.1.28\n"
    assert node_list(the_map_b) == "198.18.2.11\n198.18.2.12\n"
    assert any("in other IMEX domains (each its own per-job domain): b01, b02" in line for line in tray_a.logs)


def test_a_daemon_that_never_becomes_ready_fails_the_prolog_within_its_bound(tmp_path):
    map_path, _the_map = write_map(tmp_path, ready_timeout_s=20, poll_interval_s=2)
    tray = FakeTray(hostnames={"a[01-04]": ["a01", "a02", "a03", "a04"]}, ready_after=None)
    start = tray.now
    assert run_main(tray, map_path, environ()) == 1
    assert 20 <= tray.now - start <= 23
    assert "start" in tray.verbs()
    assert any(line.startswith("ERR ") and "not READY after 20 s (last answer: INITIALIZING)" in line
               for line in tray.logs)


def test_a_peer_that_is_not_ready_is_logged_and_the_prolog_succeeds(tmp_path):
    map_path, _the_map = write_map(tmp_path, domain_wait_s=4, poll_interval_s=1)
    degraded = ("Node #0   - 198.18.1.11     - READY                - Version: 580.95.09\n"
                "Node #1   - 198.18.1.12     - UNAVAILABLE          - Version: \n"
                "Domain State: DEGRADED\n")
    tray = FakeTray(hostnames={"a[01-02]": ["a01", "a02"]}, domain_answers=[degraded] * 10)
    start = tray.now
    assert run_main(tray, map_path, environ(nodelist="a[01-02]")) == 0
    assert tray.now - start <= 6
    errors = [line for line in tray.logs if line.startswith("ERR ")]
    assert len(errors) == 1
    assert "IMEX domain DEGRADED after 4 s" in errors[0]
    assert "Node #1 - 198.18.1.12 - UNAVAILABLE" in errors[0]


def test_a_domain_that_comes_up_late_is_waited_for_without_an_error(tmp_path):
    map_path, _the_map = write_map(tmp_path, domain_wait_s=10)
    tray = FakeTray(hostnames={"a[01-02]": ["a01", "a02"]},
                    domain_answers=["Domain State: DEGRADED\n", "Domain State: UP\n"])
    assert run_main(tray, map_path, environ(nodelist="a[01-02]")) == 0
    assert tray.verbs().count("nvidia-imex-ctl -N") == 2
    assert any(line.endswith("IMEX domain UP") for line in tray.logs)


def test_a_hostlist_that_cannot_be_expanded_fails_before_anything_is_stopped(tmp_path):
    map_path, the_map = write_map(tmp_path)
    tray = FakeTray(hostnames={}, daemon_active=True)
    assert run_main(tray, map_path, environ(nodelist="a[01-")) == 1
    assert tray.verbs() == ["scontrol a[01-"]
    assert tray.active
    assert not os.path.exists(the_map["nodes_config_path"])
    assert any("ERR " in line and "scontrol show hostnames a[01- failed (rc 1)" in line for line in tray.logs)


def test_a_hung_hostlist_expansion_is_cut_at_its_bound(tmp_path):
    map_path, _the_map = write_map(tmp_path, hostlist_timeout_s=7)
    tray = FakeTray(hang={"scontrol show hostnames"})
    assert run_main(tray, map_path, environ()) == 1
    assert tray.timeouts == [7]
    assert any("did not finish within 7 s" in line for line in tray.logs)


def test_a_missing_node_list_variable_fails_the_prolog(tmp_path):
    map_path, _the_map = write_map(tmp_path)
    tray = FakeTray()
    assert run_main(tray, map_path, environ(nodelist=None)) == 1
    assert tray.calls == []


def test_a_start_that_hangs_or_fails_fails_the_prolog(tmp_path):
    map_path, _the_map = write_map(tmp_path, start_timeout_s=15)
    hung = FakeTray(hostnames={"a[01-04]": ["a01", "a02", "a03", "a04"]}, hang={"systemctl start"})
    assert run_main(hung, map_path, environ()) == 1
    assert any("systemctl start nvidia-imex did not finish within 15 s" in line for line in hung.logs)
    assert "nvidia-imex-ctl -q" not in hung.verbs()
    failed = FakeTray(hostnames={"a[01-04]": ["a01", "a02", "a03", "a04"]}, start_rc=1)
    assert run_main(failed, map_path, environ()) == 1
    assert any("systemctl start nvidia-imex failed (rc 1): Job failed" in line for line in failed.logs)


def test_a_hung_stop_of_a_leftover_daemon_is_killed_and_the_job_still_starts(tmp_path):
    map_path, _the_map = write_map(tmp_path, stop_timeout_s=5)
    tray = FakeTray(hostnames={"a[01-04]": ["a01", "a02", "a03", "a04"]}, hang={"systemctl stop"},
                    daemon_active=True)
    # the first stop hangs, the kill works, the second stop (hung too) is only a formality
    assert run_main(tray, map_path, environ()) == 0
    assert tray.verbs()[:6] == ["scontrol a[01-04]", "stop", "kill", "stop", "is-active", "start"]
    assert tray.timeouts[1] == 5


def test_a_leftover_daemon_that_survives_the_kill_fails_the_prolog(tmp_path):
    map_path, the_map = write_map(tmp_path)
    tray = FakeTray(hostnames={"a[01-04]": ["a01", "a02", "a03", "a04"]}, hang={"systemctl stop"},
                    daemon_active=True, survives_kill=True)
    assert run_main(tray, map_path, environ()) == 1
    assert "start" not in tray.verbs()
    assert not os.path.exists(the_map["nodes_config_path"])


def test_ctl_calls_that_hang_are_each_bounded_and_the_whole_run_stays_within_its_total(tmp_path):
    map_path, _the_map = write_map(tmp_path, ctl_timeout_s=10, ready_timeout_s=600, total_timeout_s=60)
    tray = FakeTray(hostnames={"a[01-04]": ["a01", "a02", "a03", "a04"]}, hang={"nvidia-imex-ctl -q"})
    start = tray.now
    assert run_main(tray, map_path, environ()) == 1
    assert tray.now - start <= 60
    assert max(tray.timeouts) <= 60
    assert all(timeout <= 10 for call, timeout in zip(tray.calls, tray.timeouts) if call[0].endswith("nvidia-imex-ctl"))
    assert any("timed out after 10 s" in line for line in tray.logs)


def test_an_unreadable_map_fails_the_prolog_but_not_the_epilog(tmp_path):
    tray = FakeTray()
    missing = str(tmp_path / "absent.json")
    assert run_main(tray, missing, environ()) == 1
    assert run_main(tray, missing, environ(context="epilog_slurmd")) == 0
    (tmp_path / "bad.json").write_text(json.dumps({"format": 1, "nodes": []}))
    assert run_main(tray, str(tmp_path / "bad.json"), environ()) == 1
    assert any("unusable: nodes is not a list" in line for line in tray.logs)
    assert tray.calls == []


# --- epilog ----------------------------------------------------------------------------------------

def test_the_epilog_stops_the_daemon_and_empties_the_list(tmp_path):
    map_path, the_map = write_map(tmp_path)
    os.makedirs(os.path.dirname(the_map["nodes_config_path"]))
    with open(the_map["nodes_config_path"], "w") as handle:
        handle.write("198.18.1.11\n198.18.1.12\n")
    tray = FakeTray(daemon_active=True)
    assert run_main(tray, map_path, environ(context="epilog_slurmd")) == 0
    assert tray.verbs() == ["stop"]
    assert not tray.active
    assert node_list(the_map) == ""


def test_the_epilog_kills_a_daemon_whose_stop_hangs(tmp_path):
    map_path, the_map = write_map(tmp_path, stop_timeout_s=5, kill_timeout_s=3)
    tray = FakeTray(daemon_active=True, hang={"systemctl stop"})
    start = tray.now
    assert run_main(tray, map_path, environ(context="epilog_slurmd")) == 0
    assert tray.verbs() == ["stop", "kill", "stop", "is-active"]
    assert tray.timeouts[:3] == [5, 3, 3]
    assert tray.now - start <= 5 + 3 + 3 + 1
    assert node_list(the_map) == ""


def test_the_epilog_fails_when_the_daemon_survives(tmp_path):
    map_path, the_map = write_map(tmp_path)
    tray = FakeTray(daemon_active=True, stop_rc=1, survives_kill=True)
    assert run_main(tray, map_path, environ(context="epilog_slurmd")) == 1
    # the list is emptied all the same, so that a later start cannot revive the job's domain
    assert node_list(the_map) == ""


def test_the_epilog_without_either_variable_leaves_the_daemon_alone(tmp_path):
    # Earlier releases stopped the daemon here; a shared job's epilog must never stop a daemon it did not start.
    map_path, _the_map = write_map(tmp_path)
    tray = FakeTray(daemon_active=True)
    assert run_main(tray, map_path, environ(context="epilog_slurmd", oversubscribe=None)) == 0
    assert tray.calls == []
    assert tray.active
    assert any("slurmd did not set SLURM_JOB_OVERSUBSCRIBE" in line for line in tray.logs)


# --- which phase -----------------------------------------------------------------------------------

@pytest.mark.parametrize("env, argv, expected", [
    ({"SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}, ["/etc/slurm/epilog.d/x"], "prolog"),
    ({"SLURM_SCRIPT_CONTEXT": "epilog_slurmd"}, ["/etc/slurm/prolog.d/x"], "epilog"),
    ({"SLURM_SCRIPT_CONTEXT": "prolog_slurmctld"}, ["/etc/slurm/prolog.d/x"], None),
    ({"SLURM_SCRIPT_CONTEXT": "prolog_task"}, ["/etc/slurm/prolog.d/x"], None),
    ({}, ["/etc/slurm/prolog.d/90-rackscale-imex"], "prolog"),
    ({}, ["/etc/slurm/epilog.d/90-rackscale-imex"], "epilog"),
    ({}, ["/usr/local/sbin/rackscale-imex-slurm-job", "epilog"], "epilog"),
    ({}, ["/usr/local/sbin/rackscale-imex-slurm-job"], None),
])
def test_the_phase_comes_from_slurm_script_context_else_from_where_it_is_installed(env, argv, expected):
    assert job_script.phase_of(env, argv) == expected


def test_outside_a_slurmd_prolog_or_epilog_nothing_is_done(tmp_path):
    map_path, _the_map = write_map(tmp_path)
    tray = FakeTray(daemon_active=True)
    assert run_main(tray, map_path, environ(context="prolog_slurmctld")) == 0
    assert tray.calls == []


# --- the real command runner -----------------------------------------------------------------------

def test_the_command_runner_kills_a_command_at_its_bound_and_reports_a_missing_one():
    rc, _out, _err, timed_out = job_script.run_bounded([sys.executable, "-c", "import time; time.sleep(30)"], 0.3)
    assert timed_out and rc != 0
    rc, out, _err, timed_out = job_script.run_bounded([sys.executable, "-c", "print('READY')"], 10)
    assert (rc, out, timed_out) == (0, "READY\n", False)
    rc, _out, err, timed_out = job_script.run_bounded(["/nonexistent/nvidia-imex-ctl"], 1)
    assert rc == 127 and not timed_out and err
