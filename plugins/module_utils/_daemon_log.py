# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The last lines of the IMEX daemon's own log, bounded, for a failure message.

The daemon writes to the file named by LOG_FILE_NAME in its config (the vendor default
/var/log/nvidia-imex.log when the key is absent); an empty value, or a file it cannot open, sends
its log to stderr, that is to the journal of its unit.
"""
from __future__ import annotations

# The daemon's log file when config.cfg does not name one (the value the package ships).
DEFAULT_LOG_FILE = "/var/log/nvidia-imex.log"
# Bytes read from the end of a log file: enough for the lines wanted, never the whole file.
TAIL_READ_BYTES = 64 * 1024


def log_file_of(config_text):
    """The log file the daemon writes to per its config text, or '' for stderr (the journal)."""
    found = None
    for line in (config_text or "").splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or "=" not in stripped:
            continue
        key, value = stripped.split("=", 1)
        if key.strip() == "LOG_FILE_NAME":
            found = value.strip()
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


def read_tail(path, read_bytes=TAIL_READ_BYTES):
    """The end of a file as text (undecodable bytes replaced); the first, partial line dropped."""
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - read_bytes))
        data = handle.read(read_bytes)
    text = data.decode("utf-8", errors="replace")
    if size > read_bytes and "\n" in text:
        text = text.split("\n", 1)[1]
    return text
