"""Dispatch of the installed tool names to the simulator modules.

Host-side use without installing: python -m imexsim.launch update-initramfs -u
"""
from __future__ import annotations

import importlib
import os
import sys

# Installed name -> module whose main(argv) implements it.
PROGRAMS = {
    "nvidia-imex": "daemon",
    "nvidia-imex-ctl": "ctl",
    "nvidia-smi": "smi",
    "scontrol": "scontrol",
    "simdriver": "simdriver",
}
INITRAMFS_TOOLS = ("update-initramfs", "dracut")


def run(argv0: str, args: list[str]) -> int:
    program = os.path.basename(argv0)
    if program in INITRAMFS_TOOLS:
        from . import initramfs  # pylint: disable=import-outside-toplevel
        return initramfs.main(program, args)
    if program not in PROGRAMS:
        raise SystemExit(f"imexsim: unknown program name {program!r}")
    # The read of every tray asks the version on every run. The real binary answers in a few ms; the
    # daemon module would load asyncio and ssl first (40 ms of a shared core per call on the bed).
    if program == "nvidia-imex" and args == ["--version"]:
        from . import testbed  # pylint: disable=import-outside-toplevel
        print(testbed.imex_version_line())
        return 0
    return importlib.import_module(f"{__package__}.{PROGRAMS[program]}").main(args)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else f"usage: python -m {__package__}.launch PROGRAM [ARGS...]")
