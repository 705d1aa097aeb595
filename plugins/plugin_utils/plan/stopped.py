# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Stage stopped, the rescue of a run that stopped (before its proof, or at it): what it leaves on record. The
stage, domains, trays and reasons, the reports of the domains it did not judge, the summary and the job
artifacts (decided by plugin_utils/_run_record.py, which takes the run's stages from the stage table)."""
from __future__ import annotations


def stopped(failures, registers, domains, judged, judged_reports, check_mode, run_id, report_dir, textfile_dir,
            reached=None, lock_stale_after_s=None, now=None):
    """The record of the stopped run (see _run_record.stopped_record) with its run id, directories, summary
    (the reports of the domains it judged, then those of every domain not judged) and artifacts. reached: the
    last stage of the plan the run reached (Run.reached), None before its plan; lock_stale_after_s, now: the
    run's imex_lock_stale_after_s and the time of its locks' release, for the locks it left."""
    # _run_record reads the stage table, which names this function: imported when a run stops.
    from ansible_collections.rackscale.imex.plugins.plugin_utils import _run_record

    record = _run_record.stopped_record(failures, registers, domains, judged=judged, check_mode=check_mode,
                                        reached=reached, lock_stale_after_s=lock_stale_after_s, now=now)
    record.update(run_id=run_id, report_dir=report_dir, textfile_dir=textfile_dir,
                  summary=list(judged_reports) + record["reports"],
                  artifacts=_run_record.artifacts(record, run_id, report_dir, judged_reports))
    return record
