# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What runs on a tray: GPU compute processes (nvidia-smi) and the Slurm node state (scontrol).

A domain restart makes every daemon a new instance: peers drop the memory imports of the old one,
so multi-node jobs on the domain die. These parsers let the controller see that work first.
"""
from __future__ import annotations

import re

from ansible_collections.rackscale.imex.plugins.module_utils._text import ParseError

COMPUTE_APPS_QUERY = ['--query-compute-apps=pid,process_name,used_memory', '--format=csv,noheader']
# Slurm states in which the node runs (or is finishing) a job.
BUSY_SLURM_STATES = ('ALLOCATED', 'MIXED', 'COMPLETING')
_STATE = re.compile(r'(?:^|\s)State=(\S+)')


def parse_compute_apps(text):
    """[{pid, name, used_memory}] from the CSV lines of nvidia-smi --query-compute-apps.

    Some driver branches print a sentence instead of nothing when no process runs; a line whose
    first field is not a process id is such a sentence and is skipped, but output with no line
    of the expected shape and no such sentence is refused rather than read as "idle".
    """
    apps = []
    for line in (text or '').splitlines():
        fields = [field.strip() for field in line.split(',')]
        if not line.strip():
            continue
        if fields[0].isdigit() and len(fields) >= 2:
            apps.append({'pid': int(fields[0]), 'name': fields[1],
                         'used_memory': fields[2] if len(fields) > 2 else None})
        elif 'no running' not in line.lower():
            raise ParseError('nvidia-smi --query-compute-apps printed a line that is not a process: %r' % line[:200],
                             text)
    return apps


def parse_slurm_state(text):
    """The State= of `scontrol show node NAME --oneliner`, for example 'ALLOCATED+DRAIN'; None when absent."""
    match = _STATE.search(text or '')
    return match.group(1) if match else None


def slurm_busy(state):
    """True when a Slurm node state means a job runs there (ALLOCATED, MIXED, COMPLETING, any flags)."""
    return bool(state) and any(part in BUSY_SLURM_STATES for part in state.upper().split('+'))
