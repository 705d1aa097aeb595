# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The defaults the plan decides (null in the role's defaults): decided once, recorded in the plan, given
values kept as given."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.defaults import (
    NODES_CONFIG_PATH,
    PER_JOB_NODES_CONFIG_PATH,
    decided,
)
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import model_of, preflight, role_options

UNSET = {"imex_channel0": None, "imex_nodes_config_path": None, "imex_require_declared_size": None}


@pytest.mark.parametrize(("mode", "channel0", "nodes"), [
    ("static", True, NODES_CONFIG_PATH),
    ("dra_host_managed", True, NODES_CONFIG_PATH),
    ("slurm", False, NODES_CONFIG_PATH),
    ("slurm_per_job", False, PER_JOB_NODES_CONFIG_PATH),
    ("dra", False, NODES_CONFIG_PATH),
])
def test_channel0_and_the_node_list_follow_the_mode(mode, channel0, nodes):
    found = decided(dict(UNSET, imex_mode=mode))
    assert (found["imex_channel0"], found["imex_nodes_config_path"]) == (channel0, nodes)


@pytest.mark.parametrize(("under_awx", "required"), [(False, False), (True, True)])
def test_the_declared_size_is_required_under_awx(under_awx, required):
    assert decided(dict(UNSET, imex_mode="static"), under_awx=under_awx)["imex_require_declared_size"] is required


def test_a_given_value_is_kept_as_given():
    given = {"imex_mode": "slurm_per_job", "imex_channel0": True, "imex_nodes_config_path": "/etc/imex/nodes.cfg",
             "imex_require_declared_size": False}
    assert decided(given, under_awx=True) == given
    assert decided(dict(given, imex_nodes_config_path=""))["imex_nodes_config_path"] == PER_JOB_NODES_CONFIG_PATH


def test_the_plan_records_the_decided_values_for_the_tasks():
    model = model_of({"rackA": ["a1", "a2"], "rackB": ["b1", "b2"]})
    options = {tray: role_options() for tray in ("a1", "a2")}
    options.update((tray, role_options(imex_mode="slurm_per_job")) for tray in ("b1", "b2"))
    plan = preflight(model, options)
    assert {tray: (plan["trays"][tray]["channel0"], plan["trays"][tray]["nodes_config_path"]) for tray in options} == {
        "a1": (True, NODES_CONFIG_PATH), "a2": (True, NODES_CONFIG_PATH),
        "b1": (False, PER_JOB_NODES_CONFIG_PATH), "b2": (False, PER_JOB_NODES_CONFIG_PATH)}
    assert plan["require_declared_size"] is False
