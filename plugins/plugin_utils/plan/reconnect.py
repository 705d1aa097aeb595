# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Part of stage restart: which running daemons of a wave reconnect (SIGUSR1) once its starts are done.

A daemon retries a peer it lost with a growing backoff (15, 31, 62, then 125 s). When a wave starts the
daemon of a tray (back from repair or out of service, not READY, replaced) in a domain whose other daemons
keep running, those can wait up to 125 s before they try it again: longer than the proof waits. SIGUSR1
makes a running daemon reconnect now, without becoming a new instance, so it is made under work too. A
domain that restarts whole needs none: every daemon is new and connects afresh.
"""
from __future__ import annotations


def plan_reconnects(run, wave):
    """Set each tray's ``reconnect`` in the wave's domains (why its daemon is signalled, "" for none) and the
    run's ``reconnects``, the wave's list of them. A reason another rule of the plan gave first is kept."""
    unreachable = set(run.unreachable or [])
    for name in wave:
        domain = run.domains[name]
        # The trays the status did not show READY, and of them those the wave starts (planned starts, under
        # --check too, predicted there as the starts are); a running daemon that is not READY and that the
        # wave does not start (plan/work.py) keeps running and reconnects as its peers do.
        waiting = [] if domain.restart else [tray for tray in domain.start or [] if tray not in unreachable]
        started = [tray for tray in waiting if run.trays[tray].start]
        for tray in domain.trays_in_run:
            entry = run.trays[tray]
            if entry.reconnect:
                continue
            others = [peer for peer in waiting if peer != tray]
            keeps_running = not (entry.stopped or entry.restart or tray in started or tray in unreachable)
            entry.reconnect = ("%s start%s in domain %s: reconnect to %s now, not after the reconnect backoff "
                               "(up to 125 s)" % (", ".join(others), "s" if len(others) == 1 else "", name,
                                                  "it" if len(others) == 1 else "them")
                               if others and keeps_running else "")
    # hosts_file: the signal makes the daemon resolve the slot names again; the module records that it did.
    run.reconnects = [{"tray": tray, "service": run.domains[name].service, "reason": run.trays[tray].reconnect,
                       "hosts_file": run.trays[tray].read_hosts if run.domains[name].node_names else ""}
                      for name in wave for tray in run.domains[name].trays_in_run if run.trays[tray].reconnect]
    return run
