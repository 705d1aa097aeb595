# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The imex_slurm_topology action: blocks from the inventory, refusals before any module run or before
the write, the module run twice (read, write), Slurm's answer compared with the inventory.

The decisions are tested in tests/unit/plugins/plugin_utils/test_slurm_topology.py; here, the wiring."""
from __future__ import annotations

from unittest.mock import MagicMock

from ansible_collections.rackscale.imex.plugins.action import imex_slurm_topology as action_plugin
from ansible_collections.rackscale.imex.plugins.module_utils._slurm import (
    parse_node_names,
    parse_show_config,
    parse_show_topology,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils._slurm_topology import render
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

RACKS = {"rack%d" % rack: ["rack%d-tray%02d" % (rack, tray) for tray in range(1, 5)] for rack in (1, 2, 3)}
MATCHING = read_sample("slurm", "show_topology_3x4_sizes_4_8.txt")
REORDERED = read_sample("slurm", "show_topology_after_reconfigure_3_1_2.txt")


def inventory(**tray_vars):
    groups = {"imex_domains": [tray for trays in RACKS.values() for tray in trays], "slurm_controllers": ["slurmctl"]}
    groups.update(RACKS)
    hostvars = {}
    for number, (rack, trays) in enumerate(RACKS.items()):
        for position, tray in enumerate(trays):
            hostvars[tray] = dict({"imex_domain": rack, "ansible_host": "198.18.%d.%d" % (number + 1, position + 11)},
                                  **tray_vars.get(tray, {}))
    hostvars["slurmctl"] = {"ansible_host": "198.18.0.2"}
    return {"groups": groups, "hostvars": hostvars, "inventory_hostname": "slurmctl"}


class FakeController:
    def __init__(self, config="show_config_block_alloc_imex.txt", after=MATCHING, changed=True, reconfigured=True,
                 existing=None):
        self.calls = []
        self.existing = existing or {"exists": False, "size": 0, "content": None}
        self.config = parse_show_config(read_sample("slurm", config))
        self.after, self.changed, self.reconfigured = after, changed, reconfigured

    def execute_module(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        assert module_name == "rackscale.imex.imex_slurm_topology"
        self.calls.append(dict(module_args))
        result = {"version": [24, 11, 5], "version_text": "24.11.5", "config": self.config,
                  "topology": parse_show_topology(self.after)}
        if "content" not in module_args:
            return dict(result, nodes=parse_node_names(read_sample("slurm", "show_nodes_oneliner.txt")), changed=False,
                        existing=self.existing)
        return dict(result, changed=self.changed, reconfigured=self.reconfigured and self.changed,
                    diff={"before": "", "after": module_args["content"]})


def run(fake, args, task_vars, check_mode=False):
    task = MagicMock(args=args, check_mode=check_mode, async_val=0, action="rackscale.imex.imex_slurm_topology")
    task.get_name.return_value = "Write Slurm's block topology"
    connection = MagicMock()
    connection._shell.tmpdir = None
    action = action_plugin.ActionModule(task, connection, MagicMock(), MagicMock(), MagicMock())
    action._execute_module = fake.execute_module
    return action.run(task_vars=dict(task_vars, ansible_check_mode=check_mode))


def test_the_blocks_are_read_back_as_written():
    fake = FakeController()
    result = run(fake, {"block_sizes": "4,8", "backup": "true"}, inventory())
    assert not result.get("failed"), result.get("msg")
    assert [call.get("content") is None for call in fake.calls] == [True, False]
    assert fake.calls[0] == {"read_nodes": True, "timeout": 30}
    blocks = [{"name": rack, "trays": trays, "nodes": trays} for rack, trays in RACKS.items()]
    assert fake.calls[1] == {"path": "/etc/slurm/topology.conf", "content": render(blocks, [4, 8], "/etc/slurm/topology.conf"),
                             "backup": True, "reconfigure": True, "timeout": 30}
    assert result["changed"] and result["differences"] == [] and result["block_sizes"] == [4, 8]
    assert result["msg"] == "Slurm runs the inventory's 3 block(s) with BlockSizes=4,8"


def test_a_refusal_of_the_inventory_runs_no_module():
    fake = FakeController()
    result = run(fake, {}, inventory(**{"rack2-tray01": {"imex_slurm_node_name": "rack1-tray01"}}))
    assert result["failed"] and fake.calls == []
    assert result["msg"].startswith("Slurm node rack1-tray01 would be in 2 blocks (rack1, rack2)")


def test_an_inventory_the_domain_model_refuses_runs_no_module():
    fake = FakeController()
    task_vars = inventory()
    del task_vars["hostvars"]["rack3-tray04"]["imex_domain"]
    result = run(fake, {}, task_vars)
    assert result["failed"] and fake.calls == [] and "rack3-tray04" in result["msg"]


def test_a_refusal_of_the_controller_s_slurm_writes_nothing():
    fake = FakeController(config="show_config_default.txt")
    result = run(fake, {}, inventory())
    assert result["failed"] and len(fake.calls) == 1 and "content" not in fake.calls[0]
    assert "add the line TopologyPlugin=topology/block to /etc/slurm/slurm.conf" in result["msg"]


def test_per_job_trays_need_prolog_flags_alloc():
    fake = FakeController(config="show_config_block_no_prolog_flags.txt")
    result = run(fake, {}, inventory(**{"rack1-tray01": {"imex_mode": "slurm_per_job"}}))
    assert result["failed"] and len(fake.calls) == 1
    assert "add this line to /etc/slurm/slurm.conf: PrologFlags=Alloc" in result["msg"]


def test_slurm_running_another_topology_after_reconfigure_fails_naming_each_difference():
    fake = FakeController(after=REORDERED)
    result = run(fake, {"block_sizes": [4, 8]}, inventory())
    assert result["failed"] and len(fake.calls) == 2
    assert result["msg"].splitlines()[0] == "Slurm's topology differs from the inventory after scontrol reconfigure:"
    assert "- Slurm orders the blocks rack3, rack1, rack2; the inventory rack1, rack2, rack3" in result["msg"]


def test_a_change_not_reconfigured_is_a_warning_not_a_failure():
    for args, check_mode, why in (({"reconfigure": "false"}, False, "imex_slurm_reconfigure is false"),
                                  ({}, True, "check mode")):
        fake = FakeController(after=REORDERED, reconfigured=False)
        result = run(fake, dict(args, block_sizes="[4, 8]"), inventory(), check_mode=check_mode)
        assert not result.get("failed") and result["changed"]
        assert "Slurm was not reconfigured (%s)" % why in result["warnings"][0]


def test_an_unchanged_file_slurm_does_not_run_fails():
    fake = FakeController(after=REORDERED, changed=False)
    result = run(fake, {"block_sizes": "4,8"}, inventory())
    assert result["failed"] and "after reading /etc/slurm/topology.conf" in result["msg"]


def test_an_unknown_argument_is_refused():
    result = run(FakeController(), {"block_size": 4}, inventory())
    assert result["failed"] and result["msg"].startswith("unknown argument(s) block_size")


# An operator's own topology.conf: a switch tree the inventory cannot rebuild.
OPERATOR_TREE = ("SwitchName=s0 Nodes=rack1-tray[01-04]\nSwitchName=s1 Nodes=rack2-tray[01-04]\n"
                 "SwitchName=s2 Nodes=rack3-tray[01-04]\nSwitchName=top Switches=s[0-2]\n")


def test_a_topology_file_the_collection_did_not_write_is_not_replaced_without_force():
    fake = FakeController(existing={"exists": True, "size": len(OPERATOR_TREE), "content": OPERATOR_TREE})
    result = run(fake, {"block_sizes": "4,8"}, inventory())
    assert result["failed"] and len(fake.calls) == 1 and "content" not in fake.calls[0]
    assert result["msg"] == (
        "imex_slurm_topology_file = '/etc/slurm/topology.conf' holds a topology rackscale.imex did not write (no "
        "header of its own): replacing it would lose its 4 line(s) (4 switch record(s) (a tree topology)); merge the "
        "IMEX blocks into it by hand, point imex_slurm_topology_file at another file, or set "
        "imex_slurm_topology_force=true to replace it (with imex_slurm_backup=true a copy is kept)")
    forced = FakeController(existing={"exists": True, "size": len(OPERATOR_TREE), "content": OPERATOR_TREE})
    result = run(forced, {"block_sizes": "4,8", "force": "true"}, inventory())
    assert not result.get("failed"), result.get("msg")
    assert len(forced.calls) == 2 and forced.calls[1]["content"].startswith("# Slurm block topology")


def test_a_topology_file_the_collection_wrote_before_is_replaced_as_usual():
    blocks = [{"name": rack, "trays": trays, "nodes": trays} for rack, trays in RACKS.items()]
    earlier = render(blocks, [4], "/etc/slurm/topology.conf")
    fake = FakeController(existing={"exists": True, "size": len(earlier), "content": earlier})
    result = run(fake, {"block_sizes": "4,8"}, inventory())
    assert not result.get("failed"), result.get("msg")
    assert len(fake.calls) == 2


def test_force_must_be_a_boolean():
    fake = FakeController()
    result = run(fake, {"force": "maybe"}, inventory())
    assert result["failed"] and fake.calls == []
    assert result["msg"].startswith("reconfigure, backup and force must be booleans")
