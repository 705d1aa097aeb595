# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""What a run leaves on the controller beside the JSON reports: the stamp of each report, a
Markdown summary of every domain of the run, and node_exporter textfile gauges per domain.

Pure functions of the reports (see _report.domain_report); the imex_report action writes them.
"""
from __future__ import annotations

import datetime
import json
import os
import re

import yaml

SUMMARY_NAME = "summary.md"
TEXTFILE_PREFIX = "rackscale_imex_"
_LAST_SUCCESS = "rackscale_imex_domain_last_success_timestamp_seconds"
_LAST_SUCCESS_LINE = re.compile(r"^%s\{[^}]*\} (?P<value>[0-9.eE+]+)$" % _LAST_SUCCESS, re.MULTILINE)
# name, help: the same text in every domain's file (node_exporter merges the files' families).
_DOMAIN_GAUGES = (
    ("rackscale_imex_domain_ok", "1 when the IMEX domain was healthy, or only had tolerated broken pairs, at the last run."),
    ("rackscale_imex_domain_up", "1 when nvidia-imex-ctl showed Domain State UP at the last run."),
    ("rackscale_imex_domain_nodes", "Trays of the IMEX domain in the inventory."),
    ("rackscale_imex_domain_nodes_ready", "Nodes of the IMEX domain whose daemon was READY at the last run."),
    ("rackscale_imex_domain_broken_pairs", "Node pairs (each direction) that were not connected at the last run."),
    ("rackscale_imex_domain_version_skew", "1 when the nodes of the IMEX domain reported more than one IMEX version."),
    ("rackscale_imex_domain_last_run_timestamp_seconds", "Time of the last run that judged the IMEX domain."),
    (_LAST_SUCCESS, "Time of the last run that found the IMEX domain healthy or tolerated; 0 if none did."),
)
# A run that stopped before it judged the domain: when, and at which stage (label). Only in the file a
# stopped run writes; the next run that judges the domain writes a file without it.
_RUN_STOPPED = ("rackscale_imex_domain_run_stopped_timestamp_seconds",
                "Time of the last run that stopped before it proved the IMEX domain (label stage: where it stopped).")
# Gauges a stopped run knows: the others (state, nodes READY, pairs, versions) were not read.
_STOPPED_GAUGES = ("rackscale_imex_domain_ok", "rackscale_imex_domain_nodes",
                   "rackscale_imex_domain_last_run_timestamp_seconds", _LAST_SUCCESS)
_NODE_READY = ("rackscale_imex_node_ready", "1 when the node's IMEX daemon was READY at the last run.")
_TLS_EXPIRY = ("rackscale_imex_tls_certificate_expiry_timestamp_seconds",
               "Time at which the tray's IMEX TLS certificate expires, as checked on the controller at the last run.")


def collection_version(collection_root):
    """The version of the collection at collection_root: MANIFEST.json when installed from a
    tarball, galaxy.yml in a checkout; 'unknown' when neither says."""
    try:
        with open(os.path.join(collection_root, "MANIFEST.json")) as handle:
            return str(json.load(handle)["collection_info"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        with open(os.path.join(collection_root, "galaxy.yml")) as handle:
            return str(yaml.safe_load(handle)["version"])
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return "unknown"


def stamped(report, run_id, generated_at, version):
    """The report with the run that wrote it: its id, the UTC time and the collection version."""
    return dict(report, run_id=run_id, generated_at=generated_at, collection_version=version)


def last_proven_at(report, generated_at, previous):
    """When the domain was last proven (healthy or tolerated), ISO UTC: now when ``report`` is ok, else
    as the domain's previous report (``previous``, its file's content) says; None when none did."""
    if report.get("ok"):
        return generated_at
    previous = previous if isinstance(previous, dict) else {}
    if previous.get("last_proven_at"):
        return previous["last_proven_at"]
    return previous.get("generated_at") if previous.get("ok") else None


def _epoch(iso_time):
    try:
        return datetime.datetime.fromisoformat(str(iso_time).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _status(report):
    return report.get("status") or {}


def _counts(report):
    """(nodes expected, nodes READY, broken pairs, distinct versions) of a report."""
    nodes = _status(report).get("nodes") or []
    ready = sum(1 for node in nodes if node.get("status") == "READY")
    versions = set(node.get("version") for node in nodes if node.get("version"))
    return len(report.get("expected_nodes") or []), ready, len(_status(report).get("broken_pairs") or []), versions


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_summary(reports, run_id, generated_at, version, stopped=None):
    """Markdown: one table row per domain of the run, where a stopped run stopped (``stopped``: the
    imex_plan record), then the problems of each domain not healthy."""
    lines = ["# IMEX domains", "",
             "Run `%s` at %s, rackscale.imex %s." % (run_id, generated_at, version), "",
             "| domain | verdict | domain state | nodes READY | broken pairs | versions | report |",
             "|---|---|---|---|---|---|---|"]
    for report in reports:
        expected, ready, broken, versions = _counts(report)
        if report.get("stopped_at"):
            # Nothing was read: no state, nodes or pairs to show.
            lines.append("| %s | %s | - | -/%d | - | - | %s.json |" % (
                _cell(report["domain"]), report["verdict"], expected, _cell(report["domain"])))
            continue
        lines.append("| %s | %s | %s | %d/%d | %d | %s | %s.json |" % (
            _cell(report["domain"]), report["verdict"], _status(report).get("domain_state") or "-",
            ready, expected, broken, _cell(", ".join(sorted(versions)) or "-"), _cell(report["domain"])))
    for report in reports:
        if report.get("tls_reloaded"):
            lines += ["", "%s: TLS credentials reloaded without a restart (SIGUSR1) on %s."
                      % (_cell(report["domain"]), _cell(", ".join(report["tls_reloaded"])))]
    if stopped:
        lines += ["", "## The run stopped at its %s stage" % stopped.get("stage"), ""]
        for label, key in (("domains", "domains"), ("trays", "trays"), ("not reached", "not_reached")):
            if stopped.get(key):
                lines.append("%s: %s" % (label.capitalize(), _cell(", ".join(stopped[key]))))
        if stopped.get("task"):
            lines.append("Task: %s" % _cell(stopped["task"]))
        lines += [""] + ["- %s" % _cell(reason) for reason in stopped.get("reasons") or []]
    for report in reports:
        if report["verdict"] == "healthy":
            continue
        lines += ["", "## %s: %s" % (report["domain"], report["verdict"]), ""]
        lines += ["- %s" % _cell(problem) for problem in report.get("problems") or []]
    return "\n".join(lines) + "\n"


def _label(value):
    return '"%s"' % str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def previous_last_success(previous_text):
    """The last-success time a domain's previous textfile holds (0 when none)."""
    found = _LAST_SUCCESS_LINE.search(previous_text or "")
    return float(found.group("value")) if found else 0.0


def render_textfile(report, now_epoch, previous_text=""):
    """node_exporter textfile gauges of one domain; the last success is carried from previous_text, or
    from the report's last_proven_at (the previous report's) when that is later.

    A report of a run that stopped before it judged the domain (``stopped_at``) says only what that
    run knows: not ok, since when, and where it stopped; never an older run's state or READY nodes."""
    domain = _label(report["domain"])
    expected, ready, broken, versions = _counts(report)
    last_success = now_epoch if report.get("ok") else max(previous_last_success(previous_text),
                                                          _epoch(report.get("last_proven_at") or ""))
    values = {
        "rackscale_imex_domain_ok": 1 if report.get("ok") else 0,
        "rackscale_imex_domain_up": 1 if _status(report).get("domain_state") == "UP" else 0,
        "rackscale_imex_domain_nodes": expected,
        "rackscale_imex_domain_nodes_ready": ready,
        "rackscale_imex_domain_broken_pairs": broken,
        "rackscale_imex_domain_version_skew": 1 if len(versions) > 1 else 0,
        "rackscale_imex_domain_last_run_timestamp_seconds": now_epoch,
        _LAST_SUCCESS: last_success,
    }
    lines = []
    stopped = report.get("stopped_at")
    for name, help_text in _DOMAIN_GAUGES:
        if stopped and name not in _STOPPED_GAUGES:
            continue
        lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name,
                  "%s{domain=%s} %s" % (name, domain, _number(values[name]))]
    if stopped:
        name, help_text = _RUN_STOPPED
        lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name,
                  "%s{domain=%s,stage=%s} %s" % (name, domain, _label(stopped), _number(now_epoch))]
        return "\n".join(lines) + "\n"
    name, help_text = _NODE_READY
    lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name]
    for node in _status(report).get("nodes") or []:
        lines.append("%s{domain=%s,node=%s,address=%s} %d" % (
            name, domain, _label(node.get("index")), _label(node.get("address")),
            1 if node.get("status") == "READY" else 0))
    certificates = report.get("tls_certificates") or {}
    if certificates:
        name, help_text = _TLS_EXPIRY
        lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name]
        lines += ["%s{domain=%s,tray=%s} %s" % (name, domain, _label(tray), _number(certificates[tray]["not_after"]))
                  for tray in sorted(certificates)]
    return "\n".join(lines) + "\n"


def _number(value):
    return ("%d" % value) if float(value).is_integer() else ("%.3f" % value)
