"""Simulated Slurm `scontrol show node NAME [--oneliner]`: this tray's node record.

The test bed knob slurm.json says what Slurm holds about this tray: {"state": "ALLOCATED"} (default
IDLE), {"node_name": "gpu-a07"} (default the short host name: on a real cluster the Slurm NodeName
can differ from the host name) and {"controller_down": true} (slurmctld unreachable). The cluster
holds this node alone: any other name gets Slurm's "not found" answer. Field order and spelling
follow `scontrol show node` of Slurm 23.x/24.x; fields the collection does not read are abridged.
"""
from __future__ import annotations

import socket
import sys

from . import testbed

USAGE = "scontrol (simulated by imexsim): only 'show node NAME [--oneliner]' is supported\n"
# What scontrol prints (slurm_perror, on stderr; exit 1) when it cannot reach slurmctld.
CONTROLLER_DOWN = "slurm_load_node error: Unable to contact slurm controller (connect failure)\n"


def node_record(name: str, host: str, state: str) -> list[str]:
    """The record's fields, one `Key=Value ...` group per line as scontrol prints them."""
    return [
        f"NodeName={name} Arch=aarch64 CoresPerSocket=72",
        "CPUAlloc=0 CPUEfctv=144 CPUTot=144 CPULoad=0.12",
        "AvailableFeatures=gb200,nvl72",
        "ActiveFeatures=gb200,nvl72",
        "Gres=gpu:4",
        f"NodeAddr={host} NodeHostName={host} Version=24.05.2",
        "OS=Linux 6.8.0-1021-nvidia-64k #22-Ubuntu SMP",
        "RealMemory=880000 AllocMem=0 FreeMem=870000 Sockets=2 Boards=1",
        f"State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
        "Partitions=gpu",
    ]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    oneliner = "--oneliner" in args or "-o" in args
    words = [arg for arg in args if arg not in ("--oneliner", "-o")]
    if len(words) != 3 or words[0] != "show" or words[1] != "node":
        sys.stderr.write(USAGE)
        return 1
    try:
        knob = testbed.read_json_knob("slurm.json")
    except testbed.KnobError as exc:
        sys.stderr.write(f"imexsim: {exc}\n")
        return 1
    # The node list comes from slurmctld: without it, no name is known or unknown.
    if knob.get("controller_down"):
        sys.stderr.write(CONTROLLER_DOWN)
        return 1
    host = socket.gethostname().split(".")[0]
    name = words[2]
    if name != str(knob.get("node_name") or host):
        print(f"Node {name} not found")
        return 1
    fields = node_record(name, host, str(knob.get("state", "IDLE")))
    print(" ".join(fields) if oneliner else "\n   ".join(fields))
    return 0


if __name__ == "__main__":
    sys.exit(main())
