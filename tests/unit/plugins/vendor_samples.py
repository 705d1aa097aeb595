# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vendor output and host files under tests/unit/samples/, read as the tests feed them to the code."""
from __future__ import annotations

import os

SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "samples")


def read_sample(kind, name):
    """Text of tests/unit/samples/<kind>/<name> (kind: ctl, smi or files)."""
    with open(os.path.join(SAMPLES, kind, name)) as handle:
        return handle.read()
