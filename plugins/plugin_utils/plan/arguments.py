# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Stage arguments, before the role starts (the shipped playbooks' first play): the trays' values of the role's
options against its argument spec, one line per error instead of the spec printed per tray."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._arguments import argument_problems, entry_point_options
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.errors import PlanError


def options_of(specs, entry_point):
    """{option: its spec} of an entry point of the role's argument spec; PlanError naming a missing one."""
    try:
        return entry_point_options(specs, entry_point)
    except ValueError as error:
        raise PlanError([str(error)]) from None


def arguments(options, values):
    """{trays_checked} when every tray's values fit the spec (values: {tray: {option: value}}); else PlanError."""
    problems = argument_problems(options, values)
    if problems:
        raise PlanError(["The options of the rackscale.imex.imex role are not valid; nothing was "
                         "contacted or changed:"] + problems)
    return {"trays_checked": len(values)}
