"""Simulated nvidia-smi: the Fabric block and the CSV query."""
from __future__ import annotations

import json
import re

from conftest import SAMPLES, run_tool

UUID = "dc6e40c4-d722-4357-9ba6-5291dd461278"


def fabric_blocks(report: str) -> list[dict[str, str]]:
    """Per GPU, the `key: value` fields of its Fabric block (Health fields included)."""
    blocks = []
    for section in report.split("\nGPU ")[1:]:
        lines = section.split("    Fabric\n", 1)[1].splitlines()
        fields = {}
        for line in lines:
            if not line.startswith("        "):
                break
            if ":" in line:
                key, value = line.split(":", 1)
                fields[key.strip()] = value.strip()
        blocks.append(fields)
    return blocks


def test_default_fabric_is_healthy(tmp_path):
    result = run_tool("smi", ["-q"], testbed=tmp_path)
    assert result.returncode == 0
    assert re.search(r"^Attached GPUs +: 4$", result.stdout, re.MULTILINE)
    assert re.findall(r"^GPU (\S+)$", result.stdout, re.MULTILINE) == [f"00000000:0{i}:00.0" for i in range(1, 5)]
    blocks = fabric_blocks(result.stdout)
    assert len(blocks) == 4
    for block in blocks:
        assert (block["State"], block["Status"], block["CliqueId"], block["Summary"]) == ("Completed", "Success", "32766", "Healthy")
        assert re.fullmatch(r"[0-9a-f-]{36}", block["ClusterUUID"])


def test_fabric_json_values_and_per_gpu_override(tmp_path):
    (tmp_path / "fabric.json").write_text(json.dumps({
        "state": "Completed", "status": "Success", "clique_id": 7, "cluster_uuid": UUID, "health": "Healthy",
        "per_gpu": {"2": {"status": "Insufficient Resources", "clique_id": 0, "cluster_uuid": "00000000-0000-0000-0000-000000000000"}},
    }))
    blocks = fabric_blocks(run_tool("smi", ["-q"], testbed=tmp_path).stdout)
    assert [(b["Status"], b["CliqueId"], b["ClusterUUID"]) for b in blocks] == [
        ("Success", "7", UUID),
        ("Success", "7", UUID),
        ("Insufficient Resources", "0", "00000000-0000-0000-0000-000000000000"),
        ("Success", "7", UUID),
    ]


def test_in_progress_block_is_the_vendor_sample(tmp_path):
    (tmp_path / "fabric.json").write_text(json.dumps({"state": "In Progress", "gpus": 2}))
    (tmp_path / "imex_version").write_text("580.159.04\n")
    report = run_tool("smi", ["-q"], testbed=tmp_path).stdout
    sample = (SAMPLES / "smi-q-fabric-580.159.04-in-progress.txt").read_text()
    assert report.count(sample) == 2


def test_pre_580_layout_uses_the_narrow_key_column(tmp_path):
    (tmp_path / "imex_version").write_text("570.172.08\n")
    report = run_tool("smi", ["-q"], testbed=tmp_path).stdout
    assert "        State                             : Completed\n" in report  # issue #626 sample geometry
    assert "Route Unhealthy" not in report
    assert "Driver Version                            : 570.172.08\n" in report


def test_csv_query(tmp_path):
    (tmp_path / "fabric.json").write_text(json.dumps({"cluster_uuid": UUID, "per_gpu": {"1": {"state": "In Progress"}}}))
    fields = "index,uuid,pci.bus_id,driver_version,fabric.state,fabric.status,fabric.cliqueId,fabric.clusterUuid"
    result = run_tool("smi", [f"--query-gpu={fields}", "--format=csv"], testbed=tmp_path)
    lines = result.stdout.splitlines()
    assert lines[0] == fields.replace(",", ", ")
    values = [line.split(", ") for line in lines[1:]]
    assert [v[0] for v in values] == ["0", "1", "2", "3"]
    assert values[0][2:] == ["00000000:01:00.0", "580.95.09", "Completed", "Success", "32766", UUID]
    assert values[1][4:] == ["In Progress", "N/A", "N/A", "N/A"]
    uuids = {v[1] for v in values}
    assert len(uuids) == 4 and all(u.startswith("GPU-") for u in uuids)
    again = run_tool("smi", [f"--query-gpu={fields}", "--format=csv,noheader,nounits"], testbed=tmp_path)
    assert again.stdout.splitlines() == lines[1:]  # stable identities, no header


def test_invalid_query_field(tmp_path):
    result = run_tool("smi", ["--query-gpu=index,fabric.bogus", "--format=csv"], testbed=tmp_path)
    assert result.returncode == 2
    assert 'Field "fabric.bogus" is not a valid field to query.' in result.stderr


def test_list_gpus(tmp_path):
    lines = run_tool("smi", ["-L"], testbed=tmp_path).stdout.splitlines()
    assert len(lines) == 4
    assert re.fullmatch(r"GPU 0: NVIDIA GB200 \(UUID: GPU-[0-9a-f-]{36}\)", lines[0])


def test_compute_apps_are_listed_from_the_knob_and_none_prints_nothing(tmp_path):
    query = ["--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"]
    idle = run_tool("smi", query, testbed=tmp_path)
    assert (idle.returncode, idle.stdout) == (0, "")
    (tmp_path / "compute_apps.json").write_text(json.dumps(
        {"apps": [{"pid": 4242, "process_name": "python3", "used_memory": "40960 MiB"}]}))
    busy = run_tool("smi", query, testbed=tmp_path)
    assert (busy.returncode, busy.stdout) == (0, "4242, python3, 40960 MiB\n")
    header = run_tool("smi", ["--query-compute-apps=pid,name", "--format=csv,nounits"], testbed=tmp_path)
    assert header.stdout == "pid, name\n4242, python3\n"
    bad = run_tool("smi", ["--query-compute-apps=pid,colour", "--format=csv"], testbed=tmp_path)
    assert bad.returncode == 2 and 'Field "colour" is not a valid field to query.' in bad.stderr
