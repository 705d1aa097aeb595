# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
"""Compare the NVLink fabric identity of every tray with the inventory's domain grouping.

An IMEX domain only works inside one NVLink partition: every tray of a domain must report the
same cluster UUID (NVLink domain, the rack) and clique id (partition), and two IMEX domains must
never share one partition (two IMEX ensembles on one clique break cuMemSetAccess).
"""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.module_utils._nodes import FAMILY_HOSTNAME, classify
from ansible_collections.rackscale.imex.plugins.plugin_utils._domain import (
    HOSTNAME_MIN_DRIVER,
    HOSTNAME_MIN_DRIVER_TEXT,
    parse_driver_version,
)


def fabric_problems(model, fabric_by_host, notes=None):
    """Return one sentence per problem; an empty list means the grouping matches the fabric.

    Two domains on one NVLink partition are a problem, unless ``notes`` is a list (the operator
    opted in to per-job domains inside a partition): then they are said there instead.

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
                sentence = ("domains %s and %s share the NVLink partition %s (trays %s)"
                            % (other, name, _describe(identity), ", ".join(hosts)))
                if notes is None:
                    problems.append(sentence + ": two IMEX domains on one partition break memory sharing "
                                    "unless each job stays inside one domain (imex_shared_partition: true "
                                    "allows it)")
                else:
                    notes.append(sentence + ", as imex_shared_partition allows: a job must stay inside "
                                 "one IMEX domain")
    return problems


def _describe(identity):
    cluster_uuid, clique_id = identity
    return "cluster %s clique %s" % (cluster_uuid, clique_id)


def version_problems(model, info_by_host):
    """One sentence per tray whose nvidia-imex is not its driver's release, per domain whose trays
    run different releases (the daemons would answer !V!), and per domain that uses host names on
    a driver older than HOSTNAME_MIN_DRIVER.

    info_by_host: host -> the tray's imex_tray_info result (driver_version, imex_version). A version
    that could not be read is not compared: whether the daemon's own check would pass is unknown,
    and the proof after the restart still names a mismatch.
    """
    problems = []
    for name in sorted(model["domains"]):
        domain = model["domains"][name]
        by_driver = {}
        for node in domain["nodes"]:
            info = info_by_host.get(node["host"]) or {}
            driver, imex = info.get("driver_version"), info.get("imex_version")
            if driver and imex and driver != imex:
                problems.append("tray %s (domain %s): nvidia-imex %s does not match the driver %s; install the "
                                "nvidia-imex package of the driver's release (the daemon refuses to start otherwise)"
                                % (node["host"], name, imex, driver))
            if driver:
                by_driver.setdefault(driver, []).append(node["host"])
        if len(by_driver) > 1:
            problems.append("domain %s runs different driver releases: %s; the daemons would answer !V! "
                            "(version mismatch); run one release on every tray of a domain"
                            % (name, "; ".join("%s on %s" % (release, ", ".join(hosts))
                                               for release, hosts in sorted(by_driver.items()))))
        named = [node["host"] for node in domain["nodes"] if classify(node["address"])[0] == FAMILY_HOSTNAME]
        old = sorted(release for release in by_driver if _older(release, HOSTNAME_MIN_DRIVER))
        if named and old:
            problems.append("domain %s uses host names in its node list (%s), which need driver %s or newer; "
                            "its trays run %s; use IP addresses or upgrade the driver"
                            % (name, ", ".join(named), HOSTNAME_MIN_DRIVER_TEXT, ", ".join(old)))
    return problems


def _older(release, floor):
    try:
        return parse_driver_version(release) < floor
    except ValueError:
        return False  # an unreadable release is not judged (see version_problems)
