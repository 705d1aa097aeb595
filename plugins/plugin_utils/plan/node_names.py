# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Host names in the node list (imex_node_names): one stable name per slot, mapped to the trays' addresses by a
managed block of each tray's /etc/hosts.

The node list then names slots, not trays: it is the same on every tray and stays the same when a tray is
swapped for a board with another address. Only the block changes, on every tray, and the running daemons are
sent SIGUSR1, which makes them resolve the names again and reconnect without becoming new instances (as the
DRA driver runs IMEX in its DNS-name mode). Moving between addresses and names changes the node list: a
restart, guarded as any other.
"""
from __future__ import annotations

import re

from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import HOSTS_PATH, HostsBlockError, wanted_digest
from ansible_collections.rackscale.imex.plugins.module_utils._nodes import FAMILY_HOSTNAME, classify
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import daemon
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import TrayRead
from ansible_collections.rackscale.imex.plugins.plugin_utils._domain import (
    HOSTNAME_MIN_DRIVER,
    HOSTNAME_MIN_DRIVER_TEXT,
    parse_driver_version,
)

# A slot name is one DNS label, so that no resolver search domain or ndots rule applies to it (glibc
# looks a dotless name up in /etc/hosts as written): the domain group's name lowered, every run of other
# characters than [a-z0-9] made one '-', then '-slot-' and the index, two digits at least.
_NOT_LABEL = re.compile(r"[^a-z0-9]+")
_LABEL_MAX = 63


def slot_name(domain, index):
    """The stable name of slot ``index`` of ``domain``: a valid DNS label of at most 63 characters that is
    never all digits (it holds 'slot'), e.g. 'rack07-slot-03' for domain 'rack07', 'gb200-r1-p0-slot-00' for
    'GB200_r1.p0'."""
    tail = "-slot-%02d" % int(index)
    stem = _NOT_LABEL.sub("-", str(domain).lower()).strip("-")[:_LABEL_MAX - len(tail)].rstrip("-")
    return (stem or "imex") + tail


def node_list(name, model_domain, names_on):
    """The entries of the domain's node list, in node order: its slot names with imex_node_names, else the
    trays' addresses."""
    if names_on:
        return [slot_name(name, node["index"]) for node in model_domain["nodes"]]
    return list(model_domain["addresses"])


def hosts_entries(name, model_domain, names_on):
    """[{address, name}] of the hosts block every tray of the domain holds ([] without names: a block left
    from before is removed)."""
    if not names_on:
        return []
    return [{"address": node["address"], "name": slot_name(name, node["index"])} for node in model_domain["nodes"]]


def preflight_problems(model, tray_options, trays, driver_version=None):
    """Refusals of imex_node_names before any tray is contacted, each naming the domain, tray and value:
    every tray sets its slot (imex_node_index), addresses are IP addresses (a hosts file maps names to
    addresses), and a configured driver release supports names. The mode refuses the option itself."""
    problems = []
    by_domain = {}
    for tray in trays:
        by_domain.setdefault(model["host_domain"][tray], []).append(tray)
    for name, members in sorted(by_domain.items()):
        if not tray_options[members[0]].get("imex_node_names"):
            continue
        domain = model["domains"][name]
        if domain.get("order") != "explicit":
            problems.append("domain %s: imex_node_names needs imex_node_index on every tray (its slot, 0..%d), so "
                            "that a replacement tray takes the old one's slot; set on none of %s"
                            % (name, len(domain["nodes"]) - 1, ", ".join(node["host"] for node in domain["nodes"])))
        for node in domain["nodes"]:
            try:
                family = classify(node["address"])[0]
            except ValueError:
                continue  # the model named it already
            if family == FAMILY_HOSTNAME:
                problems.append("domain %s: tray %s: its IMEX address %r is a host name; with imex_node_names the "
                                "managed block of /etc/hosts maps each slot name to an address: set imex_address to "
                                "the tray's IP address" % (name, node["host"], node["address"]))
        if driver_version and _older(driver_version):
            problems.append("domain %s: imex_node_names needs driver %s or newer (host names in nodes_config.cfg), "
                            "imex_driver_version is %s; upgrade the driver or set imex_node_names=false"
                            % (name, HOSTNAME_MIN_DRIVER_TEXT, driver_version))
    return problems


def _older(release):
    try:
        return parse_driver_version(release) < HOSTNAME_MIN_DRIVER
    except ValueError:
        return False  # an unreadable release is not judged, as the version gate does


def driver_problems(run, reads):
    """Trays of a domain with names whose read driver is older than names need, each named with its release
    (before any write). A release the read could not tell is not judged."""
    problems = []
    for name, domain in sorted(run.domains.items()):
        if not domain.node_names:
            continue
        for tray in domain.trays_in_run:
            release = TrayRead.of(reads.get(tray)).raw.get("driver_version")
            if release and _older(str(release)):
                problems.append("tray %s (domain %s) runs driver %s: imex_node_names needs %s or newer (host names "
                                "in nodes_config.cfg, as the DRA driver's DNS-name mode); upgrade the driver or set "
                                "imex_node_names=false" % (tray, name, release, HOSTNAME_MIN_DRIVER_TEXT))
    return problems


def hosts_problems(tray, hosts_read):
    """Refusals of a tray's hosts file as its read describes it: markers broken by hand, or slot names that
    lines outside the block map too (the resolver could answer with either)."""
    problems = []
    if not isinstance(hosts_read, dict):
        return problems
    if hosts_read.get("error"):
        problems.append("tray %s: %s: %s" % (tray, hosts_read.get("path") or HOSTS_PATH, hosts_read["error"]))
    for slot, lines in sorted((hosts_read.get("names_outside") or {}).items()):
        problems.append("tray %s: %s maps %s outside the block of rackscale.imex (line %s): the resolver could "
                        "answer with that address; remove the line" % (
                            tray, hosts_read.get("path") or HOSTS_PATH, slot, ", ".join(map(str, lines))))
    return problems


def hosts_drift(hosts_read, entries):
    """True unless the read shows the block ``entries`` render to; unsure is drift, but where no block is
    wanted only a block the read found is (a read that says nothing of the file leaves it alone)."""
    if not entries and not (isinstance(hosts_read, dict) and hosts_read.get("sha256")):
        return False
    if not isinstance(hosts_read, dict) or hosts_read.get("error") or "sha256" not in hosts_read:
        return True
    try:
        return wanted_digest(entries) != hosts_read["sha256"]
    except HostsBlockError:
        return True  # the module refuses the entries, naming them


def resolved_hosts(domain, read, service, hosts_read):
    """(unresolved, unknown) of a tray's running daemon in a domain with slot names: unresolved says why it
    resolved another hosts block than the one on disk (a run that wrote the block stopped before it signalled,
    so the daemon still dials the old address of a moved slot), unknown why the read cannot tell which block it
    resolved (no record of it: the signal is then left to a run that writes the block). "" each when not."""
    if not domain.node_names or daemon.daemon_started(read, service) is None:
        return "", ""
    if not isinstance(hosts_read, dict) or hosts_read.get("error") or "sha256" not in hosts_read:
        return "", ""  # refused by hosts_problems, or no read of the file
    known, resolved = daemon.resolved_hosts_block(read, service)
    if not known:
        return "", ("no record of the hosts block its running daemon resolved (started by hand, at boot or by an "
                    "older release of rackscale.imex): it is signalled only where this run writes a new block")
    on_disk = hosts_read["sha256"]
    if resolved == on_disk:
        return "", ""
    return ("its daemon resolved another hosts block (%s) than the one on disk (%s): written by a run that stopped "
            "before it signalled" % (_short(resolved), _short(on_disk))), ""


def _short(digest):
    return digest[:12] if digest else "none"


def made_under_work(domain, trays, pending):
    """(joining, hosts_alone): where a domain's writes are held back (work runs, or part of it is out of the
    run) but none of its running trays needs a restart, the trays whose writes are made anyway. joining: with
    slot names, a stopped tray gets its files and starts (a swapped tray joins as a tray back from repair
    does: the node list names slots, so the running trays' list stays as it is); hosts_alone: a tray whose
    hosts block alone differs gets it (the running daemons then reconnect). Where a running tray needs a
    restart, the run is refused and nothing of this is written, so no block is left unsignalled.
    trays: {tray: its plan entry}; pending: the domain's pending restarts."""
    running = [tray for tray in domain.trays_in_run if not trays[tray].stopped]
    if any(trays[tray].write_nodes or trays[tray].write_config or tray in pending
           or (trays[tray].write_tls and not trays[tray].tls_reload_ok) for tray in running):
        return [], []
    joining = [tray for tray in domain.trays_in_run if trays[tray].stopped] if domain.node_names else []
    hosts_alone = [tray for tray in domain.trays_in_run
                   if tray not in joining and trays[tray].write_hosts and not trays[tray].write_nodes]
    return joining, hosts_alone


def slots_moved(domain, reads):
    """{tray: its slot's new address} where the hosts block of a tray of the run maps the tray's slot to another
    address (a swapped tray): what the report names once the domain is proven."""
    if not domain.node_names:
        return {}
    held = {}
    for tray in domain.trays_in_run:
        for address, name in (TrayRead.of(reads.get(tray)).raw.get("hosts_block") or {}).get("entries") or []:
            held.setdefault(name, set()).add(address)
    return {tray: entry["address"] for tray, entry in zip(domain.trays, domain.hosts_entries)
            if held.get(entry["name"], {entry["address"]}) - {entry["address"]}}


def node_list_changes(result):
    """(node list changed, hosts block changed) of the one write's result (imex_nodes_config)."""
    result = result or {}
    return bool(result.get("nodes_changed", result.get("changed"))), bool(result.get("hosts_changed"))


def reconnects(run, name, writes, starting):
    """{tray: why its running daemon is sent SIGUSR1} in a domain that does not restart: where this wave
    wrote a new hosts block for real, the running daemons resolve the slot names again and reconnect (the
    daemons that start read it anyway); so does a running daemon whose record says it resolved another block
    than the one on disk (a run wrote it and stopped before its signal)."""
    domain = run.domains[name]
    if not domain.node_names:
        return {}  # a block left from before is removed: the daemons dial addresses
    changed = [tray for tray in domain.trays_in_run
               if node_list_changes((writes.get(tray) or {}).get("node list"))[1]
               and not run.trays[tray].node_list_predicted]
    why = "new addresses of slot names in /etc/hosts (written on %s)" % ", ".join(changed)
    running = [tray for tray in domain.trays_in_run if tray not in starting and not run.trays[tray].stopped]
    return {tray: why if tray in changed else run.trays[tray].hosts_unresolved for tray in running
            if tray in changed or run.trays[tray].hosts_unresolved}
