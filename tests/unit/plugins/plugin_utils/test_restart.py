# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restart plan: every tray of a changed domain restarts together; differing node lists never do."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._restart import busy_trays, handover_problems, restart_plan

SAME = "9f2c" * 10


def tray(changed_nodes=False, changed_config=False, changed_tls=None, checksum=SAME):
    """One tray's results of the three writes; TLS not copied (None) is an empty result."""
    return ({"changed": changed_nodes, "checksum": checksum}, {"changed": changed_config},
            {} if changed_tls is None else {"changed": changed_tls})


def plan_of(domains, results):
    """restart_plan over the trays of ``results`` ({tray: tray(...)}), in the run in that order."""
    trays = list(results)
    nodes, config, tls = ([result[column] for result in results.values()] for column in range(3))
    return restart_plan(domains, trays, nodes, config, tls)


def test_nothing_changed_restarts_nothing():
    hostvars = {"t1": tray(), "t2": tray()}
    assert plan_of({"rack1": ["t1", "t2"]}, hostvars) == {"problems": [], "restart": {}}


def test_one_changed_tray_restarts_its_whole_domain_and_no_other():
    hostvars = {"a1": tray(), "a2": tray(changed_config=True), "b1": tray(), "b2": tray()}
    plan = plan_of({"rackA": ["a1", "a2"], "rackB": ["b1", "b2"]}, hostvars)
    assert plan == {"problems": [], "restart": {"a1": ["a2"], "a2": ["a2"]}}


def test_tls_material_change_counts_and_unregistered_tls_does_not():
    hostvars = {"t1": tray(changed_tls=True), "t2": tray()}
    assert plan_of({"r": ["t1", "t2"]}, hostvars)["restart"] == {"t1": ["t1"], "t2": ["t1"]}


def test_trays_outside_the_run_are_not_read_and_an_unchanged_partial_domain_passes():
    hostvars = {"t1": tray()}     # t2 is not in the run and has no results at all
    assert plan_of({"r": ["t1", "t2"]}, hostvars) == {"problems": [], "restart": {}}


def test_a_change_on_a_domain_partly_in_the_run_is_refused_naming_the_trays_left_out():
    hostvars = {"t2": tray(changed_nodes=True, changed_config=True), "t3": tray(changed_tls=False)}
    plan = plan_of({"rack1": ["t3", "t1", "t2"]}, hostvars)
    assert plan["restart"] == {}
    assert plan["problems"] == [
        "tray t2 needs a new node list and config, which takes a restart of every tray of its domain together, "
        "but this run leaves out t1. Nothing was changed. Run against the whole domain (drop --limit, or do "
        "not slice the job)."]


def test_differing_node_lists_are_named_and_never_restarted():
    hostvars = {"t1": tray(changed_nodes=True), "t2": tray(checksum="aa" * 20), "t3": tray()}
    plan = plan_of({"rack1": ["t1", "t2", "t3"]}, hostvars)
    assert plan["restart"] == {}
    assert plan["problems"] == ["domain rack1: trays hold different node lists (9f2c9f2c9f2c on t1, t3; "
                                "aaaaaaaaaaaa on t2); the daemons would answer !M!. Nothing was restarted."]


def test_trays_whose_write_was_skipped_restart_with_a_changed_domain_and_are_not_compared():
    skipped = ({"changed": False, "skipped": True}, {"changed": False, "skipped": True}, {})
    hostvars = {"t1": tray(changed_nodes=True), "t2": skipped, "t3": tray()}
    plan = plan_of({"rack1": ["t1", "t2", "t3"]}, hostvars)
    assert plan == {"problems": [], "restart": {"t1": ["t1"], "t2": ["t1"], "t3": ["t1"]}}


def test_a_domain_whose_writes_were_all_skipped_restarts_nothing():
    skipped = ({"changed": False, "skipped": True}, {"changed": False, "skipped": True}, {})
    plan = plan_of({"rack1": ["t1", "t2"]}, {"t1": skipped, "t2": skipped})
    assert plan == {"problems": [], "restart": {}}


def read(active=True, apps=(), slurm=None):
    """A tray's imex_tray_info read: the daemon's unit state, its GPU processes, its Slurm state."""
    info = {"services": {"nvidia-imex": "active" if active else "inactive"},
            "compute_apps": None if apps is None else [{"pid": pid, "name": name} for pid, name in apps]}
    if slurm is not None:
        info["slurm_state"] = slurm
    return info


def guarded(reads, allow_busy=False):
    """A config change on t1 of a three-tray domain, with each tray's read."""
    results = {"t1": tray(changed_config=True), "t2": tray(), "t3": tray()}
    trays = list(results)
    return restart_plan({"rack1": trays}, trays, *([result[column] for result in results.values()] for column in range(3)),
                        tray_infos=[reads[name] for name in trays], service="nvidia-imex", allow_busy=allow_busy)


def test_a_busy_domain_is_not_restarted_and_the_work_is_named():
    plan = guarded({"t1": read(), "t2": read(apps=[(4242, "python3"), (4243, "nccl")]), "t3": read(slurm="MIXED")})
    assert plan["restart"] == {}
    assert plan["problems"] == [
        "domain rack1 is not restarted: work runs on it (t2: pid 4242 python3, pid 4243 nccl; t3: Slurm node state "
        "MIXED). A restart makes every IMEX daemon of the domain a new instance and cuts the memory its jobs share. "
        "Its new config (on t1) was not written. Drain the trays (for example scontrol update nodename=... "
        "state=drain, or kubectl cordon), wait for the work to end and run again, or set "
        "imex_allow_busy_restart=true."]


def test_busy_trays_names_the_work_only_while_the_daemon_runs():
    trays = ["t1", "t2"]
    assert busy_trays(trays, [read(), read(apps=[(7, "a.out")])], "nvidia-imex") == ["t2: pid 7 a.out"]
    assert busy_trays(trays, [read(active=False), read(active=False, apps=[(7, "a.out")])], "nvidia-imex") == []
    assert busy_trays(trays, [{}, {"skipped": True}], "nvidia-imex") == []


def test_processes_that_cannot_be_read_count_as_work():
    plan = guarded({"t1": read(), "t2": read(apps=None), "t3": read()})
    assert "work runs on it (t2: GPU processes could not be read)" in plan["problems"][0]


def test_allow_busy_restarts_anyway_and_a_stopped_domain_is_never_busy():
    reads = {"t1": read(), "t2": read(apps=[(4242, "python3")]), "t3": read(slurm="ALLOCATED")}
    everyone = {"t1": ["t1"], "t2": ["t1"], "t3": ["t1"]}
    assert guarded(reads, allow_busy=True) == {"problems": [], "restart": everyone}
    stopped = {name: dict(info, services={"nvidia-imex": "inactive"}) for name, info in reads.items()}
    assert guarded(stopped) == {"problems": [], "restart": everyone}


def test_an_idle_domain_restarts():
    plan = guarded({"t1": read(), "t2": read(slurm="IDLE"), "t3": read(slurm="DOWN+DRAIN")})
    assert plan == {"problems": [], "restart": {"t1": ["t1"], "t2": ["t1"], "t3": ["t1"]}}


def test_the_dra_hand_over_of_a_busy_domain_is_refused_naming_the_work():
    reads = [read(), read(apps=[(4242, "python3")]), read()]
    assert handover_problems({"rack1": ["t1", "t2", "t3"]}, ["t1", "t2", "t3"], reads, "nvidia-imex") == [
        "domain rack1: the host nvidia-imex is not handed over to the DRA driver while work runs on it (t2: pid 4242 "
        "python3). Stopping its daemons makes the domain's jobs lose the memory they share. Nothing was stopped. "
        "Drain the trays, wait for the work to end and run again, or set imex_allow_busy_restart=true."]
    assert handover_problems({"rack1": ["t1", "t2", "t3"]}, ["t1", "t2", "t3"], reads, "nvidia-imex",
                             allow_busy=True) == []


def test_the_dra_hand_over_of_part_of_a_running_domain_is_refused_and_a_stopped_one_is_handed_over():
    domains = {"rack1": ["t1", "t2", "t3"], "rack2": ["u1"]}
    partial = handover_problems(domains, ["t1", "t2", "u1"], [read(), read(), read()], "nvidia-imex", allow_busy=True)
    assert partial == [
        "domain rack1: the host nvidia-imex is not handed over to the DRA driver on part of the domain (this run "
        "leaves out t3). Stopping its daemons makes the domain's jobs lose the memory they share. Nothing was "
        "stopped. Run against the whole domain (drop --limit, or do not slice the job)."]
    stopped = [read(active=False, apps=[(1, "a.out")]), read(active=False)]
    assert handover_problems(domains, ["t1", "t2"], stopped, "nvidia-imex") == []
