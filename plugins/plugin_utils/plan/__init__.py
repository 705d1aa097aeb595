# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""The run plan of the rackscale.imex.imex role: every decision of a run, made once, on the controller.

The role's tasks carry the plan out and branch on it alone. The plan is a model (records.py: the run, its
domains, its trays, the tray read; converted to and from the register's JSON there only), built in stages
(stages.py: the table the imex_plan action dispatches from, one module each), each a pure function of the
plan so far and of what the run read since; what differs between imex_mode values is in modes.py, one class
per mode.

preflight  the tray options, the domain model, the waves, the lock trays; every option problem.
read       the read of each tray: fabric and version gate, what to write, channels, pending restarts, busy; the
           locks of the domains with something to do.
reread     the same decisions from the second read of those domains' trays, under their locks.
restart    one wave, after its writes and its status read: which domains restart (and why), start, reload.
guard      the busy guard, on what runs on the trays right before their daemons stop.
verdicts   the verdict of each domain from its proof, as its mode proves it.
arguments, discover, channels, stopped: the argument spec's check, discover.yml, the imex_channels role, and
the record of a run that stopped.

The package gives the helpers the stages share; each stage is called from its module
(``plan.restart.restart``), as the stage table does.

Nothing here touches a tray, the network or the clock: every input is an argument.
"""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.daemon import (
    PENDING_SLACK_S,
    busy_guard,
    busy_reasons,
    daemon_started,
    loaded_record,
    pending_reload,
    pending_restart,
    release_restart,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.errors import PlanError
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.locks import (
    LONG_COMMAND_TIMEOUT_S,
    command_timeout,
    lock_problems,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils._option_table import convert_option, convert_options
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.per_job import (
    SLURM_JOB_BOUNDS,
    SLURM_JOB_MAP,
    SLURM_JOB_SCRIPT,
    per_job_drift,
    per_job_option_problems,
    slurm_job_map,
    slurm_node_names,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.settings import daemon_settings, owned_settings, tls_paths
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.stages import STAGES
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import (
    daemon,
    guard,
    modes,
    preflight,
    read,
    records,
    reread,
    restart,
    verdicts,
    writes,
)

__all__ = ("LONG_COMMAND_TIMEOUT_S", "PENDING_SLACK_S", "PlanError", "SLURM_JOB_BOUNDS",
           "SLURM_JOB_MAP", "SLURM_JOB_SCRIPT", "STAGES", "busy_guard", "busy_reasons", "command_timeout", "convert_option",
           "convert_options", "daemon", "daemon_settings", "daemon_started", "guard", "loaded_record", "lock_problems",
           "modes", "owned_settings", "pending_reload", "pending_restart", "per_job_drift", "per_job_option_problems",
           "preflight", "read", "records", "release_restart", "reread", "restart", "slurm_job_map",
           "slurm_node_names", "tls_paths", "verdicts", "writes")
