"""Host-owned knobs of a simulated tray (the read-only /run/testbed mount).

simrack writes these files from outside the tray; the simulator only reads them. Host-side
self-tests point IMEXSIM_TESTBED_DIR at a temporary directory instead.
"""
from __future__ import annotations

import json
import os

TESTBED_DIR_ENV = "IMEXSIM_TESTBED_DIR"
DEFAULT_TESTBED_DIR = "/run/testbed"
# The driver/IMEX release a tray reports when simrack did not choose one.
DEFAULT_VERSION = "580.95.09"


class KnobError(Exception):
    """A knob file exists but cannot be used; the simulator refuses to guess."""


def testbed_dir() -> str:
    return os.environ.get(TESTBED_DIR_ENV) or DEFAULT_TESTBED_DIR


def _path(name: str) -> str:
    return os.path.join(testbed_dir(), name)


def imex_version() -> str:
    """The installed IMEX (= driver) version of this tray."""
    try:
        with open(_path("imex_version"), encoding="utf-8") as handle:
            version = handle.read().strip()
    except FileNotFoundError:
        return DEFAULT_VERSION
    return version or DEFAULT_VERSION


def imex_version_line() -> str:
    """What ``nvidia-imex --version`` prints."""
    return f"IMEX version is: {imex_version()}"


def driver_version() -> str:
    """The loaded driver's release: the driver_version knob, else the installed IMEX release (a
    tray normally runs the nvidia-imex package of its driver's release)."""
    try:
        with open(_path("driver_version"), encoding="utf-8") as handle:
            version = handle.read().strip()
    except FileNotFoundError:
        return imex_version()
    return version or imex_version()


def version_tuple(version: str) -> tuple[int, ...]:
    """Numeric components of a version string; non-numeric parts stop the parse."""
    parts = []
    for part in version.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def read_json_knob(name: str) -> dict:
    """Content of a JSON knob file, {} when the file is absent."""
    path = _path(name)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise KnobError(f"cannot use test bed knob {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise KnobError(f"cannot use test bed knob {path}: top level must be a JSON object")
    return data


def faults() -> dict:
    """Simulator fault/tuning knobs (faults.json); see README.md for the keys."""
    return read_json_knob("faults.json")
