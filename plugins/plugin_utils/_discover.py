# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
"""An inventory skeleton from the NVLink fabric identity the trays report.

Trays that report the same ClusterUUID (the NVLink domain, a rack) and CliqueId (the NVLink
partition) can form one IMEX domain; each such set becomes one child group of ``imex_domains``,
named from the pair so that the name is the same at every run.
"""
from __future__ import annotations

import re

from ansible_collections.rackscale.imex.plugins.plugin_utils._domain import natural_key

# Host variables a skeleton keeps for each tray, so that it reaches the trays as the source inventory did.
CONNECTION_VARS = ("ansible_host", "ansible_port", "ansible_user", "ansible_connection", "ansible_become",
                   "ansible_ssh_common_args", "ansible_python_interpreter", "imex_address")
_HEX = re.compile(r"[^0-9a-f]")


def group_name(cluster_uuid, clique_id, width=8):
    """``nvl_<first hex digits of the ClusterUUID>_<CliqueId>``: a valid Ansible group name."""
    digits = _HEX.sub("", str(cluster_uuid).lower())
    return "nvl_%s_%s" % (digits[:width], re.sub(r"[^0-9A-Za-z]", "_", str(clique_id)))


def _names(partitions):
    """A group name per (ClusterUUID, CliqueId); longer UUID prefixes where short ones would collide."""
    names = {}
    for width in (8, 16, 32):
        names = {key: group_name(key[0], key[1], width) for key in partitions}
        if len(set(names.values())) == len(names):
            break
    return names


def skeleton_of(trays, max_nodes):
    """{problems, inventory, domains, summary} from ``trays``: [{name, read (the imex_tray_info result), vars}].

    problems: one sentence per tray that could not be read or whose fabric is not registered
    (Completed/Success on every GPU), and per partition with more trays than ``max_nodes``;
    inventory: the YAML-ready skeleton; domains: group name -> trays, in node (natural) order.
    """
    problems = []
    partitions = {}
    for tray in sorted(trays, key=lambda entry: natural_key(entry["name"])):
        read = tray.get("read") or {}
        if read.get("failed") or read.get("unreachable") or "fabric_ok" not in read:
            problems.append("tray %s: could not be read: %s" % (tray["name"], read.get("msg") or "no result"))
        elif not read["fabric_ok"] or not read.get("cluster_uuid") or not read.get("clique_id"):
            problems.append("tray %s: NVLink fabric not registered (Completed/Success): %s"
                            % (tray["name"], "; ".join(read.get("problems") or ["no ClusterUUID or CliqueId"])))
        else:
            partitions.setdefault((read["cluster_uuid"], str(read["clique_id"])), []).append(tray)
    names = _names(partitions)
    for key, members in sorted(partitions.items(), key=lambda item: names[item[0]]):
        if len(members) > max_nodes:
            problems.append("NVLink partition %s (ClusterUUID %s, CliqueId %s) has %d trays, more than imex_max_nodes=%d: %s"
                            % (names[key], key[0], key[1], len(members), max_nodes,
                               ", ".join(member["name"] for member in members)))
    domains = {names[key]: [member["name"] for member in members]
               for key, members in sorted(partitions.items(), key=lambda item: names[item[0]])}
    children = {}
    for key, members in sorted(partitions.items(), key=lambda item: names[item[0]]):
        children[names[key]] = {
            "hosts": {member["name"]: {var: member["vars"][var] for var in CONNECTION_VARS
                                       if member.get("vars", {}).get(var) is not None}
                      or None for member in members},
            # imex_domain names each tray's domain without the group_tree vars plugin.
            "vars": {"imex_domain_size": len(members), "imex_domain": names[key]},
        }
    inventory = {"all": {"children": {"imex_domains": {"children": children}}}}
    summary = ["%s: %d tray%s (%s)" % (name, len(members), "" if len(members) == 1 else "s", ", ".join(members))
               for name, members in domains.items()]
    return {"problems": problems, "inventory": inventory, "domains": domains, "summary": summary}
