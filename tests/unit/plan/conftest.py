# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scenario tests run thousands of runs: the config text a set of keys gives is computed once."""
from __future__ import annotations

import functools
import json

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils import _imexcfg
from ansible_collections.rackscale.imex.plugins.plugin_utils import _drift
from ansible_collections.rackscale.imex.tests.unit.plan import scenario


@functools.lru_cache(maxsize=4096)
def _applied(text, settings_json):
    wanted, effective = _imexcfg.apply_settings(text, json.loads(settings_json))
    return wanted, json.dumps(effective)


def remembered_apply_settings(text, settings):
    """apply_settings, remembered: a pure function of the text and the keys (re-parsing a stock
    config.cfg once per key is most of a simulated run's time)."""
    wanted, effective = _applied(text, json.dumps(settings, sort_keys=True))
    return wanted, json.loads(effective)


@pytest.fixture(autouse=True)
def remembered_config_text(monkeypatch):
    monkeypatch.setattr(_drift, "apply_settings", remembered_apply_settings)
    monkeypatch.setattr(scenario, "apply_settings", remembered_apply_settings)
