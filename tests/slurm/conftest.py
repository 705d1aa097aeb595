# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the tests against a real slurmctld (tests/slurm/slurmctld.py)."""
from __future__ import annotations

import os

import pytest

from slurmctld import Slurmctld, slurm_rootfs  # noqa: E402 (tests/slurm is on sys.path as rootdir of its conftest)


@pytest.fixture(scope="session")
def rootfs():
    if os.geteuid() != 0:
        pytest.skip("a real slurmctld needs root (namespaces, mounts, chroot)")
    path = slurm_rootfs()
    if path is None:
        pytest.skip("no root file system with Slurm (tests/rack/simrack rootfs --slurm, or the trial copy)")
    return path


@pytest.fixture
def slurmctld(rootfs):
    """slurmctld(nodes, topology, **options) -> a running Slurmctld, stopped after the test."""
    started = []

    def start(nodes, topology, **options):
        daemon = Slurmctld(rootfs, nodes, topology, **options)
        started.append(daemon)
        daemon.start()
        return daemon
    yield start
    for daemon in started:
        daemon.stop()
