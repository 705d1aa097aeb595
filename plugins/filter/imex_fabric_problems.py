# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: compare tray fabric identities with the inventory's IMEX domains."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._fabric_gate import fabric_problems


def imex_fabric_problems(model, fabric_by_host):
    """See plugins/filter/imex_fabric_problems.yml."""
    return fabric_problems(model, dict(fabric_by_host))


class FilterModule:
    """rackscale.imex fabric gate filter."""

    def filters(self):
        return {"imex_fabric_problems": imex_fabric_problems}
