# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Which trays restart after the daemon files were written: every tray of a changed domain."""
from __future__ import annotations


def restart_plan(domains, trays, nodes_results, config_results, tls_results):
    """Return {problems, restart} for the domains of one wave of the run.

    domains maps each domain name to its trays in node order. trays lists the trays in the run,
    and the three result lists hold, in the same order, each tray's result of the node list
    write, the config write and the TLS copy ({} where a step did not run). restart maps every
    tray to restart to the trays of its domain whose files changed, so the whole domain restarts
    together. problems names each domain that must not restart: its trays now hold different
    node lists (the daemons would answer !M!), or it changed while the run leaves some of its
    trays out (--limit, a sliced job), whose writes ran in check mode.
    """
    written = {}
    for tray, nodes, config, tls in zip(trays, nodes_results, config_results, tls_results):
        written[tray] = {"node list": nodes or {}, "config": config or {}, "TLS material": tls or {}}
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
            restart.update((tray, changed) for tray in in_play)
    return {"problems": problems, "restart": restart}
