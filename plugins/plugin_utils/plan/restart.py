# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Stage restart, once per wave after its writes and its status read: which domains restart (and why), which
trays only start or reload their TLS files, and what refuses a restart."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes, node_names, writes as wave_writes
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.errors import PlanError
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.reconnect import plan_reconnects
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import registered


@registered
def restart(run, wave, writes, statuses):
    """The plan of one wave after its writes and its status read; PlanError with what refuses it.

    writes: {tray: {"node list": result, "config": result, "TLS material": result}} of the wave's trays
    ({} where a write did not run); statuses: {domain: the imex_status result its leader read}.
    A domain restarts, every tray together, when a write changed a file of one of its trays or when a
    daemon runs files older than those on disk (pending); a tray the status does not show READY in a
    domain that does not restart is only started. A running daemon whose TLS files alone changed (the
    plan's tls_reload_ok) reloads them instead (SIGUSR1): no restart, so work running on the domain or
    trays left out of the run do not hold it back.
    """
    problems = []
    reconnects = {}
    for name in wave:
        domain = run.domains[name]
        if not modes.of(domain.mode).runs_host_daemon:
            continue
        in_run = domain.trays_in_run
        left_out = domain.left_out
        written = wave_writes.written(run, in_run, writes)
        domain.written = written
        by_checksum = {}
        for tray in in_run:
            checksum = ((writes.get(tray) or {}).get("node list") or {}).get("checksum")
            if checksum is not None:
                by_checksum.setdefault(checksum, []).append(tray)
        if len(by_checksum) > 1:
            problems.append("domain %s: trays hold different node lists (%s); the daemons would answer !M!. Nothing "
                            "was restarted. %s" % (name, "; ".join("%s on %s" % (str(checksum)[:12], ", ".join(holders))
                                                                   for checksum, holders in by_checksum.items()),
                                                   wave_writes.written_sentence(written)))
            continue
        changes, reasons, joining, reloads = {}, {}, [], {}
        for tray in in_run:
            # A new hosts block alone (the slots' addresses) is not a change of the node list: no restart.
            changes[tray] = [what for what, result in sorted((writes.get(tray) or {}).items())
                             if (node_names.node_list_changes(result)[0] if what == "node list"
                                 else (result or {}).get("changed"))]
            if run.trays[tray].tls_reload_ok and changes[tray] == ["TLS material"]:
                reloads[tray] = "new TLS material"
                changes[tray] = []
            elif not changes[tray] and tray in (domain.pending_reload or {}):
                reloads[tray] = "pending reload: " + domain.pending_reload[tray]
            # Not where the writes were held back (a partial or busy domain): they were not made.
            if changes[tray] and run.trays[tray].stopped and (not (domain.partial or domain.busy)
                                                              or not run.trays[tray].predicted):
                # A stopped daemon reads its new files when it starts; the running trays' files did not
                # change (else they restart too), so it joins their domain as a tray back from repair does.
                joining.append(tray)
            elif changes[tray]:
                reasons[tray] = "new " + " and ".join(changes[tray])
            elif tray in domain.pending:
                reasons[tray] = "pending restart: " + domain.pending[tray]
        if reasons:
            # The domain restarts: the stopped trays' new files count among its reasons.
            reasons.update((tray, "new " + " and ".join(changes[tray])) for tray in joining)
            joining = []
        domain.restart_reasons = reasons
        domain.restart = False
        changed = [tray for tray in in_run if changes[tray]]
        stale = [tray for tray in in_run if tray in reasons and not changes[tray]]
        if reasons and left_out:
            problems.extend(
                "tray %s needs %s, which takes a restart of every tray of its domain together, but this run leaves "
                "out %s. %s Run against the whole domain (drop --limit, or do not slice the job)."
                % (tray, "a new " + " and ".join(changes[tray]) if changes[tray] else "a restart (%s)" % reasons[tray],
                   ", ".join(left_out), wave_writes.written_sentence(written)) for tray in in_run if tray in reasons)
        elif reasons and domain.busy:
            held_back = []
            if changed:
                held_back.append("Its new %s (on %s) is held back." % (
                    " and ".join(sorted({what for tray in changed for what in changes[tray]})), ", ".join(changed)))
            if changed and domain.tls_restart_why:
                held_back.append("Its TLS change cannot be made by reload: %s." % "; ".join(domain.tls_restart_why))
            if stale:
                held_back.append("Its daemons on %s do not run what is on disk (%s)."
                                 % (", ".join(stale), "; ".join(domain.pending[tray] for tray in stale)))
            problems.append(
                "domain %s is not restarted: work runs on it (%s). A restart makes every IMEX daemon of the domain a "
                "new instance and cuts the memory its jobs share. %s Drain the trays (for example scontrol update "
                "nodename=... state=drain, or kubectl cordon), wait for the work to end and run again, or set "
                "imex_allow_busy_restart=true." % (name, "; ".join(domain.busy),
                                                   " ".join(held_back + [wave_writes.written_sentence(written)])))
        elif reasons:
            domain.restart = True
            # The restart puts the files on disk in force: the proof judges the new daemons.
            domain.pending = {}
            domain.pending_release = {}
        # A restart loads the new TLS files too; else the reload puts them in force.
        domain.reload = {} if domain.restart else reloads
        if domain.restart or reloads:
            domain.pending_reload = {}
        status = statuses.get(name) or {}
        ready = {node.get("address") for node in status.get("nodes") or [] if node.get("status") == "READY"}
        # The status names each node by its node list entry (an address, or a slot name).
        entry_of = dict(zip(domain.trays, domain.addresses))
        starts = [] if domain.restart else [tray for tray in in_run if entry_of[tray] not in ready or tray in joining]
        domain.start = starts
        reconnects[name] = {} if domain.restart else node_names.reconnects(run, name, writes, starts)
        domain.proven_before_restart = (bool(status.get("healthy")) and not domain.restart and not starts
                                        and not domain.reload)
    if problems:
        raise PlanError(problems)
    # A domain whose status read before any restart proves it, and in which nothing restarts or
    # starts, needs no second read.
    run.prove_now = [name for name in run.prove_now
                     if name not in wave or not run.domains[name].proven_before_restart]
    run.restarting = [name for name in wave if run.domains[name].restart]
    run.restart_locks = [lock for lock in run.locks if lock["domain"] in run.restarting]
    # The trays that include the wave's work (plan/work.py): a running daemon outside them that the status
    # does not show READY is not started (a start of a running unit changes nothing); its peers reconnect.
    workers = _workers(run, wave)
    for name in wave:
        domain = run.domains[name]
        reasons = domain.restart_reasons or {}
        for tray in domain.trays_in_run:
            entry = run.trays[tray]
            entry.restart = bool(domain.restart)
            entry.start = tray in (domain.start or []) and (workers is None or tray in workers)
            entry.reload = tray in (domain.reload or {})
            entry.reconnect = (reconnects.get(name) or {}).get(tray, "")
            entry.restart_tasks = entry.restart or entry.start
            entry.reload_or_restart = entry.restart_tasks or entry.reload
            # A daemon the read found stopped is not stopped again (a first converge stops nothing).
            entry.stop = entry.restart and not entry.stopped
            # Under --check the stop only predicts: the daemon still runs and its start alone would say "ok".
            entry.start_predicted = entry.stop and run.check_mode
            entry.pre_restart_tasks = entry.restart and bool(entry.pre_restart_hook)
            # After the proof, which --check does not make (nothing restarted).
            entry.post_restart_tasks = entry.restart and bool(entry.post_restart_hook) and not run.check_mode
            if entry.restart:
                entry.action = "restarting all %d trays of domain %s together: %s" % (
                    len(domain.trays), name, reasons.get(tray) or "%s of its trays: %s" % (
                        "one" if len(reasons) == 1 else len(reasons),
                        "; ".join("%s: %s" % item for item in sorted(reasons.items()))))
            elif entry.start:
                entry.action = "starting the daemon: the status of domain %s does not show this tray READY" % name
            elif entry.reconnect:
                entry.action = "sending SIGUSR1 to the daemon (no restart of domain %s): %s" % (name, entry.reconnect)
            elif entry.reload:
                entry.action = "reloading the TLS credentials of the daemon (SIGUSR1; no restart of domain %s): %s" % (
                    name, domain.reload[tray])
    # After the starts: the running peers of the trays started reconnect to them now.
    plan_reconnects(run, wave)
    return run


def _workers(run, wave):
    """The trays that include the work of ``wave`` (the read stage's wave_workers), or None for a plan
    without them (every tray of the wave's domains)."""
    wave = list(wave)
    if not run.wave_workers or wave not in (run.waves or []):
        return None
    return set(run.wave_workers[run.waves.index(wave)])
