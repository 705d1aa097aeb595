# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""imex_tray_info: command line, strict / non-strict verdicts, warnings, failures; files and services read."""
from __future__ import annotations

import functools
import hashlib
import os
from unittest import mock

import pytest

from ansible.module_utils import basic

from ansible_collections.rackscale.imex.plugins.modules import imex_tray_info
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

SMI = '/usr/bin/nvidia-smi'
TIMEOUT = '/usr/bin/timeout'
UUID = '5f0a8c2e-1b3d-4e6f-8a9b-0c1d2e3f4a5b'
sample = functools.partial(read_sample, 'smi')


@pytest.fixture
def run(run_module):
    """run(args, answer, bins=None, check=False) -> (succeeded, result, the commands run) of one imex_tray_info run.

    answer is the (rc, stdout, stderr) of every command, or a function of the command giving it.
    """
    def _run(args, answer, bins=None, check=False):
        bins = {'nvidia-smi': SMI, 'timeout': TIMEOUT} if bins is None else bins
        calls = []

        def get_bin_path(self, name, required=False, opt_dirs=None):
            return bins.get(name)

        def run_command(self, cmd, **kwargs):
            calls.append(list(cmd))
            return answer(cmd) if callable(answer) else answer

        with mock.patch.multiple(basic.AnsibleModule, get_bin_path=get_bin_path, run_command=run_command):
            result = run_module(imex_tray_info, args, check=check)
        return result['_exit_code'] == 0, result, calls
    return _run


def test_registered_tray(run):
    ok, result, calls = run({}, (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok
    assert calls == [[TIMEOUT, '-k', '5', '120', SMI, '-q']]
    assert result['changed'] is False
    assert result['fabric_ok'] is True
    assert result['cluster_uuid'] == UUID
    assert result['clique_id'] == 32766
    assert result['problems'] == []
    assert [gpu['bus_id'] for gpu in result['gpus']] == [
        '00000008:01:00.0', '00000009:01:00.0', '00000018:01:00.0', '00000019:01:00.0']
    assert 'warnings' not in result
    assert result['files'] == {} and result['services'] == {}


def test_check_mode_is_the_same(run):
    ok, result, calls = run({}, (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''), check=True)
    assert ok and result['fabric_ok'] is True and len(calls) == 1


def test_strict_fails_and_names_the_gpus(run):
    ok, result, _calls = run({}, (0, sample('smi_q_580.95.09_insufficient_resources.txt'), ''))
    assert not ok
    assert result['msg'].startswith('GPU fabric not ready for IMEX: GPUs 0-3: fabric status is Insufficient '
                                    'Resources, not Success')
    assert 'CliqueId is 0' in result['msg']
    assert result['fabric_ok'] is False
    assert len(result['gpus']) == 4


def test_not_strict_reports_without_failing(run):
    ok, result, _calls = run({'strict': False}, (0, sample('smi_q_580.95.09_clique_disagree.txt'), ''))
    assert ok
    assert result['fabric_ok'] is False
    assert result['clique_id'] is None
    assert result['problems'][0].startswith('GPUs disagree on CliqueId: 32766 on GPUs 0-2, 2 on GPU 3')


def test_health_summary_becomes_a_warning(run):
    ok, result, _calls = run({}, (0, sample('smi_q_580.65.06_unhealthy_summary.txt'), ''))
    assert ok and result['fabric_ok'] is True
    assert len(result['_warnings']) == 1 and result['_warnings'][0].startswith('GPUs 0-3: fabric health is Unhealthy')


def test_explicit_path_is_used_behind_timeout(run):
    ok, result, calls = run({'nvidia_smi': '/opt/nvidia/bin/nvidia-smi'},
                            (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''), bins={'timeout': TIMEOUT})
    assert ok
    assert calls == [[TIMEOUT, '-k', '5', '120', '/opt/nvidia/bin/nvidia-smi', '-q']]


def test_no_timeout_binary_is_refused_before_any_call(run):
    ok, result, calls = run({'nvidia_smi': '/opt/nvidia/bin/nvidia-smi'}, (0, '', ''), bins={})
    assert not ok and result['msg'].startswith('coreutils timeout not found on PATH, /usr/bin or /bin')
    assert calls == []


def test_nvidia_smi_missing(run):
    ok, result, calls = run({}, (0, '', ''), bins={'timeout': TIMEOUT})
    assert not ok and result['msg'].startswith('nvidia-smi not found')
    assert calls == []


def test_nvidia_smi_fails(run):
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    ok, result, _calls = run({}, (9, message, ''))
    assert not ok
    assert result['msg'] == "%s -q failed with rc 9: %s" % (SMI, message.strip())
    assert result['rc'] == 9


@pytest.mark.parametrize('rc', [124, 137, -9])
def test_nvidia_smi_hangs(run, rc):
    """124: the limit was reached; 137: killed after -k; -9: killed by SIGKILL as Python reports it."""
    ok, result, _calls = run({}, (rc, '', ''))
    assert not ok and result['msg'] == '%s -q did not finish within 120 s and was stopped' % SMI


def test_unreadable_output_carries_raw(run):
    text = 'something unexpected\n'
    ok, result, _calls = run({}, (0, text, ''))
    assert not ok
    assert result['raw'] == text
    assert 'no "GPU <bus id>" sections' in result['msg']


SYSTEMCTL = '/usr/bin/systemctl'


def test_files_are_described_as_a_write_would_compare_them(run, tmp_path):
    nodes = tmp_path / 'nodes_config.cfg'
    nodes.write_bytes(b'198.18.1.1\n198.18.1.2\n')
    nodes.chmod(0o640)
    latin1 = tmp_path / 'config.cfg'
    latin1.write_bytes(b'LOG_LEVEL=4 # caf\xe9\n')
    link = tmp_path / 'link.cfg'
    link.symlink_to(nodes)
    paths = [str(nodes), str(latin1), str(link), str(tmp_path / 'missing.cfg'), str(tmp_path)]
    ok, result, _calls = run({'files': paths}, (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok
    files = result['files']
    assert files[str(nodes)] == {
        'exists': True, 'sha256': hashlib.sha256(b'198.18.1.1\n198.18.1.2\n').hexdigest(),
        'content': '198.18.1.1\n198.18.1.2\n', 'uid': os.getuid(), 'gid': os.getgid(), 'mode': '0640', 'error': None}
    assert files[str(latin1)]['exists'] is True and files[str(latin1)]['content'] is None
    assert files[str(latin1)]['sha256'] == hashlib.sha256(b'LOG_LEVEL=4 # caf\xe9\n').hexdigest()
    assert files[str(link)] == files[str(nodes)]
    assert files[str(tmp_path / 'missing.cfg')] == {
        'exists': False, 'sha256': None, 'content': None, 'uid': None, 'gid': None, 'mode': None, 'error': None}
    assert files[str(tmp_path)]['error'] == '%s exists but is not a regular file' % tmp_path
    assert files[str(tmp_path)]['exists'] is False


def test_service_states_come_from_systemctl_is_active(run):
    def answer(cmd):
        if cmd[-1] == 'nvidia-imex':
            return 3, 'inactive\n', ''
        if cmd[-1] == 'simdriver':
            return 0, 'active\n', ''
        if cmd[-1] == 'wedged':
            return 124, '', ''
        if cmd[-1] == 'killed':
            return -9, 'activating\n', ''
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    ok, result, calls = run({'services': ['nvidia-imex', 'simdriver', 'wedged', 'killed']}, answer,
                            bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'systemctl': SYSTEMCTL})
    assert ok
    assert result['services'] == {'nvidia-imex': 'inactive', 'simdriver': 'active', 'wedged': None, 'killed': None}
    assert [TIMEOUT, '-k', '5', '30', SYSTEMCTL, 'is-active', '--', 'nvidia-imex'] in calls


def test_service_state_is_unknown_without_systemctl(run):
    ok, result, calls = run({'services': ['nvidia-imex']}, (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok and result['services'] == {'nvidia-imex': None}
    assert calls == [[TIMEOUT, '-k', '5', '120', SMI, '-q']]


def test_compute_apps_and_slurm_state_are_read_when_asked(run):
    def answer(cmd):
        if '--query-compute-apps=pid,process_name,used_memory' in cmd:
            return 0, '4242, python3, 40960 MiB\n', ''
        if 'scontrol' in cmd[4]:
            return 0, 'NodeName=tray State=ALLOCATED Partition=gpu\n', ''
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    ok, result, calls = run({'compute_apps': True, 'slurm_state': True}, answer,
                            bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'scontrol': '/usr/bin/scontrol'})
    assert ok
    assert result['compute_apps'] == [{'pid': 4242, 'name': 'python3', 'used_memory': '40960 MiB'}]
    assert result['slurm_state'] == 'ALLOCATED'
    assert [TIMEOUT, '-k', '5', '120', SMI, '--query-compute-apps=pid,process_name,used_memory',
            '--format=csv,noheader'] in calls


@pytest.mark.parametrize('apps_answer', [(124, '', ''), (6, '', 'NVML error'), (0, 'garbage\n', '')])
def test_compute_apps_that_cannot_be_read_are_unknown_and_slurm_without_scontrol_too(run, apps_answer):
    def answer(cmd):
        if '--format=csv,noheader' in cmd:
            return apps_answer
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    ok, result, _calls = run({'compute_apps': True, 'slurm_state': True}, answer)
    assert ok and result['compute_apps'] is None and result['slurm_state'] is None


def test_activity_is_not_read_unless_asked(run):
    ok, result, calls = run({}, (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok and 'compute_apps' not in result and 'slurm_state' not in result and len(calls) == 1


def test_driver_version_always_and_the_imex_release_when_asked(run):
    def answer(cmd):
        if cmd[-1] == '--version':
            return 0, 'IMEX version is: 580.173.02\n', ''
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    bins = {'nvidia-smi': SMI, 'timeout': TIMEOUT, 'nvidia-imex': '/usr/bin/nvidia-imex'}
    ok, result, calls = run({'imex_version': True}, answer, bins=bins)
    assert ok and (result['driver_version'], result['imex_version']) == ('580.173.02', '580.173.02')
    assert [TIMEOUT, '-k', '5', '30', '/usr/bin/nvidia-imex', '--version'] in calls
    ok, result, _calls = run({'imex_version': True}, answer)   # no nvidia-imex installed
    assert ok and result['imex_version'] is None


def test_channels_are_predicted_with_the_channel_module_s_own_code(run):
    # This test host has no NVIDIA driver: the channel module would fail on a channel made now, and
    # the read says so; channel0 only dropped from modprobe.d (immediate=false) needs no driver.
    ok, result, calls = run({'channels': [{'channel': 0, 'state': 'absent', 'immediate': False, 'persistent': True,
                                           'owner': None, 'group': None, 'mode': None},
                                          {'channel': 5}]},
                            (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok
    assert set(result['channels']) == {'0', '5'}
    assert result['channels']['0'] == {'changed': os.path.exists('/etc/modprobe.d/nvidia-imex.conf')}
    assert 'nvidia-caps-imex-channels' in result['channels']['5']['error']
    assert calls == [[TIMEOUT, '-k', '5', '120', SMI, '-q']]  # no command beyond the one read
