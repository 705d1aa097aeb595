# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""imex_slurm_probe: the srun command line, a healthy and a broken matrix read inside the job, a busy
domain, srun failures, check mode; and the job step's script run for real by sh."""
from __future__ import annotations

import os
import stat
import subprocess
from unittest import mock

import pytest

from ansible.module_utils import basic

from ansible_collections.rackscale.imex.plugins.modules import imex_slurm_probe
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

SRUN = '/usr/bin/srun'
TIMEOUT = '/usr/bin/timeout'
UP_2 = read_sample('ctl', 'N_json_570.172.08_up_2nodes.json')
ADDRESSES_2 = ['192.168.103.159', '192.168.107.187']
RECOVERING = read_sample('ctl', 'N_580.95.09_pair_3_7_recovering.txt')
ADDRESSES_18 = ['198.18.1.%d' % (11 + index) for index in range(18)]
BUSY = read_sample('slurm', 'srun_immediate_nodes_busy_stderr.txt')
NO_PARTITION = read_sample('slurm', 'srun_invalid_partition_stderr.txt')


@pytest.fixture
def run(run_module):
    def _run(args, answer, bins=None, check=False):
        bins = {'srun': SRUN, 'timeout': TIMEOUT} if bins is None else bins
        calls = []

        def get_bin_path(self, name, required=False, opt_dirs=None):
            return bins.get(name)

        def run_command(self, cmd, **kwargs):
            calls.append(list(cmd))
            return answer

        with mock.patch.multiple(basic.AnsibleModule, get_bin_path=get_bin_path, run_command=run_command):
            result = run_module(imex_slurm_probe, args, check=check)
        return result['_exit_code'] == 0, result, calls
    return _run


def args_of(count=2, addresses=None, **more):
    names = ['rack1-tray%02d' % (index + 1) for index in range(count)]
    return dict({'partition': 'gpu', 'nodes': names, 'expected_nodes': addresses or ADDRESSES_2[:count],
                 'expected_names': names}, **more)


def test_one_exclusive_bounded_job_on_exactly_the_domains_nodes(run):
    ok, result, calls = run(args_of(), (0, UP_2, 'rackscale-imex-probe: nvidia-imex-ctl -N -j rc 0 on rack1-tray01\n'))
    assert ok and len(calls) == 1
    argv = calls[0]
    assert argv[:5] == [TIMEOUT, '-k', '5', str(10 + 300 + 30 + 30), SRUN]
    assert argv[5:15] == ['--partition=gpu', '--exclusive', '--nodes=2', '--ntasks-per-node=1',
                          '--nodelist=rack1-tray01,rack1-tray02', '--time=2', '--immediate=10',
                          '--job-name=rackscale-imex-probe', '--quiet', '/bin/sh']
    assert argv[15:17] == ['-c', imex_slurm_probe.STEP_SCRIPT]
    assert argv[17:] == ['rackscale-imex-probe', '/usr/bin/nvidia-imex-ctl', '/etc/nvidia-imex/config.cfg', '30',
                         '2', '30']
    assert (result['probed'], result['healthy'], result['domain_state'], result['problems'], result['reason']) == (
        True, True, 'UP', [], None)
    assert result['changed'] is False and result['srun_rc'] == 0
    assert "'<probe script>'" in result['command'] and 'while' not in result['command']


def test_a_broken_pair_inside_the_job_is_named(run):
    ok, result, _calls = run(args_of(18, ADDRESSES_18), (0, RECOVERING, ''))
    assert ok and result['probed'] is True and result['healthy'] is False
    assert [(pair['from_index'], pair['to_index'], pair['state']) for pair in result['broken_pairs']] == [
        (3, 7, 'R'), (7, 3, 'R')]
    assert any('rack1-tray04' in problem and 'rack1-tray08' in problem for problem in result['problems']), \
        result['problems']


def test_a_matrix_of_other_nodes_than_the_domains_is_unhealthy(run):
    ok, result, _calls = run(args_of(2, ['198.18.1.11', '198.18.1.12']), (0, UP_2, ''))
    assert ok and result['probed'] is True and result['healthy'] is False
    assert any('198.18.1.11' in problem for problem in result['problems']), result['problems']


def test_a_domain_slurm_cannot_give_at_once_is_not_probed(run):
    ok, result, _calls = run(args_of(), (1, '', BUSY))
    assert ok and result['probed'] is False and result['healthy'] is None
    assert result['reason'] == 'srun: error: Unable to allocate resources: Requested nodes are busy'


def test_a_partition_slurm_does_not_know_fails_with_what_srun_said(run):
    ok, result, _calls = run(args_of(partition='nope'), (1, '', NO_PARTITION))
    assert not ok and result['probed'] is False
    assert result['msg'].startswith('the probe job printed no nvidia-imex-ctl matrix (srun rc 1)')
    assert 'Invalid partition name specified' in result['msg']


def test_an_srun_that_does_not_finish_is_stopped_and_said_so(run):
    ok, result, _calls = run(args_of(timeout=60), (124, '', 'srun: job 7 queued and waiting for resources\n'))
    assert not ok and result['msg'].startswith("/usr/bin/srun --partition=gpu")
    assert 'did not finish within 60 s (timeout) and was stopped' in result['msg']


def test_check_mode_submits_no_job(run):
    ok, result, calls = run(args_of(), (0, UP_2, ''), check=True)
    assert ok and calls == [] and result['probed'] is False
    assert result['reason'] == 'check mode: no job submitted'


@pytest.mark.parametrize('args, message', [
    (args_of(expected_nodes=['198.18.1.11']), 'nodes (2) and expected_nodes (1) must name the same trays'),
    (args_of(nodes=['rack1-tray[01-02]', 'x']), "nodes must be plain Slurm node names"),
    (args_of(immediate=0), 'immediate must be at least 1, got 0'),
])
def test_bad_arguments_are_refused_before_any_job(run, args, message):
    ok, result, calls = run(args, (0, UP_2, ''))
    assert not ok and calls == [] and message in result['msg']


def test_without_srun_the_probe_says_what_it_needs(run):
    ok, result, calls = run(args_of(), (0, '', ''), bins={'timeout': TIMEOUT})
    assert not ok and calls == [] and result['msg'].startswith('srun not found')


def _fake_ctl(tmp_path, answers):
    """An nvidia-imex-ctl that prints the next of ``answers`` at each call and records its arguments."""
    for index, text in enumerate(answers):
        (tmp_path / ('answer%d' % index)).write_text(text)
    ctl = tmp_path / 'nvidia-imex-ctl'
    ctl.write_text('#!/bin/sh\necho "$@" >> %s/args\nn=$(cat %s/calls 2>/dev/null || echo 0)\n'
                   'echo $((n + 1)) > %s/calls\nlast=%d\n[ "$n" -gt "$last" ] && n=$last\ncat %s/answer$n\n'
                   % (tmp_path, tmp_path, tmp_path, len(answers) - 1, tmp_path))
    ctl.chmod(ctl.stat().st_mode | stat.S_IXUSR)
    return str(ctl)


def _step(tmp_path, ctl, procid, wait='10'):
    environ = dict(os.environ, SLURM_PROCID=procid)
    return subprocess.run(['sh', '-c', imex_slurm_probe.STEP_SCRIPT, 'probe', ctl, '/etc/x.cfg', wait, '1', '5'],
                          env=environ, capture_output=True, text=True, timeout=60, check=True)


def test_the_step_script_asks_until_the_domain_is_up_then_prints_that_answer(tmp_path):
    degraded = UP_2.replace('"status": "UP"', '"status": "DEGRADED"')
    ctl = _fake_ctl(tmp_path, [degraded, UP_2])
    done = _step(tmp_path, ctl, '0')
    assert done.stdout.strip() == UP_2.strip()
    assert (tmp_path / 'calls').read_text().strip() == '2'
    assert (tmp_path / 'args').read_text().splitlines() == ['-c /etc/x.cfg -N -j'] * 2
    assert 'nvidia-imex-ctl -N -j rc 0' in done.stderr


def test_the_step_script_gives_the_last_answer_when_the_wait_runs_out(tmp_path):
    degraded = UP_2.replace('"status": "UP"', '"status": "DEGRADED"')
    ctl = _fake_ctl(tmp_path, [degraded])
    done = _step(tmp_path, ctl, '0', wait='2')
    assert '"DEGRADED"' in done.stdout and int((tmp_path / 'calls').read_text()) >= 2


def test_only_the_first_task_of_the_job_asks(tmp_path):
    ctl = _fake_ctl(tmp_path, [UP_2])
    done = _step(tmp_path, ctl, '1')
    assert done.stdout == '' and not (tmp_path / 'calls').exists()
