# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""The IMEX channels a mode wants on a tray, and which of them need the channel module."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._options import OWN_CHANNEL_MODES, whole_number


def channel_entries(mode, channel0, extra):
    """The rackscale.imex.imex_channel options of every channel of the mode, channel0 first.

    In the modes that own the channels: channel0 as asked and the isolation channels, all
    persistent (channel0 through the modprobe option, the others through a boot entry) and made now.
    In the slurm and dra modes the channels belong to slurmd or the DRA kubelet plugin, whose
    device nodes may be in use: only this collection's channel0 option goes, and no node is touched.
    """
    owned = mode in OWN_CHANNEL_MODES
    entries = [{"channel": 0, "state": "present" if owned and channel0 else "absent"}]
    if owned:
        # The number as the options' check took it: "5" and 5.0 (an AWX float) are channel 5.
        entries.extend(dict(entry, channel=whole_number(entry["channel"])) for entry in extra)
    for entry in entries:
        entry.update(persistent=True, immediate=owned)
    return entries


def channels_to_ensure(entries, observed):
    """The entries the module must run for: those a read of the tray (imex_tray_info's channels
    result for the same entries) shows would change or fail, and every entry the read does not
    cover. Without a read, all of them."""
    if not observed:
        return list(entries)
    return [entry for entry in entries
            if observed.get(str(entry["channel"]), {}).get("changed", True)
            or "error" in observed.get(str(entry["channel"]), {})]
