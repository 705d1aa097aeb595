# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: verdict and JSON report of one IMEX domain."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._report import domain_report


def imex_validate_report(domain_name, model, hostvars, play_hosts, allowed_broken_pairs=0):
    """See plugins/filter/imex_validate_report.yml."""
    return domain_report(domain_name, model, hostvars, list(play_hosts),
                         allowed_broken_pairs=int(allowed_broken_pairs))


class FilterModule:
    """rackscale.imex validation report filter."""

    def filters(self):
        return {"imex_validate_report": imex_validate_report}
