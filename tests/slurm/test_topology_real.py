# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The block topology this collection writes, read by a real slurmctld (24.11; topology.yaml on 26.05
is test_topology_yaml_real.py).

For every accepted inventory of the unit tests' matrix, the file rendered by plugin_utils is handed to
a real slurmctld, whose `scontrol show topology` must give the inventory's blocks exactly, and whose
`scontrol --version`, `show config` and `show nodes` must pass the checks made before a write. For
refused inventories, what slurmctld itself does with the file we refuse to write: why each refusal
is there.
"""
from __future__ import annotations

import pytest

from slurmctld import SlurmctldError, slurm_conf

from ansible_collections.rackscale.imex.plugins.module_utils._slurm import (
    parse_node_names,
    parse_show_config,
    parse_show_topology,
    parse_version,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils import _slurm_topology as topology
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.slurm_topology_matrix import (
    ACCEPTED,
    SLURM_REFUSED,
    STATIC_REFUSED,
    model_of,
    slurm_nodes,
)


def planned(entry):
    model, hostvars = model_of(entry)
    sizes, problem = topology.convert_block_sizes(entry["block_sizes"])
    assert problem is None
    blocks = topology.domain_blocks(model, hostvars)
    return blocks, sizes


def conf_for(entry, nodes):
    extra = ["PrologFlags=%s" % entry["prolog_flags"]] if entry.get("prolog_flags") else []
    return slurm_conf(nodes, topology_plugin=entry.get("topology_plugin", "topology/block"), extra=extra)


def read_slurm(daemon):
    return (parse_version(daemon.scontrol("--version").stdout)["version"],
            parse_show_config(daemon.scontrol("show", "config").stdout),
            parse_node_names(daemon.scontrol("show", "nodes", "--future", "--oneliner").stdout),
            parse_show_topology(daemon.scontrol("show", "topology").stdout))


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_slurmctld_runs_exactly_the_inventory_s_blocks(slurmctld, name):
    entry = ACCEPTED[name]
    blocks, sizes = planned(entry)
    hostvars = model_of(entry)[1]
    assert topology.static_problems(blocks, sizes, entry["path"]) == []
    sizes = topology.block_sizes_for(blocks, sizes)
    nodes = slurm_nodes(entry)
    daemon = slurmctld(nodes, topology.render(blocks, sizes, entry["path"]), conf=conf_for(entry, nodes))
    version, config, known, records = read_slurm(daemon)
    assert topology.slurm_problems(blocks, sizes, entry["path"], version, config, known,
                                   topology.per_job_trays(hostvars)) == []
    base = [record for record in records if not record["aggregated"]]
    assert [(record["name"], record["nodes"], record["size"]) for record in base] == [
        (group, list(members), sizes[0]) for group, members in entry["blocks"]]
    assert topology.topology_differences(blocks, sizes, records) == []
    # The higher levels Slurm formed: neighbouring blocks in file order, at the sizes written.
    for record in records:
        if record["aggregated"]:
            joined = [block[0] for block in entry["blocks"]][:len(record["members"])]
            assert record["size"] in sizes[1:] and record["members"][:1] == joined[:1]
    assert "warning" not in "\n".join(line for line in daemon.log().splitlines() if "block" in line.lower())


def test_reconfigure_makes_slurmctld_read_a_changed_file(slurmctld):
    entry = ACCEPTED["three racks, default sizes up to the node count"]
    blocks, sizes = planned(entry)
    sizes = topology.block_sizes_for(blocks, sizes)
    daemon = slurmctld(slurm_nodes(entry), topology.render(list(reversed(blocks)), sizes, entry["path"]))
    before = parse_show_topology(daemon.scontrol("show", "topology").stdout)
    assert topology.topology_differences(blocks, sizes, before)[0].startswith("Slurm orders the blocks rack3, rack2, rack1")
    daemon.write_etc("topology.conf", topology.render(blocks, sizes, entry["path"]))
    daemon.scontrol("reconfigure")
    daemon.wait_answering()
    assert topology.topology_differences(blocks, sizes, parse_show_topology(
        daemon.scontrol("show", "topology").stdout)) == []


def test_a_node_in_two_blocks_is_accepted_silently_which_is_why_it_is_refused(slurmctld):
    entry = STATIC_REFUSED["a node in two blocks"]
    model, hostvars = model_of(entry)
    blocks = topology.domain_blocks(model, hostvars)
    assert topology.static_problems(blocks, [], entry["path"]) != []
    nodes = sorted(set(slurm_nodes(entry)))
    daemon = slurmctld(nodes, topology.render(blocks, [2, 4], entry["path"]))
    records = parse_show_topology(daemon.scontrol("show", "topology").stdout)
    assert [record["nodes"] for record in records if not record["aggregated"]] == [
        ["rack1-tray01", "rack1-tray02"], ["rack1-tray01", "rack2-tray02"]]
    complaints = [line for line in daemon.log().splitlines() if "rack1-tray01" in line
                  and any(word in line for word in ("warning", "error", "fatal"))]
    assert complaints == []


def test_an_unknown_node_is_only_a_warning_and_stays_in_show_topology(slurmctld):
    """Why the node names are checked against Slurm's before the write: show topology would not tell,
    and the node is silently missing from the block (which, below the base size, is fatal)."""
    entry = SLURM_REFUSED["a node Slurm does not know"]
    blocks = planned(entry)[0]
    with pytest.raises(SlurmctldError) as stopped:
        slurmctld(["rack1-tray01"], topology.render(blocks, [2], entry["path"]))
    assert "fatal: Block configuration (rack1) children count lower than bblock_node_cnt" in str(stopped.value)
    daemon = slurmctld(["rack1-tray01"], topology.render(blocks, [1], entry["path"]))
    records = parse_show_topology(daemon.scontrol("show", "topology").stdout)
    assert records[0]["nodes"] == ["rack1-tray01", "ghost"]
    assert "Invalid hostnames in block configuration: ghost" in daemon.log()
    known = parse_node_names(daemon.scontrol("show", "nodes", "--future", "--oneliner").stdout)
    assert known == ["rack1-tray01"]


def test_a_block_name_with_a_comma_is_misread_in_the_aggregated_block(slurmctld):
    entry = STATIC_REFUSED["a block name with a comma"]
    nodes = slurm_nodes(entry) + ["rack2-tray01", "rack2-tray02"]
    daemon = slurmctld(nodes, "BlockName=rack,1 Nodes=rack1-tray01,rack1-tray02\n"
                              "BlockName=rack2 Nodes=rack2-tray01,rack2-tray02\nBlockSizes=2,4\n")
    aggregated = [record for record in parse_show_topology(daemon.scontrol("show", "topology").stdout)
                  if record["aggregated"]]
    assert aggregated[0]["members"] == ["rack", "1", "rack2"]


@pytest.mark.parametrize("name, fatal", [
    ("BlockSizes not the base times powers of two", "fatal: Invalid BlockSizes value: 12"),
    ("a block smaller than the base size on Slurm 24.11",
     "fatal: Block configuration (rack1) children count lower than bblock_node_cnt"),
    ("domains of different sizes on Slurm 24.11",
     "fatal: Block configuration (rack2) children count lower than bblock_node_cnt"),
])
def test_slurmctld_dies_on_what_is_refused(slurmctld, name, fatal):
    entry = STATIC_REFUSED.get(name) or SLURM_REFUSED[name]
    model, hostvars = model_of(entry)
    blocks = topology.domain_blocks(model, hostvars)
    sizes = topology.block_sizes_for(blocks, topology.convert_block_sizes(entry["block_sizes"])[0])
    with pytest.raises(SlurmctldError) as stopped:
        slurmctld(slurm_nodes(entry), topology.render(blocks, sizes, entry["path"]))
    assert fatal in str(stopped.value)


def test_domains_of_different_sizes_are_merged_silently(slurmctld):
    """Two 9-tray partitions first, two 18-tray racks after: the racks are taken as 9-node blocks, and
    the two racks joined into one block of BlockSize 18 that holds 36 nodes of two IMEX domains."""
    partitions = ["p-%02d" % n for n in range(1, 19)]
    racks = ["r2-%02d" % n for n in range(1, 19)] + ["r3-%02d" % n for n in range(1, 19)]
    daemon = slurmctld(partitions + racks, "".join("BlockName=%s Nodes=%s\n" % (name, ",".join(nodes)) for name, nodes in (
        ("nvl_a", partitions[:9]), ("nvl_b", partitions[9:]), ("rack2", racks[:18]), ("rack3", racks[18:]))))
    records = parse_show_topology(daemon.scontrol("show", "topology").stdout)
    assert [(record["name"], record["size"]) for record in records if not record["aggregated"]] == [
        ("nvl_a", 9), ("nvl_b", 9), ("rack2", 9), ("rack3", 9)]
    joined = [record for record in records if record["aggregated"] and record["members"] == ["rack2", "rack3"]]
    assert [(record["size"], len(record["nodes"])) for record in joined] == [(18, 36)]
    assert "warning" not in daemon.log().lower()


def test_topology_yaml_is_not_read_by_24_11_which_is_why_it_is_refused(slurmctld):
    entry = SLURM_REFUSED["topology.yaml on Slurm 24.11"]
    blocks, sizes = planned(entry)
    sizes = topology.block_sizes_for(blocks, sizes)
    daemon = slurmctld(slurm_nodes(entry), "BlockName=hand Nodes=rack1-tray[01-02]\n")
    daemon.write_etc("topology.yaml", topology.render(blocks, sizes, entry["path"]))
    daemon.scontrol("reconfigure")
    daemon.wait_answering()
    version, config, known, records = read_slurm(daemon)
    assert [record["name"] for record in records] == ["hand"]
    assert topology.slurm_problems(blocks, sizes, entry["path"], version, config, known, [], ["topology.conf",
                                   "topology.yaml"])[0].startswith("imex_slurm_topology_file = '/etc/slurm/topology.yaml': "
                                                                   "topology.yaml needs Slurm >= 25.05")
