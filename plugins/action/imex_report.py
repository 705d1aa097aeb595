# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action: write one JSON report per IMEX domain on the controller, inside the controller process.

Documented in plugins/modules/imex_report.py. No module is executed: the reports are controller
output, so writing them needs neither a connection nor a (local) module run.
"""
from __future__ import annotations

import datetime
import json
import os
import types

from ansible.plugins.action import ActionBase

from ansible_collections.rackscale.imex.plugins.module_utils._files import FileOpError, ensure_directory
from ansible_collections.rackscale.imex.plugins.plugin_utils._local_files import replace_local
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import controller_dir_problem
from ansible_collections.rackscale.imex.plugins.plugin_utils._run_outputs import (
    SUMMARY_NAME,
    TEXTFILE_PREFIX,
    collection_version,
    last_proven_at,
    render_summary,
    render_textfile,
    stamped,
)

ARGUMENT_SPEC = {
    "dir": {"type": "path", "required": True},
    "reports": {"type": "list", "elements": "dict", "required": True},
    "run_id": {"type": "str", "default": ""},
    "stopped": {"type": "dict"},
    "summary": {"type": "list", "elements": "dict"},
    "textfile_dir": {"type": "path"},
}
# The collection's root: plugins/action/ is two levels below it.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Reports name the trays, their addresses and what is broken: for the operator who runs the play
# (and a group of theirs), not for every account of the controller. A missing report directory is
# created with DIR_MODE; an existing one is the operator's and keeps its mode and owner.
DIR_MODE = 0o750
FILE_MODE = 0o640
# node_exporter runs as a user of its own (node_exporter, prometheus) and reads the textfile
# directory; gauges hold nothing the metrics endpoint does not publish anyway.
TEXTFILE_DIR_MODE = 0o755
TEXTFILE_MODE = 0o644
# ensure_directory asks its caller whether to only predict. Reports are output, not a change to
# the rack, so they are written in check mode too.
_ALWAYS_WRITE = types.SimpleNamespace(check_mode=False)


def render(report):
    """The file content of one report: what the to_nice_json filter printed, plus a newline."""
    return json.dumps(report, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def domain_problem(index, report, option="reports"):
    """Why report number ``index`` cannot name a file ``<domain>.json``, or None."""
    if "domain" not in report:
        return "%s[%d] has no domain key" % (option, index)
    domain = report["domain"]
    if not isinstance(domain, str) or domain in ("", ".", "..") or "/" in domain or "\0" in domain:
        return ("%s[%d]: domain %r cannot name a report file (it must be a non-empty string"
                " without '/', and not '.' or '..')" % (option, index, domain))
    return None


def reports_problems(reports, option="reports"):
    """Every reason the reports cannot be written as one file each, checked before any write."""
    problems = []
    seen = set()
    for index, report in enumerate(reports):
        problem = domain_problem(index, report, option)
        if problem:
            problems.append(problem)
        elif report["domain"] in seen:
            problems.append("%s[%d]: domain %r has more than one report" % (option, index, report["domain"]))
        else:
            seen.add(report["domain"])
    return problems


def _previous_report(directory, domain):
    """The domain's report as the previous run left it ({} when there is none or it cannot be read)."""
    try:
        with open(os.path.join(directory, domain + ".json"), encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def write_reports(directory, reports, paths):
    """Write each report as ``<directory>/<domain>.json``, appending each path written to ``paths``.

    Raises FileOpError naming the file at fault; the files written before it stay written (and
    listed in ``paths``), the file at fault keeps its old content.
    """
    ensure_directory(_ALWAYS_WRITE, directory, mode=DIR_MODE, uid=None, gid=None)
    for report in reports:
        path = os.path.join(directory, report["domain"] + ".json")
        try:
            content = render(report)
        except (TypeError, ValueError) as exc:
            raise FileOpError("cannot write %s: the report is not JSON data: %s" % (path, exc)) from exc
        replace_local(path, content, FILE_MODE)
        paths.append(path)


def _read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return ""


def write_textfiles(directory, reports, now_epoch, paths):
    """One node_exporter textfile per domain (``rackscale_imex_<domain>.prom``), so a run over some
    domains leaves the others' gauges as they were; each carries its domain's last success on."""
    ensure_directory(_ALWAYS_WRITE, directory, mode=TEXTFILE_DIR_MODE, uid=None, gid=None)
    for report in reports:
        path = os.path.join(directory, TEXTFILE_PREFIX + report["domain"] + ".prom")
        replace_local(path, render_textfile(report, now_epoch, _read_text(path)), TEXTFILE_MODE)
        paths.append(path)


class ActionModule(ActionBase):
    """Write the JSON reports of IMEX domains on the controller."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        # Reports are controller output, never a change to the rack. A relative directory is the
        # controller's working directory's (where ansible-playbook or the AWX job runs).
        directory = os.path.abspath(args["dir"])
        result.update(changed=False, dir=directory, paths=[], summary=None, textfiles=[])
        problems = reports_problems(args["reports"]) + reports_problems(args["summary"] or [], "summary")
        # The preflight refuses these already; a run stopped before it still writes its records here.
        problems.extend(problem for problem in (controller_dir_problem("dir (imex_report_dir)", directory),
                                                controller_dir_problem("textfile_dir (imex_textfile_dir)",
                                                                       args["textfile_dir"]))
                        if problem)
        if problems:
            result.update(failed=True, msg="; ".join(problems))
            return result
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        generated_at = now.isoformat().replace("+00:00", "Z")
        version = collection_version(COLLECTION_ROOT)
        # Since when each domain is proven, or not: carried from its previous report while it is not.
        reports = [dict(stamped(report, args["run_id"], generated_at, version),
                        last_proven_at=last_proven_at(report, generated_at, _previous_report(directory, report["domain"])))
                   for report in args["reports"]]
        try:
            write_reports(directory, reports, result["paths"])
            if args["summary"] is not None:
                result["summary"] = os.path.join(directory, SUMMARY_NAME)
                replace_local(result["summary"], render_summary(args["summary"], args["run_id"], generated_at, version,
                                                                args["stopped"]), FILE_MODE)
            if args["textfile_dir"]:
                write_textfiles(os.path.abspath(args["textfile_dir"]), reports, now.timestamp(), result["textfiles"])
        except FileOpError as exc:
            result.update(failed=True, msg=str(exc))
        return result
