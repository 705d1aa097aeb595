# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""The verdict of a domain whose host daemon runs: from its status read (nvidia-imex-ctl -N on its leader),
the daemons that do not run what is on disk, the TLS reloads, and the daemon logs that explain a failure."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._report import domain_report, problems_message, with_daemon_logs


def daemon_report(run, model, name, statuses, play_hosts, allowed_broken_pairs=0, logs=None, pending=None):
    """The report of domain ``name`` (statuses: {domain: imex_status result}; pending: {domain: {tray: why}}
    daemons that run older files than those on disk: the domain is not proven to run what the inventory
    says, whatever its matrix shows)."""
    domain = run.domains[name]
    report = domain_report(name, model, list(play_hosts), {domain.leader: statuses.get(name) or {}},
                           allowed_broken_pairs=int(allowed_broken_pairs))
    away = domain.out_of_service or []
    report["out_of_service"] = away
    if away and report["verdict"] in ("healthy", "tolerated"):
        report["message"] = "domain %s: %s, every tray in service READY and connected; out of service: %s" % (
            name, (report.get("status") or {}).get("domain_state") or "UNKNOWN", ", ".join(away))
    restarts = (pending or {}).get(name) or {}
    releases = domain.pending_release or {}
    stale = {tray: "tray %s runs %s (%s): a restart of the domain is pending; run site.yml to restart it"
                   % (tray, "another IMEX release than the one installed" if tray in releases
                      else "a config other than the one on disk", why) for tray, why in restarts.items()}
    stale.update((tray, "tray %s runs TLS credentials older than its files on disk (%s): a reload is pending; run "
                        "site.yml to reload them (no restart)" % (tray, why))
                 for tray, why in (domain.pending_reload or {}).items() if tray not in stale)
    report["tls_reloaded"] = sorted(domain.reload or {})
    report["tls_certificates"] = {tray: run.trays[tray].tls_certificate for tray in domain.trays_in_run or []
                                  if tray in run.trays and run.trays[tray].tls_certificate}
    if report["tls_reloaded"] and report["verdict"] in ("healthy", "tolerated"):
        report["message"] += "; TLS credentials reloaded without a restart on %s" % ", ".join(report["tls_reloaded"])
    # Trays that took their slot at a new address (a swapped tray): the hosts blocks say so, no daemon restarted.
    report["slots_moved"] = dict(domain.slots_moved or {})
    if report["slots_moved"] and report["verdict"] in ("healthy", "tolerated") and not domain.restart:
        report["message"] += "; %s took %s slot at a new address without a restart of %s peers (%s)" % (
            ", ".join(sorted(report["slots_moved"])), "its" if len(report["slots_moved"]) == 1 else "their",
            "its" if len(report["slots_moved"]) == 1 else "their",
            ", ".join("%s: %s" % item for item in sorted(report["slots_moved"].items())))
    if stale:
        report["ok"] = False
        if report["verdict"] in ("healthy", "tolerated"):
            report["verdict"] = "stale"
        report["problems"] = report["problems"] + [problem for _tray, problem in sorted(stale.items())]
        report["message"] = problems_message(name, (report.get("status") or {}).get("domain_state") or "UNKNOWN",
                                             report["verdict"], report["problems"])
    if logs:
        report = with_daemon_logs(report, model, logs)
    return report
