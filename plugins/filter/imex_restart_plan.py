# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: which trays restart after the daemon files were written, computed once per step."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._restart import restart_plan


def imex_restart_plan(domains, hostvars, play_hosts):
    """See plugins/filter/imex_restart_plan.yml."""
    return restart_plan(dict(domains), hostvars, list(play_hosts))


class FilterModule:
    """rackscale.imex restart plan filter."""

    def filters(self):
        return {"imex_restart_plan": imex_restart_plan}
