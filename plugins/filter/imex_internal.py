# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Glue of the rackscale.imex.imex_channels role: PRIVATE, not a public interface.

The imex role's decisions are made by rackscale.imex.imex_plan; these two remain for the
imex_channels role, which is usable alone and so cannot lean on the imex role's plan.
Their arguments may change without notice; use the roles.

imex_internal_channel_entries(mode, channel0, extra)
    The imex_channel options of every channel the mode wants, channel0 first.
imex_internal_channels_to_ensure(entries, observed)
    The entries a read of the tray shows would change (all without a read).
"""
from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.rackscale.imex.plugins.plugin_utils._channels import channel_entries, channels_to_ensure


def imex_internal_channel_entries(mode, channel0, extra):
    return channel_entries(str(mode), boolean(channel0, strict=False), list(extra or []))


def imex_internal_channels_to_ensure(entries, observed):
    return channels_to_ensure(list(entries), dict(observed or {}))


class FilterModule:
    """Private glue of the rackscale.imex.imex_channels role."""

    def filters(self):
        return {
            "imex_internal_channel_entries": imex_internal_channel_entries,
            "imex_internal_channels_to_ensure": imex_internal_channels_to_ensure,
        }
