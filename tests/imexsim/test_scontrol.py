"""Simulated scontrol: this tray's Slurm node record, its state and node name from slurm.json, and an
unreachable slurmctld."""
from __future__ import annotations

import json
import re
import socket

from conftest import run_tool

NODE = socket.gethostname().split(".")[0]


def test_an_idle_node_without_the_knob(tmp_path):
    result = run_tool("scontrol", ["show", "node", NODE, "--oneliner"], testbed=tmp_path)
    assert result.returncode == 0
    assert result.stdout.count("\n") == 1
    assert re.search(r"(?:^| )State=IDLE ", result.stdout)
    assert result.stdout.startswith(f"NodeName={NODE} ")


def test_the_knob_sets_the_state_and_the_long_form_spans_lines(tmp_path):
    (tmp_path / "slurm.json").write_text(json.dumps({"state": "MIXED+DRAIN"}))
    result = run_tool("scontrol", ["show", "node", NODE], testbed=tmp_path)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert len(lines) > 3
    assert lines[0].startswith(f"NodeName={NODE} ")
    assert all(line.startswith("   ") for line in lines[1:])
    assert re.search(r"^   State=MIXED\+DRAIN ", result.stdout, re.MULTILINE)


def test_another_node_is_not_found(tmp_path):
    result = run_tool("scontrol", ["show", "node", NODE + "-other", "--oneliner"], testbed=tmp_path)
    assert (result.returncode, result.stdout) == (1, f"Node {NODE}-other not found\n")
    assert "State=" not in result.stdout


def test_other_commands_are_refused(tmp_path):
    result = run_tool("scontrol", ["update", f"NodeName={NODE}", "State=DRAIN"], testbed=tmp_path)
    assert result.returncode == 1
    assert "only 'show node NAME" in result.stderr


def test_the_slurm_node_name_can_differ_from_the_host_name(tmp_path):
    (tmp_path / "slurm.json").write_text(json.dumps({"state": "ALLOCATED", "node_name": "gpu-a07"}))
    result = run_tool("scontrol", ["show", "node", "gpu-a07", "--oneliner"], testbed=tmp_path)
    assert result.returncode == 0
    assert result.stdout.startswith("NodeName=gpu-a07 ")
    # The record still names the host the node runs on, as slurmd registers it.
    assert f" NodeAddr={NODE} NodeHostName={NODE} " in result.stdout
    assert re.search(r" State=ALLOCATED ", result.stdout)
    # The host name is not a Slurm node then: Slurm's own answer, on stdout, exit 1.
    result = run_tool("scontrol", ["show", "node", NODE, "--oneliner"], testbed=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (1, f"Node {NODE} not found\n", "")


def test_an_unreachable_controller_fails_every_question(tmp_path):
    (tmp_path / "slurm.json").write_text(json.dumps({"state": "IDLE", "controller_down": True}))
    for name in (NODE, "gpu-a07"):
        result = run_tool("scontrol", ["show", "node", name, "--oneliner"], testbed=tmp_path)
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr == "slurm_load_node error: Unable to contact slurm controller (connect failure)\n"


def test_a_broken_knob_is_refused_not_guessed(tmp_path):
    (tmp_path / "slurm.json").write_text("[]")
    result = run_tool("scontrol", ["show", "node", NODE], testbed=tmp_path)
    assert result.returncode == 1 and "slurm.json" in result.stderr and result.stdout == ""
