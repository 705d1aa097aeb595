# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Stage guard: the busy guard at the last moment, on what runs on the trays as read right before their
daemons stop (after the operator's pre-restart tasks)."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes, writes
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.errors import PlanError
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import registered


@registered
def guard(run, wave, reads):
    """The plan, or PlanError naming each domain of the wave that was to restart and has work on it now."""
    problems = []
    for name in wave:
        domain = run.domains[name]
        if not domain.restart:
            continue
        busy = modes.of(domain.mode).busy(domain.trays_in_run, reads, domain.service, domain.allow_busy)
        if busy:
            problems.append(
                "domain %s is not restarted: work runs on it (%s), as read just before its daemons would stop. A "
                "restart makes every IMEX daemon of the domain a new instance and cuts the memory its jobs share. "
                "It was to restart for %s. %s The next run restarts it once the work has ended. Drain the trays, or "
                "set imex_allow_busy_restart=true."
                % (name, "; ".join(busy), "; ".join("%s: %s" % item for item in sorted(domain.restart_reasons.items())),
                   writes.written_sentence(domain.written or {})))
    if problems:
        raise PlanError(problems)
    return run
