"""Benchmark of rackscale.imex on the simulated rack, against the `ansible -m ping` floor.

Two phases, each on a bed of its own (simrack), one bed up at a time, in slot 0, holding the bed locks
of both slots (bed_lock(), the ones tests/e2e and the soak take): the figures are the machine's alone:
- two racks: every repetition on one fresh bed of two racks. The one-rack scenarios use an inventory
  of its first rack while the second runs converged beside it, so both sides of the scaling ratio
  share the same simulated background (the second rack's trays and daemons run on this machine's
  cores whether or not a run touches them; on real racks they have their own CPUs);
- four racks: one 4 x N bed, converged once, for every repetition (all its scenarios are no-change
  runs). Scenarios are interleaved rep by rep, so that machine drift hits them alike.
Before each step it prints where it is, the time spent and an estimate of the time left. With
--budget-min, repetitions are dropped (never below one per phase) when the estimate says the run
would end later: each when it would start, on what has been measured by then; results.json and
results.md say so. SIGINT, SIGTERM and SIGHUP stop
the running playbook (its process group) or bring-up, tear the bed down (`simrack down`), remove its
state dir and exit 128 + the signal's number.
Writes OUT/results.json ({"run": ..., "scenarios": [one object per scenario]}), results.md and
results.png (OUT: bench/out, or --out).
Usage: .venv/bin/python bench/run.py [--reps 3] [--reps-4racks 2] [--trays 18] [--budget-min 25] [--out DIR]
       .venv/bin/python bench/run.py --smoke --out DIR   (1 x 3 trays, 1 rep, floor and first converge)
       .venv/bin/python bench/run.py --tuning [--reps 3]   (operator settings: forks, pipelining,
       SSH multiplexing, fact gathering; writes OUT/tuning.json and tuning.md)
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import json
import os
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
SIMRACK = os.path.join(REPO, "tests", "rack", "simrack")
BIN = os.path.dirname(sys.executable)
# A machine holds one simulated bed per simrack slot (0 or 1: each its own names and addresses). Whoever
# brings one up holds the slot's lock (tests/e2e/conftest.py and tools/test for slot 0, the soak for its
# --slot); the bench holds both, so that no other bed shares the machine while it measures.
SLOTS = (0, 1)


def bed_lock(slot):
    return "/var/tmp/simrack-bed.lock" if slot == 0 else "/var/tmp/simrack-bed-%d.lock" % slot


def fabric_ns(slot):
    """A bed brought up by someone who does not take the lock (tools/site-demo, tests/rack) shows here."""
    return "/run/netns/%s-fabric" % ("imex" if slot == 0 else "imex%d" % slot)


FOREIGN_BED_WAIT_S = 30 * 60

SITE = "playbooks/site.yml"
VALIDATE = "playbooks/validate.yml"
NAIVE = "bench/naive/site.yml"
# Seconds each step took on this project's 2-core machine (docs/performance.md; bring-up and
# teardown from tests/rack/README.md). The estimate of the time left uses them, scaled by this
# run's pace, for the steps not yet measured in this run.
PRIORS_S = {
    "up-2x18": 15, "converge-rack2": 35, "down-2x18": 5,
    "floor": 4, "site_first": 35, "site_nochange": 13, "validate": 6, "naive_nochange": 38,
    "floor_2racks": 7, "site_nochange_2racks": 25,
    "up-4x18": 30, "converge-4x18": 200, "down-4x18": 10,
    "floor_4racks": 16, "site_nochange_4racks": 66, "site_nochange_4racks_batch2": 62,
    "site_nochange_4racks_batch4": 60, "one_controller_2domains": 27, "parallel_2controllers": 27,
    "results": 10,
}
# A step of a kind neither measured nor in PRIORS_S, before anything was measured.
DEFAULT_STEP_S = 30

ONE_RACK = ("floor", "site_first", "site_nochange", "validate", "naive_nochange")
TWO_RACKS = ("floor_2racks", "site_nochange_2racks")
FOUR_RACKS = ("floor_4racks", "site_nochange_4racks", "site_nochange_4racks_batch2",
              "site_nochange_4racks_batch4", "one_controller_2domains", "parallel_2controllers")
SMOKE = ("floor", "site_first")

# What each scenario runs, given the inventories of its bed: "one" (its first rack), "bed" (all of
# it), "first" and "second" (rack 1, rack 2) and "both" (racks 1 and 2).
SCENARIOS = {
    "floor": lambda inv: [ping(inv["one"])],
    "site_first": lambda inv: [playbook(SITE, inv["one"])],
    "site_nochange": lambda inv: [playbook(SITE, inv["one"])],
    "validate": lambda inv: [playbook(VALIDATE, inv["one"])],
    "naive_nochange": lambda inv: [playbook(NAIVE, inv["one"])],
    "floor_2racks": lambda inv: [ping(inv["bed"])],
    "site_nochange_2racks": lambda inv: [playbook(SITE, inv["bed"])],
    "floor_4racks": lambda inv: [ping(inv["bed"])],
    "site_nochange_4racks": lambda inv: [playbook(SITE, inv["bed"])],
    "site_nochange_4racks_batch2": lambda inv: [playbook(SITE, inv["bed"], "-e", "imex_rolling_batch=2")],
    "site_nochange_4racks_batch4": lambda inv: [playbook(SITE, inv["bed"], "-e", "imex_rolling_batch=4")],
    "one_controller_2domains": lambda inv: [playbook(SITE, inv["both"])],
    # Two controllers at once, one domain each.
    "parallel_2controllers": lambda inv: [playbook(SITE, inv["first"]), playbook(SITE, inv["second"])],
}


# --------------------------------------------------------------------------- output

def say(text, stream=None):
    """One line on stdout (or stream), flushed at once. A closed terminal (SIGHUP) or pipe does not
    stop the bench."""
    try:
        print(text, file=stream or sys.stdout, flush=True)
    except UnicodeEncodeError:
        say(text.encode("ascii", "replace").decode(), stream)
    except (OSError, ValueError):
        pass


def duration(seconds):
    """6m12s, 45s."""
    seconds = int(round(seconds))
    return "%dm%02ds" % divmod(seconds, 60) if seconds >= 60 else "%ds" % seconds


def rough(seconds):
    """The time left, as precise as an estimate is: 14m, 40s."""
    return "%dm" % round(seconds / 60.0) if seconds >= 90 else "%ds" % (5 * round(seconds / 5.0))


def progress_line(index, total, kind, rep, reps, elapsed, left):
    """[bench] 7/42 converge-4x18 rep 2/3 · elapsed 6m12s · about 14m left (rep: 0-based, or None)."""
    where = "%s rep %d/%d" % (kind, rep + 1, reps) if rep is not None else kind
    return "[bench] %d/%d %s · elapsed %s · about %s left" % (index, total, where, duration(elapsed), rough(left))


# --------------------------------------------------------------------------- estimate and budget

def estimate_seconds(kinds, measured, priors):
    """Seconds the steps `kinds` (a list, one entry per step) should take.

    measured: {kind: [seconds of each step of that kind run so far]}. A kind measured already
    counts its mean. A kind not yet measured counts its prior (priors: {kind: seconds}) scaled by
    this run's pace (measured seconds / their priors, over the measured kinds that have one), or
    without a prior the mean of every step measured so far (DEFAULT_STEP_S before any).
    """
    pace_measured = sum(sum(values) for kind, values in measured.items() if kind in priors and values)
    pace_prior = sum(priors[kind] * len(values) for kind, values in measured.items() if kind in priors and values)
    pace = pace_measured / pace_prior if pace_prior else 1.0
    every = [value for values in measured.values() for value in values]
    average = statistics.mean(every) if every else DEFAULT_STEP_S
    total = 0.0
    for kind in kinds:
        if measured.get(kind):
            total += statistics.mean(measured[kind])
        elif kind in priors:
            total += priors[kind] * pace
        else:
            total += average
    return total


class Phase:
    """Steps on one bed: `before` once, `per_rep` once per repetition, `after` once.

    reps: repetitions planned (the budget may lower it, never below max(1, started)); started:
    repetitions begun; position: steps done."""

    def __init__(self, name, per_rep, reps, before=(), after=()):
        self.name = name
        self.before, self.per_rep, self.after = list(before), list(per_rep), list(after)
        self.reps = self.planned = reps
        self.started = 0
        self.position = 0

    def steps(self):
        """[(kind, rep or None)] of every step as now planned."""
        steps = [(kind, None) for kind in self.before]
        for rep in range(self.reps):
            steps += [(kind, rep) for kind in self.per_rep]
        return steps + [(kind, None) for kind in self.after]

    def remaining(self):
        return [kind for kind, _ in self.steps()[self.position:]]


def fit_budget(phases, elapsed, budget_s, measured, priors, extra=(), current=None):
    """Plan fewer repetitions until the estimated end (elapsed + the estimate of every remaining step,
    `extra` included) is within budget_s: never below one per phase nor below those started, taken
    first from the phase with the most repetitions left, then from the one whose repetition costs most.

    Without `current`, the plan is applied. With `current` (the phase about to start a repetition),
    a cut is made only when the plan drops that very repetition: every other waits for the moment
    its repetition would start, to be decided again on what has been measured by then (a phase
    not yet begun is estimated from priors). Returns (made, planned, end): the cuts made now, every
    cut of the plan ({"phase", "reps_from", "reps_to", "estimate_before_s", "estimate_after_s"}),
    and the estimated end once the plan is followed."""
    def end_of_run():
        kinds = [kind for phase in phases for kind in phase.remaining()] + list(extra)
        return elapsed + estimate_seconds(kinds, measured, priors)

    before = [phase.reps for phase in phases]
    planned = []
    estimate = first = end_of_run()
    while estimate > budget_s:
        candidates = [phase for phase in phases if phase.reps > max(1, phase.started)]
        if not candidates:
            break
        phase = max(candidates, key=lambda p: (p.reps - p.started, estimate_seconds(p.per_rep, measured, priors)))
        phase.reps -= 1
        after = end_of_run()
        planned.append({"phase": phase.name, "reps_from": phase.reps + 1, "reps_to": phase.reps,
                        "estimate_before_s": round(estimate, 1), "estimate_after_s": round(after, 1)})
        estimate = after
    if current is None:
        return planned, planned, estimate
    made = []
    for phase, reps in zip(phases, before):
        if phase is current and phase.reps == phase.started and phase.reps < reps:
            made.append({"phase": phase.name, "reps_from": reps, "reps_to": phase.reps,
                         "estimate_before_s": round(first, 1), "estimate_after_s": round(estimate, 1)})
        else:
            phase.reps = reps
    return made, planned, estimate


# --------------------------------------------------------------------------- processes and signals

class Interrupted(Exception):
    """The bench received SIGINT, SIGTERM or SIGHUP."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class BenchError(Exception):
    """A step failed: the message says which, with the end of its output."""


# How a child of the bench is stopped when the bench is interrupted:
PLAYBOOK = "playbook"   # ansible(-playbook): SIGTERM to its process group, SIGKILL after GRACE_S
BRINGUP = "bring-up"    # simrack up: SIGTERM to it alone (it tears down what it started), SIGKILL after GRACE_S
TEARDOWN = "teardown"   # simrack down: never
GRACE_S = {PLAYBOOK: 15, BRINGUP: 300}


class Runner:
    """Starts the bench's children, each in a session (and process group) of its own, so that a
    terminal's Ctrl-C or hang-up reaches the bench alone; on SIGINT, SIGTERM or SIGHUP it stops them
    (by PID or process group, nothing else) and makes the bench unwind through check()."""

    def __init__(self, label="bench"):
        self.label = label      # who says it is stopping: the bench or the soak that shares this runner
        self.signum = None
        self.children = {}      # pid -> (Popen, how)
        self.raise_now = False  # set while blocked in a call that holds nothing (the wait for the lock)

    def install(self):
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            # A signal ignored from the start stays ignored (`nohup`, a shell's background job).
            if signal.getsignal(signum) != signal.SIG_IGN:
                signal.signal(signum, self.on_signal)

    def on_signal(self, signum, frame):
        # Nothing is raised here: the bench unwinds at its next check(), once the running child is
        # stopped; a teardown under way is never cut short. os.write: print is not reentrant.
        name = signal.Signals(signum).name
        if self.signum is None:
            self.signum = signum
            text = "[%s] %s: stopping; a bed that is up comes down before it exits\n" % (self.label, name)
        else:
            text = "[%s] %s again: still stopping (the bed's teardown is not cut short)\n" % (self.label, name)
        try:
            os.write(sys.stdout.fileno(), text.encode())
        except (OSError, ValueError):
            pass
        for process, how in list(self.children.values()):
            self.stop(process, how)
        if self.raise_now:
            raise Interrupted(signum)

    @contextlib.contextmanager
    def raising(self):
        """A block in which a signal raises Interrupted at once (a blocking call that starts nothing)."""
        self.raise_now = True
        try:
            self.check()
            yield
        finally:
            self.raise_now = False

    def check(self):
        if self.signum is not None:
            raise Interrupted(self.signum)

    def sleep(self, seconds):
        end = time.monotonic() + seconds
        while True:
            self.check()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.2))

    def stop(self, process, how):
        """SIGTERM, once: to a playbook's process group, to simrack up alone."""
        if how == TEARDOWN or getattr(process, "bench_stopped", None) is not None:
            return
        process.bench_stopped = time.monotonic()
        if how == PLAYBOOK:
            with_suppressed(os.killpg, process.pid, signal.SIGTERM)
        else:
            with_suppressed(os.kill, process.pid, signal.SIGTERM)

    def reap(self):
        """Stop and wait for every child still running (one left by an exception between its start
        and its wait), before the bed goes down."""
        for process, how in list(self.children.values()):
            self.stop(process, how)
            self.wait(process)

    def run(self, command, how, env=None, cwd=None):
        """Run a command to its end; return (returncode, stdout, stderr). Raises Interrupted if a
        signal came meanwhile (except for a teardown)."""
        result = self.wait(self.spawn(command, how, env=env, cwd=cwd))
        if how != TEARDOWN:
            self.check()
        return result

    def spawn(self, command, how, env=None, cwd=None):
        if how != TEARDOWN:
            self.check()
        # Output to files, not pipes: a child is never held up by a full pipe while the bench waits
        # for another (two controllers at once).
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        process = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                   start_new_session=True)
        process.bench_files = (out, err)
        process.bench_pidfd = pidfd(process.pid)
        self.children[process.pid] = (process, how)
        if self.signum is not None:     # a signal came between check() and here
            self.stop(process, how)
        return process

    def wait(self, process):
        how = self.children[process.pid][1]
        killed = False
        while not exited(process, 0.5):
            if how == TEARDOWN or (self.signum is None and getattr(process, "bench_stopped", None) is None):
                continue
            self.stop(process, how)
            if not killed and time.monotonic() - process.bench_stopped > GRACE_S[how]:
                say("[bench] %s (PID %d) still running %d s after SIGTERM: SIGKILL" % (how, process.pid, GRACE_S[how]))
                if how == PLAYBOOK:
                    with_suppressed(os.killpg, process.pid, signal.SIGKILL)
                else:
                    with_suppressed(os.kill, process.pid, signal.SIGKILL)
                killed = True
        if getattr(process, "bench_stopped", None) is not None:
            if how == PLAYBOOK:
                empty_group(process.pid)
            else:
                group_gone(process.pid, 10)     # simrack's own helpers: waited for, not killed
        del self.children[process.pid]
        if process.bench_pidfd is not None:
            os.close(process.bench_pidfd)
        texts = []
        for handle in process.bench_files:
            handle.seek(0)
            texts.append(handle.read().decode(errors="replace"))
            handle.close()
        return process.returncode, texts[0], texts[1]


def pidfd(pid):
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def exited(process, timeout):
    """Wait up to `timeout` s for the child to end; True once it has been reaped. With a pidfd the
    wait ends the moment the child does (the wall times are measured on it)."""
    if process.bench_pidfd is not None:
        poller = select.poll()
        poller.register(process.bench_pidfd, select.POLLIN)
        if not poller.poll(timeout * 1000):
            return False
        process.wait()
        return True
    try:
        process.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


def empty_group(pgid):
    """What is left of a stopped playbook's process group (its workers, their ssh clients): SIGTERM,
    then SIGKILL after 3 s."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline, killed = time.monotonic() + 3, False
    while True:
        time.sleep(0.1)
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        if time.monotonic() > deadline:
            if killed:
                say("[bench] process group %d survives SIGKILL" % pgid)
                return
            with_suppressed(os.killpg, pgid, signal.SIGKILL)
            deadline, killed = time.monotonic() + 5, True


def group_gone(pgid, timeout):
    """Wait up to `timeout` s for a process group to have no member left; say so if one stays."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return True
        if time.monotonic() > deadline:
            say("[bench] process group %d still has members %d s after its leader ended" % (pgid, timeout))
            return False
        time.sleep(0.1)


def with_suppressed(call, *args):
    try:
        call(*args)
    except (ProcessLookupError, PermissionError):
        pass


class BedLock:
    """The bed locks of some slots (bed_lock(), flock), waited for in slot order, held until release()."""

    def __init__(self, runner, slots=SLOTS):
        self.runner = runner
        self.slots = sorted(slots)
        self.handles = []
        self.waited_s = 0.0

    def acquire(self):
        start = time.monotonic()
        for slot in self.slots:
            path = bed_lock(slot)
            handle = open(path, "a", encoding="utf-8")
            self.handles.append(handle)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                say("[%s] waiting for the bed lock %s: another test run has a bed up" % (self.runner.label, path))
                # Blocked in the kernel's queue (a poll would rarely catch the moment a test run that
                # brings up bed after bed lets go); a signal meanwhile raises Interrupted from its handler.
                with self.runner.raising():
                    fcntl.flock(handle, fcntl.LOCK_EX)
            told, foreign = False, time.monotonic()
            while os.path.exists(fabric_ns(slot)):
                if not told:
                    say("[%s] a simulated rack is up without the bed lock (%s exists): waiting up to %d min for it "
                        "to come down" % (self.runner.label, fabric_ns(slot), FOREIGN_BED_WAIT_S // 60))
                    told = True
                if time.monotonic() - foreign > FOREIGN_BED_WAIT_S:
                    raise BenchError("a simulated rack is still up (%s); if it is a leftover, `tests/rack/simrack down "
                                     "--state DIR` with its state dir (/var/tmp/simrack*) removes it" % fabric_ns(slot))
                self.runner.sleep(2)
        self.waited_s = time.monotonic() - start
        if self.waited_s >= 1:
            say("[%s] bed lock taken after %s" % (self.runner.label, duration(self.waited_s)))

    def release(self):
        while self.handles:
            self.handles.pop().close()      # closing drops the flock


class Bed:
    """A simulated bed of a given shape in a simrack slot, in a state dir of its own (made at up(),
    removed at close())."""

    def __init__(self, runner, racks, trays, slot=0):
        self.runner, self.racks, self.trays, self.slot = runner, racks, trays, slot
        self.state = None
        self.inventory = None
        self.used = False           # a state dir was made (a bring-up began)
        self.left_behind = []       # state dirs whose teardown failed (they hold simrack's record)

    def up(self):
        self.close()
        self.state = tempfile.mkdtemp(prefix="simrack-bench-", dir="/var/tmp")
        self.used = True
        returncode, stdout, stderr = self.runner.run(
            [SIMRACK, "up", "--state", self.state, "--slot", str(self.slot), "--racks", str(self.racks),
             "--trays", str(self.trays)], BRINGUP)
        # Interrupted: simrack up tore down what it had started; close() finishes the job.
        self.runner.check()
        if returncode != 0:
            raise BenchError("simrack up --racks %d --trays %d failed (%d):\n%s" % (
                self.racks, self.trays, returncode, stderr[-3000:]))
        self.inventory = stdout.strip().splitlines()[-1]

    def inventories(self):
        """The inventories the scenarios run on (see SCENARIOS)."""
        found = {"bed": self.inventory, "one": self.rack_inventory(1)}
        if self.racks >= 2:
            found.update(first=found["one"], second=self.rack_inventory(2), both=self.rack_inventory(1, 2))
        return found

    def rack_inventory(self, *racks):
        """An inventory of some racks of the bed (the bed's inventory with the other domain groups left out)."""
        import yaml
        with open(self.inventory) as handle:
            inventory = yaml.safe_load(handle)
        domains = inventory["all"]["children"]["imex_domains"]["children"]
        kept = ["rack%d" % rack for rack in racks]
        inventory["all"]["children"]["imex_domains"]["children"] = {name: domains[name] for name in kept}
        path = os.path.join(os.path.dirname(self.inventory), "inventory-%s.yml" % "-".join(kept))
        with open(path, "w") as handle:
            yaml.safe_dump(inventory, handle, sort_keys=False)
        return path

    def down(self):
        """close() as a step of the run: a bed left up stops the run (the next could not come up)."""
        self.close()
        if self.left_behind:
            raise BenchError("simrack down failed for %s" % " ".join(self.left_behind))

    def close(self):
        """Tear the bed down and remove its state dir; again is a no-op. A teardown that fails is
        tried once more; if it still fails, the state dir stays (it holds the record) and is named."""
        state, self.state, self.inventory = self.state, None, None
        if state is None:
            return
        for _ in range(2):
            returncode, stdout, stderr = self.runner.run([SIMRACK, "down", "--state", state], TEARDOWN)
            if returncode == 0:
                shutil.rmtree(state, ignore_errors=True)
                return
        self.left_behind.append(state)
        say("[bench] simrack down failed; its record stays in %s (run `tests/rack/simrack down --state %s`):\n%s%s"
            % (state, state, stdout, stderr))


# --------------------------------------------------------------------------- the runs

def playbook(name, inventory, *extra):
    return [os.path.join(BIN, "ansible-playbook"), "-i", inventory, name, *extra]


def ping(inventory):
    return [os.path.join(BIN, "ansible"), "-i", inventory, "imex_domains", "-m", "ansible.builtin.ping"]


def ad_hoc(inventory, module, *args):
    return [os.path.join(BIN, "ansible"), "-i", inventory, "imex_domains", "-m", module, *args]


# The CPU the trays use, all of them together: every tray (its systemd, sshd, the modules and commands a run
# starts there, the simulated daemons) runs in a cgroup under simrack's, on this machine's cores.
TRAYS_CPU = ("/sys/fs/cgroup/cpuacct/simrack/cpuacct.usage",       # cgroup v1 (hybrid hosts): nanoseconds
             "/sys/fs/cgroup/simrack/cpu.stat")                     # cgroup v2: usage_usec


def trays_cpu_s(paths=TRAYS_CPU):
    """CPU seconds the trays have used so far, or None where no simrack cgroup is found."""
    for path in paths:
        try:
            with open(path) as handle:
                text = handle.read()
        except OSError:
            continue
        if path.endswith("cpuacct.usage"):
            return int(text.strip()) / 1e9
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
    return None


def timed(runner, command, count_file, settings=None):
    """Run a command; return (wall seconds, controller CPU seconds, module runs per host).

    settings: extra environment (ANSIBLE_* overrides of ansible.cfg) for the tuning comparison.
    """
    return timed_together(runner, [command], [count_file], settings)


def timed_together(runner, commands, count_files, settings=None):
    """Run commands at once (separate controllers); return (wall until the last ends, their CPU seconds
    together, their counts added up)."""
    processes = []
    for count_file in count_files:
        if os.path.exists(count_file):
            os.unlink(count_file)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    trays_before = trays_cpu_s()
    start = time.monotonic()
    for command, count_file in zip(commands, count_files):
        env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], BENCH_COUNT_FILE=count_file,
                   ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
                   ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"),
                   ANSIBLE_CALLBACKS_ENABLED="module_counter", ANSIBLE_LOAD_CALLBACK_PLUGINS="1", **(settings or {}))
        processes.append(runner.spawn(command, PLAYBOOK, env=env, cwd=REPO))
    outputs = [runner.wait(process) for process in processes]
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    trays_after = trays_cpu_s()
    runner.check()      # a playbook stopped by a signal is not a failure of the playbook
    for command, (returncode, stdout, stderr) in zip(commands, outputs):
        if returncode != 0:
            raise BenchError("benchmark command failed (%d): %s\n%s\n%s" % (
                returncode, " ".join(command), stdout[-4000:], stderr[-2000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    counts = {"per_host": {}, "total": 0, "task_results": 0, "profiles": [],
              # Every tray's CPU during the run, its background included (systemd, the daemons' heartbeats).
              "trays_cpu_s": None if trays_before is None or trays_after is None else trays_after - trays_before}
    for count_file in count_files:
        with open(count_file) as handle:
            found = json.load(handle)
        counts["per_host"].update(found["per_host"])
        counts["total"] += found["total"]
        counts["task_results"] += found["task_results"]
        counts["profiles"].append(found.get("tasks", []))
    return wall, cpu, counts


class Bench:
    """The phases of a run, stepped through with a progress line before each step, the budget fitted
    before each repetition, and every bed it brings up torn down at close()."""

    def __init__(self, runner, phases, budget_s, counts_dir, priors=None, clock=time.monotonic):
        self.runner, self.phases, self.budget_s = runner, phases, budget_s
        self.priors = PRIORS_S if priors is None else priors
        self.clock = clock
        self.start = clock()
        self.measured = {}
        self.log = []
        self.cuts = []
        self.over_budget_said = None     # the estimated end once every phase is at its fewest repetitions
        self.plan_said = {}              # cuts planned for later, as last said
        self.beds = []
        self.count_files = [os.path.join(counts_dir, "counts.json"), os.path.join(counts_dir, "counts-second.json")]

    def elapsed(self):
        return self.clock() - self.start

    def remaining(self):
        return [kind for phase in self.phases for kind in phase.remaining()] + ["results"]

    def bed(self, racks, trays):
        bed = Bed(self.runner, racks, trays)
        self.beds.append(bed)
        return bed

    def close(self):
        self.runner.reap()
        for bed in self.beds:
            bed.close()
        return [state for bed in self.beds for state in bed.left_behind]

    def reps(self, phase):
        """The repetitions of `phase` (0, 1, ...), the budget fitted before each one."""
        rep = 0
        while True:
            self.fit(phase)
            if rep >= phase.reps:
                return
            phase.started = rep + 1
            yield rep
            rep += 1

    def fit(self, current):
        """Before a repetition of `current`: drop it if the budget says so (see fit_budget)."""
        if not self.measured or self.budget_s is None:
            return      # nothing measured yet: no estimate worth cutting repetitions for
        made, planned, estimate = fit_budget(self.phases, self.elapsed(), self.budget_s, self.measured,
                                             self.priors, extra=["results"], current=current)
        for cut in made:
            cut["at_elapsed_s"] = round(self.elapsed(), 1)
            self.cuts.append(cut)
            say("[bench] budget %s: the run would end at about %s; %s: %d -> %d repetitions (now about %s)" % (
                duration(self.budget_s), duration(cut["estimate_before_s"]), cut["phase"], cut["reps_from"],
                cut["reps_to"], duration(cut["estimate_after_s"])))
        # A cut planned for later is said once (and again if the plan changes); it is made, or not,
        # when its repetition would start.
        later = {}
        for cut in planned:
            if cut["phase"] not in [made_cut["phase"] for made_cut in made]:
                later.setdefault(cut["phase"], [cut["reps_from"], cut["reps_to"]])[1] = cut["reps_to"]
        if later and later != self.plan_said:
            say("[bench] budget %s: at this pace the run would end at about %s; planned: %s (decided when that "
                "repetition would start)" % (duration(self.budget_s), duration(planned[0]["estimate_before_s"]),
                                             ", ".join("%s %d -> %d repetitions" % (name, reps[0], reps[1])
                                                       for name, reps in later.items())))
        self.plan_said = later
        if estimate > self.budget_s and not self.over_budget_said:
            self.over_budget_said = round(estimate, 1)
            say("[bench] budget %s: every phase is at its fewest repetitions and the run would still end at "
                "about %s" % (duration(self.budget_s), duration(estimate)))

    def step(self, phase, kind, action):
        """Run one step of `phase` (the next one of its plan, `kind`); return what action() returns."""
        self.runner.check()
        planned, rep = phase.steps()[phase.position]
        if planned != kind:
            raise RuntimeError("bench plan out of step: %s planned, %s run" % (planned, kind))
        index = sum(p.position for p in self.phases) + 1
        total = sum(len(p.steps()) for p in self.phases)
        left = estimate_seconds(self.remaining(), self.measured, self.priors)
        say(progress_line(index, total, kind, rep, phase.reps, self.elapsed(), left))
        start = self.clock()
        result = action()
        seconds = self.clock() - start
        self.measured.setdefault(kind, []).append(seconds)
        self.log.append({"phase": phase.name, "step": kind, "rep": None if rep is None else rep + 1,
                         "seconds": round(seconds, 1)})
        phase.position += 1
        return result

    def scenario(self, phase, name, inventories, settings=None, commands=None):
        commands = commands or SCENARIOS[name](inventories)
        return self.step(phase, name, lambda: timed_together(self.runner, commands, self.count_files[:len(commands)],
                                                             settings))

    def setup(self, phase, kind, inventory):
        """A converge that prepares a bed (not measured)."""
        self.step(phase, kind, lambda: timed(self.runner, playbook(SITE, inventory), self.count_files[0]))

    def run_meta(self):
        return {"wall_s": round(self.elapsed(), 1),
                "budget_min": None if self.budget_s is None else round(self.budget_s / 60.0, 2),
                "reduced_by_budget": bool(self.cuts), "budget_cuts": self.cuts,
                "over_budget_estimate_s": self.over_budget_said or None,
                "phases": [{"name": p.name, "reps_planned": p.planned, "reps_run": p.started} for p in self.phases],
                "steps": self.log}


def two_racks(bench, phase, trays, samples):
    """Every repetition on a fresh 2 x N bed: rack 2 converged, then the one-rack scenarios on rack 1
    (a first converge, then no-change runs), then the two-rack ones."""
    bed = bench.bed(2, trays)
    for _ in bench.reps(phase):
        bench.step(phase, "up-2x%d" % trays, bed.up)
        inventories = bed.inventories()
        # The second rack runs converged through the one-rack scenarios, as in the two-rack ones.
        bench.setup(phase, "converge-rack2", inventories["second"])
        for name in ONE_RACK + TWO_RACKS:
            samples[name].append(bench.scenario(phase, name, inventories))
        bench.step(phase, "down-2x%d" % trays, bed.down)


def four_racks(bench, phase, trays, samples):
    """One 4 x N bed, converged once, for every repetition (all its scenarios are no-change runs, so a
    fresh bed per repetition would only add its build and first converge to the bench's time): the
    four-rack no-change run (rolling, batch 1, 2 and 4), and two controllers each running one domain
    at once against one controller running both."""
    bed = bench.bed(4, trays)
    bench.step(phase, "up-4x%d" % trays, bed.up)
    inventories = bed.inventories()
    bench.setup(phase, "converge-4x%d" % trays, inventories["bed"])
    for _ in bench.reps(phase):
        for name in FOUR_RACKS:
            samples[name].append(bench.scenario(phase, name, inventories))
    bench.step(phase, "down-4x%d" % trays, bed.down)


def smoke(bench, phase, samples):
    """1 x 3 trays, one repetition: the floor and a first converge (a quick check of the bench itself)."""
    bed = bench.bed(1, 3)
    for _ in bench.reps(phase):
        bench.step(phase, "up-1x3", bed.up)
        inventories = bed.inventories()
        for name in SMOKE:
            samples[name].append(bench.scenario(phase, name, inventories))
        bench.step(phase, "down-1x3", bed.down)


def plan(args):
    """The phases of the run the options ask for."""
    trays = args.trays
    if args.smoke:
        return [Phase("smoke 1x3", ["up-1x3", *SMOKE, "down-1x3"], 1)]
    if args.tuning:
        return [Phase("tuning 1x%d" % trays, [name for name, _, _ in TUNING], args.reps,
                      before=["up-1x%d" % trays, "converge-1x%d" % trays], after=["down-1x%d" % trays])]
    return [Phase("two racks", ["up-2x%d" % trays, "converge-rack2", *ONE_RACK, *TWO_RACKS, "down-2x%d" % trays],
                  args.reps),
            Phase("four racks", FOUR_RACKS, args.reps_4racks, before=["up-4x%d" % trays, "converge-4x%d" % trays],
                  after=["down-4x%d" % trays])]


# Each operator setting against this repository's ansible.cfg (forks 50, pipelining on) and the
# rack's SSH multiplexing (ControlMaster auto, ControlPersist 60s), one change at a time, on a
# no-change site.yml run. Fact gathering is measured as the pass it would add (site.yml gathers none).
TUNING = [
    ("site_nochange (forks 50, pipelining, multiplexing)", "site", {}),
    ("site_nochange, forks 5 (ansible default)", "site", {"ANSIBLE_FORKS": "5"}),
    ("site_nochange, pipelining off", "site", {"ANSIBLE_PIPELINING": "False"}),
    ("site_nochange, no SSH multiplexing", "site",
     {"ANSIBLE_SSH_ARGS": "-o ControlMaster=no -o ControlPath=none"}),
    ("ping pass (floor)", "ping", {}),
    ("fact gathering pass, gather_subset=min", "facts_min", {}),
    ("fact gathering pass, full", "facts_all", {}),
]


def tuning(bench, phase, trays, out):
    """Measure the operator settings of the README's tuning section on one converged rack."""
    commands = {"ping": lambda inv: ping(inv),
                "site": lambda inv: playbook(SITE, inv),
                "facts_min": lambda inv: ad_hoc(inv, "ansible.builtin.setup", "-a", "gather_subset=min"),
                "facts_all": lambda inv: ad_hoc(inv, "ansible.builtin.setup")}
    samples = {name: [] for name, _, _ in TUNING}
    bed = bench.bed(1, trays)
    bench.step(phase, "up-1x%d" % trays, bed.up)
    bench.setup(phase, "converge-1x%d" % trays, bed.inventory)
    for _ in bench.reps(phase):
        for name, command, settings in TUNING:
            samples[name].append(bench.scenario(phase, name, None, settings, [commands[command](bed.inventory)]))
    bench.step(phase, "down-1x%d" % trays, bed.down)
    baseline = statistics.median(s[0] for s in samples[TUNING[0][0]])
    results = []
    for name, _, settings in TUNING:
        walls = [s[0] for s in samples[name]]
        results.append({"name": name, "settings": settings, "trays": trays, "reps": len(walls),
                        "wall_median_s": round(statistics.median(walls), 2),
                        "wall_min_s": round(min(walls), 2), "wall_max_s": round(max(walls), 2),
                        "ratio_to_baseline": round(statistics.median(walls) / baseline, 2),
                        "controller_cpu_s": round(statistics.median(s[1] for s in samples[name]), 2)})
    with open(os.path.join(out, "tuning.json"), "w") as handle:
        json.dump({"run": bench.run_meta(), "settings": results}, handle, indent=1)
    lines = ["| setting | wall median s (min-max) | x baseline | controller CPU s |", "|---|---|---|---|"]
    lines += ["| %s | %.1f (%.1f-%.1f) | %.2f | %.1f |" % (
        r["name"], r["wall_median_s"], r["wall_min_s"], r["wall_max_s"], r["ratio_to_baseline"],
        r["controller_cpu_s"]) for r in results]
    table = run_line(bench) + "\n\n" + "\n".join(lines) + "\n"
    with open(os.path.join(out, "tuning.md"), "w") as handle:
        handle.write(table)
    say(table)


def summarise(name, racks, trays, samples, floor_median=None):
    walls = [s[0] for s in samples]
    all_trays = float(racks * trays)
    median = statistics.median(walls)
    return {
        "name": name, "racks": racks, "trays": racks * trays, "reps": len(samples),
        "wall_median_s": round(median, 2), "wall_min_s": round(min(walls), 2), "wall_max_s": round(max(walls), 2),
        "ratio_to_floor": round(median / floor_median, 2) if floor_median else None,
        "module_runs_per_tray": round(statistics.median(s[2]["total"] / all_trays for s in samples), 2),
        "task_results_per_tray": round(statistics.median(s[2]["task_results"] / all_trays for s in samples), 2),
        "controller_cpu_s": round(statistics.median(s[1] for s in samples), 2),
        "controller_cpu_s_per_tray": round(statistics.median(s[1] / all_trays for s in samples), 3),
        "trays_cpu_s_per_tray": (round(statistics.median(s[2]["trays_cpu_s"] / all_trays for s in samples), 3)
                                 if all(s[2].get("trays_cpu_s") is not None for s in samples) else None),
        # Where the wall time of the median run went (one controller's profile: the first).
        "profile": profile_of(sorted(samples, key=lambda s: s[0])[len(samples) // 2]),
    }


def profile_of(sample):
    """Where one run's wall time went: its tasks by wall seconds, grouped by name (a task met in
    several waves or loop passes adds up), largest first, and what lies outside every task (the
    interpreter's start, loading the inventory, the playbook and the plugins, the end)."""
    wall, tasks = sample[0], sample[2]["profiles"][0]
    by_task = {}
    for task in tasks:
        entry = by_task.setdefault(task["task"], {"task": task["task"], "seconds": 0.0, "results": 0, "passes": 0})
        entry["seconds"] = round(entry["seconds"] + task["seconds"], 3)
        entry["results"] += task["results"]
        entry["passes"] += 1
    return {"outside_tasks_s": round(wall - sum(task["seconds"] for task in tasks), 3),
            "tasks": sorted(by_task.values(), key=lambda t: -t["seconds"])}


PROFILED = ("site_nochange", "validate", "site_first", "site_nochange_4racks")


def render_profiles(results, top=12):
    """Markdown: for the profiled scenarios, the start-up and the tasks that took the most wall time."""
    lines = []
    for result in results:
        if result["name"] not in PROFILED:
            continue
        profile = result["profile"]
        total = result["wall_median_s"]
        lines += ["", "### Profile: %s (median run, %.1f s wall)" % (result["name"], total), "",
                  "| step | wall s | share | task results |", "|---|---|---|---|",
                  "| outside the tasks (start-up: python, inventory, playbook, plugins; the end) | %.2f | %d %% | |"
                  % (profile["outside_tasks_s"], round(100 * profile["outside_tasks_s"] / total))]
        for task in profile["tasks"][:top]:
            lines.append("| %s | %.2f | %d %% | %d |" % (task["task"].replace("|", "/"), task["seconds"],
                                                        round(100 * task["seconds"] / total), task["results"]))
        rest = profile["tasks"][top:]
        if rest:
            lines.append("| %d other tasks | %.2f | %d %% | %d |" % (
                len(rest), sum(t["seconds"] for t in rest), round(100 * sum(t["seconds"] for t in rest) / total),
                sum(t["results"] for t in rest)))
    return "\n".join(lines) + "\n"


# Racks each scenario works on, and the floor it is divided by (the 2-domain runs on the 4-rack bed are
# divided by the 4-rack floor: the same background; their own point is the comparison with each other).
RACKS_OF = {"floor_2racks": 2, "site_nochange_2racks": 2, "floor_4racks": 4, "site_nochange_4racks": 4,
            "site_nochange_4racks_batch2": 4, "site_nochange_4racks_batch4": 4, "one_controller_2domains": 2,
            "parallel_2controllers": 2}
FLOOR_OF = {"floor_2racks": 2, "site_nochange_2racks": 2, "floor_4racks": 4, "site_nochange_4racks": 4,
            "site_nochange_4racks_batch2": 4, "site_nochange_4racks_batch4": 4, "one_controller_2domains": 4,
            "parallel_2controllers": 4}
FLOOR_NAME = {1: "floor", 2: "floor_2racks", 4: "floor_4racks"}


def results_of(samples, trays):
    """One summary per scenario that ran, in the order of `samples`."""
    floors = {racks: statistics.median(s[0] for s in samples[name])
              for racks, name in FLOOR_NAME.items() if samples.get(name)}
    return [summarise(name, RACKS_OF.get(name, 1), trays, runs, floors.get(FLOOR_OF.get(name, 1)))
            for name, runs in samples.items() if runs]


def run_line(bench):
    """What the run was: its repetitions, its time, and what the budget changed."""
    phases = ", ".join("%s: %d rep%s%s" % (p.name, p.started, "" if p.started == 1 else "s",
                                           "" if p.started == p.planned else " of %d planned" % p.planned)
                       for p in bench.phases)
    text = "Run: %s; %s." % (phases, duration(bench.elapsed()))
    if bench.budget_s is not None:
        if bench.cuts:
            text += " Repetitions reduced to fit the budget of %s (%s)." % (duration(bench.budget_s), "; ".join(
                "%s %d -> %d at %s" % (c["phase"], c["reps_from"], c["reps_to"], duration(c["at_elapsed_s"]))
                for c in bench.cuts))
        else:
            text += " Budget %s: no repetition dropped." % duration(bench.budget_s)
    return text


def render_table(results):
    by_name = {r["name"]: r for r in results}
    lines = ["| scenario | racks | trays | reps | wall median s (min-max) | x floor | module runs/tray "
             "| task results/tray | controller CPU s | CPU s/tray | trays' CPU s/tray |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        trays_cpu = r.get("trays_cpu_s_per_tray")
        lines.append("| %s | %d | %d | %d | %.1f (%.1f-%.1f) | %s | %.2f | %.2f | %.1f | %.3f | %s |" % (
            r["name"], r["racks"], r["trays"], r["reps"], r["wall_median_s"], r["wall_min_s"], r["wall_max_s"],
            "-" if r["ratio_to_floor"] is None else "%.2f" % r["ratio_to_floor"], r["module_runs_per_tray"],
            r["task_results_per_tray"], r["controller_cpu_s"], r["controller_cpu_s_per_tray"],
            "-" if trays_cpu is None else "%.3f" % trays_cpu))

    def ratio(name, base, key="wall_median_s"):
        return by_name[name][key] / by_name[base][key]

    def have(*names):
        return all(name in by_name for name in names)

    lines += ["", "Targets: no-change <= 6 task results/tray (aim 4), <= 1.1 module runs/tray, <= 2.0x floor (aim "
              "1.5x); validate <= 1.2x floor; first converge <= 5x floor; four racks' ratio to their floor within "
              "1.1x of one rack's; controller CPU <= 1.0 s/tray; two controllers: wall <= one controller running "
              "both domains, CPU together <= 1.1x its CPU.",
              "Trays' CPU: what every tray's cgroup used during the run, per tray, its background (systemd, the "
              "simulated daemons) included; here the trays share the controller's cores, on a rack each has its own."]
    if have("site_nochange", "site_nochange_4racks") and by_name["site_nochange"]["ratio_to_floor"] and \
            by_name["site_nochange_4racks"]["ratio_to_floor"]:
        lines.append("Four racks' no-change ratio to their floor / one rack's: %.2fx." % (
            by_name["site_nochange_4racks"]["ratio_to_floor"] / by_name["site_nochange"]["ratio_to_floor"]))
    if have("naive_nochange", "site_nochange", "site_nochange_2racks"):
        lines.append("Naive no-change / site no-change: %.2fx. Two racks / one rack (no-change): %.2fx." % (
            ratio("naive_nochange", "site_nochange"), ratio("site_nochange_2racks", "site_nochange")))
    if have("site_nochange", "site_nochange_4racks", "site_nochange_4racks_batch2", "site_nochange_4racks_batch4"):
        lines.append("Four racks / one rack: %.2fx (batch 2: %.2fx, batch 4: %.2fx)." % (
            ratio("site_nochange_4racks", "site_nochange"), ratio("site_nochange_4racks_batch2", "site_nochange"),
            ratio("site_nochange_4racks_batch4", "site_nochange")))
    if have("parallel_2controllers", "one_controller_2domains"):
        lines.append("Two controllers at once / one controller running both domains: wall %.2fx, CPU %.2fx." % (
            ratio("parallel_2controllers", "one_controller_2domains"),
            ratio("parallel_2controllers", "one_controller_2domains", "controller_cpu_s")))
    return "\n".join(lines) + "\n"


def render_chart(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["name"] for r in results]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    axes[0].bar(names, [r["wall_median_s"] for r in results],
                yerr=[[r["wall_median_s"] - r["wall_min_s"] for r in results],
                      [r["wall_max_s"] - r["wall_median_s"] for r in results]], capsize=3)
    axes[0].set_ylabel("wall time, median (s)")
    axes[1].bar(names, [r["module_runs_per_tray"] for r in results], color="tab:orange")
    axes[1].axhline(1.2, linestyle="--", color="grey")
    axes[1].set_ylabel("remote module runs per tray")
    for axis in axes:
        axis.tick_params(axis="x", rotation=45)
    fig.suptitle("rackscale.imex on the simulated rack")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_results(bench, samples, trays, out, started):
    results = results_of(samples, trays)
    meta = dict(bench.run_meta(), started=started, trays_per_rack=trays)
    with open(os.path.join(out, "results.json"), "w") as handle:
        json.dump({"run": meta, "scenarios": results}, handle, indent=1)
    table = run_line(bench) + "\n\n" + render_table(results) + render_profiles(results)
    with open(os.path.join(out, "results.md"), "w") as handle:
        handle.write(table)
    render_chart(results, os.path.join(out, "results.png"))
    say(table)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="repetitions of the one- and two-rack scenarios (3)")
    parser.add_argument("--reps-4racks", type=int, default=2, help="repetitions on the 4-rack bed (2)")
    parser.add_argument("--trays", type=int, default=18, help="trays per rack (18)")
    parser.add_argument("--budget-min", type=float, default=25.0,
                        help="drop repetitions not yet started (never below one per phase) when the estimate says "
                             "the run would take longer than this many minutes (25; 0: no budget)")
    parser.add_argument("--out", default=OUT, help="directory of the results (bench/out)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--tuning", action="store_true", help="measure the operator settings instead")
    mode.add_argument("--smoke", action="store_true",
                      help="a quick check of the bench itself: 1 x 3 trays, 1 repetition, the floor and a first "
                           "converge (use --out to keep bench/out)")
    args = parser.parse_args(argv)
    if args.reps < 1 or args.reps_4racks < 1 or args.trays < 1:
        parser.error("--reps, --reps-4racks and --trays must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    begun = time.monotonic()
    runner = Runner()
    runner.install()
    os.makedirs(args.out, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    lock = BedLock(runner)
    bench = None
    counts_dir = tempfile.mkdtemp(prefix="bench-counts-")
    code, left_behind, written = 0, [], False
    try:
        lock.acquire()
        phases = plan(args)
        bench = Bench(runner, phases, args.budget_min * 60 if args.budget_min > 0 else None, counts_dir)
        if args.tuning:
            tuning(bench, phases[0], args.trays, args.out)
        else:
            samples = {name: [] for name in (SMOKE if args.smoke else ONE_RACK + TWO_RACKS + FOUR_RACKS)}
            try:
                if args.smoke:
                    smoke(bench, phases[0], samples)
                else:
                    two_racks(bench, phases[0], args.trays, samples)
                    four_racks(bench, phases[1], args.trays, samples)
            finally:
                left_behind = bench.close()
            runner.check()
            say("[bench] results · elapsed %s" % duration(bench.elapsed()))
            write_results(bench, samples, 3 if args.smoke else args.trays, args.out, started)
        written = True
    except Interrupted:
        pass
    except BenchError as exc:
        say("[bench] error: %s" % exc, sys.stderr)
        code = 1
    finally:
        if bench is not None:
            left_behind = bench.close()
        lock.release()
        shutil.rmtree(counts_dir, ignore_errors=True)
    if left_behind:
        say("[bench] left behind (simrack down failed): %s" % " ".join(left_behind))
        code = code or 1
    if runner.signum is not None:
        say("[bench] interrupted by %s after %s: %s" % (
            signal.Signals(runner.signum).name, duration(time.monotonic() - begun),
            "a bed could not be torn down (see above)" if left_behind else
            "%s; %s" % ("no bed left up, its state dir removed" if bench and any(bed.used for bed in bench.beds)
                        else "no bed was up", "results written to " + args.out if written
                        else "no results written")))
        code = 128 + runner.signum
    return code


def finish(code):
    try:
        sys.stdout.flush()
    except OSError:
        os._exit(code)      # a closed terminal (SIGHUP): nothing more can be said
    sys.exit(code)


if __name__ == "__main__":
    finish(main())
