# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import functools
import hashlib
import os
import stat

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils import _files
from ansible_collections.rackscale.imex.plugins.modules import imex_nodes_config


@pytest.fixture
def run(run_module):
    return functools.partial(run_module, imex_nodes_config)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "etc" / "nvidia-imex" / "nodes_config.cfg"


def test_create_with_parent_directory(run, path, remote_addresses):
    nodes = remote_addresses(2) + ["127.0.0.1"]
    result = run(dict(nodes=nodes, path=str(path)))
    content = "".join(entry + "\n" for entry in nodes)
    assert result["_exit_code"] == 0
    assert result["changed"] is True
    assert path.read_text() == content
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(str(path.parent)).st_mode) == 0o755
    assert result["nodes"] == nodes
    assert result["checksum"] == hashlib.sha256(content.encode()).hexdigest()
    assert result["local_index"] == 2
    assert "backup_file" not in result
    assert result["diff"] == {"before_header": "%s (absent)" % path, "after_header": str(path),
                              "before": "", "after": content}


def test_second_run_unchanged_with_same_checksum(run, path, remote_addresses):
    nodes = remote_addresses(3)
    first = run(dict(nodes=nodes, path=str(path)))
    inode = os.stat(str(path)).st_ino
    second = run(dict(nodes=nodes, path=str(path)))
    assert second["changed"] is False
    assert second["checksum"] == first["checksum"]
    assert second["local_index"] is None
    assert os.stat(str(path)).st_ino == inode


def test_check_mode_predicts_and_writes_nothing(run, path, remote_addresses):
    nodes = remote_addresses(2)
    predicted = run(dict(nodes=nodes, path=str(path)), check=True)
    assert predicted["changed"] is True
    assert not path.parent.exists()
    real = run(dict(nodes=nodes, path=str(path)))
    for key in ("changed", "nodes", "checksum", "local_index", "diff"):
        assert predicted[key] == real[key], key
    assert run(dict(nodes=nodes, path=str(path)), check=True)["changed"] is False


def test_comments_and_other_order_are_replaced_with_backup(run, path, remote_addresses):
    nodes = remote_addresses(2)
    path.parent.mkdir(parents=True)
    old = "## placeholder list\n%s\n%s\n" % (nodes[1], nodes[0])
    path.write_text(old)
    result = run(dict(nodes=nodes, path=str(path), backup=True))
    assert result["changed"] is True
    assert path.read_text() == "%s\n%s\n" % (nodes[0], nodes[1])
    assert result["diff"]["before"] == old
    with open(result["backup_file"]) as handle:
        assert handle.read() == old
    assert run(dict(nodes=nodes, path=str(path), backup=True)).get("backup_file") is None


def test_mode_and_owner_are_enforced(run, path, remote_addresses):
    nodes = remote_addresses(1)
    run(dict(nodes=nodes, path=str(path)))
    os.chmod(str(path), 0o600)
    os.chown(str(path), 1234, 1234)
    predicted = run(dict(nodes=nodes, path=str(path)), check=True)
    assert predicted["changed"] is True
    assert "mode 0600 -> 0644" in predicted["diff"]["prepared"]
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600
    result = run(dict(nodes=nodes, path=str(path)))
    st = os.stat(str(path))
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o644)
    assert result["changed"] is True
    custom = run(dict(nodes=nodes, path=str(path), owner="1234", group="1235", mode="0640"))
    st = os.stat(str(path))
    assert custom["changed"] is True and (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 1235, 0o640)


def test_hostnames_and_local_resolution(run, path):
    nodes = ["localhost"] + ["tray%02d.invalid" % i for i in range(2, 4)]
    result = run(dict(nodes=nodes, path=str(path)))
    assert result["local_index"] == 0
    assert path.read_text() == "localhost\ntray02.invalid\ntray03.invalid\n"


def test_require_local_passes_with_own_address(run, path, remote_addresses):
    nodes = remote_addresses(1) + ["127.0.0.1"]
    result = run(dict(nodes=nodes, path=str(path), require_local=True))
    assert result["changed"] is True and result["local_index"] == 1


def test_require_local_fails_without_own_address(run, path, remote_addresses):
    nodes = remote_addresses(2)
    result = run(dict(nodes=nodes, path=str(path), require_local=True))
    assert result["failed"] is True
    assert result["msg"].startswith("%s: none of the entries (%s, %s) is an address of this host"
                                    % (path, nodes[0], nodes[1]))
    assert "No matching network interface found" in result["msg"]
    assert not path.parent.exists()


def test_two_local_entries_warn(run, path):
    result = run(dict(nodes=["127.0.0.1", "127.0.0.2"], path=str(path)))
    assert result["local_index"] == 0
    assert any("nodes[0] '127.0.0.1', nodes[1] '127.0.0.2'" in str(warning) for warning in result["warnings"])


@pytest.mark.parametrize("extra, nodes, message", [
    ({}, ["10.0.0.1", "10.0.0.1"], "nodes[1] '10.0.0.1' (line 2) is the same node as nodes[0] '10.0.0.1'"),
    ({}, ["2001:db8::1", "2001:DB8:0::1"], "nodes[1] '2001:DB8:0::1' (line 2) is the same node as nodes[0]"),
    ({}, ["10.0.0.1", "2001:db8::1"], "nodes[1] '2001:db8::1' (line 2) is ipv6, but nodes[0] '10.0.0.1' is ipv4"),
    ({}, ["10.0.0.1", "10.0.0.2/24"], "nodes[1] '10.0.0.2/24' (line 2) contains '/'"),
    ({}, ["tray01", "tray02 "], "nodes[1] 'tray02 ' (line 2) contains whitespace"),
    ({}, ["tray01", "tray;02"], "nodes[1] 'tray;02' (line 2) contains ';'"),
    ({}, ["tray01", ""], "nodes[1] '' (line 2) is empty"),
    ({"allow_hostnames": False}, ["tray01"], "nodes[0] 'tray01' (line 1) is a host name, but allow_hostnames is false"),
    ({"max_nodes": 2}, ["10.0.0.1", "10.0.0.2", "10.0.0.3"], "3 entries, more than max_nodes=2"),
    ({"max_nodes": 0}, ["10.0.0.1"], "max_nodes must be at least 1"),
    ({}, [], "the node list is empty"),
])
def test_rejections_name_the_entry(run, path, extra, nodes, message):
    result = run(dict(nodes=nodes, path=str(path), **extra))
    assert result["failed"] is True
    assert result["msg"].startswith("%s: " % path)
    assert message in result["msg"]
    assert not path.parent.exists()


def test_mixed_families_allowed(run, path):
    result = run(dict(nodes=["10.0.0.1", "2001:db8::1", "tray03"], path=str(path), allow_mixed_families=True))
    assert result["changed"] is True


def test_bad_mode_and_owner_are_named(run, path):
    result = run(dict(nodes=["10.0.0.1"], path=str(path), mode="rw"))
    assert result["msg"] == ("%s: mode 'rw' is neither an octal mode such as '0644' nor a symbolic one such as "
                             "'u=rw,g=r,o=r'" % path)
    result = run(dict(nodes=["10.0.0.1"], path=str(path), owner="no-such-user-imex"))
    assert result["msg"] == "%s: owner 'no-such-user-imex' does not exist on this host" % path
    assert not path.exists()


def test_symbolic_mode_and_a_loose_file_repaired_with_its_backup(run, path):
    path.parent.mkdir(parents=True)
    path.write_text("10.0.0.9\n")
    os.chmod(str(path), 0o666)
    os.chown(str(path), 65534, 65534)
    predicted = run(dict(nodes=["10.0.0.1"], path=str(path), backup=True), check=True)
    assert predicted["changed"] is True
    assert predicted["diff"]["prepared"] == "%s: owner %s -> root (0), group %s -> root (0), mode 0666 -> 0644\n" % (
        path, _files.user_label(65534), _files.group_label(65534))
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o666
    result = run(dict(nodes=["10.0.0.1"], path=str(path), backup=True))
    for written in (str(path), result["backup_file"]):
        st = os.stat(written)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o644), written
    # A symbolic mode applies to the current bits, as chmod does; the content is unchanged.
    result = run(dict(nodes=["10.0.0.1"], path=str(path), mode="g+w,o="))
    assert result["changed"] is True and stat.S_IMODE(os.stat(str(path)).st_mode) == 0o660
    assert run(dict(nodes=["10.0.0.1"], path=str(path), mode="g+w,o="))["changed"] is False


def test_path_is_a_directory(run, tmp_path):
    result = run(dict(nodes=["10.0.0.1"], path=str(tmp_path)))
    assert result["failed"] is True and result["msg"] == "%s exists but is not a regular file" % tmp_path
