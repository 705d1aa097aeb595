# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# Copyright: rackscale.imex maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parse ``nvidia-imex-ctl`` output (``-N`` text, ``-N -j`` JSON, ``-q``) and judge domain health.

Everything here is pure: strings in, plain dicts out.  The modules run the commands.

Parsed form shared by :func:`parse_text` and :func:`parse_json` (input of :func:`assess`)::

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

DOMAIN_UP = 'UP'
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


class CtlParseError(Exception):
    """nvidia-imex-ctl printed something this parser cannot read; ``raw`` holds the full text."""

    def __init__(self, message, raw):
        super().__init__(message)
        self.message = message
        self.raw = raw


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


# --------------------------------------------------------------------------------------------
# assessment
# --------------------------------------------------------------------------------------------

def format_index_ranges(indices):
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    parts = []
    start = previous = None
    for index in sorted(set(indices)):
        if start is not None and index == previous + 1:
            previous = index
            continue
        if start is not None:
            parts.append(_range_text(start, previous))
        start = previous = index
    if start is not None:
        parts.append(_range_text(start, previous))
    return ', '.join(parts)


def _range_text(start, end):
    return str(start) if start == end else '%d-%d' % (start, end)


def _nodes_phrase(indices):
    return ('node %s' if len(set(indices)) == 1 else 'nodes %s') % format_index_ranges(indices)


def _node_details(node):
    details = [value for value in ((node or {}).get('address'), (node or {}).get('hostname')) if value]
    if len(details) == 2 and details[0] == details[1]:
        details = details[:1]
    return ', '.join(details)


def _short_label(index, nodes):
    """'3 (198.18.1.14)' -- an index with the tray's address (and host name when known)."""
    details = _node_details(nodes.get(index))
    return '%d (%s)' % (index, details) if details else str(index)


def node_label(index, nodes):
    return 'node ' + _short_label(index, nodes)


# Up to this many trays a group sentence names every tray; beyond, index ranges stay readable
# and the `nodes` list maps indices to addresses.
_NAMED_GROUP_LIMIT = 6


def _group_label(indices, nodes, name_all=False):
    indices = sorted(set(indices))
    if len(indices) == 1:
        return node_label(indices[0], nodes)
    if name_all or len(indices) <= _NAMED_GROUP_LIMIT:
        return 'nodes ' + ', '.join(_short_label(index, nodes) for index in indices)
    return 'nodes ' + format_index_ranges(indices)


def _states_phrase(states):
    """One state: 'R (recovering: ...)'; several: 'broken (N on 3 pairs, I on 1 pair)'."""
    counts = {}
    for state in states:
        counts[state] = counts.get(state, 0) + 1
    if len(counts) == 1:
        state = next(iter(counts))
        return '%s (%s)' % (state, cell_meaning(state))
    ordered = sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))
    return 'broken (%s)' % ', '.join('%s on %d pair%s' % (state, count, '' if count == 1 else 's')
                                     for state, count in ordered)


def _normalise_address(address):
    # Host names are case-insensitive; IP addresses are unaffected by lower().
    return (address or '').strip().lower()


def _node_list_problem(reported, expected_nodes):
    """Compare {index: address} from ctl with the expected addresses in index order."""
    expected = dict(enumerate(expected_nodes))
    reported_by_address = {}
    for index, address in reported.items():
        reported_by_address.setdefault(_normalise_address(address), []).append(index)
    expected_by_address = {}
    for index, address in expected.items():
        expected_by_address.setdefault(_normalise_address(address), []).append(index)

    missing = ['%s (expected as node %d)' % (expected[index], index)
               for index in sorted(expected)
               if _normalise_address(expected[index]) not in reported_by_address]
    unexpected = []
    order = []
    for index in sorted(reported):
        key = _normalise_address(reported[index])
        if key not in expected_by_address:
            unexpected.append('%s (node %d)' % (reported[index] or '<no address>', index))
        elif index not in expected_by_address[key]:
            order.append('%s is node %d, expected node %s'
                         % (reported[index], index, ' or '.join(str(i) for i in expected_by_address[key])))
    if not (missing or unexpected or order):
        return None
    parts = []
    if missing:
        parts.append('missing ' + ', '.join(missing))
    if unexpected:
        parts.append('unexpected ' + ', '.join(unexpected))
    if order:
        parts.append('order: ' + '; '.join(order))
    return 'node list differs from the expected list: ' + '; '.join(parts)


def _status_problems(indices, nodes):
    """One sentence per daemon state other than READY, naming every tray in that state."""
    by_status = {}
    for index in indices:
        node = nodes.get(index)
        if node is None or node.get('unlisted'):
            status = None
        else:
            status = node.get('status') or ''
        if status != READY:
            by_status.setdefault(status, []).append(index)
    problems = []
    for status, members in sorted(by_status.items(), key=lambda item: min(item[1])):
        label = _group_label(members, nodes, name_all=True)
        plural = len(members) > 1
        if status is None:
            problems.append('%s %s no entry of %s own in the ctl output (only peer connections mention %s)'
                            % (label, 'have' if plural else 'has', 'their' if plural else 'its',
                               'them' if plural else 'it'))
        elif not status:
            problems.append('%s %s no daemon state' % (label, 'report' if plural else 'reports'))
        else:
            meaning = DAEMON_STATE_MEANINGS.get(status, 'not READY')
            problems.append('%s %s %s (%s%s)' % (label, 'are' if plural else 'is', status,
                                                 'each: ' if plural else '', meaning))
    return problems


def _version_problem(nodes):
    # Whether IMEX compares full versions or only branches is UNKNOWN; exact strings within one
    # output are compared (text prints 570.172 where JSON prints 570.172.08, never mixed here).
    by_version = {}
    for index, node in nodes.items():
        # Unreachable nodes report no version; their state already explains them.
        if node.get('version'):
            by_version.setdefault(node['version'], []).append(index)
    if len(by_version) < 2:
        return None
    ordered = sorted(by_version.items(), key=lambda item: (-len(item[1]), min(item[1])))
    return 'versions differ: ' + ', '.join('%s on %s' % (version, _nodes_phrase(indices))
                                           for version, indices in ordered)


def _cut_off_problems(indices, nodes, broken, covered):
    """Sentences for nodes whose whole row and/or column is broken (a down or isolated tray)."""
    # With two nodes such a sentence says no more than the pair sentences, so this starts at
    # three nodes (or a lone node, whose only cell is its own).
    if len(indices) == 2:
        return []
    phrases_by_node = {}
    for index in indices:
        others = [peer for peer in indices if peer != index] or [index]
        row = [(index, peer) for peer in others]
        column = [(peer, index) for peer in others]
        row_phrase = column_phrase = None
        if all(pair in broken for pair in row):
            row_phrase = _states_phrase(broken[pair] for pair in row)
            covered.update((index, peer) for peer in indices if (index, peer) in broken)
        if len(indices) > 1 and all(pair in broken for pair in column):
            column_phrase = _states_phrase(broken[pair] for pair in column)
            covered.update((peer, index) for peer in indices if (peer, index) in broken)
        if row_phrase or column_phrase:
            phrases_by_node[index] = (row_phrase, column_phrase)
    # Trays cut off the same way (e.g. 15 daemons down) share one sentence.
    groups = {}
    for index, phrases in phrases_by_node.items():
        groups.setdefault(phrases, []).append(index)
    problems = []
    for (row_phrase, column_phrase), members in sorted(groups.items(), key=lambda item: min(item[1])):
        single = len(members) == 1
        whom = 'it' if single else 'each of them'
        clauses = []
        if row_phrase:
            clauses.append('every connection from %s is %s' % (whom, row_phrase))
        if column_phrase:
            clauses.append('every connection to %s is %s' % (whom, column_phrase))
        problems.append('%s %s cut off: %s' % (_group_label(members, nodes), 'is' if single else 'are',
                                               '; '.join(clauses)))
    return problems


def _remaining_pair_problems(nodes, broken, covered):
    """Pairs not explained by a cut-off tray, grouped into blocks (e.g. a !M! split of the rack)."""
    targets_by_source = {}
    for (source, target), state in broken.items():
        if (source, target) not in covered:
            targets_by_source.setdefault((state, source), set()).add(target)
    blocks = {}
    for (state, source), targets in targets_by_source.items():
        blocks.setdefault((state, frozenset(targets)), []).append(source)
    problems = []
    for (state, targets), sources in sorted(blocks.items(), key=lambda item: (min(item[1]), min(item[0][1]))):
        if len(sources) == 1 and len(targets) == 1:
            problems.append('pair %s -> %s: %s (%s)' % (
                _short_label(sources[0], nodes), _short_label(next(iter(targets)), nodes),
                state, cell_meaning(state)))
        else:
            problems.append('%d pairs from %s to %s: %s (%s)' % (
                len(sources) * len(targets), _group_label(sources, nodes), _group_label(targets, nodes),
                state, cell_meaning(state)))
    return problems


def assess(parsed, expected_nodes=None, local_state=None, local_error=None):
    """Judge a parsed -N output.

    ``expected_nodes``: addresses in node-index order (the controller's list), compared
    order-sensitively.  ``local_state``: the ``-q`` word; ``local_error``: why ``-q`` failed.
    Returns the fixed keys of imex_status; ``healthy`` is true exactly when ``problems`` is empty,
    so an unhealthy verdict always comes with the sentences that explain it.
    """
    nodes = parsed['nodes']
    cells = parsed['cells']
    indices = sorted(set(nodes) | {index for pair in cells for index in pair})
    domain_state = parsed['domain_state']

    node_list = []
    for index in indices:
        node = nodes.get(index) or {}
        node_list.append({
            'index': index,
            'address': node.get('address'),
            'status': node.get('status') or None,
            'version': node.get('version'),
            'hostname': node.get('hostname'),
        })

    broken = {}
    for source in indices:
        for target in indices:
            state = cells.get((source, target), MISSING)
            if not is_connected(state):
                broken[(source, target)] = state
    broken_pairs = [{
        'from_index': source,
        'from_address': (nodes.get(source) or {}).get('address'),
        'to_index': target,
        'to_address': (nodes.get(target) or {}).get('address'),
        'state': state,
    } for (source, target), state in sorted(broken.items())]

    problems = []
    if domain_state != DOMAIN_UP:
        problems.append('domain state is %s, not UP' % domain_state)
    if local_error:
        problems.append('local daemon query (nvidia-imex-ctl -q) failed: %s' % local_error)
    elif local_state is not None and local_state != READY:
        problems.append('local daemon is %s, not READY (%s)'
                        % (local_state, DAEMON_STATE_MEANINGS.get(local_state, 'unknown daemon state')))
    if not indices:
        problems.append('nvidia-imex-ctl lists no nodes')
    if expected_nodes is not None:
        mismatch = _node_list_problem({entry['index']: entry['address'] for entry in node_list},
                                      list(expected_nodes))
        if mismatch:
            problems.append(mismatch)
    problems.extend(_status_problems(indices, nodes))
    version_problem = _version_problem(nodes)
    if version_problem:
        problems.append(version_problem)
    covered = set()
    problems.extend(_cut_off_problems(indices, nodes, broken, covered))
    problems.extend(_remaining_pair_problems(nodes, broken, covered))

    return {
        'domain_state': domain_state,
        'local_state': local_state,
        'nodes': node_list,
        'node_count': len(node_list),
        'broken_pairs': broken_pairs,
        'healthy': not problems,
        'problems': problems,
    }


def unhealthy_message(assessment):
    """One failure message naming every problem (never just "not UP")."""
    problems = assessment['problems'] or ['no problem recorded']
    return 'IMEX domain is not healthy (domain state %s): %s' % (
        assessment['domain_state'], '; '.join(problems))


def _first_lines(text, limit=3, width=200):
    lines = [line.strip() for line in (text or '').strip().splitlines() if line.strip()]
    shown = ' | '.join(lines[:limit])
    if len(lines) > limit:
        shown += ' | ...'
    return shown[:width]
