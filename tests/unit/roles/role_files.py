# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' task and handler files as the tests of the roles read them."""
from __future__ import annotations

import glob
import os

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def task_files(folder=None):
    """The task and handler files of the role in ``folder`` (every role's without one), sorted."""
    folder = folder or os.path.join(ROOT, "roles", "*")
    return sorted(glob.glob(os.path.join(folder, "tasks", "*.yml")) + glob.glob(os.path.join(folder, "handlers", "*.yml")))


def load(path):
    """A YAML file, its path absolute or from the repository's root."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def walk(node):
    """Every mapping in a task file (tasks, blocks and their rescue/always, handlers)."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)
