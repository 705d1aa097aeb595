# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""imex_daemon_log: the daemon's last log lines from LOG_FILE_NAME, else the journal, bounded."""
from __future__ import annotations

import os
import stat
from unittest import mock

import pytest
from ansible.module_utils import basic

from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_log
from ansible_collections.rackscale.imex.plugins.modules import imex_daemon_log

TIMEOUT = '/usr/bin/timeout'
JOURNALCTL = '/usr/bin/journalctl'
# The real daemon's lines (vendor format) for a start that finds no interface of the node list.
FAILED_START = (
    "[Nov 24 2026 14:02:11] [INFO] [tid 41] IMEX version 580.95.09 is running with the following configuration options\n"
    "[Nov 24 2026 14:02:11] [INFO] [tid 41] Logging level = 4\n"
    "[Nov 24 2026 14:02:11] [ERROR] [tid 41] No matching network interface found for any IP addresses in the node "
    "configuration file /etc/nvidia-imex/nodes_config.cfg.\n"
)


@pytest.fixture
def run(run_module, root_above):
    def _run(args, journal=(0, '', '')):
        calls = []

        def run_command(self, argv, **kwargs):
            calls.append(argv)
            return journal

        bins = {'timeout': TIMEOUT, 'journalctl': JOURNALCTL}
        with mock.patch.multiple(basic.AnsibleModule, get_bin_path=lambda self, name, **kw: bins.get(name),
                                 run_command=run_command):
            result = run_module(imex_daemon_log, args, check=True)
        return result, calls
    return _run


def test_the_log_file_of_the_config_gives_the_last_lines(run, tmp_path):
    log = tmp_path / 'imex.log'
    log.write_text(FAILED_START)
    config = tmp_path / 'config.cfg'
    config.write_text('LOG_LEVEL=4\nLOG_FILE_NAME=%s\n' % log)
    result, calls = run({'config': str(config), 'lines': 2})
    assert result['_exit_code'] == 0 and calls == []
    assert result['source'] == 'file' and result['path'] == str(log) and result['truncated'] is True
    assert result['lines'][-1].endswith('No matching network interface found for any IP addresses in the node '
                                        'configuration file /etc/nvidia-imex/nodes_config.cfg.')
    assert len(result['lines']) == 2 and result['changed'] is False


def test_an_empty_log_file_name_means_the_journal(run, tmp_path):
    config = tmp_path / 'config.cfg'
    config.write_text('LOG_FILE_NAME=\n')
    result, calls = run({'config': str(config)}, journal=(0, 'line one\nline two\n', ''))
    assert calls == [[TIMEOUT, '-k', '5', '10', JOURNALCTL, '-u', 'nvidia-imex', '-n', '20', '--no-pager',
                      '-o', 'short-iso']]
    assert result['source'] == 'journal' and result['lines'] == ['line one', 'line two'] and 'path' not in result


def test_an_unreadable_log_file_falls_back_to_the_journal(run, tmp_path):
    config = tmp_path / 'config.cfg'
    config.write_text('LOG_FILE_NAME=%s\n' % (tmp_path / 'absent.log'))
    result, calls = run({'config': str(config)}, journal=(0, 'from the journal\n', ''))
    assert result['source'] == 'journal' and len(calls) == 1


def test_a_hung_or_failing_journalctl_fails_naming_it(run, tmp_path):
    config = tmp_path / 'config.cfg'
    config.write_text('LOG_FILE_NAME=\n')
    result, calls = run({'config': str(config), 'timeout': 3}, journal=(124, '', ''))
    assert result['_exit_code'] == 1 and 'did not finish within 3 s' in result['msg'] and len(calls) == 1
    result, calls = run({'config': str(config)}, journal=(1, '', 'No journal files were found.'))
    assert result['_exit_code'] == 1 and 'No journal files were found.' in result['msg'] and len(calls) == 1


@pytest.mark.parametrize('option,value', [('lines', 0), ('lines', 201), ('max_bytes', 10), ('timeout', 0)])
def test_bounds_are_refused(run, tmp_path, option, value):
    result, calls = run({'config': str(tmp_path / 'none.cfg'), option: value})
    assert result['_exit_code'] == 1 and option in result['msg'] and calls == []


def test_log_file_name_defaults_like_the_package_and_comments_are_ignored():
    assert _daemon_log.log_file_of('LOG_LEVEL=4\n') == '/var/log/nvidia-imex.log'
    assert _daemon_log.log_file_of('#LOG_FILE_NAME=/x\nLOG_FILE_NAME = /var/log/other.log \n') == '/var/log/other.log'
    assert _daemon_log.log_file_of('LOG_FILE_NAME=\n') == ''


def test_lines_are_escaped_and_bounded_in_bytes_newest_kept():
    lines, truncated = _daemon_log.last_lines('a\x1b[31mred\nb\u2028c\n' + 'x' * 300 + '\nlast\n', 10, 310)
    assert lines == ['x' * 300, 'last'] and truncated is True
    lines, truncated = _daemon_log.last_lines('a\x1b[31mred\nb\u2028c\x7f\n', 10, 4096)
    assert lines == ['a\\x1b[31mred', 'b\\u2028c\\x7f'] and truncated is False


def test_only_the_end_of_a_big_file_is_read(root_above, tmp_path):
    path = tmp_path / 'big.log'
    path.write_text(''.join('line %06d\n' % index for index in range(20000)))
    text = _daemon_log.read_tail(str(path), read_bytes=1000)
    assert text.endswith('line 019999\n') and len(text) <= 1000 and text.startswith('line ')


# --- what is never read as root -------------------------------------------------------------------

def config_naming(tmp_path, log_path):
    config = tmp_path / 'config.cfg'
    config.write_text('LOG_LEVEL=4\nLOG_FILE_NAME=%s\n' % log_path)
    return str(config)


def test_a_symlink_to_another_file_is_not_followed(run, tmp_path):
    secret = tmp_path / 'shadow'
    secret.write_text('root:$6$saltsalt$hashhashhash:19000:0:99999:7:::\n')
    link = tmp_path / 'imex.log'
    link.symlink_to(secret)
    result, calls = run({'config': config_naming(tmp_path, link)}, journal=(0, 'from the journal\n', ''))
    assert result['_exit_code'] == 0 and result['source'] == 'journal' and len(calls) == 1
    assert result['refused'] == '%s is not read: it is a symbolic link' % link
    assert 'hashhash' not in str(result)


@pytest.mark.parametrize('case, reason', [
    ('world-writable directory', 'its directory {d} is writable by everyone (mode 0777, group 0)'),
    ('group-writable directory', 'its directory {d} is writable by its group (mode 0775, group 4)'),
    ('directory of another user', 'its directory {d} is owned by uid 65534, not root'),
    ('file of another user', 'it is owned by uid 65534, not root'),
    ('fifo', 'it is not a regular file'),
])
def test_a_log_someone_else_could_have_placed_is_refused_and_the_journal_read(run, tmp_path, case, reason):
    directory = tmp_path / 'log'
    directory.mkdir(mode=0o755)
    log = directory / 'imex.log'
    if case == 'fifo':
        # Opened without O_NONBLOCK, a FIFO with no writer would hang the module.
        os.mkfifo(str(log))
    else:
        log.write_text(FAILED_START)
    if case == 'world-writable directory':
        os.chmod(str(directory), 0o777)
    elif case == 'group-writable directory':
        os.chown(str(directory), 0, 4)
        os.chmod(str(directory), 0o775)
    elif case == 'directory of another user':
        os.chown(str(directory), 65534, 65534)
    elif case == 'file of another user':
        os.chown(str(log), 65534, 65534)
    result, calls = run({'config': config_naming(tmp_path, log)}, journal=(0, 'from the journal\n', ''))
    assert result['_exit_code'] == 0 and result['source'] == 'journal' and result['lines'] == ['from the journal']
    assert result['refused'] == '%s is not read: %s' % (log, reason.format(d=directory))
    assert len(calls) == 1


def test_a_group_writable_directory_of_group_root_is_root_s_own(run, tmp_path):
    directory = tmp_path / 'log'
    directory.mkdir()
    os.chmod(str(directory), 0o775)
    log = directory / 'imex.log'
    log.write_text(FAILED_START)
    result, calls = run({'config': config_naming(tmp_path, log)})
    assert result['source'] == 'file' and calls == [] and 'refused' not in result


def test_a_relative_log_file_name_is_refused(run, tmp_path):
    result, calls = run({'config': config_naming(tmp_path, 'imex.log')}, journal=(0, 'x\n', ''))
    assert result['refused'] == 'LOG_FILE_NAME=imex.log is not an absolute path' and result['source'] == 'journal'


def test_the_reason_is_kept_when_the_journal_fails_too(run, tmp_path):
    result, calls = run({'config': config_naming(tmp_path, tmp_path / 'absent.log')}, journal=(1, '', 'No journal files were found.'))
    assert result['_exit_code'] == 1 and result['refused'].startswith('%s cannot be opened: ' % (tmp_path / 'absent.log'))


def test_a_file_under_a_sticky_world_writable_directory_is_refused_without_stand_ins(tmp_path, monkeypatch):
    # No stand-in for the directories here: pytest's tmp_path lies under /tmp (1777), where anyone can
    # plant a file; tmp_path stands for the log directory alone.
    monkeypatch.setattr(_daemon_log, 'LOG_DIRECTORY', str(tmp_path))
    open_to_all = [str(parent) for parent in tmp_path.parents if stat.S_IMODE(os.stat(str(parent)).st_mode) & 0o002]
    if not open_to_all:
        pytest.skip('no world-writable directory above %s' % tmp_path)
    log = tmp_path / 'imex.log'
    log.write_text(FAILED_START)
    with pytest.raises(_daemon_log.LogRefused) as refused:
        _daemon_log.read_tail(str(log))
    assert str(refused.value).startswith('%s is not read: its directory %s is writable by everyone' % (log, open_to_all[-1]))


OUTSIDE = "the daemon's log lies under /var/log"


@pytest.mark.parametrize(('named', 'reason'), [
    ('/etc/shadow', OUTSIDE), ('/var/log/../../etc/shadow', OUTSIDE), ('/var/log', OUTSIDE),
    ('/var/log/auth.log', '/var/log/auth.log belongs to other software, not to the daemon'),
    ('/var/log/journal/x/system.journal', '/var/log/journal belongs to other software, not to the daemon')])
def test_a_file_that_is_not_the_daemons_log_is_never_read_back(named, reason):
    with pytest.raises(_daemon_log.LogRefused) as refused:
        _daemon_log.open_log(named)
    assert str(refused.value) == '%s is not read: %s' % (named, reason)


def test_the_module_reads_the_journal_instead_of_a_file_outside_the_log_directory(run, tmp_path):
    result, calls = run({'config': config_naming(tmp_path, '/etc/shadow')}, journal=(0, 'from the journal\n', ''))
    assert result['source'] == 'journal' and result['lines'] == ['from the journal']
    assert result['refused'] == "/etc/shadow is not read: the daemon's log lies under %s" % tmp_path
