# -*- coding: utf-8 -*-
# Note that this doc fragment is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """Attributes of the modules that only read a tray (rackscale.imex.imex_status, imex_tray_info)."""

    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check mode and return the same report without modifying the target.
    support: full
  diff_mode:
    description: Will return details on what has changed when in diff mode.
    support: none
  idempotent:
    description: Running the module again with the same options gives the same result and changes nothing.
    support: full
  platform:
    description: Target OS families that can be operated against.
    support: full
    platforms: posix
"""
