# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Soak callback: one JSON line per task start and per task result, written as it happens (a run
killed with SIGKILL leaves every line before the kill) to $SOAK_EVENTS_FILE."""
from __future__ import annotations

DOCUMENTATION = """
name: soak_events
type: aggregate
short_description: Task starts and results as JSON lines (soak only)
description: Appends to the file named by the SOAK_EVENTS_FILE environment variable.
requirements: [enable in callbacks_enabled]
"""

import json
import os
import time

LOCK_KEYS = ("holder", "since", "took_over", "waited")

from ansible.plugins.callback import CallbackBase


def _owner(result):
    """The lock owner of an imex_lock result: the module returns it; its invocation is not kept."""
    owner = result.get("owner")
    if isinstance(owner, str) and owner:
        return owner
    return ((result.get("invocation") or {}).get("module_args") or {}).get("owner")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "soak_events"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        path = os.environ.get("SOAK_EVENTS_FILE")
        self.handle = open(path, "a", encoding="utf-8", buffering=1) if path else None

    @staticmethod
    def _name(task):
        # "rackscale.imex.imex : Take the lock ..." -> the task's own name
        return task.get_name().split(" : ", 1)[-1]

    def _write(self, record):
        if self.handle is not None:
            record["time"] = round(time.time(), 3)
            self.handle.write(json.dumps(record, default=str) + "\n")

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._write({"type": "task_start", "task": self._name(task)})

    def v2_playbook_on_handler_task_start(self, task):
        self._write({"type": "task_start", "task": self._name(task)})

    def _result(self, kind, result):
        res = result._result if isinstance(result._result, dict) else {}
        items = res.get("results") if isinstance(res.get("results"), list) else None
        record = {"type": kind, "task": self._name(result._task), "host": result._host.get_name(),
                  "action": result._task.action, "changed": bool(res.get("changed")),
                  "msg": str(res.get("msg", ""))[:4000]}
        if items is not None:
            record["items"] = [{"item": item.get("item") if isinstance(item, dict) else None,
                                "changed": bool(item.get("changed")) if isinstance(item, dict) else False,
                                "failed": bool(item.get("failed")) if isinstance(item, dict) else False,
                                "skipped": bool(item.get("skipped")) if isinstance(item, dict) else False,
                                "unreachable": bool(item.get("unreachable")) if isinstance(item, dict) else False,
                                "msg": str(item.get("msg", ""))[:2000] if isinstance(item, dict) else "",
                                "delegated": ((item.get("_ansible_delegated_vars") or {}).get("ansible_delegated_host")
                                              if isinstance(item, dict) else None),
                                "owner": _owner(item) if isinstance(item, dict) else None,
                                # The lock module's view of the lock it found: when it judged it, and whether it
                                # took over a stale one (the soak judges a takeover at that moment).
                                **({key: item.get(key) for key in LOCK_KEYS if key in item} if isinstance(item, dict) else {}),
                                "taken_at": ((item.get("lock") or {}).get("since")
                                             if isinstance(item, dict) and isinstance(item.get("lock"), dict) else None)}
                               for item in items]
        owner = _owner(res)
        if owner:
            record["owner"] = owner
        self._write(record)

    def v2_runner_on_ok(self, result):
        self._result("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result("ignored" if ignore_errors else "failed", result)

    def v2_runner_on_unreachable(self, result):
        self._result("unreachable", result)

    def v2_playbook_on_stats(self, stats):
        self._write({"type": "end"})
