# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tray's proof of a TLS reload: fingerprints, a real handshake, and the signal schedule on a fake clock."""
from __future__ import annotations

import hashlib

import pytest
from cryptography.hazmat.primitives import serialization

from ansible_collections.rackscale.imex.plugins.module_utils import _tls_reload
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import cert_pem, make_ca, make_tray_cert
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_server import TlsServer, server_context, write_material

CA = make_ca()
OLD = make_tray_cert(CA, ips=["127.0.0.1"])
NEW = make_tray_cert(CA, ips=["127.0.0.1"])


def der_sha256(cert):
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def test_fingerprints_of_a_bundle_follow_the_file_order(tmp_path):
    other = make_ca("other-ca")
    path = tmp_path / "ca.crt"
    path.write_text("# a comment the daemon ignores\n" + cert_pem(CA[0]) + "\n" + cert_pem(other[0]))
    assert _tls_reload.file_fingerprints(str(path)) == [der_sha256(CA[0]), der_sha256(other[0])]


def test_a_file_without_certificate_is_refused_naming_it_and_never_quoting_it(tmp_path):
    path = tmp_path / "tray.crt"
    path.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\nsecret\n")
    with pytest.raises(_tls_reload.MaterialError) as raised:
        _tls_reload.file_fingerprints(str(path))
    assert str(raised.value) == "%s holds no PEM certificate" % path
    with pytest.raises(OSError):
        _tls_reload.file_fingerprints(str(tmp_path / "absent.crt"))


def test_the_handshake_reads_the_certificate_the_server_serves_now(tmp_path):
    ca_path = tmp_path / "ca.crt"
    ca_path.write_text(cert_pem(CA[0]))
    old = write_material(tmp_path, "old", *OLD)
    new = write_material(tmp_path, "new", *NEW)
    server = TlsServer(server_context(*old, str(ca_path)))
    try:
        seen = _tls_reload.presented_certificate("127.0.0.1", server.port, *new)
        assert _tls_reload.fingerprint(seen) == der_sha256(OLD[0])
        server.active = server_context(*new, str(ca_path))
        seen = _tls_reload.presented_certificate("127.0.0.1", server.port, *new)
        assert _tls_reload.fingerprint(seen) == der_sha256(NEW[0])
    finally:
        server.close()
    with pytest.raises(OSError):
        _tls_reload.presented_certificate("127.0.0.1", server.port, *new, timeout=1)


class FakeDaemon:
    """A daemon on a fake clock that takes SIGUSR1 at most once every 5 s and then serves ``files``."""

    def __init__(self, serving, files, last_processed=-100.0, takes_files=True):
        self.now = 0.0
        self.serving = serving
        self.files = files
        self.last_processed = last_processed
        self.takes_files = takes_files
        self.sent, self.processed = [], []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        assert seconds > 0
        self.now += seconds

    def signal(self):
        self.sent.append(self.now)
        if self.now - self.last_processed >= 5.0:
            self.last_processed = self.now
            self.processed.append(self.now)
            if self.takes_files:
                self.serving = self.files
        return None

    def presented(self):
        self.now += 0.05
        return self.serving


def prove(daemon, leaf_changed=True, timeout=20):
    return _tls_reload.prove_reload(daemon.signal, daemon.presented, daemon.files, leaf_changed, timeout,
                                    clock=daemon.clock, sleep=daemon.sleep)


def test_a_reload_taken_at_once_is_proven_by_the_new_fingerprint_after_one_signal():
    daemon = FakeDaemon("old", "new")
    outcome = prove(daemon)
    assert outcome == {"proven": True, "presented": "new", "signals": 1, "error": None, "how": "handshake"}


def test_a_signal_dropped_within_5_s_of_another_is_sent_again_after_the_interval():
    daemon = FakeDaemon("old", "new", last_processed=-2.0)
    outcome = prove(daemon)
    assert outcome["proven"] is True and outcome["signals"] == 2
    assert daemon.processed == daemon.sent[1:] and daemon.sent[1] - daemon.sent[0] >= 5.0


def test_a_daemon_that_never_serves_the_new_certificate_is_not_proven_and_says_what_it_presents():
    daemon = FakeDaemon("old", "new", takes_files=False)
    outcome = prove(daemon, timeout=16)
    assert outcome["proven"] is False and outcome["presented"] == "old"
    assert 3 <= outcome["signals"] <= 4 and daemon.now <= 16 + 1


def test_an_unchanged_certificate_is_signalled_twice_more_than_5_s_apart():
    daemon = FakeDaemon("same", "same", last_processed=-1.0)
    outcome = prove(daemon, leaf_changed=False)
    assert outcome == {"proven": True, "presented": "same", "signals": 2, "error": None, "how": "signal_interval"}
    # The first signal was dropped; the second was taken, after the files were written.
    assert daemon.processed == [daemon.sent[1]]


def test_a_failing_handshake_is_reported_and_a_failing_signal_stops_the_proof():
    daemon = FakeDaemon("old", "new")

    def refused():
        daemon.now += 0.05
        raise ConnectionRefusedError(111, "Connection refused")

    outcome = _tls_reload.prove_reload(daemon.signal, refused, "new", True, 13, clock=daemon.clock, sleep=daemon.sleep)
    assert outcome["proven"] is False and outcome["presented"] is None
    assert outcome["error"] == "TLS handshake with the daemon failed: Connection refused"
    outcome = _tls_reload.prove_reload(lambda: "systemctl failed", daemon.presented, "new", True, 13,
                                       clock=daemon.clock, sleep=daemon.sleep)
    assert outcome == {"proven": False, "presented": None, "signals": 0, "error": "systemctl failed", "how": "handshake"}
