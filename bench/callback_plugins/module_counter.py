# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark callback: count remote module executions per host, and every task result per host.

Module runs: every task result (and every loop item) of a module that ran on a tray. Not counted:
actions that run on the controller (assert, debug, set_fact, include_*, meta, ...) and tasks
delegated to localhost. Task results: one per task and host, whatever its action or outcome
(skipped included): each costs the controller a worker process and the host's variables, which is
the controller's share of a run. Profile: the wall seconds from each task's start to the next one's
(the last to the end of the play), with its results. Writes {"per_host": {host: n}, "total": n,
"task_results": n, "tasks": [{"task", "seconds", "results"}]} to $BENCH_COUNT_FILE at the end.
"""
from __future__ import annotations

DOCUMENTATION = """
name: module_counter
type: aggregate
short_description: Count remote module executions per host (benchmark only)
description: Writes the counts to the file named by the BENCH_COUNT_FILE environment variable.
requirements: [enable in callbacks_enabled]
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase

CONTROLLER_ACTIONS = {
    "assert", "debug", "set_fact", "fail", "meta", "include_tasks", "import_tasks", "include_role",
    "import_role", "include_vars", "add_host", "group_by", "set_stats", "validate_argument_spec",
    "pause", "wait_for_connection",
    "imex_report",      # rackscale.imex's action writes the reports in the controller process
    "imex_plan",        # rackscale.imex's plan: decided in the controller process, no module
}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "module_counter"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.per_host = {}
        self.task_results = 0
        self.tasks = []          # [name, start, results]

    def _task_start(self, task, *args, **kwargs):
        self.tasks.append([task.get_name(), time.monotonic(), 0])

    v2_playbook_on_task_start = _task_start
    v2_playbook_on_handler_task_start = _task_start

    def _task_result(self, result):
        self.task_results += 1
        if self.tasks:
            self.tasks[-1][2] += 1

    def _count(self, result):
        action = result._task.action.split(".")[-1]
        if action in CONTROLLER_ACTIONS:
            return
        delegated = (result._result.get("_ansible_delegated_vars") or {}).get("ansible_delegated_host")
        if delegated in ("localhost", "127.0.0.1"):
            return
        if result._result.get("results") is not None and result._task.loop is not None:
            return  # the loop's items were counted one by one
        host = result._host.get_name()
        self.per_host[host] = self.per_host.get(host, 0) + 1

    def v2_runner_on_ok(self, result):
        self._task_result(result)
        self._count(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._task_result(result)
        self._count(result)

    v2_runner_on_skipped = _task_result
    v2_runner_on_unreachable = _task_result
    v2_runner_item_on_ok = _count
    v2_runner_item_on_failed = _count

    def v2_playbook_on_stats(self, stats):
        end = time.monotonic()
        ends = [task[1] for task in self.tasks[1:]] + [end]
        profile = [{"task": name, "seconds": round(stop - start, 3), "results": results}
                   for (name, start, results), stop in zip(self.tasks, ends)]
        path = os.environ.get("BENCH_COUNT_FILE")
        if path:
            with open(path, "w") as handle:
                json.dump({"per_host": self.per_host, "total": sum(self.per_host.values()),
                           "task_results": self.task_results, "tasks": profile}, handle)
