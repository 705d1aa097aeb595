"""End-to-end harness: playbooks run through ansible-runner, the way AWX runs them.

`run_playbook` returns the runner (rc, status, events, stats). `simulated_rack` brings up a
simulated rack with tests/rack/simrack and always tears it down.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import ansible_runner
import jmespath
import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIMRACK = os.path.join(REPO, "tests", "rack", "simrack")
PLAYBOOKS = os.path.join(REPO, "playbooks")
# ansible-runner starts the ansible-playbook found on PATH: use the one beside this interpreter.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")


# ansible-runner events, queried as its users query them (JMESPath, as in json_query).
OK_RESULTS = jmespath.compile("[?event=='runner_on_ok'].event_data.[host, task, task_action, res]")
# A one-element list per event, so that an event without a result is kept (as [null]).
FAILED_RESULTS = jmespath.compile("[?event=='runner_on_failed' || event=='runner_on_unreachable'].event_data.[res]")


class PlaybookRun:
    """What one ansible-runner job left: return code, events, per-host stats, artifacts dir."""

    def __init__(self, runner, private_data_dir):
        self.rc = runner.rc
        self.status = runner.status
        self.events = list(runner.events)
        self.stats = runner.stats or {}
        self.stdout = runner.stdout.read()
        self.private_data_dir = private_data_dir

    def changed_hosts(self):
        return sorted((self.stats.get("changed") or {}).keys())

    def roles_run(self):
        """Names of the roles whose tasks ran (any result), without the collection prefix."""
        return sorted({e["event_data"]["role"].split(".")[-1] for e in self.events
                       if e.get("event", "").startswith("runner_on_") and e.get("event_data", {}).get("role")})

    def ok_results(self):
        """(host, task name, module FQCN, result) of every successful task result, in event order.

        A loop contributes each of its items, as the host it ran on (the delegated host when the
        loop was delegated, as the role's run_once reads of each domain are)."""
        found = []
        for host, task, action, res in OK_RESULTS.search(self.events):
            res = res or {}
            items = res.get("results") if isinstance(res.get("results"), list) else None
            if items is None:
                found.append((host, task, action, res))
                continue
            for item in items:
                if isinstance(item, dict) and not item.get("skipped"):
                    delegated = (item.get("_ansible_delegated_vars") or {}).get("ansible_delegated_host")
                    found.append((delegated or host, task, action, item))
        return found

    def changed_tasks(self, host=None):
        """(host, task name) of every changed task result."""
        return [(found_host, task) for found_host, task, _, res in self.ok_results()
                if res.get("changed") and (host is None or found_host == host)]

    def failure_messages(self):
        messages = []
        for (res,) in FAILED_RESULTS.search(self.events):
            res = res or {}
            messages.append(res.get("msg") or json.dumps(res)[:2000])
            # A failed loop says "One or more items failed"; each item carries its own message.
            messages.extend(item["msg"] for item in res.get("results", []) if item.get("msg"))
        return messages

    def ok_tasks(self, action):
        """(host, task name) of every successful result of a task whose module is `action`."""
        return [(host, task) for host, task, found, _ in self.ok_results() if found == action]

    def module_results(self, action):
        """Results of every task whose module is `action` (FQCN), as (host, result)."""
        return [(host, res) for host, _, found, res in self.ok_results() if found == action]


# ansible-runner's private data dirs of this session (tests read their artifacts after a run);
# removed when the session ends.
RUNNER_DIRS = []


@pytest.fixture(scope="session", autouse=True)
def remove_runner_dirs():
    yield
    for path in RUNNER_DIRS:
        shutil.rmtree(path, ignore_errors=True)


# A simulated daemon is UP within a second or two of its start: reading a restarted domain every
# second instead of the default 5 s keeps each proof short. No test here is about the interval.
READ_INTERVAL = {"imex_validate_interval_s": 1}

# The environment every playbook of these tests runs with (run_playbook adds a test's own on top).
ANSIBLE_ENV = {"ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def run_playbook(playbook, inventory, extravars=None, check=False, diff=False, limit=None, timeout=900,
                 cmdline_vars=None, tags=None, envvars=None):
    """Run playbooks/<playbook> (or a playbook at an absolute path) against `inventory` with
    ansible-runner; returns a PlaybookRun. cmdline_vars are given as `-e name=value` on the command
    line, where every value arrives as a string, as from an operator's shell or an AWX survey.
    envvars are set for ansible-playbook on top of ANSIBLE_ENV (ANSIBLE_VARS_ENABLED, say)."""
    private_data_dir = tempfile.mkdtemp(prefix="imex-runner-")
    RUNNER_DIRS.append(private_data_dir)
    cmdline = ["-e %s" % shlex.quote("%s=%s" % item) for item in (cmdline_vars or {}).items()]
    if check:
        cmdline.append("--check")
    if diff:
        cmdline.append("--diff")
    if tags:
        cmdline.append("--tags %s" % shlex.quote(tags))
    runner = ansible_runner.run(
        private_data_dir=private_data_dir,
        playbook=os.path.join(PLAYBOOKS, playbook),
        inventory=inventory,
        extravars=dict(READ_INTERVAL, **(extravars or {})),
        limit=limit,
        cmdline=" ".join(cmdline) or None,
        envvars=dict(ANSIBLE_ENV, **(envvars or {})),
        quiet=True,
        timeout=timeout,
    )
    return PlaybookRun(runner, private_data_dir)


@contextlib.contextmanager
def fresh_ssh_connections(connect_timeout_s=3):
    """Extra vars of a run that must find an SSH-blocked tray unreachable at once: a short connect
    timeout, and control sockets of its own. An earlier run's master connection (ControlPersist)
    would carry the new session into the blocked link and wait out its keepalives (60 s, ansible.cfg)
    before the tray counts as unreachable."""
    control_path_dir = tempfile.mkdtemp(prefix="imex-cp-", dir="/tmp")
    try:
        yield {"ansible_ssh_timeout": connect_timeout_s, "ansible_control_path_dir": control_path_dir}
    finally:
        shutil.rmtree(control_path_dir, ignore_errors=True)


# An operator's pre/post-restart task file (%s: pre or post): records on the tray the domain, its
# trays and the daemon's PID at the time the hook ran.
HOOK = """---
- name: Record what the hook saw
  ansible.builtin.shell: >-
    echo "{{ imex_hook_domain }} {{ imex_hook_trays | join(',') }}
    $(systemctl show -p MainPID --value nvidia-imex)" > /run/imex-hook-%s
  changed_when: true
"""


def restart_hooks(tmp_path, render=lambda which: HOOK % which):
    """imex_pre_restart_tasks and imex_post_restart_tasks, each a task file written from render(which)."""
    options = {}
    for which in ("pre", "post"):
        path = tmp_path / ("%s.yml" % which)
        path.write_text(render(which))
        options["imex_%s_restart_tasks" % which] = str(path)
    return options


def hook_record(rack, tray, which):
    """[domain, trays, daemon pid] that HOOK recorded on the tray, None when it did not run there."""
    result = rack.ssh(tray, "cat", "/run/imex-hook-" + which)
    return result.stdout.split() if result.returncode == 0 else None


def clear_hook_records(rack, trays):
    """Remove what HOOK recorded on the trays, so that the next run's records are its own."""
    for tray in trays:
        rack.ssh(tray, "rm", "-f", "/run/imex-hook-pre", "/run/imex-hook-post")


def write_inventory(tmp_path, data, name="hosts.yml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def inventory_addresses(group):
    """host -> ansible_host of every host of an inventory group and of the groups below it."""
    found = {host: hostvars["ansible_host"] for host, hostvars in (group.get("hosts") or {}).items()}
    for child in (group.get("children") or {}).values():
        found.update(inventory_addresses(child))
    return found


class SimulatedRack:
    """A running simulated rack: its inventory path and helpers around simrack."""

    def __init__(self, racks, trays, state_dir, slurm=False, slurm_release=None):
        self.racks, self.trays, self.state_dir, self.slurm = racks, trays, state_dir, slurm
        # The Slurm release the bed runs (a key of SLURM_SUITES), None without Slurm.
        self.slurm_release = (slurm_release or DEFAULT_SLURM_RELEASE) if slurm else None
        self.env = dict(os.environ, SIMRACK_STATE=state_dir)
        self.inventory = None
        self.addresses = {}     # tray (and Slurm controller) -> address, once up

    def simrack(self, *args, check=True, timeout=600):
        result = subprocess.run([SIMRACK, *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise AssertionError("simrack %s failed (%d):\n%s\n%s" % (" ".join(args), result.returncode,
                                                                      result.stdout, result.stderr))
        return result

    def up(self):
        slurm = ["--slurm", "--slurm-suite", SLURM_SUITES[self.slurm_release]] if self.slurm else []
        out = self.simrack("up", "--slot", str(SLOT), "--racks", str(self.racks), "--trays", str(self.trays), *slurm,
                           timeout=900)
        self.inventory = out.stdout.strip().splitlines()[-1]
        with open(self.inventory) as handle:
            self.addresses = inventory_addresses(yaml.safe_load(handle)["all"])
        return self

    def address(self, tray):
        """The address the bed gave a tray (its slot decides the network), as its inventory says."""
        return self.addresses[tray]

    def down(self):
        """Tear the bed down; a failed `down` keeps its record, so it is retried before giving up."""
        for _ in range(3):
            result = self.simrack("down", check=False)
            if result.returncode == 0:
                return
            time.sleep(5)
        raise AssertionError("simrack down failed; the bed is left up with its record in %s:\n%s%s"
                             % (self.state_dir, result.stdout, result.stderr))

    def ssh(self, tray, *command):
        """Run a command (argument list) on a tray, or on the Slurm controller host; ssh hands the remote
        shell one quoted string. ssh itself with the bed's ssh_config, as `simrack ssh TRAY` runs it: the
        tests make hundreds of these calls, and a Python start of simrack for each one costs more than
        the command on the tray."""
        return subprocess.run(["ssh", "-F", os.path.join(self.state_dir, "ssh_config"), tray, shlex.join(command)],
                              capture_output=True, text=True, timeout=600, check=False)

    def tray(self, rack, index):
        return "rack%d-tray%02d" % (rack, index)

    def trays_of(self, rack):
        return [self.tray(rack, i) for i in range(1, self.trays + 1)]


def _rack_available():
    return os.geteuid() == 0 and shutil.which("podman") is not None and os.path.exists(SIMRACK)


requires_rack = pytest.mark.skipif(not _rack_available(), reason="needs root, podman and tests/rack/simrack")


# One simulated rack per simrack slot can be up on a machine (a slot's namespace names are fixed): these
# tests bring up their beds in the slot SIMRACK_SLOT names (default 0), and a second test run, from this
# checkout or another, waits here for the first one's bed in that slot to come down. (`make test` runs the
# short soak and the Slurm modules of this directory in slot 1, beside the other modules in slot 0.)
SLOT = int(os.environ.get("SIMRACK_SLOT", "0"))
BED_LOCK = "/var/tmp/simrack-bed.lock" if SLOT == 0 else "/var/tmp/simrack-bed-%d.lock" % SLOT

# The Slurm releases a bed can run, and the Debian suite that packages each (simrack up --slurm-suite):
# two generations of what slurmd tells a prolog (SLURM_JOB_EXCLUSIVE from 26.05).
SLURM_SUITES = {"24.11": "trixie", "26.05": "forky"}
DEFAULT_SLURM_RELEASE = "24.11"


@contextlib.contextmanager
def simulated_bed(racks, trays, slurm=False, slurm_release=None):
    """A simulated bed of `racks` x `trays` (with real Slurm: `slurm`, of `slurm_release`, default
    DEFAULT_SLURM_RELEASE) for the duration of a `with` block, always torn down.
    One at a time: it waits for any other bed of this machine to come down first (BED_LOCK), so a
    test module that needs two shapes brings up the second only once the first is down."""
    with open(BED_LOCK, "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state_dir = tempfile.mkdtemp(prefix="simrack-e2e-", dir="/var/tmp")
        rack = SimulatedRack(racks, trays, state_dir, slurm=slurm, slurm_release=slurm_release)
        try:
            yield rack.up()
        finally:
            # The state dir holds the record `simrack down` needs: removed only once the bed is down.
            rack.down()
            shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def simulated_rack(request):
    """A rack per test module; size from the module's RACK_SHAPE = (racks, trays)."""
    racks, trays = getattr(request.module, "RACK_SHAPE", (1, 4))
    with simulated_bed(racks, trays) as rack:
        yield rack


@pytest.fixture(scope="module")
def slurm_bed(request):
    """A rack with real Slurm (slurmd on every tray, slurmctld on the host slurmctl of the group
    slurm_controllers); size from the module's RACK_SHAPE, default 2 x 4."""
    racks, trays = getattr(request.module, "RACK_SHAPE", (2, 4))
    with simulated_bed(racks, trays, slurm=True) as rack:
        yield rack
