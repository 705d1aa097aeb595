# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# Copyright: rackscale.imex maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A run lock held on a tray, so that two rackscale.imex runs never work on one domain at once.

The lock is a small JSON file::

    {"owner": "<run id>", "since": <epoch seconds>, "since_utc": "YYYY-MM-DD HH:MM:SS UTC",
     "hostname": "<tray>", "stale_after": <seconds>}

* Acquire creates it by hard-linking a fully written file into place (link fails when the name
  exists): of two runs that find the tray free, exactly one gets it, and no run ever reads a lock
  that is still being written. The same owner finding its own lock is an idempotent re-acquire.
* Removing a lock (release by its owner, takeover of one abandoned by a crashed run) happens under
  an ``flock`` on ``<path>.guard`` and only after re-reading the file under that guard. Two runs
  that find the same abandoned lock therefore cannot both take it over, and a release never
  removes a lock that changed hands in between. The kernel drops an ``flock`` when its process
  dies, so the guard itself cannot be left behind held.
* A file that exists but cannot be read as a lock (empty, not JSON) counts as held by an unknown
  owner since its modification time: it is never silently ignored.
* The lock and its guard live in a directory only the module's user (root) can write, and both
  are owned by that user: in a directory others can write to (``/run/lock`` is 1777), a local user
  could create the lock first and block every run, or swap the file between two looks.
* The guard's ``flock`` is waited for at most ``GUARD_WAIT`` seconds; a lock whose ``since`` lies
  further than ``MAX_SKEW`` seconds in the future is refused (it would never become stale).
* The same owner taking its lock again with ``refresh`` writes a new ``since``, so that a run
  longer than ``stale_after`` is not taken over while it works, and fails if the lock changed hands.
* The holder records its own ``stale_after``; another run takes the lock over only once it is older
  than the larger of that and its own (0, never, being the largest), so a long run that allowed
  itself hours is not taken over by one that expects minutes.

Time stamps come from ``time.time()``, deadlines from ``time.monotonic()`` and waiting from
``time.sleep()`` (looked up at call time, so tests can replace them). Errors are raised as :class:`LockError` with a message naming the path and, for
a held lock, the holder and since when.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import socket
import stat
import tempfile
import time

from ansible_collections.rackscale.imex.plugins.module_utils._text import DetailedError

DEFAULT_PATH = "/run/rackscale-imex/run.lock"
GUARD_SUFFIX = ".guard"
LOCK_MODE = 0o644
DIR_MODE = 0o700
# Seconds to wait for the guard's flock (held only for a read and a rename or unlink).
GUARD_WAIT = 30
# Seconds a lock's since may lie in the future (clock skew between two runs' looks at the tray).
MAX_SKEW = 300
_MAX_BYTES = 64 * 1024


class LockError(DetailedError):
    """The lock could not be taken or released; ``details`` go into the module result."""


class Found:
    """A lock file as found on disk."""

    __slots__ = ("owner", "since", "hostname", "ino", "problem", "record", "stale_after")

    def __init__(self, owner, since, hostname, ino, problem=None, record=None, stale_after=None):
        self.owner = owner          # None when the file is not a readable lock
        self.since = since          # epoch seconds; the file's mtime when unreadable
        self.hostname = hostname
        self.ino = ino
        self.problem = problem      # why the file is not a readable lock, else None
        self.record = record        # the parsed JSON object when readable
        self.stale_after = stale_after  # the holder's own stale_after; None when it recorded none

    def label(self):
        if self.owner is not None:
            return self.owner
        return "an unknown owner (%s)" % self.problem

    def same_as(self, other):
        return (other is not None and self.ino == other.ino and self.owner == other.owner
                and self.since == other.since)


def _reason(exc):
    return exc.strerror or str(exc)


def utc_text(epoch):
    """'2025-01-31 12:00:00 UTC' for an epoch time."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def new_record(owner, now, hostname, stale_after):
    return {"owner": owner, "since": round(now, 3), "since_utc": utc_text(now), "hostname": hostname,
            "stale_after": stale_after}


def _recorded_stale_after(record):
    """The holder's stale_after from its record, or None when it has none that can be used."""
    value = record.get("stale_after")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return int(value) if value == int(value) else value


def effective_stale_after(own, recorded):
    """Seconds after which a lock counts as abandoned, for a run with ``own`` finding ``recorded``.

    The larger of the two wins, 0 (never) counting as the largest: the holder knows how long its
    run may take. Locks written before the holder recorded its value (``recorded`` None) keep the
    earlier rule: the taker's own value alone.
    """
    if recorded is None:
        return own
    if own == 0 or recorded == 0:
        return 0
    return max(own, recorded)


def _parse(data):
    """(record, None) for a valid lock file content, (None, reason) otherwise."""
    if not data.strip():
        return None, "empty lock file"
    if len(data) > _MAX_BYTES:
        return None, "lock file larger than %d bytes" % _MAX_BYTES
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, "lock file is not JSON"
    if not isinstance(record, dict):
        return None, "lock file is not a JSON object"
    owner = record.get("owner")
    if not isinstance(owner, str) or not owner.strip():
        return None, "lock file has no owner"
    since = record.get("since")
    if isinstance(since, bool) or not isinstance(since, (int, float)) or not math.isfinite(since):
        return None, "lock file has no valid since"
    return record, None


def read_lock(path):
    """The lock at ``path`` as :class:`Found`, or None when there is none.

    Symbolic links, non-regular files and files of another owner are refused rather than used.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LockError("cannot inspect lock file %s: %s" % (path, _reason(exc))) from exc
    if stat.S_ISLNK(st.st_mode):
        raise LockError("%s is a symbolic link, not a lock file written by rackscale.imex.imex_lock; "
                        "refusing to follow it: remove it" % path)
    if not stat.S_ISREG(st.st_mode):
        raise LockError("%s exists but is not a regular file; refusing to use it as the run lock" % path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LockError("cannot read lock file %s: %s" % (path, _reason(exc))) from exc
    try:
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            if st.st_uid != os.geteuid():
                raise LockError("%s is owned by uid %d, not by uid %d that runs rackscale.imex.imex_lock; "
                                "refusing to use it as the run lock: remove it" % (path, st.st_uid, os.geteuid()))
            data = handle.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise LockError("cannot read lock file %s: %s" % (path, _reason(exc))) from exc
    record, problem = _parse(data)
    if record is None:
        return Found(None, st.st_mtime, None, st.st_ino, problem="%s: %s" % (problem, path))
    hostname = record.get("hostname")
    return Found(record["owner"], float(record["since"]),
                 hostname if isinstance(hostname, str) else None, st.st_ino, record=record,
                 stale_after=_recorded_stale_after(record))


def create(path, record, replace=False):
    """Create the lock file atomically. True when created, False when a lock file already exists.

    The record is written to a temporary file first and then hard-linked into place (link fails
    when the name exists), so another run never reads a lock file that is still empty or half
    written: it always finds no lock or the whole record of its holder. With ``replace`` (under the
    guard only) the temporary file is renamed over the existing lock instead.
    """
    data = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp_path = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".new", dir=directory)
    except OSError as exc:
        raise LockError("cannot create lock file %s: %s" % (path, _reason(exc))) from exc
    try:
        try:
            os.fchmod(fd, LOCK_MODE)  # the umask may have narrowed it; operators should be able to read it
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.rename(tmp_path, path)
        else:
            os.link(tmp_path, path)
    except FileExistsError:
        return False
    except OSError as exc:
        raise LockError("cannot write lock file %s: %s" % (path, _reason(exc))) from exc
    finally:
        _unlink_quietly(tmp_path)
    return True


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


class _Guard:
    """Exclusive flock on ``<path>.guard`` for the duration of a ``with`` block, waited for at
    most ``GUARD_WAIT`` seconds."""

    def __init__(self, path):
        self.path = path + GUARD_SUFFIX
        self.fd = None

    def __enter__(self):
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            if os.fstat(self.fd).st_uid != os.geteuid():
                raise LockError("%s is owned by uid %d, not by uid %d that runs rackscale.imex.imex_lock; "
                                "refusing to use it as the guard of the run lock: remove it"
                                % (self.path, os.fstat(self.fd).st_uid, os.geteuid()))
            deadline = time.monotonic() + GUARD_WAIT
            while True:
                try:
                    fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockError("%s (guard of the run lock) stayed locked for more than %d s: a process "
                                        "holds it (fuser %s names it)" % (self.path, GUARD_WAIT, self.path))
                    time.sleep(0.05)
        except (OSError, LockError) as exc:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
            if isinstance(exc, LockError):
                raise
            raise LockError("cannot lock %s (guard of the run lock): %s" % (self.path, _reason(exc))) from exc
        return self

    def __exit__(self, *exc_info):
        os.close(self.fd)  # closing drops the flock
        self.fd = None
        return False


def _remove_if_unchanged(path, found):
    """Remove the lock file if it still is ``found``; call under the guard. True when removed."""
    current = read_lock(path)
    if not found.same_as(current):
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise LockError("cannot remove lock file %s: %s" % (path, _reason(exc))) from exc
    return True


def take_over(path, found, record):
    """Replace the abandoned lock ``found`` by ``record``. False when the lock changed meanwhile."""
    with _Guard(path):
        if not _remove_if_unchanged(path, found):
            return False
        # A run that does not need the guard (it found no lock) may create the file right after
        # the removal; then it holds the lock and the caller looks again.
        return create(path, record)


def refresh(path, found, record):
    """Replace the caller's own lock ``found`` by ``record`` (a new since). False when the lock
    changed meanwhile."""
    with _Guard(path):
        if not found.same_as(read_lock(path)):
            return False
        return create(path, record, replace=True)


def ensure_directory(path):
    """Create the lock's directory (mode 0700) or check that only this user can write it."""
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, DIR_MODE, exist_ok=True)
        st = os.lstat(parent)
    except OSError as exc:
        raise LockError("cannot create directory %s for the lock file %s: %s"
                        % (parent, path, _reason(exc))) from exc
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise LockError("%s, the directory of the lock file %s, is a symbolic link or not a directory; "
                        "refusing to use it" % (parent, path))
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        shown = (parent, path, st.st_uid, stat.S_IMODE(st.st_mode), os.geteuid(), DEFAULT_PATH)
        raise LockError("%s, the directory of the lock file %s, is owned by uid %d with mode %04o: another user "
                        "could create or replace the lock there; use a directory only uid %d can write "
                        "(the default path is %s)" % shown)


def _age_text(age):
    if age < 0:
        return "%d s in the future: this tray's clock went back" % round(-age)
    return "%d s ago" % round(age)


def _stale_after_source(own, recorded):
    """Whose stale_after decides, for the messages."""
    if recorded is None or effective_stale_after(own, recorded) == own:
        return "stale_after"
    return "the stale_after its holder recorded, larger than this run's %d" % own


def held_message(found, path, tray, now, waited=None, wait=0, stale_after=0):
    """The failure message for a lock held by another run (``stale_after``: this run's own)."""
    message = ("rack tray is locked by %s since %s (%s); another rackscale.imex run is working on "
               "this domain; wait for it or, if it crashed, remove %s on %s"
               % (found.label(), utc_text(found.since), _age_text(now - found.since), path, tray))
    notes = []
    if wait:
        notes.append("gave up after waiting %d s (wait=%d)" % (round(waited or 0), wait))
    effective = effective_stale_after(stale_after, found.stale_after)
    if effective:
        notes.append("a lock older than %d s (%s) is taken over automatically"
                     % (effective, _stale_after_source(stale_after, found.stale_after)))
    elif stale_after:
        notes.append("its holder recorded stale_after=0: this lock is never taken over")
    else:
        notes.append("stale_after=0: abandoned locks are never taken over")
    return "%s (%s)" % (message, "; ".join(notes))


def _holder_details(found):
    """The keys of a result that describe the lock found (None: there was none)."""
    return {
        "holder": found.owner if found is not None else None,
        "since": found.since if found is not None else None,
        "holder_stale_after": found.stale_after if found is not None else None,
    }


def _result(owner, changed, found, waited, took_over=False, lock=None):
    # No "path" key: AnsibleModule.exit_json would add that file's attributes, its owner among them.
    result = {"changed": changed, "owner": owner}
    result.update(_holder_details(found))
    result.update(took_over=took_over, waited=round(waited, 1), lock=lock)
    return result


def acquire(path, owner, wait=0, interval=2, stale_after=3600, check_mode=False, hostname=None,
            refresh_own=False):
    """Take the lock for ``owner``; returns the module result or raises :class:`LockError`.

    ``holder``/``since``/``holder_stale_after`` in the result describe the lock found before
    acting: None when the tray was free, ``owner`` on a re-acquire, the crashed run on a takeover.
    ``lock`` is the record that is (check mode: would be) in the file afterwards; it records
    ``stale_after``. A lock held by another owner is waited for up to ``wait`` seconds, polling every
    ``interval``; a lock older than :func:`effective_stale_after` of ``stale_after`` and the one its
    holder recorded (0: never) is taken over. With ``refresh_own``, the owner's own lock gets a new
    since, and a lock that has gone is a failure, never taken again. Check mode waits and fails the
    same way but writes nothing.
    """
    tray = hostname or socket.gethostname()
    if not check_mode or os.path.isdir(os.path.dirname(os.path.abspath(path))):
        ensure_directory(path)
    started = time.monotonic()
    deadline = started + wait
    while True:
        found = read_lock(path)
        now = time.time()
        waited = max(0.0, time.monotonic() - started)
        if found is not None and found.since - now > MAX_SKEW:
            raise LockError("%s on %s was taken by %s at %s, %d s in the future of this tray's clock (more than "
                            "%d s): it would never become stale; check the clocks, and remove the file once "
                            "that run is gone" % (path, tray, found.label(), utc_text(found.since),
                                                  round(found.since - now), MAX_SKEW),
                            owner=owner, took_over=False, waited=round(waited, 1), **_holder_details(found))
        if found is None and refresh_own and not check_mode:
            # The run took this lock before: gone, it was not held while the run worked (a reboot clears
            # /run, or a hand removed it). A check run writes no lock, so there a missing one is expected.
            raise LockError("%s on %s: this run's lock has gone (a reboot clears /run, or it was removed by hand), "
                            "so another run may have worked on this domain meanwhile; this run stops here: run "
                            "it again" % (path, tray),
                            owner=owner, took_over=False, waited=round(waited, 1), **_holder_details(None))
        if found is None:
            record = new_record(owner, now, tray, stale_after)
            if check_mode:
                return _result(owner, True, None, waited, lock=record)
            if create(path, record):
                return _result(owner, True, None, waited, lock=record)
            continue  # another run was faster; look at its lock
        if found.owner == owner:
            if not refresh_own:
                return _result(owner, False, found, waited, lock=found.record)
            record = new_record(owner, now, tray, stale_after)
            if check_mode or refresh(path, found, record):
                return _result(owner, True, found, waited, lock=record)
            continue  # taken over meanwhile; look at the new holder
        limit = effective_stale_after(stale_after, found.stale_after)
        if limit and now - found.since > limit:
            record = new_record(owner, now, tray, stale_after)
            if check_mode or take_over(path, found, record):
                return _result(owner, True, found, waited, took_over=True, lock=record)
            continue  # the lock changed hands meanwhile; look again
        left = deadline - time.monotonic()
        if left <= 0:
            raise LockError(held_message(found, path, tray, now, waited, wait, stale_after),
                            owner=owner, took_over=False, waited=round(waited, 1), **_holder_details(found))
        time.sleep(max(0.0, min(interval, left)))


def release(path, owner, check_mode=False, hostname=None):
    """Remove the lock if ``owner`` holds it; returns the module result or raises :class:`LockError`.

    A missing lock is fine (nothing to do). A lock held by anyone else, or unreadable, is refused:
    removing it would let a third run in while its holder is still working.
    """
    tray = hostname or socket.gethostname()
    found = read_lock(path)
    now = time.time()
    if found is None:
        return _result(owner, False, None, 0.0)
    if found.owner != owner:
        raise LockError(
            "refusing to release %s on %s: the lock is held by %s since %s (%s), not by %s; only the "
            "run that took it releases it (if that run crashed, remove %s by hand)"
            % (path, tray, found.label(), utc_text(found.since), _age_text(now - found.since), owner, path),
            owner=owner, took_over=False, waited=0.0, **_holder_details(found))
    if check_mode:
        return _result(owner, True, found, 0.0)
    with _Guard(path):
        removed = _remove_if_unchanged(path, found)
        if not removed:
            current = read_lock(path)
            if current is not None:
                raise LockError(
                    "refusing to release %s on %s: while releasing, the lock passed from %s to %s"
                    % (path, tray, owner, current.label()),
                    owner=owner, took_over=False, waited=0.0, **_holder_details(current))
    return _result(owner, removed, found, 0.0)
