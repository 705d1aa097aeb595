"""Mutual TLS between simulated daemons (IMEX_ENABLE_AUTH_ENCRYPTION=1, SSL_TLS, FILE)."""
from __future__ import annotations

import hashlib
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest
from conftest import all_connected, cells, run_tool

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI needed to make test certificates")


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_ca(directory, name: str):
    key, cert = directory / f"{name}.key", directory / f"{name}.crt"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}", "-days", "2")
    return key, cert


def make_node_cert(directory, ca, address: str):
    """Certificate for ADDRESS (IP subjectAltName) signed by CA; used as server and client cert."""
    key, cert = directory / f"{address}.key", directory / f"{address}.crt"
    openssl("req", "-x509", "-CA", str(ca[1]), "-CAkey", str(ca[0]), "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={address}", "-addext", f"subjectAltName=IP:{address}",
            "-days", "2")
    return key, cert


def auth_settings(key, cert, trusted_ca) -> dict:
    return {
        "IMEX_ENABLE_AUTH_ENCRYPTION": "1",
        "IMEX_AUTH_ENCRYPTION_MODE": "SSL_TLS",
        "IMEX_AUTH_SOURCE": "FILE",
        "IMEX_SERVER_KEY": str(key),
        "IMEX_SERVER_CERT": str(cert),
        "IMEX_SERVER_CERT_AUTH": str(trusted_ca),
        "IMEX_CLIENT_KEY": str(key),
        "IMEX_CLIENT_CERT": str(cert),
        "IMEX_CLIENT_CERT_AUTH": str(trusted_ca),
    }


def test_peer_with_an_untrusted_certificate_never_connects(make_cluster, tmp_path):
    cluster = make_cluster(3)
    trusted, rogue = make_ca(tmp_path, "rack-ca"), make_ca(tmp_path, "rogue-ca")
    for index, address in enumerate(cluster.addresses):
        key, cert = make_node_cert(tmp_path, rogue if index == 2 else trusted, address)
        cluster.configure(index, settings=auth_settings(key, cert, trusted[1]))
    cluster.start_all()
    view = cluster.wait_for(0, lambda v: all(cells(v)[(a, b)] == "CONNECTED" for a in (0, 1) for b in (0, 1)), "TLS links between 0 and 1")
    links = cells(view)
    for other in (0, 1):
        assert links[(other, 2)] == "NEVER_CONNECTED"
        assert links[(2, other)] == "NEVER_CONNECTED"
    assert view["status"] == "DEGRADED"
    # Node 0 retries node 2 every few seconds; the refused handshake is logged on an attempt that
    # may come after the matrix above was read.
    log = cluster.wait_for_log(0, "certificate verify failed")
    assert "Authentication and Encryption enabled = 1" in log


@pytest.mark.parametrize(
    "change, message",
    [
        ({"IMEX_AUTH_SOURCE": ""}, "Invalid IMEX_AUTH_SOURCE ''"),
        ({"IMEX_AUTH_ENCRYPTION_MODE": ""}, "Invalid IMEX_AUTH_ENCRYPTION_MODE ''"),
        ({"IMEX_AUTH_ENCRYPTION_MODE": "GSS_AUTH_ONLY"}, "(GSSAPI) is not simulated"),
        ({"IMEX_SERVER_CERT": "/nonexistent/server.crt"}, "Failed to load SSL/TLS credentials"),
    ],
)
def test_invalid_auth_configuration_prevents_initialization(make_cluster, tmp_path, change, message):
    cluster = make_cluster(1)
    ca = make_ca(tmp_path, "rack-ca")
    key, cert = make_node_cert(tmp_path, ca, cluster.addresses[0])
    cluster.configure(0, settings={**auth_settings(key, cert, ca[1]), **change})
    result = run_tool("daemon", ["-c", str(cluster.config_path(0))], testbed=cluster.testbed(0))
    assert result.returncode == 1
    assert message in result.stderr
    assert "cannot initialize" in cluster.log_path(0).read_text()


def test_sigusr1_reloads_the_certificate_files_and_keeps_the_process(make_cluster, tmp_path):
    """signals.html: SIGUSR1 reloads the SSL credentials (mTLS from files) and restarts the outgoing
    connections; the daemon stays the same instance."""
    from imexsim import wire

    cluster = make_cluster(3)
    trusted, rogue = make_ca(tmp_path, "rack-ca"), make_ca(tmp_path, "rogue-ca")
    live_key, live_cert = tmp_path / "node2-live.key", tmp_path / "node2-live.crt"
    for index, address in enumerate(cluster.addresses):
        key, cert = make_node_cert(tmp_path, rogue if index == 2 else trusted, address)
        if index == 2:
            shutil.copyfile(key, live_key)
            shutil.copyfile(cert, live_cert)
            key, cert = live_key, live_cert
        cluster.configure(index, settings=auth_settings(key, cert, trusted[1]))
    cluster.start_all()
    cluster.wait_for_cell(2, 0, "N")
    pid = cluster.processes[2].pid
    before = wire.query_status(host=cluster.addresses[2], port=cluster.cmd_port)
    assert before["tls"]["reloads"] == 0 and before["tls"]["enabled"] is True

    # Renewed in place by a CA the peers trust, then signalled: no restart.
    (tmp_path / "renewed").mkdir()
    good_key, good_cert = make_node_cert(tmp_path / "renewed", trusted, cluster.addresses[2])
    shutil.copyfile(good_key, live_key)
    shutil.copyfile(good_cert, live_cert)
    cluster.send(2, signal.SIGUSR1)
    cluster.wait_for(0, all_connected, "domain UP after node 2 reloaded a trusted certificate")
    after = wire.query_status(host=cluster.addresses[2], port=cluster.cmd_port)
    assert after["pid"] == pid and cluster.processes[2].poll() is None
    assert after["tls"]["reloads"] == 1 and after["tls"]["loaded_at"] > before["tls"]["loaded_at"]
    assert "Reloaded SSL/TLS credentials" in cluster.wait_for_log(2, "Reloaded SSL/TLS credentials")

    # A certificate the peers do not trust, reloaded: node 2's own links fail again.
    rogue_key, rogue_cert = make_node_cert(tmp_path, rogue, cluster.addresses[2])
    shutil.copyfile(rogue_key, live_key)
    shutil.copyfile(rogue_cert, live_cert)
    time.sleep(5.1)  # SIGUSR1 is processed at most once every 5 seconds
    cluster.send(2, signal.SIGUSR1)
    cluster.wait_for_log(2, "Reloaded SSL/TLS credentials", count=2)
    cluster.wait_for(0, lambda view: view["status"] != "UP", "domain not UP after node 2 reloaded a rogue certificate")
    assert wire.query_status(host=cluster.addresses[2], port=cluster.cmd_port)["pid"] == pid


def presented_fingerprint(address: str, port: int, key, cert) -> str:
    """SHA-256 of the certificate the daemon's peer port presents to a handshake by address (no SNI), made
    with the node's own client credentials as a peer's would be; the server certificate is not verified."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(str(cert), str(key))
    with socket.create_connection((address, port), timeout=5) as raw, context.wrap_socket(raw) as tls:
        return hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest()


def pem_fingerprint(cert) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(cert.read_text())).hexdigest()


def one_daemon_on_live_files(make_cluster, tmp_path):
    """A started one-node cluster whose TLS key and certificate are the files live.key and live.crt (a
    renewal overwrites them): (cluster, ca, the first (key, certificate), live key path, live certificate path)."""
    cluster = make_cluster(1)
    ca = make_ca(tmp_path, "rack-ca")
    live_key, live_cert = tmp_path / "live.key", tmp_path / "live.crt"
    first = make_node_cert(tmp_path, ca, cluster.addresses[0])
    shutil.copyfile(first[0], live_key)
    shutil.copyfile(first[1], live_cert)
    cluster.configure(0, settings=auth_settings(live_key, live_cert, ca[1]))
    cluster.start_all()
    cluster.wait_ready(0)
    return cluster, ca, first, live_key, live_cert


def test_the_peer_port_presents_the_certificate_loaded_last_and_sigusr1_counts_once_per_5_s(make_cluster, tmp_path):
    """A handshake to the peer port shows the certificate the daemon serves: the one it loaded at start, the
    file's new one only after a SIGUSR1 it processed, and not after one sent within 5 s of the last."""
    cluster, ca, first, live_key, live_cert = one_daemon_on_live_files(make_cluster, tmp_path)
    address = cluster.addresses[0]
    assert presented_fingerprint(address, cluster.server_port, live_key, live_cert) == pem_fingerprint(first[1])

    def renew(name: str):
        (tmp_path / name).mkdir()
        key, cert = make_node_cert(tmp_path / name, ca, address)
        shutil.copyfile(key, live_key)
        shutil.copyfile(cert, live_cert)
        return pem_fingerprint(cert)

    # New files alone change nothing the daemon serves: it reads them only at start or on SIGUSR1.
    second = renew("second")
    assert presented_fingerprint(address, cluster.server_port, live_key, live_cert) == pem_fingerprint(first[1])
    cluster.send(0, signal.SIGUSR1)
    cluster.wait_for_log(0, "Reloaded SSL/TLS credentials")
    assert presented_fingerprint(address, cluster.server_port, live_key, live_cert) == second

    # Within 5 s of the last processed signal, another is dropped: the daemon keeps serving what it had.
    third = renew("third")
    cluster.send(0, signal.SIGUSR1)
    cluster.wait_for_log(0, "Ignoring SIGUSR1")
    assert presented_fingerprint(address, cluster.server_port, live_key, live_cert) == second
    time.sleep(5.1)
    cluster.send(0, signal.SIGUSR1)
    cluster.wait_for_log(0, "Reloaded SSL/TLS credentials", count=2)
    assert presented_fingerprint(address, cluster.server_port, live_key, live_cert) == third
    assert cluster.processes[0].poll() is None


def test_the_collections_reload_proof_holds_against_the_daemon(make_cluster, tmp_path):
    """The tray-side proof of rackscale.imex (imex_tls_reload) against the simulated daemon: a signal the
    daemon drops (within 5 s of the last one it took) is sent again, and the reload is proven by the new
    certificate; files the daemon cannot load leave it on the old one, and the proof says so."""
    from ansible_collections.rackscale.imex.plugins.module_utils import _tls_reload

    cluster, ca, first, live_key, live_cert = one_daemon_on_live_files(make_cluster, tmp_path)
    address = cluster.addresses[0]

    def send_signal():
        cluster.send(0, signal.SIGUSR1)
        return None

    def presented():
        return _tls_reload.fingerprint(_tls_reload.presented_certificate(address, cluster.server_port, str(live_cert),
                                                                         str(live_key)))

    # A signal the daemon takes now, so that the proof's first one falls within its 5 s.
    send_signal()
    cluster.wait_for_log(0, "Reloaded SSL/TLS credentials")
    (tmp_path / "renewed").mkdir()
    key, cert = make_node_cert(tmp_path / "renewed", ca, address)
    shutil.copyfile(key, live_key)
    shutil.copyfile(cert, live_cert)
    expected = _tls_reload.file_fingerprints(str(live_cert))[0]
    outcome = _tls_reload.prove_reload(send_signal, presented, expected, leaf_changed=True, timeout=15)
    assert outcome == {"proven": True, "presented": expected, "signals": 2, "error": None, "how": "handshake"}
    assert "Ignoring SIGUSR1" in cluster.wait_for_log(0, "Reloaded SSL/TLS credentials", count=2)

    # A certificate file the daemon cannot load: it keeps serving the one it has; no proof.
    (tmp_path / "broken").mkdir()
    _key, other = make_node_cert(tmp_path / "broken", ca, address)
    broken = _tls_reload.file_fingerprints(str(other))[0]
    live_cert.write_text(other.read_text())
    live_key.write_text("not a key\n")

    def presented_to_the_last_good_credentials():
        return _tls_reload.fingerprint(_tls_reload.presented_certificate(address, cluster.server_port, str(cert),
                                                                         str(key)))

    time.sleep(5.1)  # past the interval: the signal below is taken, and the load fails
    outcome = _tls_reload.prove_reload(send_signal, presented_to_the_last_good_credentials, broken, leaf_changed=True,
                                       timeout=6)
    assert outcome["proven"] is False and outcome["presented"] == expected
    cluster.wait_for_log(0, "Failed to reload SSL/TLS credentials")
    assert cluster.processes[0].poll() is None
