# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
"""The verdict and JSON report of one IMEX domain, from the status its leader read."""
from __future__ import annotations


def domain_report(domain_name, model, play_hosts, statuses, allowed_broken_pairs=0):
    """Return {domain, verdict, ok, message, problems, leader, expected_nodes, status, trays_not_in_run}.

    statuses maps trays to their imex_status result; the domain's leader (its first tray in the
    run, the one that read the status) decides.

    verdict is healthy, tolerated (only broken pairs, at most allowed_broken_pairs, reported),
    unhealthy, or unknown (the status could not be read at all).

    Only the running domain is judged: the daemons compare their node maps themselves (!M!) and
    imex_status compares the leader's list with the inventory. A node list file edited on disk
    whose daemon has not restarted yet is drift for ``site.yml --check --diff`` to show.
    """
    domain = model["domains"][domain_name]
    hosts = [node["host"] for node in domain["nodes"]]
    in_run = [host for host in hosts if host in play_hosts]
    report = {
        "domain": domain_name,
        "expected_nodes": list(domain["addresses"]),
        "leader": in_run[0] if in_run else None,
        "trays_not_in_run": [host for host in hosts if host not in play_hosts],
    }
    status = dict(statuses.get(report["leader"]) or {}) if report["leader"] else {}
    report["status"] = {key: status.get(key) for key in (
        "domain_state", "local_state", "healthy", "nodes", "broken_pairs", "problems", "source", "elapsed", "ctl_rc")}
    problems = []
    if "domain_state" not in status:
        report["verdict"] = "unknown"
        problems = ["status could not be read from tray %s: %s"
                    % (report["leader"], status.get("msg", "no result"))]
    elif status.get("healthy"):
        report["verdict"] = "healthy"
    elif _only_tolerated_pairs(status, allowed_broken_pairs):
        report["verdict"] = "tolerated"
        problems = ["%d broken pair(s) tolerated (allowed %d): %s" % (
            len(status["broken_pairs"]), allowed_broken_pairs, "; ".join(status.get("problems") or []))]
    else:
        report["verdict"] = "unhealthy"
        problems = list(status.get("problems") or [])
    report["ok"] = report["verdict"] in ("healthy", "tolerated")
    report["problems"] = problems
    state = status.get("domain_state", "UNKNOWN")
    if report["verdict"] == "healthy":
        report["message"] = "domain %s: %s, %d nodes READY, every pair connected" % (
            domain_name, state, len(domain["addresses"]))
    else:
        report["message"] = problems_message(domain_name, state, report["verdict"], problems)
    return report


def problems_message(domain_name, state, verdict, problems):
    """The message of a domain that is not healthy: its state and verdict, then one line per problem."""
    return "domain %s: %s (%s):\n  - %s" % (domain_name, state, verdict, "\n  - ".join(problems))


def _only_tolerated_pairs(status, allowed_broken_pairs):
    nodes = status.get("nodes") or []
    pairs = status.get("broken_pairs") or []
    versions = set(node.get("version") for node in nodes)
    return (0 < len(pairs) <= allowed_broken_pairs and len(versions) == 1
            and all(node.get("status") == "READY" for node in nodes))


# Trays of one domain whose daemon log is read for a failed proof, at most (the first in node order).
EXPLAINED_TRAYS_PER_DOMAIN = 6


def trays_to_explain(report, model, hosts_of_play):
    """The trays of a domain that is not ok whose own daemon log says why: nodes the status shows
    not READY (or does not report), in node order; the leader when the status could not be read."""
    if report.get("ok"):
        return []
    hosts = [node["host"] for node in model["domains"][report["domain"]]["nodes"]]
    status = report.get("status") or {}
    if status.get("domain_state") is None:
        chosen = [report["leader"]] if report.get("leader") else []
    else:
        chosen = [hosts[node["index"]] for node in status.get("nodes") or []
                  if (node.get("status") != "READY" or node.get("reported") is False)
                  and isinstance(node.get("index"), int) and 0 <= node["index"] < len(hosts)]
    return [tray for tray in chosen if tray in hosts_of_play][:EXPLAINED_TRAYS_PER_DOMAIN]


def with_daemon_logs(report, model, logs):
    """The report with ``daemon_logs`` ({tray: {source, path, lines, refused} or {error}}) for those of its
    domain's trays that ``logs`` holds, each excerpt also added to the message."""
    hosts = [node["host"] for node in model["domains"][report["domain"]]["nodes"]]
    found = {tray: logs[tray] for tray in hosts if tray in logs}
    if not found:
        return report
    report = dict(report, daemon_logs=found)
    parts = [report["message"]]
    for tray, log in found.items():
        if log.get("error"):
            parts.append("  daemon log of %s could not be read: %s" % (tray, log["error"]))
        elif log.get("lines"):
            where = log.get("path") or "journal"
            parts.append("  daemon log of %s (%s, last %d lines):\n      %s"
                         % (tray, where, len(log["lines"]), "\n      ".join(log["lines"])))
        if log.get("refused"):
            # The daemon's own file was not read (a symlink, or a place others can write to): say so,
            # so that journal lines are not taken for the whole story.
            parts.append("  daemon log file of %s not read: %s" % (tray, log["refused"]))
    report["message"] = "\n".join(parts)
    return report
