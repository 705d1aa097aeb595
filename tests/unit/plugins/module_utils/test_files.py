# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import errno
import os
import stat

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.rackscale.imex.plugins.module_utils import _files
from ansible_collections.rackscale.imex.plugins.module_utils._files import (
    FileOpError,
    ensure_directory,
    parse_mode,
    read_text,
    remove_file,
    replace_file,
    resolve_gid,
    resolve_uid,
)


@pytest.fixture
def make_module():
    def _make(check_mode=False):
        with patch_module_args({"_ansible_check_mode": check_mode}):
            return AnsibleModule(argument_spec={}, supports_check_mode=True)
    return _make


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _write(path, data, mode=0o644):
    with open(path, "wb") as handle:
        handle.write(data)
    os.chmod(path, mode)


# --- attribute helpers -------------------------------------------------------------------------

@pytest.mark.parametrize("given, expected", [("0644", 0o644), ("644", 0o644), ("0600", 0o600),
                                             ("1777", 0o1777), (0o640, 0o640), (None, None)])
def test_parse_mode_accepts_octal(given, expected):
    assert parse_mode(given) == expected


@pytest.mark.parametrize("given", ["u=rw,g=r", "0999", "rw-r--r--", "", True, 0o17777, -1, "012345"])
def test_parse_mode_rejects_non_octal(given):
    with pytest.raises(FileOpError) as err:
        parse_mode(given)
    assert repr(given) in str(err.value)


def test_resolve_owner_and_group_names_and_ids():
    assert resolve_uid("root") == 0
    assert resolve_uid("0") == 0
    assert resolve_uid(None) is None
    assert resolve_gid("root") == 0
    assert resolve_gid("1234") == 1234


def test_resolve_unknown_owner_and_group_are_named():
    with pytest.raises(FileOpError, match="owner 'no-such-user-imex' does not exist"):
        resolve_uid("no-such-user-imex")
    with pytest.raises(FileOpError, match="group 'no-such-group-imex' does not exist"):
        resolve_gid("no-such-group-imex")


# --- replace_file ------------------------------------------------------------------------------

def test_replace_creates_file_with_attributes_and_diff(make_module, tmp_path):
    target = tmp_path / "nodes_config.cfg"
    result = replace_file(make_module(), str(target), "10.0.0.1\n", owner="root", group="root", mode="0640")
    assert result["changed"] is True
    assert result["backup_file"] is None
    assert target.read_bytes() == b"10.0.0.1\n"
    assert _mode(target) == 0o640
    assert os.stat(target).st_uid == 0
    assert result["diff"] == {
        "before_header": "%s (absent)" % target,
        "after_header": str(target),
        "before": "",
        "after": "10.0.0.1\n",
    }


def test_replace_new_file_without_mode_uses_umask_default(make_module, tmp_path):
    target = tmp_path / "f"
    old = os.umask(0o027)
    try:
        replace_file(make_module(), str(target), "x\n")
    finally:
        os.umask(old)
    assert _mode(target) == 0o640


def test_replace_same_content_is_unchanged_and_untouched(make_module, tmp_path):
    target = tmp_path / "f"
    _write(target, b"a\n")
    inode = os.stat(target).st_ino
    result = replace_file(make_module(), str(target), "a\n", mode="0644")
    assert result["changed"] is False
    assert os.stat(target).st_ino == inode
    assert "prepared" not in result["diff"]


def test_replace_changes_content_atomically_and_keeps_old_mode(make_module, tmp_path):
    target = tmp_path / "f"
    _write(target, b"old\n", mode=0o600)
    inode = os.stat(target).st_ino
    result = replace_file(make_module(), str(target), "new\n")
    assert result["changed"] is True
    assert target.read_bytes() == b"new\n"
    assert _mode(target) == 0o600
    # a new inode proves the content arrived by rename, not by rewriting the old file in place
    assert os.stat(target).st_ino != inode
    assert result["diff"]["before"] == "old\n" and result["diff"]["after"] == "new\n"
    assert os.listdir(tmp_path) == ["f"]


def test_replace_check_mode_predicts_and_changes_nothing(make_module, tmp_path):
    target = tmp_path / "f"
    _write(target, b"old\n", mode=0o600)
    module = make_module(check_mode=True)
    result = replace_file(module, str(target), "new\n", mode="0644", backup=True)
    assert result["changed"] is True
    assert result["backup_file"] is None
    assert target.read_bytes() == b"old\n"
    assert _mode(target) == 0o600
    assert result["diff"]["after"] == "new\n"
    assert "mode 0600 -> 0644" in result["diff"]["prepared"]
    missing = tmp_path / "missing"
    assert replace_file(module, str(missing), "x\n")["changed"] is True
    assert not missing.exists()
    assert sorted(os.listdir(tmp_path)) == ["f"]


def test_replace_attribute_only_change(make_module, tmp_path):
    target = tmp_path / "f"
    _write(target, b"same\n", mode=0o600)
    result = replace_file(make_module(), str(target), "same\n", mode="0644")
    assert result["changed"] is True
    assert _mode(target) == 0o644
    assert result["diff"]["prepared"] == "%s: mode 0600 -> 0644\n" % target
    assert replace_file(make_module(), str(target), "same\n", mode="0644")["changed"] is False


def test_replace_owner_change_is_reported(make_module, tmp_path):
    target = tmp_path / "f"
    _write(target, b"same\n")
    os.chown(target, 1234, 1234)
    result = replace_file(make_module(), str(target), "same\n", owner="root", group="root")
    assert result["changed"] is True
    assert os.stat(target).st_uid == 0 and os.stat(target).st_gid == 0
    assert "owner 1234 -> root (0)" in result["diff"]["prepared"]
    assert "group 1234 -> root (0)" in result["diff"]["prepared"]


def test_replace_with_backup_keeps_old_content(make_module, tmp_path):
    target = tmp_path / "f"
    _write(target, b"old\n")
    result = replace_file(make_module(), str(target), "new\n", backup=True)
    assert result["backup_file"] and os.path.dirname(result["backup_file"]) == str(tmp_path)
    with open(result["backup_file"], "rb") as handle:
        assert handle.read() == b"old\n"
    # nothing to back up when the content does not change
    assert replace_file(make_module(), str(target), "new\n", backup=True)["backup_file"] is None


def test_backup_of_missing_file_is_none(make_module, tmp_path):
    result = replace_file(make_module(), str(tmp_path / "f"), "new\n", backup=True)
    assert result["changed"] is True and result["backup_file"] is None


def test_failed_write_leaves_old_file_and_no_temporary(make_module, tmp_path, monkeypatch):
    target = tmp_path / "f"
    _write(target, b"old\n")

    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_files.os, "fsync", no_space)
    with pytest.raises(FileOpError) as err:
        replace_file(make_module(), str(target), "new\n")
    assert str(target) in str(err.value)
    assert "No space left on device" in str(err.value)
    assert target.read_bytes() == b"old\n"
    assert os.listdir(tmp_path) == ["f"]


@pytest.mark.parametrize("backup", [False, True])
def test_a_read_only_file_system_keeps_the_old_file_and_leaves_no_copy(make_module, tmp_path, monkeypatch, backup):
    """/etc remounted read-only: the new content cannot even be staged, so no backup is taken either."""
    target = tmp_path / "config.cfg"
    _write(target, b"old\n")

    def read_only(**_kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(_files.tempfile, "mkstemp", read_only)
    with pytest.raises(FileOpError) as err:
        replace_file(make_module(), str(target), "new\n", backup=backup)
    assert str(target) in str(err.value) and "Read-only file system" in str(err.value)
    assert target.read_bytes() == b"old\n"
    assert os.listdir(tmp_path) == ["config.cfg"]


def test_failed_move_leaves_old_file_and_no_temporary(make_module, tmp_path, monkeypatch):
    target = tmp_path / "f"
    _write(target, b"old\n")
    module = make_module()

    def broken_move(src, dest, unsafe_writes=False, keep_dest_attrs=True):
        raise Exception("Could not replace %r with %r." % (dest, src))

    monkeypatch.setattr(module, "atomic_move", broken_move)
    with pytest.raises(FileOpError, match="cannot replace %s" % target):
        replace_file(module, str(target), "new\n")
    assert target.read_bytes() == b"old\n"
    assert os.listdir(tmp_path) == ["f"]


def test_replace_in_missing_directory_names_it(make_module, tmp_path):
    with pytest.raises(FileOpError, match="directory %s does not exist" % (tmp_path / "nope")):
        replace_file(make_module(), str(tmp_path / "nope" / "f"), "x\n")


def test_replace_refuses_directory_target(make_module, tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(FileOpError, match="is not a regular file"):
        replace_file(make_module(), str(tmp_path / "d"), "x\n")


def test_replace_follows_symlink_and_keeps_it(make_module, tmp_path):
    real = tmp_path / "shared.cfg"
    _write(real, b"old\n")
    link = tmp_path / "config.cfg"
    link.symlink_to(real)
    result = replace_file(make_module(), str(link), "new\n")
    assert result["changed"] is True
    assert link.is_symlink()
    assert real.read_bytes() == b"new\n"


def test_read_text_round_trips_undecodable_bytes(make_module, tmp_path):
    target = tmp_path / "f"
    _write(target, b"# caf\xe9\nKEY=1\n")
    text = read_text(str(target))
    assert replace_file(make_module(), str(target), text)["changed"] is False
    replace_file(make_module(), str(target), text.replace("KEY=1", "KEY=2"))
    assert target.read_bytes() == b"# caf\xe9\nKEY=2\n"
    assert read_text(str(tmp_path / "missing")) is None


# --- describe_file, stat_file ------------------------------------------------------------------

def test_describe_file_gives_the_target_s_change_time(tmp_path):
    target = tmp_path / "config.cfg"
    _write(target, b"LOG_LEVEL=2\n")
    link = tmp_path / "link.cfg"
    link.symlink_to(target)
    os.utime(str(target), (1, 1))    # a modification time set back does not move the change time back
    described = _files.describe_file(str(link))
    assert described["ctime"] == os.stat(str(target)).st_ctime
    assert isinstance(described["ctime"], float) and described["ctime"] > 1
    assert sorted(described) == ["content", "ctime", "error", "exists", "gid", "mode", "sha256", "uid"]
    assert _files.describe_file(str(tmp_path / "missing"))["ctime"] is None


def test_stat_file_reads_attributes_and_never_the_content(tmp_path, monkeypatch):
    key = tmp_path / "server.key"
    _write(key, b"secret\n", mode=0o600)

    def no_open(*args, **kwargs):
        raise AssertionError("stat_file opened a file")
    monkeypatch.setattr("builtins.open", no_open)
    monkeypatch.setattr(os, "open", no_open)
    assert _files.stat_file(str(key)) == {"exists": True, "ctime": os.stat(str(key)).st_ctime, "uid": os.getuid(),
                                          "gid": os.getgid(), "mode": "0600", "error": None}


def test_stat_file_of_what_is_not_a_readable_file(tmp_path):
    absent = {"exists": False, "ctime": None, "uid": None, "gid": None, "mode": None, "error": None}
    assert _files.stat_file(str(tmp_path / "missing")) == absent
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    assert _files.stat_file(str(dangling)) == absent
    assert _files.stat_file(str(tmp_path)) == dict(absent, error="%s exists but is not a regular file" % tmp_path)
    _write(tmp_path / "file", b"")
    under_a_file = str(tmp_path / "file" / "key")
    assert _files.stat_file(under_a_file) == dict(absent, error="cannot inspect %s: Not a directory" % under_a_file)


def test_path_presence_of_whatever_is_there(tmp_path):
    assert _files.path_presence(str(tmp_path)) == {"exists": True, "error": None}
    _write(tmp_path / "file", b"")
    assert _files.path_presence(str(tmp_path / "file")) == {"exists": True, "error": None}
    # A link counts, whatever it points to: the role removes the link.
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    assert _files.path_presence(str(dangling)) == {"exists": True, "error": None}
    assert _files.path_presence(str(tmp_path / "missing")) == {"exists": False, "error": None}
    under_a_file = str(tmp_path / "file" / "x")
    assert _files.path_presence(under_a_file) == {"exists": False,
                                                  "error": "cannot inspect %s: Not a directory" % under_a_file}


# --- remove_file -------------------------------------------------------------------------------

def test_remove_file(make_module, tmp_path):
    target = tmp_path / "f"
    _write(target, b"options nvidia X=1\n")
    check = remove_file(make_module(check_mode=True), str(target))
    assert check["changed"] is True and target.exists()
    result = remove_file(make_module(), str(target), backup=True)
    assert result["changed"] is True
    assert not target.exists()
    assert result["diff"] == {"before_header": str(target), "after_header": "%s (absent)" % target,
                              "before": "options nvidia X=1\n", "after": ""}
    with open(result["backup_file"], "rb") as handle:
        assert handle.read() == b"options nvidia X=1\n"
    assert remove_file(make_module(), str(target))["changed"] is False


def test_remove_refuses_directory(make_module, tmp_path):
    with pytest.raises(FileOpError, match="is a directory"):
        remove_file(make_module(), str(tmp_path))


# --- ensure_directory --------------------------------------------------------------------------

def test_ensure_directory_creates_parents_with_mode_despite_umask(make_module, tmp_path):
    wanted = tmp_path / "etc" / "nvidia-imex"
    assert ensure_directory(make_module(check_mode=True), str(wanted)) is True
    assert not (tmp_path / "etc").exists()
    old = os.umask(0o077)
    try:
        assert ensure_directory(make_module(), str(wanted), 0o755, 0, 0) is True
    finally:
        os.umask(old)
    assert _mode(wanted) == 0o755 and _mode(tmp_path / "etc") == 0o755
    assert ensure_directory(make_module(), str(wanted)) is False


def test_ensure_directory_existing_is_left_alone(make_module, tmp_path):
    os.chmod(tmp_path, 0o700)
    assert ensure_directory(make_module(), str(tmp_path)) is False
    assert _mode(tmp_path) == 0o700


def test_ensure_directory_file_in_the_way(make_module, tmp_path):
    _write(tmp_path / "etc", b"")
    with pytest.raises(FileOpError, match="%s exists but is not a directory" % (tmp_path / "etc")):
        ensure_directory(make_module(), str(tmp_path / "etc" / "nvidia-imex"))


def test_failed_backup_leaves_no_partial_copy_and_keeps_the_old_file(make_module, tmp_path, monkeypatch):
    target = tmp_path / "config.cfg"
    _write(str(target), b"old\n")
    module = make_module()

    def backup_that_runs_out_of_space(path):
        # What backup_local does on a full disk: the copy is created, then the write fails.
        partial = "%s.%d.2026-11-22@10:00:00~" % (path, os.getpid())
        open(partial, "wb").close()
        raise Exception("Could not make backup of %s to %s" % (path, partial)) from OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(module, "backup_local", backup_that_runs_out_of_space)
    with pytest.raises(FileOpError, match="cannot back up .*config.cfg before replacing it: .*No space left on device"):
        replace_file(module, str(target), b"new\n", backup=True)
    assert sorted(os.listdir(tmp_path)) == ["config.cfg"]
    assert target.read_bytes() == b"old\n"


# --- file common arguments ------------------------------------------------------------------------

@pytest.mark.parametrize("current, mode, expected", [
    (0o100666, "0644", 0o644), (0o100666, 0o600, 0o600), (0o100666, None, 0o666),
    (0o100666, "go-w", 0o644), (0o100600, "u=rw,g=r,o=r", 0o644), (0o100755, "a-x", 0o644),
])
def test_mode_after_takes_octal_and_symbolic_modes(current, mode, expected):
    assert _files.mode_after(current, mode) == expected


@pytest.mark.parametrize("mode", ["rw-r--r--", "0999", "", "u=q", True])
def test_mode_after_names_a_mode_that_is_neither(mode):
    with pytest.raises(FileOpError) as err:
        _files.mode_after(0o100644, mode)
    assert repr(mode) in str(err.value)


def test_the_backup_of_a_loose_file_gets_the_new_file_s_owner_and_mode(make_module, tmp_path):
    target = tmp_path / "config.cfg"
    _write(target, b"old\n", mode=0o666)
    os.chown(target, 65534, 65534)
    result = replace_file(make_module(), str(target), "new\n", owner="root", group="root", mode="0644", backup=True)
    for path in (str(target), result["backup_file"]):
        st = os.stat(path)
        assert (st.st_uid, st.st_gid, _mode(path)) == (0, 0, 0o644), path
    with open(result["backup_file"], "rb") as handle:
        assert handle.read() == b"old\n"


def test_file_args_of_the_module_are_applied_and_explicit_ones_fill_the_gaps(make_module, tmp_path):
    target = tmp_path / "f"
    file_args = {"owner": None, "group": "1234", "mode": "u=rw,g=r,o=", "seuser": None, "serole": None,
                 "setype": None, "selevel": None, "secontext": [None, None, None], "attributes": None,
                 "path": "/ignored"}
    replace_file(make_module(), str(target), "x\n", owner="root", mode="0600", file_args=file_args)
    st = os.stat(target)
    assert (st.st_uid, st.st_gid, _mode(target)) == (0, 1234, 0o640)
