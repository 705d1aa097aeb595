# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""imex_reconnect against a simulated systemd: SIGUSR1 to the running daemon's main process, at most once
per 5 s whichever module signalled last, never to a daemon that does not run."""
from __future__ import annotations

import json
from unittest import mock

import pytest

from ansible.module_utils import basic

from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_record, _daemon_signal
from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import BEGIN, block_digest, replace_block, split
from ansible_collections.rackscale.imex.plugins.modules import imex_reconnect

TIMEOUT = '/usr/bin/timeout'
SYSTEMCTL = '/usr/bin/systemctl'
KILL = [TIMEOUT, '-k', '5', '30', SYSTEMCTL, 'kill', '--signal=SIGUSR1', '--kill-whom=main', '--', 'nvidia-imex']
SHOW = [TIMEOUT, '-k', '5', '30', SYSTEMCTL, 'show', '-p', 'MainPID', '-p', 'ActiveState', '--', 'nvidia-imex']
SHOW_INSTANCE = [TIMEOUT, '-k', '5', '30', SYSTEMCTL, 'show', '-p', 'InvocationID', '--', 'nvidia-imex']
INSTANCE = '3b1c9e0f5d2a4c6e8f0a1b2c3d4e5f60'
EARLIER_INSTANCE = '7c2d0a1f6e3b5d7f9a1b2c3d4e5f6071'
OLD_BLOCK = [('198.18.1.11', 'rack1-slot-00'), ('198.18.1.12', 'rack1-slot-01')]
NEW_BLOCK = [('198.18.1.11', 'rack1-slot-00'), ('198.18.1.99', 'rack1-slot-01')]
LOADED = {'/etc/nvidia-imex/nodes_config.cfg': 'a' * 64}


class Systemd:
    """The unit as systemctl shows and signals it; the clock moves only when the module sleeps."""

    def __init__(self, state='active', pid=4711, kill_rc=0, restarted_by_signal=False, invocation=INSTANCE):
        self.state, self.pid, self.kill_rc, self.restarted_by_signal = state, pid, kill_rc, restarted_by_signal
        self.invocation = invocation
        self.calls, self.signals, self.now, self.slept = [], [], 1000.0, []

    def run_command(self, cmd, **kwargs):
        self.calls.append(list(cmd))
        if 'InvocationID' in cmd:
            return 0, 'InvocationID=%s\n' % self.invocation, ''
        if 'show' in cmd:
            return 0, 'MainPID=%d\nActiveState=%s\n' % (self.pid, self.state), ''
        if self.kill_rc:
            return self.kill_rc, '', 'Failed to kill unit nvidia-imex.service: Access denied'
        self.signals.append((self.pid, self.now))
        if self.restarted_by_signal:
            self.pid += 1
        return 0, '', ''

    # time, as _daemon_signal uses it
    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def signal_dir(tmp_path, monkeypatch):
    place = tmp_path / 'run' / 'signalled'
    monkeypatch.setattr(_daemon_signal, 'SIGNAL_DIR', str(place))
    return place


def run(run_module, systemd, monkeypatch, check=False, **args):
    def get_bin_path(self, name, required=False, opt_dirs=None):
        return {'timeout': TIMEOUT, 'systemctl': SYSTEMCTL}.get(name)

    def run_command(self, cmd, **kwargs):
        return systemd.run_command(cmd)

    monkeypatch.setattr(_daemon_signal, 'time', systemd)
    with mock.patch.multiple(basic.AnsibleModule, get_bin_path=get_bin_path, run_command=run_command):
        return run_module(imex_reconnect, dict(args), check=check)


def test_a_running_daemon_is_signalled_and_stays_the_same_process(run_module, monkeypatch, signal_dir):
    systemd = Systemd()
    result = run(run_module, systemd, monkeypatch, reason='rack1-tray03 was started')
    assert result['_exit_code'] == 0 and result['changed'] is True and result['signalled'] is True
    assert result['main_pid_before'] == result['main_pid_after'] == 4711 and result['waited'] == 0
    assert systemd.calls == [SHOW, KILL, SHOW] and systemd.signals == [(4711, 1000.0)]
    assert result['msg'] == 'sent SIGUSR1 to nvidia-imex (MainPID 4711, still the same process): rack1-tray03 was started'
    assert json.loads((signal_dir / 'nvidia-imex.json').read_text())['monotonic'] == 1000.0
    assert result['_warnings'] == []


def test_a_second_signal_within_5_s_waits_the_rest(run_module, monkeypatch, signal_dir):
    systemd = Systemd()
    run(run_module, systemd, monkeypatch)
    systemd.now += 1.5
    result = run(run_module, systemd, monkeypatch)
    assert result['_exit_code'] == 0 and result['waited'] == pytest.approx(4.0)
    assert systemd.slept == [pytest.approx(4.0)] and [when for _pid, when in systemd.signals] == [1000.0, 1005.5]
    assert 'after waiting 4.0 s for the 5 s limit' in result['msg']


def test_a_tls_reload_just_before_holds_the_reconnect_back_too(run_module, monkeypatch, signal_dir):
    """The two modules keep the time of their signals in one place: the daemon would drop the second."""
    systemd = Systemd()
    signal_dir.mkdir(parents=True, mode=0o700)
    (signal_dir / 'nvidia-imex.json').write_text(_daemon_signal.record_text('nvidia-imex', 998.0))
    result = run(run_module, systemd, monkeypatch)
    assert result['waited'] == pytest.approx(3.5) and systemd.signals == [(4711, 1003.5)]


@pytest.mark.parametrize(('state', 'pid', 'said'), [
    ('inactive', 0, 'nvidia-imex is not running (ActiveState=inactive, MainPID=0): not signalled'),
    ('failed', 0, 'nvidia-imex is not running (ActiveState=failed, MainPID=0): not signalled'),
    ('activating', 4711, 'nvidia-imex is not running (ActiveState=activating, MainPID=4711): not signalled'),
])
def test_a_daemon_that_does_not_run_is_not_signalled(run_module, monkeypatch, signal_dir, state, pid, said):
    systemd = Systemd(state=state, pid=pid)
    result = run(run_module, systemd, monkeypatch)
    assert result['_exit_code'] == 0 and result['changed'] is False and result['signalled'] is False
    assert result['msg'] == said and systemd.calls == [SHOW] and not signal_dir.exists()


def test_check_mode_says_it_would_signal_and_signals_nothing(run_module, monkeypatch, signal_dir):
    systemd = Systemd()
    result = run(run_module, systemd, monkeypatch, check=True, reason='rack1-tray03 was started')
    assert result['_exit_code'] == 0 and result['changed'] is True and result['signalled'] is True
    assert result['msg'] == 'would send SIGUSR1 to nvidia-imex (MainPID 4711): rack1-tray03 was started'
    assert systemd.calls == [SHOW] and systemd.signals == [] and not signal_dir.exists()


def test_check_mode_on_a_stopped_daemon_predicts_nothing(run_module, monkeypatch, signal_dir):
    result = run(run_module, Systemd(state='inactive', pid=0), monkeypatch, check=True)
    assert result['changed'] is False and result['signalled'] is False


def test_a_new_main_process_after_the_signal_is_said(run_module, monkeypatch, signal_dir):
    systemd = Systemd(restarted_by_signal=True)
    result = run(run_module, systemd, monkeypatch)
    assert result['_exit_code'] == 0 and result['main_pid_before'] == 4711 and result['main_pid_after'] == 4712
    assert 'now MainPID 4712: not the same instance' in result['msg']
    assert result['_warnings'] == ['nvidia-imex: MainPID 4711 before SIGUSR1, 4712 after it; its peers treat a new '
                                   'instance as a restart']


def test_a_signal_systemd_refuses_fails_naming_what_it_said(run_module, monkeypatch, signal_dir):
    systemd = Systemd(kill_rc=1)
    result = run(run_module, systemd, monkeypatch)
    assert result['_exit_code'] == 1 and result['changed'] is False and result['signalled'] is False
    assert result['msg'] == ('systemctl kill --signal=SIGUSR1 nvidia-imex failed (rc 1): Failed to kill unit '
                             'nvidia-imex.service: Access denied')
    assert not (signal_dir / 'nvidia-imex.json').exists()


def test_a_service_that_is_no_unit_name_is_refused_before_systemctl(run_module, monkeypatch, signal_dir):
    systemd = Systemd()
    result = run(run_module, systemd, monkeypatch, service='../x')
    assert result['_exit_code'] == 1 and result['msg'].startswith("service: '../x' is not a systemd unit name")
    assert systemd.calls == []


# --- the hosts block the signalled instance resolves, in the record of what it loaded -------------------

@pytest.fixture
def tray(tmp_path, monkeypatch):
    """A tray whose daemon instance was started by a run (its record holds the old block) and whose hosts file
    holds the new block."""
    monkeypatch.setattr(_daemon_record, 'RECORD_DIR', str(tmp_path / 'run' / 'loaded'))
    (tmp_path / 'run' / 'loaded').mkdir(parents=True, mode=0o700)
    hosts = tmp_path / 'hosts'
    hosts.write_text(replace_block('127.0.0.1\tlocalhost\n', NEW_BLOCK))
    return tmp_path


def record(tray, instance=INSTANCE, **hosts_block):
    (tray / 'run' / 'loaded' / 'nvidia-imex.json').write_text(
        _daemon_record.build('nvidia-imex', instance, LOADED, **hosts_block))


def loaded(tray):
    return _daemon_record.read('nvidia-imex')


def new_digest(tray):
    return block_digest(split((tray / 'hosts').read_text())[1])


def old_digest():
    return block_digest(split(replace_block('', OLD_BLOCK))[1])


def test_after_a_signal_the_record_of_the_instance_holds_the_block_it_resolved(run_module, monkeypatch, signal_dir, tray):
    record(tray, hosts_block=old_digest())
    systemd = Systemd()
    result = run(run_module, systemd, monkeypatch, hosts_file=str(tray / 'hosts'))
    assert result['_exit_code'] == 0 and result['signalled'] is True and result['recorded_hosts_block'] is True
    assert systemd.calls == [SHOW, KILL, SHOW, SHOW_INSTANCE]
    assert loaded(tray) == {'invocation_id': INSTANCE, 'files': LOADED, 'hosts_block': new_digest(tray)}
    assert new_digest(tray) != old_digest()
    assert result['msg'] == 'sent SIGUSR1 to nvidia-imex (MainPID 4711, still the same process)'


def test_a_record_of_an_older_release_gets_the_block_too(run_module, monkeypatch, signal_dir, tray):
    record(tray)
    result = run(run_module, Systemd(), monkeypatch, hosts_file=str(tray / 'hosts'))
    assert result['recorded_hosts_block'] is True and loaded(tray)['hosts_block'] == new_digest(tray)


@pytest.mark.parametrize('prepare', [
    lambda tray: record(tray, instance=EARLIER_INSTANCE, hosts_block=None),  # of an earlier instance
    lambda tray: None,  # started by hand: no record
])
def test_a_daemon_without_a_record_of_its_instance_gets_none_and_the_task_says_so(
        run_module, monkeypatch, signal_dir, tray, prepare):
    prepare(tray)
    before = loaded(tray)
    result = run(run_module, Systemd(), monkeypatch, hosts_file=str(tray / 'hosts'))
    assert result['_exit_code'] == 0 and result['signalled'] is True and result['recorded_hosts_block'] is False
    assert loaded(tray) == before
    assert result['msg'].endswith('; no record of what this instance of nvidia-imex loaded (%s): the hosts block it '
                                  'resolved is not recorded' % (tray / 'run' / 'loaded' / 'nvidia-imex.json'))


def test_a_new_main_process_after_the_signal_records_nothing(run_module, monkeypatch, signal_dir, tray):
    record(tray, hosts_block=old_digest())
    result = run(run_module, Systemd(restarted_by_signal=True), monkeypatch, hosts_file=str(tray / 'hosts'))
    assert result['recorded_hosts_block'] is False and loaded(tray)['hosts_block'] == old_digest()


def test_under_check_and_without_a_hosts_file_no_record_is_touched(run_module, monkeypatch, signal_dir, tray):
    record(tray, hosts_block=old_digest())
    checked = run(run_module, Systemd(), monkeypatch, check=True, hosts_file=str(tray / 'hosts'))
    assert checked['recorded_hosts_block'] is False and loaded(tray)['hosts_block'] == old_digest()
    systemd = Systemd()
    plain = run(run_module, systemd, monkeypatch)
    assert plain['recorded_hosts_block'] is False and loaded(tray)['hosts_block'] == old_digest()
    assert systemd.calls == [SHOW, KILL, SHOW]


def test_broken_markers_signal_and_record_nothing_saying_why(run_module, monkeypatch, signal_dir, tray):
    record(tray, hosts_block=old_digest())
    (tray / 'hosts').write_text(BEGIN + '\n198.18.1.11\track1-slot-00\n')
    systemd = Systemd()
    result = run(run_module, systemd, monkeypatch, hosts_file=str(tray / 'hosts'))
    assert result['signalled'] is True and result['recorded_hosts_block'] is False
    assert loaded(tray)['hosts_block'] == old_digest() and SHOW_INSTANCE not in systemd.calls
    assert '; the hosts block it resolves is not recorded: %s: ' % (tray / 'hosts') in result['msg']
