"""The daemon's two input files (config.cfg, nodes_config.cfg) and the local-node lookup.

Shared by the daemon and nvidia-imex-ctl, which both read the same files on a tray.
"""
from __future__ import annotations

import fcntl
import hashlib
import ipaddress
import socket
import struct

DEFAULT_CONFIG_PATH = "/etc/nvidia-imex/config.cfg"

# Values used when a key is absent from config.cfg: the documented defaults (reference §1.1).
# IMEX_CMD_ENABLED/IMEX_CMD_PORT have no documented default, only shipped values; an absent key
# is treated as "command service off" (INFERRED).
DEFAULTS = {
    "LOG_LEVEL": "4",
    "LOG_FILE_NAME": "/var/log/nvidia-imex.log",
    "LOG_APPEND_TO_LOG": "1",
    "LOG_FILE_MAX_SIZE": "1024",
    "LOG_USE_SYSLOG": "0",
    "DAEMONIZE": "1",
    "BIND_INTERFACE_IP": "",
    "SERVER_PORT": "50000",
    "IMEX_NODE_CONFIG_FILE": "/etc/nvidia-imex/nodes_config.cfg",
    "IMEX_WAIT_FOR_QUORUM": "RECOVERY",
    "IMEX_ENABLE_AUTH_ENCRYPTION": "0",
    "IMEX_AUTH_ENCRYPTION_MODE": "SSL_TLS",
    "IMEX_AUTH_SOURCE": "",
    "IMEX_SECURITY_TARGET_OVERRIDE": "",
    "IMEX_CMD_ENABLED": "0",
    "IMEX_CMD_BIND_INTERFACE_IP": "",
    "IMEX_CMD_PORT": "",
    "IMEX_CMD_UNIX_DOMAIN_PATH": "",
    "IMEX_NODE_DISCONNECTED_GRACE_TIME": "-1",
}

SIOCGIFADDR = 0x8915


class ConfigError(Exception):
    """A config value the daemon cannot start with."""


class ImexConfig:
    """Parsed config.cfg: `KEY=value` lines, `#` comments, surrounding blanks ignored."""

    def __init__(self, path: str, values: dict[str, str]):
        self.path = path
        self.values = values

    @classmethod
    def load(cls, path: str) -> ImexConfig:
        """Read and parse PATH; OSError propagates so callers can print the vendor message."""
        with open(path, encoding="utf-8", errors="replace") as handle:
            return cls(path, parse_config(handle.read()))

    def get(self, key: str) -> str:
        return self.values.get(key, DEFAULTS.get(key, ""))

    def get_int(self, key: str) -> int:
        raw = self.get(key)
        try:
            return int(raw)
        except ValueError as exc:
            raise ConfigError(f"{key}={raw!r} in {self.path} is not an integer") from exc

    def enabled(self, key: str) -> bool:
        return self.get(key) == "1"


def parse_config(text: str) -> dict[str, str]:
    values = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        values[key.strip()] = value.strip()
    return values


def read_node_entries(path: str) -> list[str]:
    """Ordered node list: one address or host name per line; blank and `#` lines skipped.

    Comment lines are tolerated as the AWS cookbook's files show (reference §2, INFERRED).
    """
    with open(path, encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def node_map_hash(entries: list[str]) -> str:
    """Identity of a node map: two daemons agree only if their ordered lists are equal."""
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()


def is_ip_literal(entry: str) -> bool:
    try:
        ipaddress.ip_address(entry)
    except ValueError:
        return False
    return True


def resolve(entry: str) -> list[str]:
    """Addresses an entry stands for (itself for an IP literal), [] if it does not resolve."""
    if is_ip_literal(entry):
        return [entry]
    try:
        infos = socket.getaddrinfo(entry, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    addresses = []
    for info in infos:
        address = info[4][0]
        if address not in addresses:
            addresses.append(address)
    return addresses


def is_local_address(address: str) -> bool:
    """Binding to port 0 succeeds only for an address configured on this host."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


def find_local_node(entries: list[str], bind_ip: str) -> tuple[int, str] | None:
    """(index, bind address) of this node in ENTRIES, or None.

    With BIND_INTERFACE_IP set, that address must be (or be resolved from) an entry; otherwise
    the first entry with a local address wins, like the daemon's interface matching.
    """
    for index, entry in enumerate(entries):
        addresses = resolve(entry)
        if bind_ip:
            if bind_ip in addresses:
                return index, bind_ip
            continue
        for address in addresses:
            if is_local_address(address):
                return index, address
    return None


def interface_name(address: str) -> str:
    """Name of the interface holding an IPv4 ADDRESS, for the daemon's identification log line."""
    try:
        packed = socket.inet_aton(address)
    except OSError:
        return "unknown"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                reply = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, request)
            except OSError:
                continue
            if reply[20:24] == packed:
                return name
    # Extra loopback addresses (127.0.0.x used by the self-tests) are not interface addresses.
    return "lo" if ipaddress.ip_address(address).is_loopback else "unknown"
