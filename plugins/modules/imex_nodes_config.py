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
  hosts_entries:
    description:
      - The managed block of O(hosts_path) that maps the node list's host names (slot names) to addresses,
        written in the same run as the node list; V([]) removes the block. Not given, O(hosts_path) is not
        touched.
      - Everything outside the block (what cloud-init, the operator or another tool keep there) is kept as
        it is; the file keeps its owner, group and mode. A name that a line outside the block maps too is
        refused, naming the line, as are markers broken by hand.
      - With O(require_local), host names of O(nodes) are resolved through these entries.
    type: list
    elements: dict
    version_added: 0.4.0
    suboptions:
      address:
        description: IPv4 or IPv6 address.
        type: str
        required: true
      name:
        description: Host name (RFC 1123), each used once.
        type: str
        required: true
  hosts_path:
    description: The hosts file of O(hosts_entries).
    type: path
    default: /etc/hosts
    version_added: 0.4.0
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

- name: Slot names, mapped to the trays' addresses in a managed block of /etc/hosts
  rackscale.imex.imex_nodes_config:
    nodes: [rack1-slot-00, rack1-slot-01]
    hosts_entries:
      - {address: 198.18.1.11, name: rack1-slot-00}
      - {address: 198.18.1.12, name: rack1-slot-01}
    require_local: true
    backup: true
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
nodes_changed:
  description: Whether the node list changed (content or attributes).
  returned: success
  type: bool
  version_added: 0.4.0
hosts_changed:
  description: Whether the managed block of O(hosts_path) changed; V(false) without O(hosts_entries).
  returned: success
  type: bool
  version_added: 0.4.0
hosts_checksum:
  description: SHA-256 of the managed block as written (markers included); V(null) for no block.
  returned: when O(hosts_entries) is given
  type: str
  version_added: 0.4.0
hosts_backup_file:
  description: Path of the backup copy of O(hosts_path), when O(backup=true) and its block changed.
  returned: when a backup of O(hosts_path) was made
  type: str
  version_added: 0.4.0
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
  description:
    - Content before and after, with C(before_header) and C(after_header) naming the file; a list of the
      node list's and the hosts file's when the managed block of O(hosts_path) changed.
  returned: when diff mode is enabled
  type: raw
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rackscale.imex.plugins.module_utils._files import (
    FileOpError,
    ensure_directory,
    read_text,
    replace_file,
)
from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import (
    HOSTS_PATH,
    HostsBlockError,
    block_digest,
    names_outside,
    replace_block,
    split,
    validate_entries,
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
            hosts_entries=dict(type="list", elements="dict", options=dict(
                address=dict(type="str", required=True),
                name=dict(type="str", required=True),
            )),
            hosts_path=dict(type="path", default=HOSTS_PATH),
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

    hosts = None
    if params["hosts_entries"] is not None:
        hosts = _hosts_text(module, params["hosts_path"], params["hosts_entries"])
    resolver = {}
    if hosts is not None:
        # The names resolve through the block about to be written (also in check mode, before it is).
        for address, name in hosts["entries"]:
            resolver.setdefault(name.rstrip(".").lower(), []).append(address)
    local = find_local(entries, **({"resolver": lambda name: resolver.get(name.rstrip(".").lower(), [])}
                                   if hosts is not None else {}))
    if params["require_local"] and not local:
        module.fail_json(
            msg="%s: none of the entries (%s) is an address of this host; the IMEX daemon would refuse to start "
                "('No matching network interface found'). Check imex_address of this host or its network setup"
                % (path, ", ".join(entry.text for entry in entries)))
    if len(local) > 1:
        module.warn("%s: entries %s are all addresses of this host; the daemon can take only one node index"
                    % (path, ", ".join("nodes[%d] %r" % (i, entries[i].text) for i in local)))

    content = render_nodes(entries)
    hosts_outcome = None
    try:
        # The block first: the daemon that starts on the new node list resolves its names through it.
        if hosts is not None:
            # The hosts file keeps its owner, group and mode (no file arguments: those are the node list's).
            hosts_outcome = replace_file(module, params["hosts_path"], hosts["text"], backup=params["backup"])
        created_dir = ensure_directory(module, os.path.dirname(os.path.abspath(path)), 0o755, 0, 0)
        outcome = replace_file(module, path, content, backup=params["backup"],
                               file_args=module.load_file_common_arguments(params, path=path))
    except FileOpError as exc:
        module.fail_json(msg=str(exc))

    nodes_changed = created_dir or outcome["changed"]
    hosts_changed = bool(hosts_outcome and hosts_outcome["changed"])
    result = dict(
        changed=nodes_changed or hosts_changed,
        nodes_changed=nodes_changed,
        hosts_changed=hosts_changed,
        nodes=[entry.text for entry in entries],
        checksum=nodes_checksum(content),
        local_index=local[0] if local else None,
    )
    if outcome["backup_file"]:
        result["backup_file"] = outcome["backup_file"]
    if hosts is not None:
        result["hosts_checksum"] = hosts["checksum"]
        if hosts_outcome["backup_file"]:
            result["hosts_backup_file"] = hosts_outcome["backup_file"]
    if module._diff:
        result["diff"] = [outcome["diff"], hosts_outcome["diff"]] if hosts_changed else outcome["diff"]
    module.exit_json(**result)


def _hosts_text(module, path, wanted):
    """{text, entries, checksum} of the hosts file with its block holding ``wanted`` (None where no block is
    wanted and there is no file); fails naming what is wrong (an entry, broken markers, a slot name mapped
    outside the block) before anything is written."""
    try:
        entries = validate_entries(wanted)
        current = read_text(path)
        if current is None and not entries:
            return None  # no block wanted and no file: nothing to create
        text = replace_block(current or "", entries)
        outside = names_outside(text, [name for _address, name in entries])
    except HostsBlockError as exc:
        module.fail_json(msg="%s: %s" % (path, exc))
    except FileOpError as exc:
        module.fail_json(msg=str(exc))
    if outside:
        named = "; ".join("%s (line %s)" % (name, ", ".join(map(str, lines))) for name, lines in sorted(outside.items()))
        module.fail_json(msg="%s: lines outside the block of rackscale.imex map %s too: the resolver could answer with "
                             "them; remove them" % (path, named))
    return dict(text=text, entries=entries, checksum=block_digest(split(text)[1]))


if __name__ == "__main__":
    main()
