# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Stage verdicts, after the proof: the verdict of each domain, as its mode proves it, what the run says of
them, and the trays whose daemon log explains a failure."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._report import trays_to_explain
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import from_register, registered


def verdicts(plan, model, domains, statuses, play_hosts, allowed_broken_pairs=0, logs=None, pending=None,
             probes=None):
    """The report of each domain of ``domains`` from its proof (statuses: {domain: imex_status result}).

    probes: {domain: imex_slurm_probe result} of the per-job domains validate.yml probed.

    pending: {domain: {tray: why}} daemons that run older files than those on disk: the domain is not
    proven to run what the inventory says, whatever its matrix shows.
    """
    run = from_register(plan)
    return [modes.of(run.domains[name].mode).judge(run, model, name, statuses, play_hosts, allowed_broken_pairs,
                                                   logs, pending, (probes or {}).get(name))
            for name in domains]


@registered
def judged(run, reports):
    """The plan with the verdicts of one proof: those of the run so far (earlier waves too) for the
    summary, and what the run says of them."""
    names = [report["domain"] for report in reports]
    run.verdicts = reports
    run.run_verdicts = [report for report in run.run_verdicts or [] if report["domain"] not in names] + reports
    failed = [report["message"] for report in reports if not report["ok"]]
    run.proven = not failed
    run.outcome = "\n".join(failed or [report["message"] for report in reports])
    return run


def explain(reports, model, play_hosts):
    """The trays whose daemon log says why their domain failed."""
    return [tray for report in reports if not report.get("per_job")
            for tray in trays_to_explain(report, model, list(play_hosts))]
