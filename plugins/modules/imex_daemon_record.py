#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: imex_daemon_record
short_description: Record what a freshly started IMEX daemon loaded, tied to its systemd instance
version_added: 0.4.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Run right after a start of the IMEX daemon's unit. Writes the SHA-256 of each of O(files) (the
    daemon's C(config.cfg) and node list, which it reads only when it starts) together with the unit's
    systemd C(InvocationID), which is new for every start of the unit.
  - The record lets a later run tell whether the running daemon runs what is on disk by content, not by
    change times, which a no-op C(chmod), C(chown), C(setfacl), C(restorecon), a backup tool, an
    identical rewrite or a clock step move. M(rackscale.imex.imex_tray_info) reads it back in
    RV(rackscale.imex.imex_tray_info#module:services_instance).
  - The record is C(/run/rackscale-imex/loaded/<service>.json), under C(/run) so that a reboot clears it
    together with the instance it describes. It is written atomically; its directory is created
    (mode 0700) when missing. A symbolic link there, or a directory or file of another owner or
    writable by group or others, is refused naming it.
  - A unit that has no instance (never started, or not running) gets no record and the task reports no
    change, as a record belongs to a running instance only.
options:
  service:
    description: The systemd unit of the IMEX daemon.
    type: str
    default: nvidia-imex
  files:
    description:
      - The files the daemon read when it started, whose content the record keeps. A file that does not
        exist is recorded as absent (null).
    type: list
    elements: path
    required: true
  hosts_file:
    description:
      - The hosts file whose managed block of slot names (see M(rackscale.imex.imex_nodes_config)) the
        daemon resolves the names of its node list through. The digest of that block is recorded as
        what the instance resolved (null when the file holds none), so that a later run signals the
        daemon to resolve again when the block on disk is another one.
      - A file that cannot be read, or whose markers are broken, is said in a warning and leaves the
        record without the digest.
      - Omitted, the record says nothing of the hosts block.
    type: path
attributes:
  check_mode:
    description:
      - Can run in check mode and reports whether the record of the unit's current instance would be
        written, without writing it. In check mode no daemon was started, so the prediction is made
        for the instance that runs.
    support: full
  diff_mode:
    description: Returns the record before and after.
    support: full
  idempotent:
    description: Recording the same instance and the same file contents again reports no change.
    support: full
  platform:
    description: Target OS families that can be operated against.
    support: full
    platforms: posix
notes:
  - Needs systemd (C(systemctl show -p InvocationID)) and coreutils C(timeout), which bounds the call.
  - The files are read after the start; record right after it, in the same run that wrote them.
seealso:
  - module: rackscale.imex.imex_tray_info
"""

EXAMPLES = r"""
- name: Start the IMEX daemon
  ansible.builtin.systemd_service:
    name: nvidia-imex
    state: started
  register: imex_start

- name: Record what the daemon just started loaded
  rackscale.imex.imex_daemon_record:
    service: nvidia-imex
    files:
      - /etc/nvidia-imex/nodes_config.cfg
      - /etc/nvidia-imex/config.cfg
    hosts_file: /etc/hosts
  when: imex_start is changed
"""

RETURN = r"""
recorded:
  description: Whether the unit has an instance to record (false when it has none; nothing was written).
  returned: success
  type: bool
  sample: true
invocation_id:
  description: The systemd InvocationID of the unit's instance; null when it has none.
  returned: success
  type: str
  sample: 3b1c9e0f5d2a4c6e8f0a1b2c3d4e5f60
files:
  description: Each of O(files) mapped to the SHA-256 (hex) of its content, null when it does not exist.
  returned: when RV(recorded) is true
  type: dict
  sample: {/etc/nvidia-imex/config.cfg: 0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0}
hosts_block:
  description: The SHA-256 (hex) of the managed block of O(hosts_file) recorded; null when the file holds none.
  returned: when RV(recorded) is true and the digest of O(hosts_file) was recorded
  type: str
  sample: 5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592
path:
  description: The record file.
  returned: success
  type: str
  sample: /run/rackscale-imex/loaded/nvidia-imex.json
msg:
  description: Why nothing was recorded.
  returned: when RV(recorded) is false
  type: str
  sample: nvidia-imex has no running instance (ActiveState=failed); nothing recorded
diff:
  description: The record before and after, with C(before_header) and C(after_header) naming the file.
  returned: when diff mode is enabled and RV(recorded) is true
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_record
from ansible_collections.rackscale.imex.plugins.module_utils._bounded import BoundedRunner
from ansible_collections.rackscale.imex.plugins.module_utils._files import FileOpError, ensure_directory, replace_file
from ansible_collections.rackscale.imex.plugins.module_utils._running_release import parse_show

SYSTEMCTL_TIMEOUT_SECONDS = 30
# States of a unit whose current InvocationID names a process that runs or is being started.
RUNNING_STATES = ('active', 'activating', 'reloading')


def current_instance(module, runner, service):
    """(InvocationID or None, why there is none or None)."""
    systemctl = module.get_bin_path('systemctl', opt_dirs=['/usr/bin', '/bin'])
    if not systemctl:
        module.fail_json(msg='systemctl not found on PATH, /usr/bin or /bin: the record ties the files to the '
                             'systemd instance of %s' % service)
    rc, out, err, hung = runner.run([systemctl, 'show', '-p', 'InvocationID', '-p', 'ActiveState', '--', service],
                                    SYSTEMCTL_TIMEOUT_SECONDS)
    if hung or rc != 0:
        said = (err or out).strip()
        module.fail_json(msg='systemctl show %s %s%s' % (
            service, 'did not answer within %d s' % SYSTEMCTL_TIMEOUT_SECONDS if hung else 'failed (rc %d)' % rc,
            ': ' + said if said else ''))
    show = parse_show(out)
    state = show.get('ActiveState') or 'unknown'
    instance = _daemon_record.invocation_id(show.get('InvocationID'))
    if state not in RUNNING_STATES or instance is None:
        return None, '%s has no running instance (ActiveState=%s); nothing recorded' % (service, state)
    return instance, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            service=dict(type='str', default='nvidia-imex'),
            files=dict(type='list', elements='path', required=True),
            hosts_file=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    service = module.params['service']
    try:
        path = _daemon_record.record_path(service)
    except _daemon_record.RecordError as error:
        module.fail_json(msg='service: %s' % error)
    runner = BoundedRunner(module)
    instance, why_not = current_instance(module, runner, service)
    if instance is None:
        module.exit_json(changed=False, recorded=False, invocation_id=None, path=path, msg=why_not)
    digests = {}
    for name in module.params['files']:
        try:
            digests[name] = _daemon_record.file_digest(name)
        except OSError as error:
            module.fail_json(msg='cannot read %s to record what %s loaded: %s' % (name, service, error.strerror or error))
    resolved = {}
    if module.params['hosts_file']:
        try:
            resolved['hosts_block'] = _daemon_record.hosts_block_digest(module.params['hosts_file'])
        except _daemon_record.RecordError as error:
            module.warn('the hosts block %s resolved is not recorded: %s' % (service, error))
    unsafe = _daemon_record.unsafe_place(path)
    if unsafe:
        module.fail_json(msg='refusing to record what %s loaded in %s: %s' % (service, path, unsafe))
    try:
        created = ensure_directory(module, os.path.dirname(path), 0o700, None, None)
        outcome = replace_file(module, path, _daemon_record.build(service, instance, digests, **resolved), mode='0600')
    except FileOpError as error:
        module.fail_json(msg=str(error))
    result = dict(changed=created or outcome['changed'], recorded=True, invocation_id=instance, files=digests, path=path,
                  **resolved)
    if module._diff:
        result['diff'] = outcome['diff']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
