# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The managed block of /etc/hosts: everything outside it kept byte for byte, on real files."""
from __future__ import annotations

import pathlib

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import (
    BEGIN,
    END,
    HostsBlockError,
    block_digest,
    block_entries,
    describe,
    names_outside,
    render_block,
    replace_block,
    split,
    validate_entries,
    wanted_digest,
)

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "samples" / "hosts"
ENTRIES = [("198.18.1.11", "rack07-slot-00"), ("198.18.1.12", "rack07-slot-01"), ("198.18.1.13", "rack07-slot-02")]


def sample(name):
    return (SAMPLES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["cloud_init_debian.txt", "debian.txt", "rhel_no_final_newline.txt"])
def test_a_block_added_to_a_real_file_keeps_every_byte_of_it(name):
    text = sample(name)
    written = replace_block(text, ENTRIES)
    before, block, after = split(written)
    assert before.rstrip("\n") == text.rstrip("\n")
    assert written.startswith(text)
    assert block == render_block(ENTRIES)
    assert after == ""
    assert block_entries(block) == ENTRIES


@pytest.mark.parametrize("name", ["cloud_init_debian.txt", "debian.txt", "rhel_no_final_newline.txt"])
def test_rewriting_a_block_in_the_middle_keeps_what_follows_it(name):
    text = sample(name)
    middle = replace_block(text, ENTRIES) + "10.9.9.9 added-after-us\n"
    moved = [("198.18.1.11", "rack07-slot-00"), ("198.18.9.99", "rack07-slot-01"), ("198.18.1.13", "rack07-slot-02")]
    rewritten = replace_block(middle, moved)
    before, block, after = split(rewritten)
    assert after == "10.9.9.9 added-after-us\n"
    assert before == split(middle)[0]
    assert block_entries(block) == moved


def test_the_same_entries_rewrite_nothing_and_no_entries_remove_the_block():
    text = sample("debian.txt")
    once = replace_block(text, ENTRIES)
    assert replace_block(once, ENTRIES) == once
    assert replace_block(once, []) == text
    assert replace_block(text, []) == text


def test_the_digest_follows_the_block_alone():
    with_block = replace_block(sample("debian.txt"), ENTRIES)
    assert describe(with_block)["sha256"] == wanted_digest([{"address": a, "name": n} for a, n in ENTRIES])
    assert describe(with_block + "10.0.0.1 other\n")["sha256"] == describe(with_block)["sha256"]
    moved = replace_block(with_block, ENTRIES[:2] + [("198.18.1.99", "rack07-slot-02")])
    assert describe(moved)["sha256"] != describe(with_block)["sha256"]
    assert describe(sample("debian.txt")) == {"block": None, "sha256": None, "entries": [], "error": None}
    assert block_digest(None) is None and wanted_digest([]) is None


def test_a_block_is_found_by_its_markers_even_when_their_comment_was_edited():
    text = "127.0.0.1 localhost\n%s (edited)\n198.18.1.11 rack07-slot-00\n%s\n" % (BEGIN[:33], END)
    assert block_entries(split(text)[1]) == [("198.18.1.11", "rack07-slot-00")]
    assert replace_block(text, ENTRIES[:1]) == "127.0.0.1 localhost\n" + render_block(ENTRIES[:1])


@pytest.mark.parametrize("text, lines", [
    ("%s\n1.1.1.1 a\n" % BEGIN, "BEGIN on line 1, END on lines none"),
    ("%s\n%s\n%s\n%s\n" % (BEGIN, END, BEGIN, END), "BEGIN on lines 1, 3, END on lines 2, 4"),
    ("%s\n%s\n" % (END, BEGIN), "BEGIN on line 2, END on line 1"),
])
def test_broken_markers_are_refused_naming_their_lines(text, lines):
    with pytest.raises(HostsBlockError, match=lines):
        split(text)
    assert "repair the file by hand" in describe(text)["error"]


def test_names_mapped_outside_the_block_are_found_with_their_lines():
    text = replace_block("127.0.0.1 localhost\n10.0.0.5 RACK07-slot-01 # old\n", ENTRIES) + "10.0.0.6 rack07-slot-02.\n"
    assert names_outside(text, [name for _a, name in ENTRIES]) == {"rack07-slot-01": [2], "rack07-slot-02": [8]}
    assert names_outside(sample("cloud_init_debian.txt"), ["rack07-slot-00"]) == {}


def test_entries_are_validated_naming_each_bad_one():
    assert validate_entries([{"address": "2001:DB8::1", "name": "r-slot-00"}]) == [("2001:db8::1", "r-slot-00")]
    with pytest.raises(HostsBlockError) as caught:
        validate_entries([{"address": "rack07-tray01", "name": "a"}, ("10.0.0.1", "bad name"),
                          ("10.0.0.2", "ok-0"), ("10.0.0.3", "OK-0"), "x", ("10.0.0.4", "1.2")])
    assert caught.value.problems == [
        "entry 0: address 'rack07-tray01' is not an IPv4 or IPv6 address",
        "entry 1: 'bad name' is not a host name (RFC 1123)",
        "entry 3: name OK-0 is also entry 2",
        "entry 4 ('x') is not {address, name}",
        "entry 5: '1.2' is not a host name (RFC 1123)",
    ]
