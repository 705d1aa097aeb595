"""site.yml and validate.yml on a simulated bed of two racks, through ansible-runner (as AWX runs them).

One bed for the module, tests in order: the first run starts every daemon and converges to healthy
domains with reports and job artifacts; the second run and check mode change nothing; each rack's
trays list only their own rack; a tray swap is predicted by check mode and restarts only its rack; a
reboot keeps channel0 and the domain; a domain membership given as a host var (each domain group's
vars) holds without the collection's vars plugin.

What check mode predicts on fresh or drifted trays, and how many domains a wave takes, the plan
decides: the scenario and unit tests prove it (tests/unit/plan, tests/README.md).
"""
from __future__ import annotations

import json
import os

import pytest
import yaml

from conftest import requires_rack, run_playbook

pytestmark = requires_rack
RACK_SHAPE = (2, 4)
with open(os.path.join(os.path.dirname(__file__), "..", "..", "galaxy.yml")) as _galaxy:
    GALAXY_VERSION = str(yaml.safe_load(_galaxy)["version"])
IMEX_FILES = "sha256sum /etc/nvidia-imex/config.cfg /etc/nvidia-imex/nodes_config.cfg /etc/modprobe.d/nvidia-imex.conf 2>&1; ls -l /dev/nvidia-caps-imex-channels 2>&1"


# The tasks whose changes check mode must predict exactly (host, task) for the real run after it:
# the three files of a tray, and the scheduling of a domain restart (the handlers themselves only
# partly run in check mode: a stop is predicted, a start of a daemon that never stopped is not).
FILE_TASKS = {"Write the domain's node list", "Set the daemon config keys",
              "Ensure the IMEX channels (channel0 as the mode wants it, persistent; isolation channels now)"}
RESTART_TASK = "Schedule a restart of every tray of a changed domain, or a start of a tray that is not READY"


def changes_of(run, tasks):
    return {(host, task) for host, task in run.changed_tasks() if task in tasks}


def tray_files(rack, trays):
    return {tray: rack.ssh(tray, "sh", "-c", IMEX_FILES).stdout for tray in trays}


def daemon_start_times(rack, trays):
    return {tray: rack.ssh(tray, "systemctl", "show", "-p", "ExecMainStartTimestampMonotonic", "nvidia-imex").stdout.strip()
            for tray in trays}


def all_trays(rack):
    return rack.trays_of(1) + rack.trays_of(2)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return str(tmp_path_factory.mktemp("reports"))


@pytest.fixture(scope="module")
def first_run(simulated_rack, reports):
    """The first run on fresh trays."""
    return run_playbook("site.yml", simulated_rack.inventory, extravars={"imex_report_dir": reports})


def test_first_run_proves_every_domain_healthy_with_reports_and_artifacts(first_run, reports, simulated_rack):
    real = first_run
    assert real.rc == 0, real.stdout[-6000:]
    assert real.changed_hosts() == sorted(all_trays(simulated_rack))
    # The run's read of each tray found the fresh daemons stopped: a first converge only starts them.
    assert [task for _, task, _, _ in real.ok_results() if task == "Stop IMEX daemon"] == []
    assert sorted(h for h, t in real.changed_tasks() if t == "Start IMEX daemon") == sorted(all_trays(simulated_rack))
    for domain in ("rack1", "rack2"):
        with open(os.path.join(reports, domain + ".json")) as handle:
            report = json.load(handle)
        assert report["verdict"] == "healthy" and report["ok"] is True
        assert report["status"]["domain_state"] == "UP"
        expected = [tray_address(simulated_rack, t) for t in simulated_rack.trays_of(int(domain[-1]))]
        assert report["expected_nodes"] == expected
        assert [node["status"] for node in report["status"]["nodes"]] == ["READY"] * 4
        assert report["status"]["broken_pairs"] == []
    stats = [e for e in real.events if e.get("event") == "playbook_on_stats"][-1]["event_data"]
    assert stats["artifact_data"]["imex_domains"] == {"rack1": "healthy", "rack2": "healthy"}
    assert stats["artifact_data"]["imex_domain_problems"] == {"rack1": [], "rack2": []}
    # Each report is stamped with the run; the summary covers both waves; the run says where they are.
    assert stats["artifact_data"]["imex_run"]["report_dir"] == reports
    run_id = stats["artifact_data"]["imex_run"]["id"]
    for domain in ("rack1", "rack2"):
        with open(os.path.join(reports, domain + ".json")) as handle:
            report = json.load(handle)
        assert report["run_id"] == run_id and report["generated_at"].endswith("Z")
        assert report["collection_version"] == GALAXY_VERSION
    with open(os.path.join(reports, "summary.md")) as handle:
        summary = handle.read()
    assert "Run `%s`" % run_id in summary
    assert "| rack1 | healthy | UP | 4/4 | 0 |" in summary and "| rack2 | healthy | UP | 4/4 | 0 |" in summary
    assert "Reports: %s" % reports in real.stdout
    statuses = real.module_results("rackscale.imex.imex_status")
    assert statuses and all(res.get("domain_state") for _, res in statuses)
    # One status read per domain for the whole validation, from the domain's first tray.
    validators = sorted(host for host, task in real.ok_tasks("rackscale.imex.imex_status")
                        if task == "Wait for each domain to become healthy, from its first tray")
    assert validators == ["rack1-tray01", "rack2-tray01"]


def test_validate_leaves_node_exporter_gauges_per_domain(first_run, simulated_rack, reports, tmp_path):
    textfiles = tmp_path / "textfile_collector"
    run = run_playbook("validate.yml", simulated_rack.inventory,
                       extravars={"imex_report_dir": reports, "imex_textfile_dir": str(textfiles)})
    assert run.rc == 0, run.stdout[-3000:]
    assert sorted(os.listdir(textfiles)) == ["rackscale_imex_rack1.prom", "rackscale_imex_rack2.prom"]
    gauges = (textfiles / "rackscale_imex_rack2.prom").read_text()
    for line in ('rackscale_imex_domain_ok{domain="rack2"} 1', 'rackscale_imex_domain_up{domain="rack2"} 1',
                 'rackscale_imex_domain_nodes_ready{domain="rack2"} 4', 'rackscale_imex_domain_broken_pairs{domain="rack2"} 0',
                 'rackscale_imex_domain_version_skew{domain="rack2"} 0'):
        assert line + "\n" in gauges, gauges
    assert gauges.count("rackscale_imex_node_ready{") == 4


def tray_address(rack, tray):
    with open(rack.inventory) as handle:
        inventory = yaml.safe_load(handle)
    for group in inventory["all"]["children"]["imex_domains"]["children"].values():
        if tray in group.get("hosts", {}):
            return group["hosts"][tray]["ansible_host"]
    raise KeyError(tray)


def test_trays_hold_identical_node_lists_of_their_own_rack_and_channel0(first_run, simulated_rack):
    for rack_number in (1, 2):
        trays = simulated_rack.trays_of(rack_number)
        lists = {simulated_rack.ssh(t, "cat", "/etc/nvidia-imex/nodes_config.cfg").stdout for t in trays}
        assert lists == {"".join(tray_address(simulated_rack, t) + "\n" for t in trays)}
        for tray in trays:
            channel = simulated_rack.ssh(tray, "stat", "-c", "%F %a %t", "/dev/nvidia-caps-imex-channels/channel0")
            assert channel.stdout.startswith("character special file 666"), channel.stdout + channel.stderr
            enabled = simulated_rack.ssh(tray, "systemctl", "is-enabled", "nvidia-imex").stdout.strip()
            assert enabled == "enabled"


def test_second_run_and_check_mode_change_nothing(first_run, simulated_rack, reports):
    again = run_playbook("site.yml", simulated_rack.inventory, extravars={"imex_report_dir": reports})
    assert again.rc == 0, again.stdout[-4000:]
    assert again.changed_hosts() == []
    check = run_playbook("site.yml", simulated_rack.inventory, extravars={"imex_report_dir": reports},
                         check=True, diff=True)
    assert check.rc == 0 and check.changed_hosts() == []
    # Each tray is read once; the files it already holds are not written again.
    trays = sorted(all_trays(simulated_rack))
    for run in (again, check):
        assert sorted(host for host, _ in run.ok_tasks("rackscale.imex.imex_tray_info")) == trays
        assert run.ok_tasks("rackscale.imex.imex_nodes_config") == run.ok_tasks("rackscale.imex.imex_config") == []


def test_validate_is_read_only_under_check(first_run, simulated_rack, reports):
    run = run_playbook("validate.yml", simulated_rack.inventory, extravars={"imex_report_dir": reports}, check=True)
    assert run.rc == 0, run.stdout[-4000:]
    assert run.changed_hosts() == []


@pytest.fixture(scope="module")
def swap_inventories(simulated_rack, tmp_path_factory):
    """The bed's inventory with rack1-tray02 moved to the address of the spare rack1-tray04, which leaves the
    inventory ("swapped"), as a path."""
    directory = tmp_path_factory.mktemp("swap")
    with open(simulated_rack.inventory) as handle:
        inventory = yaml.safe_load(handle)
    rack1 = inventory["all"]["children"]["imex_domains"]["children"]["rack1"]["hosts"]
    spare = rack1.pop("rack1-tray04")
    rack1["rack1-tray02"] = dict(rack1["rack1-tray02"], ansible_host=spare["ansible_host"],
                                 imex_address=spare["ansible_host"])
    return {"swapped": write(directory / "swapped.yml", inventory)}


def test_tray_swap_restarts_only_its_rack(first_run, simulated_rack, reports, swap_inventories):
    """rack1-tray02 is replaced by the spare board at another address (rack1-tray04's), and rack1 goes from four
    trays to three."""
    swapped_path = swap_inventories["swapped"]
    # Check mode first, with the swapped inventory: it must change nothing on any tray (the old
    # tray02 and the spare included) and predict the real run that follows.
    trays = all_trays(simulated_rack)
    files_before, starts_before = tray_files(simulated_rack, trays), daemon_start_times(simulated_rack, trays)
    check = run_playbook("site.yml", swapped_path, extravars={"imex_report_dir": reports}, check=True, diff=True)
    assert check.rc == 0, check.stdout[-6000:]
    assert tray_files(simulated_rack, trays) == files_before, "check mode changed a tray"
    assert daemon_start_times(simulated_rack, trays) == starts_before, "check mode restarted a daemon"
    run = run_playbook("site.yml", swapped_path, extravars={"imex_report_dir": reports})
    assert run.rc == 0, run.stdout[-6000:]
    assert check.changed_hosts() == run.changed_hosts() == ["rack1-tray01", "rack1-tray02", "rack1-tray03"]
    assert changes_of(check, FILE_TASKS) == changes_of(run, FILE_TASKS)
    assert changes_of(check, {RESTART_TASK}) == changes_of(run, {RESTART_TASK}) == {
        (t, RESTART_TASK) for t in ("rack1-tray01", "rack1-tray02", "rack1-tray03")}
    # The spare ran the 4-tray list of the first run, so every daemon of rack1 stops, then starts.
    stops = sorted(h for h, t in run.changed_tasks() if t == "Stop IMEX daemon")
    starts = sorted(h for h, t in run.changed_tasks() if t == "Start IMEX daemon")
    assert stops == starts == ["rack1-tray01", "rack1-tray02", "rack1-tray03"]
    assert sorted(h for h, t in check.changed_tasks() if t == "Stop IMEX daemon") == stops
    assert sorted(h for h, t in check.changed_tasks() if t == "Start IMEX daemon") == starts
    rack2_after = daemon_start_times(simulated_rack, simulated_rack.trays_of(2))
    assert rack2_after == {t: starts_before[t] for t in simulated_rack.trays_of(2)}
    with open(os.path.join(reports, "rack1.json")) as handle:
        assert json.load(handle)["verdict"] == "healthy"


def write(path, data):
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_reboot_keeps_channel0_and_the_domain(first_run, simulated_rack, reports, swap_inventories):
    # The rack as the swap test left it: rack1 on the swapped inventory (the next test takes it back).
    simulated_rack.simrack("fault", "reboot", "rack2-tray03")
    channel = simulated_rack.ssh("rack2-tray03", "stat", "-c", "%F %a", "/dev/nvidia-caps-imex-channels/channel0")
    assert channel.stdout.strip() == "character special file 666", channel.stdout + channel.stderr
    run = run_playbook("validate.yml", swap_inventories["swapped"],
                       extravars={"imex_report_dir": reports, "imex_validate_timeout_s": 120})
    assert run.rc == 0, run.stdout[-4000:]


def test_domain_membership_from_a_host_var_without_the_vars_plugin(first_run, simulated_rack, tmp_path):
    """imex_domain set through each domain group's vars, the collection's vars plugin off: the run takes the
    rack back from the swap to the inventory it was built with (each rack's node list, both proven), and
    validate.yml proves it."""
    with open(simulated_rack.inventory) as handle:
        inventory = yaml.safe_load(handle)
    for name, group in inventory["all"]["children"]["imex_domains"]["children"].items():
        group["vars"] = dict(group.get("vars") or {}, imex_domain=name)
    path = write(tmp_path / "host-var-domains.yml", inventory)
    plain_vars = {"ANSIBLE_VARS_ENABLED": "host_group_vars"}
    reports = str(tmp_path / "reports")
    run = run_playbook("site.yml", path, extravars={"imex_report_dir": reports}, envvars=plain_vars)
    assert run.rc == 0, run.stdout[-5000:]
    for number in (1, 2):
        trays = simulated_rack.trays_of(number)
        expected = "".join(tray_address(simulated_rack, tray) + "\n" for tray in trays)
        assert {tray: simulated_rack.ssh(tray, "cat", "/etc/nvidia-imex/nodes_config.cfg").stdout for tray in trays} \
            == dict.fromkeys(trays, expected)
        with open(os.path.join(reports, "rack%d.json" % number)) as handle:
            assert json.load(handle)["verdict"] == "healthy"
    checked = run_playbook("validate.yml", path, extravars={"imex_report_dir": reports}, envvars=plain_vars)
    assert checked.rc == 0, checked.stdout[-5000:]
