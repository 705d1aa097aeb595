# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
"""Which trays to restart after the daemon files were written: every tray of a changed domain."""
from __future__ import annotations

# The results the imex_daemon role registers on each tray, and what each one's change stands for.
CHANGE_VARS = {"imex_daemon_nodes_result": "node list", "imex_daemon_config_result": "config",
               "imex_daemon_tls_result": "TLS material"}
NODES_VAR = "imex_daemon_nodes_result"


def restart_plan(domains, hostvars, play_hosts):
    """Return {problems, restart} for the domains of one step of the run.

    domains maps each domain name to its trays in node order; only trays in play_hosts count.
    restart maps every tray to restart to the trays of its domain whose files changed, so the
    whole domain restarts together. problems names each domain that must not restart: its trays
    now hold different node lists (the daemons would answer !M!), or it changed while the run
    leaves some of its trays out (--limit, a sliced job), whose writes ran in check mode.
    """
    problems, restart = [], {}
    for name, trays in domains.items():
        in_play = [tray for tray in trays if tray in play_hosts]
        left_out = [tray for tray in trays if tray not in play_hosts]
        results = dict((tray, _results(hostvars[tray])) for tray in in_play)
        by_checksum = {}
        for tray in in_play:
            # A tray whose write was skipped (its read showed the list in place) has no checksum:
            # the comparison covers the trays written now.
            checksum = results[tray][NODES_VAR].get("checksum")
            if checksum is not None:
                by_checksum.setdefault(checksum, []).append(tray)
        if len(by_checksum) > 1:
            problems.append("domain %s: trays hold different node lists (%s); the daemons would answer !M!. "
                            "Nothing was restarted." % (name, "; ".join(
                                "%s on %s" % (str(checksum)[:12], ", ".join(holders))
                                for checksum, holders in by_checksum.items())))
            continue
        changes = dict((tray, [what for var, what in CHANGE_VARS.items() if results[tray][var].get("changed")])
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


def _results(tray_vars):
    """The tray's registered results; a result not registered (TLS off) is an empty one."""
    return dict((var, tray_vars.get(var) or {}) for var in CHANGE_VARS)
