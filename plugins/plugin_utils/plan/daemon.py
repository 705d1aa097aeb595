# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""What a tray's read says of its daemon: whether it runs, what it loaded, whether it runs what is on disk,
and what work runs on the tray. Every function takes a read (a TrayRead, or the registered dict)."""
from __future__ import annotations

import time

from ansible_collections.rackscale.imex.plugins.module_utils._activity import slurm_busy
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import TrayRead

# A file whose change time is later than the daemon's start by more than this ran no restart since it
# was written. The daemon's start is read from the monotonic clock and the change time from the wall
# clock: a second covers their conversion and a file written in the same instant as a start.
PENDING_SLACK_S = 1.0


def daemon_started(read, service):
    """Epoch seconds at which the tray's daemon started, when the read shows it running; else None."""
    read = TrayRead.of(read)
    if read.service(service) != "active":
        return None
    return read.get("services_started", {}).get(service)


def daemon_start_bound(read, service):
    """Epoch seconds from which a file change may have missed the running daemon, or None when it does
    not run: when its unit began to start (InactiveExitTimestamp). systemd sets ExecMainStartTimestamp
    after the daemon has read its files, so that one alone would miss a change made in between."""
    read = TrayRead.of(read)
    started = daemon_started(read, service)
    if started is None:
        return None
    began = (read.get("services_instance", {}).get(service) or {}).get("inactive_exit")
    return started if began is None else min(began, started)


def loaded_record(read, service):
    """{path: sha256, null for an absent file} the running daemon loaded, as recorded when a run started
    it; None when no record is of the running instance (systemd's InvocationID): a daemon started by
    hand or by an older release of the collection, a tray rebooted since, or a read that could not tell."""
    read = TrayRead.of(read)
    if daemon_started(read, service) is None:
        return None
    instance = read.get("services_instance", {}).get(service) or {}
    loaded = instance.get("loaded") or {}
    if not instance.get("invocation_id") or loaded.get("invocation_id") != instance["invocation_id"]:
        return None
    return dict(loaded.get("files") or {})


def resolved_hosts_block(read, service):
    """(known, digest): the digest of the hosts block the running daemon resolved its slot names through, as
    the record of its instance says (None: there was no block); known is False where no record of the running
    instance says it (a record of an older release of the collection, a daemon started by hand)."""
    read = TrayRead.of(read)
    if loaded_record(read, service) is None:
        return False, None
    loaded = read.get("services_instance", {}).get(service)["loaded"]
    return ("hosts_block" in loaded), loaded.get("hosts_block")


def pending_restart(read, service, paths, stat_paths=()):
    """Why a running daemon runs files other than those on disk (a run stopped between its writes and
    its restart, or a hand edit), or None.

    The daemon reads its files only when it starts. Where a record says what the running instance
    loaded, a file of ``paths`` is pending when its content differs: a no-op chmod, chown, restorecon,
    an identical rewrite or a clock step changes nothing. A file the record does not cover (and each of
    ``stat_paths``, never read) is pending when it changed after the daemon began to start. Change
    times, not modification times: copying a file with its times kept still moves its ctime.
    """
    read = TrayRead.of(read)
    started = daemon_started(read, service)
    if started is None:
        return None
    loaded = loaded_record(read, service)
    files = read.get("files", {})
    other, by_time = [], list(stat_paths)
    for path in paths:
        described = files.get(path) or {}
        if loaded is None or path not in loaded or described.get("error") or "exists" not in described:
            by_time.append(path)
        elif (described.get("sha256") if described["exists"] else None) != loaded[path]:
            other.append(path)
    reasons = []
    if other:
        reasons.append("daemon started at %s loaded another %s than the one on disk" % (utc(started), ", ".join(other)))
    bound = daemon_start_bound(read, service)
    newer = _written_after(read, by_time, bound)
    if newer:
        reasons.append("daemon started at %s, before %s" % (utc(bound), newer))
    return "; ".join(reasons) or None


def release_restart(tray, read, service):
    """Why the tray's running daemon runs another IMEX release than the installed one, or None.

    A package changed under a running daemon leaves it on the old release, whose peers see a version
    mismatch, while every installed release agrees: only a restart puts the installed one in force.
    A release the tray read could not tell (null) decides nothing.
    """
    read = TrayRead.of(read)
    if daemon_started(read, service) is None:
        return None
    installed = read.get("imex_version")
    running = read.get("daemon_release", {}).get("running")
    if not installed or not running or running == installed:
        return None
    return "the daemon on %s runs IMEX %s, but %s is installed" % (tray, running, installed)


def _written_after(read, paths, since):
    """'<paths> was/were written at <time>' for those of ``paths`` the read shows changed after ``since``."""
    files = dict(read.get("files", {}))
    files.update(read.get("stat_files", {}))
    newer = []
    for path in paths:
        ctime = (files.get(path) or {}).get("ctime")
        if ctime is not None and ctime > since + PENDING_SLACK_S:
            newer.append((ctime, path))
    if not newer:
        return None
    newest, _path = max(newer)
    return "%s %s written at %s" % (", ".join(path for _ctime, path in sorted(newer)),
                                    "was" if len(newer) == 1 else "were", utc(newest))


def pending_reload(read, service, tls_files, reload_mark):
    """Why a running daemon runs TLS files older than those on disk, or None: files changed after both
    its start and the last reload a run signalled (the mark it writes right after the signal)."""
    read = TrayRead.of(read)
    started = daemon_started(read, service)
    if started is None:
        return None
    marked = (read.get("stat_files", {}).get(reload_mark) or {}).get("ctime")
    since = max(started, marked or 0)
    newer = _written_after(read, tls_files, since)
    if not newer:
        return None
    return "TLS credentials loaded at %s, before %s" % (utc(since), newer)


def utc(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def busy_reasons(tray, read, service):
    """What runs on one tray (GPU compute processes, a Slurm job, or either unreadable), as phrases.

    Unreadable counts as busy: a restart that cuts a job is worse than a run refused for a reason
    the operator can see and override.
    """
    read = TrayRead.of(read)
    work = []
    if read.has("compute_apps"):
        if read.compute_apps is None:
            work.append("GPU processes could not be read")
        else:
            work.extend("pid %s %s" % (app.get("pid"), app.get("name")) for app in read.compute_apps)
    slurm = read.slurm
    if isinstance(slurm, dict) and slurm.get("installed"):
        if slurm.get("error") or not slurm.get("state"):
            work.append("Slurm state of node %s could not be read (%s)"
                        % (slurm.get("node"), slurm.get("error") or "no state"))
        elif slurm_busy(slurm["state"]):
            work.append("Slurm node %s state %s" % (slurm.get("node"), slurm["state"]))
    elif slurm_busy(read.get("slurm_state")):
        work.append("Slurm node state %s" % read.slurm_state)
    return work


def busy_guard(trays, reads, service, allow_busy=False):
    """One phrase per tray of a domain with work on it while its daemon runs; [] when the domain may
    restart. A domain whose daemons all are stopped is never busy: nothing can be using it."""
    if allow_busy:
        return []
    if not any(TrayRead.of(reads.get(tray)).service(service) == "active" for tray in trays):
        return []
    return work_on(trays, reads, service)


def work_on(trays, reads, service):
    """'<tray>: <what runs there>' for each tray with work on it."""
    found = []
    for tray in trays:
        work = busy_reasons(tray, reads.get(tray), service)
        if work:
            found.append("%s: %s" % (tray, ", ".join(work)))
    return found
