#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
module: imex_daemon_log
short_description: Read the last lines of the IMEX daemon's own log on a tray
version_added: 0.2.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Returns the last lines of the C(nvidia-imex) daemon's log, so that a failure names why a tray is
    unhealthy (for example C(No matching network interface found ...)) without a login to the tray.
  - The daemon logs to the file named by C(LOG_FILE_NAME) in its config (C(/var/log/nvidia-imex.log)
    when the key is absent). When the value is empty, or the file cannot be read, the lines come from
    the journal of the unit (C(journalctl -u SERVICE)), where the daemon's stderr goes.
  - The file is read as root and its lines go into reports, so it is read only when nobody but root
    can have put it there. It is opened without following a symbolic link (C(O_NOFOLLOW)), and
    refused (RV(refused) says why; the journal is read instead) when its path is not absolute, when
    a directory on its way is not owned by root or is writable by anyone else (by its group, unless
    that group is root), or when it is not a regular file owned by root.
  - Bounded on every side, whatever the log holds. At most O(lines) lines and O(max_bytes) bytes,
    the end of the file only, C(journalctl) stopped after O(timeout) seconds; control characters
    are escaped.
  - Read-only; changes nothing on the target.
options:
  config:
    description: Path of the daemon's C(config.cfg), where C(LOG_FILE_NAME) is read.
    type: path
    default: /etc/nvidia-imex/config.cfg
  service:
    description: The daemon's systemd unit, for the journal.
    type: str
    default: nvidia-imex
  lines:
    description: How many of the last lines to return (1 to 200).
    type: int
    default: 20
  max_bytes:
    description: At most this many bytes of lines in all (256 to 65536); the oldest lines go first.
    type: int
    default: 4096
  timeout:
    description: Seconds C(journalctl) may take before it is stopped.
    type: int
    default: 10
extends_documentation_fragment:
  - rackscale.imex._read_only
notes:
  - The imex role reads this only on trays a failed proof names, so a healthy run does not pay for it.
  - Distributions whose C(/var/log) is group-writable (Ubuntu ships it C(root:syslog 0775)) have the
    default log file refused; point C(LOG_FILE_NAME) at a file in a directory only root can write
    (for example C(/var/log/nvidia-imex/imex.log)) to have it read.
seealso:
  - module: rackscale.imex.imex_status
"""

EXAMPLES = r"""
- name: Show why the daemon on this tray is not READY
  rackscale.imex.imex_daemon_log:
    lines: 10
  register: imex_log

- name: Print it
  ansible.builtin.debug:
    msg: "{{ imex_log.lines }}"
"""

RETURN = r"""
source:
  description: Where the lines come from, C(file) or C(journal).
  returned: success
  type: str
  sample: file
path:
  description: The log file read, when RV(source=file).
  returned: when RV(source=file)
  type: str
  sample: /var/log/nvidia-imex.log
lines:
  description: The last lines, oldest first, control characters escaped.
  returned: success
  type: list
  elements: str
  sample:
    - "[Nov 24 2026 14:02:11] [ERROR] [tid 41] No matching network interface found for any IP addresses
      in the node configuration file /etc/nvidia-imex/nodes_config.cfg."
truncated:
  description: True when older lines were left out to stay within O(lines) and O(max_bytes).
  returned: success
  type: bool
  sample: true
refused:
  description: Why the log file named by C(LOG_FILE_NAME) was not read (the lines come from the journal then).
  returned: when the config names a log file that was not read
  type: str
  sample: "/tmp/imex.log is not read: its directory /tmp is writable by everyone (mode 1777, group 0)"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rackscale.imex.plugins.module_utils._bounded import BoundedRunner
from ansible_collections.rackscale.imex.plugins.module_utils._daemon_log import (
    LogRefused,
    last_lines,
    log_file_of,
    read_tail,
)
from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import CONFIG_PATH

BOUNDS = {'lines': (1, 200), 'max_bytes': (256, 65536), 'timeout': (1, 300)}


def _config_text(path):
    try:
        with open(path, encoding='utf-8', errors='replace') as handle:
            return handle.read()
    except OSError:
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            config=dict(type='path', default=CONFIG_PATH),
            service=dict(type='str', default='nvidia-imex'),
            lines=dict(type='int', default=20),
            max_bytes=dict(type='int', default=4096),
            timeout=dict(type='int', default=10),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name, (low, high) in BOUNDS.items():
        if not low <= params[name] <= high:
            module.fail_json(msg='%s must be between %d and %d, got %d' % (name, low, high, params[name]))

    config_text = _config_text(params['config'])
    # Without a readable config the daemon did not start with a log file of ours to read: the journal.
    log_file = log_file_of(config_text) if config_text is not None else ''
    refused = None
    if log_file:
        try:
            text = read_tail(log_file)
        except LogRefused as exc:
            refused = str(exc)
        except OSError as exc:
            refused = '%s cannot be read: %s' % (log_file, exc.strerror or exc)
        else:
            lines, truncated = last_lines(text, params['lines'], params['max_bytes'])
            module.exit_json(changed=False, source='file', path=log_file, lines=lines, truncated=truncated)
    # The file's lines are in the journal only when the daemon could not open it either; the reason
    # the file was not read goes with them, so that a report never passes one for the other.
    extra = {'refused': refused} if refused else {}

    journalctl = module.get_bin_path('journalctl', opt_dirs=['/usr/bin', '/bin'])
    if not journalctl:
        module.fail_json(msg='no readable log file (LOG_FILE_NAME=%s%s) and no journalctl on the tray'
                             % (log_file, ': %s' % refused if refused else ''), **extra)
    args = [journalctl, '-u', params['service'], '-n', str(params['lines']), '--no-pager', '-o', 'short-iso']
    rc, out, err, hung = BoundedRunner(module).run(args, params['timeout'])
    if hung:
        module.fail_json(msg='%s did not finish within %d s and was stopped' % (' '.join(args), params['timeout']),
                         **extra)
    if rc != 0:
        module.fail_json(msg='%s returned rc %d: %s' % (' '.join(args), rc, (err or out).strip()[:500]), **extra)
    lines, truncated = last_lines(out, params['lines'], params['max_bytes'])
    module.exit_json(changed=False, source='journal', lines=lines, truncated=truncated, **extra)


if __name__ == '__main__':
    main()
