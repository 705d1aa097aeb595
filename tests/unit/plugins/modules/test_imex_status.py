# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""imex_status: command lines, JSON -> text fallback, hung ctl, waiting, failure messages."""
from __future__ import annotations

import functools
from unittest import mock

import pytest

from ansible.module_utils import basic

from ansible_collections.rackscale.imex.plugins.modules import imex_status
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

CTL = '/usr/bin/nvidia-imex-ctl'
TIMEOUT = '/usr/bin/timeout'
USAGE = 'Usage: nvidia-imex-ctl [-c <nvidia-imex config.cfg path>] <-n|-N|-q> [-j][-H]\n'
ERROR_14 = 'Query Status returned error code: 14\n'
sample = functools.partial(read_sample, 'ctl')


class FakeCtl:
    """Answers run_command by the ctl flags; each entry is (rc, out, err) or a list consumed per call."""

    def __init__(self, json=None, text=None, query=(0, 'READY\n', '')):
        self.answers = {'json': json, 'text': text, 'query': query}
        self.calls = []

    def __call__(self, args, **kwargs):
        self.calls.append(list(args))
        if '-q' in args:
            key = 'query'
        elif '-j' in args:
            key = 'json'
        else:
            key = 'text'
        answer = self.answers[key]
        if isinstance(answer, list):
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
        if answer is None:
            raise AssertionError('unexpected call %r' % (args,))
        return answer

    def flags(self):
        return [call[call.index(CTL) + 1:] for call in self.calls]


class FakeClock:
    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def monotonic(self):
        # A polling loop that never sleeps would spin forever on a fake clock: stop it loudly.
        self.reads = getattr(self, 'reads', 0) + 1
        if self.reads > 1000:
            raise AssertionError('monotonic() read 1000 times: the wait loop does not advance')
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def config(tmp_path):
    path = tmp_path / 'config.cfg'
    path.write_text('IMEX_CMD_ENABLED=1\n')
    return str(path)


@pytest.fixture
def run(run_module):
    """run(args, ctl, bins=None, clock=None, check=False) -> (succeeded, result) of one imex_status run."""
    def _run(args, ctl, bins=None, clock=None, check=False):
        bins = {'nvidia-imex-ctl': CTL, 'timeout': TIMEOUT} if bins is None else bins
        clock = clock or FakeClock()

        def get_bin_path(self, name, required=False, opt_dirs=None):
            return bins.get(name)

        with mock.patch.multiple(basic.AnsibleModule, get_bin_path=get_bin_path, run_command=mock.DEFAULT) as patched, \
                mock.patch.object(imex_status.time, 'monotonic', clock.monotonic), \
                mock.patch.object(imex_status.time, 'sleep', clock.sleep):
            patched['run_command'].side_effect = ctl
            result = run_module(imex_status, args, check=check)
        return result['_exit_code'] == 0, result
    return _run


def test_healthy_json_domain(run, config):
    ctl = FakeCtl(json=(0, sample('N_json_580.95.09_up_18nodes_compact.json'), ''))
    ok, result = run({'config': config}, ctl)
    assert ok
    assert result['changed'] is False
    assert result['healthy'] is True
    assert result['domain_state'] == 'UP'
    assert result['local_state'] == 'READY'
    assert result['source'] == 'json'
    assert result['node_count'] == 18
    assert result['problems'] == [] and result['broken_pairs'] == []
    assert result['attempts'] == 1 and result['ctl_rc'] == 0 and result['_warnings'] == []
    assert 'raw' not in result
    assert ctl.calls == [
        [TIMEOUT, '-k', '5', '30', CTL, '-c', config, '-q'],
        [TIMEOUT, '-k', '5', '30', CTL, '-c', config, '-N', '-j'],
    ]


def test_check_mode_reports_the_same(run, config):
    ctl = FakeCtl(json=(0, sample('N_json_570.172.08_up_2nodes.json'), ''))
    ok, result = run({'config': config}, ctl, check=True)
    assert ok and result['healthy'] is True and result['changed'] is False
    assert len(ctl.calls) == 2


def test_text_fallback_when_json_is_not_supported(run, config):
    ctl = FakeCtl(json=(1, USAGE, ''), text=(0, sample('N_570.00_up_18nodes.txt'), ''))
    ok, result = run({'config': config, 'command_timeout': 12}, ctl)
    assert ok
    assert result['source'] == 'text'
    assert result['healthy'] is True
    assert ctl.flags() == [['-c', config, '-q'], ['-c', config, '-N', '-j'], ['-c', config, '-N']]
    assert ctl.calls[1][:4] == [TIMEOUT, '-k', '5', '12']


def test_text_printed_despite_dash_j_is_parsed_without_a_second_call(run, config):
    ctl = FakeCtl(json=(0, sample('N_570.172_up_18nodes.txt'), ''))
    ok, result = run({'config': config, 'query_local': False}, ctl)
    assert ok and result['source'] == 'text' and result['healthy'] is True
    assert result['local_state'] is None
    assert ctl.flags() == [['-c', config, '-N', '-j']]


def test_hostnames_adds_dash_H(run, config):
    ctl = FakeCtl(json=(1, USAGE, ''), text=(0, sample('N_H_580.173.02_3nodes_degraded.txt'), ''))
    ok, result = run({'config': config, 'hostnames': True, 'query_local': False}, ctl)
    assert ok
    assert ctl.flags() == [['-c', config, '-N', '-j', '-H'], ['-c', config, '-N', '-H']]
    assert result['nodes'][0]['hostname'] == 'theia0271'
    assert result['healthy'] is False


@pytest.mark.parametrize('rc', [124, 137, -9])
def test_hung_ctl_is_named_with_its_timeout(run, config, rc):
    """124: the limit was reached; 137: killed after -k; -9: killed by SIGKILL as Python reports it."""
    ctl = FakeCtl(json=(rc, '', ''), query=(0, 'READY\n', ''))
    ok, result = run({'config': config}, ctl)
    assert not ok
    assert result['msg'].startswith("%s -c %s -N -j did not answer within 30 s (command_timeout)" % (CTL, config))
    assert result['rc'] == rc
    assert 'raw' not in result
    # a hung JSON call is not retried as text: that would only double the wait
    assert ctl.flags() == [['-c', config, '-q'], ['-c', config, '-N', '-j']]


def test_hung_query_is_a_problem_not_a_crash(run, config):
    ctl = FakeCtl(json=(0, sample('N_json_570.172.08_up_2nodes.json'), ''), query=(124, '', ''))
    ok, result = run({'config': config}, ctl)
    assert ok
    assert result['healthy'] is False
    assert result['local_state'] is None
    assert 'did not answer within 30 s' in result['problems'][0]


def test_daemon_down_fails_with_the_tool_output(run, config):
    ctl = FakeCtl(json=(1, '', 'connection refused to 127.0.0.1:50005\n'),
                  text=(1, '', 'connection refused to 127.0.0.1:50005\n'), query=(1, ERROR_14, ''))
    ok, result = run({'config': config}, ctl)
    assert not ok
    assert result['msg'].startswith('%s -c %s -N failed with rc 1 (the JSON call -N -j gave rc 1)' % (CTL, config))
    assert 'stderr: connection refused to 127.0.0.1:50005' in result['msg']
    assert 'nvidia-imex service is running' in result['msg']
    assert result['stderr'] == 'connection refused to 127.0.0.1:50005\n'


def test_a_degraded_domain_read_despite_a_non_zero_exit_names_its_trays(run, config):
    # Which codes a degraded domain gives is not documented: whatever the code, the table is read.
    ctl = FakeCtl(json=(1, sample('N_json_580.95.09_degraded_sparse_tabs.json'), ''))
    ok, result = run({'config': config, 'query_local': False}, ctl)
    assert ok and result['healthy'] is False and result['source'] == 'json' and result['ctl_rc'] == 1
    assert result['domain_state'] == 'DEGRADED' and result['broken_pairs']
    assert result['problems'][-1] == ('%s -c %s -N -j exited with rc 1; its output was read all the same '
                                      '(domain state DEGRADED)' % (CTL, config))
    assert any('node' in problem and 'rc 1' not in problem for problem in result['problems'])
    assert ctl.flags() == [['-c', config, '-N', '-j']]


def test_the_text_table_of_a_non_zero_exit_is_read_and_the_code_told(run, config):
    ctl = FakeCtl(json=(1, USAGE, ''), text=(3, sample('N_580.95.09_node5_unavailable.txt'), ''))
    ok, result = run({'config': config, 'fail_unhealthy': True}, ctl)
    assert not ok and result['ctl_rc'] == 3
    assert 'node 5 (198.18.1.16) is UNAVAILABLE' in result['msg']
    assert result['msg'].endswith('%s -c %s -N exited with rc 3; its output was read all the same (domain state '
                                  'DEGRADED)' % (CTL, config))


def test_a_healthy_table_with_a_non_zero_exit_stays_healthy_with_a_warning(run, config):
    ctl = FakeCtl(json=(2, sample('N_json_580.95.09_up_18nodes_compact.json'), ''))
    ok, result = run({'config': config}, ctl)
    assert ok and result['healthy'] is True and result['problems'] == [] and result['ctl_rc'] == 2
    assert result['_warnings'] == ['%s -c %s -N -j exited with rc 2; its output was read all the same (domain '
                                   'state UP)' % (CTL, config)]
    assert 'ctl_warning' not in result


def test_unparseable_output_fails_with_raw(run, config):
    garbage = 'Segmentation fault\n'
    ctl = FakeCtl(json=(0, garbage, ''), text=(0, garbage, ''))
    ok, result = run({'config': config, 'query_local': False}, ctl)
    assert not ok
    assert result['raw'] == garbage
    assert result['msg'].startswith('cannot read the output of %s -c %s -N: ' % (CTL, config))


def test_local_query_error_14(run, config):
    ctl = FakeCtl(json=(0, sample('N_json_570.172.08_up_2nodes.json'), ''), query=(1, ERROR_14, ''))
    ok, result = run({'config': config}, ctl)
    assert ok
    assert result['healthy'] is False
    assert result['local_state'] is None
    assert result['problems'] == [
        'local daemon query (nvidia-imex-ctl -q) failed: %s -c %s -q returned rc 1: stdout: '
        'Query Status returned error code: 14' % (CTL, config)]


def test_fail_unhealthy_lists_every_problem(run, config):
    ctl = FakeCtl(json=(1, USAGE, ''), text=(0, sample('N_580.95.09_node5_unavailable.txt'), ''))
    ok, result = run({'config': config, 'fail_unhealthy': True}, ctl)
    assert not ok
    msg = result['msg']
    assert msg.startswith('IMEX domain is not healthy (domain state DEGRADED): domain state is DEGRADED, not UP; ')
    assert 'node 5 (198.18.1.16) is UNAVAILABLE (its command port could not be reached or its daemon is down)' in msg
    assert 'every connection to it is R (recovering' in msg
    # the failure still carries the report
    assert result['domain_state'] == 'DEGRADED'
    assert len(result['broken_pairs']) == 35


def test_a_node_the_output_leaves_unnamed_is_named_after_its_tray(run, config):
    ctl = FakeCtl(json=(1, USAGE, ''), text=(0, sample('N_580.95.09_node5_unavailable.txt'), ''))
    addresses = ['198.18.1.%d' % (11 + index) for index in range(18)]
    names = ['rack1-tray%02d' % (1 + index) for index in range(18)]
    names[4] = 'not-at-this-address'
    ok, result = run({'config': config, 'expected_nodes': addresses[:4] + ['198.18.9.9'] + addresses[5:],
                      'expected_names': names}, ctl)
    assert ok
    problems = '; '.join(result['problems'])
    assert 'node 5 (198.18.1.16, rack1-tray06) is UNAVAILABLE' in problems
    assert result['nodes'][5]['hostname'] == 'rack1-tray06'
    # Node 4's address is not the expected one there: the name would be a guess, so none is given.
    assert result['nodes'][4]['hostname'] is None


def test_unhealthy_without_fail_unhealthy_succeeds(run, config):
    ctl = FakeCtl(json=(1, USAGE, ''), text=(0, sample('N_580.95.09_pair_3_7_recovering.txt'), ''))
    ok, result = run({'config': config}, ctl)
    assert ok and result['healthy'] is False
    assert 'pair 3 (198.18.1.14) -> 7 (198.18.1.18): R (recovering: connection lost, cleanup not yet triggered)' \
        in result['problems']
    assert result['_warnings'] == []


def test_expected_nodes_are_compared(run, config):
    ctl = FakeCtl(json=(0, sample('N_json_570.172.08_up_2nodes.json'), ''))
    ok, result = run({'config': config, 'expected_nodes': ['192.168.103.159']}, ctl)
    assert ok and result['healthy'] is False
    assert result['problems'] == ['node list differs from the expected list: unexpected 192.168.107.187 (node 1)']


def test_wait_polls_through_ctl_failures_until_healthy(run, config):
    ctl = FakeCtl(json=[(1, '', 'connection refused\n'), (0, sample('N_580.95.09_degraded_3of18.txt'), ''),
                        (0, sample('N_json_580.95.09_up_18nodes_compact.json'), '')],
                  text=[(1, '', 'connection refused\n')],
                  query=[(1, ERROR_14, ''), (0, 'INITIALIZING\n', ''), (0, 'READY\n', '')])
    clock = FakeClock()
    ok, result = run({'config': config, 'wait': True, 'interval': 7, 'timeout': 60}, ctl, clock=clock)
    assert ok
    assert result['healthy'] is True
    assert result['attempts'] == 3
    assert clock.sleeps == [7, 7]
    assert result['elapsed'] == 14.0
    assert result['source'] == 'json'


def test_wait_timeout_with_fail_unhealthy(run, config):
    ctl = FakeCtl(json=[(0, sample('N_json_580.95.09_degraded_sparse_tabs.json'), '')])
    clock = FakeClock()
    ok, result = run({'config': config, 'wait': True, 'interval': 10, 'timeout': 25, 'fail_unhealthy': True},
                     ctl, clock=clock)
    assert not ok
    assert clock.sleeps == [10, 10, 5]
    assert result['attempts'] == 4
    assert result['msg'].startswith('not healthy after 4 attempt(s) in 25 s. IMEX domain is not healthy')
    assert 'node 12 (198.18.1.23) is UNAVAILABLE' in result['msg']


def test_wait_timeout_without_fail_unhealthy_warns(run, config):
    ctl = FakeCtl(json=[(0, sample('N_json_unconfigured_down.json'), '')])
    ok, result = run({'config': config, 'wait': True, 'interval': 5, 'timeout': 5}, ctl)
    assert ok and result['healthy'] is False
    assert result['attempts'] == 2
    assert len(result['_warnings']) == 1 and 'domain state is DOWN, not UP' in result['_warnings'][0]


def test_wait_timeout_while_ctl_keeps_failing(run, config):
    ctl = FakeCtl(json=[(124, '', '')])
    ok, result = run({'config': config, 'wait': True, 'interval': 30, 'timeout': 60, 'query_local': False}, ctl)
    assert not ok
    assert result['msg'].startswith('still failing after 3 attempt(s) in 60 s: %s -c %s -N -j did not answer'
                                    % (CTL, config))
    assert result['attempts'] == 3


@pytest.mark.parametrize('bins, message', [
    ({'timeout': TIMEOUT}, 'nvidia-imex-ctl not found'),
    ({'nvidia-imex-ctl': CTL}, 'coreutils timeout not found'),
])
def test_missing_binaries(run, config, bins, message):
    ok, result = run({'config': config}, FakeCtl(), bins=bins)
    assert not ok and result['msg'].startswith(message)


def test_missing_config_file(run, tmp_path):
    missing = str(tmp_path / 'nope.cfg')
    ok, result = run({'config': missing}, FakeCtl())
    assert not ok
    assert result['msg'].startswith('IMEX config file %s does not exist' % missing)


@pytest.mark.parametrize('name, value', [('interval', 0), ('command_timeout', 0), ('timeout', -1)])
def test_bad_numbers(run, config, name, value):
    ok, result = run({'config': config, name: value}, FakeCtl())
    assert not ok and result['msg'].startswith('%s must be at least' % name)
