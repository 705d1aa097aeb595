# -*- coding: utf-8 -*-
# Note that this doc fragment is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """Documentation shared by the modules that write one IMEX configuration file in place.

    Used by rackscale.imex.imex_config and rackscale.imex.imex_nodes_config. Only text that is the
    same for both lives here: O(path) (a different file and default for each) and the return values
    stay in each module. The return values are not a fragment on purpose: ansible-doc of
    ansible-core 2.19 and older fails on RETURN fragments (ansible/ansible#85644), and this
    collection supports ansible-core 2.19.
    """

    DOCUMENTATION = r"""
options:
  backup:
    description: Keep a timestamped copy of the previous file when it changes.
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check mode and return an exact prediction of the changes without modifying the target.
    support: full
  diff_mode:
    description: Returns the file content before and after.
    support: full
  idempotent:
    description: A second run with the same options reports no change.
    support: full
"""
