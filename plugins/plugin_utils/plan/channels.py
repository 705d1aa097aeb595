# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Stage channels, for the imex_channels role on the tray it runs on (usable alone, so it cannot lean on the
imex role's plan): the channels its mode wants (channel0 first), and those a read of the tray shows the
channel module would change (all without a read)."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.errors import PlanError
from ansible_collections.rackscale.imex.plugins.plugin_utils._option_table import convert_option


def channels(mode, channel0, extra, observed, reboot_allowed=False, local=False):
    """{entries, to_ensure, owned, slurm_owns, boot, reboot} of one tray (extra: imex_channels_extra as given,
    maybe JSON or YAML text; observed: imex_tray_info's channels result, {} without a read; local: the tray is
    the controller itself, ansible_connection=local, which a reboot would take down with the run)."""
    extra, problem = convert_option("imex_channels", extra or [])
    if problem:
        raise PlanError([problem.replace("imex_channels", "imex_channels_extra", 1)])
    owner = modes.of(mode)
    entries = owner.channel_entries(channel0, extra)
    return {"entries": entries, "to_ensure": channels_to_ensure(entries, dict(observed or {})),
            "owned": owner.owns_channels,
            # Said once: slurmd empties the channel directory when it starts.
            "slurm_owns": owner.slurm_owns_channels,
            # The boot unit for isolation channels of ours, or the removal of their entries where the
            # channels are not ours; nothing to do for channel0 alone (the usual case).
            "boot": not owner.owns_channels or bool(extra),
            # Whether a reboot the channel0 option needs may be made (the module says whether it is needed).
            "reboot": bool(reboot_allowed) and not local}


def channels_to_ensure(entries, observed):
    """The entries the module must run for: those a read of the tray (imex_tray_info's channels
    result for the same entries) shows would change or fail, and every entry the read does not
    cover. Without a read, all of them."""
    if not observed:
        return list(entries)
    return [entry for entry in entries
            if observed.get(str(entry["channel"]), {}).get("changed", True)
            or "error" in observed.get(str(entry["channel"]), {})]
