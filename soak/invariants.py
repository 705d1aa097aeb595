"""The soak's invariants: small pure functions over what a step left (tray probes, the
simulator's records, each run's task events and output). Each returns (verdict, detail):
True, False, or None when it could not be checked honestly (the detail says why)."""
from __future__ import annotations

import re

CONFIG = "/etc/nvidia-imex/config.cfg"
NODES = "/etc/nvidia-imex/nodes_config.cfg"
TLS_DIR = "/etc/nvidia-imex/tls"
LOCK = "/run/rackscale-imex/run.lock"
MODPROBE = "/etc/modprobe.d/nvidia-imex.conf"
CHANNEL_DIR = "/dev/nvidia-caps-imex-channels"
CONFIG_LINE = re.compile(r"^[A-Z][A-Z0-9_]*=[^\n#]*$")
NODE_ENTRY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]*$")
TEMP_NAME = re.compile(r"(^\..+\.(tmp|new)$)|ansible_tmp")
# The restart: the handlers the restart task notifies, flushed together.
RESTART_TASKS = ("Stop IMEX daemon", "Start IMEX daemon")
LOCK_TASK = "Take the lock of every domain the run has something to do on, one domain at a time in a fixed order"
# The busy guard's read of what runs on a restarting domain's trays, right before their daemons stop.
GUARD_READ_TASK = "Read what runs on the trays of a restarting domain right before their daemons stop"
LOCK_CHECK_TASK = "Check that this run still holds the lock of every domain it restarts"
# Seconds around a fault's own simrack command within which a daemon stop or start on its tray is
# the fault's doing (systemd restarts a killed daemon after 1 s).
FAULT_SLACK_S = 5.0
PEM_PRIVATE = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")


def _unread(probes):
    return sorted(tray for tray, probe in probes.items() if not probe)


def unread_verdict(probes, excused, problems, checked):
    """The verdict of an invariant over the trays read: a tray that could not be read is not
    checked; one that no fault of the step explains (``excused``: the trays of the step's own
    faults) fails, as a failure of the soak itself (its reads must work, whatever the network
    does). ``checked``: whether anything was left to check."""
    unread = _unread(probes)
    unexplained = [tray for tray in unread if tray not in excused]
    if unexplained:
        return False, "; ".join(problems + ["the soak could not read %s, which no fault of this step touches: "
                                            "a failure of the soak itself" % ", ".join(unexplained)])
    if not checked:
        return None, "not checked: %s could not be read (the step's own faults)" % ", ".join(unread)
    return not problems, "; ".join(problems) or ("ok" + (" (not read, the step's own faults: %s)" % ", ".join(unread)
                                                         if unread else ""))


# 1 ------------------------------------------------------------------------------------------
def files_whole(probes, excused=()):
    """Every managed file parses, no temporary file is left, owners and modes as designed. A tray
    that could not be read is not checked; one no fault of the step explains fails (unread_verdict)."""
    problems = []
    for tray, probe in sorted(probes.items()):
        if not probe:
            continue
        files = probe.get("files", {})
        for path, info in sorted(files.items()):
            if info.get("uid") != 0:
                problems.append("%s: %s owned by uid %s" % (tray, path, info.get("uid")))
            want = {CONFIG: "0644", NODES: "0644", TLS_DIR: "0700"}.get(path)
            if path.startswith(TLS_DIR + "/") and path.endswith(".key"):
                want = "0600"
            if want and info.get("mode") != want:
                problems.append("%s: %s mode %s, designed %s" % (tray, path, info.get("mode"), want))
        text = files.get(CONFIG, {}).get("text")
        if text is not None:
            bad = [line for line in text.splitlines() if line.strip() and not line.startswith("#")
                   and not CONFIG_LINE.match(line)]
            if bad or (text and not text.endswith("\n")):
                problems.append("%s: %s does not parse (%r)" % (tray, CONFIG, (bad or [text[-40:]])[0]))
        text = files.get(NODES, {}).get("text")
        if text is not None:
            bad = [line for line in text.splitlines() if line.strip() and not line.startswith("#")
                   and not NODE_ENTRY.match(line.strip())]
            if bad or not text.strip() or not text.endswith("\n"):
                problems.append("%s: %s does not parse (%r)" % (tray, NODES, (bad or [text[-40:]])[0]))
        for leftover in probe.get("leftovers", []):
            problems.append("%s: temporary file left: %s" % (tray, leftover))
    return unread_verdict(probes, excused, problems, checked=len(_unread(probes)) < len(probes))


# 2 ------------------------------------------------------------------------------------------
def node_lists(probes, topology, addresses, edited_trays=(), excused=()):
    """Every tray of a domain holds a byte-identical node list, listing no other domain's tray.
    Trays whose list the nodelist-edit fault changed behind Ansible's back are left out; a tray that
    could not be read is not checked, and one no fault of the step explains fails (unread_verdict)."""
    problems = []
    compared = 0
    for domain, trays in sorted(topology.items()):
        lists = {}
        for tray in trays:
            probe = probes.get(tray)
            if not probe or tray in edited_trays:
                continue
            text = probe.get("files", {}).get(NODES, {}).get("text")
            lists[tray] = text
        compared += len(lists)
        distinct = {text for text in lists.values()}
        if len(distinct) > 1:
            problems.append("domain %s: node lists differ (%s)" % (domain, ", ".join(
                "%s: %s" % (tray, "none" if text is None else " ".join(text.split())) for tray, text in sorted(lists.items()))))
        foreign = {addresses[t] for d, ts in topology.items() if d != domain for t in ts}
        foreign |= {t for d, ts in topology.items() if d != domain for t in ts}
        for tray, text in sorted(lists.items()):
            listed = set((text or "").split())
            if listed & foreign:
                problems.append("domain %s: %s lists another domain's trays: %s" % (domain, tray, sorted(listed & foreign)))
    return unread_verdict({t: probes.get(t) for ts in topology.values() for t in ts}, excused, problems, checked=compared > 0)


def other_rack_untouched(before, after, trays_of_rack):
    """A step whose faults hit one rack leaves another rack's files and daemon starts alone."""
    problems = []
    for tray in trays_of_rack:
        b, a = before.get(tray), after.get(tray)
        if not b or not a:
            return None, "%s could not be read before and after the step" % tray
        for path in sorted(set(b.get("files", {})) | set(a.get("files", {}))):
            if b["files"].get(path, {}).get("sha256") != a["files"].get(path, {}).get("sha256"):
                problems.append("%s: %s changed" % (tray, path))
        starts = lambda probe: [e for e in probe.get("events", []) if e.get("event") == "start"]
        if starts(b) != starts(a):
            problems.append("%s: daemon started again (%s)" % (tray, [e["pid"] for e in starts(a)[len(starts(b)):]]))
    return not problems, "; ".join(problems) or "ok"


# 3 ------------------------------------------------------------------------------------------
def own_doing(tray, when, fault_windows):
    """True when a daemon event or a boot at `when` on `tray` falls within one of the soak's own
    fault commands on that tray (inject or heal)."""
    return any(tray in window["trays"] and window["start"] - 1 <= when <= window["end"] + FAULT_SLACK_S
               for window in fault_windows)


def busy_guard(events_by_tray, boots_by_tray, topology, busy_intervals, fault_windows, step_start, allowed=False,
               guard_reads=()):
    """No daemon stopped and no tray rebooted on a domain that was busy when the run's guard looked
    (the last guard read before that stop, ``guard_reads``: their start times) or later, before
    the stop; a stop no guard read preceded, on a domain busy at any moment of the step before it.
    Unless the run allowed it. events_by_tray: the simulator's records of the step; boots_by_tray:
    boot times seen during the step; busy_intervals: [(tray, start, end|None)]. A busy tray healed
    before the guard looked is no reason to refuse (a full heal, then its run's restart)."""
    if allowed:
        return True, "the runs allowed busy restarts"
    problems = []
    for domain, trays in sorted(topology.items()):
        busy = [(t, s, e) for t, s, e in busy_intervals if t in trays and (e is None or e >= step_start)]
        if not busy:
            continue
        for tray in trays:
            stops = [(e["time"], "daemon stop (PID %s)" % e["pid"]) for e in events_by_tray.get(tray, [])
                     if e.get("event") == "stop"]
            stops += [(when, "reboot") for when in boots_by_tray.get(tray, [])]
            for when, what in stops:
                if own_doing(tray, when, fault_windows):
                    continue
                looked = max([read for read in guard_reads if read <= when], default=step_start)
                cause = [t for t, s, e in busy if s <= when and (e is None or e >= looked)]
                if cause:
                    problems.append("%s on %s at %.1f while domain %s was busy (%s)" % (
                        what, tray, when, domain, ", ".join(sorted(set(cause)))))
    return not problems, "; ".join(problems) or "ok"


# 4 ------------------------------------------------------------------------------------------
def restart_intervals(run_events, domain_of):
    """{domain: (start, end)} of one run's restart (its stop and start handlers), from its task
    events: from the start of the first handler to its last result on a tray of the domain."""
    intervals = {}
    start = None
    for event in run_events:
        if event.get("type") == "task_start":
            if event.get("task") in RESTART_TASKS:
                start = event["time"] if start is None else start
            else:
                start = None
            continue
        if event.get("task") not in RESTART_TASKS or start is None or event.get("type") not in ("ok", "failed"):
            continue
        domain = domain_of.get(event.get("host"))
        if domain is None:
            continue
        low, high = intervals.get(domain, (start, event["time"]))
        intervals[domain] = (min(low, start), max(high, event["time"]))
    return intervals


def locked_domains(run_events, domain_of):
    """Domains whose lock this run took (the lock task's item for it succeeded)."""
    taken = set()
    for event in run_events:
        if event.get("task") != LOCK_TASK or event.get("type") not in ("ok", "failed"):
            continue
        for item in event.get("items") or []:
            if item.get("failed") or item.get("skipped") or "locked by" in item.get("msg", "") or "refusing" in item.get("msg", ""):
                continue
            domain = item.get("item")
            if isinstance(domain, dict):
                domain = domain.get("domain") or domain.get("name")
            if isinstance(domain, str):
                taken.add(domain)
            elif item.get("delegated") in domain_of:
                taken.add(domain_of[item["delegated"]])
    return taken


def lock_lost_before_restart(run_events, domain_of):
    """Domains where the run's check of its lock failed yet the run restarted them. The check runs
    once (run_once) over the restarting domains, each item delegated to that domain's lock tray:
    the domain is the item's (or its delegated tray's), never the host the task ran for."""
    lost = set()
    for event in run_events:
        if event.get("task") != LOCK_CHECK_TASK or event.get("type") != "failed":
            continue
        items = event.get("items")
        if not items:
            lost.add(domain_of.get(event.get("host")))
            continue
        for item in items:
            if not item.get("failed"):
                continue
            domain = item.get("item")
            if isinstance(domain, dict):
                domain = domain.get("domain") or domain.get("name")
            lost.add(domain if isinstance(domain, str) else domain_of.get(item.get("delegated")))
    return lost & set(restart_intervals(run_events, domain_of))


def no_overlapping_restarts(runs, domain_of):
    """The stop/start intervals of one domain never overlap between two runs, and no run restarts a
    domain whose lock it did not take or lost."""
    problems = []
    spans = []
    for run in runs:
        intervals = restart_intervals(run["events"], domain_of)
        locked = locked_domains(run["events"], domain_of)
        for domain, span in intervals.items():
            if domain not in locked:
                problems.append("%s restarted %s without holding its lock" % (run["name"], domain))
            spans.append((domain, span, run["name"]))
        for domain in lock_lost_before_restart(run["events"], domain_of):
            problems.append("%s restarted %s after losing its lock" % (run["name"], domain))
    for i, (domain, (s1, e1), name1) in enumerate(spans):
        for domain2, (s2, e2), name2 in spans[i + 1:]:
            if domain == domain2 and name1 != name2 and s1 < e2 and s2 < e1:
                problems.append("%s and %s restarted %s at once (%.1f-%.1f, %.1f-%.1f)" % (name1, name2, domain, s1, e1, s2, e2))
    return not problems, "; ".join(problems) or "ok"


# 5 ------------------------------------------------------------------------------------------
RELEASE_TASK = "Release the domain locks this run took"


def unreleased(run_events):
    """{(domain, tray)} whose lock this run tried to release while ssh did not reach the tray: the
    lock stays there (nothing else can remove it) until it goes stale."""
    left = set()
    for event in run_events:
        if event.get("task") != RELEASE_TASK:
            continue
        for item in event.get("items") or []:
            taken = item.get("item") if isinstance(item.get("item"), dict) else {}
            where = taken.get("item") if isinstance(taken.get("item"), dict) else {}
            if item.get("unreachable") and where.get("domain") and where.get("holder"):
                left.add((where["domain"], where["holder"]))
    return left


def locks_after(lock_records, runs, killed_holders, read_on=None):
    """lock_records: {domain: owner or None (no lock) or "?" (unread)} after the step, read on the
    tray read_on[domain]; runs: this step's runs with their lock owner id, whether they were killed
    and their events; killed_holders: {domain: owner} of killed runs whose lock may still stand. No
    lock of a finished run is left, unless its release could not reach that tray; a killed run's
    lock names it."""
    problems, excused = [], []
    finished = {run["owner"] for run in runs if run.get("owner") and not run.get("killed")}
    unreachable_at_release = {(domain, tray, run["owner"]) for run in runs if run.get("owner") and not run.get("killed")
                              for domain, tray in unreleased(run.get("events") or [])}
    unread = [d for d, owner in lock_records.items() if owner == "?"]
    for domain, owner in sorted(lock_records.items()):
        if owner in (None, "?"):
            continue
        if owner in finished and (domain, (read_on or {}).get(domain), owner) in unreachable_at_release:
            excused.append("%s's lock stays on %s, which its release did not reach" % (domain, read_on[domain]))
        elif owner in finished:
            problems.append("domain %s: lock left by %s, a run that finished" % (domain, owner))
        elif domain in killed_holders and owner != killed_holders[domain]:
            problems.append("domain %s: lock names %s, not the killed run %s" % (domain, owner, killed_holders[domain]))
    if unread and len(unread) == len(lock_records):
        return None, "no domain's lock could be read"
    notes = (" (unread: %s)" % unread if unread else "") + ("; " + "; ".join(excused) if excused else "")
    return not problems, "; ".join(problems) or "ok" + notes


def lock_examined(run_events, domain=None):
    """(first, last): the span within which the run's lock stage looked at `domain`'s lock: the
    moment its new lock was written when its item took one (``taken_at``, the lock's own since),
    else from the start of the lock task to its result; None when the run never reached it, or took
    no lock of `domain` (a run takes the locks of the domains it has something to do on only: its
    items name the others)."""
    items_seen, named = False, False
    for event in run_events:
        if event.get("task") != LOCK_TASK or event.get("type") == "task_start":
            continue
        for item in event.get("items") or []:
            items_seen = True
            name = item.get("item")
            name = name.get("domain") if isinstance(name, dict) else name
            named = named or name == domain
            if name == domain and item.get("taken_at") is not None:
                return item["taken_at"], item["taken_at"]
    if items_seen and not named:
        return None
    first = next((e["time"] for e in run_events if e.get("task") == LOCK_TASK and e.get("type") == "task_start"), None)
    last = next((e["time"] for e in run_events if e.get("task") == LOCK_TASK and e.get("type") != "task_start"), None)
    if first is None:
        return None
    return first, last if last is not None else first


def refused_while_locked(run, domain, stale_at, examined):
    """A run whose lock stage looked at `domain` while a killed run's lock was younger than its
    staleness must refuse with "locked by". ``examined``: (first, last) of its lock stage
    (lock_examined), not the run's start: a run that started before the lock went stale may
    reach its lock stage after, and then takes it over rightly. None: it never reached the stage."""
    if examined is None:
        return True, "never reached its lock stage"
    first, last = examined
    if run["rc"] != 0 and "locked by" in run["output"]:
        return True, "refused: locked by"
    if last >= stale_at:
        return True, "lock stale by the end of its lock stage (%.1f s after)" % (last - stale_at)
    return False, "%s examined the lock of %s %.0f s before the killed run's lock went stale, rc %d, no 'locked by'" % (
        run["name"], domain, stale_at - last, run["rc"])


def two_holders(runs, domain_of):
    """Two runs that ran at the same time never both took the lock of one domain."""
    both = []
    for i, first in enumerate(runs):
        for second in runs[i + 1:]:
            if not (first["start"] < second["end"] and second["start"] < first["end"]):
                continue
            shared = locked_domains(first["events"], domain_of) & locked_domains(second["events"], domain_of)
            both += ["%s held by %s and %s" % (d, first["name"], second["name"]) for d in sorted(shared)]
    return not both, "; ".join(both) or "ok"


# 6 ------------------------------------------------------------------------------------------
def failure_text(run_events):
    texts = []
    for event in run_events:
        if event.get("type") in ("failed", "unreachable"):
            texts.append(event.get("msg", ""))
            texts.extend(item.get("msg", "") for item in event.get("items") or [])
            texts.append(event.get("host", "") if event.get("type") == "unreachable" else "")
    return "\n".join(texts)


def healthy_rack(domains, converged, topology, touched):
    """Whether a run on ``domains`` met a healthy rack: each domain's last site.yml passed UP
    with no kill since (``converged``), and no tray of it is ``touched`` (a fault active during
    the step, or injected or healed in it)."""
    return all(d in converged and not set(topology[d]) & set(touched) for d in domains)


def fails_the_run(fault, health, domains, topology):
    """Whether a fault lasting through a run on ``domains`` must make it fail (rc_truth): a fault of
    ``health`` on one of their trays; a hung nvidia-imex-ctl only on a domain's first tray, the one tray
    where a run calls it (it reads each domain's status there): elsewhere it hangs a command no run calls,
    and the domain stays healthy."""
    trays = set(fault["trays"])
    if fault["kind"] not in health or not any(trays & set(topology[d]) for d in domains) or said_not_failed(fault):
        return False
    return fault["kind"] != "ctl-hang" or any(topology[d][0] in trays for d in domains)


def said_not_failed(fault):
    """A fabric Health Summary of Unhealthy on registered GPUs: IMEX still runs there, so a run goes on, and
    says it naming the tray."""
    return fault["kind"] == "fabric" and "health=Unhealthy" in fault.get("extra", [])


def rc_truth(run, ctl_states, health_faults, addresses, healthy=False, stoppers=(), said=()):
    """rc 0 only when nvidia-imex-ctl -N shows every domain of the run UP; a health fault active for
    the whole run gives rc != 0 with a failure naming its tray or pair; and on a healthy rack
    (``healthy``: no fault on the run's domains, active, injected or healed in the step, nothing
    left half done by a killed run) rc 0. ctl_states: {domain: state or None (unread)};
    health_faults: [{kind, trays}] active from before to after the run; stoppers: the step's other
    faults (a tray rebooted or cut off during the run, say), which can stop the run before it reaches
    a health fault. said: faults a run that passes must name in its output (said_not_failed)."""
    problems = []
    if healthy and run["rc"] != 0:
        return False, "%s rc %d on a healthy rack: %s" % (
            run["name"], run["rc"], (failure_text(run["events"]).strip() or run.get("output", "").strip())[-400:])
    if run["rc"] == 0:
        unread = [d for d in run["domains"] if ctl_states.get(d) is None]
        if unread and len(unread) == len(run["domains"]):
            return None, "rc 0 but no domain's status could be read"
        down = ["%s %s" % (d, ctl_states[d]) for d in run["domains"] if ctl_states.get(d) not in (None, "UP")]
        if down:
            problems.append("%s rc 0 but %s" % (run["name"], ", ".join(down)))
        for fault in said:
            if not any("tray %s: " % tray in run.get("output", "") for tray in fault["trays"]):
                problems.append("%s rc 0 without saying %s on %s" % (run["name"], fault["kind"], " ".join(fault["trays"])))
    text = failure_text(run["events"])

    def named(fault):
        names = set(fault["trays"]) | {addresses[t] for t in fault["trays"]}
        return any(re.search(r"(?<![\w.])%s(?![\w])" % re.escape(name), text) for name in names)
    masked = []
    for fault in health_faults:
        if run["rc"] == 0:
            problems.append("%s rc 0 under %s on %s" % (run["name"], fault["kind"], " ".join(fault["trays"])))
        elif not named(fault):
            # A run that stops at a gate for the whole run (the fabric and version gate), or at its read
            # on a tray another fault of the step took away, names the fault that stopped it; another
            # fault behind it is not reached: said, not failed.
            others = [f for f in list(health_faults) + list(stoppers) if f is not fault and named(f)]
            if others:
                masked.append("%s on %s not reached (the run stopped at %s on %s)" % (
                    fault["kind"], " ".join(fault["trays"]), others[0]["kind"], " ".join(others[0]["trays"])))
            else:
                problems.append("%s failed without naming %s (%s)" % (
                    run["name"], " or ".join(sorted(set(fault["trays"]) | {addresses[t] for t in fault["trays"]})), fault["kind"]))
    return not problems, "; ".join(problems + masked) or "ok"


# 7 ------------------------------------------------------------------------------------------
def heal_converges(runs_to_up, last_changed, last_rc):
    """After every fault is healed, at most two runs reach UP, and one more run passes (rc 0) and
    changes nothing. runs_to_up: the number of runs until rc 0 and every domain UP (None: not
    within two); last_changed: (host, task) pairs the next run changed; last_rc: its rc."""
    if runs_to_up is None:
        return False, "not UP after two runs"
    if last_rc != 0:
        return False, "UP after %d run(s), but the run after UP failed (rc %d)" % (runs_to_up, last_rc)
    if last_changed:
        return False, "the run after UP changed %s" % sorted(last_changed)[:6]
    return True, "UP after %d run(s), the next passed and changed nothing" % runs_to_up


# 8 ------------------------------------------------------------------------------------------
def changed_pairs(run_events):
    """(host, task) of every changed result (each changed loop item on its delegated host)."""
    found = set()
    for event in run_events:
        # The trays' changes: the reports written on the controller are not a prediction's business.
        if event.get("type") != "ok" or event.get("host") == "localhost" or str(event.get("action", "")).endswith("imex_report"):
            continue
        if event.get("items"):
            for item in event["items"]:
                if item.get("changed"):
                    found.add((item.get("delegated") or event["host"], event["task"]))
        elif event.get("changed"):
            found.add((event["host"], event["task"]))
    return found


def state_digest(probe):
    """What a run that changes nothing leaves as it was: the managed files' hashes, modes and owners
    (daemon config, node list, TLS, the modprobe options of the channels), the channel device nodes,
    daemon starts, boots."""
    if not probe:
        return {}
    return {"files": {p: (f.get("sha256"), f.get("mode"), f.get("uid")) for p, f in probe.get("files", {}).items()},
            "devices": probe.get("devices", {}),
            "starts": [e["pid"] for e in probe.get("events", []) if e.get("event") == "start"],
            "boot": probe.get("boot")}


def digest_changes(before, after):
    """What differs between two digests, said briefly."""
    changes = []
    for key in ("files", "devices"):
        for path in sorted(set(before[key]) | set(after[key])):
            if before[key].get(path) != after[key].get(path):
                changes.append("%s %s" % (path, "appeared" if path not in before[key] else
                                          "went away" if path not in after[key] else "changed"))
    if before["starts"] != after["starts"]:
        changes.append("daemon started (PID %s)" % ", ".join(str(p) for p in after["starts"] if p not in before["starts"]))
    if before["boot"] != after["boot"]:
        changes.append("rebooted")
    return changes


def unsettled(faults, probes, now):
    """The step's faults injected before its run whose effect is still under way in ``probes``: a
    plain daemon-kill whose daemon systemd has not started again (Restart=on-failure, 1 s), a
    reboot whose tray is not read back with its daemon started. A baseline read before they
    settle would blame the run for what systemd does next."""
    waiting = []
    for fault in faults:
        if not fault.get("injected") or fault["kind"] not in ("daemon-kill", "reboot"):
            continue
        for tray in fault["trays"]:
            probe = probes.get(tray)
            starts = [e["time"] for e in (probe or {}).get("events", []) if e.get("event") == "start"]
            since = fault["at"] if fault["kind"] == "daemon-kill" else max(fault["at"], (probe or {}).get("boot") or 0)
            if not probe or not any(when > since for when in starts):
                waiting.append("%s %s (%.0f s ago)" % (fault["kind"], tray, now - fault["at"]))
    return waiting


def check_predicts(check_events, real_events, before, between):
    """--check predicts exactly the real run's changes and changes nothing itself."""
    problems = []
    predicted, made = changed_pairs(check_events), changed_pairs(real_events)
    if predicted != made:
        problems.append("predicted but not made: %s; made but not predicted: %s" % (
            sorted(predicted - made)[:6], sorted(made - predicted)[:6]))
    for tray in sorted(before):
        b, a = state_digest(before.get(tray)), state_digest(between.get(tray))
        if not b or not a:
            return None, "%s could not be read around the check run" % tray
        if b != a:
            problems.append("the check run changed %s (%s)" % (tray, ", ".join(digest_changes(b, a))))
    return not problems, "; ".join(problems) or "ok (%d changes predicted)" % len(predicted)


# 9 ------------------------------------------------------------------------------------------
def no_key_leak(texts, key_lines):
    """No private key line in any output, report or artifact. texts: {name: text}; key_lines: the
    body lines of every private key in play."""
    problems = []
    bodies = [line for line in key_lines if len(line) >= 20]
    for name, text in sorted(texts.items()):
        if PEM_PRIVATE.search(text):
            problems.append("%s holds a PEM private key header" % name)
        for line in bodies:
            if line in text:
                problems.append("%s holds a private key line" % name)
                break
    return not problems, "; ".join(problems) or "ok (%d texts, %d key lines)" % (len(texts), len(bodies))


# 10 -----------------------------------------------------------------------------------------
def run_bound_s(domains, validate_timeout_s, ctl_timeout_s, ssh_timeout_s=60, base_s=180):
    """The longest a run may take under its configured timeouts: a fixed base (start-up, reads,
    writes, the channel module) plus, per domain (rolling, one after the other), the proof's wait
    and two bounded ctl calls, plus one ssh keepalive bound for a tray that goes silent."""
    return base_s + ssh_timeout_s + domains * (validate_timeout_s + 2 * ctl_timeout_s + 30)


def run_bounds(runs):
    """Every run ends within its bound; one the watchdog had to kill (60 s past it) fails."""
    over = ["%s took %.0f s > %d s" % (r["name"], r["seconds"], r["bound_s"]) for r in runs
            if not r.get("killed") and r["seconds"] > r["bound_s"]]
    over += ["%s killed by the watchdog after %.0f s (bound %d s)" % (r["name"], r["seconds"], r["bound_s"])
             for r in runs if r.get("killed") == "watchdog"]
    return not over, "; ".join(over) or "ok"
