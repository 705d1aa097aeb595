# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""imex_daemon_log: the daemon's last log lines from LOG_FILE_NAME, else the journal, bounded."""
from __future__ import annotations

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
def run(run_module):
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


def test_only_the_end_of_a_big_file_is_read(tmp_path):
    path = tmp_path / 'big.log'
    path.write_text(''.join('line %06d\n' % index for index in range(20000)))
    text = _daemon_log.read_tail(str(path), read_bytes=1000)
    assert text.endswith('line 019999\n') and len(text) <= 1000 and text.startswith('line ')
