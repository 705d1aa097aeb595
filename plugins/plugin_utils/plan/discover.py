# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Stage discover (discover.yml): an inventory skeleton, one group per NVLink partition the trays report."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._discover import skeleton_of
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.errors import PlanError


def discover(entries, max_nodes):
    """The skeleton of [{name, read, vars}] of the trays (their fabric read and connection variables); PlanError
    with what refuses it (a tray that is not registered refuses the whole skeleton)."""
    found = skeleton_of(entries, max_nodes)
    if found["problems"]:
        raise PlanError(found["problems"])
    return found
