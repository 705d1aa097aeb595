"""Mutual TLS between simulated daemons (IMEX_ENABLE_AUTH_ENCRYPTION=1, mode SSL_TLS).

The real daemon wraps its gRPC channels in mTLS with the six IMEX_*_KEY/CERT/CERT_AUTH
values; the simulator wraps its peer sockets the same way with the ssl module, so a node with a
bad certificate really cannot connect. GSSAPI (Kerberos) modes are not simulated.
"""
from __future__ import annotations

import os
import ssl
import tempfile

from .imexcfg import ImexConfig

MATERIAL_KEYS = (
    "IMEX_SERVER_KEY",
    "IMEX_SERVER_CERT",
    "IMEX_SERVER_CERT_AUTH",
    "IMEX_CLIENT_KEY",
    "IMEX_CLIENT_CERT",
    "IMEX_CLIENT_CERT_AUTH",
)
SOURCES = ("FILE", "ENV_PATH", "ENV_VAL")
GSS_MODES = ("GSS_AUTH_ENCRYPT", "GSS_AUTH_ONLY")


class AuthConfigError(Exception):
    """Authentication settings that prevent initialization."""


def _material_path(source: str, key: str, value: str, scratch: str) -> str:
    """Path of the PEM file configured by KEY, per IMEX_AUTH_SOURCE."""
    if not value:
        raise AuthConfigError(f"{key} is empty but IMEX_AUTH_SOURCE={source} requires it")
    if source == "FILE":
        return value
    if value not in os.environ:
        raise AuthConfigError(f"{key} names environment variable {value}, which is not set")
    if source == "ENV_PATH":
        return os.environ[value]
    # ENV_VAL: the variable holds the PEM text itself; ssl loads certificates only from files.
    path = os.path.join(scratch, key)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w", encoding="utf-8") as handle:
        handle.write(os.environ[value])
    return path


def build_contexts(config: ImexConfig) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None]:
    """(server, client) contexts, (None, None) with authentication off.

    Raises AuthConfigError for the settings the vendor file says "will prevent initialization".
    """
    if not config.enabled("IMEX_ENABLE_AUTH_ENCRYPTION"):
        return None, None
    mode = config.get("IMEX_AUTH_ENCRYPTION_MODE")
    if mode in GSS_MODES:
        raise AuthConfigError(f"IMEX_AUTH_ENCRYPTION_MODE={mode} (GSSAPI) is not simulated by imexsim")
    if mode != "SSL_TLS":
        raise AuthConfigError(f"Invalid IMEX_AUTH_ENCRYPTION_MODE '{mode}'")
    source = config.get("IMEX_AUTH_SOURCE")
    if source not in SOURCES:
        raise AuthConfigError(f"Invalid IMEX_AUTH_SOURCE '{source}' for IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS")
    with tempfile.TemporaryDirectory(prefix="imexsim-auth-") as scratch:
        paths = {key: _material_path(source, key, config.get(key), scratch) for key in MATERIAL_KEYS}
        try:
            server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            server.load_cert_chain(paths["IMEX_SERVER_CERT"], paths["IMEX_SERVER_KEY"])
            server.load_verify_locations(cafile=paths["IMEX_SERVER_CERT_AUTH"])
            server.verify_mode = ssl.CERT_REQUIRED  # mutual: peers must present a client certificate
            client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            client.load_cert_chain(paths["IMEX_CLIENT_CERT"], paths["IMEX_CLIENT_KEY"])
            client.load_verify_locations(cafile=paths["IMEX_CLIENT_CERT_AUTH"])
        except (OSError, ssl.SSLError) as exc:
            raise AuthConfigError(f"Failed to load SSL/TLS credentials: {exc}") from exc
    return server, client
