# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""The stage table: the one declaration of the plan's stages and of where a run can stop.

The imex_plan action dispatches each task of the role (``stage: <name>``) to STAGES and reads the registers
the stage names; plugin_utils/_run_record.py takes the order of RUN_STAGES and the stage of each register from
here; tests/unit/test_layout.py checks the role's tasks, the action and _run_record against both.

RUN_STAGES are the public ``stopped_at`` values (reports, artifacts, gauges), in the order a run reaches them,
each with the registers of the role's tasks at that point (a tray that ssh dropped leaves only these behind).

STAGES name each stage's register: the stages of the run's plan share PLAN, which carries the plan from one
to the next (the tasks and handlers read the plan of the last stage through it), and each records itself
there as the stage the run reached (Run.reached); a refusal registers where it stopped the run (stopped_at).
The records of a stopped run take the stage from these, and from the failed task only among the stages
a run can stop at after the one it reached (Stage.after).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import (
    arguments,
    channels,
    discover,
    guard,
    preflight,
    read,
    reread,
    restart,
    stopped,
    verdicts,
)

# The role's registers, spelled here once.
PLAN = "__imex_plan"
TRAY_OPTIONS = "__imex_tray_options"
TRAY_READ = "__imex_tray_info"
TRAY_DISCOVERED = "__imex_discovered"
LOCKS = "__imex_locks"
LOCK_RELEASE = "__imex_lock_release"
LOCK_LEFT = "__imex_lock_left"
NODES_RESULT = "__imex_nodes_result"
CONFIG_RESULT = "__imex_config_result"
TLS_RESULT = "__imex_tls_result"
WAVE_STATUS = "__imex_wave_status"
ACTIVITY = "__imex_activity"
DAEMON_START = "__imex_daemon_start"
VALIDATE_STATUS = "__imex_validate_status"
SLURM_PROBES = "__imex_slurm_probe"
DAEMON_LOGS = "__imex_daemon_logs"
DISCOVERY = "__imex_discovery"
CHANNELS_PLAN = "__imex_channels_plan"
STOPPED = "__imex_stopped"


@dataclasses.dataclass(frozen=True)
class RunStage:
    """A point where a run can stop, as its records name it."""

    name: str
    registers: tuple = ()


RUN_STAGES = (
    RunStage("arguments"),
    RunStage("preflight"),
    RunStage("read", (TRAY_READ,)),
    RunStage("gate"),
    RunStage("lock", (LOCKS, LOCK_RELEASE, LOCK_LEFT)),
    RunStage("channels"),
    RunStage("write", (NODES_RESULT, CONFIG_RESULT, TLS_RESULT)),
    RunStage("restart", (WAVE_STATUS, ACTIVITY, DAEMON_START)),
    RunStage("proof", (VALIDATE_STATUS, SLURM_PROBES, DAEMON_LOGS)),
    RunStage("run"),
)
RUN_STAGE_NAMES = tuple(stage.name for stage in RUN_STAGES)
# Every register a run leaves, with the point of the run its task belongs to.
REGISTER_STAGES = {register: stage.name for stage in RUN_STAGES for register in stage.registers}


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of the plan: the imex_plan task's ``stage``, the function that decides, the registers the
    action hands it ({what: register}, besides the plan of the stage before), where a run it refuses stopped
    (a RUN_STAGES name), the register of its task (None: the task registers nothing), and, for a stage of the
    run's plan, where a run can stop after it and before the next stage (RUN_STAGES names, the first where the
    failed task does not say which): the plan records the last stage it reached (Run.reached), so the records
    of a stopped run know where it was."""

    name: str
    decide: Callable
    reads: Mapping = dataclasses.field(default_factory=dict)
    stopped_at: str = "run"
    register: str = PLAN
    after: tuple = ()


STAGES = (
    Stage("arguments", arguments.arguments, {}, "arguments", register=None),
    # The read of each tray.
    Stage("preflight", preflight.preflight, {"options": TRAY_OPTIONS}, "preflight", after=("read",)),
    # The channels, then the first wave's writes; before them, where the run has work, its locks and the second
    # read of the trays of their domains.
    Stage("read", read.after_read, {"options": TRAY_OPTIONS, "read": TRAY_READ}, "gate",
          after=("channels", "write", "lock", "read")),
    # The plan made again from the second read, under the locks.
    Stage("reread", reread.after_reread, {"options": TRAY_OPTIONS, "read": TRAY_READ}, "gate",
          after=("channels", "write")),
    Stage("restart", restart.restart, {"node list": NODES_RESULT, "config": CONFIG_RESULT, "TLS material": TLS_RESULT,
                                       "status": WAVE_STATUS}, "restart", after=("restart",)),
    # Refuses or lets the restart go on: its task registers nothing (the run stays where the restart stage put it).
    Stage("guard", guard.guard, {"activity": ACTIVITY}, "restart", register=None),
    # The end of the proof; then the operator's post-restart tasks, and the next wave's locks and writes.
    Stage("verdicts", verdicts.verdicts, {"status": WAVE_STATUS, "proof": VALIDATE_STATUS, "logs": DAEMON_LOGS,
                                          "probes": SLURM_PROBES}, "proof", after=("proof", "restart", "lock", "write")),
    Stage("discover", discover.discover, {"discovered": TRAY_DISCOVERED}, "run", register=DISCOVERY),
    Stage("channels", channels.channels, {}, "channels", register=CHANNELS_PLAN),
    Stage("stopped", stopped.stopped, {register: register for register in REGISTER_STAGES}, "run",
          register=STOPPED),
)
BY_NAME = {stage.name: stage for stage in STAGES}
# Where a run that a stage refused stopped.
STOPPED_AT = {stage.name: stage.stopped_at for stage in STAGES}
# The stages of the run's plan (their task registers PLAN), each with where a run can stop after it.
AFTER = {stage.name: stage.after for stage in STAGES if stage.register == PLAN}
# The writes of a wave, as the restart stage receives them: {what: register}.
WAVE_WRITES = {what: register for what, register in BY_NAME["restart"].reads.items() if what != "status"}
