# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What runs on a tray: nvidia-smi compute processes, the Slurm node state and when a unit started."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils import _activity

# nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader on a busy GB200 tray.
BUSY = "1893402, /usr/bin/python3, 71680 MiB\n1893417, /opt/nccl-tests/build/all_reduce_perf, 2048 MiB\n"


def test_processes_are_listed_in_order():
    assert _activity.parse_compute_apps(BUSY) == [
        {"pid": 1893402, "name": "/usr/bin/python3", "used_memory": "71680 MiB"},
        {"pid": 1893417, "name": "/opt/nccl-tests/build/all_reduce_perf", "used_memory": "2048 MiB"}]


@pytest.mark.parametrize("idle", ["", "\n", "No running processes found\n"])
def test_an_idle_tray_has_no_process(idle):
    assert _activity.parse_compute_apps(idle) == []


def test_output_that_is_not_a_process_list_is_refused_not_read_as_idle():
    with pytest.raises(_activity.ParseError) as caught:
        _activity.parse_compute_apps("Failed to initialize NVML: Driver/library version mismatch\n")
    assert "is not a process" in caught.value.message


def test_slurm_state_and_when_it_means_a_job():
    line = "NodeName=rack1-tray02 Arch=aarch64 CoresPerSocket=72 State=MIXED+DRAIN ThreadsPerCore=1\n"
    assert _activity.parse_slurm_state(line) == "MIXED+DRAIN"
    assert _activity.parse_slurm_state("Node rack1-tray02 not found\n") is None
    assert [state for state in ("IDLE", "ALLOCATED", "MIXED+DRAIN", "DOWN+DRAIN", "COMPLETING", None, "idle+cloud")
            if _activity.slurm_busy(state)] == ["ALLOCATED", "MIXED+DRAIN", "COMPLETING"]


# scontrol show node NAME --oneliner of Slurm 24.05 on a GB200 tray, abridged.
NODE_LINE = ("NodeName=gpu-a07 Arch=aarch64 CoresPerSocket=72 CPUAlloc=0 CPUEfctv=144 CPUTot=144 "
             "NodeAddr=rack1-tray02 NodeHostName=rack1-tray02 Version=24.05.2 State=IDLE+DRAIN ThreadsPerCore=1\n")


@pytest.mark.parametrize("answer, expected", [
    ((0, NODE_LINE, "", False), {"state": "IDLE+DRAIN", "error": None}),
    # Slurm prints "not found" on stdout and the load error on stderr, both with rc 1.
    ((1, "Node gpu-a07 not found\n", "", False), {"state": None, "error": "Node gpu-a07 not found"}),
    ((1, "", "slurm_load_node error: Unable to contact slurm controller (connect failure)\n", False),
     {"state": None, "error": "slurm_load_node error: Unable to contact slurm controller (connect failure)"}),
    ((1, "partial\n", "\n  scontrol: error: first\nsecond\n", False), {"state": None, "error": "scontrol: error: first"}),
    ((124, "", "", True), {"state": None, "error": "scontrol show node gpu-a07 did not finish within 30 s and was stopped"}),
    ((3, "", "", False), {"state": None, "error": "scontrol show node gpu-a07 exited with rc 3 and printed nothing"}),
    ((0, "", "", False), {"state": None, "error": "scontrol show node gpu-a07 answered without a State= field"}),
])
def test_a_slurm_answer_is_a_state_or_one_line_why_not(answer, expected):
    assert _activity.read_slurm_answer("gpu-a07", *answer, seconds=30) == expected


def test_a_slurm_error_is_bounded():
    error = _activity.read_slurm_answer("n", 1, "", "e" * 1000, False, 30)["error"]
    assert len(error) == _activity.SLURM_ERROR_CHARS == 300 and error.endswith("...")


@pytest.mark.parametrize("text, usec", [("1234567891\n", 1234567891), ("0\n", None), ("", None), ("\n", None),
                                        ("n/a", None), ("-5", None)])
def test_monotonic_timestamps_of_systemctl_show(text, usec):
    assert _activity.parse_monotonic_usec(text) == usec


def test_a_monotonic_time_moves_onto_the_wall_clock():
    assert _activity.monotonic_to_epoch(1234567891, 1764000000.0) == 1764001234.567891
