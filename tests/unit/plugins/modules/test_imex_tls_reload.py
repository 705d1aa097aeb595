# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""imex_tls_reload against a loopback mTLS server that reloads its files when systemctl signals it."""
from __future__ import annotations

import hashlib
from unittest import mock

import pytest
from cryptography.hazmat.primitives import serialization

from ansible.module_utils import basic

from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_signal, _tls_reload
from ansible_collections.rackscale.imex.plugins.modules import imex_tls_reload
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import cert_pem, make_ca, make_tray_cert
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_server import TlsServer, server_context, write_material

TIMEOUT = '/usr/bin/timeout'
SYSTEMCTL = '/usr/bin/systemctl'
CA = make_ca()
OLD = make_tray_cert(CA, ips=['127.0.0.1'])
NEW = make_tray_cert(CA, ips=['127.0.0.1'])


def der_sha256(cert):
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


@pytest.fixture
def tray(tmp_path, monkeypatch):
    """A daemon on loopback serving OLD; the tray's files hold NEW; config.cfg names them and the port."""
    monkeypatch.setattr(_tls_reload, 'SIGUSR1_INTERVAL_S', 0.3)
    monkeypatch.setattr(_tls_reload, 'POLL_INTERVAL_S', 0.05)
    monkeypatch.setattr(imex_tls_reload, 'MIN_TIMEOUT_SECONDS', 1)
    monkeypatch.setattr(_daemon_signal, 'SIGNAL_DIR', str(tmp_path / 'signalled'))
    ca_path = tmp_path / 'ca.crt'
    ca_path.write_text(cert_pem(CA[0]))
    old = write_material(tmp_path, 'old', *OLD)
    cert, key = write_material(tmp_path, 'tray', *NEW)
    server = TlsServer(server_context(*old, str(ca_path)))
    config = tmp_path / 'config.cfg'
    config.write_text('IMEX_ENABLE_AUTH_ENCRYPTION=1\nIMEX_AUTH_SOURCE=FILE\nSERVER_PORT=%d\nIMEX_SERVER_CERT=%s\n'
                      'IMEX_SERVER_KEY=%s\nIMEX_CLIENT_CERT=%s\nIMEX_CLIENT_KEY=%s\nIMEX_SERVER_CERT_AUTH=%s\n'
                      % (server.port, cert, key, cert, key, ca_path))
    server.files = (cert, key, str(ca_path))
    yield tmp_path, server, config
    server.close()


def run(run_module, tray, takes_signal=True, check=False, rc=0, **args):
    tmp_path, server, config = tray
    calls = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return {'timeout': TIMEOUT, 'systemctl': SYSTEMCTL}.get(name)

    def run_command(self, cmd, **kwargs):
        calls.append(list(cmd))
        if takes_signal and rc == 0:
            server.active = server_context(*server.files)
        return rc, '', 'Failed to kill unit nvidia-imex.service: Unit not loaded.' if rc else ''

    params = dict(config=str(config), address='127.0.0.1', mark=str(tmp_path / 'reloaded'), mark_content='run-7',
                  timeout=2)
    params.update(args)
    with mock.patch.multiple(basic.AnsibleModule, get_bin_path=get_bin_path, run_command=run_command):
        result = run_module(imex_tls_reload, params, check=check)
    return result, calls


def test_a_reload_is_proven_by_the_new_certificate_then_marked(run_module, tray):
    result, calls = run(run_module, tray)
    assert result['_exit_code'] == 0, result['msg']
    assert result['proven'] is True and result['how'] == 'handshake' and result['signals'] == 1
    assert result['presented_before'] == der_sha256(OLD[0])
    assert result['presented'] == result['expected'] == der_sha256(NEW[0])
    assert calls == [[TIMEOUT, '-k', '5', '30', SYSTEMCTL, 'kill', '--signal=SIGUSR1', '--kill-whom=main', '--',
                      'nvidia-imex']]
    assert (tray[0] / 'reloaded').read_text() == 'run-7\n'
    assert result['endpoint'] == '127.0.0.1:%d' % tray[1].port


def test_the_time_of_each_signal_is_kept_where_imex_reconnect_reads_it(run_module, tray):
    result, _calls = run(run_module, tray)
    assert result['_exit_code'] == 0
    assert _daemon_signal.last_signal(_daemon_signal.signal_path('nvidia-imex')) is not None


def test_a_reload_not_proven_writes_no_mark_and_names_what_the_daemon_presented(run_module, tray):
    result, calls = run(run_module, tray, takes_signal=False)
    assert result['_exit_code'] == 1 and result['proven'] is False
    assert result['presented'] == der_sha256(OLD[0]) and len(calls) == result['signals'] >= 2
    assert not (tray[0] / 'reloaded').exists()
    assert ('the handshake at 127.0.0.1:%d presented %s, not the certificate of' % (tray[1].port, der_sha256(OLD[0]))
            in result['msg'])
    assert 'the next run signals it again' in result['msg']


def test_an_unchanged_certificate_is_signalled_twice_then_marked(run_module, tray):
    tmp_path, server, _config = tray
    server.active = server_context(*server.files)
    result, calls = run(run_module, tray)
    assert result['_exit_code'] == 0 and result['how'] == 'signal_interval' and len(calls) == 2
    assert (tmp_path / 'reloaded').exists()


def test_a_handshake_that_failed_before_the_signal_proves_by_two_signals(run_module, tray, monkeypatch):
    real, calls = _tls_reload.presented_certificate, []

    def first_refused(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise ConnectionRefusedError(111, 'Connection refused')
        return real(*args, **kwargs)

    monkeypatch.setattr(_tls_reload, 'presented_certificate', first_refused)
    result, signals = run(run_module, tray)
    assert result['_exit_code'] == 0 and result['presented_before'] is None
    assert result['how'] == 'signal_interval' and len(signals) == 2 and result['presented'] == der_sha256(NEW[0])


def test_a_failed_signal_fails_without_a_mark(run_module, tray):
    result, _calls = run(run_module, tray, rc=5)
    assert result['_exit_code'] == 1 and result['signals'] == 0 and result['changed'] is False
    assert result['msg'] == ('systemctl kill --signal=SIGUSR1 nvidia-imex failed (rc 5): Failed to kill unit '
                             'nvidia-imex.service: Unit not loaded.')
    assert not (tray[0] / 'reloaded').exists()


def test_check_mode_signals_nothing_and_writes_nothing(run_module, tray):
    result, calls = run(run_module, tray, check=True)
    assert result['_exit_code'] == 0 and result['changed'] is True and calls == []
    assert result['diff']['after'] == 'run-7\n' and not (tray[0] / 'reloaded').exists()


def test_bind_interface_ip_is_where_the_handshake_goes(run_module, tray):
    config = tray[2]
    config.write_text(config.read_text() + 'BIND_INTERFACE_IP=127.0.0.1\n')
    result, _calls = run(run_module, tray, address='198.18.1.11')
    assert result['_exit_code'] == 0 and result['endpoint'].startswith('127.0.0.1:')


@pytest.mark.parametrize(('text', 'message'), [
    ('IMEX_AUTH_SOURCE=ENV_VAL\n', "IMEX_AUTH_SOURCE is 'ENV_VAL', not FILE"),
    ('IMEX_AUTH_SOURCE=FILE\nIMEX_SERVER_CERT=/etc/nvidia-imex/tls/tray.crt\n', 'IMEX_CLIENT_CERT is not set'),
])
def test_a_daemon_not_reading_files_is_refused_naming_the_key(run_module, tray, text, message):
    tray[2].write_text(text)
    result, calls = run(run_module, tray)
    assert result['_exit_code'] == 1 and message in result['msg'] and calls == []


def test_a_timeout_too_short_for_two_signals_is_refused(run_module, tray, monkeypatch):
    monkeypatch.setattr(imex_tls_reload, 'MIN_TIMEOUT_SECONDS', 12)
    result, calls = run(run_module, tray, timeout=5)
    assert result['_exit_code'] == 1 and result['msg'].startswith('timeout=5: at least 12 s') and calls == []


class FailingModule:
    def fail_json(self, **result):
        raise AssertionError(result['msg'])


def test_an_ipv6_link_local_bind_address_gets_the_interface_of_config(tmp_path):
    config = tmp_path / 'config.cfg'
    config.write_text('IMEX_AUTH_SOURCE=FILE\nIMEX_SERVER_CERT=/t/tray.crt\nIMEX_CLIENT_CERT=/t/tray.crt\n'
                      'IMEX_CLIENT_KEY=/t/tray.key\nBIND_INTERFACE_IP=fe80::1\nNETWORK_INTERFACE=enP5p1s0\n')
    assert imex_tls_reload.daemon_endpoint(FailingModule(), str(config), '198.18.1.11') == (
        'fe80::1%enP5p1s0', 50000, '/t/tray.crt', '/t/tray.crt', '/t/tray.key')
    config.write_text('IMEX_AUTH_SOURCE=FILE\nIMEX_SERVER_CERT=/t/tray.crt\nIMEX_CLIENT_CERT=/t/tray.crt\n'
                      'IMEX_CLIENT_KEY=/t/tray.key\nSERVER_PORT=50100\nNETWORK_INTERFACE=enP5p1s0\n')
    assert imex_tls_reload.daemon_endpoint(FailingModule(), str(config), 'rack1-slot03')[:2] == ('rack1-slot03', 50100)
