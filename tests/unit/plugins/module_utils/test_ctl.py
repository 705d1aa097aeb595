# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsing and assessment of nvidia-imex-ctl output, against vendor samples and derived variants.

Samples: tests/unit/samples/ctl/.  Files without a version-derived suffix note are verbatim copies of
the reference's QUOTED SAMPLE blocks (N_570.172_up_18nodes.txt, N_json_570.172.08_up_2nodes.json,
N_H_580.173.02_fixture_lines.txt, ctl_570.148.08_no_config_usage.txt); the others follow the format
rules of reference section 3.3/3.4 (column geometry checked against the verbatim sample).
"""
from __future__ import annotations

import functools
import json
import re

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils import _assess, _ctl, _text
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

RACK1 = ['198.18.1.%d' % (11 + i) for i in range(18)]
AWS_FIRST = ['172.31.48.81', '172.31.48.98', '172.31.48.221']
UNAVAILABLE_MEANING = 'its command port could not be reached or its daemon is down'
sample = functools.partial(read_sample, 'ctl')


def parse(name):
    text = sample(name)
    return _ctl.parse_json(text) if name.endswith('.json') else _ctl.parse_text(text)


# ------------------------------------------------------------------------------------------------
# text layouts
# ------------------------------------------------------------------------------------------------

def test_verbatim_570_172_sample_is_up_and_healthy():
    parsed = parse('N_570.172_up_18nodes.txt')
    assert parsed['source'] == 'text'
    assert parsed['domain_state'] == 'UP'
    assert parsed['timestamp'] == '5/12/2025 06:08:10.580'
    assert sorted(parsed['nodes']) == list(range(18))
    assert [parsed['nodes'][i]['address'] for i in range(3)] == AWS_FIRST
    assert parsed['nodes'][17]['address'] == '172.31.56.47'
    assert {node['status'] for node in parsed['nodes'].values()} == {'READY'}
    assert {node['version'] for node in parsed['nodes'].values()} == {'570.172'}
    assert len(parsed['cells']) == 18 * 18
    assert set(parsed['cells'].values()) == {'C'}

    result = _assess.assess(parsed)
    assert result['healthy'] is True
    assert result['problems'] == []
    assert result['broken_pairs'] == []
    assert result['node_count'] == 18
    assert result['nodes'][10] == {'index': 10, 'address': '172.31.54.95', 'status': 'READY',
                                   'version': '570.172', 'hostname': None, 'reported': True}


def test_runs_of_spaces_normalised_parse_the_same():
    original = _ctl.parse_text(sample('N_570.172_up_18nodes.txt'))
    squeezed = re.sub(r'[ \t]+', ' ', sample('N_570.172_up_18nodes.txt'))
    assert '  ' not in squeezed
    parsed = _ctl.parse_text(squeezed)
    assert parsed['nodes'] == original['nodes']
    assert parsed['cells'] == original['cells']
    assert parsed['domain_state'] == 'UP'


def test_missing_preamble_like_sed_1_11d():
    lines = sample('N_570.172_up_18nodes.txt').splitlines()
    assert lines[10] == '5/12/2025 06:08:10.580'
    parsed = _ctl.parse_text('\n'.join(lines[11:]) + '\n')
    assert parsed['timestamp'] is None
    assert len(parsed['nodes']) == 18
    assert _assess.assess(parsed)['healthy'] is True


def test_570_00_layout_without_version_column_and_narrow_matrix():
    text = sample('N_570.00_up_18nodes.txt')
    assert '!V!' not in text and 'Version' not in text
    assert '\n\nDomain State' not in text
    parsed = _ctl.parse_text(text)
    assert len(parsed['nodes']) == 18
    assert parsed['nodes'][0]['version'] is None
    assert parsed['nodes'][0]['status'] == 'READY'
    assert parsed['nodes'][17]['address'] == '10.114.3.37'
    # width-3 columns: "10 11 12" still map to the right nodes
    assert parsed['cells'][(17, 10)] == 'C'
    assert len(parsed['cells']) == 324
    result = _assess.assess(parsed)
    assert result['healthy'] is True
    assert result['nodes'][5]['version'] is None


def test_verbatim_dash_H_lines():
    lines = sample('N_H_580.173.02_fixture_lines.txt').splitlines()
    assert _ctl.parse_node_line(lines[0]) is None  # the shell prompt line
    first = _ctl.parse_node_line(lines[1])
    second = _ctl.parse_node_line(lines[2])
    assert first == {'index': 0, 'address': '10.66.6.8', 'status': 'READY', 'version': '580.173.02',
                     'hostname': 'theia0271', 'local': False}
    assert second == {'index': 1, 'address': '10.66.6.9', 'status': 'READY', 'version': '580.173.02',
                      'hostname': 'theia0272', 'local': True}


def test_dash_H_line_documented_by_inventory_agent():
    line = 'Node #4   * 180.100.41.232 *   - READY   - Version: 580.95.09   - Hostname: MKE030104700131'
    node = _ctl.parse_node_line(line)
    assert node['index'] == 4
    assert node['address'] == '180.100.41.232'
    assert node['local'] is True
    assert node['version'] == '580.95.09'
    assert node['hostname'] == 'MKE030104700131'


@pytest.mark.parametrize('line, expected', [
    ('Node #2   - 10.66.6.10         - UNAVAILABLE          - Version:                 - Hostname: ',
     {'status': 'UNAVAILABLE', 'version': None, 'hostname': None}),
    ('Node #5   - 198.18.1.16     - UNAVAILABLE          - Version: ',
     {'status': 'UNAVAILABLE', 'version': None, 'hostname': None}),
    ('Node #5 - 198.18.1.16 - UNAVAILABLE - Version: - Hostname:',
     {'status': 'UNAVAILABLE', 'version': None, 'hostname': None}),
    ('Node #0   - 172.31.48.81   - READY', {'status': 'READY', 'version': None, 'hostname': None}),
    ('Node #3   - rack1-tray04     - INIT_GPU             - Version: 580.95.09',
     {'status': 'INIT_GPU', 'version': '580.95.09', 'hostname': None, 'address': 'rack1-tray04'}),
    ('Node #1 - 10.0.0.2 - READY - Version: NO_GPU - Hostname: gpu-less-node-1',
     {'version': 'NO_GPU', 'hostname': 'gpu-less-node-1'}),
])
def test_node_line_variants(line, expected):
    node = _ctl.parse_node_line(line)
    for key, value in expected.items():
        assert node[key] == value


def test_dash_H_full_output_with_local_marker_and_unavailable_node():
    parsed = parse('N_H_580.173.02_3nodes_degraded.txt')
    assert parsed['nodes'][1]['local'] is True
    assert parsed['nodes'][0]['local'] is False
    assert parsed['nodes'][0]['hostname'] == 'theia0271'
    assert parsed['nodes'][2]['hostname'] is None
    result = _assess.assess(parsed)
    assert result['healthy'] is False
    assert result['domain_state'] == 'DEGRADED'
    assert [(p['from_index'], p['to_index'], p['state']) for p in result['broken_pairs']] == [
        (0, 2, 'N'), (1, 2, 'N'), (2, 0, 'I'), (2, 1, 'I'), (2, 2, 'I')]
    assert result['nodes'][1]['hostname'] == 'theia0272'
    assert 'node 2 (10.66.6.10) is UNAVAILABLE (%s)' % UNAVAILABLE_MEANING in result['problems']
    assert any(p.startswith('node 2 (10.66.6.10) is cut off: every connection from it is I') and
               'every connection to it is N (never connected)' in p for p in result['problems'])
    assert 'pair 0 (10.66.6.8, theia0271)' not in ' '.join(result['problems'])


def test_degraded_3_of_18_lists_every_cell_but_summarises_dead_trays():
    result = _assess.assess(parse('N_580.95.09_degraded_3of18.txt'))
    assert result['domain_state'] == 'DEGRADED'
    assert result['healthy'] is False
    # rows 3..17 are all I (15 x 18), live rows 0..2 see N towards the 15 dead nodes (3 x 15)
    assert len(result['broken_pairs']) == 15 * 18 + 3 * 15
    states = {(p['from_index'], p['to_index']): p['state'] for p in result['broken_pairs']}
    assert states[(0, 3)] == 'N' and states[(2, 17)] == 'N' and states[(9, 9)] == 'I'
    assert (0, 1) not in states
    assert [p['status'] for p in result['nodes'][:4]] == ['READY', 'READY', 'READY', 'UNAVAILABLE']
    assert result['nodes'][3]['version'] is None
    problems = result['problems']
    assert not [p for p in problems if p.startswith('pair ')]
    assert len(problems) == 3
    unavailable = problems[1]
    assert unavailable.startswith('nodes 3 (198.18.1.14), 4 (198.18.1.15)')
    assert all('%d (%s)' % (i, RACK1[i]) in unavailable for i in range(3, 18))
    assert 'are UNAVAILABLE' in unavailable
    assert problems[2].startswith('nodes 3-17 are cut off: every connection from each of them is I')
    assert 'I on 14 pairs, N on 3 pairs' in problems[2]


def test_node_5_unavailable_row_I_column_R():
    result = _assess.assess(parse('N_580.95.09_node5_unavailable.txt'))
    assert len(result['broken_pairs']) == 18 + 17
    assert result['problems'] == [
        'domain state is DEGRADED, not UP',
        'node 5 (198.18.1.16) is UNAVAILABLE (%s)' % UNAVAILABLE_MEANING,
        'node 5 (198.18.1.16) is cut off: every connection from it is I (invalid: the node was not reachable, '
        'no connection status available); every connection to it is R (recovering: connection lost, cleanup '
        'not yet triggered)',
    ]
    column = [p for p in result['broken_pairs'] if p['to_index'] == 5 and p['from_index'] != 5]
    assert {p['state'] for p in column} == {'R'}
    assert column[0]['from_address'] == '198.18.1.11' and column[0]['to_address'] == '198.18.1.16'


def test_version_mismatch():
    result = _assess.assess(parse('N_580_version_mismatch_node17.txt'))
    assert 'versions differ: 580.95.09 on nodes 0-16, 580.65.06 on node 17' in result['problems']
    assert {p['state'] for p in result['broken_pairs']} == {'!V!'}
    assert len(result['broken_pairs']) == 34
    assert any(p.startswith('node 17 (198.18.1.28) is cut off') and '!V! (version mismatch' in p
               for p in result['problems'])


def test_map_mismatch_is_summarised_as_blocks():
    result = _assess.assess(parse('N_580.95.09_map_mismatch_16_17.txt'))
    assert len(result['broken_pairs']) == 2 * 16 * 2
    assert {p['state'] for p in result['broken_pairs']} == {'!M!'}
    problems = result['problems']
    assert len(problems) == 3
    assert problems[1].startswith('32 pairs from nodes 0-15 to nodes 16 (198.18.1.27), 17 (198.18.1.28): !M! '
                                  '(node map mismatch')
    assert problems[2].startswith('32 pairs from nodes 16 (198.18.1.27), 17 (198.18.1.28) to nodes 0-15: !M!')


def test_single_recovering_pair_is_named_with_addresses():
    result = _assess.assess(parse('N_580.95.09_pair_3_7_recovering.txt'))
    assert result['problems'] == [
        'domain state is DEGRADED, not UP',
        'pair 3 (198.18.1.14) -> 7 (198.18.1.18): R (recovering: connection lost, cleanup not yet triggered)',
        'pair 7 (198.18.1.18) -> 3 (198.18.1.14): R (recovering: connection lost, cleanup not yet triggered)',
    ]
    assert result['broken_pairs'] == [
        {'from_index': 3, 'from_address': '198.18.1.14', 'to_index': 7, 'to_address': '198.18.1.18', 'state': 'R'},
        {'from_index': 7, 'from_address': '198.18.1.18', 'to_index': 3, 'to_address': '198.18.1.14', 'state': 'R'},
    ]


MINI = """Nodes:
Node #0   - 10.0.0.1        - READY                - Version: 580.95.09
Node #1   - 10.0.0.2        - READY                - Version: 580.95.09
Node #3   - 10.0.0.4        - READY                - Version: 580.95.09

 Nodes From\\To  0   1   3
       0        C   C   {a}
       1        C   C   C
       3        {b}   C   C

Domain State: {state}
"""


def test_matrix_columns_map_to_header_indices_not_positions():
    parsed = _ctl.parse_text(MINI.format(a='D', b='A', state='DEGRADED'))
    assert parsed['cells'][(0, 3)] == 'D'
    assert parsed['cells'][(3, 0)] == 'A'
    assert (0, 2) not in parsed['cells']
    result = _assess.assess(parsed)
    assert [n['index'] for n in result['nodes']] == [0, 1, 3]
    assert 'pair 0 (10.0.0.1) -> 3 (10.0.0.4): D (disconnected: connection lost, cleanup triggered)' \
        in result['problems']
    assert any(p.startswith('pair 3 (10.0.0.4) -> 0 (10.0.0.1): A (authenticating') for p in result['problems'])


def test_adjacent_mismatch_cells_in_narrow_columns_are_split():
    text = ("Node #0 - 10.0.0.1 - READY\nNode #1 - 10.0.0.2 - READY\n"
            " Nodes From\\To  0  1\n       0        C  !V!\n       1        !V!C\nDomain State: DEGRADED\n")
    parsed = _ctl.parse_text(text)
    assert parsed['cells'] == {(0, 0): 'C', (0, 1): '!V!', (1, 0): '!V!', (1, 1): 'C'}


def test_unknown_cell_letter_is_broken_and_explained():
    result = _assess.assess(_ctl.parse_text(MINI.format(a='X', b='C', state='DEGRADED')))
    assert 'pair 0 (10.0.0.1) -> 3 (10.0.0.4): X (unknown connection state)' in result['problems']


def test_up_but_broken_cells_still_unhealthy():
    # The domain line alone is never trusted: every cell is checked.
    result = _assess.assess(_ctl.parse_text(MINI.format(a='N', b='C', state='UP')))
    assert result['domain_state'] == 'UP'
    assert result['healthy'] is False
    assert result['problems'] == ['pair 0 (10.0.0.1) -> 3 (10.0.0.4): N (never connected)']


# Text and JSON output alike: what cannot be parsed is named, and the raw output kept.
@pytest.mark.parametrize('parse_output, text, message', [
    (_ctl.parse_text, '', 'no node lines'),
    (_ctl.parse_text, 'garbage\nmore garbage\n', 'does not look like'),
    (_ctl.parse_text, '\n'.join(sample('N_570.172_up_18nodes.txt').splitlines()[:30]), 'no "Domain State:" line'),
    (_ctl.parse_text, MINI.format(a='C', b='C', state='UP').replace('1        C   C   C', '1        C   C'),
     'has 2 cells'),
    (_ctl.parse_text, MINI.format(a='C', b='C', state='UP').replace(' Nodes From\\To  0   1   3\n', ''),
     'no connectivity matrix'),
    (_ctl.parse_text, 'Domain State: UP\n', 'no "Node #" lines'),
    (_ctl.parse_text, MINI.format(a='C', b='C', state='UP').replace('Node #3', 'Node #1'), 'listed twice'),
    (_ctl.parse_text, sample('ctl_570.148.08_no_config_usage.txt'), 'does not look like'),
    (_ctl.parse_json, '', 'printed nothing'),
    (_ctl.parse_json, 'Query Status returned error code: 14\n', 'not valid JSON'),
    (_ctl.parse_json, '[1, 2]', 'not an object'),
    (_ctl.parse_json, '{"status": "UP"}', 'no "nodes" object'),
    (_ctl.parse_json, '{"nodes": {}}', 'no top-level "status"'),
    (_ctl.parse_json, '{"nodes": {"x": {}}, "status": "UP"}', 'not a node index'),
    (_ctl.parse_json, '{"nodes": {"0": "READY"}, "status": "UP"}', 'not an object'),
    (_ctl.parse_json, '{"nodes": {"0": {"connections": {"one": {}}}}, "status": "UP"}', 'not a node index'),
])
def test_unparseable_output_raises_with_raw(parse_output, text, message):
    with pytest.raises(_ctl.CtlParseError) as caught:
        parse_output(text)
    assert message in caught.value.message
    assert caught.value.raw == text


# ------------------------------------------------------------------------------------------------
# JSON
# ------------------------------------------------------------------------------------------------

def test_verbatim_json_two_nodes():
    parsed = parse('N_json_570.172.08_up_2nodes.json')
    assert parsed['source'] == 'json'
    assert parsed['domain_state'] == 'UP'
    assert parsed['timestamp'] == '8/8/2025 17:38:02.641'
    result = _assess.assess(parsed, expected_nodes=['192.168.103.159', '192.168.107.187'], local_state='READY')
    assert result['healthy'] is True
    assert result['nodes'] == [
        {'index': 0, 'address': '192.168.103.159', 'status': 'READY', 'version': '570.172.08', 'hostname': None, 'reported': True},
        {'index': 1, 'address': '192.168.107.187', 'status': 'READY', 'version': '570.172.08', 'hostname': None, 'reported': True},
    ]


def test_json_expected_nodes_order_matters():
    result = _assess.assess(parse('N_json_570.172.08_up_2nodes.json'),
                            expected_nodes=['192.168.107.187', '192.168.103.159'])
    assert result['healthy'] is False
    assert result['problems'] == [
        'node list differs from the expected list: order: 192.168.103.159 is node 0, expected node 1; '
        '192.168.107.187 is node 1, expected node 0']


def test_json_expected_nodes_missing_and_unexpected():
    result = _assess.assess(parse('N_json_570.172.08_up_2nodes.json'),
                            expected_nodes=['192.168.103.159', '192.168.107.200', '192.168.107.201'])
    assert ('node list differs from the expected list: missing 192.168.107.200 (expected as node 1), '
            '192.168.107.201 (expected as node 2); unexpected 192.168.107.187 (node 1)') in result['problems']


def test_expected_host_names_compare_case_insensitively():
    parsed = _ctl.parse_text(MINI.format(a='C', b='C', state='UP').replace('10.0.0.1', 'Tray-A'))
    result = _assess.assess(parsed, expected_nodes=['tray-a', '10.0.0.2', '10.0.0.4'])
    # index 2 is absent from the output: 10.0.0.4 sits at index 3 where 2 was expected
    assert result['problems'] == ['node list differs from the expected list: order: 10.0.0.4 is node 3, '
                                  'expected node 2']


def test_json_unconfigured_daemon_is_down():
    result = _assess.assess(parse('N_json_unconfigured_down.json'))
    assert result['domain_state'] == 'DOWN'
    assert result['nodes'] == [{'index': 0, 'address': '0.0.0.0', 'status': 'UNAVAILABLE', 'version': None,
                                'hostname': None, 'reported': True}]
    assert result['broken_pairs'] == [{'from_index': 0, 'from_address': '0.0.0.0', 'to_index': 0,
                                       'to_address': '0.0.0.0', 'state': 'INVALID'}]
    assert result['problems'][0] == 'domain state is DOWN, not UP'
    assert 'node 0 (0.0.0.0) is UNAVAILABLE (%s)' % UNAVAILABLE_MEANING in result['problems']


def test_json_sparse_unordered_tab_indented_with_hostnames():
    text = sample('N_json_580.95.09_degraded_sparse_tabs.json')
    assert '\t' in text
    parsed = _ctl.parse_json(text)
    result = _assess.assess(parsed)
    assert [n['index'] for n in result['nodes']] == [0, 3, 5, 7, 12]
    by_index = {n['index']: n for n in result['nodes']}
    assert by_index[0]['hostname'] == 'rack1-tray01'
    assert by_index[3]['hostname'] is None
    # node 5 is only named by node 7's connections: kept, with the address the connection gives
    assert by_index[5] == {'index': 5, 'address': '198.18.1.16', 'status': None, 'version': None,
                           'hostname': None, 'reported': True}
    states = {(p['from_index'], p['to_index']): p['state'] for p in result['broken_pairs']}
    assert states[(7, 5)] == 'INVALID'
    assert states[(0, 5)] == 'missing'
    assert states[(0, 12)] == 'RECOVERING'
    assert states[(12, 12)] == 'missing'
    assert (0, 7) not in states
    assert len(result['broken_pairs']) == 25 - 9
    problems = result['problems']
    assert 'node 5 (198.18.1.16) has no entry of its own in the ctl output (only peer connections mention it)' \
        in problems
    assert 'node 12 (198.18.1.23) is UNAVAILABLE (%s)' % UNAVAILABLE_MEANING in problems


RACK1 = ['198.18.1.%d' % (11 + index) for index in range(18)]


def test_json_sparse_nodes_the_output_leaves_out_are_not_reported_not_a_node_list_difference():
    parsed = _ctl.parse_json(sample('N_json_580.95.09_degraded_sparse_tabs.json'))
    result = _assess.assess(parsed, expected_nodes=RACK1)
    left_out = [1, 2, 4, 6, 8, 9, 10, 11, 13, 14, 15, 16, 17]
    assert [n['index'] for n in result['nodes']] == list(range(18))
    assert [n['index'] for n in result['nodes'] if not n['reported']] == left_out
    assert all(n['address'] == RACK1[n['index']] and n['status'] is None for n in result['nodes'] if not n['reported'])
    problems = result['problems']
    assert not [p for p in problems if 'node list differs' in p]
    assert ('nodes %s are not reported by nvidia-imex-ctl (unreachable?)'
            % ', '.join('%d (%s)' % (index, RACK1[index]) for index in left_out)) in problems
    # The pairs among the reported nodes are judged as before; none names a node left out.
    assert not [p for p in result['broken_pairs'] if p['from_index'] in left_out or p['to_index'] in left_out]
    assert result['healthy'] is False


def test_one_unreported_node_is_named_alone_and_a_real_difference_is_still_one():
    parsed = _ctl.parse_json(sample('N_json_580.95.09_degraded_sparse_tabs.json'))
    expected = list(RACK1)
    expected[3] = '198.18.1.99'   # node 3 is reported with another address: a real difference
    problems = _assess.assess(parsed, expected_nodes=expected)['problems']
    assert any(p.startswith('node list differs from the expected list: missing 198.18.1.99 (expected as node 3)')
               for p in problems)
    assert not [p for p in problems if 'node 3 (' in p and 'not reported' in p]


def test_add_unreported_is_idempotent_and_needs_the_expected_list():
    parsed = _ctl.parse_json(sample('N_json_580.95.09_degraded_sparse_tabs.json'))
    assert _assess.add_unreported(parsed, RACK1[:3]) == [1, 2]
    assert _assess.add_unreported(parsed, RACK1[:3]) == []
    assert _assess.add_unreported(_ctl.parse_json(sample('N_json_580.95.09_degraded_sparse_tabs.json')), []) == []
    # A domain that is UP, and text output, list every node of the daemon's list.
    assert _assess.add_unreported(_ctl.parse_json(sample('N_json_570.172.08_up_2nodes.json')), RACK1) == []
    assert _assess.add_unreported(_ctl.parse_text(sample('N_580.95.09_degraded_3of18.txt')), RACK1 + ['x']) == []


def test_json_compact_18_nodes_with_hostnames():
    text = sample('N_json_580.95.09_up_18nodes_compact.json')
    assert text.count('\n') == 1
    result = _assess.assess(_ctl.parse_json(text), expected_nodes=RACK1, local_state='READY')
    assert result['healthy'] is True
    assert result['nodes'][17]['hostname'] == 'rack1-tray18'
    assert [n['address'] for n in result['nodes']] == RACK1


def test_json_top_level_status_is_the_domain_state_wherever_it_appears():
    document = {'status': 'DEGRADED', 'nodes': {
        '1': {'status': 'READY', 'host': 'b', 'version': 'NO_GPU',
              'connections': {'0': {'host': 'a', 'status': 'CONNECTED'}, '1': {'host': 'b', 'status': 'CONNECTED'}}},
        '0': {'status': 'READY', 'host': 'a', 'version': 'NO_GPU',
              'connections': {'0': {'host': 'a', 'status': 'CONNECTED'}, '1': {'host': 'b', 'status': 'CONNECTED'}}},
    }}
    parsed = _ctl.parse_json(json.dumps(document))
    assert parsed['domain_state'] == 'DEGRADED'
    result = _assess.assess(parsed)
    assert result['problems'] == ['domain state is DEGRADED, not UP']
    assert [n['version'] for n in result['nodes']] == ['NO_GPU', 'NO_GPU']


def test_json_with_log_lines_around_it():
    text = 'warning: something\n' + sample('N_json_570.172.08_up_2nodes.json') + 'trailing noise\n'
    assert _ctl.parse_json(text)['domain_state'] == 'UP'


def test_json_unknown_connection_word_is_kept():
    document = json.loads(sample('N_json_570.172.08_up_2nodes.json'))
    document['nodes']['0']['connections']['1']['status'] = 'SOMETHING_NEW'
    result = _assess.assess(_ctl.parse_json(json.dumps(document)))
    assert result['broken_pairs'][0]['state'] == 'SOMETHING_NEW'
    assert ('pair 0 (192.168.103.159) -> 1 (192.168.107.187): SOMETHING_NEW (unknown connection state)'
            in result['problems'])


def test_json_with_no_nodes_is_a_problem_not_a_crash():
    result = _assess.assess(_ctl.parse_json('{"nodes": {}, "status": "DOWN"}'))
    assert result['healthy'] is False
    assert 'nvidia-imex-ctl lists no nodes' in result['problems']


# ------------------------------------------------------------------------------------------------
# -q, letters, local state
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('text, state', [
    (sample('q_ready.txt'), 'READY'),
    ('READY', 'READY'),
    ('  WAITING_FOR_RECOVERY\n', 'WAITING_FOR_RECOVERY'),
    ('INIT_GPU\n', 'INIT_GPU'),
    ('SOME_FUTURE_STATE\n', 'SOME_FUTURE_STATE'),
])
def test_parse_query_words(text, state):
    assert _ctl.parse_query(text) == state


@pytest.mark.parametrize('text', [
    sample('q_daemon_down_error_14.txt'), '', 'READY stopAtReady: 0\n', 'READY\nkeepGoing: 1\n', 'ready\n',
])
def test_parse_query_rejects_anything_else(text):
    with pytest.raises(_ctl.CtlParseError) as caught:
        _ctl.parse_query(text)
    assert caught.value.raw == text


@pytest.mark.parametrize('word, letter', [
    ('CONNECTED', 'C'), ('INVALID', 'I'), ('NEVER_CONNECTED', 'N'), ('recovering', 'R'),
    ('DISCONNECTED', 'D'), ('AUTHENTICATING', 'A'), ('VERSION_MISMATCH', '!V!'),
    ('NODE_MAP_MISMATCH', '!M!'), ('MAP_MISMATCH', '!M!'), ('never connected', 'N'),
    ('C', 'C'), ('!V!', '!V!'), ('!M!', '!M!'), ('V', '!V!'), ('missing', 'missing'),
    ('SOMETHING_NEW', 'SOMETHING_NEW'),
])
def test_cell_letter(word, letter):
    assert _ctl.cell_letter(word) == letter


def test_local_state_not_ready_makes_an_up_domain_unhealthy():
    parsed = parse('N_570.172_up_18nodes.txt')
    result = _assess.assess(parsed, local_state='WAITING_FOR_RECOVERY')
    assert result['local_state'] == 'WAITING_FOR_RECOVERY'
    assert result['healthy'] is False
    assert result['problems'][0].startswith('local daemon is WAITING_FOR_RECOVERY, not READY (')


def test_local_query_error_is_a_problem():
    result = _assess.assess(parse('N_570.172_up_18nodes.txt'), local_error='Query Status returned error code: 14')
    assert result['local_state'] is None
    assert result['problems'] == ['local daemon query (nvidia-imex-ctl -q) failed: Query Status returned error '
                                  'code: 14']


def test_other_daemon_states_are_named():
    text = sample('N_570.172_up_18nodes.txt').replace(
        'Node #4   - 172.31.50.39    - READY               ', 'Node #4   - 172.31.50.39    - INIT_GPU            ')
    result = _assess.assess(_ctl.parse_text(text))
    assert 'node 4 (172.31.50.39) is INIT_GPU (the daemon is initializing the GPUs)' in result['problems']


def test_unhealthy_message_lists_every_problem():
    result = _assess.assess(parse('N_580.95.09_pair_3_7_recovering.txt'))
    message = _assess.unhealthy_message(result)
    assert message.startswith('IMEX domain is not healthy (domain state DEGRADED): ')
    for problem in result['problems']:
        assert problem in message


@pytest.mark.parametrize('indices, text', [
    ([], ''), ([4], '4'), ([0, 1, 2, 5, 7, 8], '0-2, 5, 7-8'), ([3, 1, 2, 2], '1-3'),
])
def test_format_index_ranges(indices, text):
    assert _text.format_index_ranges(indices) == text


def test_imex_version_as_nvidia_imex_prints_it():
    assert _ctl.parse_imex_version('IMEX version is: 570.148.08\n') == '570.148.08'
    assert _ctl.parse_imex_version('Usage: nvidia-imex [-c <config file path>]\n') is None
