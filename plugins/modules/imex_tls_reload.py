#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: imex_tls_reload
short_description: Make a running IMEX daemon reload its TLS files (SIGUSR1), prove it, then mark it
version_added: 0.4.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Sends C(SIGUSR1) to the main process of the IMEX daemon's unit, which makes C(nvidia-imex) read its
    file-based TLS credentials again without becoming a new instance (its peers keep what it exports).
  - The daemon takes C(SIGUSR1) at most once every 5 seconds and says nothing when it drops one. So the
    reload is proven before it is recorded. A TLS handshake to the daemon's own server port
    (C(SERVER_PORT) of O(config), on C(BIND_INTERFACE_IP) or else O(address)) must present the
    certificate of the C(IMEX_SERVER_CERT) file. While it presents another one, the signal is sent
    again each time 5 seconds have passed, until O(timeout).
  - A certificate that did not change (a new CA bundle alone) cannot show the reload in a handshake,
    nor can one when the handshake before the signal failed. The signal is then sent twice, more than
    5 seconds apart, so that the daemon took one after the files were written. The handshake must
    then present the certificate.
  - Only a proven reload writes O(mark) (atomically), which tells a later run that the TLS files older
    than it are in force. A reload not proven writes nothing, so the next run signals again, and the
    task fails with the fingerprint the daemon presented (RV(presented)) and the one expected
    (RV(expected)).
  - The daemon must read its TLS material from files (C(IMEX_AUTH_SOURCE=FILE), as the collection
    writes it); other sources are refused, naming the key.
options:
  service:
    description: The systemd unit of the IMEX daemon.
    type: str
    default: nvidia-imex
  config:
    description:
      - The daemon's C(config.cfg). C(SERVER_PORT) (default 50000), C(BIND_INTERFACE_IP), and the
        certificate and key files (C(IMEX_SERVER_CERT), C(IMEX_CLIENT_CERT), C(IMEX_CLIENT_KEY)) are read
        from it, and C(NETWORK_INTERFACE) for an IPv6 link-local address.
    type: path
    default: /etc/nvidia-imex/config.cfg
  address:
    description:
      - The tray's entry in the node list (an address or a host name). The daemon listens there when
        C(BIND_INTERFACE_IP) is empty, so the handshake goes there.
    type: str
    required: true
  mark:
    description: The file written after a proven reload.
    type: path
    required: true
  mark_content:
    description: What O(mark) holds, for example the run's id.
    type: str
    default: ''
  timeout:
    description:
      - Seconds to wait for the proof, from the first signal. At least 12, so that two signals 5
        seconds apart and their handshakes fit.
    type: int
    default: 20
attributes:
  check_mode:
    description:
      - Can run in check mode and reports that the daemon would be signalled and the mark written,
        without signalling or writing.
    support: full
  diff_mode:
    description: Returns the mark before and after.
    support: full
  idempotent:
    description: Not idempotent. Every run signals the daemon; a play runs it only where its TLS files changed.
    support: none
  platform:
    description: Target OS families that can be operated against.
    support: full
    platforms: posix
notes:
  - Needs systemd (C(systemctl kill)) and coreutils C(timeout), which bounds the call.
  - The time of each signal is kept under C(/run/rackscale-imex/signalled), shared with
    M(rackscale.imex.imex_reconnect). A first signal within 5 seconds of the last one waits the rest.
  - The handshake presents the tray's own certificate and key as client credentials, since the
    daemon asks its peers for one. The server certificate is compared by fingerprint, not verified.
seealso:
  - module: rackscale.imex.imex_tray_info
  - module: rackscale.imex.imex_reconnect
  - name: IMEX signals
    description: What SIGUSR1 does to nvidia-imex, and how often it is processed.
    link: https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/signals.html
"""

EXAMPLES = r"""
- name: Reload the TLS credentials of the IMEX daemon, proven, and mark it
  rackscale.imex.imex_tls_reload:
    service: nvidia-imex
    config: /etc/nvidia-imex/config.cfg
    address: 198.18.1.11
    mark: /etc/nvidia-imex/tls/reloaded
    mark_content: "{{ run_id }}"
"""

RETURN = r"""
proven:
  description: Whether the reload was proven (and O(mark) written). False only in check mode; otherwise the task fails.
  returned: success
  type: bool
  sample: true
how:
  description:
    - How it was proven. V(handshake) when the handshake presented the new certificate.
    - V(signal_interval) when the certificate did not change, or the handshake before the signal failed.
      Two signals were sent more than 5 s apart, and the handshake then presented the certificate.
  returned: always
  type: str
  sample: handshake
expected:
  description: SHA-256 fingerprint (hex) of the certificate in the C(IMEX_SERVER_CERT) file.
  returned: always
  type: str
  sample: 5f1c0d0b5a0e8e3c2f6b7d1e9a4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c
presented:
  description:
    - SHA-256 fingerprint (hex) of the certificate the daemon's server presented last; null when no
      handshake succeeded. Before the signal, see RV(presented_before).
  returned: always
  type: str
  sample: 5f1c0d0b5a0e8e3c2f6b7d1e9a4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c
presented_before:
  description: The fingerprint the daemon presented before the first signal; null when that handshake failed.
  returned: when not in check mode
  type: str
  sample: 0a9f8e7d6c5f1c0d0b5a0e8e3c2f6b7d1e9a4c3b2a1f0e9d8c7b6a5f4e3d2c1b
signals:
  description: How many times SIGUSR1 was sent.
  returned: always
  type: int
  sample: 1
endpoint:
  description: Where the handshake went, as host:port.
  returned: always
  type: str
  sample: 198.18.1.11:50000
mark:
  description: The mark file.
  returned: always
  type: str
  sample: /etc/nvidia-imex/tls/reloaded
msg:
  description: What was done, or why the reload is not proven.
  returned: always
  type: str
  sample: nvidia-imex presents the new certificate after SIGUSR1 (1 signal)
diff:
  description: The mark before and after, with C(before_header) and C(after_header) naming the file.
  returned: when diff mode is enabled and the mark is written
  type: dict
"""


from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_signal, _tls_reload
from ansible_collections.rackscale.imex.plugins.module_utils._bounded import BoundedRunner
from ansible_collections.rackscale.imex.plugins.module_utils._files import FileOpError, replace_file
from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import ConfigFile

MIN_TIMEOUT_SECONDS = 12
DEFAULT_SERVER_PORT = 50000


def daemon_endpoint(module, config_path, address):
    """(host, port, certificate file, client certificate file, client key file) from config.cfg."""
    try:
        with open(config_path, 'r') as handle:
            config = ConfigFile(handle.read())
    except (OSError, UnicodeDecodeError) as error:
        module.fail_json(msg='cannot read %s: %s' % (config_path, getattr(error, 'strerror', None) or error))
    source = config.get('IMEX_AUTH_SOURCE') or ''
    if source != 'FILE':
        module.fail_json(msg='%s: IMEX_AUTH_SOURCE is %r, not FILE: SIGUSR1 reloads TLS credentials read from files '
                             'only' % (config_path, source))
    files = {}
    for key in ('IMEX_SERVER_CERT', 'IMEX_CLIENT_CERT', 'IMEX_CLIENT_KEY'):
        files[key] = config.get(key) or ''
        if not files[key]:
            module.fail_json(msg='%s: %s is not set; the daemon has no TLS file to reload' % (config_path, key))
    port_text = config.get('SERVER_PORT') or str(DEFAULT_SERVER_PORT)
    try:
        port = int(port_text)
    except ValueError:
        module.fail_json(msg='%s: SERVER_PORT=%s is not a port number' % (config_path, port_text))
    host = config.get('BIND_INTERFACE_IP') or address
    interface = config.get('NETWORK_INTERFACE') or ''
    # An IPv6 link-local address reaches the daemon only through the interface config.cfg names.
    if interface and host.lower().startswith('fe80:') and '%' not in host:
        host = '%s%%%s' % (host, interface)
    return host, port, files['IMEX_SERVER_CERT'], files['IMEX_CLIENT_CERT'], files['IMEX_CLIENT_KEY']


def main():
    module = AnsibleModule(
        argument_spec=dict(
            service=dict(type='str', default='nvidia-imex'),
            config=dict(type='path', default='/etc/nvidia-imex/config.cfg'),
            address=dict(type='str', required=True),
            mark=dict(type='path', required=True),
            mark_content=dict(type='str', default=''),
            timeout=dict(type='int', default=20),
        ),
        supports_check_mode=True,
    )
    params = module.params
    service = params['service']
    if params['timeout'] < MIN_TIMEOUT_SECONDS:
        module.fail_json(msg='timeout=%d: at least %d s, so that two signals 5 s apart and their handshakes fit'
                             % (params['timeout'], MIN_TIMEOUT_SECONDS))
    host, port, server_cert, client_cert, client_key = daemon_endpoint(module, params['config'], params['address'])
    endpoint = '[%s]:%d' % (host, port) if ':' in host else '%s:%d' % (host, port)
    try:
        expected = _tls_reload.file_fingerprints(server_cert)[0]
    except OSError as error:
        module.fail_json(msg='cannot read the certificate %s: %s' % (server_cert, error.strerror or error))
    except _tls_reload.MaterialError as error:
        module.fail_json(msg=str(error))
    result = dict(changed=True, proven=False, how='handshake', expected=expected, presented=None, signals=0,
                  endpoint=endpoint, mark=params['mark'])
    content = params['mark_content'] + '\n'
    if module.check_mode:
        result['msg'] = 'would send SIGUSR1 to %s, prove the reload at %s and write %s' % (service, endpoint, params['mark'])
        if module._diff:
            result['diff'] = dict(before_header=params['mark'], after_header=params['mark'], after=content)
        module.exit_json(**result)

    runner = BoundedRunner(module)
    systemctl = module.get_bin_path('systemctl', opt_dirs=['/usr/bin', '/bin'])
    if not systemctl:
        module.fail_json(msg='systemctl not found on PATH, /usr/bin or /bin: it signals %s' % service)

    def presented():
        return _tls_reload.fingerprint(_tls_reload.presented_certificate(host, port, client_cert, client_key))

    def send_signal():
        # Shared with imex_reconnect: a signal within 5 s of the last one (by either module) waits the rest.
        try:
            _waited, warning = _daemon_signal.send_sigusr1(module, runner, systemctl, service,
                                                           interval=_tls_reload.SIGUSR1_INTERVAL_S)
        except _daemon_signal.SignalError as error:
            return str(error)
        if warning:
            module.warn(warning)
        return None

    try:
        before = presented()
    except OSError:
        before = None
    result['presented_before'] = before
    # A certificate the daemon was not seen to serve before the signal (the handshake failed) is proven as an
    # unchanged one is: two signals 5 s apart, then the handshake must present it.
    outcome = _tls_reload.prove_reload(send_signal, presented, expected,
                                       leaf_changed=before is not None and before != expected, timeout=params['timeout'])
    result.update(how=outcome['how'], presented=outcome['presented'], signals=outcome['signals'])
    if not outcome['proven']:
        if outcome['signals'] == 0:
            result['msg'] = outcome['error']
        else:
            shown = outcome['presented'] or 'no certificate'
            result['msg'] = ('%s did not prove its TLS reload within %d s after %d SIGUSR1: the handshake at %s presented '
                             '%s, not the certificate of %s (%s)%s. Nothing was marked: the next run signals it again.'
                             % (service, params['timeout'], outcome['signals'], endpoint, shown, server_cert, expected,
                                '; ' + outcome['error'] if outcome['error'] else ''))
        result['changed'] = outcome['signals'] > 0
        module.fail_json(**result)
    try:
        written = replace_file(module, params['mark'], content, owner='root', group='root', mode='0644')
    except FileOpError as error:
        result['msg'] = 'the reload is proven but the mark cannot be written: %s' % error
        module.fail_json(**result)
    if module._diff:
        result['diff'] = written['diff']
    result['msg'] = ('%s presents the new certificate after SIGUSR1 (%d signal%s)' if outcome['how'] == 'handshake'
                     else '%s was signalled %d time%s more than 5 s apart and still presents its certificate') % (
        service, outcome['signals'], '' if outcome['signals'] == 1 else 's')
    result['proven'] = True
    module.exit_json(**result)


if __name__ == '__main__':
    main()
