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
  hosts_file:
    description:
      - The hosts file whose managed block of slot names the daemon resolves its node list through.
        The signal makes it resolve them again, so after a signal the daemon took (the same main
        process before and after it) the digest of the block, read before the signal, is written into
        the record of what the instance loaded (see M(rackscale.imex.imex_daemon_record)), where that
        record is of the running instance (its systemd C(InvocationID)). A later run then knows which
        block the daemon resolved, and signals it again when the block on disk is another one.
      - A daemon without a record of its instance (started by hand or by an older release of the
        collection) gets none, and the task says so in RV(recorded_hosts_block).
      - Omitted, no record is touched.
    type: path
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
    hosts_file: /etc/hosts
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
recorded_hosts_block:
  description:
    - Whether the digest of the hosts block of O(hosts_file) was written into the record of the
      daemon's instance after the signal; false in check mode, without O(hosts_file), or when no record
      of the running instance exists (then RV(msg) says so).
  returned: always
  type: bool
  sample: true
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
from ansible_collections.rackscale.imex.plugins.module_utils._files import FileOpError, replace_file
from ansible_collections.rackscale.imex.plugins.module_utils._running_release import parse_show


def record_resolved_hosts(module, runner, systemctl, service, digest):
    """Write ``digest`` as the hosts block the running instance of ``service`` resolved into the record of that
    instance. Returns (written, why not or None)."""
    rc, out, err, hung = runner.run([systemctl, 'show', '-p', 'InvocationID', '--', service],
                                    _daemon_signal.SYSTEMCTL_TIMEOUT_SECONDS)
    instance = None if hung or rc != 0 else _daemon_record.invocation_id(parse_show(out).get('InvocationID'))
    if instance is None:
        return False, 'systemd showed no InvocationID of %s%s' % (service, ': ' + (err or out).strip() if rc else '')
    path = _daemon_record.record_path(service)
    record = _daemon_record.read(service)
    if record is None or record['invocation_id'] != instance:
        # Started by hand, at boot or by an older release: nothing recorded of its files either.
        return False, 'no record of what this instance of %s loaded (%s): the hosts block it resolved is not recorded' % (
            service, path)
    unsafe = _daemon_record.unsafe_place(path)
    if unsafe:
        return False, 'the hosts block %s resolved is not recorded in %s: %s' % (service, path, unsafe)
    try:
        replace_file(module, path, _daemon_record.build(service, instance, record['files'], hosts_block=digest),
                     mode='0600')
    except FileOpError as error:
        return False, 'the hosts block %s resolved is not recorded: %s' % (service, error)
    return True, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            service=dict(type='str', default='nvidia-imex'),
            reason=dict(type='str', default=''),
            hosts_file=dict(type='path'),
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
                  service=service, recorded_hosts_block=False)
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
    # Read before the signal: the daemon resolves after it, so it resolves this block or a later one; a later
    # one only makes the next run signal once more.
    digest, hosts_why_not = None, None
    if module.params['hosts_file']:
        try:
            digest = _daemon_record.hosts_block_digest(module.params['hosts_file'])
        except _daemon_record.RecordError as error:
            hosts_why_not = 'the hosts block it resolves is not recorded: %s' % error
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
    if after == before and module.params['hosts_file'] and not hosts_why_not:
        # The same process took the signal (sent after the 5 s limit, so not dropped): it resolves again.
        result['recorded_hosts_block'], hosts_why_not = record_resolved_hosts(module, runner, systemctl, service, digest)
    waited_text = ', after waiting %.1f s for the 5 s limit' % waited if waited > 0 else ''
    module.exit_json(msg='sent SIGUSR1 to %s (MainPID %d, %s%s)%s%s' % (
        service, before, said, waited_text, because, '; ' + hosts_why_not if hosts_why_not else ''), **result)


if __name__ == '__main__':
    main()
