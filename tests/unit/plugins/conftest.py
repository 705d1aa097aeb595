# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures shared by the tests of modules and module_utils."""
from __future__ import annotations

import socket

import pytest


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
