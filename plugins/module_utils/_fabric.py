# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# Copyright: rackscale.imex maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parse the per-GPU ``Fabric`` blocks of ``nvidia-smi -q`` and judge one tray.

A tray can join an IMEX domain only when every GPU finished fabric registration
(State Completed, Status Success) and all GPUs report the same non-zero ClusterUUID
(NVLink domain) and CliqueId (NVLink partition).  Pure functions: text in, dicts out.
"""
from __future__ import annotations

import re

from ansible_collections.rackscale.imex.plugins.module_utils._text import ParseError, format_index_ranges

STATE_COMPLETED = 'Completed'
STATUS_SUCCESS = 'Success'
HEALTHY = 'Healthy'

_GPU_HEADER = re.compile(r'^\s*GPU\s+(?P<bus_id>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)\s*$')
_NOT_AVAILABLE = ('', 'N/A', 'NA', '[N/A]', 'Unknown', '[Unknown Error]')


class SmiParseError(ParseError):
    """nvidia-smi printed something this parser cannot read; ``raw`` holds the full text."""


def _indent(line):
    return len(line) - len(line.lstrip(' '))


def parse_section(lines, base_indent):
    """Parse indented ``Key : value`` lines into a dict; a line without a colon opens a sub-dict."""
    root = {}
    stack = [(base_indent, root)]
    for line in lines:
        if not line.strip():
            continue
        indent = _indent(line)
        while len(stack) > 1 and indent <= stack[-1][0]:
            stack.pop()
        text = line.strip()
        if ':' in text:
            key, value = text.split(':', 1)
            stack[-1][1][key.strip()] = value.strip()
        else:
            section = {}
            stack[-1][1][text] = section
            stack.append((indent, section))
    return root


def _fabric_from_lines(lines):
    for position, line in enumerate(lines):
        # The section title is the bare word; "GPU Fabric GUID : ..." and similar are plain keys.
        if line.strip() != 'Fabric':
            continue
        base = _indent(line)
        body = []
        for following in lines[position + 1:]:
            if following.strip() and _indent(following) <= base:
                break
            body.append(following)
        return parse_section(body, base)
    return None


def parse_smi_query(stdout):
    """Split ``nvidia-smi -q`` into GPUs: [{'index', 'bus_id', 'fabric': dict or None}]."""
    lines = [line.expandtabs() for line in (stdout or '').splitlines()]
    starts = [(position, match.group('bus_id')) for position, match in
              ((position, _GPU_HEADER.match(line)) for position, line in enumerate(lines)) if match]
    if not starts:
        raise SmiParseError('nvidia-smi -q printed no "GPU <bus id>" sections', stdout)
    gpus = []
    for number, (position, bus_id) in enumerate(starts):
        end = starts[number + 1][0] if number + 1 < len(starts) else len(lines)
        gpus.append({
            'index': number,
            'bus_id': bus_id,
            'fabric': _fabric_from_lines(lines[position + 1:end]),
        })
    return gpus


_DRIVER_VERSION = re.compile(r'^Driver Version\s*:\s*(\S+)\s*$', re.M)


def parse_driver_version(stdout):
    """The ``Driver Version`` line of ``nvidia-smi -q`` (top level), or None when it is absent."""
    match = _DRIVER_VERSION.search(stdout or '')
    return match.group(1) if match else None


def _key(name):
    return re.sub(r'[\s_]+', '', name).lower()


def _lookup(section, *names):
    """Field lookup tolerant of spelling drift between drivers (CliqueId / Clique Id ...)."""
    if not isinstance(section, dict):
        return None
    wanted = {_key(name) for name in names}
    for key, value in section.items():
        if _key(key) in wanted:
            return value
    return None


def _value(value):
    if value is None or isinstance(value, dict):
        return None
    value = str(value).strip()
    return None if value in _NOT_AVAILABLE else value


def is_zero_uuid(value):
    return isinstance(value, str) and re.sub(r'[-0\s]', '', value) == ''


def is_zero_clique(value):
    return value == 0 or (isinstance(value, str) and value.isdigit() and int(value) == 0)


def _clique(value):
    # CliqueId is an unsigned integer in NVML; anything else is kept verbatim rather than dropped.
    return int(value) if value is not None and value.isdigit() else value


def gpu_fabric(gpu):
    """Flatten one parsed GPU into the returned shape: {index, bus_id, state, status, clique_id,
    cluster_uuid, health}; N/A values become None."""
    fabric = gpu.get('fabric')
    health = _lookup(fabric, 'Health')
    summary = _lookup(health, 'Summary') if isinstance(health, dict) else health
    return {
        'index': gpu['index'],
        'bus_id': gpu['bus_id'],
        'state': _value(_lookup(fabric, 'State')),
        'status': _value(_lookup(fabric, 'Status')),
        'clique_id': _clique(_value(_lookup(fabric, 'CliqueId', 'Clique Id'))),
        'cluster_uuid': _value(_lookup(fabric, 'ClusterUUID', 'Cluster UUID')),
        'health': _value(summary),
    }


def _gpu_indices_phrase(indices):
    return ('GPU %s' if len(indices) == 1 else 'GPUs %s') % format_index_ranges(indices)


def _gpus_label(indices, bus_ids):
    if len(indices) == 1:
        return 'GPU %d (%s)' % (indices[0], bus_ids[indices[0]])
    return 'GPUs %s' % format_index_ranges(indices)


def _gpu_problem(gpu, has_fabric):
    """Why this GPU cannot join an IMEX domain (text without the GPU name), or None."""
    if not has_fabric:
        return ('no Fabric section in nvidia-smi -q (driver without fabric reporting, '
                'or not an NVLink multi-node GPU)')
    state = gpu['state']
    if state is None or state == 'Not Supported':
        return ('fabric state is %s (not an NVLink multi-node GPU, or the driver does not report '
                'fabric information)' % (state or 'N/A'))
    if state != STATE_COMPLETED:
        return ('fabric state is %s, not Completed (the GPU has not finished registering with the '
                'NVLink fabric; wait, or check the NVLink fabric manager / NMX)' % state)
    # Status, CliqueId and ClusterUUID only mean something once registration completed, so an
    # unfinished GPU gets the state sentence alone.
    parts = []
    if gpu['status'] != STATUS_SUCCESS:
        parts.append('fabric status is %s, not Success (the NVLink fabric could not attach the GPU; '
                     'this is fixed on the fabric/NMX side, not by IMEX)' % (gpu['status'] or 'N/A'))
    if gpu['clique_id'] is None or is_zero_clique(gpu['clique_id']):
        parts.append('CliqueId is %s (no NVLink partition assigned)'
                     % ('N/A' if gpu['clique_id'] is None else gpu['clique_id']))
    if gpu['cluster_uuid'] is None or is_zero_uuid(gpu['cluster_uuid']):
        parts.append('ClusterUUID is %s (the GPU is in no NVLink domain)' % (gpu['cluster_uuid'] or 'N/A'))
    return '; '.join(parts) or None


def _disagreement(gpus, field, title, advice):
    by_value = {}
    for gpu in gpus:
        value = gpu[field]
        if value is None or (is_zero_clique(value) if field == 'clique_id' else is_zero_uuid(value)):
            continue
        by_value.setdefault(value, []).append(gpu['index'])
    if len(by_value) < 2:
        return None
    ordered = sorted(by_value.items(), key=lambda item: (-len(item[1]), min(item[1])))
    return 'GPUs disagree on %s: %s (%s)' % (
        title, ', '.join('%s on %s' % (value, _gpu_indices_phrase(indices)) for value, indices in ordered),
        advice)


def _health_warning(gpu, fabric):
    if gpu['health'] in (None, HEALTHY):
        return None
    health = _lookup(fabric, 'Health')
    details = []
    if isinstance(health, dict):
        details = ['%s: %s' % (key, value) for key, value in health.items()
                   if _key(key) != 'summary' and _value(value) is not None]
    return 'fabric health is %s%s' % (gpu['health'], ' (%s)' % ', '.join(details) if details else '')


def _single_value(gpus, field):
    # Values of a GPU that has not completed registration are leftovers, not an identity.
    if any(gpu['state'] != STATE_COMPLETED for gpu in gpus):
        return None
    values = {gpu[field] for gpu in gpus}
    if len(values) != 1:
        return None
    value = values.pop()
    if value is None or (is_zero_clique(value) if field == 'clique_id' else is_zero_uuid(value)):
        return None
    return value


def summarise_tray(parsed_gpus):
    """Judge one tray.

    Returns {gpus, cluster_uuid, clique_id, fabric_ok, problems, warnings}; cluster_uuid and
    clique_id are set only when every GPU completed registration and reports the same valid value.  ``warnings`` holds
    health remarks that do not stop IMEX (e.g. Health Summary Unhealthy with state Completed).
    """
    gpus = [gpu_fabric(gpu) for gpu in parsed_gpus]
    bus_ids = {gpu['index']: gpu['bus_id'] for gpu in gpus}
    problems = []
    warnings = []
    if not gpus:
        problems.append('nvidia-smi lists no GPUs')

    grouped = {}
    grouped_warnings = {}
    for gpu, parsed in zip(gpus, parsed_gpus):
        problem = _gpu_problem(gpu, parsed.get('fabric') is not None)
        if problem:
            grouped.setdefault(problem, []).append(gpu['index'])
        warning = _health_warning(gpu, parsed.get('fabric'))
        if warning:
            grouped_warnings.setdefault(warning, []).append(gpu['index'])
    # GPUs failing the same way share one sentence (a tray usually fails as a whole).
    for problem, indices in sorted(grouped.items(), key=lambda item: min(item[1])):
        problems.append('%s: %s' % (_gpus_label(indices, bus_ids), problem))
    for warning, indices in sorted(grouped_warnings.items(), key=lambda item: min(item[1])):
        warnings.append('%s: %s' % (_gpus_label(indices, bus_ids), warning))

    for field, title, advice in (
            ('cluster_uuid', 'ClusterUUID', 'all GPUs of a tray must be in one NVLink domain'),
            ('clique_id', 'CliqueId', 'all GPUs of a tray must be in one NVLink partition; '
                                      'after a partition change GPUs keep the old clique until reset')):
        disagreement = _disagreement(gpus, field, title, advice)
        if disagreement:
            problems.append(disagreement)

    return {
        'gpus': gpus,
        'cluster_uuid': _single_value(gpus, 'cluster_uuid'),
        'clique_id': _single_value(gpus, 'clique_id'),
        'fabric_ok': not problems,
        'problems': problems,
        'warnings': warnings,
    }
