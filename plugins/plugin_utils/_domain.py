# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# Copyright: contributors to rackscale.imex
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-side IMEX domain model, built from inventory data alone.

The controller decides every tray's node list before any tray is contacted, so ``--limit``,
AWX job slicing and tray swaps cannot make two trays of one domain write different lists.

Inventory shape
    Each IMEX domain is an inventory group (a rack, or an NVLink partition of a rack). The
    domain groups are the child groups of one parent group (default ``imex_domains``).
    A tray's IMEX address is ``imex_address``, else ``ansible_host``.

Node order (the line of nodes_config.cfg, which is the IMEX node ID)
    * explicit: every tray of the domain sets ``imex_node_index``; the values must be
      0..size-1, each used once, so the declared index is the node ID ``nvidia-imex-ctl -N``
      prints;
    * natural (no tray sets it): natural sort of inventory hostnames (``tray2`` before
      ``tray10``). Hostnames, not addresses, because the hostname is the operator's stable
      name for a slot: a tray swap that only changes the address keeps every position, and
      no node ID moves. Not inventory order, because it differs between inventory sources
      (YAML order, AWX sorts by plain string, dynamic sources return any order).
    * a mix of both is an error: a partial index would be silently ignored or guessed.

Completeness
    ``imex_domain_size`` (a group var of the domain group) declares how many trays the domain
    has. A partial domain in the inventory (an AWX sliced job receives only every n-th host of
    the inventory; AWX leaves disabled hosts out; a mistake in a dynamic source) would
    otherwise give a shorter, different node list that looks valid. AWX tells the playbook
    nothing about slicing (no extra var; the sliced inventory is simply smaller), so the
    declared size is the only reliable signal; ``require_declared_size`` makes it mandatory.

Only the standard library and the collection's own ``_nodes`` validator are used, so this stays
importable on Python >= 3.9 although it only runs on the controller.
"""

from __future__ import annotations

import re

from ansible_collections.rackscale.imex.plugins.module_utils._nodes import FAMILY_HOSTNAME, MAX_NODES, classify

DEFAULT_PARENT = "imex_domains"
DEFAULT_MAX_NODES = MAX_NODES
ADDRESS_KEYS = ("imex_address", "ansible_host")
INDEX_KEY = "imex_node_index"
SIZE_KEY = "imex_domain_size"
HOST_VAR_KEYS = ADDRESS_KEYS + (INDEX_KEY, SIZE_KEY)

# nodes_config.cfg accepts host names only from this driver release on (the DRA
# driver's DNS-name mode has the same floor).
HOSTNAME_MIN_DRIVER = (570, 158, 1)
HOSTNAME_MIN_DRIVER_TEXT = "570.158.01"

FAMILY_MIXED = "mixed"

_DRIVER_VERSION_RE = re.compile(r"([0-9]+)\.([0-9]+)(?:\.([0-9]+))?(?:[-+~][A-Za-z0-9.+~_-]*)?")
_DIGITS_RE = re.compile(r"(\d+)")


class DomainModelError(ValueError):
    """Every problem found in the inventory, not just the first; each names tray, group, key, value."""

    def __init__(self, problems):
        self.problems = list(problems)
        count = len(self.problems)
        lines = ["IMEX domain model: %d problem%s in the inventory:" % (count, "" if count == 1 else "s")]
        lines.extend("- " + problem for problem in self.problems)
        super().__init__("\n".join(lines))


def natural_key(name):
    """Sort key that orders embedded numbers by value: tray2 before tray10.

    re.split with a capturing group alternates text and digit runs, so elements at the same
    position always have the same type and tuples compare without str/int clashes. The raw
    name breaks ties (tray01 and tray1) so the order is total and deterministic.
    """
    parts = _DIGITS_RE.split(str(name))
    key = tuple(int(part) if position % 2 else part.lower() for position, part in enumerate(parts))
    return (key, str(name))


def parse_driver_version(value):
    """'570.158.01' -> (570, 158, 1); also accepts package suffixes such as '580.95.09-0ubuntu1'."""
    match = _DRIVER_VERSION_RE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(
            "driver_version %r is not a driver release such as %s" % (value, HOSTNAME_MIN_DRIVER_TEXT)
        )
    return tuple(int(part) for part in match.groups() if part is not None)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _as_int(value):
    """Integer from an int or a string of digits (INI [group:vars] values arrive as strings)."""
    if _is_int(value):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    return None


def _describe(value):
    return "%r (%s)" % (value, type(value).__name__)


def _tray(host, group):
    return "tray %s (group %s)" % (host, group)


def _resolve_address(host, group, host_vars, problems):
    """Return (key, value) of the tray's IMEX address; value None after recording that none is set."""
    for key in ADDRESS_KEYS:
        value = host_vars.get(key)
        if value is not None:
            return key, value
    problems.append(
        "%s: neither imex_address nor ansible_host is set; set imex_address to the address "
        "the IMEX peers use to reach this tray" % _tray(host, group)
    )
    return ADDRESS_KEYS[0], None


def _unusable_ip(key):
    """Why a syntactically valid IP cannot be a tray's IMEX address, or None.

    _nodes.classify accepts these because a node file may carry placeholders (AWS starts IMEX with
    0.0.0.0 lines); an inventory address is what peers connect to, so it must be a unicast address
    of another machine.
    """
    if key.is_unspecified:
        return "is the unspecified address (a placeholder, not a tray)"
    if key.is_loopback:
        return "is a loopback address; peers on other trays cannot reach it"
    if key.is_multicast:
        return "is a multicast address"
    if key.version == 4 and str(key) == "255.255.255.255":
        return "is the broadcast address"
    return None


def _check_driver(host, group, key, address, family, driver, driver_text, problems):
    if family == FAMILY_HOSTNAME and driver is not None and driver < HOSTNAME_MIN_DRIVER:
        problems.append(
            "%s: %s %r is a host name; nodes_config.cfg accepts host names only from driver %s, "
            "the configured driver_version is %s; use an IP address or upgrade the driver"
            % (_tray(host, group), key, address, HOSTNAME_MIN_DRIVER_TEXT, driver_text)
        )


def _order_domain(group, members, host_vars_of, max_nodes, problems):
    """Return (members in node order or None when the order cannot be decided, 'natural'|'explicit')."""
    with_index = [host for host in members if host_vars_of(host).get(INDEX_KEY) is not None]
    if not with_index:
        return sorted(members, key=natural_key), "natural"
    if len(with_index) != len(members):
        without = sorted((host for host in members if host not in with_index), key=natural_key)
        problems.append(
            "domain group %s: %s is set on %d of %d trays; set it on every tray or on none "
            "(then hostnames give the order). Trays without it: %s"
            % (group, INDEX_KEY, len(with_index), len(members), ", ".join(without))
        )
        return None, "explicit"

    index_of = {}
    valid = True
    for host in members:
        raw = host_vars_of(host).get(INDEX_KEY)
        index = _as_int(raw)
        if index is None:
            problems.append(
                "%s: %s = %s is not an integer" % (_tray(host, group), INDEX_KEY, _describe(raw))
            )
            valid = False
        elif not 0 <= index < max_nodes:
            problems.append(
                "%s: %s = %r is out of range 0..%d (max_nodes %d)"
                % (_tray(host, group), INDEX_KEY, raw, max_nodes - 1, max_nodes)
            )
            valid = False
        else:
            index_of[host] = index

    holders = {}
    for host, index in index_of.items():
        holders.setdefault(index, []).append(host)
    for index in sorted(holders):
        if len(holders[index]) > 1:
            problems.append(
                "domain group %s: %s = %d is set on %d trays: %s; each tray needs its own index"
                % (group, INDEX_KEY, index, len(holders[index]),
                   ", ".join(sorted(holders[index], key=natural_key)))
            )
            valid = False
    if not valid:
        return None, "explicit"

    missing = sorted(set(range(len(members))) - set(index_of.values()))
    if missing:
        beyond = sorted((host for host in members if index_of[host] >= len(members)),
                        key=lambda host: index_of[host])
        problems.append(
            "domain group %s: %s must use 0..%d once each (the index is the tray's line in "
            "nodes_config.cfg and its IMEX node ID); missing %s; beyond the %d trays: %s"
            % (group, INDEX_KEY, len(members) - 1, ", ".join(str(index) for index in missing),
               len(members), ", ".join("%s=%d" % (host, index_of[host]) for host in beyond))
        )
        return None, "explicit"
    return sorted(members, key=lambda host: index_of[host]), "explicit"


def _declared_size(group, members, host_vars_of, max_nodes, must_declare, why_required, problems):
    """Check imex_domain_size against the member count; return the declared size or None."""
    declared = {}
    for host in members:
        raw = host_vars_of(host).get(SIZE_KEY)
        if raw is not None:
            declared[host] = raw
    if not declared:
        if must_declare:
            problems.append(
                "domain group %s: %s is not set (%s); set it in the group vars of %s to the number "
                "of trays the domain really has, so a partial domain cannot pass as complete"
                % (group, SIZE_KEY, why_required, group)
            )
        return None

    values = {}
    for host, raw in declared.items():
        values.setdefault(repr(raw), []).append(host)
    if len(values) > 1 or len(declared) != len(members):
        unset = [host for host in members if host not in declared]
        spread = "; ".join("%s on %s" % (value, ", ".join(sorted(hosts, key=natural_key)))
                           for value, hosts in sorted(values.items()))
        if unset:
            spread += "; unset on %s" % ", ".join(sorted(unset, key=natural_key))
        problems.append(
            "domain group %s: %s differs between its trays (%s); set it once, as a group var of %s"
            % (group, SIZE_KEY, spread, group)
        )
        return None

    raw = next(iter(declared.values()))
    size = _as_int(raw)
    if size is None or size < 1:
        problems.append(
            "domain group %s: %s = %s is not a positive integer" % (group, SIZE_KEY, _describe(raw))
        )
        return None
    if size > max_nodes:
        problems.append(
            "domain group %s: %s = %d is above the limit of %d trays per IMEX domain (max_nodes)"
            % (group, SIZE_KEY, size, max_nodes)
        )
        return None
    if size > len(members):
        problems.append(
            "domain group %s: %s = %d but the inventory holds %d trays (%s): a partial domain "
            "(AWX job slicing, a disabled or missing host, an inventory mistake) would write a "
            "node list that differs from the full domain's; run against the whole inventory or "
            "correct %s" % (group, SIZE_KEY, size, len(members),
                            ", ".join(sorted(members, key=natural_key)), SIZE_KEY)
        )
        return None
    if size < len(members):
        problems.append(
            "domain group %s: %s = %d but the inventory holds %d trays (%s); a tray was added to the "
            "wrong group, or %s is out of date" % (group, SIZE_KEY, size, len(members),
                                                   ", ".join(sorted(members, key=natural_key)), SIZE_KEY)
        )
        return None
    return size


def build_model(groups, hostvars, parent=DEFAULT_PARENT, max_nodes=DEFAULT_MAX_NODES,
                allow_mixed_families=False, driver_version=None, domain_groups=None,
                require_declared_size=False, job_slice_count=1):
    """Build and validate the IMEX domain model from inventory data.

    groups: mapping group name -> list of host names (Ansible's ``groups``; all hosts of the
        group and of its descendants, independent of ``--limit``).
    hostvars: mapping host -> mapping of that host's variables; only HOST_VAR_KEYS are read.
    domain_groups: names of the direct child groups of ``parent`` (``groups`` does not carry
        the hierarchy; the filter plugin reads it from the inventory).
    Raises DomainModelError listing every problem; returns
        {'parent', 'domains': {name: {'name', 'nodes': [{'host', 'address', 'index'}],
         'addresses', 'family', 'size', 'declared_size', 'order'}}, 'host_domain': {host: name}}.
    """
    problems = []

    if not _is_int(max_nodes) or max_nodes < 1:
        raise DomainModelError(["max_nodes = %s is not a positive integer" % _describe(max_nodes)])
    if not _is_int(job_slice_count) or job_slice_count < 1:
        raise DomainModelError(
            ["job_slice_count = %s is not a positive integer" % _describe(job_slice_count)])

    driver = None
    if driver_version is not None:
        try:
            driver = parse_driver_version(driver_version)
        except ValueError as exc:
            problems.append(str(exc))

    if parent not in groups:
        raise DomainModelError(problems + [
            "group %s (parent of the IMEX domain groups) is not in the inventory; create it with "
            "one child group per IMEX domain (a rack, or an NVLink partition of a rack)" % parent
        ])
    if domain_groups is None:
        raise DomainModelError(problems + [
            "the child groups of %s are unknown; pass the domain group names (domain_groups)" % parent
        ])
    domain_names = []
    for name in domain_groups:
        if name not in domain_names:
            domain_names.append(name)
    if not domain_names:
        raise DomainModelError(problems + [
            "group %s has no child groups; add one child group per IMEX domain (a rack, or an "
            "NVLink partition of a rack)" % parent
        ])

    members_of = {}
    for name in sorted(domain_names, key=natural_key):
        if name not in groups:
            problems.append("domain group %s (child of %s) is not in the inventory" % (name, parent))
            continue
        members = []
        for host in groups[name]:
            if host not in members:
                members.append(host)
        if not members:
            problems.append(
                "domain group %s (child of %s) holds no trays; add its trays or remove the group "
                "from %s" % (name, parent, parent)
            )
            continue
        members_of[name] = members

    domains_of_host = {}
    for name, members in members_of.items():
        for host in members:
            domains_of_host.setdefault(host, []).append(name)
    for host in sorted(domains_of_host, key=natural_key):
        names = domains_of_host[host]
        if len(names) > 1:
            problems.append(
                "tray %s is in %d domain groups under %s: %s; a tray belongs to exactly one IMEX "
                "domain (for a partitioned rack, make the partitions the children of %s, not the rack)"
                % (host, len(names), parent, ", ".join(names), parent)
            )

    stray = [host for host in groups[parent] if host not in domains_of_host]
    for host in sorted(set(stray), key=natural_key):
        problems.append(
            "tray %s is a direct member of %s but of none of its child groups; put it in the group "
            "of its rack or NVLink partition" % (host, parent)
        )

    def host_vars_of(host):
        found = hostvars.get(host) if hasattr(hostvars, "get") else None
        return found if found is not None else {}

    # One address per tray (a tray in two domains is checked once, under its first group).
    address_of = {}
    family_of = {}
    seen_by_key = {}
    for name, members in members_of.items():
        for host in sorted(members, key=natural_key):
            if host in address_of:
                continue
            key, address = _resolve_address(host, name, host_vars_of(host), problems)
            address_of[host] = address
            if address is None:
                continue
            try:
                family, identity = classify(address)
                reason = None if family == FAMILY_HOSTNAME else _unusable_ip(identity)
            except ValueError as exc:
                reason = str(exc)
            if reason is not None:
                shown = repr(address) if isinstance(address, str) else _describe(address)
                problems.append("%s: %s %s %s" % (_tray(host, name), key, shown, reason))
                address_of[host] = None
                continue
            family_of[host] = family
            _check_driver(host, name, key, address, family, driver, driver_version, problems)
            seen_by_key.setdefault(identity, []).append((host, name, key, address))

    for users in seen_by_key.values():
        if len(users) > 1:
            problems.append(
                "address %s is used by %d trays: %s; every tray needs its own address across all "
                "IMEX domains" % (users[0][3], len(users), "; ".join(
                    "%s (group %s, %s %r)" % user for user in users))
            )

    if job_slice_count > 1:
        must_declare, why = True, "job_slice_count is %d: a sliced job sees part of each domain" % job_slice_count
    elif require_declared_size:
        must_declare, why = True, "require_declared_size is on"
    else:
        must_declare, why = False, ""

    domains = {}
    host_domain = {}
    for name, members in members_of.items():
        if len(members) > max_nodes:
            problems.append(
                "domain group %s holds %d trays, above the limit of %d per IMEX domain (max_nodes): %s"
                % (name, len(members), max_nodes, ", ".join(sorted(members, key=natural_key)))
            )
        declared = _declared_size(name, members, host_vars_of, max_nodes, must_declare, why, problems)

        families = {}
        for host in members:
            if host in family_of:
                families.setdefault(family_of[host], []).append(host)
        if len(families) > 1 and not allow_mixed_families:
            problems.append(
                "domain group %s mixes address families: %s; every tray of a domain must use the "
                "same family (allow_mixed_families overrides)" % (name, "; ".join(
                    "%s: %s" % (family, ", ".join(sorted(hosts, key=natural_key)))
                    for family, hosts in sorted(families.items())))
            )

        ordered, order = _order_domain(name, members, host_vars_of, max_nodes, problems)
        if ordered is None or len(members) > max_nodes:
            continue
        if any(address_of.get(host) is None for host in members):
            continue
        nodes = [{"host": host, "address": address_of[host], "index": position}
                 for position, host in enumerate(ordered)]
        if len(families) == 1:
            family = next(iter(families))
        else:
            family = FAMILY_MIXED
        domains[name] = {
            "name": name,
            "nodes": nodes,
            "addresses": [node["address"] for node in nodes],
            "family": family,
            "size": len(nodes),
            "declared_size": declared,
            "order": order,
        }
        for node in nodes:
            host_domain.setdefault(node["host"], name)

    if problems:
        raise DomainModelError(problems)
    return {"parent": parent, "domains": domains, "host_domain": host_domain}


def _model_parts(model):
    if not isinstance(model, dict) or not isinstance(model.get("domains"), dict) \
            or not isinstance(model.get("host_domain"), dict):
        raise DomainModelError(["the input is not an IMEX domain model (the result of build_model)"])
    return model.get("parent", DEFAULT_PARENT), model["domains"], model["host_domain"]


def check_play(model, play_hosts):
    """Return True when every tray of the play is in a domain; raise DomainModelError naming the others."""
    parent, host_domain = _model_parts(model)[0::2]
    problems = [
        "tray %s is in the play but in no IMEX domain (no child group of %s holds it); add it to the "
        "group of its rack or NVLink partition, or leave it out of the play" % (host, parent)
        for host in play_hosts if host not in host_domain
    ]
    if problems:
        raise DomainModelError(problems)
    return True
