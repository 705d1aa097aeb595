"""Rendering of `nvidia-imex-ctl -N` reports: text in the vendor layouts, and JSON.

Geometry measured from real output (reference §3.3): node lines `Node #` + index padded to 4,
address padded to 16, status padded to 21; matrix header ` Nodes From\\To  ` then one column
per node, 4 wide (3 wide in the 570.00 layout); row labels right-aligned in 8 then 8 blanks.
Lines carry no trailing blanks, as in the published samples.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from . import wire

LAYOUT_570_172 = "570.172"
LAYOUT_570_00 = "570.00"

LEGEND = (
    "Connectivity Table Legend:",
    "I - Invalid - Node wasn't reachable, no connection status available",
    "N - Never Connected",
    "R - Recovering - Connection was lost, but clean up has not yet been triggered.",
    "D - Disconnected - Connection was lost, and clean up has been triggreed.",
    "A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.",
)
# Added to the legend after 570.00 (the 570.00 sample lacks them).
LEGEND_MISMATCH = (
    "!V! - Version mismatch, communication disabled.",
    "!M! - Node map mismatch, communication disabled.",
)
LEGEND_LAST = "C - Connected - Ready for operation"

UNAVAILABLE = "UNAVAILABLE"
READY = "READY"


@dataclass
class NodeReport:
    """One node as nvidia-imex-ctl learned it from that node's command service."""

    index: int
    host: str
    reachable: bool
    status: str = UNAVAILABLE
    version: str = ""
    hostname: str = ""
    cells: list[str] = field(default_factory=list)  # this node's view of every node, by index


@dataclass
class DomainReport:
    nodes: list[NodeReport]
    timestamp: str
    local_index: int | None  # marked with `*` in the -H layout

    @property
    def status(self) -> str:
        """UP: every node READY and every cell C; DOWN: no node READY; else DEGRADED (§9)."""
        ready = [node for node in self.nodes if node.status == READY]
        if not ready:
            return "DOWN"
        if len(ready) == len(self.nodes) and all(cell == wire.CONNECTED for node in self.nodes for cell in node.cells):
            return "UP"
        return "DEGRADED"


def _node_line(node: NodeReport, layout: str) -> str:
    # One blank always separates the address from the next field, even for long addresses.
    line = f"Node #{node.index:<4}- {node.host:<15} - "
    if layout == LAYOUT_570_00:
        return line + node.status
    return line + f"{node.status:<20} - Version: {node.version}"


def _node_line_with_hostname(node: NodeReport, local_index: int | None) -> str:
    """580 `-H` geometry: address field 19 wide, `* ip *` for the local node, version 16 wide."""
    if node.index == local_index:
        marker, address = "*", f"{node.host} *"
    else:
        marker, address = "-", node.host
    return (
        f"Node #{node.index:<4}{marker} {address:<18} - {node.status:<20} - Version: {node.version:<15} "
        f"- Hostname: {node.hostname}"
    )


def render_text(report: DomainReport, *, layout: str = LAYOUT_570_172, hostnames: bool = False) -> str:
    width = 3 if layout == LAYOUT_570_00 else 4
    lines = list(LEGEND)
    if layout != LAYOUT_570_00:
        lines.extend(LEGEND_MISMATCH)
    lines += [LEGEND_LAST, "", report.timestamp, "Nodes:"]
    for node in report.nodes:
        lines.append(_node_line_with_hostname(node, report.local_index) if hostnames else _node_line(node, layout))
    lines.append("")
    lines.append(" Nodes From\\To  " + "".join(f"{node.index:<{width}}" for node in report.nodes))
    for node in report.nodes:
        # A 3-letter cell (!V!) in a 3-wide column still gets one separating blank.
        lines.append(f"{node.index:>8}" + " " * 8 + "".join(f"{cell:<{width - 1}} " for cell in node.cells))
    if layout != LAYOUT_570_00:
        lines.append("")
    lines.append(f"Domain State: {report.status}")
    return "".join(line.rstrip() + "\n" for line in lines)


def render_json(report: DomainReport, *, with_hostname: bool, sparse: bool = False) -> str:
    """Key order and 1-blank indentation of the 570.172.08 sample; 580+ adds `hostName`.

    ``sparse`` (580+, as those releases print it): tab-indented, and a node nothing could reach is
    left out, as are the connections to it: a DEGRADED domain lists only some nodes and only some
    connections per node. A node that was connected once (its peers still see R or D) and one whose
    command service alone is down stay listed, UNAVAILABLE with an empty version. When no node
    answered at all (DOWN), every node is listed UNAVAILABLE, as in the unconfigured-daemon sample:
    the sparse form is only documented for DEGRADED domains.
    """
    answered = [peer for peer in report.nodes if peer.reachable]
    unreached = {node.index for node in report.nodes if sparse and answered and not node.reachable and all(
        peer.cells[node.index] in (wire.INVALID, wire.NEVER_CONNECTED)
        for peer in answered if node.index < len(peer.cells))}
    nodes = {}
    for node in report.nodes:
        if node.index in unreached:
            continue
        connections = {
            str(peer.index): {"host": peer.host, "status": wire.CELL_WORDS[cell], "changed": node.reachable}
            for peer, cell in zip(report.nodes, node.cells)
            if peer.index not in unreached
        }
        entry = {
            "status": node.status,
            "host": node.host,
            "connections": connections,
            "changed": node.reachable,
            "version": node.version,
        }
        if with_hostname:
            entry["hostName"] = node.hostname
        nodes[str(node.index)] = entry
    document = {"nodes": nodes, "timestamp": report.timestamp, "status": report.status}
    return json.dumps(document, indent="\t" if sparse else 1) + "\n"
