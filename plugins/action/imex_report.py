# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action: write one JSON report per IMEX domain on the controller, inside the controller process.

Documented in plugins/modules/imex_report.py. No module is executed: the reports are controller
output, so writing them needs neither a connection nor a (local) module run.
"""
from __future__ import annotations

import json
import os
import types

from ansible.plugins.action import ActionBase

from ansible_collections.rackscale.imex.plugins.module_utils._files import FileOpError, ensure_directory
from ansible_collections.rackscale.imex.plugins.plugin_utils._local_files import replace_local

ARGUMENT_SPEC = {
    "dir": {"type": "path", "required": True},
    "reports": {"type": "list", "elements": "dict", "required": True},
}
DIR_MODE = 0o755
FILE_MODE = 0o644
# ensure_directory asks its caller whether to only predict. Reports are output, not a change to
# the rack, so they are written in check mode too.
_ALWAYS_WRITE = types.SimpleNamespace(check_mode=False)


def render(report):
    """The file content of one report: what the to_nice_json filter printed, plus a newline."""
    return json.dumps(report, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def domain_problem(index, report):
    """Why report number ``index`` cannot name a file ``<domain>.json``, or None."""
    if "domain" not in report:
        return "reports[%d] has no domain key" % index
    domain = report["domain"]
    if not isinstance(domain, str) or domain in ("", ".", "..") or "/" in domain or "\0" in domain:
        return ("reports[%d]: domain %r cannot name a report file (it must be a non-empty string"
                " without '/', and not '.' or '..')" % (index, domain))
    return None


def reports_problems(reports):
    """Every reason the reports cannot be written as one file each, checked before any write."""
    problems = []
    seen = set()
    for index, report in enumerate(reports):
        problem = domain_problem(index, report)
        if problem:
            problems.append(problem)
        elif report["domain"] in seen:
            problems.append("reports[%d]: domain %r has more than one report" % (index, report["domain"]))
        else:
            seen.add(report["domain"])
    return problems


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
        # Reports are controller output, never a change to the rack.
        result.update(changed=False, paths=[])
        problems = reports_problems(args["reports"])
        if problems:
            result.update(failed=True, msg="; ".join(problems))
            return result
        try:
            write_reports(args["dir"], args["reports"], result["paths"])
        except FileOpError as exc:
            result.update(failed=True, msg=str(exc))
        return result
