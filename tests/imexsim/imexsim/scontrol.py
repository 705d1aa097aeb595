"""Simulated Slurm `scontrol show node NAME [--oneliner]`: this tray's node record.

The node state comes from the test bed knob slurm.json ({"state": "ALLOCATED"}); without it the
node is IDLE. Only the tray's own short host name is known, as if the cluster held this node
alone; any other name gets Slurm's "not found" answer. Field order and spelling follow
`scontrol show node` of Slurm 23.x/24.x; fields the collection does not read are abridged.
"""
from __future__ import annotations

import socket
import sys

from . import testbed

USAGE = "scontrol (simulated by imexsim): only 'show node NAME [--oneliner]' is supported\n"


def node_record(name: str, state: str) -> list[str]:
    """The record's fields, one `Key=Value ...` group per line as scontrol prints them."""
    return [
        f"NodeName={name} Arch=aarch64 CoresPerSocket=72",
        "CPUAlloc=0 CPUEfctv=144 CPUTot=144 CPULoad=0.12",
        "AvailableFeatures=gb200,nvl72",
        "ActiveFeatures=gb200,nvl72",
        "Gres=gpu:4",
        f"NodeAddr={name} NodeHostName={name} Version=24.05.2",
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
    name = words[2]
    if name != socket.gethostname().split(".")[0]:
        print(f"Node {name} not found")
        return 1
    try:
        state = str(testbed.read_json_knob("slurm.json").get("state", "IDLE"))
    except testbed.KnobError as exc:
        sys.stderr.write(f"imexsim: {exc}\n")
        return 1
    fields = node_record(name, state)
    print(" ".join(fields) if oneliner else "\n   ".join(fields))
    return 0


if __name__ == "__main__":
    sys.exit(main())
