# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the imex_plan action (plugins/action/imex_plan.py): each stage run in-process, as the
role runs it (run_once), on what the role's tasks registered on each tray of a 2-domain play.

The decisions themselves are tested in tests/unit/plugins/plugin_utils/test_plan.py; here, that the
action gathers the right variables of the right trays, converts the options once, chains the stages
through the registered plan, and turns refusals into a failed result with ``problems``.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from unittest.mock import MagicMock

import pytest
import yaml
from ansible.errors import AnsibleUndefinedVariable

from ansible_collections.rackscale.imex.plugins.action import imex_plan as action_plugin
from ansible_collections.rackscale.imex.plugins.action.imex_plan import ActionModule, run_id
from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import apply_settings, validate_settings
from ansible_collections.rackscale.imex.plugins.module_utils._nodes import FILE_MODE, render_nodes, validate_nodes
from ansible_collections.rackscale.imex.plugins.modules import imex_plan as documented
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import stages
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

SERVICE = "nvidia-imex"
NODES_PATH = "/etc/nvidia-imex/nodes_config.cfg"
CONFIG_PATH = "/etc/nvidia-imex/config.cfg"
STOCK = read_sample("files", "stock_config.cfg")
STARTED = 1764079200.0
DOMAINS = {"rackA": ["a1", "a2"], "rackB": ["b1", "b2"]}
ADDRESSES = {"a1": "198.18.1.11", "a2": "198.18.1.12", "b1": "198.18.2.11", "b2": "198.18.2.12"}
TRAYS = list(ADDRESSES)
GATE = "NVLink fabric or versions do not match the inventory; nothing was changed:"

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def _as_text(value):
    """A value as -e or an AWX survey hands it over: text, parsed by the plan."""
    if isinstance(value, bool):
        return "true" if value else "False"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


# Every option the role's first task gathers, with the role's default, as text; the templated
# defaults as a tray outside AWX evaluates them in the static mode.
DEFAULTS = _load("roles", "imex", "defaults", "main.yml")
OPTIONS_AS_TEXT = {name: _as_text(DEFAULTS[name])
                   for name in _load("roles", "imex", "vars", "main.yml")["__imex_options"]}
OPTIONS_AS_TEXT.update(imex_channel0="True", imex_require_declared_size="no", imex_settings='{"LOG_LEVEL": "2"}',
                       imex_nodes_config_path="/etc/nvidia-imex/nodes_config.cfg")


def hostvars_of(by_tray=None, domain_var=True, tree=False):
    """The play's hostvars: each tray's address, its domain (imex_domain, or the group_tree vars
    plugin's imex_group_children), and the options the role's first task gathered on it."""
    found = {}
    for name, trays in DOMAINS.items():
        for tray in trays:
            found[tray] = {"ansible_host": ADDRESSES[tray], "inventory_hostname": tray,
                           "__imex_tray_options": dict(OPTIONS_AS_TEXT)}
            if domain_var:
                found[tray]["imex_domain"] = name
            if tree:
                found[tray]["imex_group_children"] = {"all": ["imex_domains", "ungrouped"],
                                                      "imex_domains": list(DOMAINS), name: []}
    for tray, changes in (by_tray or {}).items():
        options = changes.pop("options", None)
        if options is not None:
            found[tray]["__imex_tray_options"].update(options)
        found[tray].update(changes)
    return found


def play(hostvars=None, play_hosts=None, **extra):
    """The task_vars of the run_once task of the plan on the play's first tray."""
    groups = {"all": list(TRAYS), "ungrouped": [], "imex_domains": list(TRAYS)}
    groups.update(DOMAINS)
    play_hosts = list(TRAYS) if play_hosts is None else play_hosts
    found = {"hostvars": hostvars_of() if hostvars is None else hostvars, "groups": groups,
             "ansible_play_hosts": play_hosts, "ansible_play_hosts_all": list(play_hosts),
             "inventory_hostname": play_hosts[0], "ansible_check_mode": False}
    found.update(extra)
    return found


def run(args, task_vars):
    task = MagicMock(args=args, check_mode=bool(task_vars.get("ansible_check_mode")), async_val=0,
                     action="rackscale.imex.imex_plan")
    connection = MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, MagicMock(), MagicMock(), MagicMock())
    action._load_name = "rackscale.imex.imex_plan"
    return action.run(task_vars=task_vars)


def planned(stage, task_vars, **args):
    """Run a stage that must pass; the registered result, as the role registers it in __imex_plan."""
    result = run(dict(args, stage=stage), task_vars)
    assert not result.get("failed"), result
    assert result["changed"] is False and "problems" not in result
    json.dumps(result)  # plain data, as a registered variable must be
    return result


def problems_of(stage, task_vars, **args):
    result = run(dict(args, stage=stage), task_vars)
    assert result["failed"] is True and result["msg"] == "\n".join(result["problems"]), result
    assert "plan" not in result
    return result["problems"]


def described(content, ctime=STARTED - 3600):
    return {"exists": True, "sha256": hashlib.sha256(content.encode()).hexdigest(), "content": content,
            "ctime": ctime, "uid": 0, "gid": 0, "mode": FILE_MODE, "error": None}


def tray_info(plan, tray, config=None, started=STARTED, **extra):
    """What imex_tray_info registered on a converged tray of its domain's partition."""
    entry = plan["trays"][tray]
    domain = plan["domains"][entry["domain"]]
    nodes = render_nodes(validate_nodes(domain["addresses"]))
    wanted = apply_settings(STOCK, validate_settings(entry["settings"]))[0]
    info = {"changed": False, "fabric_ok": True, "cluster_uuid": "cluster-" + entry["domain"], "clique_id": 32766,
            "problems": [], "driver_version": "580.95.09", "imex_version": "580.95.09",
            "files": {NODES_PATH: described(nodes), CONFIG_PATH: described(wanted if config is None else config)},
            "stat_files": {}, "services": {SERVICE: "active"}, "services_started": {SERVICE: started},
            "compute_apps": [], "slurm": {"installed": False, "node": tray, "state": None, "error": None},
            "slurm_state": None, "channels": {"0": {"changed": False}}}
    info.update(extra)
    return info


def status(addresses, down=(), **fields):
    """The imex_status result a domain's leader registered."""
    nodes = [{"index": index, "address": address, "status": "UNAVAILABLE" if address in down else "READY",
              "version": "580.95.09", "hostname": None, "reported": True} for index, address in enumerate(addresses)]
    healthy = not down
    found = {"changed": False, "domain_state": "UP" if healthy else "DEGRADED", "local_state": "READY",
             "healthy": healthy, "nodes": nodes, "broken_pairs": [], "source": "json", "elapsed": 0.1,
             "problems": ["node %d (%s) is UNAVAILABLE" % (addresses.index(address), address) for address in down]}
    found.update(fields)
    return found


def loop(*items, **by_item):
    """A registered run_once loop: one result per item, the item named."""
    results = [dict(result, item=item) for item, result in items]
    results.extend(dict(result, item=item) for item, result in by_item.items())
    return {"changed": False, "msg": "All items completed", "results": results}


SKIPPED_TASK = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
EMPTY_LOOP = {"changed": False, "skipped": True, "results": []}


def with_plan(task_vars, registered, **by_tray):
    """task_vars with the plan a stage registered, and more variables on some trays."""
    assert set(by_tray) <= set(task_vars["hostvars"]), by_tray
    hostvars = {tray: dict(values, **by_tray.get(tray, {})) for tray, values in task_vars["hostvars"].items()}
    return dict(task_vars, hostvars=hostvars, __imex_plan=registered)


def read_stage(task_vars=None, converge=True, **by_tray):
    """preflight, then read on the trays' reads (converged unless ``by_tray`` says otherwise)."""
    task_vars = task_vars or play()
    first = planned("preflight", task_vars)
    plan = first["plan"]
    reads = {tray: {"__imex_tray_info": tray_info(plan, tray, **by_tray.get(tray, {}))} for tray in plan["trays"]}
    task_vars = with_plan(task_vars, first, **reads)
    return task_vars, planned("read", task_vars, converge=converge)


def test_the_documentation_parses_and_names_every_argument_the_stages_read():
    doc = yaml.safe_load(documented.DOCUMENTATION)
    assert doc["module"] == "imex_plan" and doc["options"]["stage"]["choices"] == [stage.name for stage in stages.STAGES]
    with open(action_plugin.__file__) as handle:
        read = set(re.findall(r"args\.get\(\"(\w+)\"", handle.read()))
    assert set(doc["options"]) == read | {"stage"}
    assert yaml.safe_load(documented.EXAMPLES)[0]["rackscale.imex.imex_plan"]["stage"] == "preflight"
    assert set(yaml.safe_load(documented.RETURN)) == {"plan", "problems", "run_id", "judged", "reached", "stopped_at"}


# --- preflight -----------------------------------------------------------------------------------------

def test_preflight_converts_each_trays_options_and_plans_the_waves():
    # The role's defaults, all as text: no template left, the daemon's paths those the reads describe.
    assert not any("{{" in value for value in OPTIONS_AS_TEXT.values())
    assert (OPTIONS_AS_TEXT["imex_nodes_config_path"], OPTIONS_AS_TEXT["imex_config_path"],
            OPTIONS_AS_TEXT["imex_service"]) == (NODES_PATH, CONFIG_PATH, SERVICE)
    result = planned("preflight", play())
    plan = result["plan"]
    assert plan["waves"] == [["rackA"], ["rackB"]] and plan["check_mode"] is False and plan["report_only"] is False
    assert plan["locks"] == [{"domain": "rackA", "holder": "a1"}, {"domain": "rackA", "holder": "a2"},
                             {"domain": "rackB", "holder": "b1"}, {"domain": "rackB", "holder": "b2"}]
    assert plan["model"]["host_domain"] == {"a1": "rackA", "a2": "rackA", "b1": "rackB", "b2": "rackB"}
    assert plan["domains"]["rackB"]["addresses"] == ["198.18.2.11", "198.18.2.12"]
    settings = plan["trays"]["a2"]["settings"]
    assert settings["LOG_LEVEL"] == "2" and settings["SERVER_PORT"] == "50000"
    assert settings["IMEX_CMD_BIND_INTERFACE_IP"] == ""
    assert plan["trays"]["a2"]["channel_entries"] == [
        {"channel": 0, "state": "present", "persistent": True, "immediate": True}]
    assert re.match(r"^run-.+@.+-pid\d+-\d{8}T\d{6}Z-\d+$", plan["run_id"]), plan["run_id"]


def test_preflight_reads_the_domains_from_the_group_tree_too():
    by_variable = planned("preflight", play())["plan"]
    by_tree = planned("preflight", play(hostvars_of(domain_var=False, tree=True)))["plan"]
    assert by_tree["model"] == by_variable["model"] and by_tree["waves"] == by_variable["waves"]


@pytest.mark.parametrize(("extra", "check_mode", "report_only"), [
    ({"ansible_check_mode": True}, True, False),
    ({"ansible_run_tags": ["imex_report"]}, False, True),
    ({"ansible_run_tags": ["imex_report", "imex_daemon"]}, False, False),
    ({"ansible_run_tags": ["all"]}, False, False),
    ({"ansible_run_tags": ["imex_preflight"]}, False, False),
])
def test_preflight_takes_check_mode_and_the_report_tag_from_the_play(extra, check_mode, report_only):
    plan = planned("preflight", play(**extra))["plan"]
    assert (plan["check_mode"], plan["report_only"]) == (check_mode, report_only)
    assert plan["waves"] == ([["rackA", "rackB"]] if report_only else [["rackA"], ["rackB"]])


def test_preflight_names_the_awx_job_in_the_run_id():
    assert planned("preflight", play(awx_job_id=4711))["plan"]["run_id"].startswith("awx-job-4711-")


def test_preflight_of_a_limited_play_builds_the_model_of_every_tray_of_the_inventory():
    plan = planned("preflight", play(play_hosts=["b2"]))["plan"]
    assert list(plan["trays"]) == ["b2"] and plan["waves"] == [["rackB"]]
    assert plan["domains"]["rackB"]["partial"] is True and plan["domains"]["rackB"]["lock_holders"] == ["b1", "b2"]
    assert sorted(plan["model"]["domains"]) == ["rackA", "rackB"]


def test_preflight_refuses_a_rack_whose_trays_hold_different_modes_and_no_other():
    # Each tray's own options: rack A all slurm, rack B half slurm, half static.
    slurm = {"imex_mode": "slurm", "imex_channel0": "False"}
    hostvars = hostvars_of({tray: {"options": dict(slurm)} for tray in ("a1", "a2", "b1")})
    assert problems_of("preflight", play(hostvars)) == [
        'domain rackB: imex_mode differs between its trays ("slurm" on b1; "static" on b2); one domain runs one '
        "daemon configuration: set it for the whole domain group"]


def test_preflight_names_each_bad_value_with_its_tray():
    hostvars = hostvars_of({"a1": {"options": {"imex_server_port": "fifty"}},
                            "b2": {"options": {"imex_tls": "sometimes", "imex_settings": "LOG_LEVEL=2"}}})
    assert problems_of("preflight", play(hostvars)) == [
        "tray a1: imex_server_port = 'fifty' is not a whole number",
        "tray b2: imex_settings = 'LOG_LEVEL=2' is not a mapping",
        "tray b2: imex_tls = 'sometimes' is not a boolean"]


class Unreadable(dict):
    """A tray's HostVars whose variables cannot be templated."""

    def get(self, key, default=None):
        raise AnsibleUndefinedVariable("'imex_rack_port' is undefined")


def test_preflight_names_a_tray_whose_options_were_not_gathered_or_cannot_be_read():
    hostvars = hostvars_of({"a2": {"__imex_tray_options": None}})
    del hostvars["b2"]["__imex_tray_options"]
    assert problems_of("preflight", play(hostvars)) == [
        "tray a2: its options were not gathered (the role's first task did not run on it)",
        "tray b2: its options were not gathered (the role's first task did not run on it)"]
    hostvars = hostvars_of()
    hostvars["b1"] = Unreadable(hostvars["b1"])
    problems = problems_of("preflight", play(hostvars))
    assert len(problems) == 1 and problems[0].startswith("tray b1: __imex_tray_options cannot be read: ")
    assert "imex_rack_port" in problems[0]


def test_preflight_refuses_run_wide_options_that_differ_before_building_the_model():
    hostvars = hostvars_of({"b2": {"options": {"imex_rolling_batch": "2"}, "imex_domain": None}})
    assert problems_of("preflight", play(hostvars)) == [
        "imex_rolling_batch differs between the trays of the run (1 on a1, a2, b1; 2 on b2); it applies to the whole "
        "run: set it once, for example in group_vars/imex_domains.yml or with -e"]
    same = hostvars_of({tray: {"options": {"imex_rolling_batch": 2}} for tray in ("a1", "a2")})
    same["b1"]["__imex_tray_options"]["imex_rolling_batch"] = "2"
    same["b2"]["__imex_tray_options"]["imex_rolling_batch"] = " 2 "
    assert planned("preflight", play(same))["plan"]["waves"] == [["rackA", "rackB"]]


def test_preflight_names_every_problem_of_the_inventory():
    hostvars = hostvars_of({"b2": {"imex_domain": None}})
    assert problems_of("preflight", play(hostvars)) == [
        "IMEX domain model: 2 problem(s) in the inventory:",
        "- trays b2 set no imex_domain while other trays of imex_domains do; set it on every tray (the name of its "
        "domain group)",
        "- imex_domain = rackB on b1, but group rackB holds b1, b2; make them name the same trays"]
    neither = hostvars_of(domain_var=False)
    problems = problems_of("preflight", play(neither))
    assert problems[0] == "IMEX domain model: 1 problem(s) in the inventory:"
    assert problems[1].startswith("- imex_domain_model cannot tell the IMEX domains (no tray of imex_domains sets "
                                  "imex_domain, and none has imex_group_children)")
    login = play(play_hosts=list(TRAYS) + ["login01"])
    login["hostvars"]["login01"] = {"__imex_tray_options": dict(OPTIONS_AS_TEXT)}
    assert problems_of("preflight", login)[1] == (
        "- tray login01 is in the play but in no IMEX domain (no child group of imex_domains holds it); add it to "
        "the group of its rack or NVLink partition, or leave it out of the play")


def test_preflight_refuses_option_problems_found_by_the_plan():
    hostvars = hostvars_of({tray: {"options": {"imex_cmd_port": "50000"}} for tray in ("b1", "b2")})
    assert problems_of("preflight", play(hostvars)) == [
        "domain rackB: imex_server_port and imex_cmd_port are both 50000: the peer and command services need two "
        "ports"]


# --- read ----------------------------------------------------------------------------------------------

def test_read_plans_the_writes_from_each_trays_read():
    _task_vars, result = read_stage(b2={"config": STOCK.replace("IMEX_CMD_PORT=50005", "IMEX_CMD_PORT=50006")})
    plan = result["plan"]
    assert [tray for tray in TRAYS if plan["trays"][tray]["write"]] == ["b2"]
    assert plan["trays"]["b2"]["write_config"] is True and plan["trays"]["b2"]["write_nodes"] is False
    assert plan["prove_now"] == plan["judge_now"] == ["rackA", "rackB"]
    assert plan["notes"] == [] and plan["domains"]["rackA"]["pending"] == {}


def test_read_refuses_a_fabric_that_disagrees_with_the_inventory():
    task_vars = play()
    first = planned("preflight", task_vars)
    plan = first["plan"]
    reads = {tray: {"__imex_tray_info": tray_info(plan, tray)} for tray in TRAYS}
    reads["b1"]["__imex_tray_info"]["cluster_uuid"] = "cluster-rackA"
    reads["b2"]["__imex_tray_info"]["cluster_uuid"] = "cluster-rackA"
    task_vars = with_plan(task_vars, first, **reads)
    problems = problems_of("read", task_vars)
    assert problems[0] == GATE and problems[1].startswith("domains rackA and rackB share the NVLink partition")
    # The trays' own imex_shared_partition allows it, and says so.
    task_vars = with_plan(task_vars, first)
    for tray in TRAYS:
        task_vars["hostvars"][tray]["__imex_tray_options"] = dict(OPTIONS_AS_TEXT, imex_shared_partition="true")
    assert planned("read", task_vars)["plan"]["notes"][0].endswith(
        "as imex_shared_partition allows: a job must stay inside one IMEX domain")


def test_read_skips_the_fabric_check_when_the_trays_say_so():
    task_vars = play(hostvars_of({tray: {"options": {"imex_skip_fabric_check": "yes"}} for tray in TRAYS}))
    first = planned("preflight", task_vars)
    reads = {tray: {"__imex_tray_info": dict(tray_info(first["plan"], tray), fabric_ok=False)} for tray in TRAYS}
    assert planned("read", with_plan(task_vars, first, **reads))["plan"]["notes"] == []


def test_a_tray_that_registered_no_read_is_refused_by_the_fabric_gate():
    task_vars = play()
    first = planned("preflight", task_vars)
    reads = {tray: {"__imex_tray_info": tray_info(first["plan"], tray)} for tray in ("a1", "a2", "b1")}
    problems = problems_of("read", with_plan(task_vars, first, **reads))
    assert problems == [GATE, "tray b2 (domain rackB): fabric not Completed/Success"]


def test_read_for_a_proof_refuses_no_hand_over_and_proves_every_domain():
    dra = {"options": {"imex_mode": "dra", "imex_channel0": "false"}}
    task_vars = play(hostvars_of({"b1": dict(dra), "b2": dict(dra)}), play_hosts=["a1", "a2", "b1"],
                     ansible_check_mode=True)
    busy = {"b1": {"compute_apps": [{"pid": 4242, "name": "python3"}]}}
    _task_vars, result = read_stage(task_vars, converge=False, **busy)
    assert result["plan"]["prove_now"] == ["rackA", "rackB"]
    task_vars = play(hostvars_of({"b1": dict(dra), "b2": dict(dra)}), play_hosts=["a1", "a2", "b1"])
    first = planned("preflight", task_vars)
    reads = {tray: {"__imex_tray_info": tray_info(first["plan"], tray, **busy.get(tray, {}))}
             for tray in ("a1", "a2", "b1")}
    assert problems_of("read", with_plan(task_vars, first, **reads)) == [
        "domain rackB: the host nvidia-imex is not handed over to the DRA driver while work runs on it (b1: pid 4242 "
        "python3). Stopping its daemons makes the domain's jobs lose the memory they share. Nothing was stopped. "
        "Drain the trays, wait for the work to end and run again, or set imex_allow_busy_restart=true."]


def test_a_stage_before_the_preflight_is_refused():
    assert problems_of("read", play()) == ["the preflight stage of the plan has not run in this play"]
    assert problems_of("restart", play(__imex_plan={"failed": True, "msg": "x"}), wave=["rackA"]) == [
        "the preflight stage of the plan has not run in this play"]


def test_an_unknown_stage_is_refused():
    result = run({"stage": "restrat"}, play())
    assert result["failed"] is True and "problems" not in result
    assert result["msg"] == "stage must be one of arguments, preflight, read, reread, restart, guard, verdicts, discover, channels, stopped, got 'restrat'"
    assert run({}, play())["msg"].endswith("got None")


# --- restart, guard ------------------------------------------------------------------------------------

def writes(nodes=None, config=None, tls=None):
    """What the write tasks registered on a tray (None: the task did not run there)."""
    found = {}
    for name, result in (("__imex_nodes_result", nodes), ("__imex_config_result", config),
                         ("__imex_tls_result", tls)):
        if result is not None:
            found[name] = result
    return found


SKIPPED_WRITES = writes(nodes=SKIPPED_TASK, config=SKIPPED_TASK)


def test_restart_gathers_the_writes_of_the_waves_trays_and_the_leaders_status():
    task_vars, read = read_stage()
    plan = read["plan"]
    task_vars = with_plan(task_vars, read, a1=SKIPPED_WRITES,
                          a2=writes(nodes={"changed": False, "checksum": "ab" * 32}, config={"changed": True}),
                          b1=writes(config={"changed": True}))  # not of this wave
    task_vars["__imex_wave_status"] = loop(("rackA", status(plan["domains"]["rackA"]["addresses"])))
    result = planned("restart", task_vars, wave=["rackA"])
    after = result["plan"]
    assert after["restarting"] == ["rackA"] and after["domains"]["rackA"]["restart_reasons"] == {"a2": "new config"}
    assert [after["trays"][tray]["restart"] for tray in ("a1", "a2")] == [True, True]
    assert "restart" not in after["trays"]["b1"]


def test_restart_starts_the_trays_the_status_does_not_show_ready_and_skips_a_proven_domain():
    # The read found a2's daemon stopped.
    task_vars, read = read_stage(a2={"services": {SERVICE: "inactive"}, "services_started": {SERVICE: None}})
    plan = read["plan"]
    task_vars = with_plan(task_vars, read)
    task_vars["__imex_wave_status"] = loop(
        ("rackA", status(plan["domains"]["rackA"]["addresses"], down=["198.18.1.12"])),
        ("rackB", status(plan["domains"]["rackB"]["addresses"])))
    after = planned("restart", task_vars, wave=["rackA", "rackB"])["plan"]
    assert after["domains"]["rackA"]["start"] == ["a2"] and after["trays"]["a2"]["start"] is True
    assert after["domains"]["rackB"]["proven_before_restart"] is True
    assert after["prove_now"] == ["rackA"] and after["judge_now"] == ["rackA", "rackB"]
    # A status loop whose every item was skipped, or no status at all: every tray starts.
    for nothing in (EMPTY_LOOP, SKIPPED_TASK, None):
        task_vars["__imex_wave_status"] = nothing
        assert planned("restart", task_vars, wave=["rackA"])["plan"]["domains"]["rackA"]["start"] == ["a1", "a2"]


def test_restart_refuses_different_node_lists_naming_the_domain():
    task_vars, read = read_stage()
    task_vars = with_plan(task_vars, read, a1=writes(nodes={"changed": True, "checksum": "aa" * 32}),
                          a2=writes(nodes={"changed": True, "checksum": "bb" * 32}))
    assert problems_of("restart", task_vars, wave=["rackA"]) == [
        "domain rackA: trays hold different node lists (aaaaaaaaaaaa on a1; bbbbbbbbbbbb on a2); the daemons would "
        "answer !M!. Nothing was restarted. Written before this refusal: node list on a1; node list on a2."]


def test_restart_refuses_a_change_on_a_domain_partly_in_the_play():
    task_vars, read = read_stage(play(play_hosts=["a1", "a2", "b1"]))
    assert read["plan"]["domains"]["rackB"]["predicted"] is True
    task_vars = with_plan(task_vars, read, b1=writes(nodes={"changed": True, "checksum": "cc" * 32}))
    assert problems_of("restart", dict(task_vars, __imex_wave_status=EMPTY_LOOP), wave=["rackB"]) == [
        "tray b1 needs a new node list, which takes a restart of every tray of its domain together, but this run "
        "leaves out b2. Nothing was written. Run against the whole domain (drop --limit, or do not slice the job)."]


def test_the_guard_reads_what_runs_on_the_restarting_trays():
    task_vars, read = read_stage()
    task_vars = with_plan(task_vars, read, a1=writes(config={"changed": True}))
    restarted = planned("restart", task_vars, wave=["rackA"])
    idle = {"services": {SERVICE: "active"}, "compute_apps": [],
            "slurm": {"installed": True, "node": "a1", "state": "IDLE", "error": None}, "slurm_state": "IDLE"}
    busy = dict(idle, slurm={"installed": True, "node": "gpu-a2", "state": "ALLOCATED", "error": None},
                slurm_state="ALLOCATED")
    passing = with_plan(task_vars, restarted, a1={"__imex_activity": idle}, a2={"__imex_activity": idle},
                        b1={"__imex_activity": busy})
    assert planned("guard", passing, wave=["rackA"])["plan"] == restarted["plan"]
    refusing = with_plan(passing, restarted, a2={"__imex_activity": busy})
    assert problems_of("guard", refusing, wave=["rackA"]) == [
        "domain rackA is not restarted: work runs on it (a2: Slurm node gpu-a2 state ALLOCATED), as read just before "
        "its daemons would stop. A restart makes every IMEX daemon of the domain a new instance and cuts the memory "
        "its jobs share. It was to restart for a1: new config. Written before this refusal: config on a1. The next "
        "run restarts it once the work has ended. Drain the trays, or set imex_allow_busy_restart=true."]
    # A tray whose read was skipped holds no work.
    skipped = with_plan(passing, restarted, a2={"__imex_activity": SKIPPED_TASK})
    assert planned("guard", skipped, wave=["rackA"])["plan"] == restarted["plan"]


# --- verdicts ------------------------------------------------------------------------------------------

def verdicts_stage(statuses=None, earlier=None, logs=None, task_vars=None, registered=None, **args):
    """The verdicts stage on the proof's status reads (``statuses``), the reads before the restarts
    (``earlier``) and the daemon log reads (``logs``, then with_logs), registered run_once."""
    if registered is None:
        task_vars, registered = read_stage(task_vars)
    task_vars = with_plan(task_vars, registered)
    for name, value in (("__imex_validate_status", statuses), ("__imex_wave_status", earlier),
                        ("__imex_daemon_logs", logs)):
        if value is not None:
            task_vars[name] = value
    if logs is not None:
        args["with_logs"] = True
    return task_vars, run(dict(args, stage="verdicts"), task_vars)


ADDRESSES_A = ["198.18.1.11", "198.18.1.12"]
ADDRESSES_B = ["198.18.2.11", "198.18.2.12"]


def test_verdicts_judge_each_domain_on_its_proof_or_else_its_earlier_read():
    waited = status(ADDRESSES_A, down=["198.18.1.12"])
    _task_vars, result = verdicts_stage(domains=["rackA", "rackB"], statuses=loop(("rackA", waited)),
                                        earlier=loop(("rackA", status(ADDRESSES_A)), ("rackB", status(ADDRESSES_B))))
    plan = result["plan"]
    assert [(report["domain"], report["verdict"]) for report in plan["verdicts"]] == [
        ("rackA", "unhealthy"), ("rackB", "healthy")]
    assert plan["proven"] is False and plan["outcome"] == plan["verdicts"][0]["message"]
    assert plan["explain"] == ["a2"]
    assert plan["run_verdicts"] == plan["verdicts"]


def test_each_domain_takes_its_own_item_of_a_loop():
    other = status(ADDRESSES_B, down=ADDRESSES_B)
    statuses = loop(("rackB", other), ("rackA", status(ADDRESSES_A)))
    _task_vars, result = verdicts_stage(domains=["rackA"], statuses=statuses)
    assert [report["verdict"] for report in result["plan"]["verdicts"]] == ["healthy"]


@pytest.mark.parametrize("nothing", [None, EMPTY_LOOP, SKIPPED_TASK, {}])
def test_without_any_read_the_verdict_is_unknown_and_the_leaders_log_is_asked_for(nothing):
    _task_vars, result = verdicts_stage(domains=["rackA"], statuses=SKIPPED_TASK, earlier=nothing)
    (report,) = result["plan"]["verdicts"]
    assert report["verdict"] == "unknown" and result["plan"]["explain"] == ["a1"]


def test_the_allowance_of_broken_pairs_is_taken_as_given():
    pairs = [{"from_index": 0, "to_index": 1, "state": "R"}]
    leader = status(ADDRESSES_A, healthy=False, domain_state="DEGRADED", broken_pairs=pairs, problems=["pair 0 -> 1: R"])
    _task_vars, result = verdicts_stage(domains=["rackA"], statuses=loop(("rackA", leader)), allowed_broken_pairs="1")
    assert result["plan"]["verdicts"][0]["verdict"] == "tolerated" and result["plan"]["proven"] is True
    _task_vars, strict = verdicts_stage(domains=["rackA"], statuses=loop(("rackA", leader)))
    assert strict["plan"]["verdicts"][0]["verdict"] == "unhealthy"


def test_the_daemon_logs_read_join_the_verdicts_and_ask_for_no_more():
    waited = loop(("rackA", status(ADDRESSES_A, down=["198.18.1.12"])))
    task_vars, first = verdicts_stage(domains=["rackA"], statuses=waited)
    assert first["plan"]["explain"] == ["a2"]
    logs = loop(("a2", {"changed": False, "source": "file", "path": "/var/log/nvidia-imex.log", "truncated": False,
                        "lines": ["[ERROR] No matching network interface found"], "invocation": {}}),
                ("a1", {"failed": True, "msg": "journalctl timed out"}),
                ("b1", {"skipped": True}))
    _task_vars, second = verdicts_stage(domains=["rackA"], statuses=waited, logs=logs, task_vars=task_vars,
                                        registered=first)
    plan = second["plan"]
    (report,) = plan["verdicts"]
    assert report["daemon_logs"] == {
        "a1": {"error": "journalctl timed out"},
        "a2": {"source": "file", "path": "/var/log/nvidia-imex.log", "truncated": False,
               "lines": ["[ERROR] No matching network interface found"]}}
    assert "daemon log of a2 (/var/log/nvidia-imex.log, last 1 lines):\n      [ERROR] No matching network " \
           "interface found" in plan["outcome"]
    assert plan["explain"] == [] and [item["domain"] for item in plan["run_verdicts"]] == ["rackA"]


def test_a_pending_restart_the_read_found_makes_the_proof_stale():
    task_vars, read = read_stage(converge=False, a2={"started": STARTED - 7200})
    assert list(read["plan"]["domains"]["rackA"]["pending"]) == ["a2"]
    _task_vars, result = verdicts_stage(domains=["rackA", "rackB"], task_vars=task_vars, registered=read,
                                        statuses=loop(("rackA", status(ADDRESSES_A)), ("rackB", status(ADDRESSES_B))))
    stale, healthy = result["plan"]["verdicts"]
    assert (stale["verdict"], healthy["verdict"]) == ("stale", "healthy") and result["plan"]["proven"] is False
    assert "tray a2 runs a config other than the one on disk" in stale["message"]
    assert "a restart of the domain is pending" in stale["message"]


# --- a whole converge, stage after stage ----------------------------------------------------------------

def test_a_converge_of_two_waves_end_to_end():
    task_vars, read = read_stage(b1={"config": STOCK.replace("SERVER_PORT=50000", "SERVER_PORT=50001")})
    plan = read["plan"]
    assert [tray for tray in TRAYS if plan["trays"][tray]["write"]] == ["b1"]
    # Wave 1: rackA has nothing to do; its status read before any restart proves it.
    task_vars = with_plan(task_vars, read)
    task_vars["__imex_wave_status"] = loop(("rackA", status(ADDRESSES_A)))
    registered = planned("restart", task_vars, wave=["rackA"])
    assert registered["plan"]["restarting"] == [] and registered["plan"]["prove_now"] == ["rackB"]
    # The proof reads nothing in wave 1 (its loop skipped); the verdict is the read before the restarts.
    task_vars = with_plan(task_vars, registered)
    task_vars["__imex_validate_status"] = EMPTY_LOOP
    registered = planned("verdicts", task_vars, domains=["rackA"])
    assert registered["plan"]["proven"] is True and registered["plan"]["verdicts"][0]["verdict"] == "healthy"
    # The second judgement, for the daemon logs, runs whatever the first found: nothing was read.
    task_vars = with_plan(task_vars, registered)
    task_vars["__imex_daemon_logs"] = EMPTY_LOOP
    registered = planned("verdicts", task_vars, domains=["rackA"], with_logs=True)
    assert registered["plan"]["verdicts"][0]["verdict"] == "healthy" and registered["plan"]["explain"] == []
    # Wave 2: b1's config is written, rackB restarts together, the guard passes, the proof is healthy.
    task_vars = with_plan(task_vars, registered, b1=writes(nodes=SKIPPED_TASK, config={"changed": True}),
                          b2=SKIPPED_WRITES)
    task_vars["__imex_wave_status"] = loop(("rackB", status(ADDRESSES_B)))
    registered = planned("restart", task_vars, wave=["rackB"])
    assert registered["plan"]["restarting"] == ["rackB"] and registered["plan"]["prove_now"] == ["rackB"]
    assert registered["plan"]["domains"]["rackB"]["restart_reasons"] == {"b1": "new config"}
    idle = {"services": {SERVICE: "active"}, "compute_apps": []}
    task_vars = with_plan(task_vars, registered, b1={"__imex_activity": idle}, b2={"__imex_activity": idle})
    registered = planned("guard", task_vars, wave=["rackB"])
    task_vars = with_plan(task_vars, registered)
    task_vars["__imex_validate_status"] = loop(("rackB", status(ADDRESSES_B)))
    registered = planned("verdicts", task_vars, domains=["rackB"])
    plan = registered["plan"]
    assert plan["proven"] is True and [report["domain"] for report in plan["verdicts"]] == ["rackB"]
    assert [(report["domain"], report["verdict"]) for report in plan["run_verdicts"]] == [
        ("rackA", "healthy"), ("rackB", "healthy")]


# --- run_id ----------------------------------------------------------------------------------------------

@pytest.fixture
def origin(monkeypatch):
    monkeypatch.setattr(action_plugin.getpass, "getuser", lambda: "ops")
    monkeypatch.setattr(action_plugin.socket, "gethostname", lambda: "ctl01.example.net")
    monkeypatch.setattr(action_plugin.os, "getppid", lambda: 4242)


def test_the_run_id_names_user_host_process_and_time(origin):
    found = run_id(now=1764080100)
    assert re.match(r"^run-ops@ctl01-pid4242-20251125T141500Z-\d{1,9}$", found), found
    assert run_id(awx_job_id=77, now=1764080100).startswith("awx-job-77-ops@ctl01-pid4242-20251125T141500Z-")
    assert run_id(awx_job_id="", now=1764080100).startswith("run-ops@")
    # Two runs started in the same second by the same process are still told apart.
    assert len({run_id(now=1764080100) for _attempt in range(20)}) > 1


@pytest.mark.parametrize("error", [KeyError("getpwuid(): uid not found: 1234"), OSError("no login")])
def test_a_user_without_a_name_is_named_by_uid(origin, monkeypatch, error):
    def no_name():
        raise error

    monkeypatch.setattr(action_plugin.getpass, "getuser", no_name)
    assert run_id(now=1764080100).startswith("run-uid%d@ctl01-pid4242-" % os.getuid())


def fabric_read(cluster="3f2c9d1a-1111-4a2b-8c3d-123456789abc", clique=32766, ok=True):
    return {"fabric_ok": ok, "cluster_uuid": cluster if ok else None, "clique_id": clique if ok else None,
            "problems": [] if ok else ["GPU 0: State In Progress"], "changed": False}


def test_discover_groups_the_trays_by_partition_and_keeps_only_their_connection_variables():
    hostvars = {"t1": {"ansible_host": "10.0.0.1", "imex_settings": {"LOG_LEVEL": 4}, "group_names": ["x"],
                       "__imex_discovered": fabric_read()},
                "t2": {"ansible_host": "10.0.0.2", "ansible_user": "ops", "__imex_discovered": fabric_read(clique=7)}}
    task_vars = {"hostvars": hostvars, "ansible_play_hosts_all": ["t1", "t2"], "ansible_play_hosts": ["t1", "t2"]}
    found = planned("discover", task_vars, max_nodes="18")["plan"]
    groups = found["inventory"]["all"]["children"]["imex_domains"]["children"]
    assert groups["nvl_3f2c9d1a_32766"]["hosts"] == {"t1": {"ansible_host": "10.0.0.1"}}
    assert groups["nvl_3f2c9d1a_7"] == {"hosts": {"t2": {"ansible_host": "10.0.0.2", "ansible_user": "ops"}},
                                        "vars": {"imex_domain_size": 1, "imex_domain": "nvl_3f2c9d1a_7"}}


def test_discover_refuses_every_tray_it_could_not_place_and_writes_nothing():
    hostvars = {"t1": {"__imex_discovered": fabric_read(ok=False)},
                "t2": {"__imex_discovered": {"unreachable": True, "msg": "Failed to connect to the host via ssh"}}}
    task_vars = {"hostvars": hostvars, "ansible_play_hosts_all": ["t1", "t2"], "ansible_play_hosts": ["t1"]}
    assert problems_of("discover", task_vars, max_nodes=18) == [
        "tray t1: NVLink fabric not registered (Completed/Success): GPU 0: State In Progress",
        "tray t2: could not be read: Failed to connect to the host via ssh"]


TENANT = {"channel": 5, "group": "tenant-a", "mode": "0660"}


@pytest.mark.parametrize(("given", "channel0"), [
    (True, True), ("true", True), ("yes", True), ("1", True),
    (False, False), ("false", False), ("no", False), ("0", False), ("", False), (None, False),
])
def test_the_channels_stage_takes_channel0_given_as_text(given, channel0):
    # -e imex_channels_channel0=false arrives as the string "false", which bool() would take for true.
    found = planned("channels", {}, mode="static", channel0=given)["plan"]
    assert found["entries"] == [{"channel": 0, "state": "present" if channel0 else "absent", "persistent": True,
                                 "immediate": True}]
    assert found["owned"] is True


def test_the_channels_stage_keeps_only_what_the_read_shows_would_change():
    found = planned("channels", {}, mode="dra_host_managed", channel0=True, extra=json.dumps([TENANT]),
                    observed={"0": {"changed": False}, "5": {"changed": True}})["plan"]
    assert [entry["channel"] for entry in found["entries"]] == [0, 5]
    assert found["to_ensure"] == found["entries"][1:]
    unread = planned("channels", {}, mode="slurm", channel0=False)["plan"]
    assert unread["to_ensure"] == unread["entries"] and unread["owned"] is False


def test_the_arguments_stage_checks_the_trays_values_before_the_role_starts():
    clean = play()
    assert planned("arguments", clean)["plan"] == {"trays_checked": len(TRAYS)}
    first, second = list(TRAYS)[:2]
    bad = play(hostvars=hostvars_of({first: {"imex_mode": "bogus"}, second: {"imex_lock_wait_s": "soon"}}))
    problems = problems_of("arguments", bad)
    assert problems[0].startswith("The options of the rackscale.imex.imex role are not valid")
    assert problems[1:] == [
        "value of imex_mode must be one of: static, slurm, slurm_per_job, dra, dra_host_managed, got: bogus "
        "(tray %s)" % first,
        "imex_lock_wait_s = 'soon' is not a whole number (tray %s)" % second]
    unknown = run({"stage": "arguments", "entry_point": "nope"}, clean)
    assert unknown["failed"] is True and "no argument spec entry point 'nope'" in unknown["msg"], unknown


# --- stopped -------------------------------------------------------------------------------------------

READ_TASK = {"action": "rackscale.imex.imex_plan", "args": {"stage": "read", "converge": True}, "run_once": True,
             "name": "Plan the writes from the reads"}


def test_stopped_records_a_gate_refusal_with_the_run_id_the_refusal_kept(tmp_path):
    task_vars = play()
    first = planned("preflight", task_vars)
    reads = {tray: {"__imex_tray_info": tray_info(first["plan"], tray)} for tray in ("a1", "a2", "b1")}
    refused = run({"stage": "read"}, with_plan(task_vars, first, **reads))
    # The refusal registers over the plan: it keeps the run's id and the domains judged so far.
    assert refused["failed"] and refused["run_id"] == first["plan"]["run_id"] and refused["judged"] == []
    # And where the plan was (it records each of its stages as it makes it), and where the refusal stopped the run.
    assert first["plan"]["reached"] == "preflight"
    assert (refused["reached"], refused["stopped_at"]) == ("preflight", "gate")
    failed = {"ansible_failed_task": READ_TASK, "ansible_failed_result": refused}
    stopped = planned("stopped", with_plan(task_vars, refused, a1=failed), report_dir=str(tmp_path / "reports"),
                      textfile_dir="")["plan"]
    assert (stopped["stage"], stopped["domains"], stopped["trays"]) == ("gate", ["rackB"], ["b2"])
    assert stopped["run_id"] == first["plan"]["run_id"] and stopped["report_dir"] == str(tmp_path / "reports")
    assert [(report["domain"], report["verdict"]) for report in stopped["reports"]] == [
        ("rackA", "not_proven"), ("rackB", "not_proven")]
    assert stopped["reports"][1]["expected_nodes"] == [ADDRESSES["b1"], ADDRESSES["b2"]]
    assert stopped["artifacts"]["imex_run"]["stopped"]["stage"] == "gate"
    assert stopped["summary"] == stopped["reports"]


def test_stopped_before_any_plan_builds_the_domains_from_the_inventory_and_the_trays_report_dir():
    hostvars = hostvars_of({tray: {"imex_report_dir": "/srv/imex/reports"} for tray in TRAYS})
    task_vars = play(hostvars)
    refused = run({"stage": "preflight"}, play(hostvars_of({"a1": {"options": {"imex_max_nodes": "1"}}})))
    assert refused["failed"] and "run_id" not in refused
    task_vars["hostvars"]["a1"].update(ansible_failed_task=dict(READ_TASK, args={"stage": "preflight"}),
                                       ansible_failed_result=refused)
    stopped = planned("stopped", with_plan(task_vars, refused), report_dir="imex-reports")["plan"]
    assert stopped["stage"] == "preflight" and stopped["domains"] == ["rackA", "rackB"]
    assert stopped["report_dir"] == "/srv/imex/reports" and stopped["run_id"].startswith("run-")
    assert [report["trays"] for report in stopped["reports"]] == [DOMAINS["rackA"], DOMAINS["rackB"]]


def test_stopped_names_a_tray_ssh_did_not_reach_from_its_registered_read(tmp_path):
    task_vars = play()
    first = planned("preflight", task_vars)
    unreachable = {"unreachable": True, "changed": False, "msg": "Failed to connect to the host via ssh: timed out"}
    stopped = planned("stopped", with_plan(task_vars, first, a2={"__imex_tray_info": unreachable}),
                      report_dir=str(tmp_path))["plan"]
    assert (stopped["stage"], stopped["domains"], stopped["trays"]) == ("read", ["rackA"], ["a2"])
    assert stopped["reasons"] == ["a2: Failed to connect to the host via ssh: timed out"]
    assert stopped["not_reached"] == ["rackB"]


def test_stopped_names_a_lock_the_release_left_and_a_failed_hook_where_the_plan_was(tmp_path):
    task_vars = play()
    first = planned("preflight", task_vars)
    lock = {"item": {"domain": "rackA", "holder": "a1"}, "owner": first["plan"]["run_id"],
            "lock": {"owner": first["plan"]["run_id"], "since": 1.0, "stale_after": 3600}}
    release = {"changed": False, "unreachable": True, "results": [
        {"item": lock, "unreachable": True, "msg": "Failed to connect to the host via ssh: timed out"}]}
    hook = {"action": "community.general.slurm_drain", "name": "Drain the trays"}
    registered = dict(first, plan=dict(first["plan"], reached="restart"))
    stopped = planned("stopped", with_plan(task_vars, registered, a2={
        "__imex_lock_release": release, "ansible_failed_task": hook,
        "ansible_failed_result": {"failed": True, "msg": "drain refused"}}),
        report_dir=str(tmp_path), lock_stale_after_s="7200")["plan"]
    # The operator's task stopped the run at the restart the plan had reached.
    assert (stopped["stage"], stopped["trays"]) == ("restart", ["a2", "a1"])
    assert [(lock["domain"], lock["holder"], lock["stale_after_s"]) for lock in stopped["locks_left"]] == [
        ("rackA", "a1", 3600)]
    assert stopped["locks_left"][0]["stale_by"].endswith(" UTC")
    assert stopped["artifacts"]["imex_run"]["stopped"]["locks_left"] == stopped["locks_left"]
