# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the tests against a real slurmctld (tests/slurm/slurmctld.py)."""
from __future__ import annotations

import os

import pytest

from slurmctld import TOPOLOGY_YAML_SUITE, Slurmctld, slurm_rootfs  # noqa: E402 (tests/slurm is on sys.path as rootdir of its conftest)


def _rootfs(suite=None):
    if os.geteuid() != 0:
        pytest.skip("a real slurmctld needs root (namespaces, mounts, chroot)")
    return slurm_rootfs(suite)


def _starter(rootfs):
    """start(nodes, topology, **options) -> a running Slurmctld, and the daemons to stop afterwards."""
    started = []

    def start(nodes, topology, **options):
        daemon = Slurmctld(rootfs, nodes, topology, **options)
        started.append(daemon)
        daemon.start()
        return daemon
    return start, started


@pytest.fixture(scope="session")
def rootfs():
    """Slurm 24.11 (Debian trixie), the release of the simulated rack's `up --slurm`."""
    return _rootfs()


@pytest.fixture(scope="session")
def rootfs_yaml():
    """Slurm 26.05 (Debian forky), which reads topology.yaml; built once, on the first test that needs it."""
    return _rootfs(TOPOLOGY_YAML_SUITE)


@pytest.fixture
def slurmctld(rootfs):
    """slurmctld(nodes, topology, **options) -> a running Slurmctld 24.11, stopped after the test."""
    start, started = _starter(rootfs)
    yield start
    for daemon in started:
        daemon.stop()


@pytest.fixture
def slurmctld_yaml(rootfs_yaml):
    """slurmctld_yaml(nodes, topology, **options) -> a running Slurmctld 26.05, stopped after the test."""
    start, started = _starter(rootfs_yaml)
    yield start
    for daemon in started:
        daemon.stop()
