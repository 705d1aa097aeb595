# Copyright: contributors to rackscale.imex
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
name: group_tree
version_added: 0.3.0
short_description: Give each host the child groups of its inventory groups
author: rackscale.imex maintainers (!UNKNOWN)
requirements:
  - Enabled in configuration, beside host_group_vars
    (C(vars_plugins_enabled = host_group_vars,rackscale.imex.group_tree) in C(ansible.cfg), or
    C(ANSIBLE_VARS_ENABLED=host_group_vars,rackscale.imex.group_tree)).
description:
  - Plays see the inventory's groups flattened (C(groups) lists a group with its descendants' hosts),
    so nothing in a play can tell the racks under C(imex_domains) from the NVLink partitions inside a
    rack, or from a group of the first tray of every rack.
  - This plugin gives each host one variable, C(imex_group_children), mapping each group the host is
    in (its ancestors included) to the names of that group's direct child groups, in inventory order.
    The rackscale.imex.imex role reads the child groups of C(imex_domains_group) from it.
  - It reads the inventory Ansible has loaded, groups added during the run included; it reads no file.
options:
  stage:
    ini:
      - key: stage
        section: vars_group_tree
    env:
      - name: ANSIBLE_VARS_PLUGIN_STAGE
extends_documentation_fragment:
  - ansible.builtin.vars_plugin_staging
"""

from ansible.inventory.group import InventoryObjectType
from ansible.plugins.vars import BaseVarsPlugin


class VarsModule(BaseVarsPlugin):
    """imex_group_children for every host entity; nothing for groups."""

    is_stateless = True

    def get_vars(self, loader, path, entities, cache=True):
        if not isinstance(entities, list):
            entities = [entities]
        found = {}
        for entity in entities:
            if getattr(entity, "base_type", None) != InventoryObjectType.HOST:
                continue
            found["imex_group_children"] = {
                group.name: [child.name for child in group.child_groups] for group in entity.get_groups()
            }
        return found
