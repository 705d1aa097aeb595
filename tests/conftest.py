"""Make the repository importable as ``ansible_collections.rackscale.imex`` for plain pytest.

ansible-test units arranges this itself; plain ``pytest`` needs the same namespace, so a symlink
tree is built once per session under ``.build/pytest-path``.
"""
from __future__ import annotations

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ensure_collection_path() -> None:
    if "ansible_collections.rackscale.imex" in sys.modules:
        return
    # Already inside an ansible_collections tree (ansible-test): nothing to do.
    parts = _ROOT.split(os.sep)
    if len(parts) >= 3 and parts[-3] == "ansible_collections":
        sys.path.insert(0, os.sep.join(parts[:-3]))
        return
    base = os.path.join(_ROOT, ".build", "pytest-path")
    link_dir = os.path.join(base, "ansible_collections", "rackscale")
    link = os.path.join(link_dir, "imex")
    os.makedirs(link_dir, exist_ok=True)
    if not os.path.islink(link):
        os.symlink(_ROOT, link)
    sys.path.insert(0, base)


_ensure_collection_path()
