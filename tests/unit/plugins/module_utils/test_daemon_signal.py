# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_daemon_signal: the daemon's main process as systemd shows it, and SIGUSR1 at most once per interval."""
from __future__ import annotations

import json

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_signal

SYSTEMCTL = '/usr/bin/systemctl'
# systemctl show -p MainPID -p ActiveState -- nvidia-imex, as systemd 252 prints it.
SHOW_RUNNING = 'MainPID=4711\nActiveState=active\n'
SHOW_STOPPED = 'MainPID=0\nActiveState=inactive\n'
SHOW_FAILED = 'MainPID=0\nActiveState=failed\n'


class Clock:
    """time.monotonic and time.sleep of a test: sleeping moves the clock."""

    def __init__(self, now=1000.0):
        self.now, self.slept = now, []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


class Runner:
    """BoundedRunner's run(): answers systemctl as a tray with a running daemon does."""

    def __init__(self, show=SHOW_RUNNING, kill_rc=0, hung=False):
        self.show, self.kill_rc, self.hung, self.calls = show, kill_rc, hung, []

    def run(self, args, seconds):
        self.calls.append(list(args))
        if args[1] == 'show':
            return 0, self.show, '', False
        return (self.kill_rc, '', 'Failed to kill unit nvidia-imex.service: Unit nvidia-imex.service not loaded.'
                if self.kill_rc else '', self.hung)


def real_module():
    """A real AnsibleModule (the file writer's atomic move and attributes), out of check mode."""
    with patch_module_args({"_ansible_check_mode": False}):
        return AnsibleModule(argument_spec={}, supports_check_mode=True)


@pytest.fixture
def clock(monkeypatch):
    found = Clock()
    monkeypatch.setattr(_daemon_signal, 'time', found)
    return found


@pytest.fixture
def signal_dir(tmp_path, monkeypatch):
    place = tmp_path / 'run' / 'signalled'
    monkeypatch.setattr(_daemon_signal, 'SIGNAL_DIR', str(place))
    return place


@pytest.mark.parametrize(('show', 'pid', 'state', 'why_not'), [
    (SHOW_RUNNING, 4711, 'active', None),
    (SHOW_STOPPED, None, 'inactive', 'not running (ActiveState=inactive, MainPID=0)'),
    (SHOW_FAILED, None, 'failed', 'not running (ActiveState=failed, MainPID=0)'),
    # Activating: the daemon is still starting (it may not handle SIGUSR1 yet); it connects afresh anyway.
    ('MainPID=4711\nActiveState=activating\n', 4711, 'activating',
     'not running (ActiveState=activating, MainPID=4711)'),
    ('', None, 'unknown', 'not running (ActiveState=unknown, MainPID=0)'),
])
def test_the_main_process_as_systemd_shows_it(show, pid, state, why_not):
    runner = Runner(show)
    assert _daemon_signal.main_process(runner, SYSTEMCTL, 'nvidia-imex') == (pid, state)
    assert runner.calls == [[SYSTEMCTL, 'show', '-p', 'MainPID', '-p', 'ActiveState', '--', 'nvidia-imex']]
    assert _daemon_signal.not_running(pid, state) == why_not


@pytest.mark.parametrize(('last', 'now', 'wait'), [
    (None, 1000.0, 0.0),
    (998.0, 1000.0, 3.5),
    (994.5, 1000.0, 0.0),
    (990.0, 1000.0, 0.0),
    (1000.0, 1000.0, 5.5),
    # A kept time ahead of the clock: the whole interval, never more.
    (5000.0, 1000.0, 5.5),
])
def test_a_signal_waits_the_rest_of_the_interval_since_the_last(last, now, wait):
    assert _daemon_signal.wait_before_signal(last, now, 5.5) == pytest.approx(wait)


def test_a_signal_within_the_interval_waits_then_keeps_its_time(clock, signal_dir):
    runner, module = Runner(), real_module()
    assert _daemon_signal.send_sigusr1(module, runner, SYSTEMCTL, 'nvidia-imex') == (0.0, None)
    kept = json.loads((signal_dir / 'nvidia-imex.json').read_text())
    assert kept == {'format': 1, 'monotonic': 1000.0, 'service': 'nvidia-imex'}
    assert oct((signal_dir).stat().st_mode & 0o777) == '0o700'
    clock.now += 2.0
    waited, warning = _daemon_signal.send_sigusr1(module, runner, SYSTEMCTL, 'nvidia-imex')
    assert waited == pytest.approx(3.5) and clock.slept == [pytest.approx(3.5)] and warning is None
    assert _daemon_signal.last_signal(str(signal_dir / 'nvidia-imex.json')) == pytest.approx(1005.5)
    assert runner.calls == [[SYSTEMCTL, 'kill', '--signal=SIGUSR1', '--kill-whom=main', '--', 'nvidia-imex']] * 2


def test_each_unit_keeps_its_own_time(clock, signal_dir):
    runner = Runner()
    _daemon_signal.send_sigusr1(real_module(), runner, SYSTEMCTL, 'nvidia-imex')
    assert _daemon_signal.send_sigusr1(real_module(), runner, SYSTEMCTL, 'nvidia-imex-b') == (0.0, None)
    assert clock.slept == []


@pytest.mark.parametrize('text', ['', 'not json', '{"format": 2, "monotonic": 1.0}', '{"format": 1}',
                                  '{"format": 1, "monotonic": true}', '[]'])
def test_a_kept_time_that_cannot_be_read_as_one_waits_for_nothing(tmp_path, text):
    path = tmp_path / 'nvidia-imex.json'
    path.write_text(text)
    assert _daemon_signal.last_signal(str(path)) is None


def test_a_failed_signal_keeps_no_time_and_says_what_systemctl_said(clock, signal_dir):
    with pytest.raises(_daemon_signal.SignalError) as error:
        _daemon_signal.send_sigusr1(real_module(), Runner(kill_rc=5), SYSTEMCTL, 'nvidia-imex')
    assert str(error.value) == ('systemctl kill --signal=SIGUSR1 nvidia-imex failed (rc 5): Failed to kill unit '
                                'nvidia-imex.service: Unit nvidia-imex.service not loaded.')
    assert not (signal_dir / 'nvidia-imex.json').exists()


def test_a_hung_systemctl_is_named(clock, signal_dir):
    with pytest.raises(_daemon_signal.SignalError, match='did not answer within 30 s'):
        _daemon_signal.send_sigusr1(real_module(), Runner(kill_rc=124, hung=True), SYSTEMCTL, 'nvidia-imex')


def test_a_place_others_could_write_keeps_no_time_but_the_signal_is_sent(clock, signal_dir):
    signal_dir.mkdir(parents=True)
    signal_dir.chmod(0o777)
    runner = Runner()
    waited, warning = _daemon_signal.send_sigusr1(real_module(), runner, SYSTEMCTL, 'nvidia-imex')
    assert waited == 0.0 and 'is writable by group or others (mode 0777)' in warning
    assert len(runner.calls) == 1 and not (signal_dir / 'nvidia-imex.json').exists()


def test_a_name_that_is_no_unit_is_refused_before_any_signal(clock, signal_dir):
    runner = Runner()
    with pytest.raises(_daemon_signal.SignalError, match='is not a systemd unit name'):
        _daemon_signal.send_sigusr1(real_module(), runner, SYSTEMCTL, '../etc/passwd')
    assert runner.calls == []
