# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""imex_nodes_config with slot names: the node list and the managed block of /etc/hosts in one write."""
from __future__ import annotations

import functools
import pathlib

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import describe, split
from ansible_collections.rackscale.imex.plugins.modules import imex_nodes_config

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "samples" / "hosts"
SLOTS = ["rack07-slot-00", "rack07-slot-01", "rack07-slot-02"]


@pytest.fixture
def run(run_module):
    return functools.partial(run_module, imex_nodes_config)


@pytest.fixture
def paths(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text((SAMPLES / "cloud_init_debian.txt").read_text())
    return tmp_path / "nodes_config.cfg", hosts


def args(paths, addresses, **extra):
    nodes, hosts = paths
    return dict(nodes=SLOTS, path=str(nodes), hosts_path=str(hosts), require_local=True,
                hosts_entries=[{"address": address, "name": name} for address, name in zip(addresses, SLOTS)], **extra)


def test_the_block_and_the_node_list_are_written_together_and_the_tray_found_through_it(run, paths, remote_addresses):
    addresses = remote_addresses(2) + ["127.0.0.1"]
    result = run(args(paths, addresses))
    assert result["_exit_code"] == 0, result.get("msg")
    assert (result["changed"], result["nodes_changed"], result["hosts_changed"]) == (True, True, True)
    assert result["local_index"] == 2
    text = paths[1].read_text()
    assert text.startswith((SAMPLES / "cloud_init_debian.txt").read_text())
    assert describe(text)["entries"] == [[address, name] for address, name in zip(addresses, SLOTS)]
    assert result["hosts_checksum"] == describe(text)["sha256"]
    assert paths[0].read_text() == "".join(name + "\n" for name in SLOTS)
    assert [diff["after_header"] for diff in result["diff"]] == [str(paths[0]), str(paths[1])]


def test_a_new_address_changes_the_block_alone_with_its_backup(run, paths, remote_addresses):
    addresses = remote_addresses(3) + ["127.0.0.1"]
    run(args(paths, addresses[:2] + ["127.0.0.1"]))
    assert run(args(paths, addresses[:2] + ["127.0.0.1"]))["changed"] is False
    before = paths[1].read_text()
    swapped = run(args(paths, [addresses[0], addresses[2], "127.0.0.1"], backup=True))
    assert (swapped["changed"], swapped["nodes_changed"], swapped["hosts_changed"]) == (True, False, True)
    assert pathlib.Path(swapped["hosts_backup_file"]).read_text() == before
    assert "backup_file" not in swapped
    assert describe(paths[1].read_text())["entries"][1] == [addresses[2], SLOTS[1]]


def test_check_mode_predicts_the_block_and_writes_nothing(run, paths, remote_addresses):
    before = paths[1].read_text()
    predicted = run(args(paths, remote_addresses(2) + ["127.0.0.1"]), check=True)
    assert (predicted["nodes_changed"], predicted["hosts_changed"], predicted["local_index"]) == (True, True, 2)
    assert paths[1].read_text() == before and not paths[0].exists()


def test_a_slot_name_mapped_outside_the_block_is_refused_before_anything_is_written(run, paths, remote_addresses):
    paths[1].write_text(paths[1].read_text() + "10.0.0.9 rack07-slot-01\n")
    before = paths[1].read_text()
    result = run(args(paths, remote_addresses(2) + ["127.0.0.1"]))
    assert result["_exit_code"] == 1
    assert result["msg"] == ("%s: lines outside the block of rackscale.imex map rack07-slot-01 (line 16) too: the "
                             "resolver could answer with them; remove them" % paths[1])
    assert paths[1].read_text() == before and not paths[0].exists()


def test_broken_markers_are_refused_naming_their_lines(run, paths, remote_addresses):
    paths[1].write_text(paths[1].read_text() + "# BEGIN rackscale.imex node names\n")
    result = run(args(paths, remote_addresses(2) + ["127.0.0.1"]))
    assert result["_exit_code"] == 1 and "BEGIN on line 16, END on lines none" in result["msg"]


def test_no_entries_remove_the_block_and_create_no_file(run, paths, remote_addresses, tmp_path):
    original = paths[1].read_text()
    run(args(paths, remote_addresses(2) + ["127.0.0.1"]))
    removed = run(dict(nodes=remote_addresses(2), path=str(paths[0]), hosts_path=str(paths[1]), hosts_entries=[]))
    assert removed["hosts_changed"] is True and split(paths[1].read_text())[1] is None
    assert paths[1].read_text() == original
    absent = tmp_path / "no-hosts"
    result = run(dict(nodes=remote_addresses(2), path=str(paths[0]), hosts_path=str(absent), hosts_entries=[]))
    assert result["hosts_changed"] is False and not absent.exists()


def test_this_tray_must_be_in_the_block(run, paths, remote_addresses):
    result = run(args(paths, remote_addresses(3)))
    assert result["_exit_code"] == 1 and "none of the entries" in result["msg"]
    assert not paths[0].exists()
