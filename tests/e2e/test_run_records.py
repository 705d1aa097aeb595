"""Runs that stop before the proof still leave their records: the report of each domain (not proven by
this run, where and why it stopped), the summary, the job artifacts and node_exporter gauges that no
longer say the domain is proven.

One bed of one rack of three trays, tests in order: a converged, proven run first (its gauges say
proven), then a run stopped at each of three stages: the NVLink fabric gate, a tray ssh does not
reach, and the options refused before any tray is contacted.
"""
from __future__ import annotations

import json
import os
import re

import pytest

from conftest import SIMRACK, fresh_ssh_connections, requires_rack, run_playbook

pytestmark = requires_rack
RACK_SHAPE = (1, 3)
DOMAIN = "rack1"
GAUGES = "rackscale_imex_%s.prom" % DOMAIN


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return {"imex_report_dir": str(tmp_path_factory.mktemp("reports")),
            "imex_textfile_dir": str(tmp_path_factory.mktemp("textfiles"))}


@pytest.fixture(scope="module")
def proven(simulated_rack, outputs):
    """The bed converged and proven once: the time of that proof, as its gauges say."""
    run = run_playbook("site.yml", simulated_rack.inventory, extravars=dict(outputs, imex_validate_timeout_s=60))
    assert run.rc == 0, run.stdout[-5000:]
    gauges = read_gauges(outputs)
    assert gauge(gauges, "rackscale_imex_domain_ok") == 1
    return gauge(gauges, "rackscale_imex_domain_last_success_timestamp_seconds")


def read_gauges(outputs):
    with open(os.path.join(outputs["imex_textfile_dir"], GAUGES)) as handle:
        return handle.read()


def gauge(text, name, **labels):
    """The value of a gauge of the domain (labels beyond the domain given as keywords), None when absent."""
    shown = ",".join(['domain="%s"' % DOMAIN] + ['%s="%s"' % item for item in labels.items()])
    found = re.search(r"^%s\{%s\} (\S+)$" % (re.escape(name), re.escape(shown)), text, re.MULTILINE)
    return float(found.group(1)) if found else None


def report(outputs):
    with open(os.path.join(outputs["imex_report_dir"], DOMAIN + ".json")) as handle:
        return json.load(handle)


def artifact_data(run):
    """The set_stats data of the job, as ansible-runner hands it to AWX."""
    stats = [event for event in run.events if event.get("event") == "playbook_on_stats"][-1]["event_data"]
    return stats.get("artifact_data") or {}


def assert_recorded(run, outputs, proven_at, stage, trays, reason):
    """The run failed, and left the domain on record as not proven by it, stopped at ``stage`` on
    ``trays`` because of ``reason``: in its report, the summary, the artifacts and the gauges."""
    assert run.rc != 0, run.stdout[-3000:]
    found = report(outputs)
    assert found["verdict"] == "not_proven" and found["ok"] is False, found
    assert found["stopped_at"] == stage and found["failed_trays"] == trays, found
    assert any(reason in problem for problem in found["problems"]), found["problems"]
    assert found["last_proven_at"] and found["run_id"]
    assert "PRIVATE KEY" not in json.dumps(found)
    data = artifact_data(run)
    assert data["imex_domains"] == {DOMAIN: "not_proven"}, data
    assert data["imex_run"]["id"] == found["run_id"] and data["imex_run"]["report_dir"] == outputs["imex_report_dir"]
    stopped = data["imex_run"]["stopped"]
    assert stopped["stage"] == stage and stopped["domains"] == [DOMAIN] and stopped["trays"] == trays, stopped
    assert any(reason in line for line in stopped["reasons"]), stopped
    with open(os.path.join(outputs["imex_report_dir"], "summary.md")) as handle:
        summary = handle.read()
    assert "| %s | not_proven |" % DOMAIN in summary and "The run stopped at its %s stage" % stage in summary, summary
    gauges = read_gauges(outputs)
    assert gauge(gauges, "rackscale_imex_domain_ok") == 0, gauges
    # Since when it is not proven: the last proof is kept; no older run's READY nodes or state stand.
    assert gauge(gauges, "rackscale_imex_domain_last_success_timestamp_seconds") == proven_at, gauges
    assert gauge(gauges, "rackscale_imex_domain_run_stopped_timestamp_seconds", stage=stage) > proven_at, gauges
    assert "rackscale_imex_node_ready{" not in gauges and "rackscale_imex_domain_up{" not in gauges, gauges
    assert "Records: %s" % outputs["imex_report_dir"] in run.stdout


def test_a_run_stopped_by_the_fabric_gate_leaves_the_domain_not_proven(simulated_rack, outputs, proven):
    simulated_rack.simrack("fault", "fabric", "rack1-tray02", "clique_id=7")
    try:
        run = run_playbook("site.yml", simulated_rack.inventory, extravars=outputs)
    finally:
        simulated_rack.simrack("fault", "heal", "fabric", "rack1-tray02")
    # Which side of a split partition is wrong is not the gate's to say: it names every tray, by clique.
    assert_recorded(run, outputs, proven, "gate", ["rack1-tray01", "rack1-tray02", "rack1-tray03"],
                    "clique 7 on rack1-tray02")
    assert run.changed_hosts() == []


def test_a_run_stopped_by_a_tray_ssh_does_not_reach_names_it(simulated_rack, outputs, proven):
    simulated_rack.simrack("fault", "ssh-block", "rack1-tray03")
    try:
        with fresh_ssh_connections() as ssh:
            run = run_playbook("site.yml", simulated_rack.inventory, extravars=dict(outputs, **ssh))
    finally:
        simulated_rack.simrack("fault", "heal", "ssh-block", "rack1-tray03")
    assert_recorded(run, outputs, proven, "read", ["rack1-tray03"], "ssh")
    assert {e["event_data"]["host"] for e in run.events if e.get("event") == "runner_on_unreachable"} == {"rack1-tray03"}
    assert run.changed_hosts() == []


def test_a_run_whose_options_are_refused_records_it_before_any_tray_is_contacted(simulated_rack, outputs, proven):
    # As from a shell or an AWX survey: text, refused by the argument check of the playbook's first play.
    run = run_playbook("site.yml", simulated_rack.inventory, extravars=outputs,
                       cmdline_vars={"imex_validate_timeout_s": "soon"})
    assert_recorded(run, outputs, proven, "arguments", ["rack1-tray01", "rack1-tray02", "rack1-tray03"],
                    "imex_validate_timeout_s")
    assert not [e for e in run.events if e.get("event") == "runner_on_unreachable"]
    assert not [e for e in run.events if e.get("event_data", {}).get("task_action") == "rackscale.imex.imex_tray_info"]


# The read comes first (the locks follow it, where the run has something to do): none of its trays reached
# stops the run at its read, naming every tray.
def test_a_domain_whose_trays_are_all_dark_is_recorded_not_proven(simulated_rack, outputs, proven):
    playbook, stage, trays = "site.yml", "read", ["rack1-tray01", "rack1-tray02", "rack1-tray03"]
    every_tray = ["rack1-tray01", "rack1-tray02", "rack1-tray03"]
    for tray in every_tray:
        simulated_rack.simrack("fault", "ssh-block", tray)
    try:
        with fresh_ssh_connections() as ssh:
            run = run_playbook(playbook, simulated_rack.inventory, extravars=dict(outputs, **ssh))
    finally:
        for tray in every_tray:
            simulated_rack.simrack("fault", "heal", "ssh-block", tray)
    assert_recorded(run, outputs, proven, stage, trays, "ssh")
    assert run.changed_hosts() == []


def test_validate_with_one_tray_ssh_does_not_reach_stops_at_the_gate_naming_it(simulated_rack, outputs, proven):
    # The read keeps the tray in the play for the plan: its fabric identity is unknown, so the gate refuses
    # the domain, naming the tray with ssh's message, and the rescue records it.
    simulated_rack.simrack("fault", "ssh-block", "rack1-tray03")
    try:
        with fresh_ssh_connections() as ssh:
            run = run_playbook("validate.yml", simulated_rack.inventory, extravars=dict(outputs, **ssh))
    finally:
        simulated_rack.simrack("fault", "heal", "ssh-block", "rack1-tray03")
    assert_recorded(run, outputs, proven, "gate", ["rack1-tray03"], "ssh")
    assert {e["event_data"]["host"] for e in run.events if e.get("event") == "runner_on_unreachable"} == {"rack1-tray03"}


# Cuts the domain's first lock tray off ssh once the domain is proven (the operator's post-restart tasks run
# then): the release at the end of the run cannot reach it.
CUT_OFF_AFTER_THE_PROOF = """---
- name: Cut the first lock tray off ssh (the test's fault)
  ansible.builtin.command:
    argv: [%s, fault, ssh-block, rack1-tray01]
  environment:
    SIMRACK_STATE: %s
  delegate_to: localhost
  run_once: true
  changed_when: true
"""


# Last: it leaves a lock on the bed (removed at the end, as an operator would once the tray is back).
def test_a_lock_the_release_cannot_reach_is_recorded_with_its_tray_and_when_it_goes_stale(
        simulated_rack, outputs, proven, tmp_path):
    hook = tmp_path / "post.yml"
    hook.write_text(CUT_OFF_AFTER_THE_PROOF % (json.dumps(SIMRACK), json.dumps(simulated_rack.state_dir)))
    # A changed setting restarts the domain, so the post-restart tasks run; no multiplexed session outlives the cut.
    extravars = dict(outputs, imex_settings={"LOG_LEVEL": "3"}, imex_post_restart_tasks=str(hook),
                     ansible_ssh_args="-C -o ControlMaster=no -o ServerAliveInterval=5 -o ServerAliveCountMax=2")
    try:
        with fresh_ssh_connections() as ssh:
            run = run_playbook("site.yml", simulated_rack.inventory, extravars=dict(extravars, **ssh))
    finally:
        simulated_rack.simrack("fault", "heal", "ssh-block", "rack1-tray01")
    try:
        assert run.rc != 0, run.stdout[-3000:]
        # The domain was proven: its report stands; the run stopped at its lock, naming the lock it left.
        assert report(outputs)["verdict"] == "healthy"
        data = artifact_data(run)
        assert data["imex_domains"] == {DOMAIN: "healthy"}, data
        assert "stopped" in data["imex_run"], run.stdout[-6000:]
        stopped = data["imex_run"]["stopped"]
        assert (stopped["stage"], stopped["trays"]) == ("lock", ["rack1-tray01"]), stopped
        assert [(lock["domain"], lock["holder"], lock["stale_after_s"]) for lock in stopped["locks_left"]] == [
            (DOMAIN, "rack1-tray01", 3600)], stopped
        with open(os.path.join(outputs["imex_report_dir"], "summary.md")) as handle:
            summary = handle.read()
        assert "The run stopped at its lock stage" in summary and "its run lock was left on tray rack1-tray01" in summary
        assert stopped["locks_left"][0]["stale_by"] in summary
        # The delegated release did not take the play's run_once tray for unreachable.
        assert not (run.stats.get("dark") or {}), run.stats
        # And the lock is indeed still there, this run's.
        held = simulated_rack.ssh("rack1-tray01", "cat", "/run/rackscale-imex/run.lock")
        assert held.returncode == 0 and json.loads(held.stdout)["owner"] == data["imex_run"]["id"], held.stdout
    finally:
        simulated_rack.ssh("rack1-tray01", "rm", "-f", "/run/rackscale-imex/run.lock")
