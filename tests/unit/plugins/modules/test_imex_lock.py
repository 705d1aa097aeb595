# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import functools
import json
import os
import socket
import stat
import time

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils import _lock
from ansible_collections.rackscale.imex.plugins.modules import imex_lock

ME = "ctl-a:4711:2025-01-31T12:00:00Z"
OTHER = "ctl-b:812:2025-01-31T11:58:02Z"
T0 = 1738324800.0  # 2025-01-31 12:00:00 UTC


class FakeTime:
    """Stands in for the time module inside _lock: a clock that only moves when slept on."""

    def __init__(self, now=T0, on_sleep=None):
        self.now = now
        self.elapsed = 0.0   # the monotonic clock: only sleeping moves it
        self.slept = []
        self.on_sleep = on_sleep

    def time(self):
        return self.now

    def monotonic(self):
        return self.elapsed

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds
        self.elapsed += seconds
        if self.on_sleep:
            self.on_sleep(len(self.slept))

    def __getattr__(self, name):
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(_lock, "time", fake)
    return fake


@pytest.fixture
def run(run_module, clock):
    """run(args, check=False) -> the imex_lock result; every run reads the fake clock."""
    return functools.partial(run_module, imex_lock)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "run" / "lock" / "rackscale-imex.lock"


def hold(path, owner=OTHER, since=T0 - 120, hostname="rack1-tray01", **more):
    """Leave a lock of another run on disk, as imex_lock of the previous release wrote it (no stale_after)
    unless ``more`` adds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict({"owner": owner, "since": since, "since_utc": _lock.utc_text(since),
                                     "hostname": hostname}, **more)) + "\n")


def snapshot(path):
    st = os.stat(str(path))
    return path.read_bytes(), st.st_ino, st.st_mtime_ns


def test_acquire_free_lock(run, path):
    result = run(dict(path=str(path), owner=ME))
    assert result["_exit_code"] == 0
    assert result["changed"] is True
    assert (result["holder"], result["since"], result["took_over"], result["waited"]) == (None, None, False, 0.0)
    assert result["holder_stale_after"] is None
    assert result["owner"] == ME
    assert "warnings" not in result
    record = json.loads(path.read_text())
    assert record == {"owner": ME, "since": T0, "since_utc": "2025-01-31 12:00:00 UTC",
                      "hostname": socket.gethostname(), "stale_after": 3600}
    assert result["lock"] == record
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o644
    assert not os.path.exists(str(path) + ".guard")


def test_reacquire_by_same_owner_is_unchanged(run, path, clock):
    run(dict(path=str(path), owner=ME))
    before = snapshot(path)
    clock.now += 300
    again = run(dict(path=str(path), owner=ME))
    assert again["_exit_code"] == 0
    assert again["changed"] is False
    assert (again["holder"], again["since"], again["took_over"]) == (ME, T0, False)
    assert again["holder_stale_after"] == 3600
    assert again["lock"]["since"] == T0
    assert snapshot(path) == before


def test_refresh_by_the_owner_writes_a_new_since(run, path, clock):
    run(dict(path=str(path), owner=ME))
    clock.now += 3000
    predicted = run(dict(path=str(path), owner=ME, refresh=True), check=True)
    assert predicted["changed"] is True and predicted["lock"]["since"] == T0 + 3000
    assert json.loads(path.read_text())["since"] == T0
    refreshed = run(dict(path=str(path), owner=ME, refresh=True))
    assert refreshed["_exit_code"] == 0 and refreshed["changed"] is True
    assert (refreshed["holder"], refreshed["since"]) == (ME, T0)
    assert json.loads(path.read_text())["since"] == T0 + 3000
    # Refreshed, the lock is not stale an hour after the run began.
    clock.now += 1000
    assert run(dict(path=str(path), owner=OTHER, stale_after=3600))["_exit_code"] == 1


def test_refresh_fails_when_the_lock_was_taken_over(run, path, clock):
    hold(path, owner=OTHER, since=T0)
    result = run(dict(path=str(path), owner=ME, refresh=True))
    assert result["_exit_code"] == 1 and result["holder"] == OTHER
    assert result["msg"].startswith("rack tray is locked by %s" % OTHER)


def test_a_lock_that_has_gone_fails_the_refresh_naming_the_tray_and_is_not_taken_again(run, path, clock):
    run(dict(path=str(path), owner=ME))
    path.unlink()  # a reboot of the tray cleared /run
    result = run(dict(path=str(path), owner=ME, refresh=True))
    assert result["_exit_code"] == 1 and result["holder"] is None
    assert result["msg"] == (
        "%s on %s: this run's lock has gone (a reboot clears /run, or it was removed by hand), so another run may "
        "have worked on this domain meanwhile; this run stops here: run it again" % (path, socket.gethostname()))
    assert not path.exists()
    # A check run's take writes no lock: its refresh finds none, as expected.
    predicted = run(dict(path=str(path), owner=ME, refresh=True), check=True)
    assert predicted["_exit_code"] == 0 and predicted["lock"]["owner"] == ME and not path.exists()
    # Taking a free lock without refresh is a take, and says nothing.
    taken = run(dict(path=str(path), owner=ME))
    assert taken["_exit_code"] == 0 and taken["_warnings"] == []


def test_a_lock_from_the_future_is_refused_naming_it(run, path, clock):
    hold(path, owner=OTHER, since=T0 + 86400)
    result = run(dict(path=str(path), owner=ME, stale_after=3600))
    assert result["_exit_code"] == 1
    assert result["msg"] == (
        "%s on %s was taken by %s at 2025-02-01 12:00:00 UTC, 86400 s in the future of this tray's clock "
        "(more than 300 s): it would never become stale; check the clocks, and remove the file once that run "
        "is gone" % (path, socket.gethostname(), OTHER))
    # A small skew is not refused.
    hold(path, owner=OTHER, since=T0 + 60)
    assert "would never become stale" not in run(dict(path=str(path), owner=ME))["msg"]


def test_a_directory_other_users_can_write_is_refused(run, path, clock):
    path.parent.mkdir(parents=True)
    os.chmod(str(path.parent), 0o1777)
    result = run(dict(path=str(path), owner=ME))
    assert result["_exit_code"] == 1
    assert result["msg"].startswith("%s, the directory of the lock file %s, is owned by uid %d with mode 1777: "
                                    "another user could create or replace the lock there"
                                    % (path.parent, path, os.geteuid()))
    assert not path.exists()


def test_a_new_directory_is_private(run, path, clock):
    assert run(dict(path=str(path), owner=ME))["_exit_code"] == 0
    assert stat.S_IMODE(os.stat(str(path.parent)).st_mode) == 0o700


def test_waiting_is_measured_on_the_monotonic_clock(run, path, clock):
    hold(path)

    def wall_clock_goes_back(calls):
        clock.now -= 100
    clock.on_sleep = wall_clock_goes_back
    result = run(dict(path=str(path), owner=ME, wait=10, interval=3))
    assert result["_exit_code"] == 1
    assert clock.slept == [3, 3, 3, 1] and result["waited"] == 10.0


def test_held_by_other_fails_naming_holder(run, path, clock):
    hold(path, since=T0 - 120)
    before = snapshot(path)
    result = run(dict(path=str(path), owner=ME))
    assert result["_exit_code"] == 1 and result["failed"] is True
    assert result["msg"].startswith(
        "rack tray is locked by %s since 2025-01-31 11:58:00 UTC (120 s ago); another rackscale.imex run is "
        "working on this domain; wait for it or, if it crashed, remove %s on %s"
        % (OTHER, path, socket.gethostname()))
    assert "stale_after" in result["msg"]
    assert (result["holder"], result["since"], result["took_over"], result["waited"]) == (OTHER, T0 - 120, False, 0.0)
    assert result["holder_stale_after"] is None
    assert clock.slept == []
    assert snapshot(path) == before


def test_wait_until_released(run, path, clock):
    hold(path)

    def other_run_finishes(calls):
        if calls == 3:
            path.unlink()
    clock.on_sleep = other_run_finishes
    result = run(dict(path=str(path), owner=ME, wait=60, interval=5))
    assert result["_exit_code"] == 0
    assert result["changed"] is True
    assert clock.slept == [5, 5, 5]
    assert result["waited"] == 15.0
    assert result["holder"] is None and result["took_over"] is False
    record = json.loads(path.read_text())
    assert record["owner"] == ME and record["since"] == T0 + 15


def test_wait_timeout(run, path, clock):
    hold(path)
    before = snapshot(path)
    result = run(dict(path=str(path), owner=ME, wait=10, interval=3))
    assert result["_exit_code"] == 1
    assert clock.slept == [3, 3, 3, 1]
    assert result["waited"] == 10.0
    assert result["msg"].startswith("rack tray is locked by %s since 2025-01-31 11:58:00 UTC (130 s ago)" % OTHER)
    assert "gave up after waiting 10 s (wait=10)" in result["msg"]
    assert snapshot(path) == before


def test_stale_lock_is_taken_over(run, path):
    hold(path, since=T0 - 3601)   # a lock of an earlier release, with no stale_after: the taker's decides
    result = run(dict(path=str(path), owner=ME))
    assert result["_exit_code"] == 0
    assert result["changed"] is True and result["took_over"] is True
    assert (result["holder"], result["since"], result["holder_stale_after"]) == (OTHER, T0 - 3601, None)
    assert json.loads(path.read_text())["owner"] == ME
    assert result["lock"]["owner"] == ME and result["lock"]["since"] == T0
    assert result["_warnings"] == [
        "%s: took over the abandoned lock of %s taken 2025-01-31 10:59:59 UTC (older than stale_after=3600 s); "
        "that run is assumed to have crashed" % (path, OTHER)]


def test_a_long_run_s_recorded_stale_after_keeps_a_shorter_one_from_taking_over(run, path, clock):
    hold(path, since=T0 - 3601, stale_after=7200)
    before = snapshot(path)
    result = run(dict(path=str(path), owner=ME, stale_after=600))
    assert result["_exit_code"] == 1 and result["took_over"] is False
    assert (result["holder"], result["holder_stale_after"]) == (OTHER, 7200)
    assert result["msg"].endswith("(a lock older than 7200 s (the stale_after its holder recorded, larger than "
                                  "this run's 600) is taken over automatically)")
    assert snapshot(path) == before
    # Once older than the holder's own limit, it is abandoned for every run.
    clock.now += 3600
    result = run(dict(path=str(path), owner=ME, stale_after=600))
    assert result["_exit_code"] == 0 and result["took_over"] is True and result["holder_stale_after"] == 7200
    assert json.loads(path.read_text())["stale_after"] == 600
    assert result["_warnings"] == [
        "%s: took over the abandoned lock of %s taken 2025-01-31 10:59:59 UTC (older than stale_after=7200 s, as its "
        "holder recorded); that run is assumed to have crashed" % (path, OTHER)]


def test_a_smaller_recorded_stale_after_does_not_shorten_the_taker_s(run, path):
    hold(path, since=T0 - 1000, stale_after=600)
    result = run(dict(path=str(path), owner=ME, stale_after=3600))
    assert result["_exit_code"] == 1 and result["holder_stale_after"] == 600
    assert result["msg"].endswith("(a lock older than 3600 s (stale_after) is taken over automatically)")
    assert json.loads(path.read_text())["owner"] == OTHER


def test_a_holder_that_recorded_zero_is_never_taken_over(run, path):
    hold(path, since=T0 - 10 * 86400, stale_after=0)
    result = run(dict(path=str(path), owner=ME, stale_after=600))
    assert result["_exit_code"] == 1 and result["holder_stale_after"] == 0
    assert result["msg"].endswith("(its holder recorded stale_after=0: this lock is never taken over)")
    assert json.loads(path.read_text())["owner"] == OTHER


def test_a_refresh_records_the_run_s_stale_after(run, path, clock):
    run(dict(path=str(path), owner=ME, stale_after=600))
    assert json.loads(path.read_text())["stale_after"] == 600
    clock.now += 60
    refreshed = run(dict(path=str(path), owner=ME, stale_after=7200, refresh=True))
    assert refreshed["holder_stale_after"] == 600 and refreshed["lock"]["stale_after"] == 7200
    assert json.loads(path.read_text())["stale_after"] == 7200


def test_lock_exactly_stale_after_old_is_still_held(run, path):
    hold(path, since=T0 - 3600)
    result = run(dict(path=str(path), owner=ME))
    assert result["_exit_code"] == 1 and result["holder"] == OTHER
    assert json.loads(path.read_text())["owner"] == OTHER


def test_stale_after_zero_never_takes_over(run, path):
    hold(path, since=T0 - 10 * 86400)
    result = run(dict(path=str(path), owner=ME, stale_after=0))
    assert result["_exit_code"] == 1
    assert "never taken over" in result["msg"]
    assert json.loads(path.read_text())["owner"] == OTHER


def test_stale_lock_taken_over_while_waiting(run, path, clock):
    hold(path, since=T0 - 50)
    result = run(dict(path=str(path), owner=ME, wait=120, interval=20, stale_after=100))
    assert result["_exit_code"] == 0
    assert clock.slept == [20, 20, 20]
    assert result["took_over"] is True and result["holder"] == OTHER and result["waited"] == 60.0


def test_unreadable_lock_counts_as_held(run, path, clock):
    path.parent.mkdir(parents=True)
    path.write_text("")
    os.utime(str(path), (T0 - 5, T0 - 5))
    result = run(dict(path=str(path), owner=ME))
    assert result["_exit_code"] == 1
    assert result["msg"].startswith("rack tray is locked by an unknown owner (empty lock file: %s) since "
                                    "2025-01-31 11:59:55 UTC (5 s ago)" % path)
    assert result["holder"] is None and result["holder_stale_after"] is None
    assert path.read_text() == ""


def test_release_by_owner(run, path):
    run(dict(path=str(path), owner=ME))
    result = run(dict(path=str(path), owner=ME, state="absent"))
    assert result["_exit_code"] == 0
    assert result["changed"] is True
    assert (result["holder"], result["since"], result["lock"]) == (ME, T0, None)
    assert result["holder_stale_after"] == 3600
    assert not path.exists()
    again = run(dict(path=str(path), owner=ME, state="absent"))
    assert again["changed"] is False and again["holder"] is None


def test_release_of_someone_elses_lock_is_refused(run, path):
    hold(path)
    before = snapshot(path)
    result = run(dict(path=str(path), owner=ME, state="absent"))
    assert result["_exit_code"] == 1
    assert result["msg"].startswith("refusing to release %s on %s: the lock is held by %s since "
                                    "2025-01-31 11:58:00 UTC (120 s ago), not by %s"
                                    % (path, socket.gethostname(), OTHER, ME))
    assert result["holder"] == OTHER and result["holder_stale_after"] is None
    assert snapshot(path) == before


def test_release_missing(run, path):
    result = run(dict(path=str(path), owner=ME, state="absent"))
    assert result["_exit_code"] == 0
    assert result["changed"] is False and result["holder"] is None
    assert not path.parent.exists()


def test_check_mode_acquire_free_creates_nothing(run, path):
    result = run(dict(path=str(path), owner=ME), check=True)
    assert result["_exit_code"] == 0
    assert result["changed"] is True and result["lock"]["owner"] == ME
    assert not path.parent.exists()


def test_check_mode_never_touches_the_file(run, path, clock):
    hold(path, since=T0 - 120)
    before = snapshot(path)
    held = run(dict(path=str(path), owner=ME, wait=4, interval=2), check=True)
    assert held["_exit_code"] == 1 and held["holder"] == OTHER
    assert held["msg"].startswith("rack tray is locked by %s" % OTHER)
    assert clock.slept == [2, 2]
    refused = run(dict(path=str(path), owner=ME, state="absent"), check=True)
    assert refused["_exit_code"] == 1
    clock.now += 7200
    stale = run(dict(path=str(path), owner=ME), check=True)
    assert stale["_exit_code"] == 0 and stale["changed"] is True and stale["took_over"] is True
    assert [text.split(" the abandoned")[0] for text in stale["_warnings"]] == ["%s: would take over" % path]
    mine = run(dict(path=str(path), owner=OTHER, state="absent"), check=True)
    assert mine["_exit_code"] == 0 and mine["changed"] is True
    assert snapshot(path) == before
    assert sorted(os.listdir(str(path.parent))) == [path.name]


def test_symlink_is_refused(run, path, tmp_path):
    path.parent.mkdir(parents=True)
    target = tmp_path / "elsewhere"
    os.symlink(str(target), str(path))
    result = run(dict(path=str(path), owner=ME))
    assert result["_exit_code"] == 1
    assert result["msg"] == ("%s is a symbolic link, not a lock file written by rackscale.imex.imex_lock; "
                             "refusing to follow it: remove it" % path)
    assert (result["owner"], result["holder"], result["took_over"], result["waited"]) == (ME, None, False, 0.0)
    assert result["holder_stale_after"] is None
    assert not target.exists()


@pytest.mark.parametrize("args, message", [
    (dict(owner="  "), "owner must not be empty"),
    (dict(owner=ME + "\n"), "must not have leading/trailing blanks or control characters"),
    (dict(owner=ME, wait=-1), "wait must be at least 0, got -1"),
    (dict(owner=ME, interval=0), "interval must be at least 1, got 0"),
    (dict(owner=ME, stale_after=-5), "stale_after must be at least 0, got -5"),
])
def test_bad_options(run, path, args, message):
    result = run(dict(args, path=str(path)))
    assert result["_exit_code"] == 1
    assert message in result["msg"]
    assert not path.parent.exists()
