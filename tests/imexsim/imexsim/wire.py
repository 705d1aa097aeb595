"""What travels between simulated daemons and from nvidia-imex-ctl to a daemon.

The real daemons speak gRPC; the simulator uses one JSON object per line over TCP (or TLS),
which is enough to carry what the observable behaviour depends on: the hello (node index,
version, node-map hash, instance id), heartbeats, the clean-shutdown notice, and the command
service's status reply.
"""
from __future__ import annotations

import json
import socket

# Connection cells as nvidia-imex-ctl prints them (reference §3.3 legend).
CONNECTED = "C"
NEVER_CONNECTED = "N"
RECOVERING = "R"
DISCONNECTED = "D"
AUTHENTICATING = "A"
INVALID = "I"
VERSION_MISMATCH = "!V!"
NODE_MAP_MISMATCH = "!M!"

# JSON words for the cells. CONNECTED and INVALID are seen in real output; the others are the
# legend names in upper case (INFERRED, reference §3.4 says they are unknown).
CELL_WORDS = {
    CONNECTED: "CONNECTED",
    NEVER_CONNECTED: "NEVER_CONNECTED",
    RECOVERING: "RECOVERING",
    DISCONNECTED: "DISCONNECTED",
    AUTHENTICATING: "AUTHENTICATING",
    INVALID: "INVALID",
    VERSION_MISMATCH: "VERSION_MISMATCH",
    NODE_MAP_MISMATCH: "NODE_MAP_MISMATCH",
}

# How long nvidia-imex-ctl waits for one node's command service. Short, because -N asks every
# node and a firewalled port must turn into UNAVAILABLE rather than a hang.
CMD_CONNECT_TIMEOUT_S = 2.0
CMD_REPLY_TIMEOUT_S = 3.0
# Bound on one message, so a confused peer cannot make a daemon buffer without limit.
MAX_LINE_BYTES = 1 << 20


def encode(message: dict) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict | None:
    """The message on LINE, or None when it is not a JSON object with a string `type`."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        return None
    return message


def query_status(*, host: str | None = None, port: int | None = None, unix_path: str | None = None) -> dict:
    """Ask one daemon's command service for its status.

    Raises OSError (including timeouts) when the service cannot be reached or does not answer,
    ValueError when the answer is not a status reply.
    """
    if unix_path:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CMD_CONNECT_TIMEOUT_S)
        try:
            sock.connect(unix_path)
        except OSError:
            sock.close()
            raise
    else:
        sock = socket.create_connection((host, port), timeout=CMD_CONNECT_TIMEOUT_S)
    with sock:
        sock.settimeout(CMD_REPLY_TIMEOUT_S)
        sock.sendall(encode({"type": "status"}))
        with sock.makefile("rb") as stream:
            line = stream.readline(MAX_LINE_BYTES)
    reply = decode(line)
    if reply is None or reply["type"] != "status":
        raise ValueError("the command service did not send a status reply")
    return reply
