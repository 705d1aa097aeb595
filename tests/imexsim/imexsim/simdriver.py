"""Simulated NVIDIA kernel module load (`simdriver`, run once at boot by simdriver.service).

A container cannot load nvidia.ko. What the collection can observe of it is reproduced here:
the host registers `nvidia-caps-imex-channels` in the tray's /proc/devices (a bind mount made
after the container starts, so this waits for it), and, as nv-caps-imex.c does at module load,
channel0 is created with mode 0666 when NVreg_CreateImexChannel0=1 is in effect. "In effect"
means the modprobe.d copy inside the initramfs, because that is where the module is loaded from
at boot; before any initramfs was built the live /etc/modprobe.d counts (module loaded from the
root file system).
"""
from __future__ import annotations

import os
import stat
import sys
import time

from . import driverfiles

DEVICE_NAME = "nvidia-caps-imex-channels"
WAIT_ENV = "IMEXSIM_DRIVER_WAIT_S"
DEFAULT_WAIT_S = 30.0
POLL_INTERVAL_S = 0.5
DEFAULT_CHANNEL_COUNT = 2048  # NVreg_ImexChannelCount default (nv-reg.h)


def channel_major(proc_devices_text: str) -> int | None:
    """Major of nvidia-caps-imex-channels in the `Character devices:` section, if registered."""
    in_char_section = False
    for line in proc_devices_text.splitlines():
        if line.strip().endswith("devices:"):
            in_char_section = line.strip() == "Character devices:"
            continue
        fields = line.split()
        if in_char_section and len(fields) == 2 and fields[1] == DEVICE_NAME and fields[0].isdigit():
            return int(fields[0])
    return None


def wait_for_major(timeout_s: float) -> int | None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(driverfiles.path(driverfiles.PROC_DEVICES), encoding="utf-8") as handle:
                major = channel_major(handle.read())
        except OSError:
            major = None
        if major is not None or time.monotonic() >= deadline:
            return major
        time.sleep(POLL_INTERVAL_S)


def nvidia_options(modprobe_dir: str) -> dict[str, str]:
    """`options nvidia K=V` settings of the *.conf files in DIR, in modprobe's file order.

    Later files (and later lines) override earlier ones, as the kernel keeps the last value of
    a repeated parameter.
    """
    try:
        names = sorted(name for name in os.listdir(modprobe_dir) if name.endswith(".conf"))
    except FileNotFoundError:
        return {}
    options: dict[str, str] = {}
    for name in names:
        try:
            with open(os.path.join(modprobe_dir, name), encoding="utf-8", errors="replace") as handle:
                text = handle.read().replace("\\\n", " ")  # backslash continues a line
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) >= 3 and words[0] == "options" and words[1] == "nvidia":
                for word in words[2:]:
                    key, _, value = word.partition("=")
                    options[key] = value
    return options


def create_channel0(major: int) -> None:
    directory = driverfiles.path(driverfiles.CHANNEL_DIR)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    os.chmod(directory, 0o755)
    node = os.path.join(directory, "channel0")
    wanted = os.makedev(major, 0)
    try:
        current = os.lstat(node)
        if stat.S_ISCHR(current.st_mode) and current.st_rdev == wanted:
            os.chmod(node, 0o666)
            return
        os.unlink(node)  # a stale node from another major (or not a device at all)
    except FileNotFoundError:
        pass
    os.mknod(node, stat.S_IFCHR | 0o666, wanted)
    os.chmod(node, 0o666)  # mknod applies the umask; the driver's devnode mode is exactly 0666


def main(argv: list[str] | None = None) -> int:
    del argv  # takes no arguments
    wait_s = float(os.environ.get(WAIT_ENV) or DEFAULT_WAIT_S)
    major = wait_for_major(wait_s)
    if major is None:
        # Like a node whose driver did not load: no channels, but boot carries on.
        message = f"{DEVICE_NAME} not registered in /proc/devices after {wait_s:g} s; driver not loaded, no IMEX channel created"
        driverfiles.log(f"simdriver: WARNING: {message}")
        print(f"simdriver: {message}", file=sys.stderr)
        return 0
    snapshot = driverfiles.path(driverfiles.INITRAMFS_MODPROBE_DIR)
    if os.path.isdir(snapshot):
        source, options = "initramfs", nvidia_options(snapshot)
    else:
        source, options = "root file system", nvidia_options(driverfiles.path(driverfiles.LIVE_MODPROBE_DIR))
    count_text = options.get("NVreg_ImexChannelCount", str(DEFAULT_CHANNEL_COUNT))
    count = int(count_text) if count_text.isdigit() else DEFAULT_CHANNEL_COUNT
    # nv-reg.h: a channel count of 0 disables IMEX channels and forces CreateImexChannel0 to 0.
    create = options.get("NVreg_CreateImexChannel0") == "1" and count > 0
    params = driverfiles.path(driverfiles.PARAMS_FILE)
    os.makedirs(os.path.dirname(params), exist_ok=True)
    with open(params, "w", encoding="utf-8") as handle:
        handle.write(f"ImexChannelCount: {count}\nCreateImexChannel0: {int(create)}\n")
    driverfiles.log(f"simdriver: module loaded from the {source}; {DEVICE_NAME} major {major}, ImexChannelCount={count}, CreateImexChannel0={int(create)}")
    if create:
        create_channel0(major)
        driverfiles.log("simdriver: nv-caps-imex channel0 created. Make sure you are aware of the IMEX security model.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
