# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""imex_reconnect against a simulated systemd: SIGUSR1 to the running daemon's main process, at most once
per 5 s whichever module signalled last, never to a daemon that does not run."""
from __future__ import annotations

import json
from unittest import mock

import pytest

from ansible.module_utils import basic

from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_signal
from ansible_collections.rackscale.imex.plugins.modules import imex_reconnect

TIMEOUT = '/usr/bin/timeout'
SYSTEMCTL = '/usr/bin/systemctl'
KILL = [TIMEOUT, '-k', '5', '30', SYSTEMCTL, 'kill', '--signal=SIGUSR1', '--kill-whom=main', '--', 'nvidia-imex']
SHOW = [TIMEOUT, '-k', '5', '30', SYSTEMCTL, 'show', '-p', 'MainPID', '-p', 'ActiveState', '--', 'nvidia-imex']


class Systemd:
    """The unit as systemctl shows and signals it; the clock moves only when the module sleeps."""

    def __init__(self, state='active', pid=4711, kill_rc=0, restarted_by_signal=False):
        self.state, self.pid, self.kill_rc, self.restarted_by_signal = state, pid, kill_rc, restarted_by_signal
        self.calls, self.signals, self.now, self.slept = [], [], 1000.0, []

    def run_command(self, cmd, **kwargs):
        self.calls.append(list(cmd))
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
