# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What runs on a tray: nvidia-smi compute processes and the Slurm node state."""
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
