# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Glue of the rackscale.imex.imex_channels role and of discover.yml: PRIVATE, not a public interface.

The imex role's decisions are made by rackscale.imex.imex_plan; these three remain for the
imex_channels role (usable alone, so it cannot lean on the imex role's plan) and for discover.yml.
Their arguments may change without notice; use the roles and playbooks.

imex_internal_discovery(trays, reads, tray_vars, max_nodes)
    {problems, inventory, domains, summary}: an inventory skeleton, one group per NVLink partition.
imex_internal_channel_entries(mode, channel0, extra)
    The imex_channel options of every channel the mode wants, channel0 first.
imex_internal_channels_to_ensure(entries, observed)
    The entries a read of the tray shows would change (all without a read).
"""
from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.rackscale.imex.plugins.plugin_utils._channels import channel_entries, channels_to_ensure
from ansible_collections.rackscale.imex.plugins.plugin_utils._discover import CONNECTION_VARS, skeleton_of


def imex_internal_discovery(trays, reads, tray_vars, max_nodes):
    # tray_vars: each tray's hostvars; only its connection variables are kept.
    entries = []
    for tray, read, found in zip(trays, reads, tray_vars):
        kept = {name: found[name] for name in CONNECTION_VARS if name in found and found[name] is not None}
        entries.append({"name": tray, "read": dict(read or {}), "vars": kept})
    return skeleton_of(entries, int(max_nodes))


def imex_internal_channel_entries(mode, channel0, extra):
    return channel_entries(str(mode), boolean(channel0, strict=False), list(extra or []))


def imex_internal_channels_to_ensure(entries, observed):
    return channels_to_ensure(list(entries), dict(observed or {}))


class FilterModule:
    """Private glue of the rackscale.imex roles."""

    def filters(self):
        return {
            "imex_internal_discovery": imex_internal_discovery,
            "imex_internal_channel_entries": imex_internal_channel_entries,
            "imex_internal_channels_to_ensure": imex_internal_channels_to_ensure,
        }
