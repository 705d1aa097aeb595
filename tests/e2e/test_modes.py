"""Modes switch both ways on a 1 x 3 bed: static -> dra -> static -> dra_host_managed -> static.

Each run ends in the unit state its mode wants and, where the host daemon runs, a validated UP
domain. The dra mode masks the host daemon and leaves the channel device nodes to the DRA driver
(only this collection's modprobe drop-in goes); a later run in another mode unmasks and starts the
daemon. Leaving dra_host_managed closes the command socket again.
"""
from __future__ import annotations

import json
import os

from conftest import requires_rack, run_playbook

pytestmark = requires_rack
RACK_SHAPE = (1, 3)
CHANNEL0 = "/dev/nvidia-caps-imex-channels/channel0"
DROP_IN = "/etc/modprobe.d/nvidia-imex.conf"


def unit_state(rack, tray):
    active = rack.ssh(tray, "systemctl", "is-active", "nvidia-imex").stdout.strip()
    enabled = rack.ssh(tray, "systemctl", "is-enabled", "nvidia-imex").stdout.strip()
    return active, enabled


def converge(rack, tmp_path, mode):
    reports = str(tmp_path / mode)
    extravars = {"imex_report_dir": reports, "imex_validate_timeout_s": 120, "imex_mode": mode}
    if mode == "dra":
        extravars["imex_channel0"] = False
    run = run_playbook("site.yml", rack.inventory, extravars=extravars)
    assert run.rc == 0, "%s:\n%s" % (mode, run.stdout[-3000:])
    return reports


def assert_daemon_up(rack, reports):
    for tray in rack.trays_of(1):
        assert unit_state(rack, tray) == ("active", "enabled"), tray
    with open(os.path.join(reports, "rack1.json")) as handle:
        assert json.load(handle)["verdict"] == "healthy"


def test_every_mode_transition_ends_in_the_wanted_state(simulated_rack, tmp_path):
    rack = simulated_rack
    assert_daemon_up(rack, converge(rack, tmp_path, "static"))

    converge(rack, tmp_path, "dra")
    for tray in rack.trays_of(1):
        assert unit_state(rack, tray) == ("inactive", "masked"), tray
        # The node stays for the DRA driver; only the collection's own drop-in goes.
        assert rack.ssh(tray, "test", "-c", CHANNEL0).returncode == 0, tray
        assert rack.ssh(tray, "test", "-e", DROP_IN).returncode != 0, tray

    assert_daemon_up(rack, converge(rack, tmp_path, "static"))
    for tray in rack.trays_of(1):
        assert "NVreg_CreateImexChannel0=1" in rack.ssh(tray, "cat", DROP_IN).stdout, tray

    assert_daemon_up(rack, converge(rack, tmp_path, "dra_host_managed"))
    config = rack.ssh("rack1-tray02", "grep", "^IMEX_CMD_UNIX_DOMAIN_PATH=", "/etc/nvidia-imex/config.cfg").stdout
    assert config.strip() == "IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock"

    assert_daemon_up(rack, converge(rack, tmp_path, "static"))
    config = rack.ssh("rack1-tray02", "grep", "^IMEX_CMD_UNIX_DOMAIN_PATH=", "/etc/nvidia-imex/config.cfg").stdout
    assert config.strip() == "IMEX_CMD_UNIX_DOMAIN_PATH="
