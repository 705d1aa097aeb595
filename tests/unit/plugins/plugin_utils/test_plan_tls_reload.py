# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan's TLS decisions: new TLS files alone are reloaded (SIGUSR1) instead of restarting the
domain, also under work and on part of a domain; anything that changes config.cfg still restarts;
TLS files newer than the daemon's start and its last reload are a pending reload; the certificates
are checked in preflight and their expiry is reported and gauged."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.plugins.plugin_utils._run_outputs import render_summary, render_textfile
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import (
    BEFORE,
    STARTED,
    TLS_DIR,
    TLS_PEM,
    all_ready,
    judge,
    model_of,
    options_of,
    planned,
    preflight,
    refused,
    stated,
    status_of,
    wrote,
)
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import NOW, material

TLS = dict(TLS_PEM, imex_tls=True)
RACK = {"rack1": ["t1", "t2", "t3"]}
MARK = TLS_DIR + "/reloaded"
TLS_FILES = [TLS_DIR + "/ca.crt", TLS_DIR + "/tray.crt", TLS_DIR + "/tray.key"]
BUSY = {"compute_apps": [{"pid": 4242, "name": "python3"}]}
# Valid at the preflight tests' fixed time NOW for the three trays of RACK.
TLS_AT_NOW = dict(material(ips=["198.18.1.11", "198.18.1.12", "198.18.1.13"], now=NOW, days=3650), imex_tls=True)


def tls_planned(reads=None, **kwargs):
    return planned(domains=RACK, every=TLS, reads=reads, **kwargs)


def stat_files(files_ctime=BEFORE, mark_ctime=None):
    found = {path: stated(files_ctime) for path in TLS_FILES}
    found[MARK] = stated(mark_ctime) if mark_ctime is not None else {"exists": False, "ctime": None, "error": None}
    return found


# --- after the read: what a TLS write may lead to ---------------------------------------------------

def test_a_converged_running_tray_may_reload_and_writes_its_tls_files_for_real():
    _model, _options, plan = tls_planned()
    entry = plan["trays"]["t1"]
    assert (entry["write_tls"], entry["tls_reload_ok"], entry["tls_predicted"], entry["predicted"]) == (
        True, True, False, False)
    assert entry["read_stat_files"][:len(TLS_FILES) + 1] == TLS_FILES + [MARK]


@pytest.mark.parametrize("kwargs", [{"reads": {"t2": BUSY}}, {"play_hosts": ["t1", "t2"]}])
def test_under_work_or_on_part_of_the_domain_the_tls_files_are_still_written(kwargs):
    _model, _options, plan = tls_planned(**kwargs)
    assert plan["domains"]["rack1"]["predicted"] is True
    assert all(plan["trays"][tray]["tls_predicted"] is False and plan["trays"][tray]["tls_reload_ok"]
               for tray in plan["domains"]["rack1"]["trays_in_run"])


def test_under_check_mode_the_tls_files_are_predictions():
    _model, _options, plan = tls_planned(check_mode=True)
    assert plan["trays"]["t1"]["tls_reload_ok"] is True and plan["trays"]["t1"]["tls_predicted"] is True


def test_tls_turned_on_a_config_change_or_a_stopped_daemon_cannot_reload():
    # TLS off on disk (config.cfg differs from the one TLS needs), t2 stopped, t3 with a stale node list.
    _model, _options, plan = tls_planned(reads={"t1": {"config": "IMEX_ENABLE_AUTH_ENCRYPTION=0\n"},
                                                "t2": {"active": False}, "t3": {"nodes": "198.18.1.99\n"}})
    assert [plan["trays"][tray]["tls_reload_ok"] for tray in ("t1", "t2", "t3")] == [False, False, False]
    assert plan["trays"]["t1"]["write_config"] is True and plan["trays"]["t3"]["write_nodes"] is True


def test_tls_off_never_reloads():
    _model, _options, plan = planned(domains=RACK)
    assert plan["trays"]["t1"]["write_tls"] is False and plan["trays"]["t1"]["tls_reload_ok"] is False
    after = run_plan.restart.restart(plan, ["rack1"], {"t1": wrote(tls=True), "t2": wrote(), "t3": wrote()}, {})
    assert after["domains"]["rack1"]["restart"] is True and after["domains"]["rack1"]["reload"] == {}


# --- the restart stage: reload instead of restart ---------------------------------------------------

def test_new_tls_files_alone_reload_the_tray_without_a_restart():
    _model, _options, plan = tls_planned()
    after = run_plan.restart.restart(plan, ["rack1"], {"t1": wrote(tls=True), "t2": wrote(tls=False), "t3": wrote(tls=False)},
                                     all_ready(plan, ["rack1"]))
    domain = after["domains"]["rack1"]
    assert (domain["restart"], domain["reload"], domain["restart_reasons"]) == (False, {"t1": "new TLS material"}, {})
    assert after["restarting"] == [] and domain["start"] == []
    # The status read before the reload does not prove the reloaded daemons: the proof reads again.
    assert domain["proven_before_restart"] is False and after["prove_now"] == ["rack1"]
    assert [after["trays"][tray]["reload"] for tray in ("t1", "t2", "t3")] == [True, False, False]
    # The reload alone takes the tray into the include of the reload, the restart and the start.
    assert [after["trays"][tray]["reload_or_restart"] for tray in ("t1", "t2", "t3")] == [True, False, False]
    assert after["trays"]["t1"]["action"] == ("reloading the TLS credentials of the daemon (SIGUSR1; no restart of "
                                              "domain rack1): new TLS material")
    assert after["trays"]["t1"]["restart"] is False


def test_a_renewal_under_work_is_reloaded_not_refused():
    _model, _options, plan = tls_planned(reads={"t2": BUSY})
    assert plan["domains"]["rack1"]["busy"] == ["t2: pid 4242 python3"]
    after = run_plan.restart.restart(plan, ["rack1"], {"t1": wrote(tls=True), "t2": wrote(tls=True), "t3": wrote(tls=False)}, {})
    assert after["domains"]["rack1"]["reload"] == {"t1": "new TLS material", "t2": "new TLS material"}
    assert after["domains"]["rack1"]["restart"] is False
    # The guard only looks at restarting domains: a reload passes it under work.
    assert run_plan.guard.guard(after, ["rack1"], {"t2": dict(BUSY, services={"nvidia-imex": "active"})}) == after


def test_a_renewal_on_part_of_a_domain_is_reloaded_not_refused():
    _model, _options, plan = tls_planned(play_hosts=["t1", "t2"])
    after = run_plan.restart.restart(plan, ["rack1"], {"t1": wrote(tls=True), "t2": wrote(tls=False)}, {})
    assert after["domains"]["rack1"]["reload"] == {"t1": "new TLS material"}


def test_tls_files_with_a_config_change_restart_the_domain_and_reload_nothing():
    _model, _options, plan = tls_planned(reads={"t1": {"config": "IMEX_ENABLE_AUTH_ENCRYPTION=0\n"}})
    after = run_plan.restart.restart(plan, ["rack1"], {"t1": wrote(config=True, tls=True), "t2": wrote(tls=True),
                                                       "t3": wrote()}, {})
    domain = after["domains"]["rack1"]
    # t2 could reload alone, but the domain restarts for t1's config, which loads t2's files too.
    assert domain["restart"] is True and domain["reload"] == {}
    assert domain["restart_reasons"] == {"t1": "new TLS material and config"}
    assert [after["trays"][tray]["reload"] for tray in ("t1", "t2", "t3")] == [False, False, False]


def test_a_busy_domain_whose_config_changes_is_still_refused():
    _model, _options, plan = tls_planned(reads={"t1": {"config": "IMEX_ENABLE_AUTH_ENCRYPTION=0\n"}, "t2": BUSY})
    problems = refused(run_plan.restart.restart, plan, ["rack1"], {"t1": wrote(config=True, tls=True), "t2": wrote(tls=True),
                                                                   "t3": wrote()}, {})
    assert len(problems) == 1 and "domain rack1 is not restarted: work runs on it (t2: pid 4242 python3)" in problems[0]
    # t1's writes ran as predictions; t2's TLS material alone was written for real (a reload needs no restart).
    assert "Its new TLS material and config (on t1) is held back. Written before this refusal: TLS material on t2." \
        in problems[0]


def test_a_tls_change_of_a_stopped_tray_joins_without_a_reload():
    _model, _options, plan = tls_planned(reads={"t3": {"active": False}})
    after = run_plan.restart.restart(plan, ["rack1"], {"t1": wrote(), "t2": wrote(), "t3": wrote(tls=True)},
                                     all_ready(plan, ["rack1"]))
    assert after["domains"]["rack1"]["reload"] == {} and after["domains"]["rack1"]["restart"] is False
    assert after["trays"]["t3"]["start"] is True


# --- pending reloads ----------------------------------------------------------------------------------

def test_tls_files_newer_than_the_start_and_the_last_reload_are_a_pending_reload():
    read = {"services": {"nvidia-imex": "active"}, "services_started": {"nvidia-imex": STARTED},
            "stat_files": stat_files(STARTED + 600)}
    assert run_plan.pending_reload(read, "nvidia-imex", TLS_FILES, MARK) == (
        "TLS credentials loaded at 2025-11-25T14:00:00Z, before /etc/nvidia-imex/tls/ca.crt, "
        "/etc/nvidia-imex/tls/tray.crt, /etc/nvidia-imex/tls/tray.key were written at 2025-11-25T14:10:00Z")
    # Reloaded after they were written: in force.
    read["stat_files"] = stat_files(STARTED + 600, mark_ctime=STARTED + 601)
    assert run_plan.pending_reload(read, "nvidia-imex", TLS_FILES, MARK) is None
    # A mark from before a later restart counts for nothing: the start is later.
    read["stat_files"] = stat_files(STARTED + 600, mark_ctime=STARTED - 100)
    assert run_plan.pending_reload(read, "nvidia-imex", TLS_FILES, MARK).startswith(
        "TLS credentials loaded at 2025-11-25T14:00:00Z")
    assert run_plan.pending_reload({"services": {"nvidia-imex": "inactive"}}, "nvidia-imex", TLS_FILES, MARK) is None


def test_a_pending_reload_is_reloaded_by_the_next_run_without_a_restart():
    _model, _options, plan = tls_planned(reads={"t2": {"stat_files": stat_files(STARTED + 600)}})
    domain = plan["domains"]["rack1"]
    assert domain["pending"] == {} and list(domain["pending_reload"]) == ["t2"]
    after = run_plan.restart.restart(plan, ["rack1"], {tray: wrote(tls=False) for tray in RACK["rack1"]}, {})
    assert after["domains"]["rack1"]["restart"] is False
    assert after["domains"]["rack1"]["reload"] == {"t2": "pending reload: " + domain["pending_reload"]["t2"]}
    assert after["domains"]["rack1"]["pending_reload"] == {}


def test_tls_files_newer_than_a_daemon_that_runs_an_old_config_are_a_pending_restart():
    _model, _options, plan = tls_planned(reads={"t2": {"started": BEFORE - 60, "stat_files": stat_files(STARTED)}})
    domain = plan["domains"]["rack1"]
    assert list(domain["pending"]) == ["t2"] and domain["pending_reload"] == {}
    assert plan["trays"]["t2"]["tls_reload_ok"] is False


def test_a_pending_reload_makes_a_healthy_domain_stale_in_a_proof():
    model, _options, plan = tls_planned(reads={"t2": {"stat_files": stat_files(STARTED + 600)}}, converge=False)
    (report,) = judge(plan, model, {"rack1": status_of(plan, "rack1")},
                      pending={"rack1": plan["domains"]["rack1"]["pending"]})
    assert (report["verdict"], report["ok"]) == ("stale", False)
    assert report["problems"] == ["tray t2 runs TLS credentials older than its files on disk (%s): a reload is "
                                  "pending; run site.yml to reload them (no restart)"
                                  % plan["domains"]["rack1"]["pending_reload"]["t2"]]


# --- verdicts, reports and gauges -------------------------------------------------------------------

def test_the_report_says_which_trays_reloaded_and_carries_each_certificates_expiry():
    model, _options, plan = tls_planned()
    after = run_plan.restart.restart(plan, ["rack1"], {"t1": wrote(tls=True), "t2": wrote(), "t3": wrote()}, {})
    (report,) = judge(after, model, {"rack1": status_of(after, "rack1")})
    assert report["verdict"] == "healthy" and report["tls_reloaded"] == ["t1"]
    assert report["message"].endswith("; TLS credentials reloaded without a restart on t1")
    assert sorted(report["tls_certificates"]) == ["t1", "t2", "t3"]
    assert report["tls_certificates"]["t1"] == plan["trays"]["t1"]["tls_certificate"]
    summary = render_summary([report], "run-1", "2026-06-01T00:00:00Z", "1.0.0")
    assert "rack1: TLS credentials reloaded without a restart (SIGUSR1) on t1." in summary
    gauges = render_textfile(report, NOW)
    not_after = int(plan["trays"]["t2"]["tls_certificate"]["not_after"])
    assert "# TYPE rackscale_imex_tls_certificate_expiry_timestamp_seconds gauge" in gauges
    assert 'rackscale_imex_tls_certificate_expiry_timestamp_seconds{domain="rack1",tray="t2"} %d' % not_after in gauges


def test_without_tls_there_is_no_certificate_gauge_nor_reload_line():
    model, _options, plan = planned(domains=RACK)
    (report,) = judge(plan, model, {"rack1": status_of(plan, "rack1")})
    assert report["tls_reloaded"] == [] and report["tls_certificates"] == {}
    assert "tls_certificate" not in render_textfile(report, NOW)
    assert "reloaded" not in render_summary([report], "run-1", "2026-06-01T00:00:00Z", "1.0.0")


# --- preflight: the certificates are checked before anything is written ----------------------------

def test_preflight_refuses_a_tray_whose_certificate_names_another_address():
    model = model_of(RACK)
    wrong = material(ips=["198.18.1.99"], now=NOW)
    options = options_of(model, TLS_AT_NOW, t2=dict(wrong))
    problems = refused(preflight, model, options, tls_check_time=NOW)
    assert problems == ["tray t2: imex_tls_cert (PEM text): the certificate's subject alternative names "
                        "(IP:198.18.1.99) do not include IP its IMEX address 198.18.1.12; its peers would refuse it"]


def test_preflight_refuses_a_certificate_expiring_within_the_trays_minimum_and_records_each_expiry():
    model = model_of(RACK)
    soon = material(ips=["198.18.1.11"], now=NOW, days=7)
    options = options_of(model, TLS_AT_NOW, t1=dict(soon))
    problems = refused(preflight, model, options, tls_check_time=NOW)
    assert len(problems) == 1 and problems[0].startswith("tray t1: imex_tls_cert (PEM text): the certificate expires at")
    assert "fewer than imex_tls_min_days_left = 14" in problems[0]
    options = options_of(model, TLS_AT_NOW, t1=dict(soon, imex_tls_min_days_left=5))
    plan = preflight(model, options, tls_check_time=NOW)
    assert plan["trays"]["t1"]["tls_certificate"]["not_after"] == NOW + 7 * 86400
    assert plan["trays"]["t2"]["tls_certificate"]["subject"] == "CN=tray"


def test_preflight_checks_no_certificate_where_tls_is_off_or_files_are_missing():
    model = model_of(RACK)
    plan = preflight(model, options_of(model, {"imex_tls_cert": "-----BEGIN CERTIFICATE-----\nx\n"}),
                     tls_check_time=NOW)
    assert plan["trays"]["t1"]["tls_certificate"] is None
    problems = refused(preflight, model, options_of(model, dict(TLS_AT_NOW, imex_tls_key="/nonexistent/t.key")),
                       tls_check_time=NOW)
    assert all("is unset or not a file on the controller" in problem for problem in problems)


def test_the_minimum_days_left_is_a_bounded_whole_number():
    assert run_plan.convert_option("imex_tls_min_days_left", "30") == (30, None)
    model = model_of(RACK)
    problems = refused(preflight, model, options_of(model, {"imex_tls_min_days_left": 5000}), tls_check_time=NOW)
    assert problems == ["domain rack1: imex_tls_min_days_left = 5000 is out of range 0..3650"]
