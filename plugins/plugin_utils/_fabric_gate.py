# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
"""Compare the NVLink fabric identity of every tray with the inventory's domain grouping.

An IMEX domain only works inside one NVLink partition: every tray of a domain must report the
same cluster UUID (NVLink domain, the rack) and clique id (partition), and two IMEX domains must
never share one partition (two IMEX ensembles on one clique break cuMemSetAccess).
"""
from __future__ import annotations


def fabric_problems(model, fabric_by_host):
    """Return one sentence per problem; an empty list means the grouping matches the fabric.

    model: the domain model (see _domain.build_model); fabric_by_host: host -> the result of
    rackscale.imex.imex_tray_info on that tray (keys cluster_uuid, clique_id, fabric_ok,
    problems), or a dict with 'unreachable'/'failed' and 'msg' when the tray gave no answer.
    """
    problems = []
    owner_of_partition = {}
    for name in sorted(model["domains"]):
        domain = model["domains"][name]
        identities = {}
        for node in domain["nodes"]:
            host = node["host"]
            info = fabric_by_host.get(host)
            if info is None:
                # Trays outside the play (--limit) are not probed; their fabric is unknown.
                continue
            if info.get("failed") or info.get("unreachable"):
                problems.append("tray %s (domain %s): fabric identity unknown: %s"
                                % (host, name, info.get("msg", "no answer")))
                continue
            if not info.get("fabric_ok", False):
                detail = "; ".join(info.get("problems") or []) or "fabric not Completed/Success"
                problems.append("tray %s (domain %s): %s" % (host, name, detail))
                continue
            identity = (info.get("cluster_uuid"), str(info.get("clique_id")))
            identities.setdefault(identity, []).append(host)
        if len(identities) > 1:
            parts = ["%s on %s" % (_describe(identity), ", ".join(hosts))
                     for identity, hosts in sorted(identities.items(), key=lambda item: item[1][0])]
            problems.append("domain %s spans several NVLink partitions: %s" % (name, "; ".join(parts)))
        for identity, hosts in identities.items():
            other = owner_of_partition.setdefault(identity, name)
            if other != name:
                problems.append("domains %s and %s share the NVLink partition %s (trays %s): "
                                "two IMEX domains on one partition break memory sharing"
                                % (other, name, _describe(identity), ", ".join(hosts)))
    return problems


def _describe(identity):
    cluster_uuid, clique_id = identity
    return "cluster %s clique %s" % (cluster_uuid, clique_id)
