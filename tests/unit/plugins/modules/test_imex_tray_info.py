# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""imex_tray_info: command line, strict / non-strict verdicts, warnings, failures; files, services and Slurm read;
the cheap read without the fabric."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import time
from unittest import mock

import pytest
from cryptography.hazmat.primitives import serialization

from ansible.module_utils import basic

from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_record
from ansible_collections.rackscale.imex.plugins.modules import imex_tray_info
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import cert_pem, key_pem, make_ca
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
    assert result['stat_files'] == {} and result['services_started'] == {}


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


def test_health_summary_is_returned_for_the_caller_to_name_the_tray(run):
    ok, result, _calls = run({}, (0, sample('smi_q_580.65.06_unhealthy_summary.txt'), ''))
    assert ok and result['fabric_ok'] is True and not result.get('_warnings')
    assert len(result['fabric_warnings']) == 1
    assert result['fabric_warnings'][0].startswith('GPUs 0-3: fabric health is Unhealthy')


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
    # A role user cannot pass the module's option: the message says so and names whose option it is.
    assert 'the rackscale.imex roles look nowhere else' in result['msg']
    assert 'nvidia_smi option of rackscale.imex.imex_tray_info' in result['msg']
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
# What the read asks systemd of each unit, in one systemctl show.
UNIT_PROPERTIES = ('ActiveEnterTimestampMonotonic', 'ActiveState', 'ExecMainStartTimestampMonotonic',
                   'InactiveExitTimestampMonotonic', 'InvocationID', 'MainPID')


def show_command(unit):
    """The one systemctl show the read runs for ``unit``."""
    command = [TIMEOUT, '-k', '5', '30', SYSTEMCTL, 'show']
    for prop in UNIT_PROPERTIES:
        command += ['-p', prop]
    return command + ['--', unit]


def show_text(**values):
    """systemctl show's stdout: every asked property on its own line, empty where ``values`` has none."""
    return ''.join('%s=%s\n' % (prop, values.get(prop, '')) for prop in UNIT_PROPERTIES)


def test_every_property_of_a_unit_is_asked_in_one_call():
    assert imex_tray_info.UNIT_PROPERTIES == UNIT_PROPERTIES


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
        'content': '198.18.1.1\n198.18.1.2\n', 'ctime': os.stat(str(nodes)).st_ctime,
        'uid': os.getuid(), 'gid': os.getgid(), 'mode': '0640', 'error': None}
    assert files[str(latin1)]['exists'] is True and files[str(latin1)]['content'] is None
    assert files[str(latin1)]['sha256'] == hashlib.sha256(b'LOG_LEVEL=4 # caf\xe9\n').hexdigest()
    assert files[str(link)] == files[str(nodes)]
    assert files[str(tmp_path / 'missing.cfg')] == {
        'exists': False, 'sha256': None, 'content': None, 'ctime': None, 'uid': None, 'gid': None, 'mode': None,
        'error': None}
    assert files[str(tmp_path)]['error'] == '%s exists but is not a regular file' % tmp_path
    assert files[str(tmp_path)]['exists'] is False and files[str(tmp_path)]['ctime'] is None


def test_stat_files_never_carry_content(run, tmp_path):
    key = tmp_path / 'server.key'
    key.write_bytes(b'-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n')
    key.chmod(0o600)
    link = tmp_path / 'current.key'
    link.symlink_to(key)
    paths = [str(key), str(link), str(tmp_path / 'missing.key'), str(tmp_path)]
    ok, result, calls = run({'stat_files': paths}, (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok and calls == [[TIMEOUT, '-k', '5', '120', SMI, '-q']]
    described = result['stat_files']
    assert described[str(key)] == {'exists': True, 'ctime': os.stat(str(key)).st_ctime, 'uid': os.getuid(),
                                   'gid': os.getgid(), 'mode': '0600', 'error': None}
    assert described[str(link)] == described[str(key)]
    assert described[str(tmp_path / 'missing.key')] == {
        'exists': False, 'ctime': None, 'uid': None, 'gid': None, 'mode': None, 'error': None}
    assert described[str(tmp_path)]['error'] == '%s exists but is not a regular file' % tmp_path
    assert 'PRIVATE KEY' not in json.dumps(result) and 'MC4CAQ' not in json.dumps(result)
    assert result['files'] == {}


def test_presence_says_whether_anything_is_at_each_path_and_is_absent_unless_asked(run, tmp_path):
    entries = tmp_path / 'channels.d'
    entries.mkdir()
    ok, result, _calls = run({'presence': [str(entries), str(tmp_path / 'missing')]},
                             (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok and result['presence'] == {str(entries): {'exists': True, 'error': None},
                                         str(tmp_path / 'missing'): {'exists': False, 'error': None}}
    ok, result, _calls = run({}, (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok and 'presence' not in result


def test_certificate_files_are_described_by_the_fingerprints_of_their_certificates(run, tmp_path):
    """The CA bundle a tray holds, by SHA-256 fingerprints the controller compares with a new bundle."""
    old_ca, new_ca = make_ca('rack-ca-2025'), make_ca('rack-ca-2026')
    bundle = tmp_path / 'ca.crt'
    bundle.write_text(cert_pem(old_ca[0]) + cert_pem(new_ca[0]))
    link = tmp_path / 'current-ca.crt'
    link.symlink_to(bundle)
    key = tmp_path / 'tray.key'
    key.write_text(key_pem(old_ca[1]))
    paths = [str(bundle), str(link), str(key), str(tmp_path / 'missing.crt'), str(tmp_path)]
    ok, result, _calls = run({'certificate_files': paths}, (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok
    described = result['certificate_files']
    fingerprints = [hashlib.sha256(ca.public_bytes(serialization.Encoding.DER)).hexdigest() for ca, _key in (old_ca, new_ca)]
    assert described[str(bundle)] == {'exists': True, 'sha256': fingerprints, 'error': None}
    assert described[str(link)] == described[str(bundle)]
    # A key given by mistake is named, never quoted.
    assert described[str(key)] == {'exists': True, 'sha256': [], 'error': '%s holds no PEM certificate' % key}
    assert 'PRIVATE KEY' not in json.dumps(result)
    assert described[str(tmp_path / 'missing.crt')] == {'exists': False, 'sha256': None, 'error': None}
    assert described[str(tmp_path)]['exists'] is False and described[str(tmp_path)]['error'].startswith(
        'cannot read %s: ' % tmp_path)
    ok, result, _calls = run({}, (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok and 'certificate_files' not in result


def test_service_states_come_from_one_systemctl_show_per_unit(run):
    answers = {
        'nvidia-imex': (0, show_text(ActiveState='inactive', ExecMainStartTimestampMonotonic='0'), ''),
        # systemd says "never" (0) for both start properties.
        'simdriver': (0, show_text(ActiveState='active', ExecMainStartTimestampMonotonic='0',
                                   ActiveEnterTimestampMonotonic='0'), ''),
        'wedged': (124, '', ''),
        'killed': (-9, show_text(ActiveState='activating'), ''),
        'busless': (1, '', 'Failed to connect to bus: No such file or directory\n'),
    }

    def answer(cmd):
        if cmd[4] == SYSTEMCTL:
            return answers[cmd[-1]]
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    ok, result, calls = run({'services': list(answers)}, answer,
                            bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'systemctl': SYSTEMCTL})
    assert ok
    assert result['services'] == {'nvidia-imex': 'inactive', 'simdriver': 'active', 'wedged': None, 'killed': None,
                                  'busless': None}
    assert [cmd for cmd in calls if cmd[4] == SYSTEMCTL] == [show_command(unit) for unit in answers]
    assert result['services_started'] == dict((unit, None) for unit in answers)
    assert result['services_instance'] == {
        'nvidia-imex': None, 'wedged': None, 'killed': None, 'busless': None,
        'simdriver': {'invocation_id': None, 'inactive_exit': None, 'loaded': None}}


def test_service_state_is_unknown_without_systemctl(run):
    ok, result, calls = run({'services': ['nvidia-imex']}, (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok and result['services'] == {'nvidia-imex': None}
    assert result['services_started'] == {'nvidia-imex': None}
    assert calls == [[TIMEOUT, '-k', '5', '120', SMI, '-q']]


class Clocks:
    """time.time() and time.monotonic() as the module reads them: the tray booted BOOT seconds after the epoch."""
    BOOT = 1764000000.0

    def __init__(self, uptime=5000.0):
        self.uptime = uptime

    def time(self):
        return self.BOOT + self.uptime

    def monotonic(self):
        return self.uptime


def started_answer(show):
    """A run_command answer: systemctl show answering ``show`` (the values of an active nvidia-imex, or the
    (rc, stdout) of the whole call), nvidia-smi -q a registered tray."""
    def answer(cmd):
        if cmd[4] == SYSTEMCTL:
            if isinstance(show, tuple):
                return show + ('',)
            return 0, show_text(**dict({'ActiveState': 'active'}, **show)), ''
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    return answer


def run_started(run, monkeypatch, properties):
    monkeypatch.setattr(imex_tray_info, 'time', Clocks())
    return run({'services': ['nvidia-imex']}, started_answer(properties),
               bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'systemctl': SYSTEMCTL})


def test_a_running_unit_is_dated_from_the_monotonic_start_of_its_main_process(run, monkeypatch):
    # The daemon started 1234.567891 s after boot: microseconds of CLOCK_MONOTONIC, as systemctl prints them.
    ok, result, calls = run_started(run, monkeypatch, {'ExecMainStartTimestampMonotonic': '1234567891'})
    assert ok
    assert result['services'] == {'nvidia-imex': 'active'}
    assert result['services_started'] == {'nvidia-imex': Clocks.BOOT + 1234.567891}
    # The same call said which instance runs.
    assert [cmd for cmd in calls if cmd[4] == SYSTEMCTL] == [show_command('nvidia-imex')]


@pytest.mark.parametrize('main_start', ['0', ''])
def test_without_a_main_process_start_the_unit_s_activation_counts(run, monkeypatch, main_start):
    ok, result, _calls = run_started(run, monkeypatch, {'ExecMainStartTimestampMonotonic': main_start,
                                                        'ActiveEnterTimestampMonotonic': '98000000'})
    assert ok and result['services_started'] == {'nvidia-imex': Clocks.BOOT + 98.0}


@pytest.mark.parametrize('show, state', [
    ((124, ''), None),                                                    # systemctl hung
    ((1, 'Failed to connect to bus\n'), None),
    ((0, 'ExecMainStartTimestampMonotonic=1234567891\n'), None),          # no ActiveState: not an answer
    ({'ExecMainStartTimestampMonotonic': 'n/a', 'ActiveEnterTimestampMonotonic': '0'}, 'active'),
])
def test_a_start_time_that_cannot_be_read_is_null(run, monkeypatch, show, state):
    ok, result, _calls = run_started(run, monkeypatch, show)
    assert ok and result['services'] == {'nvidia-imex': state}
    assert result['services_started'] == {'nvidia-imex': None}


def test_the_start_time_is_on_the_wall_clock_of_the_files(run, tmp_path):
    """A file changed after the unit started has the later ctime, as the controller compares them."""
    before = time.monotonic()
    config = tmp_path / 'config.cfg'
    config.write_text('SERVER_PORT=50000\n')
    started_usec = int((before - 30) * 1e6)   # the daemon started 30 s before the file changed

    answer = started_answer({'ExecMainStartTimestampMonotonic': str(started_usec)})
    ok, result, _calls = run({'services': ['nvidia-imex'], 'files': [str(config)]}, answer,
                             bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'systemctl': SYSTEMCTL})
    assert ok
    started, ctime = result['services_started']['nvidia-imex'], result['files'][str(config)]['ctime']
    assert 25 < ctime - started < 35


SCONTROL = '/usr/bin/scontrol'
SLURMD = '/usr/sbin/slurmd'
# scontrol show node NAME --oneliner of Slurm 24.05 on a GB200 tray (abridged to the fields that matter).
SLURM_NODE = ('NodeName=gpu-a07 Arch=aarch64 CoresPerSocket=72 CPUAlloc=144 CPUEfctv=144 CPUTot=144 '
              'Gres=gpu:4 NodeAddr=rack1-tray02 NodeHostName=rack1-tray02 Version=24.05.2 '
              'State=ALLOCATED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu\n')
# What scontrol prints (stdout, rc 1) for a name that is no Slurm NodeName, and (stderr, rc 1) without slurmctld.
NOT_FOUND = 'Node rack1-tray02 not found\n'
NO_CONTROLLER = 'slurm_load_node error: Unable to contact slurm controller (connect failure)\n'


def test_compute_apps_and_slurm_state_are_read_when_asked(run):
    def answer(cmd):
        if '--query-compute-apps=pid,process_name,used_memory' in cmd:
            return 0, '4242, python3, 40960 MiB\n', ''
        if 'scontrol' in cmd[4]:
            return 0, 'NodeName=tray State=ALLOCATED Partition=gpu\n', ''
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    ok, result, calls = run({'compute_apps': True, 'slurm_state': True}, answer,
                            bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'scontrol': SCONTROL})
    assert ok
    assert result['compute_apps'] == [{'pid': 4242, 'name': 'python3', 'used_memory': '40960 MiB'}]
    assert result['slurm_state'] == 'ALLOCATED'
    node = socket.gethostname().split('.')[0]
    assert result['slurm'] == {'installed': True, 'node': node, 'state': 'ALLOCATED', 'error': None}
    assert [TIMEOUT, '-k', '5', '120', SMI, '--query-compute-apps=pid,process_name,used_memory',
            '--format=csv,noheader'] in calls
    assert [TIMEOUT, '-k', '5', '30', SCONTROL, 'show', 'node', node, '--oneliner'] in calls


def test_the_slurm_node_name_is_asked_when_it_differs_from_the_host_name(run):
    def answer(cmd):
        if cmd[4] == SCONTROL:
            return (0, SLURM_NODE, '') if cmd[7] == 'gpu-a07' else (1, NOT_FOUND, '')
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    bins = {'nvidia-smi': SMI, 'timeout': TIMEOUT, 'scontrol': SCONTROL}
    ok, result, calls = run({'slurm_state': True, 'slurm_node_name': 'gpu-a07'}, answer, bins=bins)
    assert ok and result['slurm'] == {'installed': True, 'node': 'gpu-a07', 'state': 'ALLOCATED', 'error': None}
    assert result['slurm_state'] == 'ALLOCATED'
    assert calls[-1] == [TIMEOUT, '-k', '5', '30', SCONTROL, 'show', 'node', 'gpu-a07', '--oneliner']
    # The host name is not the Slurm NodeName there: scontrol's own answer says so.
    ok, result, _calls = run({'slurm_state': True, 'slurm_node_name': 'rack1-tray02'}, answer, bins=bins)
    assert ok and result['slurm'] == {'installed': True, 'node': 'rack1-tray02', 'state': None,
                                      'error': 'Node rack1-tray02 not found'}
    assert result['slurm_state'] is None


@pytest.mark.parametrize('answer, error', [
    ((1, '', NO_CONTROLLER), 'slurm_load_node error: Unable to contact slurm controller (connect failure)'),
    ((124, '', ''), 'scontrol show node gpu-a07 did not finish within 30 s and was stopped'),
    ((-9, 'NodeName=gpu-a07 State=IDLE\n', ''), 'scontrol show node gpu-a07 did not finish within 30 s and was stopped'),
    ((2, '', ''), 'scontrol show node gpu-a07 exited with rc 2 and printed nothing'),
    ((0, 'NodeName=gpu-a07 Arch=aarch64\n', ''),
     'scontrol show node gpu-a07 answered without a State= field: NodeName=gpu-a07 Arch=aarch64'),
    ((1, 'x' * 500 + '\nsecond line\n', ''), 'x' * 297 + '...'),
])
def test_a_slurm_that_does_not_answer_says_why(run, answer, error):
    def answers(cmd):
        return answer if cmd[4] == SCONTROL else (0, sample('smi_q_580.173.02_gb200_completed.txt'), '')
    ok, result, _calls = run({'slurm_state': True, 'slurm_node_name': 'gpu-a07'}, answers,
                             bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'scontrol': SCONTROL})
    assert ok
    assert result['slurm'] == {'installed': True, 'node': 'gpu-a07', 'state': None, 'error': error}
    assert len(result['slurm']['error']) <= 300 and result['slurm_state'] is None


def test_without_scontrol_slurm_is_not_installed(run):
    ok, result, calls = run({'slurm_state': True, 'slurm_node_name': 'gpu-a07'},
                            (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok and result['slurm'] == {'installed': False, 'node': 'gpu-a07', 'state': None, 'error': None}
    assert result['slurm_state'] is None and len(calls) == 1


@pytest.mark.parametrize('name', ['', '-a', 'gpu-a07 gpu-a08', 'gpu-a[07-08]', 'gpu-a07,gpu-a08', 'gpu\na07'])
def test_a_slurm_node_name_that_is_not_one_node_is_refused(run, name):
    ok, result, calls = run({'slurm_state': True, 'slurm_node_name': name},
                            (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''),
                            bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'scontrol': SCONTROL})
    assert not ok and result['msg'].startswith('slurm_node_name %r ' % name)
    assert calls == []


def test_without_the_fabric_only_what_runs_is_read(run):
    def answer(cmd):
        if '--query-compute-apps=pid,process_name,used_memory' in cmd:
            return 0, '1893402, /usr/bin/python3, 71680 MiB\n', ''
        if cmd[4] == SCONTROL:
            return 0, SLURM_NODE, ''
        if cmd[4] == SYSTEMCTL:
            return 0, show_text(ActiveState='active', ExecMainStartTimestampMonotonic='1234567891'), ''
        raise AssertionError('not expected without the fabric: %r' % (cmd,))
    ok, result, calls = run({'fabric': False, 'compute_apps': True, 'slurm_state': True,
                             'slurm_node_name': 'gpu-a07', 'services': ['nvidia-imex']}, answer,
                            bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'scontrol': SCONTROL,
                                  'systemctl': SYSTEMCTL})
    assert ok
    assert [SMI, '-q'] not in [cmd[4:] for cmd in calls]
    for key in ('fabric_ok', 'problems', 'gpus', 'cluster_uuid', 'clique_id', 'driver_version', 'raw'):
        assert key not in result
    assert result['compute_apps'] == [{'pid': 1893402, 'name': '/usr/bin/python3', 'used_memory': '71680 MiB'}]
    assert result['slurm']['state'] == 'ALLOCATED' and result['services'] == {'nvidia-imex': 'active'}
    assert result['services_started']['nvidia-imex'] is not None


def test_without_the_fabric_strict_is_ignored_and_nvidia_smi_not_needed(run):
    def answer(cmd):
        raise AssertionError('no command expected: %r' % (cmd,))
    ok, result, calls = run({'fabric': False, 'strict': True}, answer, bins={'timeout': TIMEOUT})
    assert ok and calls == []
    assert result['files'] == {} and result['services'] == {} and 'fabric_ok' not in result
    # compute_apps still needs nvidia-smi, and says so when it is missing.
    ok, result, calls = run({'fabric': False, 'compute_apps': True}, answer, bins={'timeout': TIMEOUT})
    assert not ok and result['msg'].startswith('nvidia-smi not found') and calls == []


def test_without_the_fabric_an_unregistered_tray_does_not_fail(run):
    ok, result, calls = run({'fabric': False}, (0, sample('smi_q_580.95.09_insufficient_resources.txt'), ''))
    assert ok and calls == [] and 'problems' not in result


@pytest.mark.parametrize('apps_answer', [(124, '', ''), (6, '', 'NVML error'), (0, 'garbage\n', '')])
def test_compute_apps_that_cannot_be_read_are_unknown_and_slurm_without_scontrol_too(run, apps_answer):
    def answer(cmd):
        if '--format=csv,noheader' in cmd:
            return apps_answer
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    ok, result, _calls = run({'compute_apps': True, 'slurm_state': True}, answer)
    assert ok and result['compute_apps'] is None and result['slurm_state'] is None
    assert result['slurm']['installed'] is False


def test_activity_is_not_read_unless_asked(run):
    ok, result, calls = run({}, (0, sample('smi_q_580.173.02_gb200_completed.txt'), ''))
    assert ok and 'compute_apps' not in result and 'slurm_state' not in result and len(calls) == 1
    assert 'slurm' not in result


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


def test_service_enablement_comes_from_systemctl_is_enabled(run):
    def answer(cmd):
        if 'is-enabled' in cmd:
            return {'nvidia-imex': (1, 'masked\n', ''), 'other': (0, 'enabled\n', ''),
                    'wedged': (124, '', '')}[cmd[-1]]
        if cmd[4] == SYSTEMCTL:
            return 0, show_text(ActiveState='inactive'), ''
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    ok, result, calls = run({'services': ['nvidia-imex', 'other', 'wedged'], 'service_enabled': True}, answer,
                            bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'systemctl': SYSTEMCTL})
    assert ok
    assert result['services_enabled'] == {'nvidia-imex': 'masked', 'other': 'enabled', 'wedged': None}
    assert [TIMEOUT, '-k', '5', '30', SYSTEMCTL, 'is-enabled', '--', 'nvidia-imex'] in calls
    ok, result, _calls = run({'services': ['nvidia-imex']}, answer,
                             bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'systemctl': SYSTEMCTL})
    assert 'services_enabled' not in result and 'channel_major' not in result


def test_the_channel_device_major_is_read_from_proc_devices(tmp_path):
    devices = tmp_path / 'devices'
    devices.write_text('Character devices:\n  1 mem\n234 nvidia-caps-imex-channels\n\nBlock devices:\n  8 sd\n')
    assert imex_tray_info.channel_major(str(devices)) == 234
    devices.write_text('Character devices:\n  1 mem\n\nBlock devices:\n234 nvidia-caps-imex-channels\n')
    assert imex_tray_info.channel_major(str(devices)) is None
    assert imex_tray_info.channel_major(str(tmp_path / 'absent')) is None


def _slurm_read(run, answer, bins=None, **args):
    return run(dict({'fabric': False, 'slurm_config': True}, **args), answer,
               bins={'timeout': TIMEOUT, 'scontrol': SCONTROL} if bins is None else bins)


def test_slurms_channel_plugin_and_prologs_are_read_from_one_show_config(run):
    ok, result, calls = _slurm_read(run, (0, read_sample('slurm', 'show_config_two_prologs_count1024_no_alloc.txt'), ''))
    assert ok and calls == [[TIMEOUT, '-k', '5', '30', SCONTROL, 'show', 'config']]
    assert result['slurm_config'] == {'installed': True, 'error': None, 'config': {
        'switch_type': 'switch/nvidia_imex', 'switch_parameters': 'imex_channel_count=1024', 'imex_channel_count': 1024,
        'prolog_flags': [], 'prolog': ['/etc/slurm/prolog.sh', '/etc/slurm/prolog.d/*'],
        'epilog': ['/etc/slurm/epilog.sh'], 'version': '24.11.5', 'prolog_timeout': None, 'epilog_timeout': None}}


@pytest.mark.parametrize('answer, version', [
    ((0, 'slurm-wlm 24.11.5\n', ''), '24.11.5'),
    ((0, 'slurm 26.05.5\n', ''), '26.05.5'),
    ((1, '', 'slurmd: error: something'), None),
    ((124, '', ''), None),
    ((0, 'garbage\n', ''), None),
])
def test_the_trays_own_slurmd_release_is_read_without_asking_slurmctld(run, answer, version):
    ok, result, calls = run({'fabric': False, 'slurmd_version': True}, answer,
                            bins={'timeout': TIMEOUT, 'scontrol': SCONTROL, 'slurmd': SLURMD})
    assert ok and calls == [[TIMEOUT, '-k', '5', '30', SLURMD, '-V']]
    assert result['slurmd_version'] == version and 'slurm_config' not in result


def test_slurmctlds_configuration_is_read_without_the_trays_slurmd_release(run):
    ok, result, calls = _slurm_read(run, (0, read_sample('slurm', 'show_config_per_job_bed.txt'), ''),
                                    bins={'timeout': TIMEOUT, 'scontrol': SCONTROL, 'slurmd': SLURMD})
    assert ok and calls == [[TIMEOUT, '-k', '5', '30', SCONTROL, 'show', 'config']]
    assert result['slurm_config']['config']['version'] == '24.11.5' and 'slurmd_version' not in result


def test_without_slurmd_its_release_is_null_and_nothing_runs(run):
    ok, result, calls = run({'fabric': False, 'slurmd_version': True}, (0, '', ''), bins={'timeout': TIMEOUT})
    assert ok and calls == [] and result['slurmd_version'] is None


@pytest.mark.parametrize('answer, error', [
    ((1, '', read_sample('slurm', 'show_config_controller_down_stderr.txt')),
     'scontrol show config failed (rc 1): slurm_load_ctl_conf error: Unable to contact slurm controller (connect '
     'failure)'),
    ((124, '', ''), 'scontrol show config did not answer within 30 s'),
    ((0, 'garbage\n', ''), "scontrol show config printed no \"Key = Value\" line: 'garbage\\n'"),
])
def test_a_slurm_config_that_cannot_be_read_is_said_and_the_read_succeeds(run, answer, error):
    ok, result, _calls = _slurm_read(run, answer)
    assert ok and result['slurm_config'] == {'installed': True, 'config': None, 'error': error}


def test_without_scontrol_the_slurm_config_is_not_installed(run):
    ok, result, calls = _slurm_read(run, (0, '', ''), bins={'timeout': TIMEOUT})
    expected = {'installed': False, 'config': None, 'error': None}
    assert ok and calls == [] and result['slurm_config'] == expected


def test_the_drivers_channel_count_comes_from_the_first_file_that_shows_it(run, tmp_path):
    old = tmp_path / 'params_old'
    old.write_text(read_sample('files', 'nvidia_params_old_driver.txt'))
    sysfs = tmp_path / 'NVreg_ImexChannelCount'
    sysfs.write_text('16\n')
    paths = [str(tmp_path / 'absent'), str(old), str(sysfs)]
    ok, result, calls = run({'fabric': False, 'channel_count': True, 'channel_count_paths': paths}, (0, '', ''),
                            bins={'timeout': TIMEOUT})
    assert ok and calls == [] and result['channel_count'] == {'value': 16, 'source': str(sysfs)}
    ok, result, _calls = run({'fabric': False, 'channel_count': True, 'channel_count_paths': paths[:2]}, (0, '', ''),
                             bins={'timeout': TIMEOUT})
    assert ok and result['channel_count'] == {'value': None, 'source': None}
    assert 'slurm_config' not in result


# --- which release the running daemon runs ---------------------------------------------------------

IMEX = '/usr/bin/nvidia-imex'
# The daemon's main process; its unit began to start 100 s after boot, its main process 101.5 s.
DAEMON_PID = 2417
ACTIVATION_USEC = 100000000
MAIN_START_USEC = 101500000


def release_answer(installed='580.95.09', old='580.105.08'):
    """run_command answers of a tray whose nvidia-imex unit runs: systemctl, both --version calls, nvidia-smi."""
    def answer(cmd):
        if cmd[4] == SYSTEMCTL:
            return 0, show_text(ActiveState='active', ExecMainStartTimestampMonotonic=MAIN_START_USEC,
                                MainPID=DAEMON_PID, InactiveExitTimestampMonotonic=ACTIVATION_USEC), ''
        if cmd[-1] == '--version':
            return 0, 'IMEX version is: %s\n' % (installed if cmd[-2] == IMEX else old), ''
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    return answer


@pytest.fixture
def run_release(run, monkeypatch, tmp_path):
    """run_release(exe_target, config=None) -> (ok, result, calls): a read with daemon_release on a tray whose
    daemon's /proc/<pid>/exe links to ``exe_target`` (a fake /proc under tmp_path)."""
    def _run(exe_target, config=None, answer=None, services=('nvidia-imex',)):
        proc = tmp_path / 'proc' / str(DAEMON_PID)
        proc.mkdir(parents=True)
        os.symlink(exe_target, str(proc / 'exe'))
        monkeypatch.setattr(imex_tray_info, '_PROC', str(tmp_path / 'proc'))
        monkeypatch.setattr(imex_tray_info, 'time', Clocks())
        args = {'services': list(services), 'imex_version': True, 'daemon_release': True}
        if config is not None:
            args['daemon_config'] = config
        return run(args, answer or release_answer(),
                   bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'systemctl': SYSTEMCTL, 'nvidia-imex': IMEX})
    return _run


def test_a_daemon_that_runs_the_installed_file_runs_the_installed_release(run_release, monkeypatch):
    monkeypatch.setattr(imex_tray_info, '_same_file', lambda path, other: other == IMEX)
    ok, result, calls = run_release(IMEX)
    assert ok and result['daemon_release'] == {'running': '580.95.09', 'source': 'executable', 'executable': IMEX,
                                               'replaced': False, 'unknown': None}
    # The unit's one show, that RV(services) and the rest were read from, named the main process.
    assert [cmd for cmd in calls if cmd[4] == SYSTEMCTL] == [show_command('nvidia-imex')]
    # The installed binary is asked once, for both keys.
    assert [cmd for cmd in calls if cmd[-1] == '--version'] == [[TIMEOUT, '-k', '5', '30', IMEX, '--version']]


def test_the_daemon_s_release_is_read_when_its_unit_is_not_among_the_services(run_release, monkeypatch):
    monkeypatch.setattr(imex_tray_info, '_same_file', lambda path, other: other == IMEX)
    ok, result, calls = run_release(IMEX, services=())
    assert ok and result['daemon_release']['running'] == '580.95.09'
    assert result['services'] == {} and result['services_started'] == {}
    assert [cmd for cmd in calls if cmd[4] == SYSTEMCTL] == [show_command('nvidia-imex')]


def test_a_binary_replaced_under_the_daemon_is_asked_its_own_release(run_release, tmp_path):
    ok, result, calls = run_release(IMEX + ' (deleted)')
    assert ok and result['imex_version'] == '580.95.09'
    assert result['daemon_release'] == {'running': '580.105.08', 'source': 'executable',
                                        'executable': IMEX + ' (deleted)', 'replaced': True, 'unknown': None}
    assert [TIMEOUT, '-k', '5', '30', str(tmp_path / 'proc' / str(DAEMON_PID) / 'exe'), '--version'] in calls


@pytest.fixture
def root_log(root_above):
    """A config.cfg naming a log file under tmp_path, whose directories above are seen as root's."""
    tmp_path = root_above
    log = tmp_path / 'nvidia-imex.log'
    config = tmp_path / 'config.cfg'
    config.write_text('LOG_LEVEL=4\nLOG_FILE_NAME=%s\nLOG_APPEND_TO_LOG=1\n' % log)
    return config, log


def vendor_line(epoch, message, level='INFO'):
    moment = time.localtime(epoch)
    return '[%s %d %d %s] [%s] [tid 77] %s\n' % (
        ('Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec')[moment.tm_mon - 1],
        moment.tm_mday, moment.tm_year, time.strftime('%H:%M:%S', moment), level, message)


@pytest.mark.skipif(os.geteuid() != 0, reason="the daemon's log must be root's to be read")
def test_a_daemon_run_by_an_interpreter_is_told_by_its_start_line(run_release, root_log):
    config, log = root_log
    activation = Clocks.BOOT + ACTIVATION_USEC / 1e6
    log.write_text(vendor_line(activation - 3600, 'IMEX version 580.95.09 is running with the following configuration '
                                                  'options:')
                   + vendor_line(activation + 0.5, 'IMEX version 580.105.08 is running with the following configuration '
                                                   'options:')
                   + vendor_line(activation + 9, 'Connection established to node 1 with address 198.18.2.12'))
    ok, result, calls = run_release('/usr/bin/python3.11', config=str(config))
    assert ok and result['daemon_release'] == {'running': '580.105.08', 'source': 'log',
                                               'executable': '/usr/bin/python3.11', 'replaced': False,
                                               'unknown': None}
    # Only an nvidia-imex binary is ever run.
    assert not [cmd for cmd in calls if 'exe' in cmd[-2]]
    assert not result.get('_warnings')


@pytest.mark.skipif(os.geteuid() != 0, reason="the daemon's log must be root's to be read")
def test_a_release_that_cannot_be_told_is_null_and_warned(run_release, root_log):
    config, log = root_log
    # Only an earlier daemon's start line: this one's was not logged.
    log.write_text(vendor_line(Clocks.BOOT + 10, 'IMEX version 580.95.09 is running with the following configuration '
                                                 'options:'))
    ok, result, _calls = run_release('/usr/bin/python3.11', config=str(config))
    assert ok and result['daemon_release']['running'] is None
    assert result['daemon_release']['unknown'] == '%s holds no start line of the running daemon' % log
    assert any('cannot tell which IMEX release the running nvidia-imex daemon runs' in warning
               for warning in result['_warnings'])


@pytest.mark.parametrize(('config', 'why'), [
    ('LOG_LEVEL=3\n', "LOG_LEVEL=3 leaves out the daemon's start line, which names its release"),
    ('LOG_FILE_NAME=\n', 'the daemon logs to stderr (LOG_FILE_NAME is empty), not to a file read here'),
])
def test_a_config_that_keeps_the_start_line_out_of_a_file_says_so(run_release, tmp_path, config, why):
    path = tmp_path / 'config.cfg'
    path.write_text(config)
    ok, result, _calls = run_release('/usr/bin/python3.11', config=str(path))
    assert ok and result['daemon_release']['running'] is None and result['daemon_release']['unknown'] == why


def test_no_release_is_read_of_a_daemon_that_does_not_run(run):
    def answer(cmd):
        if cmd[4] == SYSTEMCTL:
            return 0, show_text(ActiveState='failed', MainPID='0'), ''
        if cmd[-1] == '--version':
            return 0, 'IMEX version is: 580.95.09\n', ''
        return 0, sample('smi_q_580.173.02_gb200_completed.txt'), ''
    ok, result, calls = run({'services': ['nvidia-imex'], 'daemon_release': True}, answer,
                            bins={'nvidia-smi': SMI, 'timeout': TIMEOUT, 'systemctl': SYSTEMCTL, 'nvidia-imex': IMEX})
    assert ok and result['daemon_release'] == {'running': None, 'source': None, 'executable': None, 'replaced': None,
                                               'unknown': None}
    assert [cmd for cmd in calls if cmd[4] == SYSTEMCTL] == [show_command('nvidia-imex')]
    assert not result.get('_warnings')


def test_the_running_instance_and_the_record_of_what_it_loaded(run, monkeypatch, tmp_path):
    """InvocationID and the unit's start of activation (before the daemon read its files), and the record a
    run wrote when it started the unit, read back as it is: the plan compares its instance."""
    monkeypatch.setattr(_daemon_record, 'RECORD_DIR', str(tmp_path))
    instance = '3b1c9e0f5d2a4c6e8f0a1b2c3d4e5f60'
    digest = hashlib.sha256(b'198.18.1.11\n').hexdigest()
    (tmp_path / 'nvidia-imex.json').write_text(_daemon_record.build('nvidia-imex', instance, {'/etc/n': digest}))
    ok, result, calls = run_started(run, monkeypatch, {
        'ExecMainStartTimestampMonotonic': '1234567891', 'InvocationID': instance,
        'InactiveExitTimestampMonotonic': '1234000000'})
    assert ok
    assert result['services_instance'] == {'nvidia-imex': {
        'invocation_id': instance, 'inactive_exit': Clocks.BOOT + 1234.0,
        'loaded': {'invocation_id': instance, 'files': {'/etc/n': digest}}}}
    assert [cmd for cmd in calls if cmd[4] == SYSTEMCTL] == [show_command('nvidia-imex')]


@pytest.mark.parametrize('show, record, expected', [
    # No record (started by hand, or the tray rebooted since): the instance alone.
    ({'InvocationID': '7c2d0a1f6e3b5d7f9a1b2c3d4e5f6071', 'InactiveExitTimestampMonotonic': '0'}, None,
     {'invocation_id': '7c2d0a1f6e3b5d7f9a1b2c3d4e5f6071', 'inactive_exit': None, 'loaded': None}),
    # A damaged record is none.
    ({'InvocationID': '7c2d0a1f6e3b5d7f9a1b2c3d4e5f6071'}, '{"format": 1, "invoc',
     {'invocation_id': '7c2d0a1f6e3b5d7f9a1b2c3d4e5f6071', 'inactive_exit': None, 'loaded': None}),
    # systemctl show hung: nothing is known of the instance.
    ((124, ''), None, None),
])
def test_an_instance_without_a_record_or_an_answer(run, monkeypatch, tmp_path, show, record, expected):
    monkeypatch.setattr(_daemon_record, 'RECORD_DIR', str(tmp_path))
    if record is not None:
        (tmp_path / 'nvidia-imex.json').write_text(record)
    if isinstance(show, dict):
        show = dict(show, ExecMainStartTimestampMonotonic='1234567891')
    ok, result, _calls = run_started(run, monkeypatch, show)
    assert ok and result['services_instance'] == {'nvidia-imex': expected}
