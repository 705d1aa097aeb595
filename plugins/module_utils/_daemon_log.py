# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The last lines of the IMEX daemon's own log, bounded, for a failure message.

The daemon writes to the file named by LOG_FILE_NAME in its config (the vendor default
/var/log/nvidia-imex.log when the key is absent); an empty value, or a file it cannot open, sends
its log to stderr, that is to the journal of its unit.

The module reads as root a path that config.cfg names, and its lines end up in the run's reports:
:func:`open_log` opens it only where nobody but root could have put something else there (see there).
"""
from __future__ import annotations

import errno
import os
import stat

# The daemon's log file when config.cfg does not name one (the value the package ships).
DEFAULT_LOG_FILE = "/var/log/nvidia-imex.log"
# The directory of the daemon's log files: a path config.cfg names elsewhere is not read back (with
# LOG_FILE_NAME=/etc/shadow the daemon would append to it, and a failed proof copy its tail out).
LOG_DIRECTORY = "/var/log"
# What other software keeps there (files, or directories as their first component): never the daemon's.
SYSTEM_LOG_NAMES = ("journal", "audit", "auth.log", "syslog", "messages", "secure", "kern.log", "wtmp", "btmp",
                    "lastlog", "faillog", "dpkg.log", "apt", "sudo.log", "cron", "maillog")
# Bytes read from the end of a log file: enough for the lines wanted, never the whole file.
TAIL_READ_BYTES = 64 * 1024


def config_value(config_text, wanted):
    """The value of key ``wanted`` in a config.cfg text (its last line wins, as in the daemon), or None."""
    found = None
    for line in (config_text or "").splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or "=" not in stripped:
            continue
        key, value = stripped.split("=", 1)
        if key.strip() == wanted:
            found = value.strip()
    return found


def log_file_of(config_text):
    """The log file the daemon writes to per its config text, or '' for stderr (the journal)."""
    found = config_value(config_text, "LOG_FILE_NAME")
    return DEFAULT_LOG_FILE if found is None else found


def shown(line):
    """A log line safe to print: control characters, DEL and the Unicode line separators escaped."""
    out = []
    for char in line:
        code = ord(char)
        if char == "\t":
            out.append(char)
        elif code < 0x20 or code == 0x7F or char in ("\u2028", "\u2029"):
            out.append("\\x%02x" % code if code < 0x100 else "\\u%04x" % code)
        else:
            out.append(char)
    return "".join(out)


def last_lines(text, lines, max_bytes):
    """(the last ``lines`` non-empty lines of ``text``, escaped, at most ``max_bytes`` UTF-8 bytes in all,
    whether anything was left out)."""
    # Split on newlines only: str.splitlines() would also break at U+2028 and friends, which a
    # line of the log may carry and which are escaped instead.
    found = [shown(line.rstrip("\r")) for line in text.split("\n") if line.strip()]
    kept = found[-lines:] if lines > 0 else []
    truncated = len(kept) < len(found)
    total = 0
    bounded = []
    for line in reversed(kept):
        size = len(line.encode("utf-8")) + 1
        if total + size > max_bytes:
            truncated = True
            break
        bounded.append(line)
        total += size
    return list(reversed(bounded)), truncated


class LogRefused(Exception):
    """The log file named by LOG_FILE_NAME is not read; the message says why, naming the path."""


def _directory_problem(path, st):
    """Why a directory on the way to the log lets someone other than root change what the path names."""
    if not stat.S_ISDIR(st.st_mode):
        return "%s is not a directory" % path
    if st.st_uid != 0:
        return "its directory %s is owned by uid %d, not root" % (path, st.st_uid)
    # Group write by group root is root's own; any other group, or everyone, could swap the file.
    if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and st.st_gid != 0):
        return ("its directory %s is writable by %s (mode %04o, group %d)"
                % (path, "everyone" if st.st_mode & stat.S_IWOTH else "its group", stat.S_IMODE(st.st_mode),
                   st.st_gid))
    return None


def _directories_down_to(directory):
    """'/', then each directory below it down to ``directory`` (an absolute, resolved path)."""
    found = []
    current = directory
    while True:
        found.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            return list(reversed(found))
        current = parent


def not_a_daemon_log(path):
    """Why ``path`` (absolute, normalised) cannot be the daemon's log, else None: it lies outside the
    log directory, or is another program's log there."""
    if not path.startswith(LOG_DIRECTORY.rstrip("/") + "/"):
        return "the daemon's log lies under %s" % LOG_DIRECTORY
    first = path[len(LOG_DIRECTORY.rstrip("/")) + 1:].split("/")[0]
    if first in SYSTEM_LOG_NAMES:
        return "%s/%s belongs to other software, not to the daemon" % (LOG_DIRECTORY.rstrip("/"), first)
    return None


def _stat_directory(path):
    return os.stat(path)


def open_log(path, stat_directory=None):
    """A read-only descriptor of the daemon log at ``path``, or LogRefused saying why not.

    Refused: a path that is not absolute; one that is not the daemon's (:func:`not_a_daemon_log`,
    after resolving the directories' symbolic links); a directory on the way (after resolving symbolic links in
    the directories, which root alone can have placed once every directory passes) that is not
    root's or that a non-root user can write to, where the file could be swapped between the check
    and the open; a last component that is a symbolic link (O_NOFOLLOW); anything but a regular file
    owned by root (a FIFO is opened without blocking, then refused). ``stat_directory`` stats each
    directory (os.stat unless given).
    """
    stat_directory = stat_directory or _stat_directory
    if not path or not os.path.isabs(path):
        raise LogRefused("LOG_FILE_NAME=%s is not an absolute path" % path)
    directory = os.path.realpath(os.path.dirname(os.path.normpath(path)))
    problem = not_a_daemon_log(os.path.join(directory, os.path.basename(path)))
    if problem:
        raise LogRefused("%s is not read: %s" % (path, problem))
    for step in _directories_down_to(directory):
        try:
            st = stat_directory(step)
        except OSError as exc:
            raise LogRefused("%s: cannot inspect %s: %s" % (path, step, exc.strerror or exc)) from exc
        problem = _directory_problem(step, st)
        if problem:
            raise LogRefused("%s is not read: %s" % (path, problem))
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(os.path.join(directory, os.path.basename(path)), flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LogRefused("%s is not read: it is a symbolic link" % path) from exc
        raise LogRefused("%s cannot be opened: %s" % (path, exc.strerror or exc)) from exc
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "it is not a regular file"
    elif st.st_uid != 0:
        problem = "it is owned by uid %d, not root" % st.st_uid
    if problem:
        os.close(fd)
        raise LogRefused("%s is not read: %s" % (path, problem))
    return fd


def read_tail(path, read_bytes=TAIL_READ_BYTES, stat_directory=None):
    """The end of the log at ``path`` (opened by :func:`open_log`) as text, undecodable bytes
    replaced, the first, partial line dropped. Raises LogRefused."""
    fd = open_log(path, stat_directory)
    with os.fdopen(fd, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - read_bytes))
        data = handle.read(read_bytes)
    text = data.decode("utf-8", errors="replace")
    if size > read_bytes and "\n" in text:
        text = text.split("\n", 1)[1]
    return text
