# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Slurm's block topology (topology/block) from the IMEX domain model: one block per IMEX domain.

A job that Slurm places inside one block then runs inside one IMEX domain. Everything here is a pure
function of its arguments, run on the controller:

domain_blocks(...)       the blocks: each domain group's trays by their Slurm node names, in the
                         domain model's order (domains and trays as the imex role orders them).
convert_block_sizes(...) imex_slurm_block_sizes as given (a list, JSON text, "18,36"), converted once.
static_problems(...)     what is refused before any host is contacted: names Slurm would misread,
                         a node in two blocks, repeated or empty node names, BlockSizes Slurm dies on.
slurm_problems(...)      what is refused once the controller's Slurm was read (version, configuration,
                         nodes, the topology files beside slurm.conf), still before the file is written.
render(...)              topology.conf or topology.yaml text.
topology_differences(...) Slurm's `scontrol show topology` against the blocks, one sentence each.

Facts of slurmctld this relies on (24.11 and 26.05, checked on real daemons): block lines are read
in file order and neighbouring blocks form the higher-level blocks; invalid BlockSizes and a repeated
block name are fatal; a block smaller than the base size is fatal on 24.11 and accepted without a
word on 26.05 (a block of its own, never merged), so domains of different sizes can share one
topology there, with the largest domain's size as the base; an unknown node name is only a warning
and the node is left out; a node in two blocks is accepted without a word; aggregated block names
are Slurm host lists built from the block names, so ',' and '[]' in a name are misread; 26.05 reads
topology.yaml (one topology per entry, the cluster default for `scontrol show topology`) and then
ignores topology.conf.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

from ansible_collections.rackscale.imex.plugins.module_utils._slurm import config_flags
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import hostile_character
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core depends on PyYAML
    yaml = None

# topology.yaml and blocks smaller than the base size came with this release.
YAML_MIN_VERSION = (25, 5)
CONF_NAME, YAML_NAME = "topology.conf", "topology.yaml"
# slurmctld refuses a BlockSizes value beyond the base times 2^15.
MAX_LEVEL = 15
# A name inside a block line or a host list: these split or bracket it.
_BAD_NAME = re.compile(r"[,\[\]=#\s]")
_TOPOLOGY_NAME = re.compile(r"[A-Za-z0-9_.-]+")
FILE_NAMES = (CONF_NAME, YAML_NAME)
HEADER = ("# Slurm block topology (topology/block), written by rackscale.imex from the inventory: one block per\n"
          "# IMEX domain, in the order of the domain groups (neighbouring blocks form the higher-level blocks).\n"
          "# Edits here are replaced on the next run: change the inventory instead.\n")


# The mark of a file this collection wrote: the first line of HEADER, in any release of it.
OWN_MARK = "written by rackscale.imex"


def foreign_file_problem(path, existing, force):
    """The refusal to replace a topology file this collection did not write, or None.

    existing: what the module read at ``path`` ({exists, size, content}). An operator's switch tree or a
    multi-topology file holds what the inventory cannot rebuild; it is replaced only with force.
    """
    if force or not isinstance(existing, Mapping) or not existing.get("exists"):
        return None
    content = existing.get("content")
    if content is None:
        why = existing.get("error") or "the file cannot be read"
        return ("imex_slurm_topology_file = %r: %s; whether rackscale.imex wrote it cannot be told, so it is not "
                "replaced (set imex_slurm_topology_force=true to replace it)" % (path, why))
    head = "\n".join(content.splitlines()[:3])
    if OWN_MARK in head:
        return None
    lines = [line.strip() for line in content.splitlines() if line.strip() and not line.strip().startswith("#")]
    kinds = []
    for key, label in (("SwitchName=", "switch record(s) (a tree topology)"), ("BlockName=", "block record(s)"),
                       ("BlockSizes=", "BlockSizes line(s)")):
        found = [line for line in lines if line.startswith(key)]
        if found:
            kinds.append("%d %s" % (len(found), label))
    topologies = re.findall(r"(?m)^[ \t]*-[ \t]*topology:[ \t]*(\S+)", content)
    if topologies:
        kinds.append("topologies %s" % ", ".join(topologies))
    return ("imex_slurm_topology_file = %r holds a topology rackscale.imex did not write (no header of its own): "
            "replacing it would lose its %d line(s)%s; merge the IMEX blocks into it by hand, point "
            "imex_slurm_topology_file at another file, or set imex_slurm_topology_force=true to replace it (with "
            "imex_slurm_backup=true a copy is kept)" % (path, len(lines), " (%s)" % "; ".join(kinds) if kinds else ""))


def _version_text(version):
    """(25, 5, 1) -> '25.05.1', as Slurm writes its releases."""
    return "%d.%02d" % tuple(version[:2]) + "".join(".%d" % part for part in version[2:3])


def short_name(host):
    """The default Slurm node name of a tray: its inventory name up to the first dot."""
    return str(host).split(".", maxsplit=1)[0]


def is_yaml(path):
    return str(path).endswith(".yaml")


# ---------------------------------------------------------------------------------------------------
# The boundary: values as the role received them.

def convert_block_sizes(value):
    """(list of ints, problem or None) from a list, JSON or YAML text ("[18, 36]") or "18,36"; "" is []."""
    shown = "imex_slurm_block_sizes = %r" % (value,)
    if value is None:
        return [], None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return [], None
        if text.startswith("["):
            try:
                value = yaml.safe_load(text) if yaml is not None else json.loads(text)
            except (ValueError, yaml.YAMLError if yaml is not None else ValueError):
                return [], "%s is neither a JSON list nor comma-separated whole numbers" % shown
        else:
            value = [part.strip() for part in text.split(",")]
    elif isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return [], "%s is not a list of whole numbers" % shown
    sizes = []
    for item in value:
        if isinstance(item, bool):
            return [], "%s: %r is not a whole number" % (shown, item)
        text = str(item).strip()
        if not text.isdigit() or int(text) < 1:
            return [], "%s: %r is not a positive whole number" % (shown, item)
        sizes.append(int(text))
    return sizes, None


# ---------------------------------------------------------------------------------------------------
# Blocks from the domain model.

def domain_blocks(model, tray_vars):
    """[{'name', 'trays', 'nodes'}]: one block per domain of ``model`` (build_model's result), in its
    order, each listing its trays' Slurm node names in the domain's node order.

    tray_vars: {tray: {'imex_slurm_node_name': value or None}}; an unset or empty name is the tray's
    short host name. Trays out of service stay in their block: Slurm drains a node, it does not move it.
    """
    blocks = []
    for name, domain in model["domains"].items():
        trays = [node["host"] for node in domain["nodes"]]
        nodes = []
        for tray in trays:
            given = (tray_vars.get(tray) or {}).get("imex_slurm_node_name")
            nodes.append(short_name(tray) if given in (None, "") else str(given))
        blocks.append({"name": name, "trays": trays, "nodes": nodes})
    return blocks


def per_job_trays(tray_vars):
    """The trays whose imex_mode is slurm_per_job (their prolog needs PrologFlags=Alloc)."""
    return sorted(tray for tray, found in tray_vars.items() if modes.of((found or {}).get("imex_mode")).per_job)


def default_block_sizes(base, total):
    """The (largest) domain size times powers of two up to the total node count: 18 trays, 3 racks -> [18, 36]."""
    sizes = [base]
    while sizes[-1] * 2 <= total and len(sizes) <= MAX_LEVEL:
        sizes.append(sizes[-1] * 2)
    return sizes


def _name_problem(kind, name):
    if not name or not name.strip():
        return "is empty"
    if hostile_character(name) is not None:
        return "holds a control, format or separator character"
    if name.startswith("-"):
        return "starts with '-', which scontrol reads as an option"
    found = sorted(set(_BAD_NAME.findall(name)))
    if found:
        shown = ", ".join("blank" if character.isspace() else repr(character) for character in found)
        return ("holds %s: Slurm reads ',' and '[]' as host list syntax (aggregated block names are host lists "
                "of the block names), '=' and blanks split the %s line and '#' starts a comment" % (shown, kind))
    return None


def block_sizes_problems(sizes, base, base_label="the domain size"):
    """BlockSizes slurmctld dies on, or that would let one block span several domains."""
    shown = "imex_slurm_block_sizes = %s" % json.dumps(sizes)
    problems = []
    for value in sizes:
        ratio, remainder = divmod(value, base)
        if remainder or ratio < 1 or ratio & (ratio - 1):
            problems.append("%s: %d is not %s %d times a power of two (%s, ...); a smaller or "
                            "other base block would join parts of several IMEX domains into one block"
                            % (shown, value, base_label, base, ", ".join(str(base << level) for level in range(4))))
    if problems:
        return problems
    if sizes != sorted(set(sizes)):
        problems.append("%s: the sizes must grow, each one listed once (the first is Slurm's base block size)"
                        % shown)
    elif sizes and sizes[-1] // sizes[0] > 1 << MAX_LEVEL:
        problems.append("%s: %d is more than %d levels above the base size %d; slurmctld refuses to start "
                        "('Invalid BlockSizes value')" % (shown, sizes[-1], MAX_LEVEL, sizes[0]))
    return problems


def static_problems(blocks, sizes, path, topology_name=""):
    """Every problem that needs no host: names, repeated nodes, domain sizes, BlockSizes, the file name."""
    problems = []
    if not blocks:
        return ["the inventory has no IMEX domain: nothing to write a block topology from"]
    if os.path.basename(str(path)) not in FILE_NAMES or not str(path).startswith("/"):
        problems.append("imex_slurm_topology_file = %r: Slurm reads only topology.conf or topology.yaml, from the "
                        "directory of slurm.conf; give an absolute path ending in one of them" % (path,))
    if is_yaml(path):
        problem = None if _TOPOLOGY_NAME.fullmatch(topology_name or "") else "is not letters, digits, '_', '.' or '-'"
        if problem:
            problems.append("imex_slurm_topology_name = %r %s" % (topology_name, problem))
    holders = {}
    for block in blocks:
        problem = _name_problem("BlockName", block["name"])
        if problem:
            problems.append("domain group %r: the name, Slurm's BlockName, %s; rename the group" % (block["name"], problem))
        for tray, node in zip(block["trays"], block["nodes"]):
            problem = _name_problem("Nodes", node)
            if problem:
                problems.append("tray %s (group %s): Slurm node name %r (imex_slurm_node_name, else the short host "
                                "name) %s" % (tray, block["name"], node, problem))
                continue
            holders.setdefault(node, []).append((tray, block["name"]))
    for node, held in holders.items():
        if len(held) < 2:
            continue
        groups = sorted({holder[1] for holder in held})
        where = ", ".join("%s (group %s)" % found for found in held)
        if len(groups) > 1:
            problems.append("Slurm node %s would be in %d blocks (%s): trays %s; slurmctld accepts a node in two "
                            "blocks without a word and would place jobs across IMEX domains; give each tray its own "
                            "imex_slurm_node_name" % (node, len(groups), ", ".join(groups), where))
        else:
            problems.append("Slurm node %s is named by %d trays of group %s (%s); each tray needs its own "
                            "imex_slurm_node_name" % (node, len(held), groups[0], where))
    # Domains of different sizes share one base size, the largest domain's: the smaller ones are blocks
    # below the base, which only Slurm >= 25.05 accepts (slurm_problems refuses them on older ones).
    if sizes:
        problems.extend(block_sizes_problems(sizes, largest_domain_size(blocks), "the domain size" if len(
            domain_sizes(blocks)) == 1 else "the largest domain size"))
    return problems


def domain_sizes(blocks):
    """{node count: [block names]} of the blocks."""
    found = {}
    for block in blocks:
        found.setdefault(len(block["nodes"]), []).append(block["name"])
    return found


def largest_domain_size(blocks):
    return max(len(block["nodes"]) for block in blocks)


def block_sizes_for(blocks, sizes):
    """The BlockSizes to write: the operator's, else the defaults from the largest domain's size."""
    if sizes:
        return list(sizes)
    return default_block_sizes(largest_domain_size(blocks), sum(len(block["nodes"]) for block in blocks))


# ---------------------------------------------------------------------------------------------------
# Once the controller's Slurm was read.

def slurm_problems(blocks, sizes, path, version, config, slurm_nodes, per_job, topology_files=None):
    """Refusals that depend on the Slurm found: its version, its configuration and its nodes.

    version: (major, minor, patch); config: `scontrol show config` as parsed; slurm_nodes: Slurm's
    node names (None when they were not read); per_job: the trays in imex_mode slurm_per_job;
    topology_files: the names of topology.conf and topology.yaml found beside slurm.conf (None when
    not looked at).
    """
    problems = []
    shown_version = _version_text(version)
    conf = config.get("SLURM_CONF") or "slurm.conf"
    if tuple(version[:2]) < YAML_MIN_VERSION:
        if is_yaml(path):
            problems.append("imex_slurm_topology_file = %r: topology.yaml needs Slurm >= 25.05, this controller runs "
                            "%s; write topology.conf instead" % (path, shown_version))
        small = [block["name"] for block in blocks if len(block["nodes"]) < sizes[0]]
        by_size = domain_sizes(blocks)
        if len(by_size) > 1:
            problems.append("domains of different sizes in one topology (%s): with the base size %d (at least "
                            "the largest domain's), Slurm %s dies on the smaller blocks ('children count lower than "
                            "bblock_node_cnt'; accepted from 25.05); keep one domain size per topology, or run "
                            "Slurm >= 25.05" % ("; ".join("%d trays: %s" % (size, ", ".join(names))
                                                          for size, names in sorted(by_size.items())),
                                                sizes[0], shown_version))
        elif small:
            problems.append("imex_slurm_block_sizes = %s: blocks %s have fewer nodes than the base size %d; Slurm "
                            "%s dies on it ('children count lower than bblock_node_cnt', allowed from 25.05); make "
                            "the first size the domain size %d" % (json.dumps(sizes), ", ".join(small), sizes[0],
                                                                   shown_version, len(blocks[0]["nodes"])))
    where = os.path.dirname(conf) if conf.startswith("/") else None
    if tuple(version[:2]) >= YAML_MIN_VERSION and not is_yaml(path) and YAML_NAME in (topology_files or ()):
        beside = os.path.join(where or os.path.dirname(str(path)), YAML_NAME)
        problems.append("imex_slurm_topology_file = %r: %s exists, and Slurm %s reads it and ignores topology.conf; "
                        "write topology.yaml instead (imex_slurm_topology_file = %r), or remove %s"
                        % (path, beside, shown_version, beside, beside))
    if where and os.path.dirname(str(path)) != where:
        problems.append("imex_slurm_topology_file = %r: Slurm reads its topology file from the directory of "
                        "slurm.conf (SLURM_CONF = %s); write %s/%s" % (path, conf, where, os.path.basename(str(path))))
    plugin = config.get("TopologyPlugin")
    if not is_yaml(path) and plugin != "topology/block":
        problems.append("Slurm's TopologyPlugin is %s, so topology.conf's blocks would be ignored: add the line "
                        "TopologyPlugin=topology/block to %s (and restart slurmctld; this collection never edits "
                        "slurm.conf)" % (plugin or "not set", conf))
    if per_job:
        flags = config_flags(config.get("PrologFlags"))
        if "alloc" not in [flag.lower() for flag in flags]:
            line = "PrologFlags=%s" % ",".join(flags + ["Alloc"])
            problems.append("trays %s run imex_mode %s, whose prolog must run when the job is allocated: %s %s "
                            "(PrologFlags is %s); this collection never edits slurm.conf"
                            % (", ".join(per_job), modes.SlurmPerJob.name, "change the PrologFlags line of %s to" % conf
                               if flags else "add this line to %s:" % conf, line,
                               config.get("PrologFlags") or "not set"))
    if slurm_nodes is not None:
        known = set(slurm_nodes)
        for block in blocks:
            for tray, node in zip(block["trays"], block["nodes"]):
                if node not in known:
                    problems.append("tray %s (group %s): Slurm node name %s is not a node of Slurm (scontrol show "
                                    "nodes); slurmctld would leave it out of block %s with only a warning; set "
                                    "imex_slurm_node_name to the tray's NodeName in slurm.conf"
                                    % (tray, block["name"], node, block["name"]))
    return problems


# ---------------------------------------------------------------------------------------------------
# The file.

def render_conf(blocks, sizes):
    """topology.conf: one BlockName line per block, in order, then BlockSizes."""
    lines = ["BlockName=%s Nodes=%s" % (block["name"], ",".join(block["nodes"])) for block in blocks]
    lines.append("BlockSizes=%s" % ",".join(str(size) for size in sizes))
    return HEADER + "\n".join(lines) + "\n"


def render_yaml(blocks, sizes, topology_name):
    """topology.yaml (Slurm >= 25.05): one cluster-default block topology. Strings are written as JSON
    strings, which YAML reads as they are whatever characters they hold."""
    lines = ["---", "- topology: %s" % json.dumps(topology_name), "  cluster_default: true", "  block:",
             "    block_sizes: [%s]" % ", ".join(str(size) for size in sizes), "    blocks:"]
    for block in blocks:
        lines.append("      - block: %s" % json.dumps(block["name"]))
        lines.append("        nodes: %s" % json.dumps(",".join(block["nodes"])))
    return HEADER + "\n".join(lines) + "\n"


def render(blocks, sizes, path, topology_name="imex"):
    return render_yaml(blocks, sizes, topology_name) if is_yaml(path) else render_conf(blocks, sizes)


# ---------------------------------------------------------------------------------------------------
# What Slurm runs.

def topology_differences(blocks, sizes, records):
    """One sentence per difference between the blocks and Slurm's (parse_show_topology records)."""
    found = sorted((record for record in records if not record["aggregated"]), key=lambda record: record["index"])
    if not found:
        return ["Slurm reports no block (scontrol show topology printed none): its topology is not topology/block, "
                "or slurmctld has not read the file"]
    problems = []
    wanted = {block["name"]: block for block in blocks}
    have = {record["name"]: record for record in found}
    problems.extend("block %s (domain group %s) is not in Slurm's topology" % (name, name)
                    for name in wanted if name not in have)
    problems.extend("Slurm has block %s, which is no IMEX domain of the inventory" % name
                    for name in have if name not in wanted)
    common_wanted = [name for name in wanted if name in have]
    common_have = [name for name in have if name in wanted]
    if common_wanted != common_have:
        problems.append("Slurm orders the blocks %s; the inventory %s (neighbouring blocks form the higher-level "
                        "blocks)" % (", ".join(common_have), ", ".join(common_wanted)))
    for name in common_wanted:
        expected, actual = wanted[name]["nodes"], have[name]["nodes"]
        missing = [node for node in expected if node not in actual]
        extra = [node for node in actual if node not in expected]
        if missing:
            problems.append("block %s: Slurm lacks %s" % (name, ", ".join(missing)))
        if extra:
            problems.append("block %s: Slurm also has %s, which the inventory does not put there"
                            % (name, ", ".join(extra)))
    base = found[0]["size"]
    if base is not None and base != sizes[0]:
        problems.append("Slurm's base block size is %d, the inventory's %d" % (base, sizes[0]))
    for record in records:
        if record["aggregated"] and record["size"] is not None and record["size"] not in sizes:
            problems.append("Slurm's aggregated block %s has size %d, which is not one of BlockSizes %s"
                            % (record["name"], record["size"], ",".join(str(size) for size in sizes)))
    return problems
