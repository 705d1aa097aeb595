# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restart plan: every tray of a changed domain restarts together; differing node lists never do."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._restart import restart_plan

SAME = "9f2c" * 10


def tray(changed_nodes=False, changed_config=False, changed_tls=None, checksum=SAME):
    found = {"imex_daemon_nodes_result": {"changed": changed_nodes, "checksum": checksum},
             "imex_daemon_config_result": {"changed": changed_config}}
    if changed_tls is not None:
        found["imex_daemon_tls_result"] = {"changed": changed_tls}
    return found


def test_nothing_changed_restarts_nothing():
    hostvars = {"t1": tray(), "t2": tray()}
    assert restart_plan({"rack1": ["t1", "t2"]}, hostvars, ["t1", "t2"]) == {"problems": [], "restart": {}}


def test_one_changed_tray_restarts_its_whole_domain_and_no_other():
    hostvars = {"a1": tray(), "a2": tray(changed_config=True), "b1": tray(), "b2": tray()}
    plan = restart_plan({"rackA": ["a1", "a2"], "rackB": ["b1", "b2"]}, hostvars, ["a1", "a2", "b1", "b2"])
    assert plan == {"problems": [], "restart": {"a1": ["a2"], "a2": ["a2"]}}


def test_tls_material_change_counts_and_unregistered_tls_does_not():
    hostvars = {"t1": tray(changed_tls=True), "t2": tray()}
    assert restart_plan({"r": ["t1", "t2"]}, hostvars, ["t1", "t2"])["restart"] == {"t1": ["t1"], "t2": ["t1"]}


def test_trays_outside_the_run_are_not_read_and_an_unchanged_partial_domain_passes():
    hostvars = {"t1": tray()}     # t2 is not in the run and has no results at all
    assert restart_plan({"r": ["t1", "t2"]}, hostvars, ["t1"]) == {"problems": [], "restart": {}}


def test_a_change_on_a_domain_partly_in_the_run_is_refused_naming_the_trays_left_out():
    hostvars = {"t2": tray(changed_nodes=True, changed_config=True), "t3": tray(changed_tls=False)}
    plan = restart_plan({"rack1": ["t3", "t1", "t2"]}, hostvars, ["t2", "t3"])
    assert plan["restart"] == {}
    assert plan["problems"] == [
        "tray t2 needs a new node list and config, which takes a restart of every tray of its domain together, "
        "but this run leaves out t1. Nothing was changed. Run against the whole domain (drop --limit, or do "
        "not slice the job)."]


def test_differing_node_lists_are_named_and_never_restarted():
    hostvars = {"t1": tray(changed_nodes=True), "t2": tray(checksum="aa" * 20), "t3": tray()}
    plan = restart_plan({"rack1": ["t1", "t2", "t3"]}, hostvars, ["t1", "t2", "t3"])
    assert plan["restart"] == {}
    assert plan["problems"] == ["domain rack1: trays hold different node lists (9f2c9f2c9f2c on t1, t3; "
                                "aaaaaaaaaaaa on t2); the daemons would answer !M!. Nothing was restarted."]


def test_trays_whose_write_was_skipped_restart_with_a_changed_domain_and_are_not_compared():
    skipped = {"imex_daemon_nodes_result": {"changed": False, "skipped": True},
               "imex_daemon_config_result": {"changed": False, "skipped": True}}
    hostvars = {"t1": tray(changed_nodes=True), "t2": skipped, "t3": tray()}
    plan = restart_plan({"rack1": ["t1", "t2", "t3"]}, hostvars, ["t1", "t2", "t3"])
    assert plan == {"problems": [], "restart": {"t1": ["t1"], "t2": ["t1"], "t3": ["t1"]}}


def test_a_domain_whose_writes_were_all_skipped_restarts_nothing():
    skipped = {"imex_daemon_nodes_result": {"changed": False, "skipped": True},
               "imex_daemon_config_result": {"changed": False, "skipped": True}}
    plan = restart_plan({"rack1": ["t1", "t2"]}, {"t1": skipped, "t2": skipped}, ["t1", "t2"])
    assert plan == {"problems": [], "restart": {}}
