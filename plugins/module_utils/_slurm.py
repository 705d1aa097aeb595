# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What Slurm's scontrol prints, read into plain data: its version, its configuration, its nodes,
its block topology, and Slurm host lists.

Shipped to any host a module runs scontrol on (a Slurm controller, a tray), so it keeps to the
standard library and Python >= 3.9. Every parser takes the text as scontrol prints it (C locale)
and is unit-tested against the output of a real slurmctld.
"""
from __future__ import annotations

import fnmatch
import re

from ansible_collections.rackscale.imex.plugins.module_utils._text import ParseError

# `scontrol --version`: "slurm 24.11.5" (SchedMD builds), "slurm-wlm 24.11.5" (Debian, Ubuntu);
# pre-releases carry a suffix ("slurm 25.05.0-0rc1").
_VERSION = re.compile(r'^slurm(?:-wlm)?\s+(\d+)\.(\d+)\.(\d+)(\S*)\s*$')
# `scontrol show config`: "Key = Value" lines, the key padded with blanks; a value may be empty. A key
# slurm.conf may repeat is printed once per value with its index: "Prolog[0] = ...", "Prolog[1] = ...".
_CONFIG_LINE = re.compile(r'^([A-Za-z][A-Za-z0-9_]*(?:\[\d+\])?)\s*=\s?(.*)$')
_INDEXED_KEY = re.compile(r'^([A-Za-z][A-Za-z0-9_]*)\[(\d+)\]$')
# A section title after the main section, for example "MPI Plugins Configuration:".
_SECTION = re.compile(r'^(\S.*):\s*$')
# What scontrol prints for a value that is not set.
NULL = '(null)'
# A `scontrol show topology` record of topology/block (24.05 and later print the same keys):
# "BlockName=rack1 BlockIndex=0 Nodes=... BlockSize=18", "AggregatedBlock=rack[1-2] BlockIndex=2 ...".
_FIELD = re.compile(r'(?:^|\s)([A-Za-z]+)=(\S*)')
BLOCK_KEYS = ('BlockName', 'AggregatedBlock')
# Slurm host list: "tray[01-04,07],gpu-a1"; a bracket holds numbers and ranges.
_BRACKET = re.compile(r'\[([^\[\]]*)\]')
_RANGE = re.compile(r'^(\d+)(?:-(\d+))?$')
# A host list expression that would expand to more names than this is refused, not expanded.
MAX_EXPANDED = 65536


def parse_version(text):
    """{'version': (24, 11, 5), 'text': '24.11.5'} from `scontrol --version`; ParseError otherwise."""
    for line in (text or '').splitlines():
        match = _VERSION.match(line.strip())
        if match:
            numbers = tuple(int(part) for part in match.groups()[:3])
            # Slurm writes the minor release with two digits (25.05): kept as printed.
            return {'version': numbers, 'text': line.strip().split()[-1]}
    raise ParseError('scontrol --version printed no Slurm version ("slurm 24.11.5"): %r' % (text or '')[:200], text)


def release(text):
    """(major, minor, micro) of a release as scontrol prints it in SLURM_VERSION ("25.11.0", "26.05.0-0rc1");
    None when the text is not one."""
    match = re.match(r'^(\d+)\.(\d+)(?:\.(\d+))?', str(text or '').strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def parse_show_config_sections(text):
    """{section: {key: value}} of `scontrol show config`; the main section is ''.

    Values are the text as printed, except C((null)), which is None. A key seen twice in a section
    keeps its first value. Lines that are not "Key = Value" (the "Configuration data as of" header,
    "Slurmctld(primary) at host is UP") are skipped.
    """
    sections = {'': {}}
    current = sections['']
    for raw in (text or '').splitlines():
        line = raw.rstrip()
        if not line.strip() or line.startswith('Configuration data as of'):
            continue
        match = _CONFIG_LINE.match(line)
        if match:
            value = match.group(2).strip()
            current.setdefault(match.group(1), None if value == NULL else value)
            continue
        section = _SECTION.match(line)
        if section:
            current = sections.setdefault(section.group(1), {})
    return sections


def parse_show_config(text):
    """{key: value} of the main section of `scontrol show config` (see parse_show_config_sections).

    ParseError when no line of that shape is found (an error message, a truncated answer)."""
    config = parse_show_config_sections(text)['']
    if not config:
        raise ParseError('scontrol show config printed no "Key = Value" line: %r' % (text or '')[:200], text)
    return config


def config_flags(value):
    """A comma-separated configuration value as a list: 'Alloc,Contain' -> ['Alloc', 'Contain']; None -> []."""
    if value is None:
        return []
    return [part.strip() for part in str(value).split(',') if part.strip()]


def config_values(config, key):
    """Every value of a key that slurm.conf may repeat (Prolog, Epilog), in slurm.conf's order.

    scontrol prints them as "Prolog[0]", "Prolog[1]" (24.11); a plain "Prolog" line (older releases)
    counts too. Each printed value is also split at commas, as a comma-separated list of programs.
    """
    indexed = []
    for name, value in config.items():
        match = _INDEXED_KEY.match(name)
        if match and match.group(1) == key:
            indexed.append((int(match.group(2)), value))
    values = ([config[key]] if config.get(key) is not None else []) + [value for _index, value in sorted(indexed)]
    return [part for value in values if value is not None for part in config_flags(value)]


# The IMEX channel plugin of Slurm and its channel pool (SwitchParameters imex_channel_count=N).
SWITCH_NVIDIA_IMEX = 'switch/nvidia_imex'
DEFAULT_IMEX_CHANNEL_COUNT = 2048


def switch_channel_count(switch_parameters):
    """imex_channel_count of SwitchParameters ("imex_channel_count=1024,imex_dev_major=505"), else
    the plugin's default (2048); None when the value is not a whole number."""
    for part in config_flags(switch_parameters):
        name, _sep, value = part.partition('=')
        if name.strip() == 'imex_channel_count':
            value = value.strip()
            return int(value) if value.isdigit() else None
    return DEFAULT_IMEX_CHANNEL_COUNT


# PrologEpilogTimeout, PrologTimeout and EpilogTimeout: seconds, or INFINITE16 (65534) when unset; an
# unlimited value may also be printed as a word.
_UNLIMITED_TIMEOUT = 65534
_UNLIMITED_WORDS = ('INFINITE', 'UNLIMITED', 'NONE')


def timeout_seconds(value):
    """Seconds of a Slurm timeout as scontrol prints it ("300", "300 sec"); None when unlimited or unset."""
    if value is None:
        return None
    words = str(value).split()
    if not words or words[0].upper() in _UNLIMITED_WORDS or not words[0].isdigit():
        return None
    seconds = int(words[0])
    return None if seconds == 0 or seconds >= _UNLIMITED_TIMEOUT else seconds


def script_timeouts(config):
    """{'prolog_timeout': s, 'epilog_timeout': s}: how long slurmd lets a prolog and an epilog run.

    PrologTimeout and EpilogTimeout where the release prints them, else PrologEpilogTimeout; None: unlimited.
    """
    shared = config.get('PrologEpilogTimeout')
    return {
        'prolog_timeout': timeout_seconds(config.get('PrologTimeout', shared)),
        'epilog_timeout': timeout_seconds(config.get('EpilogTimeout', shared)),
    }


def channel_plugin_config(config):
    """What the IMEX role checks of Slurm's configuration, from parse_show_config's result."""
    found = {
        'switch_type': config.get('SwitchType'),
        'switch_parameters': config.get('SwitchParameters'),
        'imex_channel_count': switch_channel_count(config.get('SwitchParameters')),
        'prolog_flags': config_flags(config.get('PrologFlags')),
        'prolog': config_values(config, 'Prolog'),
        'epilog': config_values(config, 'Epilog'),
        'version': config.get('SLURM_VERSION'),
    }
    found.update(script_timeouts(config))
    return found


def glob_covers(pattern, path):
    """Whether slurmd, expanding the glob ``pattern`` of a Prolog= or Epilog= entry, runs ``path``.

    As glob(3) matches: component by component, so "*" never crosses a "/".
    """
    pattern_parts = [part for part in str(pattern).split('/') if part]
    path_parts = [part for part in str(path).split('/') if part]
    if not str(pattern).startswith('/') or len(pattern_parts) != len(path_parts):
        return False
    return all(fnmatch.fnmatchcase(name, part) for part, name in zip(pattern_parts, path_parts))


def _split_top_level(text):
    """Split a host list at the commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for position, character in enumerate(text):
        if character == '[':
            depth += 1
        elif character == ']':
            depth -= 1
            if depth < 0:
                raise ParseError('host list %r closes a bracket it did not open' % text, text)
        elif character == ',' and depth == 0:
            parts.append(text[start:position])
            start = position + 1
    if depth:
        raise ParseError('host list %r leaves a bracket open' % text, text)
    parts.append(text[start:])
    return [part for part in parts if part]


def _bracket_values(inside, whole):
    values = []
    for item in inside.split(','):
        match = _RANGE.match(item.strip())
        if not match:
            raise ParseError('host list %r: %r is not a number or a range' % (whole, item), whole)
        first, last = match.group(1), match.group(2) or match.group(1)
        if int(last) < int(first):
            raise ParseError('host list %r: range %r runs backwards' % (whole, item), whole)
        if int(last) - int(first) >= MAX_EXPANDED:
            raise ParseError('host list %r: range %r is too large' % (whole, item), whole)
        # Slurm keeps the zero padding of the range's first number ("01-10" -> 01 .. 10).
        width = len(first) if first.startswith('0') else 0
        values.extend(str(number).zfill(width) for number in range(int(first), int(last) + 1))
    return values


def _expand_one(name, whole):
    match = _BRACKET.search(name)
    if not match:
        return [name]
    head, tail = name[:match.start()], name[match.end():]
    expanded = []
    for value in _bracket_values(match.group(1), whole):
        expanded.extend(_expand_one(head + value + tail, whole))
        if len(expanded) > MAX_EXPANDED:
            raise ParseError('host list %r expands to more than %d names' % (whole, MAX_EXPANDED), whole)
    return expanded


def expand_hostlist(text):
    """Every name of a Slurm host list, in its order: 'tray[01-03],gpu' -> tray01, tray02, tray03, gpu.

    As `scontrol show hostnames` expands it (zero padding kept, several brackets in one name each
    expanded), without asking Slurm. ParseError on unbalanced brackets or ranges that are not numbers.
    """
    text = (text or '').strip()
    if not text or text == NULL:
        return []
    names = []
    for part in _split_top_level(text):
        names.extend(_expand_one(part, text))
    return names


def parse_show_topology(text):
    """The records of `scontrol show topology` under topology/block, in the order printed.

    Each: {'name', 'aggregated' (bool), 'index' (int), 'nodes_text' (as printed), 'nodes' (expanded),
    'size' (int or None), 'members' (the block names an aggregated block joins; [name] for a block)}.
    Lines of other plugins (SwitchName=... of topology/tree) and blank lines are skipped, so a
    cluster without topology/block reads as no record.
    """
    records = []
    for line in (text or '').splitlines():
        fields = dict(_FIELD.findall(line))
        key = next((key for key in BLOCK_KEYS if key in fields), None)
        if key is None:
            continue
        name = fields[key]
        aggregated = key == 'AggregatedBlock'
        try:
            index = int(fields.get('BlockIndex', ''))
        except ValueError:
            raise ParseError('scontrol show topology: %r has no BlockIndex' % line[:200], text)
        size = fields.get('BlockSize')
        nodes_text = fields.get('Nodes', '')
        records.append({
            'name': name,
            'aggregated': aggregated,
            'index': index,
            'nodes_text': nodes_text,
            'nodes': expand_hostlist(nodes_text),
            'size': int(size) if size and size.isdigit() else None,
            'members': expand_hostlist(name) if aggregated else [name],
        })
    return records


def parse_node_names(text):
    """The NodeName of every line of `scontrol show nodes --oneliner`, in the order printed."""
    names = []
    for line in (text or '').splitlines():
        match = re.match(r'^NodeName=(\S+)', line.strip())
        if match:
            names.append(match.group(1))
    return names
