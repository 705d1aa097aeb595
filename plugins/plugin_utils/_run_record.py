# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""What a run that stopped before its proof leaves on record: the stage it stopped at, the domains and
trays concerned, why, and a report for every domain of the run that it did not judge.

Pure functions of what the role's tasks registered (the failed task and its result, the registered
results of the reads and locks, the plan); the imex_plan action gathers them (stage ``stopped``, whose
module is plan/stopped.py) and the imex_report action writes the records. The run's stages and the
registers of each come from the stage table (plan/stages.py).
"""
from __future__ import annotations

import re
import time
from collections.abc import Mapping

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import stages as stage_table

# A domain the run did not judge: not proven by this run, whatever an earlier run said.
NOT_PROVEN = "not_proven"

# The stages a run stops at, in the order a run goes through them (the public stopped_at values).
STAGES = stage_table.RUN_STAGE_NAMES
# The plan's own stages: a refusal says where the run stopped.
PLAN_STAGES = stage_table.STOPPED_AT
# Where a run can stop after each stage of its plan (the plan records the last it reached).
AFTER = stage_table.AFTER
# The role's registered results: the stage of a task that registers each, and of the trays its
# results name as failed or unreachable (a tray dropped by ssh leaves only these behind).
REGISTER_STAGES = stage_table.REGISTER_STAGES
# The release of the run's locks (the end of the run, or its rescue): a holder it did not reach keeps the lock.
LOCK_RELEASE = stage_table.LOCK_RELEASE
ACTION_STAGES = {"rackscale.imex.imex_lock": "lock", "rackscale.imex.imex_tray_info": "read",
                 "rackscale.imex.imex_channel": "channels", "ansible.builtin.reboot": "channels",
                 "rackscale.imex.imex_nodes_config": "write", "rackscale.imex.imex_config": "write",
                 "rackscale.imex.imex_status": "proof", "rackscale.imex.imex_slurm_probe": "proof",
                 "rackscale.imex.imex_daemon_log": "proof", "ansible.builtin.assert": "proof",
                 "ansible.builtin.set_fact": "preflight"}
# Actions that write on a tray; in a handler they restart it instead.
WRITE_ACTIONS = ("ansible.builtin.copy", "ansible.builtin.file", "ansible.builtin.template",
                 "ansible.builtin.systemd_service", "ansible.builtin.systemd")
# Stages that refuse the run as a whole, before any tray is contacted.
RUN_REFUSALS = ("arguments", "preflight")
# Trays a message names, at most (the records list them all).
TRAYS_NAMED = 6
# Bounds of what a record keeps: a reason's length, and how many reasons.
REASON_CHARS = 2000
MAX_REASONS = 40
NO_LOG_REASON = "the task's output is hidden (no_log)"
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL)


def _short(action):
    """The FQCN of an action given by its short name (``imex_lock``, ``assert``)."""
    action = str(action or "")
    if "." in action:
        return action
    prefix = "rackscale.imex." if action.startswith("imex_") else "ansible.builtin."
    return prefix + action


def stage_of(task, result=None, reached=None):
    """The stage of the run a failed task belongs to (``ansible_failed_task``, ``ansible_failed_result``).

    A refusal of the plan says where it stopped the run. Another task stopped the run where the plan's recorded
    stage (``reached``, the last stage of the plan the run reached) puts it: of the stages a run can stop at
    after that one, the task's own (its register, action or tags), else the first.
    """
    task = task if isinstance(task, Mapping) else {}
    action = _short(task.get("action"))
    args = task.get("args") if isinstance(task.get("args"), Mapping) else {}
    if action == "rackscale.imex.imex_plan":
        recorded = result.get("stopped_at") if isinstance(result, Mapping) else None
        return recorded if recorded in STAGES else PLAN_STAGES.get(str(args.get("stage")), "run")
    found = _task_stage(task, action)
    after = AFTER.get(reached)
    if not after:
        return found
    return found if found in after else after[0]


def _task_stage(task, action):
    """The stage a task that is not the plan's belongs to, by its register, action or tags."""
    if task.get("register") in REGISTER_STAGES:
        return REGISTER_STAGES[task["register"]]
    tags = task.get("tags") or []
    if "imex_channels" in tags:
        return "channels"
    if action in ACTION_STAGES:
        return ACTION_STAGES[action]
    # Handlers (they have "listen") stop and start the daemons; the operator's tasks around a
    # restart run with the wave's tasks.
    if "listen" in task:
        return "restart"
    if "imex_daemon" in tags:
        return "write" if action in WRITE_ACTIONS else "restart"
    return "run"


def redacted(text):
    """``text`` without any private key block, bounded."""
    text = _PRIVATE_KEY.sub("[private key removed]", str(text))
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + " [...]"


def _label(result):
    label = result.get("_ansible_item_label", result.get("item"))
    if isinstance(label, Mapping):
        label = label.get("domain") or label.get("holder") or label.get("name") or ""
    return str(label) if label not in (None, "") else ""


def reasons_of(result):
    """Why a task failed or did not reach its tray: the plan's problems, else its message, and the message
    of each item of a loop that failed or did not reach its tray; never a private key."""
    if not isinstance(result, Mapping):
        return []
    if result.get("censored") or result.get("_ansible_no_log"):
        return [NO_LOG_REASON]
    # A problem its message shows as a list item ("- tray a2: ...") is recorded without that bullet: the
    # summary and the reports put their own.
    reasons = [re.sub(r"^- ", "", str(problem)) for problem in result.get("problems") or []
               if isinstance(result.get("problems"), list)] if result.get("failed") else []
    items = [item for item in result.get("results") or [] if isinstance(item, Mapping)
             and (item.get("failed") or item.get("unreachable"))]
    if not reasons and not items and result.get("msg"):
        reasons.append(str(result["msg"]))
    for item in items:
        if item.get("censored") or item.get("_ansible_no_log"):
            reasons.append(NO_LOG_REASON)
            continue
        label = _label(item)
        message = str(item.get("msg") or ("unreachable" if item.get("unreachable") else "failed"))
        reasons.append("%s: %s" % (label, message) if label else message)
    return [redacted(reason) for reason in reasons]


def hosts_of(result, host=None, run_once=False):
    """The trays a failed or unreachable result is about: the delegated trays of its failed items, else
    the tray it ran on (not that of a run_once task, which ran for the whole play)."""
    if not isinstance(result, Mapping):
        return []
    found = []
    for item in result.get("results") or []:
        if isinstance(item, Mapping) and (item.get("failed") or item.get("unreachable")):
            delegated = (item.get("_ansible_delegated_vars") or {}).get("ansible_delegated_host")
            holder = item.get("item").get("holder") if isinstance(item.get("item"), Mapping) else None
            found.append(delegated or holder or (None if run_once else host))
    if not found and not run_once:
        found.append(host)
    return [str(tray) for tray in found if tray]


def _named(text, names):
    """The names of ``names`` that ``text`` mentions as whole names (rack1 is not in rack1-tray01)."""
    return [name for name in names
            if re.search(r"(?<![\w.-])%s(?![\w-]|\.\w)" % re.escape(name), text)]


# How the plan's refusal of a run that reached none of its trays begins.
NONE_REACHED = "ssh reached none of the trays of the run"


def _unreachable(result):
    return isinstance(result, Mapping) and bool(result.get("unreachable"))


def none_reached(reads):
    """The problems of a run whose read reached none of its trays (``reads``: {tray: its registered
    read}), else []. Such a run stops right after the read, while its trays are still in the play:
    trays that ssh does not reach leave the play, and with none left, nothing would record the stop."""
    if not reads or not all(_unreachable(read) for read in reads.values()):
        return []
    return ([NONE_REACHED + "; nothing was read or changed:"]
            + ["tray %s: %s" % (tray, redacted(read.get("msg") or "unreachable")) for tray, read in reads.items()])


def _utc(epoch):
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def locks_left(release, stale_after_s=None, now=None):
    """The locks a release left: [{domain, holder, why, stale_after_s, stale_by}], one per lock whose release
    did not reach its holder tray or failed there. release: {tray: the registered result of the release loop}
    (run_once: the same on every tray), whose items are the lock takes' results. stale_after_s: the run's
    imex_lock_stale_after_s, where the lock record holds none; now: epoch seconds of the release (stale_by, the
    time by which the lock goes stale at the latest, is None without it, or when the lock never goes stale)."""
    left, seen = [], set()
    for result in (release or {}).values():
        if not isinstance(result, Mapping):
            continue
        for item in result.get("results") or []:
            if not isinstance(item, Mapping) or not (item.get("unreachable") or item.get("failed")):
                continue
            taken = item.get("item") if isinstance(item.get("item"), Mapping) else {}
            lock = taken.get("item") if isinstance(taken.get("item"), Mapping) else {}
            record = taken.get("lock") if isinstance(taken.get("lock"), Mapping) else {}
            domain, holder = str(lock.get("domain") or ""), str(lock.get("holder") or "")
            if (domain, holder) in seen:
                continue
            seen.add((domain, holder))
            stale = record.get("stale_after", stale_after_s)
            stale = int(stale) if isinstance(stale, (int, float)) and not isinstance(stale, bool) else None
            left.append({
                "domain": domain,
                "holder": holder,
                "why": redacted(item.get("msg") or ("unreachable" if item.get("unreachable") else "failed")),
                "stale_after_s": stale,
                # Taken or refreshed by this run at the latest now: stale by now + stale_after at the latest.
                "stale_by": _utc(now + stale) if stale and now is not None else None,
            })
    return left


def lock_left_reason(lock):
    """What a lock left means for the next run, in one sentence naming domain, tray and when it goes stale."""
    if lock["stale_after_s"] == 0:
        when = "it never goes stale (imex_lock_stale_after_s=0): remove it by hand once the tray is back"
    elif lock["stale_after_s"] is None:
        when = "until it goes stale (imex_lock_stale_after_s)"
    else:
        when = "until it goes stale, %d s (imex_lock_stale_after_s) after this run last took or refreshed it%s" % (
            lock["stale_after_s"], ": by %s at the latest" % lock["stale_by"] if lock["stale_by"] else "")
    return ("domain %s: its run lock was left on tray %s, which the release did not reach (%s); another run of "
            "the domain is refused %s" % (lock["domain"], lock["holder"], lock["why"], when))


def stopped_record(failures, registered, domains, judged=(), check_mode=False, reached=None, lock_stale_after_s=None,
                   now=None):
    """What a run that stopped leaves on record.

    failures: [(tray, ansible_failed_task, ansible_failed_result)] of the trays that went to the rescue
    with a failed task (a run_once task fails on the tray that ran it). registered: {register name:
    {tray: its result}} of the role's registered results (REGISTER_STAGES), which alone show a tray that
    was not reached. domains: {domain: {"trays": [...], "addresses": [...]}} of the run's domains.
    judged: the domains this run proved or judged before it stopped (their reports stand).
    reached: the last stage of the run's plan it reached (Run.reached; None before its plan), which says
    where a failed task that is not the plan's stopped it.
    lock_stale_after_s, now: the run's imex_lock_stale_after_s and the time of the release, for the locks
    the release left (locks_left).

    Returns {stage, task, domains, trays, reasons, not_reached, locks_left, message, reports}: reports are
    those of every domain of the run not judged, not proven by this run.
    """
    stage, task_name, reasons, trays = None, None, [], []
    for tray, task, result in failures:
        found = stage_of(task, result, reached)
        if stage is None or STAGES.index(found) < STAGES.index(stage):
            stage = found
            task_name = (task or {}).get("name") if isinstance(task, Mapping) else None
        reasons.extend(reason for reason in reasons_of(result) if reason not in reasons)
        trays.extend(host for host in hosts_of(result, tray, bool((task or {}).get("run_once")))
                     if host not in trays)
    # Trays that ssh did not reach leave no failed task: only their registered results say so.
    unreached = None
    # A lock the release left keeps the next run of its domain out: named with its tray and when it goes stale.
    left = locks_left(registered.get(LOCK_RELEASE), lock_stale_after_s, now)
    for lock in left:
        if not failures and unreached is None:
            unreached = REGISTER_STAGES[LOCK_RELEASE]
        if lock["holder"] and lock["holder"] not in trays:
            trays.append(lock["holder"])
        if lock_left_reason(lock) not in reasons:
            reasons.append(lock_left_reason(lock))
    for name, by_tray in registered.items():
        if name == LOCK_RELEASE:
            continue
        for tray, result in (by_tray or {}).items():
            if not isinstance(result, Mapping) or not (result.get("unreachable") or any(
                    isinstance(item, Mapping) and item.get("unreachable") for item in result.get("results") or [])):
                continue
            # A failed task decides the stage: validate.yml goes on without a tray it did not reach.
            if not failures and (unreached is None or STAGES.index(REGISTER_STAGES[name]) < STAGES.index(unreached)):
                unreached = REGISTER_STAGES[name]
            run_once = bool(result.get("results"))
            for host in hosts_of(result, tray, run_once):
                if host not in trays:
                    trays.append(host)
            for reason in reasons_of(result):
                text = reason if run_once else "%s: %s" % (tray, reason)
                if text not in reasons:
                    reasons.append(text)
    stage = stage or unreached or "run"
    # A run that reached none of its trays stopped at their read (the plan refuses it right after).
    if any(reason.startswith(NONE_REACHED) for reason in reasons):
        stage = "read"
    if not reasons:
        reasons = ["the run stopped at its %s stage without a message (see the run's output)" % stage]
    reasons = reasons[:MAX_REASONS]
    all_trays = {tray: name for name, domain in domains.items() for tray in domain.get("trays") or []}
    text = "\n".join(reasons)
    trays = [tray for tray in trays if tray in all_trays]
    trays += [tray for tray in _named(text, list(all_trays)) if tray not in trays]
    involved = [name for name in domains if name in {all_trays[tray] for tray in trays}
                or name in _named(text, list(domains))]
    # A refusal before any tray is contacted holds the whole run (its messages may name only the first
    # trays), and so does one that names no domain (a run-wide option).
    if stage in RUN_REFUSALS or not involved:
        involved = [name for name in domains if name not in judged]
    not_reached = [name for name in domains if name not in involved and name not in judged]
    record = {
        "stage": stage,
        "task": task_name,
        "domains": involved,
        "trays": trays,
        "reasons": reasons,
        "not_reached": not_reached,
        "locks_left": left,
        "check_mode": bool(check_mode),
    }
    # The reasons were printed by the task that stopped the run: the message says where, and what is
    # on record.
    named = ", ".join(trays[:TRAYS_NAMED]) + (" and %d more" % (len(trays) - TRAYS_NAMED) if len(trays) > TRAYS_NAMED else "")
    record["message"] = "The run stopped at its %s stage%s%s; not proven by this run: %s%s" % (
        stage, " (domains %s)" % ", ".join(involved) if involved else "", "; trays %s" % named if trays else "",
        ", ".join(name for name in domains if name not in judged) or "none",
        "; locks left: %s" % ", ".join("%s on %s" % (lock["domain"], lock["holder"]) for lock in left) if left else "")
    record["reports"] = [not_proven_report(name, domains[name], record) for name in domains if name not in judged]
    return record


def not_proven_report(name, domain, record):
    """The report of a domain the run did not judge: not proven by this run, with the stage it stopped
    at and the reasons that concern the domain (all of them when none names it)."""
    trays = [tray for tray in record["trays"] if tray in (domain.get("trays") or [])]
    if name in record["domains"]:
        own = [reason for reason in record["reasons"]
               if name in _named(reason, [name]) or _named(reason, domain.get("trays") or [])]
        problems = own or list(record["reasons"])
        how = "the run stopped at its %s stage%s" % (record["stage"], " on %s" % ", ".join(trays) if trays else "")
    else:
        problems = ["not reached: the run stopped at its %s stage (domains %s) before it proved this domain"
                    % (record["stage"], ", ".join(record["domains"]) or "none")]
        how = "not reached, the run stopped at its %s stage" % record["stage"]
    return {
        "domain": name,
        "verdict": NOT_PROVEN,
        "ok": False,
        "stopped_at": record["stage"],
        "failed_trays": trays,
        "trays": list(domain.get("trays") or []),
        "expected_nodes": list(domain.get("addresses") or []),
        "status": {"domain_state": None},
        "problems": problems,
        "message": "domain %s: not proven by this run (%s):\n  - %s" % (name, how, "\n  - ".join(problems)),
    }


def artifacts(record, run_id, report_dir, judged_reports=()):
    """The set_stats data of a stopped run: the verdicts and problems of its domains (the judged ones as
    judged) and the stop itself under imex_run.stopped."""
    reports = list(judged_reports) + list(record["reports"])
    return {
        "imex_domains": {report["domain"]: report["verdict"] for report in reports},
        "imex_domain_problems": {report["domain"]: list(report.get("problems") or []) for report in reports},
        "imex_run": {"id": run_id, "report_dir": report_dir,
                     "stopped": {key: record[key] for key in ("stage", "task", "domains", "trays", "reasons",
                                                              "not_reached", "locks_left")}},
    }
