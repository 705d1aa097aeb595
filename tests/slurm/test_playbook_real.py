# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/slurm_topology.yml run for real against a real slurmctld (24.11).

The host slurmctl of the inventory is the harness's slurmctld: a local connection whose Python runs
inside the daemon's namespaces and root (pipelining hands it the module on stdin), so the module
writes the daemon's /etc/slurm/topology.conf and reconfigures that slurmctld. The trays are never
contacted (they do not exist).
"""
from __future__ import annotations

import os
import sys

import ansible_runner
import pytest
import yaml

from ansible_collections.rackscale.imex.plugins.module_utils._slurm import parse_show_topology

# ansible-runner starts the ansible-playbook found on PATH: the one beside this interpreter.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RACKS = {"rack%d" % rack: ["rack%d-tray%02d" % (rack, tray) for tray in range(1, 5)] for rack in (1, 2)}
ACTION = "rackscale.imex.imex_slurm_topology"
HAND_WRITTEN = "BlockName=all Nodes=rack1-tray[01-04],rack2-tray[01-04]\n"


def inventory(tmp_path, daemon, racks=None, **tray_vars):
    """The inventory of ``racks`` ({domain group: trays}, RACKS by default) and the host slurmctl."""
    domains = {}
    for number, (rack, trays) in enumerate((racks or RACKS).items()):
        domains[rack] = {"vars": {"imex_domain": rack, "imex_domain_size": len(trays)},
                         "hosts": {tray: dict({"ansible_host": "198.18.%d.%d" % (number + 1, index + 11)},
                                              **tray_vars.get(tray, {}))
                                   for index, tray in enumerate(trays)}}
    data = {"all": {"children": {
        "slurm_controllers": {"hosts": {"slurmctl": {"ansible_connection": "local",
                                                     "ansible_python_interpreter": daemon.python()}}},
        "imex_domains": {"children": domains}}}}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def playbook(inventory_path, tmp_path, *options):
    """(rc, result of the role's task on slurmctld, stdout): the playbook run through ansible-runner."""
    private = tmp_path / ("runner-%d" % len(list(tmp_path.glob("runner-*"))))
    private.mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(private),
        playbook=os.path.join(REPO, "playbooks", "slurm_topology.yml"), inventory=inventory_path,
        cmdline=" ".join(options) or None, quiet=True, timeout=300,
        envvars={"ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                 "ANSIBLE_PIPELINING": "true"})
    results = [event["event_data"]["res"] for event in runner.events
               if event.get("event") in ("runner_on_ok", "runner_on_failed")
               and event["event_data"].get("host") == "slurmctl"
               and event["event_data"].get("task_action") == ACTION]
    return runner.rc, (results[-1] if results else {}), runner.stdout.read()


@pytest.fixture
def daemon(slurmctld):
    nodes = [tray for trays in RACKS.values() for tray in trays]
    return slurmctld(nodes, HAND_WRITTEN)


def test_the_playbook_writes_reconfigures_and_then_changes_nothing(daemon, tmp_path):
    path = inventory(tmp_path, daemon)
    # The hand-written file holds no header of the collection's: replaced only when forced.
    rc, result, found = playbook(path, tmp_path, "--check")
    assert rc != 0 and ("imex_slurm_topology_file = '/etc/slurm/topology.conf' holds a topology rackscale.imex did "
                        "not write (no header of its own): replacing it would lose its 1 line(s) (1 block record(s))"
                        in result["msg"]), found[-4000:]
    force = ("-e", "imex_slurm_topology_force=true")
    rc, result, found = playbook(path, tmp_path, "--check", "--diff", *force)
    assert rc == 0, found[-4000:]
    assert result["changed"] and daemon.read_etc("topology.conf") == HAND_WRITTEN
    assert result["diff"]["before"] == HAND_WRITTEN and "BlockName=rack2 Nodes=rack2-tray01," in result["diff"]["after"]

    rc, result, found = playbook(path, tmp_path, *force)
    assert rc == 0, found[-4000:]
    assert result["changed"] and result["reconfigured"] and result["differences"] == []
    assert daemon.read_etc("topology.conf") == result["diff"]["after"] if "diff" in result else True
    records = parse_show_topology(daemon.scontrol("show", "topology").stdout)
    assert [(record["name"], record["nodes"], record["size"]) for record in records if not record["aggregated"]] == [
        (rack, trays, 4) for rack, trays in RACKS.items()]
    backups = [name for name in os.listdir(daemon.etc) if name.startswith("topology.conf.") and name.endswith("~")]
    assert len(backups) == 1 and daemon.read_etc(backups[0]) == HAND_WRITTEN

    rc, result, found = playbook(path, tmp_path)
    assert rc == 0 and not result["changed"] and not result["reconfigured"]


def test_a_refusal_names_the_tray_and_writes_nothing(daemon, tmp_path):
    path = inventory(tmp_path, daemon, **{"rack2-tray03": {"imex_slurm_node_name": "rack1-tray03"}})
    rc, result, found = playbook(path, tmp_path)
    assert rc != 0
    assert "Slurm node rack1-tray03 would be in 2 blocks (rack1, rack2): trays rack1-tray03 (group rack1), " \
           "rack2-tray03 (group rack2)" in result["msg"]
    assert daemon.read_etc("topology.conf") == HAND_WRITTEN


def test_a_node_unknown_to_slurm_is_refused_once_slurm_was_read(daemon, tmp_path):
    path = inventory(tmp_path, daemon, **{"rack2-tray03": {"imex_slurm_node_name": "gpu-b03"}})
    rc, result, found = playbook(path, tmp_path, "-e", "imex_slurm_block_sizes=[4]")
    assert rc != 0 and "Slurm node name gpu-b03 is not a node of Slurm" in result["msg"], found[-4000:]
    assert daemon.read_etc("topology.conf") == HAND_WRITTEN
