# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A loopback mutual-TLS server that serves, as nvidia-imex does, the credentials it loaded last; the
tests swap them as a reload would."""
from __future__ import annotations

import socket
import ssl
import threading

from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import cert_pem, key_pem


def write_material(directory, name, cert, key):
    """(certificate path, key path) of ``cert`` and ``key`` written under ``directory``."""
    cert_path, key_path = directory / ("%s.crt" % name), directory / ("%s.key" % name)
    cert_path.write_text(cert_pem(cert))
    key_path.write_text(key_pem(key))
    return str(cert_path), str(key_path)


def server_context(cert_path, key_path, ca_path):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    context.load_verify_locations(cafile=ca_path)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


class TlsServer:
    """Accepts on 127.0.0.1 (``port``) and completes each handshake with ``active``, the context loaded last."""

    def __init__(self, context):
        self.active = context
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.handshakes = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.listener.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                raw, _peer = self.listener.accept()
            except OSError:
                continue
            raw.settimeout(5)
            try:
                with self.active.wrap_socket(raw, server_side=True) as tls:
                    self.handshakes += 1
                    try:
                        tls.recv(1)
                    except (OSError, ssl.SSLError):
                        pass
            except (OSError, ssl.SSLError):
                raw.close()

    def close(self):
        self.stopped.set()
        self.thread.join(5)
        self.listener.close()
