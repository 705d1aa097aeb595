# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whole runs of the imex role on a simulated domain, through the plan's stages, in milliseconds.

The trays start from recorded reads (reads/*.json: imex_tray_info's results on the simulated rack,
re-recorded by tools/record-reads) and change as a run changes them: its writes, restarts and starts.
A run calls the stages of plugin_utils/plan/ in the order the action plugin and the role's
tasks do (preflight, read; where the run has something to do, the locks, the second read and reread; then
per wave: writes, status read, restart, pre-restart tasks, guard, lock check, restarts, proof, verdicts; the
locks released at the end), looked up on the module
at each call, so that a test can alter the plan on purpose (monkeypatch) and see an invariant fail.
What each stage's Ansible task does on a tray (imex_nodes_config, imex_config, systemd) is what this
file models; what the plan decides is never modelled here.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os

from ansible_collections.rackscale.imex.plugins.plugin_utils._option_table import RUN
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import variance_problems
from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import describe, names_outside, replace_block, split
from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import validate_entries
from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import apply_settings, validate_settings
from ansible_collections.rackscale.imex.plugins.module_utils._nodes import nodes_checksum, render_nodes, validate_nodes
from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.plugins.plugin_utils._domain import build_model
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import role_options

READS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reads")
# Every tray's /etc/hosts before a run adds a block of slot names: a Debian installer's.
with open(os.path.join(os.path.dirname(READS), "..", "samples", "hosts", "debian.txt"), encoding="utf-8") as _hosts:
    HOSTS = _hosts.read()
SERVICE = "nvidia-imex"
# Seconds between two things that happen on the simulated trays (writes, starts): well above the
# plan's one second of slack between a file's change time and a daemon's start.
TICK = 10.0


def recorded(state):
    """The fixture of one recorded state: {state, description, domain, options, reads}."""
    with open(os.path.join(READS, state + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


def _sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Tray:
    """One simulated tray: its files (as its recorded read describes them), its daemon, its work."""

    def __init__(self, name, address, read, clock):
        self.name, self.address = name, address
        self.template = copy.deepcopy(read)
        self.files = {path: dict(found) for path, found in (read.get("files") or {}).items()}
        self.running = (read.get("services") or {}).get(SERVICE) == "active"
        self.started = (read.get("services_started") or {}).get(SERVICE) if self.running else None
        # What the daemon runs: the checksums of its files when it started.
        self.runs = self._on_disk() if self.running else None
        self.work = list(read.get("compute_apps") or [])
        self.reachable = True
        self.clock = clock
        # The release the running daemon runs (the installed one once a run starts it).
        self.release = (read.get("daemon_release") or {}).get("running")
        self.instance = copy.deepcopy((read.get("services_instance") or {}).get(SERVICE))
        # {channel: state} the imex_channels role last ensured (None: as recorded).
        self.channels = None
        # Masked: handed over to the DRA driver (a start by a run in another mode unmasks it).
        self.masked = (read.get("services_enabled") or {}).get(SERVICE) == "masked"
        # Its /etc/hosts, and the block of slot names its running daemon resolved (at start, or at SIGUSR1).
        self.hosts = HOSTS
        self.resolved = self.hosts_block()

    def hosts_block(self):
        return split(self.hosts)[1]

    def reconnect(self, hosts_file=""):
        """SIGUSR1: the running daemon resolves the slot names again; it stays the same instance. With
        ``hosts_file`` (imex_reconnect's), the record of the instance, where there is one, follows it."""
        self.resolved = self.hosts_block()
        loaded = (self.instance or {}).get("loaded")
        if hosts_file and loaded and loaded["invocation_id"] == self.instance["invocation_id"]:
            loaded["hosts_block"] = describe(self.hosts)["sha256"]

    def __deepcopy__(self, memo):
        """A copy whose changes stay its own; the recorded read it starts from is shared (never changed)."""
        twin = copy.copy(self)
        twin.files = {path: dict(found) for path, found in self.files.items()}
        twin.runs = dict(self.runs) if self.runs is not None else None
        twin.work = copy.deepcopy(self.work)
        twin.instance = copy.deepcopy(self.instance)
        twin.clock = copy.deepcopy(self.clock, memo)
        return twin

    def _on_disk(self):
        return {path: found.get("sha256") for path, found in self.files.items()}

    def read(self, entry, slot_names=()):
        """imex_tray_info's result for the plan's tray entry (and its domain's slot names): the recorded read
        with today's state."""
        # The plan never changes a read: the recorded parts are shared, the changing ones made afresh.
        read = dict(self.template)
        read["files"] = {path: copy.deepcopy(self.files.get(path) or {"exists": False, "error": None})
                         for path in entry["read_files"]}
        read["services"] = {SERVICE: "active" if self.running else "inactive"}
        read["services_started"] = {SERVICE: self.started if self.running else None}
        read["compute_apps"] = copy.deepcopy(self.work)
        if read.get("daemon_release"):
            read["daemon_release"] = dict(read["daemon_release"], running=self.release if self.running else None)
        if "services_instance" in read:
            read["services_instance"] = {SERVICE: copy.deepcopy(self.instance) if self.running else None}
        if self.channels is not None and read.get("channels"):
            wanted = {str(found["channel"]): found.get("state", "present") for found in entry["channel_entries"]}
            read["channels"] = {channel: {"changed": False} if self.channels.get(channel) == wanted.get(channel)
                                else found for channel, found in read["channels"].items()}
        if entry.get("read_enablement"):
            recorded = (self.template.get("services_enabled") or {}).get(SERVICE)
            unmasked = recorded if recorded not in (None, "masked") else "enabled"
            read["services_enabled"] = {SERVICE: "masked" if self.masked else unmasked}
        if entry.get("read_hosts"):
            found = describe(self.hosts)
            read["hosts_block"] = {"path": entry["read_hosts"], "exists": True, "sha256": found["sha256"],
                                   "entries": found["entries"], "error": found["error"],
                                   "names_outside": names_outside(self.hosts, slot_names)}
        return read

    def ensure_channels(self, entries):
        """The imex_channels role: every channel of the tray's entries as they ask."""
        self.channels = {str(found["channel"]): found.get("state", "present") for found in entries}

    def write(self, path, text):
        """The write modules' atomic replace: new content, change time now. True when it changed."""
        found = self.files.get(path) or {}
        if found.get("content") == text:
            return False
        self.files[path] = dict(found, exists=True, content=text, sha256=_sha(text), ctime=self.clock.now(),
                                uid=0, gid=0, mode=found.get("mode") or "0644", error=None)
        return True

    def start(self, recorded=(), hosts_file=""):
        """A new instance of the unit, begun now. ``recorded``: the files whose content the run that started
        it records as loaded (its handler, tied to the instance); none for a start by hand. ``hosts_file``:
        the handler records the hosts block the instance resolved too."""
        self.running, self.started, self.runs, self.masked = True, self.clock.now(), self._on_disk(), False
        self.release = self.template.get("imex_version")
        invocation = "started-at-%d" % self.started
        loaded = {"invocation_id": invocation,
                  "files": {path: (self.files.get(path) or {}).get("sha256") for path in recorded}} if recorded else None
        self.instance = {"inactive_exit": self.started, "invocation_id": invocation, "loaded": loaded}
        if loaded and hosts_file:
            loaded["hosts_block"] = describe(self.hosts)["sha256"]
        self.resolved = self.hosts_block()

    def stop(self):
        self.running, self.started, self.runs = False, None, None


class Clock:
    def __init__(self, start):
        self.time = start

    def now(self):
        self.time += TICK
        return self.time


def another_rack(fixture, number):
    """The recorded state of rack1 as rack ``number`` would record it: its trays' names and addresses, its own
    NVLink partition (each rack is one), its node lists holding its own addresses."""
    text = json.dumps(fixture)
    for old, new in (("rack1-", "rack%d-" % number), ('"rack1"', '"rack%d"' % number),
                     ("198.18.1.", "198.18.%d." % number)):
        text = text.replace(old, new)
    twin = json.loads(text)
    for read in twin["reads"].values():
        for gpu in [read] + list(read.get("gpus") or []):
            if "clique_id" in gpu:
                gpu["clique_id"] = gpu["clique_id"] - number + 1
                gpu["cluster_uuid"] = "%s-rack%d" % (gpu["cluster_uuid"], number)
        for found in (read.get("files") or {}).values():
            if found.get("content") is not None:
                found["sha256"] = _sha(found["content"])
    # A running daemon's record holds the checksums of the files it loaded: a file it loaded as recorded is the
    # renamed rack's file as it now is (the reads keep their order through the renaming).
    for recorded_read, read in zip(fixture["reads"].values(), twin["reads"].values()):
        for instance in (read.get("services_instance") or {}).values():
            loaded = (instance.get("loaded") or {}).get("files") or {}
            for path, sha in loaded.items():
                if ((recorded_read.get("files") or {}).get(path) or {}).get("sha256") == sha:
                    loaded[path] = read["files"][path]["sha256"]
    return twin


class Bed:
    """Simulated domains built from a recorded state: their trays, their locks, what happened to them. The
    recorded state is of one rack (rack1); ``racks`` > 1 adds rack2... in the same state, each its own domain,
    rolled one after the other."""

    def __init__(self, state="healthy", node_index=False, racks=1):
        fixtures = [recorded(state)] + [another_rack(recorded(state), number) for number in range(2, racks + 1)]
        bases = [recorded("healthy")] + [another_rack(recorded("healthy"), number) for number in range(2, racks + 1)]
        self.domains = {fixture["domain"]["name"]: list(fixture["domain"]["trays"]) for fixture in fixtures}
        self.domain = fixtures[0]["domain"]["name"]
        self.trays_in_order = [tray for trays in self.domains.values() for tray in trays]
        latest = max(float((read.get("services_started") or {}).get(SERVICE) or 0)
                     for base in bases for read in base["reads"].values())
        self.clock = Clock(latest + 3600)
        self.trays = {}
        for fixture, base in zip(fixtures, bases):
            domain, reads = fixture["domain"], fixture["reads"]
            for tray, address in zip(domain["trays"], domain["addresses"]):
                read = reads.get(tray) or {}
                # A tray the run could not reach registered its failure, not a read: it is as the healthy
                # state left it, behind a cut link.
                reached = bool(read) and not read.get("unreachable")
                self.trays[tray] = Tray(tray, address, read if reached else base["reads"][tray], self.clock)
                self.trays[tray].reachable = reached or not read
        # imex_node_index on every tray (its position in its domain), as imex_node_names needs.
        self.node_index = node_index
        self.model = self.build_model()
        self.locks = {}  # tray: run id holding the lock file there
        self.events = []  # (what, run id, trays) in the order they happened

    def build_model(self):
        groups = dict({"imex_domains": list(self.trays_in_order)}, **self.domains)
        hostvars = {tray: dict({"imex_address": self.trays[tray].address},
                               **({"imex_node_index": index} if self.node_index else {}))
                    for trays in self.domains.values() for index, tray in enumerate(trays)}
        return build_model(groups, hostvars, domain_groups=list(self.domains))

    def swap(self, tray, address):
        """A replacement board in the tray's slot: another address, no daemon files, its daemon stopped, no
        work; the inventory gives it the new address."""
        board = self.trays[tray]
        board.address, board.files, board.work, board.hosts = address, {}, [], HOSTS
        board.stop()
        board.resolved = board.hosts_block()
        self.model = self.build_model()

    def snapshot(self):
        return {tray: {path: found.get("sha256") for path, found in entry.files.items()}
                for tray, entry in self.trays.items()}

    def status(self, plan, name):
        """imex_status as the domain's leader reads it: READY where a daemon runs and runs the same node
        list as the leader's (else the daemons would answer !M!), the domain UP when every tray in
        service is READY."""
        domain = plan["domains"][name]
        leader = self.trays[domain["leader"]]
        node_list = plan["trays"][domain["leader"]]["read_files"][0]
        nodes, down = [], []
        for index, (tray, address) in enumerate(zip(domain["trays"], domain["addresses"])):
            entry = self.trays[tray]
            ready = (entry.running and entry.reachable and leader.running
                     and (entry.runs or {}).get(node_list) == (leader.runs or {}).get(node_list))
            nodes.append({"index": index, "address": address, "status": "READY" if ready else "UNAVAILABLE",
                          "hostname": tray, "reported": True})
            if not ready and tray not in domain["out_of_service"]:
                down.append(tray)
        # A running daemon that has not resolved the slot names since its hosts block changed still dials
        # the old addresses: READY, but its links to the moved slots stay broken.
        dialling_old = [tray for tray in domain["trays"] if self.trays[tray].running
                        and self.trays[tray].resolved != self.trays[tray].hosts_block()]
        healthy = leader.running and not down and not dialling_old
        return {"domain_state": "UP" if healthy else "DEGRADED", "local_state": "READY" if leader.running else "DOWN",
                "healthy": healthy, "nodes": nodes, "broken_pairs": [], "source": "json", "elapsed": 0.1,
                "problems": ["tray %s is not READY" % tray for tray in down]
                + ["tray %s cannot reach the moved slots (old addresses)" % tray for tray in dialling_old]}


class Refused(Exception):
    def __init__(self, stage, problems):
        super().__init__("\n".join(problems))
        self.stage, self.problems = stage, list(problems)


class Outcome:
    """What one run did and said."""

    def __init__(self, run_id):
        self.run_id = run_id
        self.stopped_at = None
        self.problems = []
        self.written = {}       # tray: [what] written for real
        self.would_write = {}   # tray: [what] the write tasks reported changed (check mode and predictions too)
        self.restarted = []     # trays
        self.planned_restart = []  # domains the restart stage decided to restart
        self.started = []       # trays
        self.reconnected = []   # trays whose running daemon was sent SIGUSR1 to reconnect
        self.planned_reconnect = []  # trays the restart stage decided to signal (under --check too)
        self.verdicts = {}
        self.reports = {}       # domain: its report, as the proof made it
        self.plans = []         # the plan after each stage

    @property
    def refused(self):
        return self.stopped_at is not None

    def decisions(self):
        """What a --check run must predict of the real one: the writes, restarts and refusal."""
        return {"stopped_at": self.stopped_at, "problems": self.problems, "writes": self.would_write,
                "restart": self.planned_restart, "reconnect": self.planned_reconnect}


def tray_options(bed, every=None, by_tray=None):
    return {tray: role_options(**dict(every or {}, **(by_tray or {}).get(tray, {}))) for tray in bed.trays_in_order}


class Run:
    """One run of site.yml against the bed, stage by stage (a generator, so that two runs can interleave)."""

    def __init__(self, bed, run_id="run-1", every=None, by_tray=None, limit=None, out_of_service=(), check=False,
                 pre_restart=None):
        self.bed, self.check = bed, check
        self.outcome = Outcome(run_id)
        options = dict(every or {})
        options["imex_trays_out_of_service"] = list(out_of_service)
        self.options = tray_options(bed, options, by_tray)
        self.play = [tray for tray in bed.trays_in_order if limit is None or tray in limit]
        # The operator's pre-restart tasks: called with the run and the wave right before the guard.
        self.pre_restart = pre_restart
        self.taken = []

    def __iter__(self):
        try:
            yield from self._stages()
        except Refused as refusal:
            self.outcome.stopped_at, self.outcome.problems = refusal.stage, refusal.problems
        finally:
            self._release()

    def run(self):
        for _stage in self:
            pass
        return self.outcome

    def _stage(self, stage, function, *args, **kwargs):
        try:
            plan = function(*args, **kwargs)
        except run_plan.PlanError as error:
            raise Refused(stage, error.problems) from None
        self.outcome.plans.append((stage, plan))
        return plan

    def _stages(self):
        bed, outcome = self.bed, self.outcome
        options = {tray: self.options[tray] for tray in self.play}
        differ = variance_problems(RUN, self.play, options)
        if differ:
            raise Refused("preflight", differ)
        plan = self._stage("preflight", run_plan.preflight.preflight, bed.model, options, self.play, outcome.run_id,
                           check_mode=self.check)
        yield "preflight"
        reads = self._read(plan, plan["trays"])
        plan = self._stage("read", run_plan.read.after_read, plan, bed.model, options, reads)
        yield "read"
        # lock.yml: the locks of the domains the run has something to do on (none: it takes no lock), then the
        # second read of their trays and the plan made again from it.
        if plan["locks"]:
            for lock in plan["locks"]:
                holder = bed.trays[lock["holder"]]
                if not holder.reachable:
                    raise Refused("lock", ["tray %s: unreachable (the lock of domain %s)" % (holder.name, lock["domain"])])
                owner = bed.locks.get(holder.name)
                if owner not in (None, outcome.run_id):
                    raise Refused("lock", ["domain %s is locked by %s on %s" % (lock["domain"], owner, holder.name)])
                if not self.check:
                    bed.locks[holder.name] = outcome.run_id
                    self.taken.append(holder.name)
            yield "lock"
        if plan["read_again"]:
            reads.update(self._read(plan, plan["read_again"]))
            plan = self._stage("reread", run_plan.reread.after_reread, plan, bed.model, options, reads)
            yield "reread"
        for wave in plan["waves"]:
            plan = yield from self._wave(plan, wave, options)

    def _read(self, plan, trays):
        """read_tray.yml on ``trays``: {tray: its read}. Under site.yml's any_errors_fatal a tray ssh does not reach
        stops the run at its read."""
        bed = self.bed
        unreachable = [tray for tray in trays if not bed.trays[tray].reachable]
        if unreachable:
            raise Refused("read", ["tray %s: unreachable" % tray for tray in unreachable])
        return {tray: bed.trays[tray].read(plan["trays"][tray],
                                           plan["domains"][plan["trays"][tray]["domain"]].get("slot_names") or [])
                for tray in trays}

    def _wave(self, plan, wave, options):
        bed, outcome = self.bed, self.outcome
        # refresh.yml: a new since on the locks of the wave's domains (none for the first wave, whose locks were
        # just taken); a lock this run no longer holds stops it before the wave writes.
        refreshed = plan["wave_locks"][plan["waves"].index(wave)]
        if refreshed and not self.check:
            for lock in refreshed:
                if bed.locks.get(lock["holder"]) != outcome.run_id:
                    raise Refused("lock", ["domain %s: this run no longer holds its lock on %s"
                                           % (lock["domain"], lock["holder"])])
            bed.events.append(("refresh", outcome.run_id, sorted({lock["domain"] for lock in refreshed}),
                               [lock["holder"] for lock in refreshed]))
        # The imex_channels role (the first wave of each of its trays' domains), before the writes.
        if not self.check:
            for name in wave:
                for tray in plan["domains"][name]["trays_in_run"]:
                    if plan["trays"][tray]["channels_role"]:
                        bed.trays[tray].ensure_channels(plan["trays"][tray]["channel_entries"])
        writes = {}
        for name in wave:
            domain = plan["domains"][name]
            for tray in domain["trays_in_run"]:
                writes[tray] = self._write(plan, domain, tray, options[tray])
        yield "write"
        statuses = {name: bed.status(plan, name) for name in wave if name in plan["host_daemon_domains"]}
        plan = self._stage("restart", run_plan.restart.restart, plan, wave, writes, statuses)
        outcome.planned_restart += [name for name in wave if plan["domains"][name].get("restart")]
        outcome.planned_reconnect += [item["tray"] for item in plan["reconnects"]]
        yield "restart"
        if self.pre_restart and plan["restarting"]:
            self.pre_restart(self, wave)
        activity = {tray: bed.trays[tray].read(plan["trays"][tray]) for name in wave
                    for tray in plan["domains"][name]["trays_in_run"] if plan["trays"][tray].get("restart")}
        plan = self._stage("guard", run_plan.guard.guard, plan, wave, activity)
        yield "guard"
        for lock in plan["locks"]:
            if lock["domain"] in plan["restarting"] and not self.check and bed.locks.get(lock["holder"]) != outcome.run_id:
                raise Refused("lock", ["domain %s: this run no longer holds its lock on %s" % (lock["domain"], lock["holder"])])
        if not self.check:
            for name in wave:
                domain = plan["domains"][name]
                restarting = [tray for tray in domain["trays_in_run"] if plan["trays"][tray].get("restart")]
                # Handlers: every daemon of the domain stops before any starts.
                for tray in restarting:
                    bed.trays[tray].stop()
                for tray in restarting:
                    bed.trays[tray].start(plan["trays"][tray]["read_files"], plan["trays"][tray]["read_hosts"])
                starting = [tray for tray in domain["trays_in_run"] if plan["trays"][tray].get("start")]
                for tray in starting:
                    bed.trays[tray].start(plan["trays"][tray]["read_files"], plan["trays"][tray]["read_hosts"])
                if restarting:
                    bed.events.append(("restart", outcome.run_id, name, restarting))
                outcome.restarted += restarting
                outcome.started += starting
            # reconnect.yml, after the starts: SIGUSR1 to a running daemon leaves it the same instance.
            signalled = [item["tray"] for item in plan["reconnects"] if bed.trays[item["tray"]].running]
            if signalled:
                bed.events.append(("reconnect", outcome.run_id, wave, signalled))
            outcome.reconnected += signalled
            hosts_files = {item["tray"]: item["hosts_file"] for item in plan["reconnects"]}
            for tray in signalled:
                bed.trays[tray].reconnect(hosts_files[tray])
        yield "restarts"
        # prove.yml: a status read of the domains to prove now; the verdicts of those judged now, from it
        # or from the status read before the restarts (a domain it proved).
        statuses.update((name, bed.status(plan, name)) for name in wave if name in plan["prove_now"])
        judging = [name for name in wave if name in plan["judge_now"]]
        if judging:
            reports = run_plan.verdicts.verdicts(plan, bed.model, judging, statuses, list(plan["trays"]),
                                                 pending={name: plan["domains"][name].get("pending") or {} for name in judging})
            plan = run_plan.verdicts.judged(plan, reports)
            outcome.verdicts.update((report["domain"], report["verdict"]) for report in reports)
            outcome.reports.update((report["domain"], report) for report in reports)
            failed = [report["message"] for report in reports if not report["ok"]]
            if failed:
                raise Refused("prove", failed)
        yield "prove"
        return plan

    def _write(self, plan, domain, tray, options):
        """write.yml on one tray: {register key: result}, as the restart stage receives them."""
        entry = plan["trays"][tray]
        results = {"node list": {"changed": False, "skipped": True}, "config": {"changed": False, "skipped": True},
                   "TLS material": {}}
        if not entry["write"]:
            return results
        target = self.bed.trays[tray]
        for_real = not (self.check or entry["predicted"])
        if entry["handover"] and for_real:
            target.stop()
            target.masked = True
        done = []
        if entry.get("write_node_list", entry["write_nodes"]):
            # imex_nodes_config: the block of slot names first, then the node list, in one run.
            node_list_for_real = not (self.check or entry.get("node_list_predicted", entry["predicted"]))
            hosts = replace_block(target.hosts, validate_entries(domain.get("hosts_entries") or []))
            hosts_changed = hosts != target.hosts
            if hosts_changed and node_list_for_real:
                target.hosts = hosts
            text = render_nodes(validate_nodes(domain["addresses"]))
            path = entry.get("nodes_config_path") or options["imex_nodes_config_path"]
            changed = (target.files.get(path) or {}).get("content") != text
            if changed and node_list_for_real:
                target.write(path, text)
            results["node list"] = {"changed": changed or hosts_changed, "nodes_changed": changed,
                                    "hosts_changed": hosts_changed, "checksum": nodes_checksum(text)}
            done += (["node list"] if changed else []) + (["hosts block"] if hosts_changed else [])
            if (changed or hosts_changed) and node_list_for_real and not for_real:
                self.outcome.written.setdefault(tray, []).extend(what for what in ("node list", "hosts block")
                                                                 if what in done)
        if entry["write_config"]:
            path = options["imex_config_path"]
            current = (target.files.get(path) or {}).get("content") or ""
            text = apply_settings(current, validate_settings(entry["settings"]))[0]
            changed = current != text
            if changed and for_real:
                target.write(path, text)
            results["config"] = {"changed": changed}
            done += ["config"] if changed else []
        if entry.get("write_tls"):
            results["TLS material"] = {"changed": False}
        if done:
            self.outcome.would_write[tray] = done
            if for_real:
                self.outcome.written[tray] = done
                self.bed.events.append(("write", self.outcome.run_id, tray, done))
        return results

    def _release(self):
        for tray in self.taken:
            if self.bed.locks.get(tray) == self.outcome.run_id:
                del self.bed.locks[tray]
        self.taken = []


def run(bed, **kwargs):
    return Run(bed, **kwargs).run()
