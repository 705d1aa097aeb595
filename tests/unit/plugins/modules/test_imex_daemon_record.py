# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""imex_daemon_record: what a started daemon loaded, tied to its InvocationID; read back by imex_tray_info."""
from __future__ import annotations

import hashlib
import json
import os
from unittest import mock

import pytest

from ansible.module_utils import basic

from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_record
from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import BEGIN, replace_block, split
from ansible_collections.rackscale.imex.plugins.modules import imex_daemon_record

TIMEOUT = '/usr/bin/timeout'
SYSTEMCTL = '/usr/bin/systemctl'
INSTANCE = '3b1c9e0f5d2a4c6e8f0a1b2c3d4e5f60'
NEXT_INSTANCE = '7c2d0a1f6e3b5d7f9a1b2c3d4e5f6071'
NODES = '198.18.1.11\n198.18.1.12\n198.18.1.13\n'
CONFIG = 'SERVER_PORT=50000\nIMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n'
with open(os.path.join(os.path.dirname(__file__), '..', '..', 'samples', 'hosts', 'debian.txt'), encoding='utf-8') as _hosts:
    HOSTS = _hosts.read()
HOSTS_WITH_BLOCK = replace_block(HOSTS, [('198.18.1.11', 'rack1-slot-00'), ('198.18.1.12', 'rack1-slot-01')])


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def tray(tmp_path, monkeypatch):
    """The tray's files and its record directory (under tmp_path, not /run)."""
    monkeypatch.setattr(_daemon_record, 'RECORD_DIR', str(tmp_path / 'run' / 'loaded'))
    (tmp_path / 'nodes_config.cfg').write_text(NODES)
    (tmp_path / 'config.cfg').write_text(CONFIG)
    return tmp_path


@pytest.fixture
def record(run_module, tray):
    """record(show='...', check=False, files=None) -> (result, the commands run) of one imex_daemon_record run;
    ``show`` is what systemctl show prints."""
    def _record(show='ActiveState=active\nInvocationID=%s\n' % INSTANCE, check=False, files=None, rc=0,
                service='nvidia-imex', hosts_file=None):
        calls = []

        def get_bin_path(self, name, required=False, opt_dirs=None):
            return {'timeout': TIMEOUT, 'systemctl': SYSTEMCTL}.get(name)

        def run_command(self, cmd, **kwargs):
            calls.append(list(cmd))
            return rc, show, ''

        paths = files if files is not None else [str(tray / 'nodes_config.cfg'), str(tray / 'config.cfg')]
        with mock.patch.multiple(basic.AnsibleModule, get_bin_path=get_bin_path, run_command=run_command):
            args = {'service': service, 'files': paths}
            if hosts_file:
                args['hosts_file'] = hosts_file
            result = run_module(imex_daemon_record, args, check=check)
        return result, calls
    return _record


def written(tray):
    with open(str(tray / 'run' / 'loaded' / 'nvidia-imex.json')) as handle:
        return json.load(handle)


def test_the_record_ties_the_digests_to_the_instance(record, tray):
    result, calls = record()
    assert result['_exit_code'] == 0 and result['changed'] is True and result['recorded'] is True
    assert calls == [[TIMEOUT, '-k', '5', '30', SYSTEMCTL, 'show', '-p', 'InvocationID', '-p', 'ActiveState', '--',
                      'nvidia-imex']]
    nodes, config = str(tray / 'nodes_config.cfg'), str(tray / 'config.cfg')
    assert result['files'] == {nodes: sha256(NODES), config: sha256(CONFIG)}
    assert written(tray) == {'format': 1, 'service': 'nvidia-imex', 'invocation_id': INSTANCE,
                             'files': {nodes: sha256(NODES), config: sha256(CONFIG)}}
    assert result['path'] == str(tray / 'run' / 'loaded' / 'nvidia-imex.json')
    # Only root reads it; the directory is created private, as the run lock's.
    assert os.stat(result['path']).st_mode & 0o777 == 0o600
    assert os.stat(str(tray / 'run' / 'loaded')).st_mode & 0o777 == 0o700
    # What imex_tray_info reads back.
    assert _daemon_record.read('nvidia-imex') == {'invocation_id': INSTANCE, 'files': result['files']}


def test_recording_the_same_instance_again_changes_nothing(record, tray):
    record()
    result, _calls = record()
    assert result['changed'] is False and result['recorded'] is True


def test_a_new_instance_replaces_the_record(record, tray):
    record()
    (tray / 'nodes_config.cfg').write_text(NODES + '198.18.1.14\n')
    result, _calls = record(show='InvocationID=%s\nActiveState=active\n' % NEXT_INSTANCE)
    assert result['changed'] is True
    assert written(tray)['invocation_id'] == NEXT_INSTANCE
    assert written(tray)['files'][str(tray / 'nodes_config.cfg')] == sha256(NODES + '198.18.1.14\n')
    # Written atomically: no temporary file is left beside it.
    assert os.listdir(str(tray / 'run' / 'loaded')) == ['nvidia-imex.json']


def test_check_mode_predicts_and_writes_nothing(record, tray):
    result, _calls = record(check=True)
    assert result['_exit_code'] == 0 and result['changed'] is True and result['recorded'] is True
    assert not (tray / 'run').exists()
    record()
    result, _calls = record(check=True)
    assert result['changed'] is False


def test_the_diff_shows_the_record(record, tray):
    result, _calls = record()
    assert json.loads(result['diff']['after'])['invocation_id'] == INSTANCE and result['diff']['before'] == ''


def test_an_absent_file_is_recorded_as_absent(record, tray):
    missing = str(tray / 'absent.cfg')
    result, _calls = record(files=[missing])
    assert result['files'] == {missing: None} and written(tray)['files'] == {missing: None}


@pytest.mark.parametrize('show, state', [
    ('ActiveState=failed\nInvocationID=%s\n' % INSTANCE, 'failed'),
    ('ActiveState=inactive\nInvocationID=\n', 'inactive'),
    ('ActiveState=active\nInvocationID=\n', 'active'),
])
def test_a_unit_without_a_running_instance_gets_no_record(record, tray, show, state):
    result, _calls = record(show=show)
    assert result['_exit_code'] == 0 and result['changed'] is False and result['recorded'] is False
    assert result['msg'] == 'nvidia-imex has no running instance (ActiveState=%s); nothing recorded' % state
    assert not (tray / 'run').exists()


def test_systemctl_that_does_not_answer_fails_naming_the_unit(record, tray):
    result, _calls = record(rc=124, show='')
    assert result['_exit_code'] == 1
    assert result['msg'] == 'systemctl show nvidia-imex did not answer within 30 s'
    assert not (tray / 'run').exists()


def test_a_service_that_is_no_unit_name_is_refused(record, tray):
    result, calls = record(service='../etc/passwd')
    assert result['_exit_code'] == 1 and result['msg'] == "service: '../etc/passwd' is not a systemd unit name"
    assert calls == []


@pytest.mark.parametrize('text', [
    '',
    'not json',
    '[]',
    json.dumps({'format': 2, 'invocation_id': INSTANCE, 'files': {}}),
    json.dumps({'format': 1, 'invocation_id': 'x' * 32, 'files': {}}),
    json.dumps({'format': 1, 'invocation_id': INSTANCE, 'files': {'/etc/x': 'short'}}),
    json.dumps({'format': 1, 'invocation_id': INSTANCE, 'files': []}),
])
def test_a_damaged_record_is_no_record(text):
    assert _daemon_record.parse(text) is None


def test_a_missing_record_is_no_record(tray):
    assert _daemon_record.read('nvidia-imex') is None


@pytest.mark.parametrize('prepare, reason', [
    (lambda run: (run / 'elsewhere').mkdir() or os.symlink(str(run / 'elsewhere'), str(run / 'loaded')),
     '/loaded is a symbolic link'),
    (lambda run: os.chmod(str(run), 0o1777), '/run is writable by group or others (mode 1777)'),
    (lambda run: (run / 'loaded').mkdir() or os.symlink('/etc/passwd', str(run / 'loaded' / 'nvidia-imex.json')),
     '/loaded/nvidia-imex.json is a symbolic link'),
])
def test_a_record_place_others_could_redirect_is_refused(record, tray, prepare, reason):
    run = tray / 'run'
    run.mkdir()
    prepare(run)
    result, _calls = record()
    assert result['_exit_code'] == 1
    assert result['msg'].startswith('refusing to record what nvidia-imex loaded in %s/loaded/nvidia-imex.json: '
                                    % run) and result['msg'].endswith(reason)


# --- the hosts block the instance resolved its slot names through ---------------------------------------

def test_the_hosts_block_the_instance_resolved_is_recorded(record, tray):
    (tray / 'hosts').write_text(HOSTS_WITH_BLOCK)
    result, _calls = record(hosts_file=str(tray / 'hosts'))
    digest = hashlib.sha256(split(HOSTS_WITH_BLOCK)[1].encode()).hexdigest()
    assert result['_exit_code'] == 0 and result['hosts_block'] == digest and written(tray)['hosts_block'] == digest
    assert _daemon_record.read('nvidia-imex')['hosts_block'] == digest


@pytest.mark.parametrize('content', [HOSTS, None])
def test_a_hosts_file_without_a_block_is_recorded_as_none(record, tray, content):
    if content is not None:
        (tray / 'hosts').write_text(content)
    result, _calls = record(hosts_file=str(tray / 'hosts'))
    assert result['_exit_code'] == 0 and result['hosts_block'] is None
    assert 'hosts_block' in written(tray) and written(tray)['hosts_block'] is None


def test_a_hosts_file_with_broken_markers_leaves_the_record_without_its_digest_and_warns(record, tray):
    (tray / 'hosts').write_text(HOSTS + BEGIN + '\n198.18.1.11\track1-slot-00\n')
    result, _calls = record(hosts_file=str(tray / 'hosts'))
    assert result['_exit_code'] == 0 and result['recorded'] is True and 'hosts_block' not in result
    assert 'hosts_block' not in written(tray) and _daemon_record.read('nvidia-imex')['files'] == result['files']
    assert len(result['_warnings']) == 1
    assert result['_warnings'][0].startswith('the hosts block nvidia-imex resolved is not recorded: %s: ' % (tray / 'hosts'))


def test_a_record_of_an_older_release_says_nothing_of_the_hosts_block():
    text = json.dumps({'format': 1, 'invocation_id': INSTANCE, 'files': {'/etc/x': None}})
    assert _daemon_record.parse(text) == {'invocation_id': INSTANCE, 'files': {'/etc/x': None}}


@pytest.mark.parametrize('value', ['short', 17, ['a' * 64]])
def test_a_record_with_a_damaged_hosts_block_is_no_record(value):
    assert _daemon_record.parse(json.dumps({'format': 1, 'invocation_id': INSTANCE, 'files': {},
                                            'hosts_block': value})) is None
