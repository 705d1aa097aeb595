# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# Copyright: rackscale.imex maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parse ``nvidia-imex-ctl`` output (``-N`` text, ``-N -j`` JSON, ``-q``); _assess judges it.

Everything here is pure: strings in, plain dicts out.  The modules run the commands.

Parsed form shared by :func:`parse_text` and :func:`parse_json` (input of ``_assess.assess``)::

    {'source': 'text' | 'json',
     'domain_state': 'UP' | 'DEGRADED' | 'DOWN' | <any word the daemon printed>,
     'timestamp': str | None,
     'nodes': {index: {'index', 'address', 'status', 'version', 'hostname', 'local'}},
     'cells': {(from_index, to_index): state}}

``state`` is the vendor letter for text (``C``, ``N``, ``!V!`` ...) and the vendor word for JSON
(``CONNECTED``, ``INVALID`` ...); :func:`cell_letter` maps both to letters.
"""
from __future__ import annotations

import json
import re

from ansible_collections.rackscale.imex.plugins.module_utils._text import ParseError

DOMAIN_UP = 'UP'
DOMAIN_DEGRADED = 'DEGRADED'
READY = 'READY'
CONNECTED = 'C'
MISSING = 'missing'

# Daemon states printed by ``-q`` and in node lines (DCGM's list, reference section 3.2).
DAEMON_STATE_MEANINGS = {
    'INITIALIZING': 'the daemon is still initializing',
    'STARTING_AUTH_SERVER': 'the daemon is starting its authentication server',
    'WAITING_FOR_PEERS': 'the daemon is waiting for its peers',
    'WAITING_FOR_RECOVERY': ('the daemon waits for nodes that imported memory before an unclean shutdown '
                             'to reconnect (IMEX_WAIT_FOR_QUORUM=RECOVERY)'),
    'INIT_GPU': 'the daemon is initializing the GPUs',
    'READY': 'ready',
    'SHUTTING_DOWN': 'the daemon is shutting down',
    'UNAVAILABLE': 'its command port could not be reached or its daemon is down',
}

# Meanings follow the vendor legend printed above the matrix.
CELL_MEANINGS = {
    'C': 'connected',
    'N': 'never connected',
    'R': 'recovering: connection lost, cleanup not yet triggered',
    'D': 'disconnected: connection lost, cleanup triggered',
    'A': 'authenticating: mutual GSSAPI authentication in progress',
    'I': 'invalid: the node was not reachable, no connection status available',
    '!V!': 'version mismatch, communication disabled',
    '!M!': 'node map mismatch, communication disabled: nodes_config.cfg differs between the nodes',
    MISSING: 'no connection entry in the ctl output',
}

# Only CONNECTED and INVALID have been seen in real JSON; the other words are guesses derived
# from the legend (reference: UNKNOWN), so unknown words are kept verbatim rather than rejected.
_WORD_TO_LETTER = {
    'CONNECTED': 'C',
    'INVALID': 'I',
    'NEVER_CONNECTED': 'N',
    'RECOVERING': 'R',
    'DISCONNECTED': 'D',
    'AUTHENTICATING': 'A',
    'VERSION_MISMATCH': '!V!',
    'NODE_MAP_MISMATCH': '!M!',
    'MAP_MISMATCH': '!M!',
    # NCCL's troubleshooting text writes the mismatch cells without the exclamation marks.
    'V': '!V!',
    'M': '!M!',
}


class CtlParseError(ParseError):
    """nvidia-imex-ctl printed something this parser cannot read; ``raw`` holds the full text."""


def cell_letter(state):
    """Map a connection state (text letter or JSON word) to the legend letter.

    Unknown words are returned unchanged so that callers can still show them.
    """
    if state is None:
        return MISSING
    text = str(state).strip()
    if text in CELL_MEANINGS:
        return text
    word = re.sub(r'[\s-]+', '_', text.upper())
    return _WORD_TO_LETTER.get(word, text)


def cell_meaning(state):
    letter = cell_letter(state)
    return CELL_MEANINGS.get(letter, 'unknown connection state')


def is_connected(state):
    return cell_letter(state) == CONNECTED


# --------------------------------------------------------------------------------------------
# -q
# --------------------------------------------------------------------------------------------

_QUERY_WORD = re.compile(r'^[A-Z][A-Z0-9_]*$')


def parse_query(stdout):
    """Return the daemon state word printed by ``nvidia-imex-ctl -q``.

    Raises CtlParseError for anything that is not one upper-case word (e.g. the
    ``Query Status returned error code: 14`` printed when the daemon is down).
    """
    text = (stdout or '').strip()
    if not text:
        raise CtlParseError('nvidia-imex-ctl -q printed nothing', stdout)
    # Words beyond DCGM's list are accepted: the vocabulary is not documented by NVIDIA and a
    # newer daemon may add states; they are simply "not READY" for the health verdict.
    if '\n' in text or not _QUERY_WORD.match(text):
        raise CtlParseError('nvidia-imex-ctl -q did not print a daemon state: %s' % _first_lines(text), stdout)
    return text


# --------------------------------------------------------------------------------------------
# -N text
# --------------------------------------------------------------------------------------------

# Node lines: '-' separates fields; with -H the local node is marked '* address *'.
_NODE_LINE = re.compile(
    r'^\s*Node\s*#\s*(?P<index>\d+)\s+(?P<marker>[-*])\s*(?P<address>[^\s*]+)\s*(?P<local>\*)?'
    r'(?:\s*-(?P<rest>(?:\s.*)?))?$'
)
_FIELD_SEPARATOR = re.compile(r'\s+-(?=\s|$)')
_NAMED_FIELD = re.compile(r'^(?P<name>[A-Za-z][A-Za-z ]*?)\s*:\s*(?P<value>.*)$')
_MATRIX_HEADER = re.compile(r'^\s*Nodes\s+From\s*\\\s*To(?P<columns>(?:\s.*)?)$')
_MATRIX_ROW = re.compile(r'^\s*(?P<index>\d+)(?P<cells>(?:\s.*)?)$')
# '!V!' may touch a neighbour in narrow (3-wide) columns, so cells are matched, not split.
_CELL_TOKEN = re.compile(r'![^\s!]*!|[^\s!]+')
_DOMAIN_STATE = re.compile(r'^\s*Domain\s+State\s*:\s*(?P<state>\S*)')
_TIMESTAMP = re.compile(r'^\s*\d{1,2}/\d{1,2}/\d{4}\s+\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\s*$')
_LEGEND_LINE = re.compile(r'^\s*(?:Connectivity\s+Table\s+Legend\s*:|!?[A-Z]!?\s+-\s+\S)')
_NODES_TITLE = re.compile(r'^\s*Nodes\s*:\s*$')


def parse_node_line(line):
    """Parse one ``Node #i - address - STATUS - Version: v - Hostname: h`` line, or return None."""
    match = _NODE_LINE.match(line.rstrip())
    if not match:
        return None
    address = match.group('address')
    local = match.group('marker') == '*' or match.group('local') is not None
    rest = (match.group('rest') or '').strip()
    fields = [field.strip() for field in _FIELD_SEPARATOR.split(rest)] if rest else []
    status = ''
    version = None
    hostname = None
    for position, field in enumerate(fields):
        named = _NAMED_FIELD.match(field)
        if named and named.group('name').lower() in ('version', 'hostname'):
            value = named.group('value').strip() or None
            if named.group('name').lower() == 'version':
                version = value
            else:
                hostname = value
        elif position == 0:
            status = field
    return {
        'index': int(match.group('index')),
        'address': address,
        'status': status,
        'version': version,
        'hostname': hostname,
        'local': local,
    }


def parse_text(stdout):
    """Parse the formatted ``nvidia-imex-ctl -N [-H]`` output (570.00 to 580.x layouts)."""
    text = stdout or ''
    nodes = {}
    cells = {}
    columns = None
    domain_state = None
    timestamp = None
    unrecognised = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        line = line.expandtabs().rstrip()
        if not line.strip():
            continue
        node = parse_node_line(line)
        if node is not None:
            if node['index'] in nodes:
                raise CtlParseError('node #%d is listed twice (line %d)' % (node['index'], line_number), stdout)
            nodes[node['index']] = node
            continue
        header = _MATRIX_HEADER.match(line)
        if header:
            tokens = header.group('columns').split()
            if not all(token.isdigit() for token in tokens):
                raise CtlParseError('matrix header on line %d has non-numeric columns: %s' % (line_number, line.strip()), stdout)
            # The header names the node index of each column; never assume columns are 0..n-1.
            columns = [int(token) for token in tokens]
            continue
        state = _DOMAIN_STATE.match(line)
        if state:
            # Only UP/DEGRADED/DOWN are documented; another word is kept and is simply "not UP".
            domain_state = state.group('state').upper()
            continue
        if columns is not None and domain_state is None:
            row = _MATRIX_ROW.match(line)
            if row:
                row_index = int(row.group('index'))
                tokens = _CELL_TOKEN.findall(row.group('cells'))
                if len(tokens) != len(columns):
                    raise CtlParseError(
                        'matrix row for node %d (line %d) has %d cells but the header lists %d columns'
                        % (row_index, line_number, len(tokens), len(columns)), stdout)
                for column_index, token in zip(columns, tokens):
                    cells[(row_index, column_index)] = token
                continue
        if _TIMESTAMP.match(line):
            timestamp = line.strip()
            continue
        if _LEGEND_LINE.match(line) or _NODES_TITLE.match(line):
            continue
        unrecognised.append(line.strip())

    if not nodes and domain_state is None:
        raise CtlParseError('output does not look like nvidia-imex-ctl -N: no node lines and no '
                            '"Domain State:" line (%s)' % _first_lines('\n'.join(unrecognised) or text), stdout)
    if domain_state is None:
        raise CtlParseError('no "Domain State:" line (output truncated?)', stdout)
    if not domain_state:
        raise CtlParseError('"Domain State:" line carries no state', stdout)
    if not nodes:
        raise CtlParseError('no "Node #" lines before "Domain State: %s"' % domain_state, stdout)
    if columns is None:
        raise CtlParseError('no connectivity matrix ("Nodes From\\To" header)', stdout)
    return {
        'source': 'text',
        'domain_state': domain_state,
        'timestamp': timestamp,
        'nodes': nodes,
        'cells': cells,
    }


# --------------------------------------------------------------------------------------------
# -N -j
# --------------------------------------------------------------------------------------------

def _load_json_document(stdout):
    text = (stdout or '').strip()
    if not text:
        raise CtlParseError('nvidia-imex-ctl printed nothing', stdout)
    try:
        return json.loads(text)
    except ValueError as first_error:
        # Tolerate log lines or warnings around the document: try the outermost braces.
        start, end = text.find('{'), text.rfind('}')
        if 0 <= start < end:
            try:
                return json.loads(text[start:end + 1])
            except ValueError:
                pass
        raise CtlParseError('output is not valid JSON (%s)' % first_error, stdout)


def _index(key, what, stdout):
    try:
        return int(str(key).strip())
    except ValueError:
        raise CtlParseError('%s key %r is not a node index' % (what, key), stdout)


def _text_or_none(value):
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def parse_json(stdout):
    """Parse ``nvidia-imex-ctl -N -j``: sparse, unordered node keys are expected."""
    document = _load_json_document(stdout)
    if not isinstance(document, dict):
        raise CtlParseError('JSON output is not an object', stdout)
    if 'nodes' not in document or not isinstance(document['nodes'], dict):
        raise CtlParseError('JSON output has no "nodes" object', stdout)
    # The domain state is the top-level "status" (DCGM finds it as the last "status" key in the
    # text, which is the same value once the document is parsed).
    domain_state = document.get('status')
    if not isinstance(domain_state, str) or not domain_state.strip():
        raise CtlParseError('JSON output has no top-level "status" (domain state)', stdout)

    nodes = {}
    cells = {}
    peer_hosts = {}
    for key, entry in document['nodes'].items():
        index = _index(key, 'nodes', stdout)
        if not isinstance(entry, dict):
            raise CtlParseError('node %s is not an object' % key, stdout)
        nodes[index] = {
            'index': index,
            'address': _text_or_none(entry.get('host')),
            'status': str(entry.get('status') or '').strip(),
            'version': _text_or_none(entry.get('version')),
            'hostname': _text_or_none(entry.get('hostName', entry.get('hostname'))),
            'local': False,
        }
        connections = entry.get('connections') or {}
        if not isinstance(connections, dict):
            raise CtlParseError('connections of node %s are not an object' % key, stdout)
        for peer_key, connection in connections.items():
            peer = _index(peer_key, 'connections of node %s' % key, stdout)
            if isinstance(connection, dict):
                state = connection.get('status')
                peer_host = _text_or_none(connection.get('host'))
                if peer_host:
                    peer_hosts.setdefault(peer, peer_host)
            else:
                state = connection
            cells[(index, peer)] = str(state).strip() if state is not None else MISSING

    # A sparse document may mention a peer only inside connections: keep it, flagged unlisted,
    # with the address the connection names, so it still shows up in nodes and broken pairs.
    for peer, host in peer_hosts.items():
        if peer not in nodes:
            nodes[peer] = {'index': peer, 'address': host, 'status': None, 'version': None,
                           'hostname': None, 'local': False, 'unlisted': True}
    return {
        'source': 'json',
        'domain_state': domain_state.strip().upper(),
        'timestamp': _text_or_none(document.get('timestamp')),
        'nodes': nodes,
        'cells': cells,
    }


def parse_domain_output(text):
    """The -N output in ``text`` as JSON (-j), else as the formatted table, else None."""
    if not (text or '').strip():
        return None
    for parse in (parse_json, parse_text):
        try:
            return parse(text)
        except CtlParseError:
            continue
    return None


def _first_lines(text, limit=3, width=200):
    lines = [line.strip() for line in (text or '').strip().splitlines() if line.strip()]
    shown = ' | '.join(lines[:limit])
    if len(lines) > limit:
        shown += ' | ...'
    return shown[:width]


_IMEX_VERSION = re.compile(r'IMEX version is:\s*(\S+)')


def parse_imex_version(stdout):
    """The release ``nvidia-imex --version`` prints (``IMEX version is: 570.148.08``), or None."""
    match = _IMEX_VERSION.search(stdout or '')
    return match.group(1) if match else None
