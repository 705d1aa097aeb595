# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures shared by the tests of modules and module_utils."""
from __future__ import annotations

import os
import socket
import stat

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_log


@pytest.fixture
def remote_addresses():
    """remote_addresses(count) -> that many TEST-NET-3 addresses that are really not configured on this machine.

    Skips the test when there are not enough of them.
    """
    def _remote_addresses(count):
        found = []
        for last in range(1, 255):
            address = "203.0.113.%d" % last
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                sock.bind((address, 0))
            except OSError:
                found.append(address)
            finally:
                sock.close()
            if len(found) == count:
                return found
        pytest.skip("every TEST-NET-3 address is local here")
    return _remote_addresses


@pytest.fixture
def root_above(tmp_path, monkeypatch):
    """tmp_path, with the directories above it seen as root's 0755 ones by the daemon log reader (/tmp,
    where pytest puts tmp_path, is 1777 and refused, as it must be); tmp_path and below are stat'ed for real."""
    real_stat = os.stat
    inside = str(tmp_path)

    def stat_directory(path):
        if path == inside or path.startswith(inside + os.sep):
            return real_stat(path)
        return os.stat_result((stat.S_IFDIR | 0o755, 0, 0, 2, 0, 0, 4096, 0, 0, 0))
    monkeypatch.setattr(_daemon_log, "_stat_directory", stat_directory)
    # tmp_path stands for /var/log, the only directory the daemon's log is read from.
    monkeypatch.setattr(_daemon_log, "LOG_DIRECTORY", inside)
    return tmp_path
