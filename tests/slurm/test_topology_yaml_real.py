# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The topology.yaml this collection writes, read by a real slurmctld of Slurm >= 25.05 (Debian forky's
26.05, `simrack rootfs --slurm --suite forky`, built once on the first test that needs it).

Every accepted inventory of the unit tests' matrix is rendered as topology.yaml by plugin_utils and
handed to slurmctld, whose `scontrol show topology` must give the inventory's blocks exactly, and
whose `scontrol --version`, `show config` and `show nodes` must pass the checks made before a write.
Blocks smaller than the base size (a domain with a tray fewer, partitions next to whole racks) are
accepted from 25.05: slurmctld keeps each one a block of its own. The playbook writes topology.yaml
and reconfigures that slurmctld, and refuses to write a topology.conf it would ignore.
"""
from __future__ import annotations

import os

import pytest

from slurmctld import slurm_conf
from test_playbook_real import RACKS, inventory, playbook

from ansible_collections.rackscale.imex.plugins.module_utils._slurm import (
    parse_node_names,
    parse_show_config,
    parse_show_topology,
    parse_version,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils import _slurm_topology as topology
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.slurm_topology_matrix import (
    ACCEPTED,
    ACCEPTED_FROM_25_05,
    YAML,
    model_of,
    slurm_nodes,
)

YAML_NAME = "topology.yaml"
# Every accepted inventory, written as topology.yaml.
CASES = dict({name: dict(entry, path=YAML) for name, entry in ACCEPTED.items()}, **ACCEPTED_FROM_25_05)
HAND_WRITTEN_YAML = ("- topology: hand\n  cluster_default: true\n  block:\n    block_sizes: [8]\n    blocks:\n"
                     "      - block: all\n        nodes: rack1-tray[01-04],rack2-tray[01-04]\n")


def planned(entry):
    model, hostvars = model_of(entry)
    sizes, problem = topology.convert_block_sizes(entry["block_sizes"])
    assert problem is None
    blocks = topology.domain_blocks(model, hostvars)
    assert topology.static_problems(blocks, sizes, entry["path"], "imex") == []
    return blocks, topology.block_sizes_for(blocks, sizes), hostvars


def yaml_conf(nodes, entry=None):
    """slurm.conf without a TopologyPlugin line: topology.yaml alone makes the cluster's topology."""
    extra = ["PrologFlags=%s" % entry["prolog_flags"]] if entry and entry.get("prolog_flags") else []
    return slurm_conf(nodes, topology_plugin=None, extra=extra)


def start_yaml(slurmctld_yaml, nodes, text, conf=None):
    return slurmctld_yaml(nodes, text, topology_name=YAML_NAME, conf=conf or yaml_conf(nodes))


def complaints(daemon):
    """The log's warnings, errors and fatal lines about blocks or the topology. Debug lines are not:
    Slurm's YAML reader reads every scalar as a string and notes "WARNING: Expected OpenAPI
    type=boolean ... got string" at debug level before converting it."""
    return [line for line in daemon.log().splitlines()
            if any(word in line.lower() for word in ("warning", "error", "fatal"))
            and any(word in line.lower() for word in ("block", "topolog"))
            and "debug:" not in line]


def test_the_version_of_26_05_is_read_as_one_that_reads_topology_yaml(slurmctld_yaml):
    daemon = start_yaml(slurmctld_yaml, ["rack1-tray01"], "- topology: imex\n  cluster_default: true\n  block:\n"
                        "    block_sizes: [1]\n    blocks:\n      - block: rack1\n        nodes: rack1-tray01\n")
    printed = daemon.scontrol("--version").stdout
    version = parse_version(printed)
    config = parse_show_config(daemon.scontrol("show", "config").stdout)
    assert printed.startswith("slurm-wlm ") and version["version"] >= (25, 5, 0), printed
    assert config["SLURM_VERSION"] == version["text"] and config["SLURM_CONF"] == "/etc/slurm/slurm.conf"
    # No TopologyPlugin line: 26.05 names its default topology/flat, yet runs topology.yaml's blocks.
    assert config["TopologyPlugin"] == "topology/flat"
    assert [record["name"] for record in parse_show_topology(daemon.scontrol("show", "topology").stdout)] == ["rack1"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_slurmctld_runs_exactly_the_inventory_s_blocks_from_topology_yaml(slurmctld_yaml, name):
    entry = CASES[name]
    blocks, sizes, hostvars = planned(entry)
    nodes = slurm_nodes(entry)
    daemon = start_yaml(slurmctld_yaml, nodes, topology.render(blocks, sizes, entry["path"]), yaml_conf(nodes, entry))
    version = parse_version(daemon.scontrol("--version").stdout)["version"]
    config = parse_show_config(daemon.scontrol("show", "config").stdout)
    known = parse_node_names(daemon.scontrol("show", "nodes", "--future", "--oneliner").stdout)
    assert topology.slurm_problems(blocks, sizes, entry["path"], version, config, known,
                                   topology.per_job_trays(hostvars), sorted(os.listdir(daemon.etc))) == []
    records = parse_show_topology(daemon.scontrol("show", "topology").stdout)
    assert [(record["name"], record["nodes"], record["size"]) for record in records if not record["aggregated"]] == [
        (group, list(members), sizes[0]) for group, members in entry["blocks"]]
    assert topology.topology_differences(blocks, sizes, records) == []
    # Blocks below the base size too: accepted without a word, each one a block of its own.
    assert complaints(daemon) == []


def test_a_block_smaller_than_the_base_size_joins_its_neighbour_only_at_the_next_level(slurmctld_yaml):
    entry = ACCEPTED_FROM_25_05["a rack with a tray fewer than the others"]
    blocks, sizes, _hostvars = planned(entry)
    daemon = start_yaml(slurmctld_yaml, slurm_nodes(entry), topology.render(blocks, sizes, entry["path"]))
    records = parse_show_topology(daemon.scontrol("show", "topology").stdout)
    assert [(record["members"], record["size"], len(record["nodes"])) for record in records] == [
        (["rack1"], 4, 3), (["rack2"], 4, 4), (["rack3"], 4, 4), (["rack1", "rack2"], 8, 7)]


def test_a_partition_selects_the_topology_by_its_name(slurmctld_yaml):
    entry = CASES["three racks, default sizes up to the node count"]
    blocks, sizes, _hostvars = planned(entry)
    nodes = slurm_nodes(entry)
    conf = yaml_conf(nodes) + "PartitionName=imexpart Nodes=ALL Topology=imex State=UP\n"
    daemon = start_yaml(slurmctld_yaml, nodes, topology.render(blocks, sizes, entry["path"], "imex"), conf)
    assert "Topology=imex " in daemon.scontrol("show", "partition", "imexpart", "--oneliner").stdout
    assert topology.topology_differences(blocks, sizes, parse_show_topology(
        daemon.scontrol("show", "topology", "imex").stdout)) == []


def test_topology_conf_is_ignored_beside_topology_yaml_which_is_why_it_is_refused(slurmctld_yaml):
    entry = CASES["three racks, default sizes up to the node count"]
    blocks, sizes, _hostvars = planned(entry)
    daemon = start_yaml(slurmctld_yaml, slurm_nodes(entry), topology.render(blocks, sizes, YAML))
    daemon.write_etc("topology.conf", topology.render(list(reversed(blocks)), sizes, "/etc/slurm/topology.conf"))
    daemon.scontrol("reconfigure")
    daemon.wait_answering()
    assert topology.topology_differences(blocks, sizes, parse_show_topology(
        daemon.scontrol("show", "topology").stdout)) == []


# -- playbooks/slurm_topology.yml against slurmctld 26.05 ---------------------------------------------------

@pytest.fixture
def daemon_yaml(slurmctld_yaml):
    nodes = [tray for trays in RACKS.values() for tray in trays]
    return start_yaml(slurmctld_yaml, nodes, HAND_WRITTEN_YAML)


def test_the_playbook_writes_topology_yaml_reconfigures_and_then_changes_nothing(daemon_yaml, tmp_path):
    path = inventory(tmp_path, daemon_yaml)
    options = ("-e", "imex_slurm_topology_file=/etc/slurm/topology.yaml")
    rc, result, found = playbook(path, tmp_path, "--check", "--diff", *options)
    assert rc == 0, found[-4000:]
    assert result["changed"] and daemon_yaml.read_etc(YAML_NAME) == HAND_WRITTEN_YAML
    assert result["slurm_version"].startswith("26.05") and result["topology_files"] == [YAML_NAME]

    rc, result, found = playbook(path, tmp_path, *options)
    assert rc == 0, found[-4000:]
    assert result["changed"] and result["reconfigured"] and result["differences"] == []
    records = parse_show_topology(daemon_yaml.scontrol("show", "topology").stdout)
    assert [(record["name"], record["nodes"], record["size"]) for record in records if not record["aggregated"]] == [
        (rack, trays, 4) for rack, trays in RACKS.items()]
    assert '- topology: "imex"' in daemon_yaml.read_etc(YAML_NAME)
    backups = [name for name in os.listdir(daemon_yaml.etc) if name.startswith(YAML_NAME + ".")]
    assert len(backups) == 1 and daemon_yaml.read_etc(backups[0]) == HAND_WRITTEN_YAML

    rc, result, found = playbook(path, tmp_path, *options)
    assert rc == 0 and not result["changed"] and not result["reconfigured"], found[-4000:]


def test_the_playbook_refuses_a_topology_conf_slurm_would_ignore(daemon_yaml, tmp_path):
    rc, result, found = playbook(inventory(tmp_path, daemon_yaml), tmp_path)
    assert rc != 0
    assert ("imex_slurm_topology_file = '/etc/slurm/topology.conf': /etc/slurm/topology.yaml exists, and Slurm "
            "26.05") in result["msg"], found[-4000:]
    assert "topology.conf" not in os.listdir(daemon_yaml.etc)


def test_a_rack_with_a_tray_fewer_through_the_playbook(slurmctld_yaml, tmp_path):
    """Domains of different sizes in one topology: the largest domain's size is the base, and 26.05 runs
    the smaller block as a block of its own."""
    racks = {"rack1": RACKS["rack1"], "rack2": RACKS["rack2"][:3]}
    daemon = start_yaml(slurmctld_yaml, [tray for trays in RACKS.values() for tray in trays], HAND_WRITTEN_YAML)
    rc, result, found = playbook(inventory(tmp_path, daemon, racks=racks), tmp_path,
                                 "-e", "imex_slurm_topology_file=/etc/slurm/topology.yaml")
    assert rc == 0, found[-4000:]
    assert result["block_sizes"] == [4] and result["differences"] == []
    records = parse_show_topology(daemon.scontrol("show", "topology").stdout)
    assert [(record["name"], record["nodes"], record["size"]) for record in records] == [
        ("rack1", racks["rack1"], 4), ("rack2", racks["rack2"], 4)]
