# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which release the running IMEX daemon runs: systemctl show, /proc/<pid>/exe and the daemon's start
line in its log, from the vendor's published output."""
from __future__ import annotations

import os
import time

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils import _running_release

# The start of a 570.00 daemon log as published (blank lines between the configuration lines).
LOG_570 = (
    "IMEX Log initializing at: 3/25/2025 10:41:54.950\n"
    "[Mar 25 2025 10:41:54] [INFO] [tid 38] IMEX version 570.00 is running with the following configuration options\n"
    "\n"
    "[Mar 25 2025 10:41:54] [INFO] [tid 38] Logging level = 4\n"
    "\n"
    "[Mar 25 2025 10:41:54] [INFO] [tid 38] Identified this node as ID 1, using bind IP of '10.136.206.48', and "
    "network interface of enP2s2f1\n"
    "[Mar 25 2025 10:41:59] [INFO] [tid 61] Attaching to GPU 590080.\n"
)
# A 580.159.04 daemon that could not open its log file first says so on stderr.
LOG_580 = (
    "WARNING: failed to open IMEX log file  errno = No such file or directory\n"
    "INFO: using stderr for IMEX logging\n"
    "IMEX Log initializing at: 9/18/2026 06:40:33.561\n"
    "[Sep 18 2026 06:40:33] [INFO] [tid 77] IMEX version 580.159.04 is running with the following configuration "
    "options:\n"
    "[Sep 18 2026 06:40:33] [INFO] [tid 77] Logging level = 4\n"
    "[Sep 18 2026 06:40:33] [INFO] [tid 77] Treating node config entry 'compute-domain-daemon-7555db58d7-0000' as a "
    "host name.\n"
)
# 590 without GPUs: the same line ends differently (vendor prefix as the format gives it).
LOG_590 = "[Jan 7 2027 08:05:09] [INFO] [tid 12] IMEX version 590.48.01 is running in NO GPU MODE\n"


def local(year, month, day, clock):
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    return time.mktime((year, month, day, hours, minutes, seconds, 0, 0, -1))


def test_start_lines_of_each_published_layout():
    assert _running_release.start_lines(LOG_570) == [(local(2025, 3, 25, "10:41:54"), "570.00")]
    assert _running_release.start_lines(LOG_580) == [(local(2026, 9, 18, "06:40:33"), "580.159.04")]
    assert _running_release.start_lines(LOG_590) == [(local(2027, 1, 7, "08:05:09"), "590.48.01")]


def test_lines_that_only_mention_a_version_are_not_start_lines():
    text = ("[Mar 25 2025 10:41:54] [INFO] [tid 38] NvGpu Library version matched with GPU Driver version\n"
            "[Mar 25 2025 10:41:55] [ERROR] [tid 38] IMEX version 570.00 is running with a broken config\n"
            "IMEX version is: 570.148.08\n"
            "[Foo 25 2025 10:41:54] [INFO] [tid 38] IMEX version 570.00 is running\n")
    assert _running_release.start_lines(text) == []


def test_the_start_line_of_this_daemon_lies_between_the_unit_s_activation_and_its_main_process():
    restarted = LOG_570 + "[Mar 25 2025 11:00:02] [INFO] [tid 40] IMEX version 570.133.20 is running with the following " \
                          "configuration options\n"
    lines = _running_release.start_lines(restarted)
    # Whole seconds in the log: the line stamped 11:00:02 was written in the activation that began at 11:00:02.4.
    since, until = local(2025, 3, 25, "11:00:02") + 0.4, local(2025, 3, 25, "11:00:03")
    assert _running_release.release_started_between(lines, since, until) == "570.133.20"
    # This daemon's line is missing (LOG_LEVEL lowered, log cut): the earlier daemon's line says nothing of it.
    assert _running_release.release_started_between(lines[:1], since, until) is None
    # A line after the main process started is another start attempt, not this daemon.
    assert _running_release.release_started_between(lines, local(2025, 3, 25, "10:41:53"),
                                                    local(2025, 3, 25, "10:41:55")) == "570.00"
    assert _running_release.release_started_between([], since, until) is None


@pytest.mark.parametrize(("link", "replaced", "daemon"), [
    ("/usr/bin/nvidia-imex", False, True),
    ("/usr/bin/nvidia-imex (deleted)", True, True),          # the package replaced the binary under it
    ("/usr/bin/python3.11", False, False),                   # an interpreter runs the daemon: never run it
    ("/opt/wrapper (deleted)", True, False),
])
def test_what_proc_pid_exe_says(link, replaced, daemon):
    assert _running_release.executable_replaced(link) is replaced
    assert _running_release.is_daemon_binary(link) is daemon


def test_systemctl_show_gives_the_main_process_and_the_activation():
    show = _running_release.parse_show("MainPID=2417\nInactiveExitTimestampMonotonic=1234567891\n")
    assert _running_release.main_pid(show) == 2417
    assert show["InactiveExitTimestampMonotonic"] == "1234567891"
    assert _running_release.main_pid(_running_release.parse_show("MainPID=0\n")) is None
    assert _running_release.main_pid({}) is None


@pytest.mark.parametrize(("config", "level"), [
    ("LOG_LEVEL=4\n", 4), ("# LOG_LEVEL=1\nLOG_LEVEL = 3\n", 3), ("", 4), ("LOG_LEVEL=high\n", 4)])
def test_the_log_level_of_a_config(config, level):
    assert _running_release.log_level(config) == level


@pytest.mark.skipif(os.geteuid() != 0, reason="the log must be root's to be read")
def test_the_last_start_lines_are_found_from_the_end_of_a_long_appended_log(root_above, monkeypatch):
    monkeypatch.setattr(_running_release, "_LOG_CHUNK_BYTES", 1000)
    noise = "".join("[Mar 25 2025 10:42:%02d] [WARNING] [tid 61] Undelivered messages detected\n" % (i % 60)
                    for i in range(400))
    restart = "[Mar 25 2025 12:00:00] [INFO] [tid 40] IMEX version 570.133.20 is running with the following " \
              "configuration options\n"
    log = root_above / "nvidia-imex.log"
    log.write_text(LOG_570 + noise + restart + noise)
    assert [release for _when, release in _running_release.last_start_lines(str(log))] == ["570.133.20"]
    # Not searched past the bound: a start line further back is not found.
    assert _running_release.last_start_lines(str(log), search_bytes=5000) == []
    log.write_text(LOG_570 + noise)
    assert [release for _when, release in _running_release.last_start_lines(str(log))] == ["570.00"]
