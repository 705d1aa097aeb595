"""A restart only for a real change (1 x 3 bed): site.yml records what each daemon it starts loaded,
tied to systemd's InvocationID under /run; a `touch` of one tray's node list afterwards moves its
change time but not its content, and the next site.yml restarts nothing."""
from __future__ import annotations

import json

from conftest import requires_rack, run_playbook

pytestmark = requires_rack
RACK_SHAPE = (1, 3)
RECORD = "/run/rackscale-imex/loaded/nvidia-imex.json"


def site(rack, tmp_path):
    return run_playbook("site.yml", rack.inventory, extravars={"imex_report_dir": str(tmp_path / "reports")})


def show(rack, tray, prop):
    return rack.ssh(tray, "systemctl", "show", "-p", prop, "--value", "nvidia-imex").stdout.strip()


def test_a_touch_of_a_node_list_restarts_nothing(simulated_rack, tmp_path):
    rack = simulated_rack
    trays = rack.trays_of(1)
    first = site(rack, tmp_path)
    assert first.rc == 0, first.stdout[-3000:]
    # Each daemon the run started has its record: its own instance, the content of its two files.
    for tray in trays:
        record = json.loads(rack.ssh(tray, "cat", RECORD).stdout)
        assert record["invocation_id"] == show(rack, tray, "InvocationID")
        digests = rack.ssh(tray, "sha256sum", "/etc/nvidia-imex/nodes_config.cfg", "/etc/nvidia-imex/config.cfg").stdout
        assert {path: digest for digest, path in (line.split() for line in digests.splitlines())} == record["files"]
    pids = {tray: show(rack, tray, "MainPID") for tray in trays}

    # What a backup tool, restorecon or a no-op chmod does: the change time moves, the content stays.
    rack.ssh(trays[1], "touch", "/etc/nvidia-imex/nodes_config.cfg")
    again = site(rack, tmp_path)
    assert again.rc == 0, again.stdout[-3000:]
    assert {tray: show(rack, tray, "MainPID") for tray in trays} == pids
    assert [task for _host, task in again.changed_tasks() if "IMEX daemon" in task] == []
    # The run judged the touched tray by its record, not by change times.
    plans = again.module_results("rackscale.imex.imex_plan")
    assert plans and not any("no record of what the running IMEX daemon loaded" in json.dumps(res) for _host, res in plans)
