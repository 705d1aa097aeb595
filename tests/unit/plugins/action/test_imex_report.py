# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the imex_report action (plugins/action/imex_report.py).

Most tests run the action plugin in-process with a mocked task; one runs ansible-playbook under
--check against a tray address where nothing listens, to prove that the reports are written in
check mode, by the controller alone, exactly as the to_nice_json filter printed them before.
"""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.plugins.filter.core import to_nice_json

import ansible_collections.rackscale.imex as collection
from ansible_collections.rackscale.imex.plugins.action.imex_report import ActionModule
from ansible_collections.rackscale.imex.plugins.plugin_utils._run_outputs import collection_version

REPORT = {
    "domain": "rack1",
    "verdict": "healthy",
    "ok": True,
    "message": "domain rack1: UP, 2 nodes READY, every pair connected",
    "problems": [],
    "leader": "rack1-tray01",
    "expected_nodes": ["198.18.1.11", "198.18.1.12"],
    "trays_not_in_run": [],
    "status": {"domain_state": "UP", "healthy": True, "elapsed": 0.2, "nodes": [{"index": 0, "version": None}]},
}


# The stamp, and since when the domain is proven (the stamp's time for an ok report).
STAMP_KEYS = ("run_id", "generated_at", "collection_version", "last_proven_at")
GENERATED_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def report(domain, **fields):
    return dict(REPORT, domain=domain, **fields)


def read_report(path, run_id=""):
    """The report in a file without its stamp, after checking the format and the stamp."""
    text = path.read_text()
    written = json.loads(text)
    # As the to_nice_json filter prints it, plus a newline.
    assert text == to_nice_json(written) + "\n"
    assert written["run_id"] == run_id and GENERATED_AT.match(written["generated_at"]), written
    # Whatever this copy of the collection says (test_run_outputs.py checks how it is found).
    assert written["collection_version"] == collection_version(collection.__path__[0])
    if written.get("ok"):
        assert written["last_proven_at"] == written["generated_at"]
    return {key: value for key, value in written.items() if key not in STAMP_KEYS}


def run_action(args, check_mode=False):
    task = MagicMock(args=args, check_mode=check_mode, async_val=0, action="rackscale.imex.imex_report")
    connection = MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, MagicMock(), MagicMock(), MagicMock())
    action._load_name = "rackscale.imex.imex_report"
    return action.run(task_vars={})


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_writes_one_file_per_domain_as_to_nice_json_printed_it(tmp_path):
    reports = [report("rack1"), report("rack2", verdict="unhealthy", ok=False, problems=["é", "node 1 down"])]

    result = run_action({"dir": str(tmp_path), "reports": reports, "run_id": "run-42"})

    assert result == {"changed": False, "dir": str(tmp_path), "summary": None, "textfiles": [],
                      "paths": [str(tmp_path / "rack1.json"), str(tmp_path / "rack2.json")]}
    for item in reports:
        assert read_report(tmp_path / (item["domain"] + ".json"), "run-42") == item
    assert sorted(os.listdir(tmp_path)) == ["rack1.json", "rack2.json"]  # no temporary file left


@pytest.mark.parametrize("umask", [0o077, 0o022, 0o000])
def test_creates_missing_directories_0750_and_files_0640_whatever_the_umask(tmp_path, umask):
    target = tmp_path / "a" / "b"
    old_umask = os.umask(umask)
    try:
        result = run_action({"dir": str(target), "reports": [report("rack1")], "summary": [report("rack1")],
                             "textfile_dir": str(tmp_path / "textfiles")})
    finally:
        os.umask(old_umask)
    assert result["paths"] == [str(target / "rack1.json")]
    assert mode_of(tmp_path / "a") == 0o750 and mode_of(target) == 0o750
    assert mode_of(target / "rack1.json") == 0o640 and mode_of(target / "summary.md") == 0o640
    # node_exporter reads the gauges as a user of its own: they stay world-readable.
    assert mode_of(tmp_path / "textfiles") == 0o755
    assert mode_of(tmp_path / "textfiles" / "rackscale_imex_rack1.prom") == 0o644


@pytest.mark.parametrize("mode", [0o700, 0o755, 0o777, 0o2770])
def test_an_existing_directory_keeps_its_mode(tmp_path, mode):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "rack1.json").write_text("old\n")
    os.chmod(reports / "rack1.json", 0o666)
    os.chmod(reports, mode)

    run_action({"dir": str(reports), "reports": [report("rack1")], "textfile_dir": str(reports)})

    assert mode_of(reports) == mode
    assert mode_of(reports / "rack1.json") == 0o640  # the report gets its documented mode
    assert read_report(reports / "rack1.json") == REPORT


@pytest.mark.parametrize(("given", "refused"), [
    ({"dir": "/etc"}, "dir (imex_report_dir) = '/etc' is /etc, a system directory of the controller"),
    ({"dir": "/var/lib"}, "dir (imex_report_dir) = '/var/lib' is /var/lib, a system directory of the controller"),
    ({"dir": "/etc/ssh"}, "dir (imex_report_dir) = '/etc/ssh' lies in /etc, a system tree of the controller"),
    ({"dir": "/var/lib/dpkg"}, "dir (imex_report_dir) = '/var/lib/dpkg' is a file or directory of other software "
                               "(/var/lib/dpkg)"),
    ({"textfile_dir": "/"}, "textfile_dir (imex_textfile_dir) = '/' is /, a system directory of the controller"),
])
def test_a_system_directory_of_the_controller_is_refused_and_nothing_written(tmp_path, given, refused):
    args = dict({"dir": str(tmp_path / "reports"), "reports": [report("rack1")], "summary": [report("rack1")]},
                **given)

    def seen():
        return {path: (os.stat(path).st_mode, os.stat(path).st_uid, os.stat(path).st_mtime_ns)
                for path in ("/", "/etc", "/var/lib")}
    before = seen()
    result = run_action(args)
    assert result["failed"] is True and result["msg"].startswith(refused), result["msg"]
    assert result["paths"] == [] and not (tmp_path / "reports").exists()
    assert seen() == before


def test_another_user_s_report_directory_is_left_as_it_is(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir(mode=0o775)
    os.chmod(reports, 0o775)
    os.chown(reports, 65534, 65534)
    run_action({"dir": str(reports), "reports": [report("rack1")]})
    assert mode_of(reports) == 0o775 and mode_of(reports / "rack1.json") == 0o640


def test_rewriting_the_same_reports_gives_the_same_files_but_for_the_stamp_and_no_change(tmp_path):
    args = {"dir": str(tmp_path), "reports": [report("rack1")]}
    first = run_action(args)
    content = read_report(tmp_path / "rack1.json")
    second = run_action(args)
    assert first == second and second["changed"] is False
    assert read_report(tmp_path / "rack1.json") == content


def test_check_mode_writes_the_reports_too(tmp_path):
    result = run_action({"dir": str(tmp_path / "reports"), "reports": [report("rack1")]}, check_mode=True)
    assert result["changed"] is False
    assert read_report(tmp_path / "reports" / "rack1.json") == REPORT


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_failed_write_keeps_the_old_report_and_leaves_no_temporary(tmp_path, monkeypatch, failing):
    (tmp_path / "rack1.json").write_text("old rack1\n")
    (tmp_path / "rack2.json").write_text("old rack2\n")

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, boom)
    result = run_action({"dir": str(tmp_path), "reports": [report("rack1"), report("rack2")]})

    assert result["failed"] is True and result["changed"] is False
    assert str(tmp_path / "rack1.json") in result["msg"] and "No space left on device" in result["msg"]
    assert result["paths"] == []
    assert (tmp_path / "rack1.json").read_text() == "old rack1\n"
    assert (tmp_path / "rack2.json").read_text() == "old rack2\n"  # nothing after the failure
    assert sorted(os.listdir(tmp_path)) == ["rack1.json", "rack2.json"]


def test_failure_on_a_later_report_lists_the_files_already_written(tmp_path, monkeypatch):
    real_replace = os.replace

    def replace(source, target):
        if target.endswith("rack2.json"):
            raise OSError(13, "Permission denied")
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    result = run_action({"dir": str(tmp_path), "reports": [report("rack1"), report("rack2")]})

    assert result["failed"] is True and "cannot replace %s" % (tmp_path / "rack2.json") in result["msg"]
    assert result["paths"] == [str(tmp_path / "rack1.json")]
    assert sorted(os.listdir(tmp_path)) == ["rack1.json"]


def test_summary_and_textfiles_are_written_beside_the_reports(tmp_path):
    earlier = report("rack1")
    now = report("rack2", verdict="unhealthy", ok=False, problems=["node 1 (198.18.2.12) is UNAVAILABLE"])
    result = run_action({"dir": str(tmp_path / "reports"), "reports": [now], "summary": [earlier, now],
                         "run_id": "run-7", "textfile_dir": str(tmp_path / "textfiles")})

    assert result["paths"] == [str(tmp_path / "reports" / "rack2.json")]
    assert result["summary"] == str(tmp_path / "reports" / "summary.md")
    assert result["textfiles"] == [str(tmp_path / "textfiles" / "rackscale_imex_rack2.prom")]
    summary = (tmp_path / "reports" / "summary.md").read_text()
    assert "Run `run-7` at " in summary and "| rack1 | healthy |" in summary and "| rack2 | unhealthy |" in summary
    assert "## rack2: unhealthy\n\n- node 1 (198.18.2.12) is UNAVAILABLE\n" in summary
    gauges = (tmp_path / "textfiles" / "rackscale_imex_rack2.prom").read_text()
    assert 'rackscale_imex_domain_ok{domain="rack2"} 0\n' in gauges
    assert sorted(os.listdir(tmp_path / "reports")) == ["rack2.json", "summary.md"]


def test_a_relative_directory_is_the_working_directory_s(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_action({"dir": "imex-reports", "reports": [report("rack1")]})
    assert result["dir"] == str(tmp_path / "imex-reports")
    assert result["paths"] == [str(tmp_path / "imex-reports" / "rack1.json")]


def test_directory_in_the_way_of_a_file_is_named(tmp_path):
    (tmp_path / "blocker").write_text("")
    result = run_action({"dir": str(tmp_path / "blocker" / "reports"), "reports": [report("rack1")]})
    assert result["failed"] is True
    assert result["msg"] == "%s exists but is not a directory (needed for %s)" % (
        tmp_path / "blocker", tmp_path / "blocker" / "reports")


@pytest.mark.parametrize("domain,shown", [
    ("", "''"), (".", "'.'"), ("..", "'..'"), ("../evil", "'../evil'"), ("a/b", "'a/b'"), ("/abs", "'/abs'"),
    ("nul\0", "'nul\\x00'"), (7, "7"), (None, "None"),
])
def test_bad_domain_names_are_refused_before_any_write(tmp_path, domain, shown):
    result = run_action({"dir": str(tmp_path), "reports": [report("rack1"), report(domain)]})
    assert result["failed"] is True and result["paths"] == []
    assert result["msg"] == ("reports[1]: domain %s cannot name a report file (it must be a non-empty string"
                             " without '/', and not '.' or '..')" % shown)
    assert os.listdir(tmp_path) == []


def test_missing_and_repeated_domains_are_all_named(tmp_path):
    no_domain = {key: value for key, value in REPORT.items() if key != "domain"}
    result = run_action({"dir": str(tmp_path), "reports": [report("rack1"), no_domain, report("rack1")]})
    assert result["failed"] is True
    assert result["msg"] == "reports[1] has no domain key; reports[2]: domain 'rack1' has more than one report"
    assert os.listdir(tmp_path) == []


def test_data_that_is_not_json_is_named(tmp_path):
    result = run_action({"dir": str(tmp_path), "reports": [report("rack1", status={1, 2})]})
    assert result["failed"] is True
    assert result["msg"].startswith("cannot write %s: the report is not JSON data: " % (tmp_path / "rack1.json"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args,fragment", [
    ({"reports": []}, "dir"),
    ({"dir": "/tmp"}, "reports"),
    ({"dir": "/tmp", "reports": ["rack1"]}, "reports"),
])
def test_bad_options_are_refused(args, fragment):
    with pytest.raises(AnsibleActionFail, match=fragment):
        run_action(args)


def test_unknown_option_is_refused():
    with pytest.raises(AnsibleActionFail, match="content"):
        run_action({"dir": "/tmp", "reports": [], "content": "x"})


PLAYBOOK = textwrap.dedent("""\
    ---
    - name: Reports of a read-only run
      hosts: trays
      gather_facts: false
      tasks:
        - name: Write the reports
          rackscale.imex.imex_report:
            dir: "{{ report_dir }}"
            reports: "{{ reports }}"
          run_once: true
          register: written
        - name: Show the result
          ansible.builtin.debug:
            var: written
          run_once: true
    """)


def test_playbook_in_check_mode_writes_on_the_controller_without_contacting_the_tray(tmp_path):
    playbook_cli = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook_cli):
        pytest.skip("ansible-playbook is not installed next to %s" % sys.executable)
    # Nothing listens at 192.0.2.1 (TEST-NET-1): a module run or a connection would fail the play.
    (tmp_path / "hosts.yml").write_text(
        "trays:\n  hosts:\n    rack1-tray01:\n      ansible_host: 192.0.2.1\n      ansible_connection: ssh\n")
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    reports = [report("rack1"), report("rack2", verdict="tolerated")]
    (tmp_path / "vars.json").write_text(json.dumps({"reports": reports, "report_dir": str(tmp_path / "out")}))
    collections_path = os.path.dirname(os.path.dirname(os.path.dirname(collection.__path__[0])))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_TIMEOUT="3",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))

    run = subprocess.run(
        [playbook_cli, "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), "--check",
         "-e", "@" + str(tmp_path / "vars.json")],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120, check=False)

    assert run.returncode == 0, run.stdout + run.stderr
    assert "changed=0" in run.stdout and "unreachable=0" in run.stdout, run.stdout
    for item in reports:
        assert read_report(tmp_path / "out" / (item["domain"] + ".json")) == item


def test_a_stopped_run_replaces_a_proven_report_and_gauges_keeping_since_when_the_domain_was_proven(tmp_path):
    """A run that stopped before its proof: the domain's report and gauges say not proven (by this run),
    where it stopped, and since when it has not been proven (the last proof, from the previous files)."""
    reports, textfiles = tmp_path / "reports", tmp_path / "textfiles"
    run_action({"dir": str(reports), "reports": [report("rack1")], "run_id": "run-1", "textfile_dir": str(textfiles)})
    proven = json.loads((reports / "rack1.json").read_text())
    stopped = {"stage": "read", "domains": ["rack1"], "trays": ["rack1-tray02"], "not_reached": [],
               "task": "Read each tray once", "reasons": ["rack1-tray02: Failed to connect to the host via ssh"]}
    record = {"domain": "rack1", "verdict": "not_proven", "ok": False, "stopped_at": "read",
              "failed_trays": ["rack1-tray02"], "problems": stopped["reasons"],
              "expected_nodes": REPORT["expected_nodes"], "status": {"domain_state": None}}
    result = run_action({"dir": str(reports), "reports": [record], "summary": [record], "stopped": stopped,
                         "run_id": "run-2", "textfile_dir": str(textfiles)}, check_mode=True)
    assert not result.get("failed") and result["changed"] is False, result
    written = json.loads((reports / "rack1.json").read_text())
    assert written["verdict"] == "not_proven" and written["stopped_at"] == "read" and written["run_id"] == "run-2"
    assert written["last_proven_at"] == proven["generated_at"]
    assert "The run stopped at its read stage" in (reports / "summary.md").read_text()
    gauges = (textfiles / "rackscale_imex_rack1.prom").read_text()
    assert 'rackscale_imex_domain_ok{domain="rack1"} 0\n' in gauges
    assert 'rackscale_imex_domain_run_stopped_timestamp_seconds{domain="rack1",stage="read"} ' in gauges
    assert "rackscale_imex_node_ready{" not in gauges
    # Still not proven by the next stopped run: the time of the last proof stays.
    run_action({"dir": str(reports), "reports": [record], "run_id": "run-3"})
    assert json.loads((reports / "rack1.json").read_text())["last_proven_at"] == proven["generated_at"]
