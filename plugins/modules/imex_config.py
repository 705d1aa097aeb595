#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: imex_config
short_description: Set keys in the NVIDIA IMEX daemon configuration file (config.cfg)
version_added: 0.1.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Edits C(KEY=value) lines of the IMEX daemon's C(config.cfg) in place. Only the lines of the
    keys in O(settings) change; comments, blank lines, order, other keys and commented-out
    C(#KEY=) examples are kept byte for byte. Keys not yet set are appended at the end.
  - Values of the keys documented by NVIDIA are validated (ports, enumerations, 0/1 flags, log
    level, integers, IP addresses, paths of at most 256 characters) before anything is written.
  - If a key appears on several lines, every line gets the new value, since which one the
    daemon honours is not documented.
  - The daemon reads the file only at start; restart every node of the domain after a change.
options:
  settings:
    description:
      - Keys and values to set, for example C(IMEX_CMD_PORT=50005). A null value removes every
        active line of the key.
      - Values may be strings or integers; V(true)/V(false) are accepted for the 0/1 flag keys.
        Values must be single lines without leading or trailing blanks and without C(#).
    type: dict
    required: true
  path:
    description: The configuration file.
    type: path
    default: /etc/nvidia-imex/config.cfg
  allow_unknown:
    description:
      - Allow keys that are not documented for IMEX. Such values are only checked to be single lines.
      - Keys are case-sensitive; a key differing only in case from a known one is reported.
    type: bool
    default: false
  create:
    description:
      - Create O(path) (parent directory 0755) when it is missing.
      - By default a missing file is an error, because the file is a dpkg conffile shipped by the
        C(nvidia-imex) package; a missing file usually means the package is not installed.
    type: bool
    default: false
  owner:
    description:
      - Owner of O(path), enforced at every run (and on the backup copy); a file the daemon trusts
        must not be writable by anyone but root.
    type: str
    default: root
  group:
    description: Group of O(path), enforced at every run (and on the backup copy).
    type: str
    default: root
  mode:
    description:
      - Mode of O(path), octal (V('0644')) or symbolic (V('u=rw,g=r,o=r')), enforced at every run
        (and on the backup copy), so that a loosened file (V('0666')) is repaired.
    type: raw
    default: '0644'
extends_documentation_fragment:
  - ansible.builtin.files
  - rackscale.imex._config_file
seealso:
  - module: rackscale.imex.imex_nodes_config
  - name: IMEX configuration (NVIDIA IMEX guide)
    description: Meaning of every key.
    link: https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/config.html
"""

EXAMPLES = r"""
- name: Enable the command service that nvidia-imex-ctl -N needs
  rackscale.imex.imex_config:
    settings:
      IMEX_CMD_ENABLED: 1
      IMEX_CMD_PORT: 50005
  register: imex_config

- name: Bind peer traffic to the fabric address and skip the recovery quorum
  rackscale.imex.imex_config:
    settings:
      BIND_INTERFACE_IP: "{{ imex_address }}"
      IMEX_WAIT_FOR_QUORUM: NONE
    backup: true

- name: Drop a key
  rackscale.imex.imex_config:
    settings:
      STATS_FILE_NAME: null
"""

RETURN = r"""
settings:
  description: Effective value of every key in O(settings) after the edit (null for removed keys).
  returned: success
  type: dict
  sample: {IMEX_CMD_ENABLED: "1", IMEX_CMD_PORT: "50005"}
backup_file:
  description: Path of the backup copy.
  returned: when a backup was made (O(backup=true), the file existed and changed)
  type: str
  sample: /etc/nvidia-imex/config.cfg.1234.2026-11-22@10:00:00~
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
    read_text,
    replace_file,
)
from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import (
    CONFIG_GROUP,
    CONFIG_MODE,
    CONFIG_OWNER,
    CONFIG_PATH,
    ConfigError,
    apply_settings,
    validate_settings,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            settings=dict(type="dict", required=True),
            path=dict(type="path", default=CONFIG_PATH),
            allow_unknown=dict(type="bool", default=False),
            backup=dict(type="bool", default=False),
            create=dict(type="bool", default=False),
            owner=dict(type="str", default=CONFIG_OWNER),
            group=dict(type="str", default=CONFIG_GROUP),
            mode=dict(type="raw", default=CONFIG_MODE),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    try:
        settings = validate_settings(params["settings"], allow_unknown=params["allow_unknown"])
    except ConfigError as exc:
        module.fail_json(msg="%s: %s" % (path, exc))

    try:
        current = read_text(path)
        created_dir = False
        if current is None:
            if not params["create"]:
                module.fail_json(
                    msg="%s does not exist. It is the conffile shipped by the nvidia-imex package: install "
                        "the package first, or set create=true to start from an empty file" % path)
            current = ""
            created_dir = ensure_directory(module, os.path.dirname(os.path.abspath(path)), 0o755, 0, 0)
        content, effective = apply_settings(current, settings)
        outcome = replace_file(module, path, content, backup=params["backup"],
                               file_args=module.load_file_common_arguments(params, path=path))
    except FileOpError as exc:
        module.fail_json(msg=str(exc))

    result = dict(changed=created_dir or outcome["changed"], settings=effective)
    if outcome["backup_file"]:
        result["backup_file"] = outcome["backup_file"]
    if module._diff:
        result["diff"] = outcome["diff"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
