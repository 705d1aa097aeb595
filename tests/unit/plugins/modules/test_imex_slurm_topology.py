# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""imex_slurm_topology: read Slurm, write the topology file atomically, reconfigure only on a change.

scontrol answers with what a real slurmctld 24.11.5 printed (tests/unit/samples/slurm/)."""
from __future__ import annotations

import os
from unittest import mock

import pytest
from ansible.module_utils import basic

from ansible_collections.rackscale.imex.plugins.modules import imex_slurm_topology
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

TIMEOUT = "/usr/bin/timeout"
SCONTROL = "/usr/bin/scontrol"
BEFORE = read_sample("slurm", "show_topology_after_reconfigure_3_1_2.txt")
AFTER = read_sample("slurm", "show_topology_3x4_sizes_4_8.txt")
CONTENT = ("BlockName=rack1 Nodes=rack1-tray01,rack1-tray02,rack1-tray03,rack1-tray04\n"
           "BlockName=rack2 Nodes=rack2-tray01,rack2-tray02,rack2-tray03,rack2-tray04\n"
           "BlockName=rack3 Nodes=rack3-tray01,rack3-tray02,rack3-tray03,rack3-tray04\nBlockSizes=4,8\n")


class FakeSlurm:
    """scontrol as slurmctld answers it: show topology gives the file's topology once reconfigured."""

    def __init__(self, reconfigure_rc=0, topology_failures=0):
        self.calls = []
        self.topology = BEFORE
        self.reconfigure_rc = reconfigure_rc
        self.topology_failures = topology_failures
        self.environ = {}

    def bound_run_command(self):
        """AnsibleModule.run_command answered by this fake (the module passed as the first argument)."""
        def run_command(module, argv, **kwargs):
            return self.run_command(module, argv, **kwargs)
        return run_command

    def run_command(self, module, argv, **kwargs):
        assert argv[:4] == [TIMEOUT, "-k", "5", "30"] and argv[4] == SCONTROL
        self.environ = dict(module.run_command_environ_update, **kwargs.get("environ_update", {}))
        args = argv[5:]
        self.calls.append(" ".join(args))
        if args == ["--version"]:
            return 0, read_sample("slurm", "scontrol_version_24.11.5.txt"), ""
        if args == ["show", "config"]:
            return 0, read_sample("slurm", "show_config_block_alloc_imex.txt"), ""
        if args[:2] == ["show", "nodes"]:
            return 0, read_sample("slurm", "show_nodes_oneliner.txt"), ""
        if args == ["reconfigure"]:
            if self.reconfigure_rc == 0:
                self.topology = AFTER
            return self.reconfigure_rc, "", "slurm_reconfigure error: Unable to contact slurm controller"
        if args == ["show", "topology"]:
            if self.topology_failures:
                self.topology_failures -= 1
                return 1, "", "slurm_load_topo error: Unable to contact slurm controller (connect failure)"
            return 0, self.topology, ""
        raise AssertionError(args)


@pytest.fixture
def run(run_module, monkeypatch):
    monkeypatch.setattr(imex_slurm_topology, "RETRY_PAUSE_S", 0)

    def _run(args, slurm=None, check=False):
        slurm = slurm or FakeSlurm()
        bins = {"timeout": TIMEOUT, "scontrol": SCONTROL}
        with mock.patch.multiple(basic.AnsibleModule, get_bin_path=lambda self, name, *args, **kw: bins.get(name),
                                 run_command=slurm.bound_run_command()):
            return run_module(imex_slurm_topology, args, check=check), slurm
    return _run


def test_without_content_it_only_reads(run, tmp_path):
    result, slurm = run({"read_nodes": True, "path": str(tmp_path / "topology.conf")})
    assert result["_exit_code"] == 0 and not result["changed"]
    assert slurm.calls == ["--version", "show config", "show nodes --future --oneliner", "show topology"]
    assert result["version"] == [24, 11, 5] and result["config"]["TopologyPlugin"] == "topology/block"
    assert result["nodes"][0] == "rack1-tray01" and len(result["topology"]) == 5
    assert not os.path.exists(tmp_path / "topology.conf")
    # show topology would cut its lines to SLURM_TOPO_LEN characters where the environment set it.
    assert int(slurm.environ["SLURM_TOPO_LEN"]) > 100000 and slurm.environ["LC_ALL"] == "C"


def test_a_changed_file_is_written_with_a_backup_and_slurm_reconfigured(run, tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text("BlockName=old Nodes=rack1-tray01\n")
    result, slurm = run({"path": str(path), "content": CONTENT, "backup": True})
    assert result["_exit_code"] == 0 and result["changed"] and result["reconfigured"]
    assert path.read_text() == CONTENT
    assert open(result["backup_file"]).read() == "BlockName=old Nodes=rack1-tray01\n"
    assert slurm.calls == ["--version", "show config", "reconfigure", "show topology"]
    assert [record["name"] for record in result["topology"]][:3] == ["rack1", "rack2", "rack3"]
    assert result["diff"]["after"] == CONTENT


def test_an_unchanged_file_reconfigures_nothing(run, tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text(CONTENT)
    result, slurm = run({"path": str(path), "content": CONTENT, "backup": True})
    assert result["_exit_code"] == 0 and not result["changed"] and not result["reconfigured"]
    assert "reconfigure" not in slurm.calls and "backup_file" not in result


def test_check_mode_predicts_and_changes_nothing(run, tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text("BlockName=old Nodes=rack1-tray01\n")
    result, slurm = run({"path": str(path), "content": CONTENT, "backup": True}, check=True)
    assert result["changed"] and not result["reconfigured"]
    assert result["diff"]["before"] == "BlockName=old Nodes=rack1-tray01\n" and result["diff"]["after"] == CONTENT
    assert path.read_text() == "BlockName=old Nodes=rack1-tray01\n" and "reconfigure" not in slurm.calls
    assert os.listdir(tmp_path) == ["topology.conf"]


def test_reconfigure_off_writes_only(run, tmp_path):
    result, slurm = run({"path": str(tmp_path / "topology.conf"), "content": CONTENT, "reconfigure": False})
    assert result["changed"] and not result["reconfigured"] and "reconfigure" not in slurm.calls


def test_slurmctld_away_for_a_moment_after_reconfigure_is_waited_for(run, tmp_path):
    result, slurm = run({"path": str(tmp_path / "topology.conf"), "content": CONTENT},
                        FakeSlurm(topology_failures=2))
    assert result["_exit_code"] == 0 and slurm.calls.count("show topology") == 3


def test_a_failed_reconfigure_fails_saying_the_file_was_written(run, tmp_path):
    result = run({"path": str(tmp_path / "topology.conf"), "content": CONTENT}, FakeSlurm(reconfigure_rc=1))[0]
    assert result["_exit_code"] == 1 and result["changed"]
    assert result["msg"].startswith("%s was written, but scontrol reconfigure failed (rc 1): " % (tmp_path / "topology.conf"))


def test_a_missing_directory_is_not_created(run, tmp_path):
    result = run({"path": str(tmp_path / "none" / "topology.conf"), "content": CONTENT})[0]
    assert result["_exit_code"] == 1 and "does not exist" in result["msg"]


def test_without_scontrol_it_fails_saying_where_it_looked(run_module, tmp_path):
    bins = {"timeout": TIMEOUT}
    with mock.patch.multiple(basic.AnsibleModule, get_bin_path=lambda self, name, *args, **kw: bins.get(name)):
        result = run_module(imex_slurm_topology, {"path": str(tmp_path / "topology.conf")})
    assert result["_exit_code"] == 1 and result["msg"].startswith("scontrol not found on PATH")


def test_the_topology_files_beside_slurm_conf_are_listed(tmp_path):
    """Slurm >= 25.05 reads topology.yaml first: the action refuses a topology.conf beside one."""
    config = {"SLURM_CONF": str(tmp_path / "slurm.conf")}
    assert imex_slurm_topology.topology_files(config) == []
    (tmp_path / "topology.yaml").write_text("- topology: other\n")
    (tmp_path / "topology.conf").write_text("BlockName=b Nodes=n1\n")
    assert imex_slurm_topology.topology_files(config) == ["topology.conf", "topology.yaml"]
    assert imex_slurm_topology.topology_files({"SLURM_CONF": None}) == []


def test_the_file_already_at_the_path_is_returned_as_it_is(tmp_path):
    path = tmp_path / "topology.conf"
    assert imex_slurm_topology.existing_file(str(path)) == {"exists": False, "size": 0, "content": None}
    path.write_bytes(b"SwitchName=s0 Nodes=a[1-4]\n\xff\n")
    assert imex_slurm_topology.existing_file(str(path)) == {
        "exists": True, "size": 29, "content": "SwitchName=s0 Nodes=a[1-4]\n\ufffd\n"}
    path.write_text("#" * (imex_slurm_topology.EXISTING_MAX + 10))
    found = imex_slurm_topology.existing_file(str(path))
    assert found["size"] == imex_slurm_topology.EXISTING_MAX + 10 and len(found["content"]) == imex_slurm_topology.EXISTING_MAX
