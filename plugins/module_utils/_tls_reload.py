# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The TLS credentials a running IMEX daemon serves, and the proof that SIGUSR1 put new ones in force.

nvidia-imex serves its peers gRPC over mutual TLS on SERVER_PORT with the key and certificate files
config.cfg names (IMEX_AUTH_SOURCE=FILE). SIGUSR1 makes it read them again, but it processes the signal
at most once every 5 seconds and says nothing about it: a signal sent within 5 s of another is dropped.
So a reload is proven by a TLS handshake to the daemon's own server port that presents the new
certificate (its SHA-256 fingerprint); a signal not taken in time is sent again once the interval has
passed. Only the standard library (ssl, socket, hashlib, base64): trays run Python >= 3.9 without
extra packages.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import re
import socket
import ssl
import time

from ansible_collections.rackscale.imex.plugins.module_utils import _daemon_signal

# signals.html: "SIGUSR1 will only be processed once every 5 seconds" (one value for every module that signals).
SIGUSR1_INTERVAL_S = _daemon_signal.SIGUSR1_INTERVAL_S
POLL_INTERVAL_S = 0.5
HANDSHAKE_TIMEOUT_S = 5.0
_PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----(?P<body>[A-Za-z0-9+/=\s]*?)-----END CERTIFICATE-----")


class MaterialError(ValueError):
    """A file that holds no PEM certificate; the message names the file, never its content."""


def certificates_der(text):
    """The DER bytes of each PEM certificate in ``text``, in file order ([] when it holds none)."""
    found = []
    for match in _PEM_CERTIFICATE.finditer(text or ""):
        try:
            found.append(base64.b64decode("".join(match.group("body").split()), validate=True))
        except (binascii.Error, ValueError):
            continue
    return found


def fingerprint(der):
    """SHA-256 of a certificate's DER encoding, lower-case hex without separators."""
    return hashlib.sha256(der).hexdigest()


def file_fingerprints(path):
    """SHA-256 fingerprints of the certificates of a PEM file, in file order. Raises OSError when it
    cannot be read and MaterialError when it holds no certificate."""
    with open(path, "rb") as handle:
        text = handle.read().decode("ascii", errors="replace")
    found = [fingerprint(der) for der in certificates_der(text)]
    if not found:
        raise MaterialError("%s holds no PEM certificate" % path)
    return found


def presented_certificate(host, port, client_cert, client_key, timeout=HANDSHAKE_TIMEOUT_S):
    """The DER certificate the TLS server at host:port presents.

    The daemon asks its peers for a client certificate (mutual TLS): the tray's own is presented, so
    that a server on TLS 1.2 completes the handshake. The server's certificate is not verified here:
    the caller compares its fingerprint with the one it expects. Raises OSError (ssl.SSLError too).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(client_cert, client_key)
    # gRPC negotiates HTTP/2 by ALPN; offering it keeps a strict server from refusing the handshake.
    context.set_alpn_protocols(["h2"])
    with socket.create_connection((host, int(port)), timeout=timeout) as raw:
        with context.wrap_socket(raw, server_hostname=None) as tls:
            der = tls.getpeercert(binary_form=True)
    if not der:
        raise ssl.SSLError("the server presented no certificate")
    return der


def prove_reload(send_signal, presented, expected, leaf_changed, timeout,
                 clock=time.monotonic, sleep=time.sleep, interval=None, poll=None):
    """Signal the daemon and prove it reloaded; a dict with proven, presented, signals, error, how.

    send_signal(): sends SIGUSR1, returns None or why it could not be sent (the proof then stops).
    presented(): the fingerprint the daemon's server presents now; raises OSError when the handshake fails.
    expected: the fingerprint of the certificate on disk. leaf_changed: whether it differs from the one
    the daemon served before (read by the caller before any signal).

    A changed certificate is proven when the handshake presents it; while it does not, the signal is sent
    again each time the daemon's interval has passed (the first may have come within 5 s of another),
    until ``timeout`` seconds. An unchanged certificate (a new CA bundle alone) cannot show the reload in
    a handshake: the signal is then sent a second time once the interval has passed, so that one of the
    two was taken after the files were written, and the handshake must still present the certificate.
    """
    interval = SIGUSR1_INTERVAL_S if interval is None else interval
    poll = POLL_INTERVAL_S if poll is None else poll
    start = clock()
    outcome = {"proven": False, "presented": None, "signals": 0, "error": None,
               "how": "handshake" if leaf_changed else "signal_interval"}

    def signal():
        why = send_signal()
        if why:
            outcome["error"] = why
            return False
        outcome["signals"] += 1
        return True

    if not signal():
        return outcome
    last_signal = clock()
    while True:
        try:
            outcome["presented"] = presented()
            outcome["error"] = None
        except OSError as error:
            outcome["error"] = "TLS handshake with the daemon failed: %s" % (getattr(error, "strerror", None) or error)
        now = clock()
        if outcome["presented"] == expected and outcome["error"] is None:
            if leaf_changed or outcome["signals"] >= 2:
                outcome["proven"] = True
                return outcome
        if now - start >= timeout:
            return outcome
        if now - last_signal >= interval and (leaf_changed or outcome["signals"] < 2):
            if not signal():
                return outcome
            last_signal = clock()
            continue
        sleep(min(poll, max(0.0, timeout - (now - start))))
