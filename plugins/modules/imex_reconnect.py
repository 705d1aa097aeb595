#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: imex_reconnect
short_description: Make a running IMEX daemon reconnect to its peers now (SIGUSR1), without a restart
version_added: 0.4.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Sends C(SIGUSR1) to the main process of the IMEX daemon's unit, as systemd knows it. The signal
    makes C(nvidia-imex) restart its outgoing connections (and resolve host names in its node list
    again) without becoming a new instance, so its peers keep what it exports and its jobs keep what
    they imported.
  - A daemon retries a peer it lost with a growing backoff (15, 31, 62, then 125 seconds). A peer that
    comes back (a tray back from repair, a replaced tray, a daemon started again) can wait that long
    before the running daemons try it again; the signal makes them try now.
  - The daemon takes C(SIGUSR1) at most once every 5 seconds and says nothing when it drops one. The
    time of each signal is kept under C(/run/rackscale-imex/signalled), shared with
    M(rackscale.imex.imex_tls_reload). When the daemon was signalled less than 5 seconds ago, the
    module waits the rest first.
  - A daemon that does not run is not signalled (the task is ok and says why). The main process is
    read before and after the signal; the same one after it means the daemon is the same instance.
options:
  service:
    description: The systemd unit of the IMEX daemon.
    type: str
    default: nvidia-imex
  reason:
    description: Why the daemon reconnects, for the task's message (for example the trays just started).
    type: str
    default: ''
attributes:
  check_mode:
    description: Can run in check mode and reports that a running daemon would be signalled, without signalling it.
    support: full
  diff_mode:
    description: Nothing to show; the module changes no file the operator manages.
    support: none
  idempotent:
    description: Not idempotent. Every run signals a running daemon; a play runs it only where the plan asks.
    support: none
  platform:
    description: Target OS families that can be operated against.
    support: full
    platforms: posix
notes:
  - Needs systemd (C(systemctl show), C(systemctl kill)) and coreutils C(timeout), which bounds each call.
seealso:
  - module: rackscale.imex.imex_tls_reload
  - name: IMEX signals
    description: What SIGUSR1 does to nvidia-imex, and how often it is processed.
    link: https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/signals.html
"""

EXAMPLES = r"""
- name: Make the running IMEX daemon reconnect to a tray back from repair
  rackscale.imex.imex_reconnect:
    service: nvidia-imex
    reason: rack1-tray03 was started
"""

RETURN = r"""
signalled:
  description: Whether SIGUSR1 was sent (in check mode, whether it would be).
  returned: always
  type: bool
  sample: true
main_pid_before:
  description: The daemon's main process before the signal; null when the daemon does not run.
  returned: always
  type: int
  sample: 4711
main_pid_after:
  description:
    - The daemon's main process after the signal. Equal to RV(main_pid_before) when the daemon is the same
      instance; another one (or null) is also said in a warning. In check mode, RV(main_pid_before).
  returned: always
  type: int
  sample: 4711
waited:
  description: Seconds waited before the signal, because the daemon was signalled less than 5 seconds before.
  returned: always
  type: float
  sample: 0.0
service:
  description: The unit.
  returned: always
  type: str
  sample: nvidia-imex
msg:
  description: What was done, or why the daemon was not signalled.
  returned: always
  type: str
  sample: "sent SIGUSR1 to nvidia-imex (MainPID 4711, still the same process): rack1-tray03 was started"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_record, _daemon_signal
from ansible_collections.rackscale.imex.plugins.module_utils._bounded import BoundedRunner


def main():
    module = AnsibleModule(
        argument_spec=dict(
            service=dict(type='str', default='nvidia-imex'),
            reason=dict(type='str', default=''),
        ),
        supports_check_mode=True,
    )
    service = module.params['service']
    reason = module.params['reason']
    try:
        _daemon_signal.signal_path(service)
    except _daemon_record.RecordError as error:
        module.fail_json(msg='service: %s' % error)
    runner = BoundedRunner(module)
    systemctl = module.get_bin_path('systemctl', opt_dirs=['/usr/bin', '/bin'])
    if not systemctl:
        module.fail_json(msg='systemctl not found on PATH, /usr/bin or /bin: it signals %s' % service)
    result = dict(changed=False, signalled=False, main_pid_before=None, main_pid_after=None, waited=0.0,
                  service=service)
    because = ': ' + reason if reason else ''
    try:
        before, state = _daemon_signal.main_process(runner, systemctl, service)
    except _daemon_signal.SignalError as error:
        module.fail_json(msg=str(error), **result)
    result.update(main_pid_before=before, main_pid_after=before)
    why_not = _daemon_signal.not_running(before, state)
    if why_not:
        # Nothing to reconnect: a daemon that starts later connects to its peers afresh.
        module.exit_json(msg='%s is %s: not signalled%s' % (service, why_not, because), **result)
    result.update(changed=True, signalled=True)
    if module.check_mode:
        module.exit_json(msg='would send SIGUSR1 to %s (MainPID %d)%s' % (service, before, because), **result)
    try:
        waited, warning = _daemon_signal.send_sigusr1(module, runner, systemctl, service)
    except _daemon_signal.SignalError as error:
        result.update(changed=False, signalled=False)
        module.fail_json(msg=str(error), **result)
    result['waited'] = round(waited, 3)
    if warning:
        module.warn(warning)
    try:
        after, _state = _daemon_signal.main_process(runner, systemctl, service)
    except _daemon_signal.SignalError as error:
        module.fail_json(msg='sent SIGUSR1 to %s (MainPID %d), then %s' % (service, before, error), **result)
    result['main_pid_after'] = after
    if after == before:
        said = 'still the same process'
    else:
        # The signal does not make a new instance; a main process that changed was restarted or stopped by
        # something else meanwhile, or died of the signal. The proof that follows judges the domain.
        said = 'now MainPID %s: not the same instance' % (after or 'none')
        module.warn('%s: MainPID %d before SIGUSR1, %s after it; its peers treat a new instance as a restart'
                    % (service, before, after or 'none'))
    waited_text = ', after waiting %.1f s for the 5 s limit' % waited if waited > 0 else ''
    module.exit_json(msg='sent SIGUSR1 to %s (MainPID %d, %s%s)%s' % (service, before, said, waited_text, because),
                     **result)


if __name__ == '__main__':
    main()
