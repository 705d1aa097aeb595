"""Bad input is refused on the controller, before any tray is contacted, with a precise message.

The trays use addresses of 198.18.200.0/24, where nothing listens: a run that got past the
controller-side checks would show unreachable trays, which every test here rules out.
"""
from __future__ import annotations

import pytest

from conftest import run_playbook, write_inventory

# Every module the playbooks run on a tray (the lock is delegated to each domain's first tray).
TRAY_MODULES = {"rackscale.imex.imex_tray_info", "rackscale.imex.imex_channel", "rackscale.imex.imex_lock",
                "rackscale.imex.imex_nodes_config", "rackscale.imex.imex_config", "rackscale.imex.imex_status",
                "ansible.builtin.systemd_service", "ansible.builtin.file", "ansible.builtin.copy",
                "ansible.builtin.command", "ansible.builtin.reboot"}


def rack(name, count, first=11, third_octet=200, **host_vars):
    hosts = {}
    for i in range(count):
        address = "198.18.%d.%d" % (third_octet, first + i)
        hosts["%s-tray%02d" % (name, i + 1)] = dict({"ansible_host": address}, **host_vars)
    return {"hosts": hosts}


def inventory(**domains):
    return {"all": {"children": {"imex_domains": {"children": domains}}}}


def assert_refused_before_any_tray(run, *fragments):
    assert run.rc != 0, "the run was expected to fail:\n" + run.stdout[-3000:]
    touched = [(e["event_data"].get("host"), e["event_data"].get("task_action")) for e in run.events
               if e.get("event_data", {}).get("task_action") in TRAY_MODULES
               and e.get("event", "").startswith("runner_on_")]
    assert touched == [], "a tray module ran before the refusal: %s" % touched
    assert not [e for e in run.events if e.get("event") == "runner_on_unreachable"]
    text = "\n".join(run.failure_messages())
    for fragment in fragments:
        assert fragment in text, "missing %r in:\n%s" % (fragment, text)


CASES = {
    "duplicate address": (
        inventory(rack1={"hosts": {"t1": {"ansible_host": "198.18.200.11"}, "t2": {"ansible_host": "198.18.200.11"}}}),
        {}, ["address 198.18.200.11 is used by 2 trays", "t1 (group rack1", "t2 (group rack1"]),
    "tray in two domains": (
        inventory(rack1=rack("a", 2), rack2={"hosts": {"a-tray01": {}, "b-tray01": {"ansible_host": "198.18.201.11"}}}),
        {}, ["tray a-tray01 is in 2 domain groups under imex_domains: rack1, rack2"]),
    "domain above the node limit": (
        inventory(rack1=rack("a", 19)), {}, ["rack1", "19", "18"]),
    "empty domain": (
        {"all": {"children": {"imex_domains": {"children": {"rack1": rack("a", 2), "rack2": {"hosts": {}}}}}}},
        {}, ["domain group rack2 (child of imex_domains) holds no trays"]),
    "tray of the play in no domain": (
        {"all": {"children": {"imex_domains": {"hosts": {"stray": {"ansible_host": "198.18.200.99"}},
                                               "children": {"rack1": rack("a", 2)}}}}},
        {}, ["tray stray is a direct member of imex_domains but of none of its child groups"]),
    "malformed IPv4": (
        inventory(rack1={"hosts": {"t1": {"ansible_host": "198.18.200.300"}}}), {},
        ["tray t1 (group rack1): ansible_host '198.18.200.300'"]),
    "malformed IPv6": (
        inventory(rack1={"hosts": {"t1": {"ansible_host": "198.18.200.11", "imex_address": "2001:db8::zz"}}}), {},
        ["tray t1 (group rack1): imex_address '2001:db8::zz'"]),
    "address with shell metacharacters": (
        inventory(rack1={"hosts": {"t1": {"ansible_host": "198.18.200.11", "imex_address": "tray1;reboot"}}}), {},
        ["tray t1 (group rack1): imex_address 'tray1;reboot' contains ';'"]),
    "mixed address families": (
        inventory(rack1={"hosts": {"t1": {"ansible_host": "198.18.200.11"},
                                   "t2": {"ansible_host": "198.18.200.12", "imex_address": "2001:db8::2"}}}), {},
        ["domain group rack1 mixes address families", "ipv4: t1", "ipv6: t2"]),
    "host names on a driver without support": (
        inventory(rack1={"hosts": {"t1": {"ansible_host": "198.18.200.11", "imex_address": "tray1.example"}}}),
        {"imex_driver_version": "570.148.08"}, ["tray1.example", "570.158.01", "t1"]),
    "one tray's daemon options set apart from its domain": (
        inventory(rack1={"hosts": {"a-tray01": {"ansible_host": "198.18.200.11"},
                                   "a-tray02": {"ansible_host": "198.18.200.12", "imex_settings": {"LOG_LEVEL": 4},
                                                "imex_cmd_port": "50006"}}}), {},
        ['domain rack1: imex_settings differs between its trays ({} on a-tray01; {"LOG_LEVEL": "4"} on a-tray02)',
         "domain rack1: imex_cmd_port differs between its trays (50005 on a-tray01; 50006 on a-tray02)"]),
    "unknown config key": (
        inventory(rack1=rack("a", 2)), {"imex_settings": {"IMEX_TURBO": "1"}}, ["daemon settings (imex_settings, imex_server_port, imex_cmd_port):", "IMEX_TURBO"]),
    "config value out of range": (
        inventory(rack1=rack("a", 2)), {"imex_settings": {"LOG_LEVEL": "9"}}, ["daemon settings (imex_settings, imex_server_port, imex_cmd_port):", "LOG_LEVEL", "9"]),
    "config enum out of range": (
        inventory(rack1=rack("a", 2)), {"imex_settings": {"IMEX_WAIT_FOR_QUORUM": "SOMETIMES"}},
        ["IMEX_WAIT_FOR_QUORUM", "SOMETIMES"]),
    "owned config key": (
        inventory(rack1=rack("a", 2)), {"imex_settings": {"SERVER_PORT": "50001"}},
        ["imex_settings sets SERVER_PORT, which the collection manages"]),
    "negative channel": (
        inventory(rack1=rack("a", 2)), {"imex_channels": [{"channel": -3}]},
        ["imex_channels[0] (channel -3): channel must be a whole number from 1 to 1048575"]),
    "channel beyond the minor range": (
        inventory(rack1=rack("a", 2)), {"imex_channels": [{"channel": 1048576}]},
        ["imex_channels[0] (channel 1048576): channel must be a whole number from 1 to 1048575"]),
    "isolation channel in slurm mode": (
        inventory(rack1=rack("a", 2)), {"imex_mode": "slurm", "imex_channel0": False, "imex_channels": [{"channel": 3}]},
        ["imex_channels[0] (channel 3): the channels belong to Slurm in imex_mode slurm"]),
    "dra mode with channel0": (
        inventory(rack1=rack("a", 2)), {"imex_mode": "dra", "imex_channel0": True},
        ["imex_mode=dra conflicts with imex_channel0=true"]),
    "slurm mode with channel0": (
        inventory(rack1=rack("a", 2)), {"imex_mode": "slurm", "imex_channel0": True},
        ["imex_mode=slurm conflicts with imex_channel0=true", "reserves channel 0"]),
    "slice holding part of a rack": (
        {"all": {"children": {"imex_domains": {"children": {"rack1": dict(rack("a", 3), vars={"imex_domain_size": 18})}}}}},
        {}, ["rack1", "imex_domain_size", "18", "3"]),
    "AWX job whose domains declare no size": (
        inventory(rack1=rack("a", 3)), {"awx_job_id": 42}, ["rack1", "imex_domain_size"]),
    "unknown mode": (
        inventory(rack1=rack("a", 2)), {"imex_mode": "kubernetes"},
        ["imex_mode must be one of: static, slurm, slurm_per_job, dra, dra_host_managed, got: kubernetes (trays a-tray01, a-tray02)"]),
    "missing domain parent group": (
        {"all": {"children": {"racks": {"children": {"rack1": rack("a", 2)}}}}}, {},
        ["group imex_domains is missing or holds no trays"]),
    "parent group the playbooks do not work on": (
        inventory(rack1=rack("a", 2)), {"imex_domains_group": "racks"},
        ["imex_domains_group=racks: the playbooks work on the group imex_domains",
         "write a play with hosts: racks that runs the role rackscale.imex.imex"]),
    "port out of range": (
        inventory(rack1=rack("a", 2)), {"imex_cmd_port": 70000}, ["daemon settings (imex_settings, imex_server_port, imex_cmd_port):", "IMEX_CMD_PORT", "70000"]),
    "one port for both services": (
        inventory(rack1=rack("a", 2)), {"imex_cmd_port": 50000}, ["imex_server_port and imex_cmd_port are both 50000"]),
    "daemon that does not fork": (
        inventory(rack1=rack("a", 2)), {"imex_settings": {"DAEMONIZE": 0}},
        ["imex_settings.DAEMONIZE = 0: the nvidia-imex unit is Type=forking"]),
    "authentication switched on without its source and files": (
        inventory(rack1=rack("a", 2)),
        {"imex_settings": {"IMEX_ENABLE_AUTH_ENCRYPTION": 1, "IMEX_AUTH_ENCRYPTION_MODE": "SSL_TLS"}},
        ["IMEX_AUTH_ENCRYPTION_MODE is SSL_TLS but IMEX_AUTH_SOURCE is not set",
         "IMEX_SERVER_KEY, IMEX_SERVER_CERT, IMEX_SERVER_CERT_AUTH, IMEX_CLIENT_KEY"]),
    "control character in a setting": (
        inventory(rack1=rack("a", 2)), {"imex_settings": {"IMEX_GSS_SERVICE_NAME": "imex\u2028host"}},
        ["imex_settings.IMEX_GSS_SERVICE_NAME", "contains a control character or line separator"]),
    "bad TLS target override": (
        inventory(rack1=rack("a", 2)), {"imex_tls_target_override": "imex host"},
        ["imex_tls_target_override = 'imex host' is not a host name or address"]),
    "command service bound to host names": (
        inventory(rack1={"hosts": {"t1": {"ansible_host": "198.18.200.11", "imex_address": "tray1.example"},
                                   "t2": {"ansible_host": "198.18.200.12", "imex_address": "tray2.example"}}}),
        {"imex_cmd_bind_own_address": True},
        ["imex_cmd_bind_own_address is true but domain rack1 uses host names (t1, t2)"]),
    "isolation channel listed twice with a bad owner": (
        inventory(rack1=rack("a", 2)), {"imex_channels": [{"channel": 5, "owner": "a;b"}, {"channel": 5}]},
        ["imex_channels[0] (channel 5): owner 'a;b' is not a user or group name",
         "imex_channels[1] (channel 5) repeats imex_channels[0]"]),
    "a second domain's own settings": (
        inventory(rack1=rack("a", 2), rack2=dict(rack("b", 2, third_octet=201), vars={"imex_settings": {"DAEMONIZE": 0}})),
        {}, ["domain rack2:", "imex_settings.DAEMONIZE = 0: the nvidia-imex unit is Type=forking"]),
    "a second domain's own channels": (
        inventory(rack1=rack("a", 2), rack2=dict(rack("b", 2, third_octet=201), vars={"imex_channels": [{"channel": 0}]})),
        {}, ["domain rack2:", "imex_channels[0] (channel 0): channel must be a whole number from 1 to 1048575"]),
    "no domain per wave": (
        inventory(rack1=rack("a", 2)), {"imex_rolling_batch": 0}, ["imex_rolling_batch = 0 is out of range 1..1024"]),
    "wait out of range": (
        inventory(rack1=rack("a", 2)), {"imex_ctl_timeout_s": 0}, ["imex_ctl_timeout_s = 0 is out of range 1..3600"]),
    "a service name that smuggles in another unit": (
        inventory(rack1=rack("a", 2)), {"imex_service": "nvidia-imex' 'sshd"},
        ["imex_service = \"nvidia-imex' 'sshd\" is not a systemd unit name"]),
    "a system directory for the TLS material": (
        inventory(rack1=rack("a", 2)), {"imex_tls_dir": "/etc"},
        ["imex_tls_dir = '/etc' is a system directory or directly in one"]),
    "a config path outside a directory of its own": (
        inventory(rack1=rack("a", 2)), {"imex_config_path": "/etc/shadow"},
        ["imex_config_path = '/etc/shadow' is a system directory or directly in one"]),
    "one bind address for every tray": (
        inventory(rack1=rack("a", 2)), {"imex_settings": {"BIND_INTERFACE_IP": "198.18.200.11"}},
        ["imex_settings.BIND_INTERFACE_IP = '198.18.200.11': one value for every tray of a domain"]),
    "a channel every local user may write": (
        inventory(rack1=rack("a", 2)), {"imex_channels": [{"channel": 5, "mode": "0666"}]},
        ["imex_channels[0] (channel 5): mode '0666' lets every local user write the channel"]),
    "a typo in a channel entry": (
        inventory(rack1=rack("a", 2)), {"imex_channels": [{"channel": 5, "onwer": "alice"}]},
        ["imex_channels[0] (channel 5): unknown key onwer"]),
    "TLS without its files": (
        inventory(rack1=rack("a", 2)), {"imex_tls": True, "imex_tls_ca": "/nonexistent/ca.crt"},
        ["imex_tls is true but imex_tls_ca, imex_tls_cert, imex_tls_key are unset or not a file"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_before_any_tray(case, tmp_path):
    data, extravars, fragments = CASES[case]
    run = run_playbook("site.yml", write_inventory(tmp_path, data), extravars=extravars)
    assert_refused_before_any_tray(run, *fragments)
