"""Each role is usable on its own, through its argument spec alone; options given as strings work.

On a 2 x 3 bed: a playbook that imports only rackscale.imex.imex_channels makes channel0 on the
trays; the site playbook converges with every boolean given as a string on the command line (as an
operator's shell or an AWX survey gives it); the validate entry point alone proves the converged
rack, and no other role runs.
"""
from __future__ import annotations

import collections
import json
import os

from conftest import requires_rack, run_playbook

pytestmark = requires_rack
RACK_SHAPE = (2, 3)

CHANNELS_ONLY = """\
---
- name: Channels only
  hosts: imex_domains
  gather_facts: false
  roles:
    - role: rackscale.imex.imex_channels
      imex_channels_channel0: "{{ want_channel0 }}"
      imex_channels_extra: "{{ extra_channels }}"
"""

CHANNEL_DIR = "/dev/nvidia-caps-imex-channels"


def test_the_channels_role_alone_makes_the_channels(simulated_rack, tmp_path):
    playbook = tmp_path / "channels.yml"
    playbook.write_text(CHANNELS_ONLY)
    run = run_playbook(str(playbook), simulated_rack.inventory,
                       cmdline_vars={"want_channel0": "yes", "imex_channels_reboot_allowed": "no"},
                       extravars={"extra_channels": [{"channel": 7, "mode": "0600"}, {"channel": 9, "group": "daemon",
                                                                                      "mode": "0660"}]})
    assert run.rc == 0, run.stdout[-3000:]
    assert run.roles_run() == ["imex_channels"]
    for tray in simulated_rack.trays_of(1) + simulated_rack.trays_of(2):
        listing = simulated_rack.ssh(tray, "stat", "-c", "%n %F %a", CHANNEL_DIR + "/channel0", CHANNEL_DIR + "/channel7")
        assert listing.returncode == 0, listing.stderr
        assert listing.stdout.split("\n")[:2] == [CHANNEL_DIR + "/channel0 character special file 666",
                                                  CHANNEL_DIR + "/channel7 character special file 600"]
        option = simulated_rack.ssh(tray, "cat", "/etc/modprobe.d/nvidia-imex.conf")
        assert "NVreg_CreateImexChannel0=1" in option.stdout

    # The isolation channels come back after a reboot, as they were made, with no run in between.
    simulated_rack.simrack("fault", "reboot", "rack1-tray02")
    after = simulated_rack.ssh("rack1-tray02", "stat", "-c", "%n %F %a %G",
                               CHANNEL_DIR + "/channel7", CHANNEL_DIR + "/channel9")
    assert after.stdout.split("\n")[:2] == [CHANNEL_DIR + "/channel7 character special file 600 root",
                                            CHANNEL_DIR + "/channel9 character special file 660 daemon"], \
        after.stdout + after.stderr
    unit = simulated_rack.ssh("rack1-tray02", "systemctl", "is-active", "rackscale-imex-channels.service")
    assert unit.stdout.strip() == "active", unit.stdout + unit.stderr

    # channel9 given up: its boot entry goes with its node; in the slurm mode every entry goes.
    again = run_playbook(str(playbook), simulated_rack.inventory, cmdline_vars={"want_channel0": "yes"},
                         extravars={"extra_channels": [{"channel": 7, "mode": "0600"}, {"channel": 9, "state": "absent"}]})
    assert again.rc == 0, again.stdout[-3000:]
    entries = simulated_rack.ssh("rack1-tray02", "sh", "-c", "cat /etc/rackscale-imex/channels.d/*")
    assert entries.stdout.splitlines() == ["7 root root 0600"], entries.stdout
    slurm = run_playbook(str(playbook), simulated_rack.inventory,
                         cmdline_vars={"want_channel0": "no", "imex_channels_mode": "slurm"},
                         extravars={"extra_channels": []})
    assert slurm.rc == 0, slurm.stdout[-3000:]
    assert simulated_rack.ssh("rack1-tray02", "test", "-e", "/etc/rackscale-imex/channels.d").returncode == 1


def test_site_takes_every_boolean_as_a_string(simulated_rack, tmp_path):
    """Options as an operator's shell or an AWX survey hands them over: text, mappings and lists as
    JSON or YAML text too."""
    reports = str(tmp_path / "reports")
    run = run_playbook("site.yml", simulated_rack.inventory, extravars={"imex_report_dir": reports},
                       cmdline_vars={"imex_settings": '{"LOG_LEVEL":"4"}', "imex_channels": "[]",
                                     "imex_trays_out_of_service": "[]",
                                     "imex_rolling": "false", "imex_skip_fabric_check": "true", "imex_tls": "false",
                                     "imex_cmd_bind_own_address": "no", "imex_backup": "False",
                                     "imex_reboot_allowed": "false", "imex_allow_mixed_families": "false",
                                     "imex_channel0": "yes", "imex_allow_busy_restart": "no",
                                     "imex_shared_partition": "false", "imex_require_declared_size": "false",
                                     "imex_validate_timeout_s": "120", "imex_allowed_broken_pairs": "0"})
    assert run.rc == 0, run.stdout[-3000:]
    # imex_skip_fabric_check=true: the fabric gate is skipped and the run says so; each tray is still
    # read, for the version checks and the restart guard (and again under the lock of a domain the run has
    # something to do on).
    said = [res["msg"] for _, task, _, res in run.ok_results() if task == "Say what the NVLink fabric gate skipped or noted"]
    assert said == ["imex_skip_fabric_check is true: the NVLink fabric identity of the trays is NOT checked."]
    read = collections.Counter(host for host, _ in run.ok_tasks("rackscale.imex.imex_tray_info"))
    assert sorted(read) == sorted(simulated_rack.trays_of(1) + simulated_rack.trays_of(2))
    assert set(read.values()) <= {1, 2}, read
    # imex_cmd_bind_own_address=no: the command service listens on every address.
    config = simulated_rack.ssh("rack1-tray01", "cat", "/etc/nvidia-imex/config.cfg").stdout
    assert "IMEX_CMD_BIND_INTERFACE_IP=\n" in config or "IMEX_CMD_BIND_INTERFACE_IP=" not in config, config
    # imex_rolling=false: one wave holds both racks.
    assert "(item=rack1, rack2)" in run.stdout, run.stdout[-3000:]
    # imex_backup=False: the writes kept no copy.
    listing = simulated_rack.ssh("rack1-tray01", "ls", "/etc/nvidia-imex")
    assert [name for name in listing.stdout.split() if "~" in name or ".bak" in name or "@" in name] == []
    verdicts = {name: json.load(open(os.path.join(reports, name)))["verdict"]
                for name in os.listdir(reports) if name.endswith(".json")}
    assert verdicts == {"rack1.json": "healthy", "rack2.json": "healthy"}


def test_the_validate_entry_point_alone_proves_the_converged_rack(simulated_rack, tmp_path):
    reports = str(tmp_path / "reports")
    run = run_playbook("validate.yml", simulated_rack.inventory, extravars={"imex_report_dir": reports},
                       cmdline_vars={"imex_skip_fabric_check": "false", "imex_validate_timeout_s": "60",
                                     "imex_allow_mixed_families": "no", "imex_shared_partition": "False",
                                     "imex_require_declared_size": "false"})
    assert run.rc == 0, run.stdout[-3000:]
    assert run.roles_run() == ["imex"]
    modules = {action for _, _, action, _ in run.ok_results()}
    assert modules <= {"rackscale.imex.imex_tray_info", "rackscale.imex.imex_status", "rackscale.imex.imex_report",
                       "rackscale.imex.imex_plan",
                       "ansible.builtin.assert", "ansible.builtin.set_fact", "ansible.builtin.set_stats",
                       "ansible.builtin.include_tasks", "ansible.builtin.validate_argument_spec"}, modules
    assert run.changed_hosts() == []
    assert sorted(os.listdir(reports)) == ["rack1.json", "rack2.json", "summary.md"]


def test_tags_run_one_phase_with_the_checks_the_locks_and_the_read(simulated_rack, tmp_path):
    extravars = {"imex_report_dir": str(tmp_path / "reports"), "imex_settings": {"LOG_LEVEL": 3}}
    # Work for the channels phase: the channel module runs only where the read finds something to do.
    channel0 = "/dev/nvidia-caps-imex-channels/channel0"
    assert simulated_rack.ssh("rack1-tray01", "rm", "-f", channel0).returncode == 0
    channels = run_playbook("site.yml", simulated_rack.inventory, extravars=extravars, tags="imex_channels")
    assert channels.rc == 0, channels.stdout[-3000:]
    assert simulated_rack.ssh("rack1-tray01", "test", "-c", channel0).returncode == 0
    assert "rack1-tray01" in channels.changed_hosts()
    modules = {action for _, _, action, _ in channels.ok_results()}
    assert {"rackscale.imex.imex_lock", "rackscale.imex.imex_tray_info", "rackscale.imex.imex_channel"} <= modules
    assert not modules & {"rackscale.imex.imex_config", "rackscale.imex.imex_nodes_config", "rackscale.imex.imex_status"}
    # The daemon phase was skipped: the setting is not written yet.
    level = simulated_rack.ssh("rack1-tray01", "grep", "^LOG_LEVEL=", "/etc/nvidia-imex/config.cfg").stdout.strip()
    assert level != "LOG_LEVEL=3"

    daemon = run_playbook("site.yml", simulated_rack.inventory, extravars=extravars, tags="imex_daemon")
    assert daemon.rc == 0, daemon.stdout[-3000:]
    modules = {action for _, _, action, _ in daemon.ok_results()}
    assert "rackscale.imex.imex_channel" not in modules and "rackscale.imex.imex_status" in modules
    assert simulated_rack.ssh("rack1-tray01", "grep", "^LOG_LEVEL=", "/etc/nvidia-imex/config.cfg").stdout.strip() \
        == "LOG_LEVEL=3"
    validate = run_playbook("site.yml", simulated_rack.inventory, extravars=extravars, tags="imex_validate")
    assert validate.rc == 0, validate.stdout[-3000:]
    modules = {action for _, _, action, _ in validate.ok_results()}
    assert "rackscale.imex.imex_status" in modules and "rackscale.imex.imex_report" in modules
    assert not modules & {"rackscale.imex.imex_channel", "rackscale.imex.imex_config", "rackscale.imex.imex_nodes_config"}
    assert validate.changed_hosts() == []

    # The report phase alone: one status read of each domain, however unhealthy, and its reports. With
    # the default imex_validate_timeout_s (300 s) a run that waited would read rack1 again and again.
    simulated_rack.simrack("fault", "link-cut", "rack1-tray02", "rack1-tray03")
    try:
        report = run_playbook("site.yml", simulated_rack.inventory, extravars=extravars, tags="imex_report")
    finally:
        simulated_rack.simrack("fault", "heal", "link-cut", "rack1-tray02", "rack1-tray03")
    assert report.rc != 0, report.stdout[-3000:]
    reads = {res["item"]: res for _, res in report.module_results("rackscale.imex.imex_status")}
    assert sorted(reads) == ["rack1", "rack2"] and {res["attempts"] for res in reads.values()} == {1}, reads
    assert not reads["rack1"]["healthy"] and reads["rack2"]["healthy"]
    modules = {action for _, _, action, _ in report.ok_results()}
    assert "rackscale.imex.imex_report" in modules
    assert not modules & {"rackscale.imex.imex_channel", "rackscale.imex.imex_config", "rackscale.imex.imex_nodes_config"}
    assert report.changed_hosts() == []
    with open(os.path.join(extravars["imex_report_dir"], "rack1.json")) as handle:
        rack1 = json.load(handle)
    assert rack1["verdict"] != "healthy"
    assert {(pair["from_index"], pair["to_index"]) for pair in rack1["status"]["broken_pairs"]} == {(1, 2), (2, 1)}
    assert any("pair 1 (%s, rack1-tray02) -> 2 (%s, rack1-tray03)" % (
        simulated_rack.address("rack1-tray02"), simulated_rack.address("rack1-tray03")) in message
               for message in report.failure_messages()), report.failure_messages()

    preflight = run_playbook("site.yml", simulated_rack.inventory, extravars=extravars, tags="imex_preflight")
    assert preflight.rc == 0, preflight.stdout[-3000:]
    modules = {action for _, _, action, _ in preflight.ok_results()}
    assert "rackscale.imex.imex_tray_info" in modules and "rackscale.imex.imex_status" not in modules
    assert "Preflight passed for rack1, rack2" in preflight.stdout and preflight.changed_hosts() == []
