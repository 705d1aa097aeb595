"""File locations of the simulated kernel driver, shared by simdriver and the initramfs tools.

Every path hangs off IMEXSIM_ROOT (default `/`), so the self-tests can run the driver side in a
temporary directory instead of a tray.
"""
from __future__ import annotations

import datetime
import os

ROOT_ENV = "IMEXSIM_ROOT"

PROC_DEVICES = "proc/devices"
LIVE_MODPROBE_DIR = "etc/modprobe.d"
# Where the simulated update-initramfs/dracut keep their copy of modprobe.d: what a module
# loaded from the initramfs at boot would see.
INITRAMFS_MODPROBE_DIR = "var/lib/simdriver/initramfs/modprobe.d"
CHANNEL_DIR = "dev/nvidia-caps-imex-channels"
# Stand-in for /proc/driver/nvidia/params, which a container cannot provide.
PARAMS_FILE = "run/simdriver/params"
LOG_FILE = "var/log/simdriver.log"


def path(relative: str) -> str:
    return os.path.join(os.environ.get(ROOT_ENV) or "/", relative)


def log(message: str) -> None:
    """Append one line to /var/log/simdriver.log (the simulator's own record, not a vendor format)."""
    target = path(LOG_FILE)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(f"{datetime.datetime.now().isoformat(timespec='seconds')} {message}\n")
