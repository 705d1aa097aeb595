# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action: run imex_status on the tray; a wait runs in slices so that the run shows its progress.

Documented in plugins/modules/imex_status.py. A module cannot print while it runs, and a domain
can take minutes to come up: without slices the operator would stare at one silent task for up to
O(timeout) seconds. Each slice is the module's own wait, bounded to PROGRESS_EVERY_S; between
slices the state and what is still broken are printed. The last slice gets the time that is left
and the caller's O(fail_unhealthy); its message is rewritten with the totals of the whole wait.
"""
from __future__ import annotations

import math
import time

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.rackscale.imex.plugins.module_utils._assess import WAIT_TIMEOUT_S, waited_message

MODULE = "rackscale.imex.imex_status"
PROGRESS_EVERY_S = 30

display = Display()


def progress_line(host, waited, timeout, result):
    """What a slice that ended unhealthy says while the wait goes on."""
    if "problems" in result:
        state = "domain %s: %s" % (result.get("domain_state", "?"), "; ".join(result["problems"]))
    else:
        state = result.get("msg", "nvidia-imex-ctl failed")
    return "[%s] IMEX domain not healthy yet after %.0f of %d s: %s" % (host, waited, timeout, state)


def wait_settings(args):
    """(timeout, slicing) for the task's arguments; bad values go to the module, which names them."""
    try:
        if not boolean(args.get("wait", False), strict=True):
            return None, False
        timeout = int(args.get("timeout", WAIT_TIMEOUT_S))
    except (TypeError, ValueError):
        return None, False
    return timeout, timeout > PROGRESS_EVERY_S


class ActionModule(ActionBase):
    """Run imex_status, in slices when it waits longer than one progress interval."""

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        timeout, slicing = wait_settings(args)
        try:
            if not slicing:
                result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
                return result
            result.update(self._wait_in_slices(args, timeout, task_vars))
            return result
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

    def _wait_in_slices(self, args, timeout, task_vars):
        host = (task_vars or {}).get("inventory_hostname", "?")
        started = time.monotonic()
        deadline = started + timeout
        attempts = 0
        while True:
            remaining = deadline - time.monotonic()
            last = remaining <= PROGRESS_EVERY_S
            slice_args = dict(args, timeout=max(0, math.ceil(remaining)) if last else PROGRESS_EVERY_S)
            if not last:
                slice_args["fail_unhealthy"] = False
            outcome = self._execute_module(module_name=MODULE, module_args=slice_args, task_vars=task_vars)
            attempts += int(outcome.get("attempts") or 1)
            if outcome.get("healthy") or last or "attempts" not in outcome:
                # Healthy, out of time, or refused before polling (bad options): done.
                break
            display.display(progress_line(host, time.monotonic() - started, timeout, outcome))
        elapsed = round(time.monotonic() - started, 1)
        if "reason" in outcome:
            told = waited_message(outcome["reason"], attempts, elapsed, unhealthy="healthy" in outcome)
            if outcome.get("failed"):
                outcome["msg"] = told
            else:
                outcome["warnings"] = [w for w in outcome.get("warnings", []) if not w.endswith(outcome["reason"])]
                outcome["warnings"].append(told)
        outcome.update(attempts=attempts, elapsed=elapsed)
        return outcome
