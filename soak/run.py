"""Seeded chaos soak of rackscale.imex on a simulated rack (`make soak`).

A series of steps drawn from one seed (soak/plan.py): each injects none, one or two faults of the
simulated rack (about a third of them during a run, by a timer thread), then runs an action
(site.yml, with a legitimate change now and then; --check --diff then the real run; validate.yml;
two site.yml at once on one domain; a site.yml killed with SIGKILL; healing some or all faults).
After every step the invariants of soak/invariants.py are checked from the trays (read with
`simrack exec`, whatever their network does) and the simulator's own records. Writes
OUT/results.json and OUT/summary.md after every step; prints the seed first and, on a failed
invariant, the command that replays the series. --shrink re-runs the series (cut after the first
failing step) with fewer faults (delta debugging) to find the smallest failing one.
Takes the bed lock of its simrack slot (--slot, default 0; `make test` runs its short soak in slot 1,
beside the e2e stage's beds) and tears its bed down on SIGINT, SIGTERM and SIGHUP, as bench/run.py.
Usage: .venv/bin/python soak/run.py [--seed N] [--steps 50] [--racks 2] [--trays 4] [--out DIR]
       [--slot 0|1] [--keep-faults ID,ID...] [--shrink] [--shrink-budget 4]
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import invariants as inv  # noqa: E402
import plan  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_run", os.path.join(REPO, "bench", "run.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

SIMRACK = os.path.join(REPO, "tests", "rack", "simrack")
BIN = os.path.dirname(sys.executable)
OUT = os.path.join(HERE, "out")
# Short proof timeouts keep a step short; the lock's staleness must stay above the proof's longest
# wait (validate + 2 x ctl), and short enough that a killed run's lock is taken over within a step or two.
RUN_VARS = {"imex_validate_timeout_s": 20, "imex_ctl_timeout_s": 5, "imex_validate_interval_s": 1,
            "imex_lock_stale_after_s": 60}
INVARIANTS = ["files_whole", "node_lists", "busy_guard", "restart_intervals", "locks", "rc_truth",
              "heal_converges", "check_predicts", "no_key_leak", "run_bounds"]

PROBE = r'''
import hashlib, json, os, re, stat
out = {"files": {}, "devices": {}, "leftovers": [], "lock": None, "events": [], "boot": None}
def info(path, text):
    st = os.lstat(path)
    found = {"mode": "%04o" % stat.S_IMODE(st.st_mode), "uid": st.st_uid}
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as handle:
            data = handle.read()
        found["sha256"] = hashlib.sha256(data).hexdigest()
        if text:
            found["text"] = data.decode("utf-8", "replace")
    return found
for path in ("/etc/nvidia-imex/config.cfg", "/etc/nvidia-imex/nodes_config.cfg", "/etc/nvidia-imex/tls",
             "/etc/modprobe.d/nvidia-imex.conf"):
    if os.path.lexists(path):
        out["files"][path] = info(path, path.endswith(".cfg"))
if os.path.isdir("/etc/nvidia-imex/tls"):
    for name in sorted(os.listdir("/etc/nvidia-imex/tls")):
        out["files"]["/etc/nvidia-imex/tls/" + name] = info("/etc/nvidia-imex/tls/" + name, False)
if os.path.isdir("/dev/nvidia-caps-imex-channels"):
    for name in sorted(os.listdir("/dev/nvidia-caps-imex-channels")):
        st = os.lstat("/dev/nvidia-caps-imex-channels/" + name)
        out["devices"][name] = "%s %d:%d %04o %d:%d" % ("c" if stat.S_ISCHR(st.st_mode) else "other", os.major(st.st_rdev),
                                                    os.minor(st.st_rdev), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
for directory in ("/etc/nvidia-imex", "/etc/nvidia-imex/tls", "/run/rackscale-imex"):
    if os.path.isdir(directory):
        out["leftovers"] += [directory + "/" + n for n in os.listdir(directory) if re.search(r"(^\..+\.(tmp|new)$)|ansible_tmp", n)]
try:
    with open("/run/rackscale-imex/run.lock") as handle:
        out["lock"] = json.loads(handle.read() or "{}") or {"owner": "(empty)"}
except FileNotFoundError:
    pass
except ValueError:
    out["lock"] = {"owner": "(unparsable)"}
try:
    with open("/var/lib/imexsim/daemon-events.jsonl") as handle:
        out["events"] = [json.loads(line) for line in handle if line.strip()]
except FileNotFoundError:
    pass
with open("/proc/stat") as handle:
    btime = int([l for l in handle if l.startswith("btime")][0].split()[1])
with open("/proc/1/stat") as handle:
    ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
out["boot"] = round(btime + ticks / os.sysconf("SC_CLK_TCK"), 1)
print(json.dumps(out))
'''


def snapshot(dest):
    """The committed tree (HEAD) extracted into dest: the soak tests a commit, never the half-made
    edits of a working tree others are editing. Returns the commit id."""
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    archive = subprocess.Popen(["git", "-C", REPO, "archive", commit], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", dest], stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait() != 0:
        raise bench.BenchError("git archive %s failed" % commit)
    return commit


def say(text):
    print("[soak] " + text, flush=True)


def descendants(pid):
    """Process ids of every descendant of ``pid`` now (from /proc), deepest last."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                # pid (comm) state ppid ...: comm may hold spaces and parentheses.
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def kill_tree(process):
    """SIGKILL a run's process group and every descendant: ansible-playbook's workers run in
    sessions of their own, so the group's SIGKILL misses them, and they would go on (a module in
    flight) and then linger. A cancelled job's whole process tree ends at once."""
    tree = descendants(process.pid)
    bench.with_suppressed(os.killpg, process.pid, signal.SIGKILL)
    for pid in tree:
        bench.with_suppressed(os.kill, pid, signal.SIGKILL)


class Soak:
    def __init__(self, runner, bed, args, series, out):
        self.runner, self.bed, self.args, self.series, self.out = runner, bed, args, series, out
        self.env = dict(os.environ, SIMRACK_STATE=bed.state)
        self.topology = {"rack%d" % r: [plan.tray_name(r, i) for i in range(1, args.trays + 1)]
                         for r in range(1, args.racks + 1)}
        self.domain_of = {t: d for d, ts in self.topology.items() for t in ts}
        self.addresses = bed_addresses(bed.inventory)
        self.active = {}            # fault id -> fault (lasting, injected)
        self.windows = []           # the soak's own fault commands: {trays, start, end, what}
        self.busy = {}              # tray -> (start, end|None)
        self.busy_done = []
        self.desired = {}
        self.tls = {}               # the TLS variables of the steps run with TLS on (make_pki)
        self.tls_on = self.tls_changed = False
        self.step_trays = set()     # the trays of the step's own faults (injected or healed)
        self.converged = set()      # domains whose last site.yml passed UP, untouched since
        self.killed_locks = {}      # domain -> {"owner", "stale_at"}
        self.results = []
        self.texts = {}
        self.counts = {"faults_injected": 0, "faults_during_run": 0, "inject_failed": 0, "runs": 0}
        self.rack_up = {d: False for d in self.topology}
        self.lock = threading.Lock()

    # ---------------------------------------------------------------- TLS
    def make_pki(self):
        """A CA and one key and certificate per tray (its IMEX address as IP subjectAltName) in
        OUT/pki, for the steps run with TLS on; returns the body lines of every private key made.
        The first tray of each rack gets its certificate and key as PEM text (as a vault or an AWX
        credential gives them), the others as controller paths."""
        pki = os.path.join(self.out, "pki")
        os.makedirs(pki, exist_ok=True)

        def openssl(*args):
            subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        openssl("req", "-x509", *ec, "-keyout", os.path.join(pki, "ca.key"), "-out", os.path.join(pki, "ca.crt"),
                "-subj", "/CN=soak-ca", "-days", "90")
        for tray, address in sorted(self.addresses.items()):
            openssl("req", "-x509", "-CA", os.path.join(pki, "ca.crt"), "-CAkey", os.path.join(pki, "ca.key"), *ec,
                    "-keyout", os.path.join(pki, tray + ".key"), "-out", os.path.join(pki, tray + ".crt"),
                    "-subj", "/CN=" + address, "-addext", "subjectAltName=IP:" + address, "-days", "60")
        material = "soak_pki ~ '/' ~ inventory_hostname ~ '.%s'"
        given = "{{ lookup('ansible.builtin.file', %s) if inventory_hostname in soak_pem_trays else %s }}"
        self.tls = {"imex_tls": True, "imex_tls_ca": os.path.join(pki, "ca.crt"), "soak_pki": pki,
                    "soak_pem_trays": sorted(trays[0] for trays in self.topology.values()),
                    "imex_tls_cert": given % (material % "crt", material % "crt"),
                    "imex_tls_key": given % (material % "key", material % "key")}
        lines = []
        for name in sorted(os.listdir(pki)):
            if name.endswith(".key"):
                with open(os.path.join(pki, name)) as handle:
                    lines += [l.strip() for l in handle if l.strip() and not l.startswith("-----")]
        return lines

    # ---------------------------------------------------------------- trays
    def simrack(self, *args, timeout=180):
        try:
            result = subprocess.run([SIMRACK, *args], env=self.env, capture_output=True, text=True,
                                    timeout=timeout, check=False)
            return result.returncode, result.stdout, result.stderr
        except subprocess.TimeoutExpired:
            return 124, "", "simrack %s: timed out after %d s" % (" ".join(args), timeout)

    def probe(self, tray):
        rc, out, _ = self.simrack("exec", "--timeout", "20", tray, "python3", "-c", PROBE, timeout=40)
        try:
            return json.loads(out) if rc == 0 else None
        except ValueError:
            return None

    def probe_all(self):
        found = {}
        threads = [threading.Thread(target=lambda t=t: found.__setitem__(t, self.probe(t))) for t in self.domain_of]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return found

    def ctl_state(self, domain):
        """The domain's state in the simulator's own `nvidia-imex-ctl -N`, read on a tray no fault
        touches (ctl-hang or a cut tray would answer for itself only); None when none answers."""
        touched = {t for f in self.active.values() for t in f["trays"]}
        trays = sorted(self.topology[domain], key=lambda t: (t in touched, t))
        for tray in trays[:3]:
            rc, out, _ = self.simrack("exec", "--timeout", "20", tray, "timeout", "10", "nvidia-imex-ctl", "-N", timeout=40)
            match = re.search(r"^Domain State:\s*(\w+)", out, re.M)
            if match:
                return match.group(1)
        return None

    # ---------------------------------------------------------------- faults
    def inject(self, fault, during=False):
        start = time.time()
        fault["at"] = start
        rc, out, err = self.simrack("fault", *plan.simrack_args(fault))
        end = time.time()
        with self.lock:
            self.windows.append({"trays": fault["trays"], "start": start, "end": end, "what": fault["kind"]})
            fault["injected"] = rc == 0
            fault["landed"] = "during" if during else "before"
            if rc != 0:
                fault["error"] = (err or out).strip()[-300:]
                self.counts["inject_failed"] += 1
                return
            self.counts["faults_injected"] += 1
            self.counts["faults_during_run"] += during
            if fault["kind"] in plan.LASTING:
                fault["since"] = start
                self.active[fault["id"]] = fault
            if fault["kind"] == "busy":
                self.busy[fault["trays"][0]] = (start, None)
            if fault["kind"] == "reboot":   # a reboot ends the daemon-stop/kill faults of its tray
                for fid, other in list(self.active.items()):
                    if other["trays"] == fault["trays"] and other["kind"] in ("daemon-stop", "daemon-kill-no-restart"):
                        del self.active[fid]
                self.killed_locks = {d: k for d, k in self.killed_locks.items()
                                     if self.topology[d][0] not in fault["trays"]}

    def heal(self, fid):
        fault = self.active.get(fid)
        if fault is None:
            return None
        start = time.time()
        rc, out, err = self.simrack("fault", *plan.simrack_args(fault, heal=True))
        self.windows.append({"trays": fault["trays"], "start": start, "end": time.time(), "what": "heal " + fault["kind"]})
        del self.active[fid]
        if fault["kind"] == "busy":
            tray = fault["trays"][0]
            self.busy_done.append((tray, self.busy.pop(tray)[0], time.time()))
        return rc == 0 or (err or out).strip()[-200:]

    def settled_probe(self, faults, timeout_s=30):
        """The trays read once the faults injected before a run have settled (inv.unsettled: a
        killed daemon started again by systemd, a rebooted tray back with its daemon): the baseline
        of a --check must not see what systemd does next. Returns (probes, what had not settled
        within timeout_s)."""
        deadline = time.time() + timeout_s
        while True:
            probes = self.probe_all()
            waiting = inv.unsettled(faults, probes, time.time())
            if not waiting or time.time() >= deadline:
                return probes, waiting
            self.runner.sleep(1)

    def check_first(self, index, before_faults):
        """A site.yml --check --diff on a settled rack, before the real run that it predicts. A prediction is
        judged on runs that get past the locks: a killed run's lock is waited out first (the locks invariant
        is exercised by the other actions). Returns (the check run, the probes before it, what had not
        settled, the probes after it)."""
        self.wait_for_stale_locks(index)
        pre_check, waiting = self.settled_probe(before_faults)
        check_run = self.run_playbook("check", "site.yml", index, check=True)
        return check_run, pre_check, waiting, self.probe_all()

    @staticmethod
    def prediction_verdict(check_run, run, pre_check, between, waiting, during):
        """check_predicts for a --check run and the real run right after it."""
        if waiting:
            return None, "the step's faults had not settled before the check run: %s" % "; ".join(waiting)
        if during:
            return None, "a fault was injected during the real run"
        if check_run["rc"] != 0 and run["rc"] == 0:
            return False, "the check run failed (rc %d) where the real run passed: %s" % (
                check_run["rc"], inv.failure_text(check_run["events"]).strip()[:400])
        if check_run["rc"] != 0 or run["rc"] != 0:
            return None, "check rc %d, real rc %d: a failed run's changes stop where it failed" % (check_run["rc"], run["rc"])
        return inv.check_predicts(check_run["events"], run["events"], pre_check, between)

    def wait_for_stale_locks(self, index):
        waits = [k["stale_at"] - time.time() for k in self.killed_locks.values()]
        if waits and max(waits) > 0:
            say("step %d: waiting %.0f s for a killed run's lock to go stale" % (index, max(waits) + 2))
            self.runner.sleep(max(waits) + 2)

    def busy_intervals(self):
        return self.busy_done + [(t, s, None) for t, (s, _) in self.busy.items()]

    # ---------------------------------------------------------------- runs
    def start_run(self, name, playbook, step, inventory=None, check=False, domains=None):
        rundir = os.path.join(self.out, "runs", "%03d-%s" % (step, name))
        os.makedirs(rundir, exist_ok=True)
        variables = dict(RUN_VARS, imex_report_dir=os.path.join(rundir, "reports"), **self.desired)
        if self.tls_on:
            variables.update(self.tls)
        with open(os.path.join(rundir, "vars.json"), "w") as handle:
            json.dump(variables, handle)
        command = [os.path.join(BIN, "ansible-playbook"), "-i", inventory or self.bed.inventory,
                   os.path.join(self.args.tree, "playbooks", playbook), "-e", "@" + os.path.join(rundir, "vars.json")]
        if check:
            command += ["--check", "--diff"]
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(self.args.tree, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"),
                   ANSIBLE_CALLBACKS_ENABLED="soak_events", SOAK_EVENTS_FILE=os.path.join(rundir, "events.jsonl"),
                   PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
        domains = domains or sorted(self.topology)
        run = {"name": "%d/%s" % (step, name), "dir": rundir, "playbook": playbook, "check": check,
               "domains": domains, "killed": False, "start": time.time(),
               "bound_s": inv.run_bound_s(len(domains), RUN_VARS["imex_validate_timeout_s"], RUN_VARS["imex_ctl_timeout_s"])}
        run["process"] = self.runner.spawn(command, bench.PLAYBOOK, env=env, cwd=self.args.tree)
        self.counts["runs"] += 1
        return run

    def finish_run(self, run, timers=()):
        process = run.pop("process")

        def overdue():
            # Marked before the kill: a run the watchdog ends is a killed run (its lock may stand), and
            # run_bounds fails it.
            run["killed"] = "watchdog"
            kill_tree(process)
        watchdog = threading.Timer(run["bound_s"] + 60, overdue)
        watchdog.start()
        rc, out, err = self.runner.wait(process)
        watchdog.cancel()
        run["end"] = time.time()
        run["seconds"] = round(run["end"] - run["start"], 1)
        for timer in timers:
            timer.cancel()
        run["rc"] = rc
        run["output"] = out + err
        with open(os.path.join(run["dir"], "output.txt"), "w") as handle:
            handle.write(run["output"])
        run["events"] = []
        path = os.path.join(run["dir"], "events.jsonl")
        if os.path.exists(path):
            with open(path) as handle:
                for line in handle:
                    try:
                        run["events"].append(json.loads(line))
                    except ValueError:
                        pass    # the last line of a killed run may be cut
        owners = {item.get("owner") for e in run["events"] if e.get("task") == inv.LOCK_TASK
                  for item in e.get("items") or [] if item.get("owner")}
        run["owner"] = next(iter(owners)) if len(owners) == 1 else None
        return run

    def run_playbook(self, name, playbook, step, during=(), inventory=None, check=False, domains=None, kill_after=None):
        """One run, with the step's during-run faults fired by timers at their moment (a fault whose
        moment comes after the run ended is injected right after it) and an optional SIGKILL."""
        run = self.start_run(name, playbook, step, inventory=inventory, check=check, domains=domains)
        timers = []
        fired = set()

        def fire(fault):
            fired.add(fault["id"])
            self.inject(fault, during=True)
        for fault in during:
            timer = threading.Timer(fault["at_s"], fire, (fault,))
            timer.start()
            timers.append(timer)
        if kill_after is not None:
            process = run["process"]

            def kill():
                run["killed"] = True
                kill_tree(process)
            timers.append(threading.Timer(kill_after, kill))
            timers[-1].start()
        self.finish_run(run, timers)
        for timer in timers:
            timer.join()
        if not check and not run["killed"]:
            # Read before a fault whose moment came after the run lands: the state the run left.
            run["ctl"] = {d: self.ctl_state(d) for d in run["domains"]}
        for fault in during:
            if fault["id"] not in fired:
                self.inject(fault, during=False)
                fault["landed"] = "after the run"
        return run

    # ---------------------------------------------------------------- a step
    def step(self, entry):
        index, action = entry["step"], entry["action"]
        begin = time.time()
        before = self.previous_after or self.probe_all()
        for fault in entry["faults"]:
            fault.pop("landed", None)
        kind = action["kind"]
        # Turning TLS on or off is a legitimate change of every domain, as a site_change is.
        self.tls_changed = bool(entry.get("tls")) != self.tls_on
        self.tls_on = bool(entry.get("tls"))
        heal_ids = list(self.active) if kind == "heal_all" else action.get("heal", [])
        self.step_trays = {t for f in entry["faults"] for t in f["trays"]}
        self.step_trays |= {t for fid in heal_ids if fid in self.active for t in self.active[fid]["trays"]}
        # A full heal heals this step's faults too: they land before it, so that what the runs after
        # the heal reach is judged on a rack with no fault at all.
        before_faults = [f for f in entry["faults"] if not f["during"] or kind == "heal_all"]
        during = [f for f in entry["faults"] if f["during"] and kind != "heal_all"]
        for fault in before_faults:
            self.inject(fault)
        active_at_start = {fid: dict(f) for fid, f in self.active.items()}
        kind = action["kind"]
        runs, checks, verdicts = [], [], {}
        between = None
        healed = []
        if kind in ("heal_some", "heal_all"):
            ids = list(self.active) if kind == "heal_all" else action["heal"]
            healed = [(fid, self.heal(fid)) for fid in ids if fid in self.active]
        if kind == "heal_all":
            # The first run after a full heal has the most to do (start what was stopped, rewrite what
            # was edited): its --check is the richest prediction of the series.
            check_run, pre_check, waiting, between = self.check_first(index, before_faults)
            checks.append(check_run)
            up_after = None
            for attempt in (1, 2):
                run = self.run_playbook("site-%d" % attempt, "site.yml", index, during=during if attempt == 1 else ())
                runs.append(run)
                if attempt == 1:
                    verdicts["check_predicts"] = self.prediction_verdict(check_run, run, pre_check, between, waiting, during)
                if run["rc"] == 0 and all(s == "UP" for s in run["ctl"].values()):
                    up_after = attempt
                    break
            last = self.run_playbook("site-again", "site.yml", index)
            runs.append(last)
            if during or self.active:
                verdicts["heal_converges"] = (None, "a fault landed during the step's runs")
            else:
                verdicts["heal_converges"] = inv.heal_converges(up_after, inv.changed_pairs(last["events"]) if up_after else set(),
                                                                last["rc"])
        elif kind == "check_then_run":
            check_run, pre_check, waiting, between = self.check_first(index, before_faults)
            checks.append(check_run)
            run = self.run_playbook("site", "site.yml", index, during=during)
            runs.append(run)
            verdicts["check_predicts"] = self.prediction_verdict(check_run, run, pre_check, between, waiting, during)
        elif kind == "concurrent":
            domain = action["domain"]
            inventory = self.bed.rack_inventory(int(domain[4:]))
            first = self.start_run("site-a", "site.yml", index, inventory=inventory, domains=[domain])
            self.runner.sleep(action["stagger_s"])
            second = self.start_run("site-b", "site.yml", index, inventory=inventory, domains=[domain])
            fired = set()

            def fire(fault):
                fired.add(fault["id"])
                self.inject(fault, during=True)
            timers = [threading.Timer(f["at_s"], fire, (f,)) for f in during]
            for timer in timers:
                timer.start()
            self.finish_run(first)
            self.finish_run(second, timers)
            for timer in timers:
                timer.join()
            state = self.ctl_state(domain)
            for run in (first, second):
                run["ctl"] = {domain: state}
                runs.append(run)
            for fault in during:
                if fault["id"] not in fired:
                    self.inject(fault)
                    fault["landed"] = "after the runs"
        else:
            playbook = "validate.yml" if kind == "validate" else "site.yml"
            if kind == "site_change":
                self.desired.update(action["change"])
            run = self.run_playbook(kind, playbook, index, during=during,
                                    kill_after=action.get("after_s") if kind == "kill" else None)
            runs.append(run)
        after = self.probe_all()
        self.previous_after = after
        verdicts.update(self.judge(index, entry, begin, before, after, runs, checks, active_at_start, healed))
        for name in INVARIANTS:
            verdicts.setdefault(name, (None, "no %s in this step" % {
                "heal_converges": "full heal", "check_predicts": "--check run"}.get(name, "run to judge")))
        record = {"step": index,
                  "faults": [self.describe(f) for f in entry["faults"]],
                  "action": self.describe_action(action, healed),
                  "rc": runs[-1]["rc"] if runs else None,
                  "runs": [{"name": r["name"], "rc": r["rc"], "seconds": r["seconds"], "killed": r["killed"],
                            "ctl": r.get("ctl")} for r in checks + runs],
                  "invariants": {name: verdicts[name][0] for name in INVARIANTS},
                  "details": {name: verdicts[name][1] for name in INVARIANTS},
                  "active_faults": sorted(self.describe(f) for f in self.active.values()),
                  "seconds": round(time.time() - begin, 1)}
        return record

    def describe(self, fault):
        text = " ".join(plan.simrack_args(fault))
        if fault.get("landed"):
            text += " [%s]" % fault["landed"]
        if fault.get("error"):
            text += " [not injected: %s]" % fault["error"].splitlines()[-1][:120]
        return text

    def describe_action(self, action, healed):
        kind = action["kind"]
        if kind == "site_change":
            return "site.yml with %s" % json.dumps(action["change"], sort_keys=True)
        if kind == "check_then_run":
            return "site.yml --check --diff, then site.yml"
        if kind == "concurrent":
            return "two site.yml at once on %s (%.1f s apart)" % (action["domain"], action["stagger_s"])
        if kind == "kill":
            return "site.yml killed (SIGKILL) after %.1f s" % action["after_s"]
        if kind in ("heal_some", "heal_all"):
            return "%s (%s), then site.yml%s" % (kind.replace("_", " "), ", ".join(fid for fid, _ in healed) or "nothing active",
                                                 " --check --diff, site.yml until UP, and once more" if kind == "heal_all" else "")
        return {"site": "site.yml", "validate": "validate.yml"}[kind]

    def judge(self, index, entry, begin, before, after, runs, checks, active_at_start, healed):
        verdicts = {}
        verdicts["files_whole"] = inv.files_whole(after, self.step_trays)
        edited = {t for f in self.active.values() if f["kind"] == "nodelist-edit" for t in f["trays"]}
        lists = inv.node_lists(after, self.topology, self.addresses, edited, self.step_trays)
        # A fault in one rack leaves another rack alone: when the step's faults hit one rack, no fault
        # is active on the other, no legitimate change ran, and that rack was UP before.
        racks_hit = {self.domain_of[t] for f in entry["faults"] for t in f["trays"]}
        touched = {self.domain_of[t] for f in list(self.active.values()) + list(active_at_start.values()) for t in f["trays"]}
        if len(racks_hit) == 1 and entry["action"]["kind"] != "site_change" and not self.tls_changed and not self.killed_locks:
            for domain in sorted(set(self.topology) - racks_hit - touched):
                if self.rack_up.get(domain):
                    ok, detail = inv.other_rack_untouched(before, after, self.topology[domain])
                    if ok is False:
                        lists = (False, "%s; %s (faults only in %s)" % (lists[1], detail, ", ".join(racks_hit)))
        verdicts["node_lists"] = lists
        events = {t: [e for e in (after.get(t) or {}).get("events", []) if e["time"] >= begin] for t in after}
        boots = {t: [after[t]["boot"]] for t in after if after.get(t) and before.get(t)
                 and after[t]["boot"] != before[t]["boot"]}
        guard_reads = [e["time"] for r in runs for e in r["events"] if e.get("type") == "task_start" and e.get("task") == inv.GUARD_READ_TASK]
        verdicts["busy_guard"] = inv.busy_guard(events, boots, self.topology, self.busy_intervals(), self.windows, begin,
                                                guard_reads=guard_reads)
        real = [r for r in runs if r["playbook"] == "site.yml"]
        verdicts["restart_intervals"] = inv.no_overlapping_restarts(real, self.domain_of) if real else (None, "no site.yml run")
        # Locks.
        lock_records = {}
        for domain, trays in self.topology.items():
            probe = after.get(trays[0])
            lock_records[domain] = "?" if not probe else (probe["lock"] or {}).get("owner")
        for run in real:
            if run["killed"] and run.get("owner"):
                released = any(e.get("task", "").startswith("Release the domain locks") and e.get("type") == "ok"
                               for e in run["events"])
                for domain in inv.locked_domains(run["events"], self.domain_of):
                    if not released:
                        probe = after.get(self.topology[domain][0]) or {}
                        since = (probe.get("lock") or {}).get("since") or time.time()
                        self.killed_locks[domain] = {"owner": run["owner"], "stale_at": since + RUN_VARS["imex_lock_stale_after_s"]}
        finished = {r.get("owner") for r in real if not r["killed"]}
        for domain, owner in lock_records.items():
            # A run killed while its lock was being taken holds it without having heard so.
            if owner not in (None, "?") and owner not in finished and domain not in self.killed_locks and any(r["killed"] for r in real):
                since = (after[self.topology[domain][0]].get("lock") or {}).get("since") or time.time()
                self.killed_locks[domain] = {"owner": owner, "stale_at": since + RUN_VARS["imex_lock_stale_after_s"]}
        holders = {d: k["owner"] for d, k in self.killed_locks.items()}
        problems = []
        ok, detail = inv.locks_after(lock_records, real, holders, {d: trays[0] for d, trays in self.topology.items()})
        if ok is False:
            problems.append(detail)
        ok2, detail2 = inv.two_holders(real, self.domain_of)
        if not ok2:
            problems.append(detail2)
        for run in real:
            if run["killed"]:
                continue
            for domain in run["domains"]:
                held = self.killed_locks.get(domain)
                if held and held["owner"] != run.get("owner"):
                    fine, why = inv.refused_while_locked(run, domain, held["stale_at"], inv.lock_examined(run["events"], domain))
                    if not fine:
                        problems.append(why)
        for domain, held in list(self.killed_locks.items()):
            if lock_records.get(domain) != held["owner"]:
                del self.killed_locks[domain]      # taken over or released by a later run
        verdicts["locks"] = (None, detail) if ok is None and not problems else (not problems, "; ".join(problems) or detail)
        # rc and status.
        problems, unread = [], []
        # A healthy rack: no fault on the run's domains (active, injected or healed in the step), and
        # each domain's last site.yml passed UP with nothing touching it since (no kill, no fault).
        touched = self.step_trays | {t for f in list(active_at_start.values()) + list(self.active.values()) for t in f["trays"]}
        for run in runs:
            if run["killed"] or "ctl" not in run:
                continue
            if "locked by" in inv.failure_text(run["events"]):
                continue
            healthy = inv.healthy_rack(run["domains"], self.converged, self.topology, touched)
            if healthy and run["rc"] != 0:
                problems.append(inv.rc_truth(run, run["ctl"], [], self.addresses, healthy=True)[1])
                continue
            if not run["events"]:
                unread.append("%s (rc %d) stopped before its play: %s" % (run["name"], run["rc"], run["output"].strip()[-200:]))
                continue
            landed = [f for f in entry["faults"] if f.get("injected") and run["start"] <= f.get("at", 0) <= run["end"]]
            if landed and run["rc"] == 0:
                unread.append("%s: rc 0, but %s landed during it (after its proof, maybe)" % (
                    run["name"], ", ".join(f["kind"] for f in landed)))
                continue
            health = plan.HEALTH_VALIDATE if run["playbook"] == "validate.yml" else plan.HEALTH
            # The faults active from before the run to its end, on its domains.
            through = [f for fid, f in active_at_start.items() if fid in self.active and f.get("since", 0) < run["start"]
                       and any(self.domain_of[t] in run["domains"] for t in f["trays"])]
            lasting = [f for f in through if inv.fails_the_run(f, health, run["domains"], self.topology)]
            stoppers = [f for f in entry["faults"] if f.get("injected") and f not in lasting]
            said = [f for f in through if inv.said_not_failed(f)]
            ok, detail = inv.rc_truth(run, run["ctl"], lasting, self.addresses, stoppers=stoppers, said=said)
            if ok is False:
                problems.append(detail)
            elif ok is None:
                unread.append(detail)
        checked = [r for r in runs if not r["killed"] and "ctl" in r]
        if problems:
            verdicts["rc_truth"] = (False, "; ".join(problems + unread))
        elif len(unread) < len(checked):
            verdicts["rc_truth"] = (True, "; ".join(["ok"] + ["not judged: " + u for u in unread]))
        else:
            verdicts["rc_truth"] = (None, "; ".join(unread) or "no finished run")
        verdicts["run_bounds"] = inv.run_bounds(runs + checks)
        for run in runs:
            if run["killed"]:
                self.converged -= set(run["domains"])
            elif run["playbook"] == "site.yml" and run["rc"] == 0 and all(s == "UP" for s in run["ctl"].values()):
                self.converged |= set(run["domains"])
            elif run["playbook"] == "site.yml":
                self.converged -= set(run["domains"])
        self.converged -= {self.domain_of[t] for t in touched}
        texts = {}
        for run in runs + checks:
            texts[run["name"] + " output"] = run["output"]
            for path in glob.glob(os.path.join(run["dir"], "**", "*"), recursive=True):
                if os.path.isfile(path):
                    with open(path, errors="replace") as handle:
                        texts[os.path.relpath(path, self.out)] = handle.read()
        verdicts["no_key_leak"] = inv.no_key_leak(texts, self.key_lines)
        for run in runs:
            if run.get("ctl"):
                for domain, state in run["ctl"].items():
                    self.rack_up[domain] = state == "UP"
        return verdicts

    def run(self):
        self.previous_after = None
        with open(os.path.join(self.bed.state, "id_ed25519")) as handle:
            self.key_lines = [l.strip() for l in handle if l.strip() and not l.startswith("-----")]
        if any(entry.get("tls") for entry in self.series):
            self.key_lines += self.make_pki()
        # The series starts from a converged rack, as an operator's racks are.
        setup = self.run_playbook("converge", "site.yml", -1)
        say("converged the bed in %.0f s (rc %d)" % (setup["seconds"], setup["rc"]))
        if setup["rc"] != 0:
            raise bench.BenchError("the first site.yml on the fresh bed failed (rc %d):\n%s" % (setup["rc"], setup["output"][-3000:]))
        self.rack_up = {d: self.ctl_state(d) == "UP" for d in self.topology}
        self.converged = {d for d, up in self.rack_up.items() if up}
        for entry in self.series:
            self.runner.check()
            say("step %d/%d: faults %s; action %s" % (
                entry["step"] + 1, len(self.series), [" ".join(plan.simrack_args(f)) + (" (during)" if f["during"] else "")
                                                       for f in entry["faults"]] or "none", entry["action"]["kind"]))
            record = self.step(entry)
            if self.runner.signum is not None:
                # The stop signal cut this step's runs short: neither finished nor killed by the step,
                # so its verdicts would judge the soak's own stop. Not recorded.
                say("step %d cut short by %s: not judged" % (entry["step"] + 1, signal.Signals(self.runner.signum).name))
                self.runner.check()
            self.results.append(record)
            failed = [n for n, v in record["invariants"].items() if v is False]
            say("step %d: rc %s, %.0f s, invariants %s" % (entry["step"] + 1, record["rc"], record["seconds"],
                "all held or not checked" if not failed else "FAILED: " + ", ".join(failed)))
            for name in failed:
                say("  %s: %s" % (name, record["details"][name][:600]))
            yield record


def replay_command(args, kept=None):
    command = "make soak SEED=%d STEPS=%d RACKS=%d TRAYS=%d" % (args.seed, args.steps, args.racks, args.trays)
    if kept is not None:
        command += " SOAK_ARGS='--keep-faults %s'" % (",".join(kept) or "none")
    return command


def write_results(out, args, records, counts, extra=None):
    result = {"seed": args.seed, "commit": getattr(args, "commit", None), "racks": args.racks, "trays": args.trays, "steps_planned": args.steps,
              "replay": replay_command(args, args.keep), "counts": counts, "steps": records}
    result.update(extra or {})
    with open(os.path.join(out, "results.json.tmp"), "w") as handle:
        json.dump(result, handle, indent=1, default=str)
    os.replace(os.path.join(out, "results.json.tmp"), os.path.join(out, "results.json"))
    lines = ["# Soak seed %d (%d x %d trays, commit %s)" % (args.seed, args.racks, args.trays, (getattr(args, "commit", None) or "?")[:12]), "",
             "Replay: `%s`" % replay_command(args, args.keep), "",
             "Steps run: %d of %d; faults injected: %d (%d during a run, %d could not be injected); runs: %d"
             % (len(records), args.steps, counts["faults_injected"], counts["faults_during_run"],
                counts["inject_failed"], counts["runs"]), ""]
    held = {n: sum(1 for r in records if r["invariants"][n] is True) for n in INVARIANTS}
    failed = {n: [r["step"] for r in records if r["invariants"][n] is False] for n in INVARIANTS}
    unchecked = {n: sum(1 for r in records if r["invariants"][n] is None) for n in INVARIANTS}
    lines += ["| invariant | held | failed (steps) | not checked |", "|---|---|---|---|"]
    lines += ["| %s | %d | %s | %d |" % (n, held[n], ", ".join(map(str, failed[n])) or "-", unchecked[n]) for n in INVARIANTS]
    lines += ["", "| step | faults | action | rc | s | failed |", "|---|---|---|---|---|---|"]
    for r in records:
        lines.append("| %d | %s | %s | %s | %.0f | %s |" % (r["step"], "; ".join(r["faults"]) or "-", r["action"], r["rc"],
                                                            r["seconds"], ", ".join(n for n, v in r["invariants"].items() if v is False) or "-"))
    if extra and extra.get("shrink"):
        lines += ["", "Shrink: %s" % json.dumps(extra["shrink"])]
    with open(os.path.join(out, "summary.md"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


def bed_addresses(inventory):
    """Each tray's IMEX address, as the bed's inventory gives it (its slot decides the network)."""
    import yaml
    with open(inventory) as handle:
        domains = yaml.safe_load(handle)["all"]["children"]["imex_domains"]["children"]
    return {tray: host["imex_address"] for group in domains.values() for tray, host in group["hosts"].items()}


def run_series(runner, args, series, out, on_record=None):
    """One series on a fresh bed; returns (records, counts). The bed always comes down."""
    bed = bench.Bed(runner, args.racks, args.trays, slot=args.slot)
    records, soak = [], None
    try:
        say("bringing up a %d x %d bed" % (args.racks, args.trays))
        bed.up()
        soak = Soak(runner, bed, args, series, out)
        for record in soak.run():
            records.append(record)
            if on_record:
                on_record(records, soak.counts)
            if args.stop_at_failure and any(v is False for v in record["invariants"].values()):
                break
    finally:
        bed.close()
    return records, (soak.counts if soak else {})


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--racks", type=int, default=2)
    parser.add_argument("--trays", type=int, default=4)
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--slot", type=int, choices=bench.SLOTS, default=0,
                        help="the simrack slot of the soak's bed (1: beside another test run's bed in slot 0)")
    parser.add_argument("--keep-faults", default=None, help="replay with only these fault ids (a shrunk series)")
    parser.add_argument("--shrink", action="store_true", help="on a failure, search the smallest failing set of faults")
    parser.add_argument("--shrink-budget", type=int, default=4, help="re-runs the shrink may make")
    parser.add_argument("--stop-at-failure", action="store_true")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 10 ** 6)
    args.keep = None if args.keep_faults is None else [f for f in args.keep_faults.split(",") if f and f != "none"]
    return args


def main(argv=None):
    args = parse_args(argv)
    say("seed %d (%d steps, %d x %d trays)" % (args.seed, args.steps, args.racks, args.trays))
    runner = bench.Runner(label="soak")
    runner.install()
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    series = plan.draw_series(args.seed, args.steps, args.racks, args.trays)
    if args.keep is not None:
        series = plan.keep_faults(series, args.keep)
    lock = bench.BedLock(runner, slots=(args.slot,))
    code, records, counts, started = 0, [], {}, time.time()
    args.tree = tempfile.mkdtemp(prefix="soak-tree-")
    args.commit = snapshot(args.tree)
    say("testing commit %s (extracted to %s)" % (args.commit[:12], args.tree))
    try:
        lock.acquire()
        records, counts = run_series(runner, args, series, args.out,
                                     on_record=lambda r, c: write_results(args.out, args, r, c))
        failing = [(r["step"], n) for r in records for n, v in r["invariants"].items() if v is False]
        extra = {"seconds": round(time.time() - started, 1)}
        if failing:
            code = 1
            say("FAILED invariants: %s" % ", ".join("step %d %s" % f for f in failing))
            say("replay: %s" % replay_command(args, args.keep))
            if args.shrink:
                extra["shrink"] = shrink(runner, args, series, records, failing[0])
        write_results(args.out, args, records, counts, extra)
    except bench.Interrupted:
        pass
    except bench.BenchError as exc:
        say("error: %s" % exc)
        code = 1
    finally:
        lock.release()
        shutil.rmtree(args.tree, ignore_errors=True)
    if runner.signum is not None:
        say("interrupted by %s; no bed left up; results of the steps run so far in %s" % (
            signal.Signals(runner.signum).name, args.out))
        return 128 + runner.signum
    say("%d steps in %.0f s; results in %s" % (len(records), time.time() - started, args.out))
    return code


def shrink(runner, args, series, records, first):
    """Delta debugging over the faults of the series cut after the first failing step: the smallest
    set of faults with which the same invariant still fails somewhere in the cut series."""
    step, name = first
    cut = series[:step + 1]
    ids = plan.all_fault_ids(cut)
    say("shrink: %s failed at step %d; %d faults in steps 0..%d" % (name, step, len(ids), step))
    trial_args = argparse.Namespace(**vars(args))
    trial_args.steps, trial_args.stop_at_failure = step + 1, True

    def fails(subset):
        out = tempfile.mkdtemp(prefix="soak-shrink-", dir=os.path.dirname(args.out))
        try:
            found, _ = run_series(runner, trial_args, plan.keep_faults(cut, subset), out)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        result = any(r["invariants"][name] is False for r in found)
        say("shrink: %d faults %s -> %s" % (len(subset), subset, "fails" if result else "passes"))
        return result
    smallest, calls, minimal = plan.ddmin(ids, fails, budget=args.shrink_budget)
    trial_args.keep = smallest
    command = replay_command(trial_args, smallest)
    if minimal:
        say("shrink: smallest failing series found (%d re-runs): faults %s; replay: %s" % (calls, smallest, command))
    else:
        say("shrink: the budget of %d re-runs ran out before the series was shown smallest; failing with faults "
            "%s; replay: %s (a larger --shrink-budget goes on)" % (calls, smallest, command))
    return {"invariant": name, "step": step, "faults": smallest, "reruns": calls, "minimal": minimal,
            "replay": command}


if __name__ == "__main__":
    bench.finish(main())
