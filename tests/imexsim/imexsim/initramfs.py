"""Simulated `update-initramfs` and `dracut`: rebuilding the initramfs snapshots /etc/modprobe.d.

The only initramfs content the simulated driver cares about is modprobe.d (it decides whether
channel0 is created at boot), so "building an initramfs" means copying /etc/modprobe.d to
/var/lib/simdriver/initramfs/modprobe.d. Every call is recorded in /var/log/simdriver.log so
tests can tell whether a handler ran.
"""
from __future__ import annotations

import os
import shutil
import sys

from . import driverfiles

UPDATE_INITRAMFS_USAGE = """Usage: update-initramfs {-c|-d|-u} [-k version] [-v] [-b directory]

Options:
 -k version     Specify kernel version or 'all'
 -c             Create a new initramfs
 -u             Update an existing initramfs
 -d             Remove an existing initramfs
 -b directory   Set alternate boot directory
 -v             Be verbose
"""


def snapshot_modprobe_d() -> int:
    """Replace the initramfs copy of modprobe.d with the live one; returns the file count."""
    live = driverfiles.path(driverfiles.LIVE_MODPROBE_DIR)
    snapshot = driverfiles.path(driverfiles.INITRAMFS_MODPROBE_DIR)
    staging = snapshot + ".new"
    shutil.rmtree(staging, ignore_errors=True)
    if os.path.isdir(live):
        shutil.copytree(live, staging, symlinks=True)
    else:
        os.makedirs(staging)
    shutil.rmtree(snapshot, ignore_errors=True)
    os.makedirs(os.path.dirname(snapshot), exist_ok=True)
    os.rename(staging, snapshot)
    return len(os.listdir(snapshot))


def _kernel_version(requested: str | None) -> str:
    return requested if requested and requested != "all" else os.uname().release


def update_initramfs(argv: list[str]) -> int:
    action, kernel, args = None, None, list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-c", "-u", "-d"):
            action = arg
        elif arg in ("-k", "-b") and args:
            value = args.pop(0)
            kernel = value if arg == "-k" else kernel
        elif arg not in ("-v", "-t"):
            action = None
            break
    if action is None:
        print(UPDATE_INITRAMFS_USAGE, end="", file=sys.stderr)
        return 1
    call = " ".join(["update-initramfs", *argv])
    image = f"/boot/initrd.img-{_kernel_version(kernel)}"
    if action == "-d":
        shutil.rmtree(driverfiles.path(driverfiles.INITRAMFS_MODPROBE_DIR), ignore_errors=True)
        driverfiles.log(f"{call}: initramfs removed")
        print(f"update-initramfs: Deleting {image}")
        return 0
    count = snapshot_modprobe_d()
    driverfiles.log(f"{call}: snapshot of /etc/modprobe.d taken ({count} files)")
    print(f"update-initramfs: Generating {image}")
    return 0


def dracut(argv: list[str]) -> int:
    call = " ".join(["dracut", *argv])
    kernel = argv[argv.index("--kver") + 1] if "--kver" in argv[:-1] else None
    image = f"/boot/initramfs-{_kernel_version(kernel)}.img"
    forced = "--force" in argv or "-f" in argv
    if os.path.isdir(driverfiles.path(driverfiles.INITRAMFS_MODPROBE_DIR)) and not forced:
        # Real dracut refuses to replace an existing image unless forced.
        driverfiles.log(f"{call}: refused, image exists and --force not given")
        print(f"dracut: Will not override existing initramfs ({image}) without --force", file=sys.stderr)
        return 1
    count = snapshot_modprobe_d()
    driverfiles.log(f"{call}: snapshot of /etc/modprobe.d taken ({count} files)")
    return 0


def main(program: str, argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return dracut(args) if program == "dracut" else update_initramfs(args)
