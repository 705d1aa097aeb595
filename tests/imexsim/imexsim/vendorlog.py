"""Log file in the vendor daemon's line format: `[Mon D YYYY HH:MM:SS] [LEVEL] [tid N] message`."""
from __future__ import annotations

import datetime
import sys
import syslog
import threading

# LOG_LEVEL N shows every level whose number is <= N (0 disables logging).
LEVELS = {"CRITICAL": 1, "ERROR": 2, "WARNING": 3, "INFO": 4}
SYSLOG_PRIORITIES = {
    "CRITICAL": syslog.LOG_CRIT,
    "ERROR": syslog.LOG_ERR,
    "WARNING": syslog.LOG_WARNING,
    "INFO": syslog.LOG_INFO,
}
# Month names are spelled out rather than taken from strftime, which follows the locale.
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def ctl_timestamp(moment: datetime.datetime) -> str:
    """`M/D/YYYY HH:MM:SS.mmm`, the timestamp of the log header and of nvidia-imex-ctl -N."""
    return f"{moment.month}/{moment.day}/{moment.year} {moment:%H:%M:%S}.{moment.microsecond // 1000:03d}"


class VendorLog:
    """Writes to LOG_FILE_NAME, falling back to stderr as the daemon does."""

    def __init__(self, path: str, *, append: bool, level: int, use_syslog: bool):
        self.level = level
        self.use_syslog = use_syslog
        self.stream = sys.stderr
        try:
            self.stream = open(path, "a" if append else "w", encoding="utf-8")  # pylint: disable=consider-using-with
        except OSError as exc:
            # Same two lines as the real daemon; an empty path yields its double space.
            sys.stderr.write(f"WARNING: failed to open IMEX log file {path} errno = {exc.strerror}\n")
            sys.stderr.write("INFO: using stderr for IMEX logging\n")
        if use_syslog:
            syslog.openlog("nvidia-imex", syslog.LOG_PID, syslog.LOG_DAEMON)
        self._write(f"IMEX Log initializing at: {ctl_timestamp(datetime.datetime.now())}\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a vanished log (disk full, closed stderr) must not take the daemon down

    def log(self, level: str, message: str) -> None:
        if LEVELS[level] > self.level:
            return
        now = datetime.datetime.now()
        stamp = f"[{MONTHS[now.month - 1]} {now.day} {now.year} {now:%H:%M:%S}]"
        self._write(f"{stamp} [{level}] [tid {threading.get_native_id()}] {message}\n")
        if self.use_syslog:
            syslog.syslog(SYSLOG_PRIORITIES[level], message)

    def info(self, message: str) -> None:
        self.log("INFO", message)

    def warning(self, message: str) -> None:
        self.log("WARNING", message)

    def error(self, message: str) -> None:
        self.log("ERROR", message)

    def fatal(self, message: str) -> int:
        """Report a start-up failure in the log and on stderr; returns the daemon's exit status."""
        self.error(message)
        if self.stream is not sys.stderr:
            sys.stderr.write(message + "\n")
        return 1
