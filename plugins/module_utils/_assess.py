# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# Copyright: rackscale.imex maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Judge an IMEX domain from the parsed ``nvidia-imex-ctl`` output (see _ctl for its form).

Pure: the parsed dict in, an assessment out, with one sentence per problem that names the trays
and pairs at fault.
"""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.module_utils import _ctl
from ansible_collections.rackscale.imex.plugins.module_utils._text import format_index_ranges


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
# How long imex_status waits for a healthy domain when told to wait and not told how long.
WAIT_TIMEOUT_S = 300


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
        return '%s (%s)' % (state, _ctl.cell_meaning(state))
    ordered = sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))
    return 'broken (%s)' % ', '.join('%s on %d pair%s' % (state, count, '' if count == 1 else 's')
                                     for state, count in ordered)


def _normalise_address(address):
    # Host names are case-insensitive; IP addresses are unaffected by lower().
    return (address or '').strip().lower()


def add_unreported(parsed, expected_nodes):
    """Add to ``parsed`` each expected node the output does not mention at all, flagged ``unreported``.

    580-series JSON leaves out nodes it could not reach, and the connections to them; that is not a
    node list difference. A node counts as unreported when neither its index nor its address appears
    in JSON output of a domain that is not UP (text output, and a domain that is UP, list every node
    of the daemon's list: there a node left out is a real difference). Idempotent; returns the
    indices added.
    """
    if parsed.get('source') != 'json' or parsed.get('domain_state') == _ctl.DOMAIN_UP:
        return []
    nodes = parsed['nodes']
    mentioned = {index for pair in parsed['cells'] for index in pair} | set(nodes)
    addresses = {_normalise_address(node.get('address')) for node in nodes.values()}
    added = []
    for index, address in enumerate(expected_nodes or []):
        if index not in mentioned and _normalise_address(address) not in addresses:
            nodes[index] = {'index': index, 'address': address, 'status': None, 'version': None,
                            'hostname': None, 'local': False, 'unreported': True}
            added.append(index)
    return added


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
        if status != _ctl.READY:
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
            meaning = _ctl.DAEMON_STATE_MEANINGS.get(status, 'not READY')
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
                state, _ctl.cell_meaning(state)))
        else:
            problems.append('%d pairs from %s to %s: %s (%s)' % (
                len(sources) * len(targets), _group_label(sources, nodes), _group_label(targets, nodes),
                state, _ctl.cell_meaning(state)))
    return problems


def assess(parsed, expected_nodes=None, local_state=None, local_error=None, absent_nodes=()):
    """Judge a parsed -N output.

    ``expected_nodes``: addresses in node-index order (the controller's list), compared
    order-sensitively.  ``local_state``: the ``-q`` word; ``local_error``: why ``-q`` failed.
    ``absent_nodes``: addresses of listed nodes known to be away (a tray out of service): their
    daemon states and every pair from or to them are not judged, and the domain may be DEGRADED
    for them alone; they are reported in ``absent``.
    Returns the fixed keys of imex_status; ``healthy`` is true exactly when ``problems`` is empty,
    so an unhealthy verdict always comes with the sentences that explain it.
    """
    if expected_nodes is not None:
        add_unreported(parsed, expected_nodes)
    nodes = parsed['nodes']
    cells = parsed['cells']
    away = {index for index, node in nodes.items() if node.get('address') in set(absent_nodes or ())}
    unreported = sorted(index for index, node in nodes.items() if node.get('unreported') and index not in away)
    # Pairs and daemon states are judged among the nodes the output reports; the others get one sentence.
    indices = sorted((set(nodes) | {index for pair in cells for index in pair}) - set(unreported) - away)
    domain_state = parsed['domain_state']

    node_list = []
    for index in sorted(set(indices + unreported) | away):
        node = nodes.get(index) or {}
        node_list.append({
            'index': index,
            'address': node.get('address'),
            'status': node.get('status') or None,
            'version': node.get('version'),
            'hostname': node.get('hostname'),
            'reported': index not in unreported,
        })

    broken = {}
    for source in indices:
        for target in indices:
            state = cells.get((source, target), _ctl.MISSING)
            if not _ctl.is_connected(state):
                broken[(source, target)] = state
    broken_pairs = [{
        'from_index': source,
        'from_address': (nodes.get(source) or {}).get('address'),
        'to_index': target,
        'to_address': (nodes.get(target) or {}).get('address'),
        'state': state,
    } for (source, target), state in sorted(broken.items())]

    problems = []
    # A node away makes a domain DEGRADED, and only that is tolerated for it.
    if domain_state != _ctl.DOMAIN_UP and not (away and domain_state == _ctl.DOMAIN_DEGRADED):
        problems.append('domain state is %s, not UP' % domain_state)
    if local_error:
        problems.append('local daemon query (nvidia-imex-ctl -q) failed: %s' % local_error)
    elif local_state is not None and local_state != _ctl.READY:
        problems.append('local daemon is %s, not READY (%s)'
                        % (local_state, _ctl.DAEMON_STATE_MEANINGS.get(local_state, 'unknown daemon state')))
    if not indices:
        problems.append('nvidia-imex-ctl lists no nodes')
    if unreported:
        problems.append('%s %s not reported by nvidia-imex-ctl (unreachable?)'
                        % (_group_label(unreported, nodes, name_all=True), 'are' if len(unreported) > 1 else 'is'))
    if expected_nodes is not None:
        mismatch = _node_list_problem({entry['index']: entry['address'] for entry in node_list},
                                      list(expected_nodes))
        if mismatch:
            problems.append(mismatch)
    problems.extend(_status_problems(indices, nodes))
    version_problem = _version_problem(dict((index, node) for index, node in nodes.items() if index not in away))
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
        'absent': [{'index': index, 'address': (nodes.get(index) or {}).get('address')} for index in sorted(away)],
        'healthy': not problems,
        'problems': problems,
    }


def waited_message(reason, attempts, elapsed, unhealthy):
    """What a wait that ran out says: how long it waited, then the reason (a problem list or a failure)."""
    if unhealthy:
        return 'not healthy after %d attempt(s) in %.0f s. %s' % (attempts, elapsed, reason)
    return 'still failing after %d attempt(s) in %.0f s: %s' % (attempts, elapsed, reason)


def unhealthy_message(assessment):
    """One failure message naming every problem (never just "not UP")."""
    problems = assessment['problems'] or ['no problem recorded']
    return 'IMEX domain is not healthy (domain state %s): %s' % (
        assessment['domain_state'], '; '.join(problems))
