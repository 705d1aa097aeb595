# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's block topology from the domain model (plugins/plugin_utils/_slurm_topology.py).

The matrix of inventories is slurm_topology_matrix.py, which tests/slurm/test_topology_real.py also
starts a real slurmctld on; the Slurm answers here are what a real slurmctld 24.11.5 or 26.05.5 printed.
"""
from __future__ import annotations

import pytest
import yaml

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
    SLURM_REFUSED,
    STATIC_REFUSED,
    model_of,
    slurm_nodes,
)
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

VERSION_24_11 = parse_version(read_sample("slurm", "scontrol_version_24.11.5.txt"))["version"]
CONFIG_BLOCK = parse_show_config(read_sample("slurm", "show_config_block_no_prolog_flags.txt"))
CONFIG_BLOCK_ALLOC = parse_show_config(read_sample("slurm", "show_config_block_alloc_imex.txt"))
CONFIG_DEFAULT = parse_show_config(read_sample("slurm", "show_config_default.txt"))
VERSION_26_05 = parse_version(read_sample("slurm", "scontrol_version_26.05.5.txt"))["version"]
# 26.05 with topology.yaml and no TopologyPlugin line in slurm.conf: show config says topology/flat.
CONFIG_26_05_YAML = parse_show_config(read_sample("slurm", "show_config_26.05_yaml_alloc_imex.txt"))


def plan(entry):
    """(blocks, sizes, static problems) of a matrix case, as the action makes them."""
    model, hostvars = model_of(entry)
    sizes, problem = topology.convert_block_sizes(entry["block_sizes"])
    if problem:
        return None, None, [problem]
    blocks = topology.domain_blocks(model, hostvars)
    problems = topology.static_problems(blocks, sizes, entry["path"], "imex")
    return blocks, (topology.block_sizes_for(blocks, sizes) if not problems else None), problems


def planned(entry):
    """(blocks, sizes) of an inventory the static checks accept."""
    blocks, sizes, problems = plan(entry)
    assert problems == []
    return blocks, sizes


def config_for(entry):
    if "topology_plugin" in entry:
        return CONFIG_DEFAULT
    return CONFIG_BLOCK_ALLOC if entry.get("prolog_flags") else CONFIG_BLOCK


def refusal_of(entry):
    blocks, sizes, problems = plan(entry)
    if problems:
        return problems
    hostvars = model_of(entry)[1]
    known = [name for name in slurm_nodes(entry) if name != "ghost"]
    return topology.slurm_problems(blocks, sizes, entry["path"], VERSION_24_11, config_for(entry), known,
                                   topology.per_job_trays(hostvars))


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_inventories_give_their_blocks_in_order(name):
    entry = ACCEPTED[name]
    blocks, sizes, problems = plan(entry)
    assert problems == []
    assert [(block["name"], block["nodes"]) for block in blocks] == [(group, list(nodes)) for group, nodes in entry["blocks"]]
    assert sizes == entry["sizes"]
    assert refusal_of(entry) == []


@pytest.mark.parametrize("name", sorted(STATIC_REFUSED))
def test_refused_before_any_host_is_contacted(name):
    entry = STATIC_REFUSED[name]
    problems = plan(entry)[2]
    assert problems, "accepted"
    text = "\n".join(problems)
    for words in entry["words"]:
        assert words in text


@pytest.mark.parametrize("name", sorted(SLURM_REFUSED))
def test_refused_once_the_controller_s_slurm_is_read(name):
    entry = SLURM_REFUSED[name]
    assert plan(entry)[2] == [], "refused before Slurm was read"
    text = "\n".join(refusal_of(entry))
    for words in entry["words"]:
        assert words in text


def test_a_block_smaller_than_the_base_is_accepted_from_25_05():
    entry = SLURM_REFUSED["a block smaller than the base size on Slurm 24.11"]
    blocks, sizes = planned(entry)
    assert topology.slurm_problems(blocks, sizes, entry["path"], (25, 5, 0), CONFIG_BLOCK, None, []) == []
    assert topology.slurm_problems(blocks, sizes, entry["path"], (24, 11, 5), CONFIG_BLOCK, None, []) != []


def test_topology_yaml_from_25_05_needs_no_topology_plugin_line():
    entry = SLURM_REFUSED["topology.yaml on Slurm 24.11"]
    blocks, sizes = planned(entry)
    assert topology.slurm_problems(blocks, sizes, entry["path"], (25, 5, 1), CONFIG_DEFAULT, None, []) == []
    assert CONFIG_26_05_YAML["TopologyPlugin"] == "topology/flat"
    assert topology.slurm_problems(blocks, sizes, entry["path"], VERSION_26_05, CONFIG_26_05_YAML, None, []) == []


@pytest.mark.parametrize("name", sorted(ACCEPTED_FROM_25_05))
def test_blocks_smaller_than_the_base_are_accepted_on_26_05_and_refused_on_24_11(name):
    entry = ACCEPTED_FROM_25_05[name]
    blocks, sizes = planned(entry)
    assert [(block["name"], block["nodes"]) for block in blocks] == [(group, list(nodes)) for group, nodes in entry["blocks"]]
    assert sizes == entry["sizes"]
    known = slurm_nodes(entry)
    assert topology.slurm_problems(blocks, sizes, entry["path"], VERSION_26_05, CONFIG_26_05_YAML, known, []) == []
    refused = "\n".join(topology.slurm_problems(blocks, sizes, entry["path"], VERSION_24_11, CONFIG_BLOCK, known, []))
    assert "children count lower than bblock_node_cnt" in refused


def test_a_domain_size_that_is_not_the_largest_is_no_base_size():
    entry = ACCEPTED_FROM_25_05["two 9-tray partitions next to 18-tray racks"]
    model, hostvars = model_of(entry)
    problems = topology.static_problems(topology.domain_blocks(model, hostvars), [9, 18], entry["path"], "imex")
    assert problems == ["imex_slurm_block_sizes = [9, 18]: 9 is not the largest domain size 18 times a power of two "
                        "(18, 36, 72, 144, ...); a smaller or other base block would join parts of several IMEX "
                        "domains into one block"]


def test_topology_conf_beside_a_topology_yaml_is_refused_from_25_05():
    """slurmctld 26.05 reads topology.yaml and ignores topology.conf without a word."""
    blocks, sizes = planned(THREE_RACKS)
    found = topology.slurm_problems(blocks, sizes, CONF_PATH, VERSION_26_05, CONFIG_BLOCK, None, [],
                                    ["topology.conf", "topology.yaml"])
    assert found == ["imex_slurm_topology_file = '/etc/slurm/topology.conf': /etc/slurm/topology.yaml exists, and "
                     "Slurm 26.05.5 reads it and ignores topology.conf; write topology.yaml instead "
                     "(imex_slurm_topology_file = '/etc/slurm/topology.yaml'), or remove /etc/slurm/topology.yaml"]
    assert topology.slurm_problems(blocks, sizes, CONF_PATH, VERSION_24_11, CONFIG_BLOCK, None, [],
                                   ["topology.conf", "topology.yaml"]) == []
    assert topology.slurm_problems(blocks, sizes, "/etc/slurm/topology.yaml", VERSION_26_05, CONFIG_BLOCK, None, [],
                                   ["topology.conf", "topology.yaml"]) == []


def test_prolog_flags_of_another_kind_are_kept_in_the_line_to_write():
    config = dict(CONFIG_BLOCK, PrologFlags="Serial")
    blocks, sizes = planned(ACCEPTED["one rack, BlockSizes defaults to the rack"])
    problems = topology.slurm_problems(blocks, sizes, "/etc/slurm/topology.conf", VERSION_24_11, config, None,
                                       ["rack1-tray01"])
    assert len(problems) == 1
    assert "change the PrologFlags line of /etc/slurm/slurm.conf to PrologFlags=Serial,Alloc" in problems[0]


@pytest.mark.parametrize("value, sizes", [
    (None, []), ("", []), ("  ", []), ([], []), (18, [18]), ("18", [18]), ("18,36", [18, 36]),
    ("[18, 36]", [18, 36]), (["18", 36], [18, 36]),
])
def test_block_sizes_are_converted_once_from_what_minus_e_and_awx_give(value, sizes):
    assert topology.convert_block_sizes(value) == (sizes, None)


@pytest.mark.parametrize("value", ["[18, 36", "eighteen", [True], [0], ["-1"], {"a": 1}, "1.5"])
def test_block_sizes_that_are_not_whole_numbers_are_refused_naming_the_value(value):
    sizes, problem = topology.convert_block_sizes(value)
    assert sizes == [] and problem.startswith("imex_slurm_block_sizes = %r" % (value,))


@pytest.mark.parametrize("base, total, sizes", [
    (18, 18, [18]), (18, 36, [18, 36]), (18, 54, [18, 36]), (18, 72, [18, 36, 72]), (9, 18, [9, 18]),
    (1, 1 << 20, [1 << level for level in range(16)]),
])
def test_default_block_sizes_double_up_to_the_node_count_and_15_levels(base, total, sizes):
    assert topology.default_block_sizes(base, total) == sizes


def test_conf_lists_blocks_in_order_then_block_sizes():
    blocks, sizes = planned(ACCEPTED["natural order of domains and trays"])
    text = topology.render(blocks, sizes, "/etc/slurm/topology.conf")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == ["BlockName=rack1 Nodes=rack1-tray1,rack1-tray3", "BlockName=rack2 Nodes=rack2-tray2,rack2-tray10",
                     "BlockName=rack10 Nodes=rack10-tray2,rack10-tray10", "BlockSizes=2,4"]


def test_yaml_is_one_cluster_default_block_topology():
    blocks, sizes = planned(ACCEPTED["Slurm node names of their own and FQDN inventory names"])
    parsed = yaml.safe_load(topology.render(blocks, sizes, "/etc/slurm/topology.yaml", "nvl"))
    assert parsed == [{"topology": "nvl", "cluster_default": True, "block": {
        "block_sizes": [2, 4], "blocks": [{"block": "rack1", "nodes": "gpu-a01,gpu-a02"},
                                          {"block": "rack2", "nodes": "r2t1,r2t2"}]}}]


def test_a_yaml_topology_name_slurm_cannot_take_is_refused():
    blocks = planned(ACCEPTED["one rack, BlockSizes defaults to the rack"])[0]
    assert "imex_slurm_topology_name = 'my topo'" in "\n".join(
        topology.static_problems(blocks, [], "/etc/slurm/topology.yaml", "my topo"))


def test_no_domain_is_refused():
    assert topology.static_problems([], [], "/etc/slurm/topology.conf") == [
        "the inventory has no IMEX domain: nothing to write a block topology from"]


def test_per_job_trays_are_those_of_the_per_job_mode():
    assert topology.per_job_trays({"a": {"imex_mode": "slurm_per_job"}, "b": {"imex_mode": "slurm"}, "c": {}}) == ["a"]


# -- Slurm's topology against the inventory, on what slurmctld printed ------------------------------------

THREE_RACKS = ACCEPTED["three racks, default sizes up to the node count"]
CONF_PATH = "/etc/slurm/topology.conf"


def test_slurm_s_topology_of_the_same_file_matches():
    blocks, sizes = planned(THREE_RACKS)
    assert topology.topology_differences(blocks, sizes, parse_show_topology(
        read_sample("slurm", "show_topology_3x4_sizes_4_8.txt"))) == []


def test_two_partitions_of_a_rack_match_what_slurm_printed():
    blocks, sizes = planned(ACCEPTED["two 9-tray partitions of a rack, per-job IMEX with PrologFlags=Alloc"])
    assert topology.topology_differences(blocks, sizes, parse_show_topology(
        read_sample("slurm", "show_topology_2x9_sizes_9_18.txt"))) == []


def test_blocks_in_another_order_are_named():
    blocks, sizes = planned(THREE_RACKS)
    found = topology.topology_differences(blocks, sizes, parse_show_topology(
        read_sample("slurm", "show_topology_after_reconfigure_3_1_2.txt")))
    assert found[0] == ("Slurm orders the blocks rack3, rack1, rack2; the inventory rack1, rack2, rack3 "
                        "(neighbouring blocks form the higher-level blocks)")
    # Without BlockSizes in that file, Slurm made a 16-node level the inventory does not have.
    assert "Slurm's aggregated block rack[3,1-2] has size 16, which is not one of BlockSizes 4,8" in found


def test_missing_extra_and_moved_nodes_and_blocks_are_named():
    blocks, sizes = planned(THREE_RACKS)
    text = read_sample("slurm", "show_topology_3x4_sizes_4_8.txt")
    text = text.replace("BlockName=rack3 BlockIndex=2", "BlockName=rack9 BlockIndex=2")
    text = text.replace("rack1-tray04 BlockSize=4", "rack2-tray01 BlockSize=4", 1)
    found = topology.topology_differences(blocks, sizes, parse_show_topology(text))
    assert found == ["block rack3 (domain group rack3) is not in Slurm's topology",
                     "Slurm has block rack9, which is no IMEX domain of the inventory",
                     "block rack1: Slurm lacks rack1-tray04",
                     "block rack1: Slurm also has rack2-tray01, which the inventory does not put there"]


def test_another_base_size_is_named():
    blocks = planned(THREE_RACKS)[0]
    found = topology.topology_differences(blocks, [8, 16], parse_show_topology(
        read_sample("slurm", "show_topology_3x4_sizes_4_8.txt")))
    assert "Slurm's base block size is 4, the inventory's 8" in found


def test_no_block_at_all_is_named():
    blocks, sizes = planned(THREE_RACKS)
    assert topology.topology_differences(blocks, sizes, parse_show_topology(
        read_sample("slurm", "show_topology_flat.txt")))[0].startswith("Slurm reports no block")


def test_the_nodes_of_the_real_node_list_are_all_known():
    entry = THREE_RACKS
    blocks, sizes = planned(entry)
    nodes = parse_node_names(read_sample("slurm", "show_nodes_oneliner.txt"))
    assert topology.slurm_problems(blocks, sizes, entry["path"], VERSION_24_11, CONFIG_BLOCK, nodes, []) == []


def test_slurm_26_05_s_topology_of_the_yaml_file_matches():
    blocks, sizes = planned(THREE_RACKS)
    assert topology.topology_differences(blocks, sizes, parse_show_topology(
        read_sample("slurm", "show_topology_26.05_yaml_3x4_sizes_4_8.txt"))) == []


def test_partitions_smaller_than_the_racks_match_what_slurm_26_05_printed():
    blocks, sizes = planned(ACCEPTED_FROM_25_05["two 9-tray partitions next to 18-tray racks"])
    assert topology.topology_differences(blocks, sizes, parse_show_topology(
        read_sample("slurm", "show_topology_26.05_yaml_9_9_18_18_sizes_18_36.txt"))) == []


@pytest.mark.parametrize("existing, force, refused_with", [
    (None, False, None),
    ({"exists": False, "size": 0, "content": None}, False, None),
    ({"exists": True, "size": 10, "content": topology.HEADER + "BlockName=rack1 Nodes=a[1-4]\n"}, False, None),
    # an earlier release's header: the mark is what counts
    ({"exists": True, "size": 10, "content": "# Slurm blocks, written by rackscale.imex 0.2.0\nBlockName=r1 Nodes=a1\n"},
     False, None),
    ({"exists": True, "size": 60, "content": "# site tree\nSwitchName=s0 Nodes=a[1-4]\nSwitchName=s1 Switches=s0\n"},
     False, "its 2 line(s) (2 switch record(s) (a tree topology))"),
    ({"exists": True, "size": 90, "content": "topology:\n  - topology: tree1\n    cluster_default: true\n"
                                             "  - topology: block1\n"}, False, "topologies tree1, block1"),
    ({"exists": True, "size": 60, "content": "SwitchName=s0 Nodes=a[1-4]\n"}, True, None),
    ({"exists": True, "size": 0, "content": None, "error": "/etc/slurm/topology.conf cannot be read: Permission denied"},
     False, "Permission denied; whether rackscale.imex wrote it cannot be told"),
])
def test_only_a_topology_file_the_collection_wrote_is_replaced_unless_forced(existing, force, refused_with):
    problem = topology.foreign_file_problem("/etc/slurm/topology.conf", existing, force)
    if refused_with is None:
        assert problem is None
    else:
        assert problem.startswith("imex_slurm_topology_file = '/etc/slurm/topology.conf'") and refused_with in problem
        assert "imex_slurm_topology_force=true" in problem


@pytest.mark.parametrize("name", ["imex\n", "imex\u200b", "im ex"])
def test_a_yaml_topology_name_is_matched_whole(name):
    blocks = planned(ACCEPTED["one rack, BlockSizes defaults to the rack"])[0]
    assert "imex_slurm_topology_name = %r is not letters" % name in "\n".join(
        topology.static_problems(blocks, [], "/etc/slurm/topology.yaml", name))


@pytest.mark.parametrize("node, why", [
    ("-n", "starts with '-', which scontrol reads as an option"),
    ("gpu\u2028a01", "holds a control, format or separator character"),
    ("gpu\u200ba01", "holds a control, format or separator character"),
    ("gpu a01", "holds blank"),
])
def test_a_slurm_node_name_that_would_split_or_disguise_the_file_is_refused(node, why):
    blocks = planned(ACCEPTED["one rack, BlockSizes defaults to the rack"])[0]
    blocks[0]["nodes"][0] = node
    problems = topology.static_problems(blocks, [], "/etc/slurm/topology.conf")
    assert any(("Slurm node name %r" % node) in problem and why in problem for problem in problems), problems
