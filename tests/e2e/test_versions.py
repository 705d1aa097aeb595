"""Versions are checked before anything is written (1 x 3 bed).

A tray whose nvidia-imex is not its driver's release, and a domain whose trays run different
releases, are refused by the run's one read of the trays, naming trays and versions, before any
write or restart. (A daemon left running another release than the one installed restarts with its
domain: a decision on the recorded read, tests/unit/plan.)
"""
from __future__ import annotations

import yaml

from conftest import requires_rack, run_playbook, write_inventory

pytestmark = requires_rack
RACK_SHAPE = (1, 3)
WRITES = ("rackscale.imex.imex_nodes_config", "rackscale.imex.imex_config", "rackscale.imex.imex_channel")


# A setting the refused runs ask for: without the refusal it would be written on every tray.
CHANGE = {"imex_settings": {"LOG_LEVEL": 3}}


def site(rack, tmp_path, inventory=None, **extravars):
    return run_playbook("site.yml", inventory or rack.inventory,
                        extravars=dict({"imex_report_dir": str(tmp_path / "reports"), "imex_validate_timeout_s": 120},
                                       **extravars))


def assert_refused_before_any_write(rack, run, fragment):
    assert run.rc != 0
    assert any(fragment in message for message in run.failure_messages()), run.failure_messages()
    assert [action for _, _, action, _ in run.ok_results() if action in WRITES] == []
    assert run.changed_hosts() == []
    for tray in rack.trays_of(1):
        assert "LOG_LEVEL=3" not in rack.ssh(tray, "cat", "/etc/nvidia-imex/config.cfg").stdout, tray


def test_a_package_of_another_release_and_a_skewed_domain_are_refused_before_any_write(simulated_rack, tmp_path):
    rack = simulated_rack
    assert site(rack, tmp_path).rc == 0
    rack.simrack("fault", "driver-version", "rack1-tray03", "580.105.08")
    try:
        assert_refused_before_any_write(
            rack, site(rack, tmp_path, **CHANGE),
            "tray rack1-tray03 (domain rack1): nvidia-imex 580.95.09 does not match the driver 580.105.08")
        # The package follows the driver on that tray: now the domain runs two releases.
        rack.simrack("fault", "version", "rack1-tray03", "580.105.08")
        try:
            assert_refused_before_any_write(
                rack, site(rack, tmp_path, **CHANGE),
                "domain rack1 runs different driver releases: 580.105.08 on rack1-tray03; "
                "580.95.09 on rack1-tray01, rack1-tray02; the daemons would answer !V!")
        finally:
            rack.simrack("fault", "heal", "version", "rack1-tray03")
    finally:
        rack.simrack("fault", "heal", "driver-version", "rack1-tray03")
    assert site(rack, tmp_path).rc == 0


def test_host_names_are_refused_on_the_driver_the_trays_really_run(simulated_rack, tmp_path):
    """imex_driver_version is not set: the driver release read from each tray decides."""
    rack = simulated_rack
    with open(rack.inventory) as handle:
        inventory = yaml.safe_load(handle)
    for tray, host_vars in inventory["all"]["children"]["imex_domains"]["children"]["rack1"]["hosts"].items():
        host_vars["imex_address"] = tray
    by_name = write_inventory(tmp_path, inventory, "by-name.yml")
    old = "570.148.08"
    for tray in rack.trays_of(1):
        rack.simrack("fault", "driver-version", tray, old)
        rack.simrack("fault", "version", tray, old)
    try:
        assert_refused_before_any_write(
            rack, site(rack, tmp_path, inventory=by_name, **CHANGE),
            "domain rack1 uses host names in its node list (rack1-tray01, rack1-tray02, rack1-tray03), which need "
            "driver 570.158.01 or newer; its trays run 570.148.08")
    finally:
        for tray in rack.trays_of(1):
            rack.simrack("fault", "heal", "version", tray)
            rack.simrack("fault", "heal", "driver-version", tray)
    assert site(rack, tmp_path).rc == 0
