# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every module's DOCUMENTATION, EXAMPLES and RETURN are YAML, checked in milliseconds.

ansible-test sanity says the same after minutes; a ': ' inside a plain scalar broke these blocks four
times, so the unit tests catch it first and name the block and line.
"""
from __future__ import annotations

import importlib
import os

import pytest
import yaml

MODULES_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "modules")
MODULES = sorted(name[:-3] for name in os.listdir(MODULES_DIR) if name.endswith(".py") and name != "__init__.py")


@pytest.mark.parametrize("name", MODULES)
def test_the_documentation_blocks_of_each_module_are_yaml(name):
    module = importlib.import_module("ansible_collections.rackscale.imex.plugins.modules.%s" % name)
    for block in ("DOCUMENTATION", "EXAMPLES", "RETURN"):
        text = getattr(module, block, None)
        assert isinstance(text, str) and text.strip(), "%s has no %s" % (name, block)
        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError as error:
            pytest.fail("%s.%s is not YAML: %s" % (name, block, error))
        if block == "DOCUMENTATION":
            assert parsed["module"] == name


def test_every_module_is_checked():
    assert len(MODULES) >= 12 and "imex_tray_info" in MODULES
