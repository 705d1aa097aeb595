# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Where the lock of a domain lives, and how long a lock and a long tray command may last."""
from __future__ import annotations


def lock_problems(options):
    """A lock that may go stale while its run still works would let a second run in."""
    stale_after = options["imex_lock_stale_after_s"]
    longest_wait = options["imex_validate_timeout_s"] + 2 * options["imex_ctl_timeout_s"]
    if stale_after and stale_after <= longest_wait:
        return ["imex_lock_stale_after_s = %d is not longer than the run's longest wait without a lock refresh "
                "(imex_validate_timeout_s %d + 2 x imex_ctl_timeout_s %d = %d s): another run could take the lock "
                "over while this one proves a domain; raise it, or set 0 (never stale)"
                % (stale_after, options["imex_validate_timeout_s"], options["imex_ctl_timeout_s"], longest_wait)]
    return []


# Where the lock of a domain lives. Two runs of one domain must always meet at one lock file, whatever
# their out-of-service lists or --limit, and a tray away for repair must not hold back its peers. So the
# place is fixed by the inventory alone: the domain's lock trays are its first LOCK_TRAYS trays in node
# order, and a run holds the domain when it holds the lock file on a majority of them (the first ones in
# service, in order). Any two majorities of one set share a tray, so two runs always contend there; one
# lock tray away (out of service, or in repair and unreachable once marked so) leaves a majority to its
# peers. --limit never moves it: a lock tray outside the play is still where the lock is taken.
LOCK_TRAYS = 3


def lock_trays(domain_trays):
    """(the domain's lock trays, how many of them a run must hold)."""
    candidates = list(domain_trays[:LOCK_TRAYS])
    return candidates, len(candidates) // 2 + 1


def lock_holders(domain_trays, away):
    """The trays on which a run takes the lock of a domain: the first of its lock trays in service, as many
    as a majority ([] when too many are away: lock_problems_away refuses the run)."""
    candidates, needed = lock_trays(domain_trays)
    in_service = [tray for tray in candidates if tray not in away]
    return in_service[:needed] if len(in_service) >= needed else []


def lock_problems_away(domains, domain_trays, away):
    """A domain whose lock trays are too many out of service for a majority: no run could exclude another."""
    problems = []
    for name in domains:
        candidates, needed = lock_trays(domain_trays[name])
        gone = [tray for tray in candidates if tray in away]
        if len(candidates) - len(gone) < needed:
            verb = "is" if len(gone) == 1 else "are"
            problems.append(
                "domain %s: its lock is held on %d of its lock trays %s (its first trays in node order), but %s %s "
                "out of service (imex_trays_out_of_service): two runs could then miss each other. Bring %s back "
                "into service first" % (name, needed, ", ".join(candidates), ", ".join(gone), verb, " or ".join(gone)))
    return problems


# The bound of a long tray command of the run (the initramfs rebuild: minutes with several kernels).
LONG_COMMAND_TIMEOUT_S = 900


def wave_locks(locks, waves):
    """The locks refreshed as each wave starts ([] for the first: every lock was taken just before it)."""
    return [[] if index == 0 else [lock for lock in locks if lock["domain"] in wave] for index, wave in enumerate(waves)]


def command_timeout(stale_after_s):
    """Seconds a long tray command may run: LONG_COMMAND_TIMEOUT_S, or half the staleness of the
    run's locks when that is shorter, so that one hung command cannot outlive the locks it runs under."""
    return max(1, min(LONG_COMMAND_TIMEOUT_S, int(stale_after_s) // 2))
