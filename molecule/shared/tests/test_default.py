"""Testinfra checks shared by the scenarios: every tray is a live systemd host with the simulator.

Run by molecule's testinfra verifier against `ansible://imex_domains` of the simrack inventory.
"""
from __future__ import annotations

SIMULATED_TOOLS = ("/usr/bin/nvidia-imex", "/usr/bin/nvidia-imex-ctl", "/usr/bin/nvidia-smi")


def test_systemd_is_running(host):
    assert host.run("systemctl is-system-running").stdout.strip() == "running"


def test_hostname_is_the_inventory_name(host):
    assert host.check_output("hostname") == host.backend.get_hostname()


def test_simulator_binaries_are_installed(host):
    for tool in SIMULATED_TOOLS:
        assert host.file(tool).is_file and host.file(tool).mode & 0o111, tool
    assert host.file("/lib/systemd/system/nvidia-imex.service").contains("Type=forking")


def test_channel_major_is_registered(host):
    assert "nvidia-caps-imex-channels" in host.file("/proc/devices").content_string
