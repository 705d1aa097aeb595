# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import functools
import os
import shutil
import stat

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils import _files
from ansible_collections.rackscale.imex.plugins.modules import imex_config

STOCK = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "files", "stock_config.cfg")


@pytest.fixture
def run(run_module):
    return functools.partial(run_module, imex_config)


@pytest.fixture
def stock_bytes():
    with open(STOCK, "rb") as handle:
        return handle.read()


@pytest.fixture
def path(tmp_path):
    target = tmp_path / "config.cfg"
    shutil.copy(STOCK, str(target))
    os.chmod(str(target), 0o644)
    return target


def changed_lines(before, after):
    old, new = before.decode().split("\n"), after.decode().split("\n")
    return [(a, b) for a, b in zip(old, new) if a != b], new[len(old):], old[len(new):]


def test_edit_in_place_touches_only_managed_lines(run, path, stock_bytes):
    result = run(dict(path=str(path), settings={"SERVER_PORT": 50001, "IMEX_WAIT_FOR_QUORUM": "NONE",
                                                "IMEX_CMD_ENABLED": True}))
    assert result["_exit_code"] == 0
    assert result["changed"] is True
    assert result["settings"] == {"SERVER_PORT": "50001", "IMEX_WAIT_FOR_QUORUM": "NONE", "IMEX_CMD_ENABLED": "1"}
    changed, added, removed = changed_lines(stock_bytes, path.read_bytes())
    assert changed == [("SERVER_PORT=50000", "SERVER_PORT=50001"),
                       ("IMEX_WAIT_FOR_QUORUM=RECOVERY", "IMEX_WAIT_FOR_QUORUM=NONE")]
    assert added == [] and removed == []
    assert result["diff"]["before"] == stock_bytes.decode()
    assert result["diff"]["after"] == path.read_text()
    assert result["diff"]["before_header"] == result["diff"]["after_header"] == str(path)
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o644


def test_already_set_values_are_unchanged(run, path, stock_bytes):
    result = run(dict(path=str(path), settings={"IMEX_CMD_ENABLED": 1, "IMEX_CMD_PORT": "50005"}))
    assert result["changed"] is False
    assert result["settings"] == {"IMEX_CMD_ENABLED": "1", "IMEX_CMD_PORT": "50005"}
    assert path.read_bytes() == stock_bytes


def test_second_run_is_unchanged(run, path):
    settings = {"BIND_INTERFACE_IP": "198.18.1.11", "STATS_FILE_NAME": None, "LOG_LEVEL": 3}
    assert run(dict(path=str(path), settings=settings))["changed"] is True
    inode = os.stat(str(path)).st_ino
    again = run(dict(path=str(path), settings=settings))
    assert again["changed"] is False
    assert again["settings"] == {"BIND_INTERFACE_IP": "198.18.1.11", "STATS_FILE_NAME": None, "LOG_LEVEL": "3"}
    assert os.stat(str(path)).st_ino == inode


def test_check_mode_predicts_and_changes_nothing(run, path, stock_bytes):
    settings = {"SERVER_PORT": 50001, "IMEX_CONN_WAIT_TIMEOUT": 70}
    predicted = run(dict(path=str(path), settings=settings, allow_unknown=True, backup=True), check=True)
    assert predicted["changed"] is True
    assert "backup_file" not in predicted
    assert path.read_bytes() == stock_bytes
    assert os.listdir(str(path.parent)) == ["config.cfg"]
    real = run(dict(path=str(path), settings=settings, allow_unknown=True))
    assert predicted["diff"] == real["diff"] and predicted["settings"] == real["settings"]


def test_remove_key_and_append_new_key(run, path, stock_bytes):
    result = run(dict(path=str(path), settings={"STATS_FILE_NAME": None, "IMEX_CONN_WAIT_TIMEOUT": 70},
                      allow_unknown=True))
    assert result["settings"] == {"STATS_FILE_NAME": None, "IMEX_CONN_WAIT_TIMEOUT": "70"}
    expected = stock_bytes.replace(b"STATS_FILE_NAME=/var/log/nvidia-imex-stats.log\n", b"") + b"IMEX_CONN_WAIT_TIMEOUT=70\n"
    assert path.read_bytes() == expected


def test_backup(run, path, stock_bytes):
    result = run(dict(path=str(path), settings={"LOG_LEVEL": 2}, backup=True))
    with open(result["backup_file"], "rb") as handle:
        assert handle.read() == stock_bytes
    assert "backup_file" not in run(dict(path=str(path), settings={"LOG_LEVEL": 2}, backup=True))


def test_no_diff_without_diff_mode(run, path):
    assert "diff" not in run(dict(path=str(path), settings={"LOG_LEVEL": 2}), diff=False)


def attributes(path):
    st = os.stat(str(path))
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


def test_a_loose_config_is_repaired_root_0644_and_so_is_its_backup(run, path, stock_bytes):
    os.chmod(str(path), 0o666)
    os.chown(str(path), 65534, 65534)
    predicted = run(dict(path=str(path), settings={"LOG_LEVEL": 2}, backup=True), check=True)
    assert predicted["changed"] is True
    assert "mode 0666 -> 0644" in predicted["diff"]["prepared"]
    assert "owner %s -> root (0)" % _files.user_label(65534) in predicted["diff"]["prepared"]
    assert attributes(path) == (65534, 65534, 0o666)
    result = run(dict(path=str(path), settings={"LOG_LEVEL": 2}, backup=True))
    assert attributes(path) == (0, 0, 0o644)
    # backup_local copies the old mode; the copy of a world-writable config must not stay so.
    with open(result["backup_file"], "rb") as handle:
        assert handle.read() == stock_bytes
    assert attributes(result["backup_file"]) == (0, 0, 0o644)


def test_attributes_are_enforced_when_the_content_is_already_right(run, path):
    os.chmod(str(path), 0o666)
    result = run(dict(path=str(path), settings={"IMEX_CMD_PORT": 50005}))
    assert result["changed"] is True and result["diff"]["prepared"] == "%s: mode 0666 -> 0644\n" % path
    assert attributes(path) == (0, 0, 0o644)
    assert run(dict(path=str(path), settings={"IMEX_CMD_PORT": 50005}))["changed"] is False


def test_owner_group_and_mode_as_asked_octal_or_symbolic(run, path):
    run(dict(path=str(path), settings={"LOG_LEVEL": 2}, group="1234", mode="0640"))
    assert attributes(path) == (0, 1234, 0o640)
    assert run(dict(path=str(path), settings={"LOG_LEVEL": 2}, group="1234", mode="u=rw,g=r,o="))["changed"] is False
    run(dict(path=str(path), settings={"LOG_LEVEL": 3}, mode="o+r"))
    assert attributes(path) == (0, 0, 0o644)
    result = run(dict(path=str(path), settings={"LOG_LEVEL": 4}, mode="0999"))
    assert result["failed"] is True and result["msg"].startswith("%s: mode '0999' is neither an octal" % path)
    assert "LOG_LEVEL=3" in path.read_text()


def test_missing_file_fails_unless_create(run, tmp_path):
    path = tmp_path / "etc" / "nvidia-imex" / "config.cfg"
    result = run(dict(path=str(path), settings={"IMEX_CMD_PORT": 50005}))
    assert result["failed"] is True
    assert result["msg"].startswith("%s does not exist. It is the conffile shipped by the nvidia-imex package" % path)
    assert "create=true" in result["msg"]
    assert not path.parent.exists()
    predicted = run(dict(path=str(path), settings={"IMEX_CMD_PORT": 50005}, create=True), check=True)
    assert predicted["changed"] is True and not path.parent.exists()
    created = run(dict(path=str(path), settings={"IMEX_CMD_PORT": 50005}, create=True))
    assert created["changed"] is True
    assert path.read_text() == "IMEX_CMD_PORT=50005\n"
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(str(path.parent)).st_mode) == 0o755
    assert created["diff"]["before_header"] == "%s (absent)" % path
    assert run(dict(path=str(path), settings={"IMEX_CMD_PORT": 50005}, create=True))["changed"] is False


@pytest.mark.parametrize("settings, message", [
    ({"SERVER_PORT": 70000}, "SERVER_PORT: value '70000' is not an integer from 1 to 65535"),
    ({"IMEX_CMD_PORT": 0}, "IMEX_CMD_PORT: value '0' is not an integer from 1 to 65535"),
    ({"DAEMONIZE": "true"}, "DAEMONIZE: value 'true' is not 0 or 1"),
    ({"LOG_LEVEL": 7}, "LOG_LEVEL: value '7' is not an integer from 0 to 4"),
    ({"IMEX_WAIT_FOR_QUORUM": "ALL"}, "IMEX_WAIT_FOR_QUORUM: value 'ALL' is not one of 'NONE', 'RECOVERY', 'FULL'"),
    ({"IMEX_AUTH_ENCRYPTION_MODE": "TLS"}, "IMEX_AUTH_ENCRYPTION_MODE: value 'TLS' is not one of"),
    ({"IMEX_AUTH_SOURCE": "ENV"}, "IMEX_AUTH_SOURCE: value 'ENV' is not one of"),
    ({"IMEX_GSS_TIMEOUT_SEC": -5}, "IMEX_GSS_TIMEOUT_SEC: value '-5' is not an integer >= -1"),
    ({"BIND_INTERFACE_IP": "tray01"}, "BIND_INTERFACE_IP: value 'tray01' is not an IPv4/IPv6 address or empty"),
    ({"IMEX_NODE_CONFIG_FILE": "nodes.cfg"}, "IMEX_NODE_CONFIG_FILE: value 'nodes.cfg' is not an absolute path"),
    ({"LOG_FILE_NAME": "/var/log/x\nSERVER_PORT=1"}, "LOG_FILE_NAME: value '/var/log/x\\nSERVER_PORT=1' contains a line break"),
    ({"LOG_FILE_NAME": "/var/log/x # old"}, "contains '#'"),
    ({"SERVER_PORT": True}, "SERVER_PORT: value True is a boolean"),
    ({"IMEX_CONN_WAIT_TIMEOUT": 70}, "IMEX_CONN_WAIT_TIMEOUT: unknown config.cfg key (value '70')"),
    ({"imex_cmd_port": 50005}, "did you mean IMEX_CMD_PORT?"),
    ({"BAD KEY": 1}, "'BAD KEY' is not a valid config.cfg key"),
])
def test_rejections_name_key_and_value(run, path, stock_bytes, settings, message):
    result = run(dict(path=str(path), settings=settings))
    assert result["failed"] is True
    assert result["msg"].startswith("%s: " % path)
    assert message in result["msg"]
    assert path.read_bytes() == stock_bytes


def test_all_problems_reported_at_once(run, path):
    result = run(dict(path=str(path), settings={"SERVER_PORT": 0, "LOG_LEVEL": 9}))
    assert "SERVER_PORT: value '0'" in result["msg"] and "LOG_LEVEL: value '9'" in result["msg"]


def test_path_that_is_a_directory(run, tmp_path):
    result = run(dict(path=str(tmp_path), settings={"LOG_LEVEL": 2}))
    assert result["msg"] == "%s exists but is not a regular file" % tmp_path
