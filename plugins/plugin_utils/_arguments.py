# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role's argument spec applied to every tray's inventory values, before the role starts.

Ansible validates a role's arguments when the role starts, on every host, and a failure prints the
whole spec with each host's error (tens of kilobytes for a rack). The shipped playbooks check the
same values with the same validator first, on the controller, and say what is wrong once per option
and value, naming the trays. Pure: the caller reads the spec file and the trays' variables.
"""
from __future__ import annotations

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.rackscale.imex.plugins.plugin_utils._options import whole_number

# Shown when more trays share one error: enough to find them, short enough to read.
MAX_TRAYS_NAMED = 6


def entry_point_options(specs, entry_point):
    """{option: its spec} of one entry point of a role's meta/argument_specs.yml (already parsed)."""
    points = (specs or {}).get("argument_specs") or {}
    if entry_point not in points:
        raise ValueError("the role has no argument spec entry point %r (it has: %s)"
                         % (entry_point, ", ".join(sorted(points)) or "none"))
    return dict(points[entry_point].get("options") or {})


def _trays_text(trays):
    named = ", ".join(trays[:MAX_TRAYS_NAMED])
    more = len(trays) - MAX_TRAYS_NAMED
    return named + (" and %d more" % more if more > 0 else "")


def argument_problems(options, values_by_tray):
    """One line per distinct error: '<error> (tray X, Y)' for the trays whose values break the spec.

    values_by_tray: {tray: {option: value}} holding only the options each tray defines (inventory,
    group vars, extra vars); the role's own defaults are valid by construction and not passed.
    """
    validator = ArgumentSpecValidator(options)
    trays_of = {}
    for tray, values in values_by_tray.items():
        defined = {name: value for name, value in values.items() if name in options}
        if not defined:
            continue
        messages = []
        # Whole numbers as the plan converts them (Ansible's own check takes '５' and '٥' for 5).
        for name, value in sorted(defined.items()):
            if options[name].get("type") == "int" and value is not None:
                try:
                    defined[name] = whole_number(value)
                except ValueError:
                    del defined[name]
                    messages.append("%s = %r is not a whole number" % (name, value))
        messages.extend(validator.validate(defined).error_messages)
        for message in messages:
            trays_of.setdefault(message, []).append(tray)
    return ["%s (%s %s)" % (message, "tray" if len(trays) == 1 else "trays", _trays_text(trays))
            for message, trays in trays_of.items()]
