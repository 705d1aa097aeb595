# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""imex_tray_info's read of the managed block of slot names in a hosts file (no fabric read, no command)."""
from __future__ import annotations

import pathlib

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import replace_block, wanted_digest
from ansible_collections.rackscale.imex.plugins.modules import imex_tray_info

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "samples" / "hosts"
ENTRIES = [("198.18.1.11", "rack07-slot-00"), ("198.18.1.12", "rack07-slot-01")]


@pytest.fixture
def read(run_module, tmp_path):
    def _read(text, names=()):
        hosts = tmp_path / "hosts"
        if text is None:
            hosts.unlink(missing_ok=True)
        else:
            hosts.write_text(text)
        result = run_module(imex_tray_info, dict(fabric=False, hosts_file=str(hosts), hosts_names=list(names)))
        assert result["_exit_code"] == 0, result.get("msg")
        found = result["hosts_block"]
        assert found.pop("path") == str(hosts)
        return found
    return _read


def test_the_block_is_read_with_the_digest_the_plan_compares(read):
    text = replace_block((SAMPLES / "debian.txt").read_text(), ENTRIES)
    assert read(text, ["rack07-slot-00"]) == {
        "exists": True, "sha256": wanted_digest([{"address": a, "name": n} for a, n in ENTRIES]),
        "entries": [list(entry) for entry in ENTRIES], "names_outside": {}, "error": None}


def test_a_file_without_a_block_or_without_the_file(read):
    assert read((SAMPLES / "cloud_init_debian.txt").read_text()) == {
        "exists": True, "sha256": None, "entries": [], "names_outside": {}, "error": None}
    assert read(None)["exists"] is False


def test_names_outside_the_block_and_broken_markers_are_told(read):
    text = replace_block("127.0.0.1 localhost\n10.1.1.1 rack07-slot-01\n", ENTRIES)
    assert read(text, ["rack07-slot-00", "rack07-slot-01"])["names_outside"] == {"rack07-slot-01": [2]}
    broken = read("127.0.0.1 localhost\n# END rackscale.imex node names\n")
    assert broken["sha256"] is None and "END on line 2" in broken["error"]
