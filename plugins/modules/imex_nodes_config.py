#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: imex_nodes_config
short_description: Write the IMEX node list (nodes_config.cfg) of an IMEX domain
version_added: 0.1.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Writes the ordered list of the domain's node addresses, one per line, to O(path).
  - The line position of an entry is the node's index in the domain. The IMEX daemons only
    connect if every node holds the same list in the same order, so the file is rendered
    canonically (no comments, newline-terminated) and RV(checksum) lets the caller prove that
    every node holds the same bytes.
  - Entries are validated before anything is written; every error names the entry and its position.
  - The daemon reads the file only at start; restart every node of the domain after a change.
options:
  nodes:
    description:
      - The node addresses in domain order, IPv4 or IPv6 addresses or host names (RFC 1123).
      - Duplicates (including the same IPv6 address written two ways), prefixes such as
        C(/24), IPv6 zone ids, whitespace and shell metacharacters are refused.
    type: list
    elements: str
    required: true
  path:
    description: The node list file; the parent directory is created (mode 0755) when missing.
    type: path
    default: /etc/nvidia-imex/nodes_config.cfg
  max_nodes:
    description: Most entries allowed. An NVL72 rack has 18 compute trays.
    type: int
    default: 18
  allow_mixed_families:
    description: Allow entries of different kinds (IPv4, IPv6, host name) in one list.
    type: bool
    default: false
  allow_hostnames:
    description:
      - Allow host names. The daemon resolves them at start; IMEX from driver 570.158.01 is needed.
    type: bool
    default: true
  require_local:
    description:
      - Fail unless one entry is an address of this host (host names are resolved first).
        The daemon refuses to start otherwise (C(No matching network interface found)).
      - Off by default so the list can be written before the node's address is configured.
    type: bool
    default: false
  owner:
    description: Owner (name or uid) of the file, enforced at every run (and on the backup copy).
    type: str
    default: root
  group:
    description: Group (name or gid) of the file, enforced at every run (and on the backup copy).
    type: str
    default: root
  mode:
    description:
      - Mode of the file, octal (V('0644')) or symbolic (V('u=rw,g=r,o=r')), enforced at every run
        (and on the backup copy).
    type: raw
    default: '0644'
extends_documentation_fragment:
  - ansible.builtin.files
  - rackscale.imex._config_file
notes:
  - An entry counts as local when a socket can be bound to it; with C(ip_nonlocal_bind) enabled
    every address binds, so RV(local_index) may then name the first entry.
seealso:
  - module: rackscale.imex.imex_config
"""

EXAMPLES = r"""
- name: Node list of the rack, same order on every tray
  rackscale.imex.imex_nodes_config:
    nodes: "{{ groups['rack1'] | map('extract', hostvars, 'imex_address') | list }}"
    require_local: true
    backup: true
  register: nodes_config

- name: Host names instead of addresses
  rackscale.imex.imex_nodes_config:
    nodes:
      - rack1-tray01.fabric.example
      - rack1-tray02.fabric.example
"""

RETURN = r"""
nodes:
  description: The entries as written, in node-index order.
  returned: success
  type: list
  elements: str
  sample: [198.18.1.11, 198.18.1.12]
checksum:
  description: SHA-256 (hex) of the rendered file content; equal on every node of a healthy domain.
  returned: success
  type: str
  sample: 3c1f7a0d0f6e4c6b1c8f1e9c2e7d0b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c
local_index:
  description: Index of the first entry that is an address of this host, null when none is.
  returned: success
  type: int
  sample: 0
backup_file:
  description: Path of the backup copy, when O(backup=true) and the file changed.
  returned: when a backup was made (O(backup=true), the file existed and changed)
  type: str
  sample: /etc/nvidia-imex/nodes_config.cfg.1234.2026-11-22@10:00:00~
diff:
  description: Content before and after, with C(before_header) and C(after_header) naming the file.
  returned: when diff mode is enabled
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rackscale.imex.plugins.module_utils._files import (
    FileOpError,
    ensure_directory,
    replace_file,
)
from ansible_collections.rackscale.imex.plugins.module_utils._nodes import (
    FILE_GROUP,
    FILE_MODE,
    FILE_OWNER,
    MAX_NODES,
    NODES_CONFIG_PATH,
    NodesError,
    find_local,
    nodes_checksum,
    render_nodes,
    validate_nodes,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="str", required=True),
            path=dict(type="path", default=NODES_CONFIG_PATH),
            max_nodes=dict(type="int", default=MAX_NODES),
            allow_mixed_families=dict(type="bool", default=False),
            allow_hostnames=dict(type="bool", default=True),
            require_local=dict(type="bool", default=False),
            backup=dict(type="bool", default=False),
            owner=dict(type="str", default=FILE_OWNER),
            group=dict(type="str", default=FILE_GROUP),
            mode=dict(type="raw", default=FILE_MODE),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    try:
        entries = validate_nodes(
            params["nodes"],
            max_nodes=params["max_nodes"],
            allow_mixed_families=params["allow_mixed_families"],
            allow_hostnames=params["allow_hostnames"],
        )
    except NodesError as exc:
        module.fail_json(msg="%s: %s" % (path, exc))

    local = find_local(entries)
    if params["require_local"] and not local:
        module.fail_json(
            msg="%s: none of the entries (%s) is an address of this host; the IMEX daemon would refuse to start "
                "('No matching network interface found'). Check imex_address of this host or its network setup"
                % (path, ", ".join(entry.text for entry in entries)))
    if len(local) > 1:
        module.warn("%s: entries %s are all addresses of this host; the daemon can take only one node index"
                    % (path, ", ".join("nodes[%d] %r" % (i, entries[i].text) for i in local)))

    content = render_nodes(entries)
    try:
        created_dir = ensure_directory(module, os.path.dirname(os.path.abspath(path)), 0o755, 0, 0)
        outcome = replace_file(module, path, content, backup=params["backup"],
                               file_args=module.load_file_common_arguments(params, path=path))
    except FileOpError as exc:
        module.fail_json(msg=str(exc))

    result = dict(
        changed=created_dir or outcome["changed"],
        nodes=[entry.text for entry in entries],
        checksum=nodes_checksum(content),
        local_index=local[0] if local else None,
    )
    if outcome["backup_file"]:
        result["backup_file"] = outcome["backup_file"]
    if module._diff:
        result["diff"] = outcome["diff"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
