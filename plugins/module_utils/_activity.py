# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What runs on a tray: GPU compute processes (nvidia-smi), the Slurm node state (scontrol) and
since when a systemd unit's main process runs (systemctl show).

A domain restart makes every daemon a new instance: peers drop the memory imports of the old one,
so multi-node jobs on the domain die. These parsers let the controller see that work first, and
tell a daemon that still runs an older config than the one on disk.
"""
from __future__ import annotations

import re

from ansible_collections.rackscale.imex.plugins.module_utils._text import ParseError

COMPUTE_APPS_QUERY = ['--query-compute-apps=pid,process_name,used_memory', '--format=csv,noheader']
# Slurm states in which the node runs (or is finishing) a job.
BUSY_SLURM_STATES = ('ALLOCATED', 'MIXED', 'COMPLETING')
_STATE = re.compile(r'(?:^|\s)State=(\S+)')
# Bound of a Slurm error kept in a result: one line is the message, the rest would be noise.
SLURM_ERROR_CHARS = 300
# systemctl show properties, in the order they are asked: the main process's start, then (for a unit
# without one, such as a oneshot that exited) when the unit last became active.
START_PROPERTIES = ('ExecMainStartTimestampMonotonic', 'ActiveEnterTimestampMonotonic')


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


def _first_line(text):
    for line in (text or '').splitlines():
        if line.strip():
            return line.strip()
    return ''


def _bounded(text):
    return text if len(text) <= SLURM_ERROR_CHARS else text[:SLURM_ERROR_CHARS - 3] + '...'


def read_slurm_answer(node, rc, out, err, hung, seconds):
    """{state, error} from one `scontrol show node NODE --oneliner` run (BoundedRunner's result).

    ``state`` is the node's State= when scontrol answered with it, else None and ``error`` says why
    in one line (scontrol's own first line when it printed one, stderr first) of at most
    SLURM_ERROR_CHARS characters: "Node X not found" for a Slurm NodeName that differs from the
    name asked, "slurm_load_node error: Unable to contact slurm controller" when slurmctld is away.
    """
    if hung:
        error = 'scontrol show node %s did not finish within %d s and was stopped' % (node, seconds)
    elif rc != 0:
        error = (_first_line(err) or _first_line(out)
                 or 'scontrol show node %s exited with rc %d and printed nothing' % (node, rc))
    else:
        state = parse_slurm_state(out)
        if state is not None:
            return {'state': state, 'error': None}
        said = _first_line(out) or _first_line(err)
        error = 'scontrol show node %s answered without a State= field%s' % (node, ': ' + said if said else '')
    return {'state': None, 'error': _bounded(error)}


def parse_monotonic_usec(text):
    """The value of a systemd *TimestampMonotonic property (`systemctl show -p P --value`), in
    microseconds; None when empty, 0 (never happened) or not a number."""
    value = (text or '').strip()
    if not value.isdigit() or int(value) == 0:
        return None
    return int(value)


def monotonic_to_epoch(usec, wall_minus_monotonic):
    """Epoch seconds of a CLOCK_MONOTONIC time in microseconds, given time.time() - time.monotonic()
    read on the same host (Python's monotonic clock is CLOCK_MONOTONIC on Linux, as systemd's)."""
    return round(usec / 1e6 + wall_minus_monotonic, 6)
