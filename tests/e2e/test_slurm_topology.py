# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/slurm_topology.yml against a simulated bed with a real Slurm controller.

The bed (fixture slurm_bed, from tests/e2e/conftest.py) runs slurmctld on the host slurmctl of the
group slurm_controllers, with TopologyPlugin=topology/block in /etc/slurm/slurm.conf and a
hand-written /etc/slurm/topology.conf; each tray rack<R>-tray<NN> is the Slurm node of that name.
The playbook must refuse to replace that file (the collection did not write it) unless forced, then
replace it (with a backup), reconfigure Slurm so that `scontrol show
topology` lists one block per rack in inventory order, change nothing on a second run, and predict a
change under --check --diff without making it. Bad input is refused leaving the file as it was: the
unit tests (slurm_topology_matrix.py) and tests/slurm (on a real slurmctld) prove it.
"""
from __future__ import annotations

import pytest
import yaml

from conftest import run_playbook  # noqa: E402 (tests/e2e is on sys.path as the rootdir of its conftest)

from ansible_collections.rackscale.imex.plugins.module_utils._slurm import parse_show_topology

CONTROLLER = "slurmctl"
TOPOLOGY = "/etc/slurm/topology.conf"
PLAYBOOK = "slurm_topology.yml"
ACTION = "rackscale.imex.imex_slurm_topology"


def on_controller(bed, *command):
    result = bed.ssh(CONTROLLER, *command)
    assert result.returncode == 0, "%s on %s: %s%s" % (" ".join(command), CONTROLLER, result.stdout, result.stderr)
    return result.stdout


def file_on_controller(bed, path=TOPOLOGY):
    return on_controller(bed, "cat", path)


def racks_of(bed):
    """{rack group: [trays]} in the inventory's order, from the bed's inventory."""
    with open(bed.inventory) as handle:
        inventory = yaml.safe_load(handle)
    domains = inventory["all"]["children"]["imex_domains"]["children"]
    return {name: list(group["hosts"]) for name, group in domains.items()}


def slurm_blocks(bed):
    records = parse_show_topology(on_controller(bed, "scontrol", "show", "topology"))
    return [(record["name"], record["nodes"], record["size"]) for record in records if not record["aggregated"]]


def action_result(run):
    found = run.module_results(ACTION)
    assert [host for host, _ in found] == [CONTROLLER], run.stdout[-3000:]
    return found[0][1]


@pytest.fixture(scope="module")
def bed(slurm_bed):
    with open(slurm_bed.inventory) as handle:
        inventory = yaml.safe_load(handle)
    assert CONTROLLER in inventory["all"]["children"]["slurm_controllers"]["hosts"], "the bed has no slurmctl"
    return slurm_bed


class TestSlurmTopology:
    """In order: first run, second run, check mode (they share the bed's state)."""

    hand_written = None

    def test_the_first_run_replaces_the_hand_written_file_only_when_forced_and_slurm_runs_it(self, bed):
        TestSlurmTopology.hand_written = file_on_controller(bed)
        refused = run_playbook(PLAYBOOK, bed.inventory)
        assert refused.rc != 0
        assert ("imex_slurm_topology_file = '%s' holds a topology rackscale.imex did not write" % TOPOLOGY
                in "\n".join(refused.failure_messages())), refused.stdout[-3000:]
        assert file_on_controller(bed) == TestSlurmTopology.hand_written
        run = run_playbook(PLAYBOOK, bed.inventory, cmdline_vars={"imex_slurm_topology_force": "true"})
        assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
        assert run.changed_hosts() == [CONTROLLER]
        result = action_result(run)
        racks = racks_of(bed)
        size = len(next(iter(racks.values())))
        expected_sizes = [size]
        while expected_sizes[-1] * 2 <= size * len(racks):
            expected_sizes.append(expected_sizes[-1] * 2)
        assert result["block_sizes"] == expected_sizes and result["reconfigured"] is True
        assert slurm_blocks(bed) == [(name, trays, size) for name, trays in racks.items()]
        written = file_on_controller(bed)
        assert [line for line in written.splitlines() if not line.startswith("#")] == [
            "BlockName=%s Nodes=%s" % (name, ",".join(trays)) for name, trays in racks.items()] + [
            "BlockSizes=%s" % ",".join(str(value) for value in expected_sizes)]
        # The backup holds the hand-written file.
        assert file_on_controller(bed, result["backup_file"]) == TestSlurmTopology.hand_written

    def test_a_second_run_changes_nothing_and_reconfigures_nothing(self, bed):
        before = on_controller(bed, "stat", "-c", "%Y %i", TOPOLOGY)
        run = run_playbook(PLAYBOOK, bed.inventory)
        assert run.rc == 0, run.failure_messages()
        assert run.changed_hosts() == []
        assert action_result(run)["reconfigured"] is False
        assert on_controller(bed, "stat", "-c", "%Y %i", TOPOLOGY) == before

    def test_check_mode_with_diff_predicts_the_repair_and_changes_nothing(self, bed):
        ours = file_on_controller(bed)
        # Someone puts the hand-written file back behind Ansible's back.
        on_controller(bed, "sh", "-c", "printf '%%s' \"$1\" > %s" % TOPOLOGY, "sh", TestSlurmTopology.hand_written)
        # A file the collection did not write is only replaced when forced, under --check too.
        assert run_playbook(PLAYBOOK, bed.inventory, check=True).rc != 0
        forced = {"imex_slurm_topology_force": "true"}
        run = run_playbook(PLAYBOOK, bed.inventory, check=True, diff=True, cmdline_vars=forced)
        assert run.rc == 0, run.failure_messages()
        result = action_result(run)
        assert result["changed"] is True and result["reconfigured"] is False
        assert result["diff"]["before"] == TestSlurmTopology.hand_written and result["diff"]["after"] == ours
        assert file_on_controller(bed) == TestSlurmTopology.hand_written
        # Slurm still runs our blocks (the hand-written file was never read by it).
        assert result["differences"] == []
        repaired = run_playbook(PLAYBOOK, bed.inventory, cmdline_vars=forced)
        assert repaired.rc == 0 and repaired.changed_hosts() == [CONTROLLER]
        assert file_on_controller(bed) == ours
