"""TLS certificate rotation without a domain restart (one rack of four trays).

Tests in order, each leaving the bed converged with mutual TLS: the first converge; one tray's
certificate and key renewed on the controller (same paths, same inventory) and site.yml run: the
daemons reload (SIGUSR1) and keep their MainPIDs, the domain is proven UP and the run reports the
reload; a second run changes nothing and finds no reload pending; the same renewal of another tray
while a GPU process runs on it (simrack fault busy) is reloaded too, not refused as busy.
Certificates are made with cryptography, as the controller checks them.
"""
from __future__ import annotations

import copy
import datetime
import hashlib
import ipaddress
import json
import os

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from conftest import requires_rack, run_playbook

pytestmark = requires_rack
RACK_SHAPE = (1, 4)
TLS_DIR = "/etc/nvidia-imex/tls"
RENEWED = "rack1-tray02"
RELOAD = "Reload IMEX TLS credentials"


# --- certificates ------------------------------------------------------------------------------

def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_ca():
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rack1-ca")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def write_tray_cert(directory, ca, tray, address):
    """A fresh key and certificate of one tray (IP SAN = its IMEX address, client and server auth),
    written to the same controller paths every time: a renewal changes no inventory."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, tray)]))
            .issuer_name(ca[0].subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=90))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca[1], hashes.SHA256()))
    cert_path, key_path = directory / (tray + ".crt"), directory / (tray + ".key")
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(_pem_key(key))
    return cert_path, key_path


# --- bed helpers -------------------------------------------------------------------------------

def hosts_of(inventory):
    return inventory["all"]["children"]["imex_domains"]["children"]["rack1"]["hosts"]


def daemon_pids(rack):
    return {tray: rack.ssh(tray, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout.strip()
            for tray in rack.trays_of(1)}


def tray_cert_sha256(rack, tray):
    return rack.ssh(tray, "sha256sum", TLS_DIR + "/tray.crt").stdout.split()[0]


def reload_events(rack, tray):
    """The simulator's lifetime record of a tray: its reload lines."""
    out = rack.ssh(tray, "cat", "/var/lib/imexsim/daemon-events.jsonl").stdout
    return [event for event in (json.loads(line) for line in out.splitlines() if line.strip())
            if event.get("event") == "reload"]


def changed_hosts(run, task):
    return sorted(host for host, name in run.changed_tasks() if name == task)


# --- fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return {"reports": str(tmp_path_factory.mktemp("reports")), "textfiles": str(tmp_path_factory.mktemp("textfiles"))}


@pytest.fixture(scope="module")
def pki(simulated_rack, tmp_path_factory):
    """The CA, a certificate per tray as controller files, and an inventory with imex_tls on."""
    directory = tmp_path_factory.mktemp("pki")
    ca = make_ca()
    ca_path = directory / "ca.crt"
    ca_path.write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    with open(simulated_rack.inventory) as handle:
        inventory = copy.deepcopy(yaml.safe_load(handle))
    hosts = hosts_of(inventory)
    addresses = {tray: hosts[tray]["ansible_host"] for tray in simulated_rack.trays_of(1)}
    inventory["all"]["children"]["imex_domains"]["children"]["rack1"].setdefault("vars", {}).update(
        imex_tls=True, imex_tls_ca=str(ca_path))
    for tray, address in addresses.items():
        cert, key = write_tray_cert(directory, ca, tray, address)
        hosts[tray].update(imex_tls_cert=str(cert), imex_tls_key=str(key))
    path = directory / "tls.yml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return {"dir": directory, "ca": ca, "addresses": addresses, "inventory": str(path)}


def site(pki, outputs):
    return run_playbook("site.yml", pki["inventory"],
                        extravars={"imex_report_dir": outputs["reports"], "imex_textfile_dir": outputs["textfiles"],
                                   "imex_validate_timeout_s": 120})


def report(outputs):
    with open(os.path.join(outputs["reports"], "rack1.json")) as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def converged(simulated_rack, pki, outputs):
    run = site(pki, outputs)
    assert run.rc == 0, run.stdout[-6000:]
    return run


def renew(simulated_rack, pki, outputs, tray):
    """Renew one tray's certificate and key on the controller and run site.yml; (run, pids before)."""
    before = daemon_pids(simulated_rack)
    assert all(pid not in ("", "0") for pid in before.values()), before
    cert, _key = write_tray_cert(pki["dir"], pki["ca"], tray, pki["addresses"][tray])
    run = site(pki, outputs)
    assert run.rc == 0, run.stdout[-6000:]
    assert tray_cert_sha256(simulated_rack, tray) == hashlib.sha256(cert.read_bytes()).hexdigest()
    return run, before


def assert_reloaded_in_place(simulated_rack, outputs, run, before, tray):
    # No restart: every daemon kept its process; the renewed tray's daemon was signalled, and only it.
    assert daemon_pids(simulated_rack) == before
    assert changed_hosts(run, "Stop IMEX daemon") == [] and changed_hosts(run, "Start IMEX daemon") == []
    assert changed_hosts(run, RELOAD) == [tray]
    # The simulated daemon reloaded its files in that same process, as its log and record show.
    events = reload_events(simulated_rack, tray)
    assert events and events[-1]["tls"] is True and str(events[-1]["pid"]) == before[tray], events
    log = simulated_rack.ssh(tray, "cat", "/var/log/nvidia-imex.log").stdout
    assert "Reloaded SSL/TLS credentials" in log, log[-2000:]
    # Proven UP after the reload, and the run says it reloaded.
    verdict = report(outputs)
    assert verdict["verdict"] == "healthy" and verdict["status"]["domain_state"] == "UP", verdict
    assert verdict["tls_reloaded"] == [tray]
    assert "TLS credentials reloaded without a restart on %s" % tray in verdict["message"]
    with open(os.path.join(outputs["reports"], "summary.md")) as handle:
        assert "rack1: TLS credentials reloaded without a restart (SIGUSR1) on %s." % tray in handle.read()


# --- tests -------------------------------------------------------------------------------------

def test_tls_converges_and_gauges_each_certificates_expiry(converged, simulated_rack, outputs):
    verdict = report(outputs)
    assert verdict["verdict"] == "healthy" and verdict["status"]["domain_state"] == "UP"
    assert sorted(verdict["tls_certificates"]) == simulated_rack.trays_of(1)
    gauges = "".join(open(os.path.join(outputs["textfiles"], name)).read() for name in os.listdir(outputs["textfiles"]))
    for tray in simulated_rack.trays_of(1):
        assert 'rackscale_imex_tls_certificate_expiry_timestamp_seconds{domain="rack1",tray="%s"}' % tray in gauges


def test_a_renewed_certificate_is_reloaded_without_a_restart(converged, simulated_rack, pki, outputs):
    run, before = renew(simulated_rack, pki, outputs, RENEWED)
    assert_reloaded_in_place(simulated_rack, outputs, run, before, RENEWED)


def test_the_next_run_changes_nothing_and_finds_no_reload_pending(converged, simulated_rack, pki, outputs):
    before = daemon_pids(simulated_rack)
    run = site(pki, outputs)
    assert run.rc == 0, run.stdout[-6000:]
    assert changed_hosts(run, RELOAD) == [] and changed_hosts(run, "Stop IMEX daemon") == []
    assert daemon_pids(simulated_rack) == before
    verdict = report(outputs)
    assert verdict["verdict"] == "healthy" and verdict["tls_reloaded"] == []

