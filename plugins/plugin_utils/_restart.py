# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Which trays restart after the daemon files were written: every tray of a changed domain."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.module_utils._activity import slurm_busy


def restart_plan(domains, trays, nodes_results, config_results, tls_results, tray_infos=None, service=None,
                 allow_busy=False):
    """Return {problems, restart} for the domains of one wave of the run.

    domains maps each domain name to its trays in node order. trays lists the trays in the run,
    and the three result lists hold, in the same order, each tray's result of the node list
    write, the config write and the TLS copy ({} where a step did not run). restart maps every
    tray to restart to the trays of its domain whose files changed, so the whole domain restarts
    together. problems names each domain that must not restart: its trays now hold different
    node lists (the daemons would answer !M!), it changed while the run leaves some of its
    trays out (--limit, a sliced job), whose writes ran in check mode, or work runs on it.

    tray_infos holds, in the same order, each tray's imex_tray_info read ({} when not read): a
    domain whose daemon runs on a tray with GPU compute processes, a Slurm job, or processes that
    could not be read is busy, and is not restarted unless allow_busy. A domain whose daemons
    all are stopped is never busy: nothing can be using it.
    """
    written = {}
    for tray, nodes, config, tls in zip(trays, nodes_results, config_results, tls_results):
        written[tray] = {"node list": nodes or {}, "config": config or {}, "TLS material": tls or {}}
    infos = dict(zip(trays, tray_infos or [{}] * len(trays)))
    problems, restart = [], {}
    for name, domain_trays in domains.items():
        in_play = [tray for tray in domain_trays if tray in written]
        left_out = [tray for tray in domain_trays if tray not in written]
        by_checksum = {}
        for tray in in_play:
            # A tray whose write was skipped (its read showed the list in place) has no checksum:
            # the comparison covers the trays written now.
            checksum = written[tray]["node list"].get("checksum")
            if checksum is not None:
                by_checksum.setdefault(checksum, []).append(tray)
        if len(by_checksum) > 1:
            problems.append("domain %s: trays hold different node lists (%s); the daemons would answer !M!. "
                            "Nothing was restarted." % (name, "; ".join(
                                "%s on %s" % (str(checksum)[:12], ", ".join(holders))
                                for checksum, holders in by_checksum.items())))
            continue
        changes = dict((tray, [what for what, result in written[tray].items() if result.get("changed")])
                       for tray in in_play)
        changed = [tray for tray in in_play if changes[tray]]
        if changed and left_out:
            problems.extend(
                "tray %s needs a new %s, which takes a restart of every tray of its domain together, but "
                "this run leaves out %s. Nothing was changed. Run against the whole domain (drop --limit, "
                "or do not slice the job)." % (tray, " and ".join(changes[tray]), ", ".join(left_out))
                for tray in changed)
        elif changed:
            busy = [] if allow_busy else busy_trays(in_play, [infos.get(tray) for tray in in_play], service)
            if busy:
                # The writes of a busy domain ran in check mode (see busy_trays): nothing changed.
                problems.append(
                    "domain %s is not restarted: work runs on it (%s). A restart makes every IMEX daemon of the "
                    "domain a new instance and cuts the memory its jobs share. Its new %s (on %s) was not written. "
                    "Drain the trays (for example scontrol update nodename=... state=drain, or kubectl cordon), "
                    "wait for the work to end and run again, or set imex_allow_busy_restart=true."
                    % (name, "; ".join(busy), " and ".join(sorted({what for tray in changed for what in changes[tray]})),
                       ", ".join(changed)))
            else:
                restart.update((tray, changed) for tray in in_play)
    return {"problems": problems, "restart": restart}


def busy_trays(trays, tray_infos, service):
    """One phrase per tray of a domain with work on it, when the domain's daemon runs; [] otherwise.

    tray_infos holds each tray's imex_tray_info read, in the order of trays. The imex role makes a
    busy domain's writes predictions (check mode), as for a domain only partly in the run, so a
    refused domain keeps its files and its daemons, and the next run still sees the difference.
    """
    infos = dict(zip(trays, [info or {} for info in tray_infos]))
    if not any((infos[tray].get("services") or {}).get(service) == "active" for tray in trays):
        return []
    busy = []
    for tray in trays:
        info = infos[tray]
        work = []
        if "compute_apps" in info:
            if info["compute_apps"] is None:
                work.append("GPU processes could not be read")
            else:
                work.extend("pid %s %s" % (app.get("pid"), app.get("name")) for app in info["compute_apps"])
        if slurm_busy(info.get("slurm_state")):
            work.append("Slurm node state %s" % info["slurm_state"])
        if work:
            busy.append("%s: %s" % (tray, ", ".join(work)))
    return busy


def handover_problems(domains, trays, tray_infos, service, allow_busy=False):
    """One sentence per domain whose host daemons the hand-over to the Kubernetes DRA driver must not
    stop now; [] when every domain may be handed over.

    Stopping the host daemons cuts the memory a domain's jobs share, as a restart does, so the same
    guard holds: a domain with work on it while its daemon runs (busy_trays) is refused unless
    allow_busy, and so is a running domain the run holds only part of (the trays left out would
    keep a domain whose peers are gone). A domain whose daemons all are stopped is handed over.
    domains maps each domain name to its trays in node order; trays and tray_infos are the trays in
    the run and their imex_tray_info reads, in the same order.
    """
    infos = dict(zip(trays, [info or {} for info in tray_infos]))
    problems = []
    for name, domain_trays in domains.items():
        in_play = [tray for tray in domain_trays if tray in infos]
        left_out = [tray for tray in domain_trays if tray not in infos]
        running = [tray for tray in in_play if (infos[tray].get("services") or {}).get(service) == "active"]
        busy = [] if allow_busy else busy_trays(in_play, [infos[tray] for tray in in_play], service)
        if busy:
            reason = "while work runs on it (%s)" % "; ".join(busy)
            advice = "Drain the trays, wait for the work to end and run again, or set imex_allow_busy_restart=true."
        elif running and left_out:
            reason = "on part of the domain (this run leaves out %s)" % ", ".join(left_out)
            advice = "Run against the whole domain (drop --limit, or do not slice the job)."
        else:
            continue
        problems.append("domain %s: the host nvidia-imex is not handed over to the DRA driver %s. Stopping its "
                        "daemons makes the domain's jobs lose the memory they share. Nothing was stopped. %s"
                        % (name, reason, advice))
    return problems
