"""Testinfra checks of a converged tray: the collection's end state, read on the tray itself.

The expected node list comes from the simrack inventory (the one converge used), so each tray
is checked against its own rack only.
"""
from __future__ import annotations

import os
import re

import yaml

INVENTORY = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "simrack", "inventory.yml")


def rack_of(hostname):
    with open(INVENTORY) as handle:
        inventory = yaml.safe_load(handle)
    for group in inventory["all"]["children"]["imex_domains"]["children"].values():
        if hostname in group["hosts"]:
            return [group["hosts"][tray]["ansible_host"] for tray in sorted(group["hosts"])]
    raise AssertionError("%s is in no domain of %s" % (hostname, INVENTORY))


def test_node_list_is_this_racks_in_order(host):
    expected = "".join(address + "\n" for address in rack_of(host.backend.get_hostname()))
    node_list = host.file("/etc/nvidia-imex/nodes_config.cfg")
    assert node_list.content_string == expected
    assert (node_list.user, node_list.group, node_list.mode) == ("root", "root", 0o644)


def test_daemon_config_enables_the_command_service(host):
    config = host.file("/etc/nvidia-imex/config.cfg").content_string
    for line in ("IMEX_CMD_ENABLED=1", "IMEX_CMD_PORT=50005", "SERVER_PORT=50000",
                 "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg"):
        assert re.search("^%s$" % re.escape(line), config, re.M), line


def test_channel0_is_persistent_and_present(host):
    assert host.file("/etc/modprobe.d/nvidia-imex.conf").contains("^options nvidia NVreg_CreateImexChannel0=1$")
    major = re.search(r"^(\d+) nvidia-caps-imex-channels$", host.file("/proc/devices").content_string, re.M)
    kind, mode, major_hex, minor_hex = host.check_output(
        "stat -c '%F|%a|%t|%T' /dev/nvidia-caps-imex-channels/channel0").split("|")
    assert (kind, mode) == ("character special file", "666")
    assert (int(major_hex, 16), int(minor_hex, 16)) == (int(major.group(1)), 0)


def test_service_enabled_and_running(host):
    service = host.service("nvidia-imex")
    assert service.is_enabled and service.is_running


def test_domain_is_up_with_every_pair_connected(host):
    out = host.check_output("nvidia-imex-ctl -N")
    nodes = rack_of(host.backend.get_hostname())
    assert out.rstrip().endswith("Domain State: UP")
    assert len(re.findall(r"^Node #\d+\s+- \S+\s+- READY\s", out, re.M)) == len(nodes)
    rows = re.findall(r"^\s+\d+\s{8}(.*)$", out, re.M)
    assert len(rows) == len(nodes) and all(set(row.split()) == {"C"} for row in rows)
