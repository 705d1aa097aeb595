# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan's decisions in the per-job mode (imex_mode slurm_per_job): what a run installs on each tray
(the map, the prolog and epilog, config.cfg, the service left to the prolog), what it holds back under
work, and how validate.yml judges the installation without a running daemon."""
from __future__ import annotations

import hashlib
import json
import os

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import apply_settings, validate_settings
from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.tests.unit.roles.test_slurm_job_script import job_script
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import (
    BEFORE,
    CONFIG_PATH,
    DRIVER,
    ROOT,
    SERVICE,
    STOCK,
    cluster,
    described,
    model_of,
    options_of,
    preflight,
    refused,
)

PER_JOB = {"imex_mode": "slurm_per_job", "imex_channel0": False}
RUN_LIST = "/run/nvidia-imex/nodes_config.cfg"
PROLOG = "/etc/slurm/prolog.d/90-rackscale-imex"
EPILOG = "/etc/slurm/epilog.d/90-rackscale-imex"
MAP = "/etc/rackscale-imex/slurm-job.json"
SCRIPT_PATH = os.path.join(ROOT, "roles", "imex", "files", "rackscale-imex-slurm-job")
with open(SCRIPT_PATH, "rb") as _handle:
    SCRIPT = _handle.read()
SCRIPT_SHA = hashlib.sha256(SCRIPT).hexdigest()
RACK = {"rackA": ["a1", "a2", "a3"]}


def per_job_read(plan, tray, installed=True, active=False, enabled="disabled", slurm_state="IDLE", node=None,
                 channel_major=511, map_text=None, script=SCRIPT, **extra):
    """The imex_tray_info read of a per-job tray: installed as the plan wants it (unless ``installed`` is
    false), its daemon stopped, idle in Slurm."""
    entry = plan["trays"][tray]
    files = {}
    if installed:
        config = apply_settings(STOCK, validate_settings(entry["settings"]))[0]
        files[CONFIG_PATH] = described(config)
        files[MAP] = described(map_text if map_text is not None else installed_map(plan, tray))
        for path in (PROLOG, EPILOG):
            files[path] = dict(described(""), sha256=hashlib.sha256(script).hexdigest(), content=None, mode="0755")
    else:
        files = {path: {"exists": False, "sha256": None, "content": None, "ctime": None, "uid": None, "gid": None,
                        "mode": None, "error": None} for path in entry["read_files"]}
    read = {
        "fabric_ok": True, "cluster_uuid": cluster(entry["domain"]), "clique_id": 32766, "problems": [],
        "driver_version": DRIVER, "imex_version": DRIVER, "files": files, "stat_files": {},
        "services": {SERVICE: "active" if active else "inactive"},
        "services_started": {SERVICE: BEFORE if active else None},
        "services_enabled": {SERVICE: enabled},
        "channel_major": channel_major,
        "compute_apps": [],
        "slurm": {"installed": True, "node": node or tray, "state": slurm_state, "error": None},
        "slurm_state": slurm_state,
        "channels": {str(item["channel"]): {"changed": False} for item in entry["channel_entries"]},
    }
    read.update(extra)
    return read


def installed_map(plan, tray):
    """The map the plan writes on ``tray`` when every tray's Slurm name is its inventory name."""
    domain = plan["domains"][plan["trays"][tray]["domain"]]
    options = options_of(model_of(RACK), PER_JOB)[tray]
    return run_plan.slurm_job_map(plan["trays"][tray]["domain"], list(zip(domain["trays"], domain["addresses"])), tray,
                                  options)


def per_job_plan(domains=None, every=None, reads=None, converge=True, check_mode=False, play_hosts=None,
                 by_tray=None, slurm_names=None, model=None):
    model = model or model_of(domains or RACK)
    options = options_of(model, dict(PER_JOB, **(every or {})), **(by_tray or {}))
    if play_hosts is not None:
        options = {tray: options[tray] for tray in play_hosts}
    plan = preflight(model, options, check_mode=check_mode)
    found = {tray: per_job_read(plan, tray, **(reads or {}).get(tray, {})) for tray in plan["trays"]}
    return model, plan, run_plan.read.after_read(plan, model, options, found, converge=converge, script_sha256=SCRIPT_SHA,
                                                 slurm_names=slurm_names or {})


def test_the_per_job_plan_reads_the_installation_and_no_node_list():
    model = model_of(RACK)
    plan = preflight(model, options_of(model, PER_JOB))
    entry = plan["trays"]["a1"]
    assert entry["read_files"] == [CONFIG_PATH, MAP, PROLOG, EPILOG]
    assert entry["slurm_job_paths"] == {"map": MAP, "prolog": PROLOG, "epilog": EPILOG}
    # the daemon reads the list the prolog writes under /run
    assert entry["settings"]["IMEX_NODE_CONFIG_FILE"] == RUN_LIST
    assert plan["per_job_domains"] == ["rackA"] and plan["host_daemon_domains"] == []


def test_the_program_reads_its_map_where_the_plan_writes_it_with_the_bounds_it_knows():
    script = job_script
    assert script.MAP_PATH == run_plan.SLURM_JOB_MAP
    assert set(run_plan.SLURM_JOB_BOUNDS) <= set(script.DEFAULTS)


def test_in_the_per_job_mode_the_channels_are_slurms():
    entries = run_plan.modes.of("slurm_per_job").channel_entries(False, [])
    assert entries == [{"channel": 0, "state": "absent", "persistent": True, "immediate": False}]
    model = model_of(RACK)
    problems = refused(preflight, model, options_of(model, dict(PER_JOB, imex_channel0=True)))
    assert "domain rackA: imex_mode=slurm_per_job conflicts with imex_channel0=true: Slurm switch/nvidia_imex owns " \
           "the channels and reserves channel 0; set imex_channel0 to false" in problems
    problems = refused(preflight, model, options_of(model, dict(PER_JOB, imex_channels=[{"channel": 5}])))
    assert any("the channels belong to Slurm in imex_mode slurm_per_job" in problem for problem in problems)


@pytest.mark.parametrize("options, expected", [
    ({"imex_slurm_prolog_dir": "/etc/slurm/x.d", "imex_slurm_epilog_dir": "/etc/slurm/x.d"},
     "imex_slurm_prolog_dir and imex_slurm_epilog_dir are both /etc/slurm/x.d"),
    ({"imex_slurm_prolog_dir": "slurm/prolog.d"}, "imex_slurm_prolog_dir = 'slurm/prolog.d' must be an absolute"),
    ({"imex_slurm_epilog_dir": "/etc"}, "imex_slurm_epilog_dir = '/etc' is a system directory"),
    ({"imex_slurm_probe_partition": "gpu,debug"}, "imex_slurm_probe_partition = 'gpu,debug' is not a Slurm partition"),
])
def test_bad_per_job_options_are_refused_naming_them(options, expected):
    model = model_of(RACK)
    problems = refused(preflight, model, options_of(model, dict(PER_JOB, **options)))
    assert any(problem.startswith("domain rackA: " + expected) for problem in problems), problems


def test_a_fresh_tray_gets_the_map_the_program_and_config_and_its_service_released():
    _model, _before, plan = per_job_plan(reads={tray: {"installed": False, "active": True, "enabled": "enabled"}
                                                for tray in RACK["rackA"]})
    entry = plan["trays"]["a2"]
    decided = (entry["write_map"], entry["scripts_to_install"], entry["write_slurm_job"], entry["write_config"],
               entry["release"], entry["write_nodes"], entry["predicted"], entry["write"])
    assert decided == (True, ["prolog", "epilog"], True, True, True, False, False, True)
    found = json.loads(entry["slurm_map"])
    assert found["nodes"] == [{"name": "a1", "address": "198.18.1.11"}, {"name": "a2", "address": "198.18.1.12"},
                              {"name": "a3", "address": "198.18.1.13"}]
    assert (found["this_node"], found["domain"], found["service"], found["nodes_config_path"],
            found["config_path"]) == ("a2", "rackA", SERVICE, RUN_LIST, CONFIG_PATH)
    assert found["total_timeout_s"] == run_plan.SLURM_JOB_BOUNDS["total_timeout_s"]
    # No daemon between jobs: nothing to prove by a status read, the installation is judged.
    assert plan["prove_now"] == [] and plan["judge_now"] == ["rackA"]
    assert plan["trays"]["a2"]["per_job_problems"] == []


def test_a_converged_per_job_tray_is_left_alone():
    _model, _before, plan = per_job_plan()
    for tray in RACK["rackA"]:
        entry = plan["trays"][tray]
        assert (entry["write"], entry["write_slurm_job"], entry["release"], entry["per_job_problems"]) == \
            (False, False, False, [])


def test_a_daemon_older_than_its_files_is_no_pending_restart_per_job():
    # each prolog starts the daemon afresh
    _model, _before, plan = per_job_plan(reads={"a1": {"active": True}})
    assert plan["domains"]["rackA"]["pending"] == {}
    assert plan["trays"]["a1"]["release"] is True


def test_the_map_follows_the_domains_node_order():
    model = model_of(RACK, order={"a1": 2, "a2": 0, "a3": 1})
    _model, _before, plan = per_job_plan(model=model, reads={tray: {"installed": False} for tray in RACK["rackA"]})
    names = [node["name"] for node in json.loads(plan["trays"]["a1"]["slurm_map"])["nodes"]]
    assert names == ["a2", "a3", "a1"]


def test_slurm_names_come_from_the_option_then_the_read_then_the_inventory():
    _model, _before, plan = per_job_plan(
        play_hosts=["a1", "a2"], by_tray={"a1": {"imex_slurm_node_name": "gpu-001"}},
        reads={"a1": {"installed": False, "node": "host-a1"}, "a2": {"installed": False, "node": "host-a2"}},
        slurm_names={"a3": "gpu-003"})
    nodes = json.loads(plan["trays"]["a2"]["slurm_map"])["nodes"]
    assert [node["name"] for node in nodes] == ["gpu-001", "host-a2", "gpu-003"]
    assert run_plan.slurm_node_names(["x1.example.net"], {}, {}, {}) == {"x1.example.net": "x1"}


def test_two_trays_with_one_slurm_name_are_refused():
    model = model_of(RACK)
    options = options_of(model, PER_JOB)
    plan = preflight(model, options)
    reads = {tray: per_job_read(plan, tray, node="gpu") for tray in plan["trays"]}
    reads["a1"]["slurm"]["node"] = "gpu-1"
    problems = refused(run_plan.read.after_read, plan, model, options, reads, script_sha256=SCRIPT_SHA)
    assert problems == ["domain rackA: trays a2, a3 share the Slurm node name gpu; the per-job map needs one name per "
                        "tray (set imex_slurm_node_name)"]


def test_work_on_one_tray_holds_back_the_whole_domains_writes_and_says_so():
    # A job without a daemon (it shares its nodes) still holds the writes: and the peers' map and
    # config.cfg stay as they are, so that a later job across them gets one list on every node.
    reads = {tray: {"installed": False} for tray in RACK["rackA"]}
    reads["a3"].update(slurm_state="MIXED")
    model, _before, plan = per_job_plan(reads=reads)
    assert plan["domains"]["rackA"]["busy"] == ["a3: Slurm node a3 state MIXED"]
    assert all(plan["trays"][tray]["predicted"] for tray in RACK["rackA"])
    (report,) = run_plan.verdicts.verdicts(plan, model, ["rackA"], {}, RACK["rackA"])
    assert report["ok"] is False and report["verdict"] == "unhealthy"
    held = "the per-job map %s, the prolog %s, the epilog %s, config.cfg %s" % (MAP, PROLOG, EPILOG, CONFIG_PATH)
    assert report["problems"][0] == (
        "tray a1: not written, as work runs on the domain (a3: Slurm node a3 state MIXED): %s; run site.yml again "
        "once it has ended" % held)


def test_a_running_job_daemon_is_never_stopped_by_a_run():
    _model, _before, plan = per_job_plan(reads={"a1": {"active": True, "slurm_state": "ALLOCATED"}})
    entry = plan["trays"]["a1"]
    assert entry["release"] is True and entry["predicted"] is True


def test_gpu_processes_count_as_work_and_imex_allow_busy_restart_overrides():
    reads = {"a2": {"compute_apps": [{"pid": 7, "name": "python3"}], "installed": False}}
    _model, _before, plan = per_job_plan(reads=reads)
    assert plan["domains"]["rackA"]["busy"] == ["a2: pid 7 python3"]
    _model, _before, plan = per_job_plan(reads=reads, every={"imex_allow_busy_restart": True})
    assert plan["domains"]["rackA"]["busy"] == [] and not plan["trays"]["a2"]["predicted"]


def test_validate_judges_the_installation_without_a_running_daemon():
    model, _before, plan = per_job_plan(converge=False)
    assert plan["prove_now"] == [] and plan["judge_now"] == ["rackA"]
    (report,) = run_plan.verdicts.verdicts(plan, model, ["rackA"], {}, RACK["rackA"])
    assert report["ok"] and report["verdict"] == "healthy" and report["per_job"]
    assert report["message"].startswith("domain rackA: per-job IMEX installed on 3 tray(s)")
    # nothing of a daemon to explain
    assert run_plan.verdicts.explain([dict(report, ok=False)], model, RACK["rackA"]) == []


def test_validate_names_every_difference_of_the_installation():
    reads = {"a1": {"map_text": "{}\n"}, "a2": {"script": b"#!/bin/sh\n", "enabled": "masked"},
             "a3": {"enabled": "enabled", "channel_major": None}}
    model, _before, plan = per_job_plan(converge=False, reads=reads)
    (report,) = run_plan.verdicts.verdicts(plan, model, ["rackA"], {}, RACK["rackA"])
    assert report["ok"] is False
    assert report["problems"] == [
        "tray a1: the per-job map %s is missing or differs from what site.yml installs (content, root-owned, mode "
        "0644)" % MAP,
        "tray a2: the prolog %s is missing or differs from what site.yml installs (content, root-owned, mode 0755)"
        % PROLOG,
        "tray a2: the epilog %s is missing or differs from what site.yml installs (content, root-owned, mode 0755)"
        % EPILOG,
        "tray a2: service nvidia-imex is masked: in the per-job mode it is neither enabled (it would start at boot "
        "with no job) nor masked (the prolog starts it)",
        "tray a3: service nvidia-imex is enabled: in the per-job mode it is neither enabled (it would start at boot "
        "with no job) nor masked (the prolog starts it)",
        "tray a3: nvidia-caps-imex-channels is not in /proc/devices: the NVIDIA driver is not loaded, and Slurm's "
        "switch/nvidia_imex cannot give a job its channel",
    ]


def test_a_prolog_with_the_wrong_mode_or_owner_is_rewritten():
    model, before, _plan_unused = per_job_plan()
    read = per_job_read(before, "a1")
    read["files"][PROLOG]["mode"] = "0644"
    read["files"][EPILOG]["uid"] = 1000
    assert run_plan.per_job_drift(read, before["trays"]["a1"]["slurm_job_paths"], installed_map(before, "a1"),
                                  SCRIPT_SHA) == ["prolog", "epilog"]


def test_per_job_domains_take_no_restart_whatever_their_writes():
    _model, _before, plan = per_job_plan(reads={"a1": {"installed": False}})
    writes = {tray: {"node list": {}, "config": {"changed": True}, "TLS material": {}} for tray in RACK["rackA"]}
    after = run_plan.restart.restart(plan, ["rackA"], writes, {})
    assert after["restarting"] == []
    assert all(not after["trays"][tray]["restart"] and not after["trays"][tray]["start"] for tray in RACK["rackA"])


def test_under_check_mode_the_per_job_domain_is_predicted_and_not_judged():
    _model, _before, plan = per_job_plan(check_mode=True, reads={"a1": {"installed": False}})
    assert plan["trays"]["a1"]["predicted"] and plan["trays"]["a1"]["write_map"]
    assert plan["judge_now"] == []


@pytest.mark.parametrize("prolog_dir, expected", [
    ("/etc/slurm/prolog.d", []),
    # slurmd runs every file of its prolog directory: the node list there would be run as a program
    ("/run/nvidia-imex/prolog.d", ["imex_nodes_config_path = '/run/nvidia-imex/prolog.d/nodes.cfg' lies in "
                                   "imex_slurm_prolog_dir = '/run/nvidia-imex/prolog.d': one path cannot be inside"]),
    ("/etc/nvidia-imex/tls/prolog.d", ["imex_slurm_prolog_dir = '/etc/nvidia-imex/tls/prolog.d' lies in imex_tls_dir = "
                                       "'/etc/nvidia-imex/tls', which holds the TLS files"]),
])
def test_the_prolog_directory_never_holds_or_lies_in_a_path_of_the_daemon(prolog_dir, expected):
    options = {"imex_slurm_prolog_dir": prolog_dir, "imex_slurm_epilog_dir": "/etc/slurm/epilog.d",
               "imex_config_path": "/etc/nvidia-imex/config.cfg", "imex_tls_dir": "/etc/nvidia-imex/tls",
               "imex_nodes_config_path": "/run/nvidia-imex/prolog.d/nodes.cfg" if prolog_dir.startswith("/run")
               else "/run/nvidia-imex/nodes.cfg"}
    problems = run_plan.per_job_option_problems(options)
    assert len(problems) == len(expected), problems
    for problem, start in zip(problems, expected):
        assert problem.startswith(start), problem
