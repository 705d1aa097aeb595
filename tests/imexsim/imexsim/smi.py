"""Simulated `nvidia-smi`: `-q`, `-L` and `--query-gpu=... --format=csv[,noheader][,nounits]`.

GPU identities are stable per tray (derived from the host name); the NVLink fabric values come
from the test bed knob fabric.json:
    {"state": "Completed", "status": "Success", "clique_id": 32766,
     "cluster_uuid": "...", "health": "Healthy", "gpus": 4,
     "per_gpu": {"2": {"state": "In Progress"}}}
Layout of `-q` follows a real 580.173.02 report (keys padded to 55 columns); releases before
580 pad to 42 (reference §6).
"""
from __future__ import annotations

import socket
import sys
import time
import uuid

from . import testbed

PRODUCT_NAME = "NVIDIA GB200"
DEFAULT_GPU_COUNT = 4
# A tray without fabric.json behaves like a healthy tray of a full-rack default partition.
DEFAULT_FABRIC = {
    "state": "Completed",
    "status": "Success",
    "clique_id": 32766,
    "cluster_uuid": "4c1f7d9e-2a6b-4e3f-9b8a-7d5c3e1f0a92",
    "health": "Healthy",
}
# CUDA release printed in the -q header per driver branch.
CUDA_VERSIONS = {570: "12.8", 575: "12.9", 580: "13.0", 590: "13.1"}
GPU_NAMESPACE = uuid.UUID("5e0c6a8e-9d51-4a33-8f0c-2b7a1d3c4e55")

QUERY_FIELDS = {
    "index": lambda gpu: str(gpu.index),
    "name": lambda gpu: PRODUCT_NAME,
    "uuid": lambda gpu: gpu.uuid,
    "serial": lambda gpu: gpu.serial,
    "pci.bus_id": lambda gpu: gpu.bus_id,
    "driver_version": lambda gpu: gpu.driver_version,
    "fabric.state": lambda gpu: gpu.fabric_state,
    "fabric.status": lambda gpu: gpu.fabric_value("status"),
    "fabric.cliqueId": lambda gpu: gpu.fabric_value("clique_id"),
    "fabric.clusterUuid": lambda gpu: gpu.fabric_value("cluster_uuid"),
}
# Alternative spellings nvidia-smi accepts for the same fields.
FIELD_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_serial": "serial", "gpu_bus_id": "pci.bus_id"}

USAGE = """NVIDIA System Management Interface -- simulated by imexsim.

Supported: nvidia-smi -q | -L | --query-gpu=<fields> --format=csv[,noheader][,nounits]
           | --query-compute-apps=<fields> --format=csv[,noheader][,nounits]
"""
# Fields of --query-compute-apps, from the knob compute_apps.json ({"apps": [{pid, process_name,
# used_memory}]}). The real tool prints one line per process and nothing when none runs.
APP_FIELDS = {"pid": "pid", "process_name": "process_name", "name": "process_name", "used_memory": "used_memory",
              "used_gpu_memory": "used_memory"}


class Gpu:
    def __init__(self, index: int, fabric: dict, driver_version: str, hostname: str):
        self.index = index
        self.fabric = fabric
        self.driver_version = driver_version
        self.uuid = f"GPU-{uuid.uuid5(GPU_NAMESPACE, f'{hostname}/{index}')}"
        self.serial = str(1650000000000 + int(uuid.uuid5(GPU_NAMESPACE, f"serial/{hostname}/{index}")) % 10**10)
        self.bus_id = f"00000000:{index + 1:02X}:00.0"

    @property
    def fabric_state(self) -> str:
        return str(self.fabric["state"])

    def fabric_value(self, key: str) -> str:
        """Status, CliqueId and ClusterUUID are only meaningful once registration completed."""
        if self.fabric_state != "Completed":
            return "N/A"
        return str(self.fabric[key])


def load_gpus() -> list[Gpu]:
    knob = testbed.read_json_knob("fabric.json")
    base = {**DEFAULT_FABRIC, **{key: value for key, value in knob.items() if key in DEFAULT_FABRIC}}
    overrides = knob.get("per_gpu") or {}
    version = testbed.driver_version()
    hostname = socket.gethostname()
    return [
        Gpu(index, {**base, **overrides.get(str(index), {})}, version, hostname)
        for index in range(int(knob.get("gpus", DEFAULT_GPU_COUNT)))
    ]


class Report:
    """`key : value` lines indented by nesting level, keys padded to a fixed column."""

    def __init__(self, width: int):
        self.width = width
        self.lines: list[str] = []

    def field(self, depth: int, key: str, value: object) -> None:
        self.lines.append(f"{'    ' * depth + key:<{self.width}}: {value}")

    def section(self, depth: int, title: str) -> None:
        self.lines.append("    " * depth + title)


def render_query(gpus: list[Gpu], version: str) -> str:
    branch = testbed.version_tuple(version)[:1]
    report = Report(55 if branch >= (580,) else 42)
    report.lines += ["", "==============NVSMI LOG==============", ""]
    report.field(0, "Timestamp", time.strftime("%a %b %e %H:%M:%S %Y"))
    report.field(0, "Driver Version", version)
    report.field(0, "CUDA Version", CUDA_VERSIONS.get(branch[0] if branch else 0, "N/A"))
    report.lines.append("")
    report.field(0, "Attached GPUs", len(gpus))
    for gpu in gpus:
        report.section(0, f"GPU {gpu.bus_id}")
        report.field(1, "Product Name", PRODUCT_NAME)
        report.field(1, "Product Brand", "NVIDIA")
        report.field(1, "Product Architecture", "Blackwell")
        report.field(1, "Persistence Mode", "Enabled")
        report.field(1, "Serial Number", gpu.serial)
        report.field(1, "GPU UUID", gpu.uuid)
        report.field(1, "Minor Number", gpu.index)
        report.field(1, "GPU Recovery Action", "None")
        report.section(1, "PCI")
        report.field(2, "Bus", f"0x{gpu.index + 1:02X}")
        report.field(2, "Device", "0x00")
        report.field(2, "Domain", "0x0000")
        report.field(2, "Bus Id", gpu.bus_id)
        _render_fabric(report, gpu, modern=branch >= (580,))
        report.field(1, "Processes", "None")
        report.lines.append("")
    return "\n".join(report.lines) + "\n"


def _render_fabric(report: Report, gpu: Gpu, *, modern: bool) -> None:
    completed = gpu.fabric_state == "Completed"
    health = {
        "Summary": gpu.fabric["health"] if completed else "N/A",
        "Bandwidth": "Full" if completed else "N/A",
    }
    if modern:
        # Values of a healthy GB300 on 580.173.02; all N/A before registration completes.
        health.update({
            "Route Recovery in progress": "False" if completed else "N/A",
            "Route Unhealthy": "False" if completed else "N/A",
            "Access Timeout Recovery": "False" if completed else "N/A",
            "Incorrect Configuration": "None" if completed else "N/A",
            "Partition Assigned": "N/A",
        })
    report.section(1, "Fabric")
    report.field(2, "State", gpu.fabric_state)
    report.field(2, "Status", gpu.fabric_value("status"))
    report.field(2, "CliqueId", gpu.fabric_value("clique_id"))
    report.field(2, "ClusterUUID", gpu.fabric_value("cluster_uuid"))
    report.section(2, "Health")
    for key, value in health.items():
        report.field(3, key, value)


def render_csv(gpus: list[Gpu], fields: list[str], header: bool) -> str:
    lines = [", ".join(fields)] if header else []
    for gpu in gpus:
        lines.append(", ".join(QUERY_FIELDS[FIELD_ALIASES.get(name, name)](gpu) for name in fields))
    return "".join(line + "\n" for line in lines)


class QueryError(Exception):
    """A query nvidia-smi refuses; the message is what it prints on stderr (exit code 2)."""


def _csv_query(args: list[str], query: str, known) -> tuple[list[str], list[str]]:
    """(fields, formats) of `--<query>=FIELDS --format=csv[,noheader][,nounits]`, as nvidia-smi checks them."""
    options = dict(arg.split("=", 1) for arg in args if arg.startswith("--") and "=" in arg)
    if len(options) != len(args) or set(options) != {query, "--format"}:
        raise QueryError(USAGE)
    formats = options["--format"].split(",")
    if "csv" not in formats or not set(formats) <= {"csv", "noheader", "nounits"}:
        raise QueryError(f'"{options["--format"]}" is not a valid format.\n')
    fields = [name.strip() for name in options[query].split(",") if name.strip()]
    for name in fields:
        if not known(name):
            raise QueryError(f'Field "{name}" is not a valid field to query.\n')
    return fields, formats


def query_apps(args: list[str]) -> int:
    """`--query-compute-apps=FIELDS --format=csv[,noheader][,nounits]`: the processes of the knob."""
    fields, formats = _csv_query(args, "--query-compute-apps", lambda name: name in APP_FIELDS)
    lines = [", ".join(fields)] if "noheader" not in formats else []
    for app in testbed.read_json_knob("compute_apps.json").get("apps", []):
        values = {"pid": str(app["pid"]), "process_name": app["process_name"],
                  "used_memory": str(app.get("used_memory", "1024 MiB"))}
        if "nounits" in formats:
            values["used_memory"] = values["used_memory"].split()[0]
        lines.append(", ".join(values[APP_FIELDS[name]] for name in fields))
    print("".join(line + "\n" for line in lines), end="")
    return 0


def query_csv(gpus: list[Gpu], args: list[str]) -> int:
    """`--query-gpu=FIELDS --format=csv[,noheader][,nounits]`; nounits changes nothing here (no
    queried field carries a unit)."""
    fields, formats = _csv_query(args, "--query-gpu", lambda name: FIELD_ALIASES.get(name, name) in QUERY_FIELDS)
    print(render_csv(gpus, fields, header="noheader" not in formats), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        gpus = load_gpus()
    except (testbed.KnobError, TypeError, ValueError, AttributeError) as exc:
        print(f"imexsim: unusable fabric.json: {exc}", file=sys.stderr)
        return 1
    if args == ["-q"]:
        print(render_query(gpus, testbed.driver_version()), end="")
    elif args == ["-L"]:
        for gpu in gpus:
            print(f"GPU {gpu.index}: {PRODUCT_NAME} (UUID: {gpu.uuid})")
    else:
        try:
            if any(arg.startswith("--query-compute-apps=") for arg in args):
                return query_apps(args)
            return query_csv(gpus, args)
        except QueryError as error:
            print(error, end="", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
