# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which IMEX release the running daemon runs, which may not be the installed one.

A package upgrade replaces /usr/bin/nvidia-imex while the daemon keeps running the old binary: its
peers then see another release (!V!) until it restarts, while `nvidia-imex --version` already
prints the new one. Two things a tray shows tell the running release:

* the daemon process's own executable, /proc/<MainPID>/exe. When it is the installed file (same
  device and inode) the daemon runs the installed release. A replaced binary stays reachable
  there (its link reads "<path> (deleted)"), and asking it ``--version`` gives its release.
* the daemon's start line in its log, ``IMEX version <release> is running ...`` (INFO, so only at
  LOG_LEVEL 4, the default), written by this daemon when its start falls between systemd's
  beginning of the unit's activation and the start of its main process.

Neither is always there (the log can be rotated, hidden by LOG_LEVEL, sent to syslog); where
neither tells, the release is unknown and no decision is taken on it.
"""
from __future__ import annotations

import os
import re
import time

from ansible_collections.rackscale.imex.plugins.module_utils._daemon_log import config_value, open_log

# The kernel's mark on /proc/<pid>/exe when the file the process runs was removed or replaced.
DELETED_MARK = ' (deleted)'
# The daemon's own file name: only a binary of this name is asked for its release.
DAEMON_BINARY_NAME = 'nvidia-imex'
# systemctl show properties: the daemon's process, and when the unit's activation began.
SHOW_PROPERTIES = ('MainPID', 'InactiveExitTimestampMonotonic')
# Log times have whole seconds and the start line precedes the fork systemd waits for.
LOG_TIME_SLACK_S = 2
# Bytes of the log searched from its end for the start line (a log appended to for a long time).
LOG_SEARCH_BYTES = 8 * 1024 * 1024
_LOG_CHUNK_BYTES = 256 * 1024
# 'IMEX version 580.159.04 is running with the following configuration options:' (570, 580), or
# '... is running in NO GPU MODE' (590), after the vendor prefix '[Mon D YYYY HH:MM:SS] [INFO] [tid N] '.
_START_LINE = re.compile(
    r'^\[(?P<month>[A-Z][a-z]{2})\s+(?P<day>\d{1,2})\s+(?P<year>\d{4})\s+(?P<clock>\d{1,2}:\d{2}:\d{2})\]\s+'
    r'\[INFO\]\s+(?:\[tid\s+\d+\]\s+)?IMEX version (?P<release>\S+) is running\b')
# Spelled out: strptime's %b follows the locale.
_MONTHS = ('Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec')


def parse_show(text):
    """{property: value} of `systemctl show -p A -p B -- UNIT` (one KEY=value line each)."""
    found = {}
    for line in (text or '').splitlines():
        if '=' in line:
            key, value = line.split('=', 1)
            found[key.strip()] = value.strip()
    return found


def main_pid(show):
    """The unit's main process id from parse_show's answer, or None (0: systemd knows none)."""
    value = show.get('MainPID', '')
    return int(value) if value.isdigit() and int(value) > 0 else None


def executable_replaced(link):
    """Whether the text of /proc/<pid>/exe says the file the process runs was removed or replaced."""
    return link.endswith(DELETED_MARK)


def is_daemon_binary(link):
    """Whether /proc/<pid>/exe names an nvidia-imex binary (replaced or not), which may be asked its release.

    Anything else (an interpreter, a wrapper) is never run: its ``--version`` says nothing of IMEX.
    """
    path = link[:-len(DELETED_MARK)] if executable_replaced(link) else link
    return os.path.basename(path) == DAEMON_BINARY_NAME


def log_level(config_text):
    """LOG_LEVEL of a config.cfg text as a number; the vendor default 4 when absent or not a number."""
    found = config_value(config_text, 'LOG_LEVEL')
    return int(found) if found is not None and found.isdigit() else 4


def log_time(month, day, year, clock):
    """Epoch seconds of a vendor log time, which the daemon writes in the tray's local time."""
    hours, minutes, seconds = (int(part) for part in clock.split(':'))
    return time.mktime((int(year), _MONTHS.index(month) + 1, int(day), hours, minutes, seconds, 0, 0, -1))


def start_lines(text):
    """[(epoch seconds, release)] of every daemon start line of a log text, in order."""
    found = []
    for line in (text or '').split('\n'):
        match = _START_LINE.match(line.strip())
        if match and match.group('month') in _MONTHS:
            found.append((log_time(match.group('month'), match.group('day'), match.group('year'),
                                   match.group('clock')), match.group('release')))
    return found


def release_started_between(lines, since, until):
    """The release of the last start line at or before ``until`` when it is not before ``since``, else None.

    ``since``: when systemd began activating the unit; ``until``: when its main process started. A
    start line before ``since`` belongs to an earlier daemon (this one's was not logged).
    """
    before = [(when, release) for when, release in lines if when <= until + LOG_TIME_SLACK_S]
    if not before:
        return None
    when, release = before[-1]
    return release if when >= since - LOG_TIME_SLACK_S else None


def last_start_lines(path, search_bytes=LOG_SEARCH_BYTES, stat_directory=None):
    """Start lines of the log at ``path`` from the end backwards: those of the last chunk that has any,
    searching at most ``search_bytes``. Raises LogRefused (see _daemon_log.open_log)."""
    fd = open_log(path, stat_directory)
    with os.fdopen(fd, 'rb') as handle:
        handle.seek(0, 2)
        end = position = handle.tell()
        # The start of a line cut by a chunk border, completed by the chunk before it.
        carry = b''
        while position > 0 and end - position < search_bytes:
            start = max(0, position - _LOG_CHUNK_BYTES)
            handle.seek(start)
            data = handle.read(position - start) + carry
            position = start
            carry = b''
            if start > 0:
                cut = data.find(b'\n')
                if cut < 0:
                    carry = data
                    continue
                carry, data = data[:cut], data[cut + 1:]
            found = start_lines(data.decode('utf-8', errors='replace'))
            if found:
                return found
    return []
