# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: validate config.cfg settings on the controller, with the rules imex_config applies on trays."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import ConfigError, validate_settings


def imex_settings_problems(settings, allow_unknown=False):
    """See plugins/filter/imex_settings_problems.yml."""
    try:
        validate_settings(dict(settings or {}), allow_unknown=bool(allow_unknown))
    except ConfigError as error:
        return [problem.strip() for problem in str(error).split("; ") if problem.strip()]
    return []


class FilterModule:
    """rackscale.imex settings filter."""

    def filters(self):
        return {"imex_settings_problems": imex_settings_problems}
