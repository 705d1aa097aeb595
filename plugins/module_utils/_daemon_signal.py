# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SIGUSR1 to the running IMEX daemon: systemd's main process of its unit, at most once every 5 s.

SIGUSR1 makes nvidia-imex reload its file-based TLS credentials and restart its outgoing connections,
without becoming a new instance: its peers keep what it exports. The daemon processes the signal at
most once every 5 seconds and says nothing when it drops one. So every module that signals the daemon
(imex_tls_reload, imex_reconnect) sends it here: systemd picks the main process (``systemctl kill
--kill-whom=main``, no PID read first that could be reused meanwhile), and the time of the signal is
kept in one place under /run, per unit, so that a signal sent less than the interval after another
(by the same module or the other one) first waits the rest. /run is cleared by a reboot, as the daemon
it speaks of is.

The time is CLOCK_MONOTONIC (time.monotonic() on Linux: one clock for every process since boot, which a
step of the wall clock does not move).
"""
from __future__ import annotations

import json
import os
import time

from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_record
from ansible_collections.rackscale.imex.plugins.module_utils._files import FileOpError, ensure_directory, replace_file
from ansible_collections.rackscale.imex.plugins.module_utils._running_release import main_pid, parse_show

SIGNAL_DIR = '/run/rackscale-imex/signalled'
SIGNAL_FORMAT = 1
# signals.html: "SIGUSR1 will only be processed once every 5 seconds." A little more, so that a
# signal sent after the wait is never the one dropped.
SIGUSR1_INTERVAL_S = 5.5
SYSTEMCTL_TIMEOUT_SECONDS = 30
# States of a unit whose main process runs the daemon.
RUNNING_STATES = ('active', 'reloading')


class SignalError(Exception):
    """systemctl could not be asked, or could not signal; the message says which and what it said."""


def _said(rc, out, err, hung, what):
    said = (err or out or '').strip()
    return '%s %s%s' % (what, 'did not answer within %d s' % SYSTEMCTL_TIMEOUT_SECONDS if hung else 'failed (rc %d)' % rc,
                        ': ' + said if said else '')


def main_process(runner, systemctl, service):
    """(MainPID or None, ActiveState) of ``service`` as systemd shows it; SignalError when it cannot be asked."""
    rc, out, err, hung = runner.run([systemctl, 'show', '-p', 'MainPID', '-p', 'ActiveState', '--', service],
                                    SYSTEMCTL_TIMEOUT_SECONDS)
    if hung or rc != 0:
        raise SignalError(_said(rc, out, err, hung, 'systemctl show %s' % service))
    show = parse_show(out)
    return main_pid(show), show.get('ActiveState') or 'unknown'


def not_running(pid, state):
    """Why a unit in this state has no daemon to signal, or None when it has one."""
    if state not in RUNNING_STATES or pid is None:
        return 'not running (ActiveState=%s, MainPID=%s)' % (state, pid or 0)
    return None


def signal_path(service, signal_dir=None):
    """Where the last SIGUSR1 to ``service`` is kept (RecordError for a name that is not a unit name)."""
    return _daemon_record.record_path(service, signal_dir or SIGNAL_DIR)


def last_signal(path):
    """The monotonic time of the last SIGUSR1 kept at ``path``, or None (none kept, or not readable as one)."""
    try:
        with open(path, encoding='utf-8') as handle:
            data = json.loads(handle.read(4096))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or data.get('format') != SIGNAL_FORMAT:
        return None
    value = data.get('monotonic')
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def wait_before_signal(last, now, interval):
    """Seconds to wait before the next SIGUSR1 so that the daemon takes it: the rest of ``interval`` since
    ``last``; 0 when none was kept. A kept time ahead of ``now`` (the clock it came from is gone) waits the
    whole interval, never more."""
    if last is None:
        return 0.0
    return min(interval, max(0.0, interval - (now - last)))


def record_text(service, when):
    return json.dumps(dict(format=SIGNAL_FORMAT, service=service, monotonic=when), sort_keys=True) + '\n'


def send_sigusr1(module, runner, systemctl, service, interval=None, signal_dir=None):
    """Send SIGUSR1 to the main process of ``service``, first waiting the rest of the interval since the last
    one kept; keep the time of this one. Returns (seconds waited, warning or None: the time could not be kept).
    Raises SignalError when systemctl did not signal (nothing is kept then)."""
    interval = SIGUSR1_INTERVAL_S if interval is None else interval
    try:
        path = signal_path(service, signal_dir)
    except _daemon_record.RecordError as error:
        raise SignalError('service: %s' % error) from None
    waited = wait_before_signal(last_signal(path), time.monotonic(), interval)
    if waited > 0:
        time.sleep(waited)
    rc, out, err, hung = runner.run([systemctl, 'kill', '--signal=SIGUSR1', '--kill-whom=main', '--', service],
                                    SYSTEMCTL_TIMEOUT_SECONDS)
    if hung or rc != 0:
        raise SignalError(_said(rc, out, err, hung, 'systemctl kill --signal=SIGUSR1 %s' % service))
    when = time.monotonic()
    # The signal is sent; a time not kept only means that a signal in the next 5 s may not wait for it.
    unsafe = _daemon_record.unsafe_place(path)
    if unsafe:
        return waited, 'the time of this SIGUSR1 is not kept in %s: %s' % (path, unsafe)
    try:
        ensure_directory(module, os.path.dirname(path), 0o700, None, None)
        replace_file(module, path, record_text(service, when), mode='0600')
    except FileOpError as error:
        return waited, 'the time of this SIGUSR1 is not kept: %s' % error
    return waited, None
