# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventories of the Slurm block topology tests, shared by the unit tests
(test_slurm_topology.py) and the tests against a real slurmctld (tests/slurm/test_topology_real.py on
24.11, tests/slurm/test_topology_yaml_real.py on 26.05).

Each case is an inventory (domain groups and their trays' host variables) with imex_slurm_block_sizes
and the topology file. An accepted case states the blocks and BlockSizes it must give; a refused case
the words its refusal must hold, and whether it is refused before any host is contacted ("static") or
once the controller's Slurm was read ("slurm").
"""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._domain import build_model

CONF = "/etc/slurm/topology.conf"
YAML = "/etc/slurm/topology.yaml"


def trays(rack, count, domain=None):
    return ["%s-tray%02d" % (domain or rack, number) for number in range(1, count + 1)]


def case(domains, host_vars=None, block_sizes=None, path=CONF, **expected):
    """domains: {group: [trays]}; host_vars: {tray: {key: value}} beyond the address."""
    return dict(domains=domains, host_vars=host_vars or {}, block_sizes=block_sizes, path=path, **expected)


def model_of(entry):
    """The domain model of a case, as the imex role builds it (addresses made up, unique)."""
    groups, hostvars = {"imex_domains": []}, {}
    for group, members in entry["domains"].items():
        groups[group] = list(members)
        groups["imex_domains"].extend(members)
        for member in members:
            hostvars[member] = dict({"ansible_host": "198.18.%d.%d" % (len(hostvars) // 200 + 1,
                                                                       len(hostvars) % 200 + 1)},
                                    **entry["host_vars"].get(member, {}))
    return build_model(groups, hostvars, domain_groups=list(entry["domains"]), max_nodes=1024), hostvars


def slurm_nodes(entry):
    """Every Slurm node name the case's blocks should hold (what slurm.conf must define)."""
    names = []
    for members in entry["domains"].values():
        for member in members:
            given = entry["host_vars"].get(member, {}).get("imex_slurm_node_name")
            names.append(given or member.split(".")[0])
    return names


ACCEPTED = {
    "one rack, BlockSizes defaults to the rack": case(
        {"rack1": trays("rack1", 4)},
        blocks=[("rack1", trays("rack1", 4))], sizes=[4]),
    "three racks, default sizes up to the node count": case(
        {"rack1": trays("rack1", 4), "rack2": trays("rack2", 4), "rack3": trays("rack3", 4)},
        blocks=[("rack1", trays("rack1", 4)), ("rack2", trays("rack2", 4)), ("rack3", trays("rack3", 4))],
        sizes=[4, 8]),
    "natural order of domains and trays": case(
        {"rack10": ["rack10-tray2", "rack10-tray10"], "rack2": ["rack2-tray10", "rack2-tray2"],
         "rack1": ["rack1-tray1", "rack1-tray3"]},
        blocks=[("rack1", ["rack1-tray1", "rack1-tray3"]), ("rack2", ["rack2-tray2", "rack2-tray10"]),
                ("rack10", ["rack10-tray2", "rack10-tray10"])],
        sizes=[2, 4]),
    "explicit node index orders the trays": case(
        {"rackA": ["a-x", "a-y", "a-z"]},
        host_vars={"a-x": {"imex_node_index": 2}, "a-y": {"imex_node_index": "0"}, "a-z": {"imex_node_index": 1}},
        blocks=[("rackA", ["a-y", "a-z", "a-x"])], sizes=[3]),
    "Slurm node names of their own and FQDN inventory names": case(
        {"rack1": ["r1t1.fabric.example", "r1t2.fabric.example"], "rack2": ["r2t1.fabric.example", "r2t2"]},
        host_vars={"r1t1.fabric.example": {"imex_slurm_node_name": "gpu-a01"},
                   "r1t2.fabric.example": {"imex_slurm_node_name": "gpu-a02"},
                   "r2t1.fabric.example": {"imex_slurm_node_name": ""}},
        blocks=[("rack1", ["gpu-a01", "gpu-a02"]), ("rack2", ["r2t1", "r2t2"])], sizes=[2, 4]),
    "BlockSizes as comma-separated text, beyond the node count": case(
        {"rack1": trays("rack1", 4), "rack2": trays("rack2", 4)}, block_sizes="4, 8,16",
        blocks=[("rack1", trays("rack1", 4)), ("rack2", trays("rack2", 4))], sizes=[4, 8, 16]),
    "BlockSizes as JSON text from an AWX survey": case(
        {"rack1": trays("rack1", 2), "rack2": trays("rack2", 2), "rack3": trays("rack3", 2),
         "rack4": trays("rack4", 2)}, block_sizes="[2, 8]",
        blocks=[("rack%d" % rack, trays("rack%d" % rack, 2)) for rack in range(1, 5)], sizes=[2, 8]),
    "two 9-tray partitions of a rack, per-job IMEX with PrologFlags=Alloc": case(
        {"nvl_a": trays("rack1", 9, "rack1"), "nvl_b": ["rack1-tray%02d" % number for number in range(10, 19)]},
        host_vars={tray: {"imex_mode": "slurm_per_job"} for tray in trays("rack1", 18)},
        blocks=[("nvl_a", trays("rack1", 9)), ("nvl_b", ["rack1-tray%02d" % n for n in range(10, 19)])],
        sizes=[9, 18], prolog_flags="Alloc"),
    "a tray away for repair stays in its block": case(
        {"rack1": trays("rack1", 3), "rack2": trays("rack2", 3)},
        host_vars={"rack1-tray02": {"imex_trays_out_of_service": ["rack1-tray02"]}},
        blocks=[("rack1", trays("rack1", 3)), ("rack2", trays("rack2", 3))], sizes=[3, 6]),
    "list of numbers given as strings": case(
        {"rack1": trays("rack1", 2), "rack2": trays("rack2", 2)}, block_sizes=["2", 4],
        blocks=[("rack1", trays("rack1", 2)), ("rack2", trays("rack2", 2))], sizes=[2, 4]),
}

# Refused before any host is contacted.
STATIC_REFUSED = {
    "a node in two blocks": case(
        {"rack1": trays("rack1", 2), "rack2": trays("rack2", 2)},
        host_vars={"rack2-tray01": {"imex_slurm_node_name": "rack1-tray01"}},
        words=["Slurm node rack1-tray01 would be in 2 blocks (rack1, rack2)", "rack2-tray01 (group rack2)"]),
    "a node name repeated in one domain": case(
        {"rack1": trays("rack1", 2)}, host_vars={"rack1-tray02": {"imex_slurm_node_name": "rack1-tray01"}},
        words=["Slurm node rack1-tray01 is named by 2 trays of group rack1"]),
    "a blank node name": case(
        {"rack1": trays("rack1", 2)}, host_vars={"rack1-tray02": {"imex_slurm_node_name": "  "}},
        words=["tray rack1-tray02 (group rack1): Slurm node name '  '", "is empty"]),
    "a node name with a bracket": case(
        {"rack1": trays("rack1", 2)}, host_vars={"rack1-tray02": {"imex_slurm_node_name": "gpu[2]"}},
        words=["tray rack1-tray02 (group rack1): Slurm node name 'gpu[2]'", "'['"]),
    "a block name with a comma": case(
        {"rack,1": trays("rack1", 2)}, words=["domain group 'rack,1'", "','"]),
    "a block name with a blank": case(
        {"rack 1": trays("rack1", 2)}, words=["domain group 'rack 1'", "blank"]),
    "a block name with a hash": case(
        {"rack#1": trays("rack1", 2)}, words=["domain group 'rack#1'", "'#'"]),
    "BlockSizes not the base times powers of two": case(
        {"rack1": trays("rack1", 4), "rack2": trays("rack2", 4)}, block_sizes="4,12",
        words=["imex_slurm_block_sizes = [4, 12]: 12 is not the domain size 4 times a power of two"]),
    "BlockSizes below the domain size": case(
        {"rack1": trays("rack1", 4), "rack2": trays("rack2", 4)}, block_sizes=[2, 4, 8],
        words=["2 is not the domain size 4 times a power of two"]),
    "BlockSizes that do not grow": case(
        {"rack1": trays("rack1", 2), "rack2": trays("rack2", 2)}, block_sizes=[4, 2],
        words=["the sizes must grow"]),
    "BlockSizes over 15 levels": case(
        {"rack1": trays("rack1", 2)}, block_sizes=[2, 2 << 16],
        words=["more than 15 levels above the base size 2"]),
    "BlockSizes that are not numbers": case(
        {"rack1": trays("rack1", 2)}, block_sizes="18;36",
        words=["imex_slurm_block_sizes = '18;36': '18;36' is not a positive whole number"]),
    "a file Slurm does not read": case(
        {"rack1": trays("rack1", 2)}, path="/etc/slurm/blocks.conf",
        words=["imex_slurm_topology_file = '/etc/slurm/blocks.conf': Slurm reads only topology.conf or topology.yaml"]),
}

# Refused once the controller's Slurm was read (24.11 here).
SLURM_REFUSED = {
    "topology.yaml on Slurm 24.11": case(
        {"rack1": trays("rack1", 2)}, path="/etc/slurm/topology.yaml",
        words=["topology.yaml needs Slurm >= 25.05, this controller runs 24.11.5"]),
    "a block smaller than the base size on Slurm 24.11": case(
        {"rack1": trays("rack1", 2), "rack2": trays("rack2", 2)}, block_sizes=[4, 8],
        words=["blocks rack1, rack2 have fewer nodes than the base size 4", "children count lower than bblock_node_cnt"]),
    "domains of different sizes on Slurm 24.11": case(
        {"rack1": trays("rack1", 4), "rack2": trays("rack2", 2)},
        words=["domains of different sizes in one topology (2 trays: rack2; 4 trays: rack1): with the base size 4",
               "Slurm 24.11.5 dies on the smaller blocks", "accepted from 25.05"]),
    "a node Slurm does not know": case(
        {"rack1": trays("rack1", 2)}, host_vars={"rack1-tray02": {"imex_slurm_node_name": "ghost"}},
        words=["tray rack1-tray02 (group rack1): Slurm node name ghost is not a node of Slurm"], known_extra=False),
    "per-job IMEX without PrologFlags=Alloc": case(
        {"rack1": trays("rack1", 2)}, host_vars={"rack1-tray01": {"imex_mode": "slurm_per_job"}},
        words=["trays rack1-tray01 run imex_mode slurm_per_job", "add this line to /etc/slurm/slurm.conf: "
               "PrologFlags=Alloc"]),
    "no topology/block plugin": case(
        {"rack1": trays("rack1", 2)}, topology_plugin=None,
        words=["Slurm's TopologyPlugin is topology/default", "add the line TopologyPlugin=topology/block to "
               "/etc/slurm/slurm.conf"]),
    "a topology file outside slurm.conf's directory": case(
        {"rack1": trays("rack1", 2)}, path="/srv/slurm/topology.conf",
        words=["Slurm reads its topology file from the directory of slurm.conf (SLURM_CONF = "
               "/etc/slurm/slurm.conf); write /etc/slurm/topology.conf"]),
}

# Accepted from Slurm 25.05 (seen on 26.05), refused on 24.11 (SLURM_REFUSED): blocks smaller than the
# base size, which is then the largest domain's size.
ACCEPTED_FROM_25_05 = {
    "a block smaller than the base size": case(
        {"rack1": trays("rack1", 2), "rack2": trays("rack2", 2)}, block_sizes=[4, 8], path=YAML,
        blocks=[("rack1", trays("rack1", 2)), ("rack2", trays("rack2", 2))], sizes=[4, 8]),
    "a rack with a tray fewer than the others": case(
        {"rack1": trays("rack1", 3), "rack2": trays("rack2", 4), "rack3": trays("rack3", 4)}, path=YAML,
        blocks=[("rack1", trays("rack1", 3)), ("rack2", trays("rack2", 4)), ("rack3", trays("rack3", 4))],
        sizes=[4, 8]),
    "two 9-tray partitions next to 18-tray racks": case(
        {"nvl_a": trays("rack1", 9, "rack1"), "nvl_b": ["rack1-tray%02d" % number for number in range(10, 19)],
         "rack2": trays("rack2", 18), "rack3": trays("rack3", 18)}, path=YAML,
        blocks=[("nvl_a", trays("rack1", 9)), ("nvl_b", ["rack1-tray%02d" % n for n in range(10, 19)]),
                ("rack2", trays("rack2", 18)), ("rack3", trays("rack3", 18))],
        sizes=[18, 36]),
}
