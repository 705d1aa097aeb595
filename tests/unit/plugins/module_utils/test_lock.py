# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import json
import multiprocessing
import os
import stat
import time

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils import _lock
from ansible_collections.rackscale.imex.plugins.module_utils._lock import (
    LockError,
    acquire,
    create,
    held_message,
    new_record,
    read_lock,
    release,
    take_over,
)

T0 = 1738324800.0  # 2025-01-31 12:00:00 UTC


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "rackscale-imex.lock")


def write(path, content):
    with open(path, "w") as handle:
        handle.write(content)


@pytest.mark.parametrize("content, problem", [
    ("", "empty lock file"),
    ("  \n", "empty lock file"),
    ("owner=me\n", "lock file is not JSON"),
    ('["a"]', "lock file is not a JSON object"),
    ('{"since": 1}', "lock file has no owner"),
    ('{"owner": " ", "since": 1}', "lock file has no owner"),
    ('{"owner": "x"}', "lock file has no valid since"),
    ('{"owner": "x", "since": true}', "lock file has no valid since"),
    ('{"owner": "x", "since": "yesterday"}', "lock file has no valid since"),
    ('{"owner": "x", "since": NaN}', "lock file has no valid since"),
])
def test_unreadable_lock_is_held_by_unknown_owner(path, content, problem):
    write(path, content)
    os.utime(path, (T0, T0))
    found = read_lock(path)
    assert found.owner is None
    assert found.since == T0
    assert found.problem == "%s: %s" % (problem, path)
    assert found.label() == "an unknown owner (%s: %s)" % (problem, path)


def test_read_valid_lock(path):
    write(path, json.dumps(new_record("run-1", T0, "rack1-tray03", 3600)))
    found = read_lock(path)
    assert (found.owner, found.since, found.hostname, found.ino) == ("run-1", T0, "rack1-tray03", os.stat(path).st_ino)
    assert found.record["since_utc"] == "2025-01-31 12:00:00 UTC"
    assert found.stale_after == found.record["stale_after"] == 3600


@pytest.mark.parametrize("recorded, read", [
    (7200, 7200), (0, 0), (900.0, 900), (1.5, 1.5),
    # Values a holder cannot have meant are ignored: the taker's own stale_after decides, as for an old lock.
    (-1, None), (True, None), ("7200", None), (None, None), (float("inf"), None),
])
def test_the_holder_s_recorded_stale_after(path, recorded, read):
    record = dict(owner="run-1", since=T0, since_utc="x", hostname="tray", stale_after=recorded)
    write(path, json.dumps(record))
    assert read_lock(path).stale_after == read


def test_a_lock_of_an_earlier_release_records_no_stale_after(path):
    write(path, json.dumps({"owner": "run-1", "since": T0, "since_utc": "x", "hostname": "tray"}))
    assert read_lock(path).stale_after is None


@pytest.mark.parametrize("own, recorded, effective", [
    (600, 7200, 7200), (7200, 600, 7200), (3600, None, 3600), (0, 7200, 0), (600, 0, 0), (0, None, 0),
])
def test_the_larger_stale_after_counts_and_zero_is_never(own, recorded, effective):
    assert _lock.effective_stale_after(own, recorded) == effective


def test_read_missing_and_non_regular(path, tmp_path):
    assert read_lock(path) is None
    os.mkdir(path)
    with pytest.raises(LockError, match="exists but is not a regular file; refusing"):
        read_lock(path)


def test_create_is_exclusive_and_readable_despite_umask(path):
    old_umask = os.umask(0o077)
    try:
        assert create(path, new_record("run-1", T0, "tray", 3600)) is True
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    before = open(path).read()
    assert create(path, new_record("run-2", T0 + 1, "tray", 3600)) is False
    assert open(path).read() == before
    assert json.loads(before)["owner"] == "run-1"


def test_create_never_follows_a_dangling_symlink(path, tmp_path):
    target = tmp_path / "target"
    os.symlink(str(target), path)
    assert create(path, new_record("run-1", T0, "tray", 3600)) is False
    assert not target.exists()


def test_take_over_refuses_a_lock_that_changed_meanwhile(path):
    write(path, json.dumps(new_record("crashed", T0 - 7200, "tray", 3600)))
    stale = read_lock(path)
    os.unlink(path)
    write(path, json.dumps(new_record("fresh", T0, "tray", 3600)))
    assert take_over(path, stale, new_record("me", T0, "tray", 3600)) is False
    assert read_lock(path).owner == "fresh"


def test_take_over_replaces_the_same_lock(path):
    write(path, json.dumps(new_record("crashed", T0 - 7200, "tray", 3600)))
    stale = read_lock(path)
    assert take_over(path, stale, new_record("me", T0, "tray", 3600)) is True
    assert read_lock(path).owner == "me"
    assert os.path.exists(path + ".guard")


def test_release_refuses_when_the_lock_changes_hands_while_releasing(path, monkeypatch):
    write(path, json.dumps(new_record("me", T0 - 7200, "tray", 3600)))
    real_guard = _lock._Guard

    class Intruder(real_guard):
        def __enter__(self):
            # Another run takes the (stale) lock over between our look and our removal.
            os.unlink(path)
            write(path, json.dumps(new_record("other", T0, "tray", 3600)))
            return super().__enter__()
    monkeypatch.setattr(_lock, "_Guard", Intruder)
    with pytest.raises(LockError) as info:
        release(path, "me", hostname="tray")
    assert info.value.message == ("refusing to release %s on tray: while releasing, the lock passed from me "
                                  "to other" % path)
    assert info.value.details["holder"] == "other"
    assert read_lock(path).owner == "other"


def test_held_message_names_whose_stale_after_decides():
    found = _lock.Found("run-1", T0 - 60, None, 1, stale_after=7200)
    assert held_message(found, "/x.lock", "tray", T0, stale_after=600).endswith(
        "(a lock older than 7200 s (the stale_after its holder recorded, larger than this run's 600) is taken "
        "over automatically)")
    assert held_message(found, "/x.lock", "tray", T0, stale_after=9000).endswith(
        "(a lock older than 9000 s (stale_after) is taken over automatically)")
    found.stale_after = 0
    assert held_message(found, "/x.lock", "tray", T0, stale_after=600).endswith(
        "(its holder recorded stale_after=0: this lock is never taken over)")


def test_held_message_for_a_clock_that_went_back():
    found = _lock.Found("run-1", T0 + 30, None, 1)
    message = held_message(found, "/run/lock/x.lock", "tray", T0, stale_after=0)
    assert message == ("rack tray is locked by run-1 since 2025-01-31 12:00:30 UTC (30 s in the future: this "
                       "tray's clock went back); another rackscale.imex run is working on this domain; wait for "
                       "it or, if it crashed, remove /run/lock/x.lock on tray (stale_after=0: abandoned locks "
                       "are never taken over)")


def test_acquire_creates_the_missing_directory(tmp_path):
    path = str(tmp_path / "run" / "lock" / "x.lock")
    result = acquire(path, "run-1", hostname="tray")
    assert result["changed"] is True
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert read_lock(path).owner == "run-1"


# Real races between processes: the lock must let exactly one run through.

def _contend(path, owner, barrier, queue, slow_reads):
    if slow_reads:
        real_read = _lock.read_lock

        def slow_read(lock_path):
            found = real_read(lock_path)
            time.sleep(0.05)  # widen the window between looking at the lock and acting on it
            return found
        _lock.read_lock = slow_read
    barrier.wait()
    try:
        result = acquire(path, owner, wait=0, stale_after=3600)
        queue.put((owner, "ok", result["took_over"]))
    except LockError as exc:
        queue.put((owner, "held", exc.details.get("holder")))
    except Exception as exc:  # report anything else to the parent instead of dying silently
        queue.put((owner, "error", repr(exc)))


def _race(path, runs, slow_reads):
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(runs)
    queue = context.Queue()
    owners = ["run-%d" % number for number in range(runs)]
    processes = [context.Process(target=_contend, args=(path, owner, barrier, queue, slow_reads))
                 for owner in owners]
    for process in processes:
        process.start()
    outcomes = sorted(queue.get(timeout=60) for _owner in owners)
    for process in processes:
        process.join(timeout=60)
    return outcomes


@pytest.mark.parametrize("attempt", range(3))
def test_concurrent_acquire_lets_exactly_one_run_in(path, attempt):
    outcomes = _race(path, 8, slow_reads=False)
    winners = [owner for owner, verdict, _detail in outcomes if verdict == "ok"]
    assert len(winners) == 1, outcomes
    assert read_lock(path).owner == winners[0]
    assert all(detail == winners[0] for owner, verdict, detail in outcomes if verdict == "held"), outcomes


@pytest.mark.parametrize("attempt", range(3))
def test_concurrent_takeover_of_an_abandoned_lock_lets_exactly_one_run_in(path, attempt):
    write(path, json.dumps(new_record("crashed", time.time() - 7200, "tray", 3600)))
    outcomes = _race(path, 6, slow_reads=True)
    winners = [owner for owner, verdict, _detail in outcomes if verdict == "ok"]
    assert len(winners) == 1, outcomes
    assert [detail for owner, verdict, detail in outcomes if verdict == "ok"] == [True]
    assert read_lock(path).owner == winners[0]
    assert all(detail == winners[0] for owner, verdict, detail in outcomes if verdict == "held"), outcomes


def test_a_refresh_of_a_lock_that_has_gone_raises_naming_the_tray_and_creates_nothing(tmp_path):
    path = str(tmp_path / "run.lock")
    acquire(path, "run-1", hostname="tray")
    os.unlink(path)
    with pytest.raises(_lock.LockError, match=r"^%s on tray: this run's lock has gone" % path):
        acquire(path, "run-1", hostname="tray", refresh_own=True)
    assert not os.path.exists(path)
