"""Versions are checked before anything is written (1 x 3 bed).

A tray whose nvidia-imex is not its driver's release, and a domain whose trays run different
releases, are refused by the run's one read of the trays, naming trays and versions, before any
write or restart. (A daemon left running another release than the one installed restarts with its
domain, and host names need a recent enough driver: decisions proven in tests/unit.)
"""
from __future__ import annotations

from conftest import requires_rack, run_playbook

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

