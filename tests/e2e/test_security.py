"""Security settings end to end on a small simulated bed (one rack of three trays).

Tests in order, each leaving the bed converged: mutual TLS from fresh trays (keys 0600 root-owned,
certificates 0644, the TLS keys in config.cfg, no key material in anything the run printed, recorded
or reported, with one tray's key given as PEM text as a vault or an AWX credential gives it, and a
node_exporter gauge of each certificate's expiry); one tray's certificate and key renewed on the
controller (same paths, same inventory) and site.yml run: the daemons reload (SIGUSR1) and keep their
MainPIDs, the domain is proven UP and the run reports the reload, and the next run changes nothing and
finds no reload pending; the
command service bound to each tray's own address (config.cfg, the listening socket, validate.yml);
one run with the bed's own inventory unbinds it again and turns TLS off on the trays; the
dra_host_managed mode adds the command service's unix socket, an isolation channel gets exactly
the owner, group and mode asked for, and the files and directories are root-owned 0644 and 0755.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import requires_rack, run_playbook

pytestmark = [requires_rack, pytest.mark.skipif(shutil.which("openssl") is None,
                                                 reason="openssl CLI needed to make the test certificates (tools/bootstrap installs it)")]
RACK_SHAPE = (1, 3)
TRAYS = ["rack1-tray01", "rack1-tray02", "rack1-tray03"]
TLS_DIR = "/etc/nvidia-imex/tls"
CONFIG = "/etc/nvidia-imex/config.cfg"
RELOAD = "Reload IMEX TLS credentials"
TLS_KEYS = {
    "IMEX_ENABLE_AUTH_ENCRYPTION": "1",
    "IMEX_AUTH_ENCRYPTION_MODE": "SSL_TLS",
    "IMEX_AUTH_SOURCE": "FILE",
    "IMEX_SERVER_KEY": TLS_DIR + "/tray.key",
    "IMEX_SERVER_CERT": TLS_DIR + "/tray.crt",
    "IMEX_SERVER_CERT_AUTH": TLS_DIR + "/ca.crt",
    "IMEX_CLIENT_KEY": TLS_DIR + "/tray.key",
    "IMEX_CLIENT_CERT": TLS_DIR + "/tray.crt",
    "IMEX_CLIENT_CERT_AUTH": TLS_DIR + "/ca.crt",
}


# --- certificates (openssl CLI, as tests/imexsim/test_auth.py makes them) -----------------------

def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_ca(directory, name):
    key, cert = directory / (name + ".key"), directory / (name + ".crt")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=" + name, "-days", "90")
    return key, cert


def make_tray_cert(directory, ca, name, address):
    """Key and certificate of one tray (IP subjectAltName = its IMEX address), signed by CA."""
    key, cert = directory / (name + ".key"), directory / (name + ".crt")
    openssl("req", "-x509", "-CA", str(ca[1]), "-CAkey", str(ca[0]), "-newkey", "ec",
            "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out", str(cert),
            "-subj", "/CN=" + address, "-addext", "subjectAltName=IP:" + address, "-days", "60")
    return key, cert


def key_body_lines(path):
    """The base64 lines of a PEM private key: what must never show up in a run's output."""
    return [line for line in path.read_text().splitlines() if line and not line.startswith("-----")]


# --- bed helpers -------------------------------------------------------------------------------

def load_inventory(rack):
    with open(rack.inventory) as handle:
        return yaml.safe_load(handle)


def hosts_of(inventory):
    return inventory["all"]["children"]["imex_domains"]["children"]["rack1"]["hosts"]


def address_of(rack, tray):
    return hosts_of(load_inventory(rack))[tray]["ansible_host"]


# The tray whose certificate and private key are given as PEM text in its host vars (as a vaulted
# variable or an AWX credential injected as an extra var gives them); the others' are controller paths.
PEM_TRAY = TRAYS[0]


def tls_inventory(rack, path, ca, certs):
    """A copy of the bed inventory with imex_tls on: the CA as a group var holding its PEM text (as an
    AWX credential or a vault gives it), certificate and key per tray as controller paths, but for
    PEM_TRAY, whose certificate and key are PEM text too."""
    inventory = copy.deepcopy(load_inventory(rack))
    group = inventory["all"]["children"]["imex_domains"]["children"]["rack1"]
    group["vars"] = {"imex_tls": True, "imex_tls_ca": Path(ca[1]).read_text()}
    for tray, (key, cert) in certs.items():
        group["hosts"][tray].update(imex_tls_cert=str(cert), imex_tls_key=str(key))
        if tray == PEM_TRAY:
            group["hosts"][tray].update(imex_tls_cert=Path(cert).read_text(), imex_tls_key=Path(key).read_text())
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return str(path)


def site(inventory, reports, check=False, diff=False, **extravars):
    return run_playbook("site.yml", inventory, check=check, diff=diff,
                        extravars=dict({"imex_report_dir": reports, "imex_validate_timeout_s": 60}, **extravars))


def report(reports):
    with open(os.path.join(reports, "rack1.json")) as handle:
        return json.load(handle)


def config_values(rack, tray):
    text = rack.ssh(tray, "cat", CONFIG).stdout
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def tray_tls_files(rack, tray):
    """sha256 of the CA, certificate and key on a tray (the copy task's result is censored: no_log)."""
    out = rack.ssh(tray, "sha256sum", TLS_DIR + "/ca.crt", TLS_DIR + "/tray.crt", TLS_DIR + "/tray.key").stdout
    return [line.split()[0] for line in out.splitlines()]


def local_tls_files(ca, key, cert):
    return [hashlib.sha256(path.read_bytes()).hexdigest() for path in (ca[1], cert, key)]


def everything_recorded(run):
    """Every text the run left for an operator or AWX: stdout, events and runner's artifacts."""
    parts = [run.stdout, json.dumps(run.events)]
    for root, _, files in os.walk(os.path.join(run.private_data_dir, "artifacts")):
        for name in files:
            with open(os.path.join(root, name), errors="replace") as handle:
                parts.append(handle.read())
    return "\n".join(parts)


def daemon_pids(rack):
    return {tray: rack.ssh(tray, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-imex").stdout.strip()
            for tray in TRAYS}


def reload_events(rack, tray):
    """The simulator's lifetime record of a tray: its reload lines."""
    out = rack.ssh(tray, "cat", "/var/lib/imexsim/daemon-events.jsonl").stdout
    return [event for event in (json.loads(line) for line in out.splitlines() if line.strip())
            if event.get("event") == "reload"]


def changed_hosts(run, task):
    return sorted(host for host, name in run.changed_tasks() if name == task)


def listeners(rack, tray, port):
    """Local addresses of the TCP sockets listening on PORT on a tray (ss, from iproute2)."""
    out = rack.ssh(tray, "ss", "-Hltn", "sport = :%d" % port)
    assert out.returncode == 0, out.stdout + out.stderr
    return sorted(line.split()[3].rsplit(":", 1)[0] for line in out.stdout.splitlines() if line.strip())


# --- fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return str(tmp_path_factory.mktemp("reports"))


@pytest.fixture(scope="module")
def textfiles(tmp_path_factory):
    return str(tmp_path_factory.mktemp("textfiles"))


@pytest.fixture(scope="module")
def pki(simulated_rack, tmp_path_factory):
    """The rack's CA with a certificate per tray. (A certificate of another CA is refused before any tray:
    tests/unit/plan/test_scenarios_from_the_bed.py.)"""
    directory = tmp_path_factory.mktemp("pki")
    ca = make_ca(directory, "rack-ca")
    certs = {tray: make_tray_cert(directory, ca, tray, address_of(simulated_rack, tray)) for tray in TRAYS}
    good = tls_inventory(simulated_rack, directory / "tls.yml", ca, certs)
    return {"dir": directory, "ca": ca, "certs": certs, "good": good}


@pytest.fixture(scope="module")
def tls_run(simulated_rack, pki, reports, textfiles):
    """site.yml with mutual TLS on fresh trays, with --diff (which would show copied files)."""
    return site(pki["good"], reports, diff=True, imex_textfile_dir=textfiles)


# --- tests -------------------------------------------------------------------------------------

def test_tls_converges_up_with_protected_keys(tls_run, simulated_rack, pki, reports):
    assert tls_run.rc == 0, tls_run.stdout[-6000:]
    verdict = report(reports)
    assert verdict["verdict"] == "healthy" and verdict["status"]["domain_state"] == "UP"
    for tray in TRAYS:
        assert tray_tls_files(simulated_rack, tray) == local_tls_files(pki["ca"], *pki["certs"][tray]), tray
        modes = simulated_rack.ssh(tray, "stat", "-c", "%n %a %U %G", TLS_DIR, TLS_DIR + "/ca.crt",
                                   TLS_DIR + "/tray.crt", TLS_DIR + "/tray.key").stdout.splitlines()
        assert modes == [TLS_DIR + " 700 root root", TLS_DIR + "/ca.crt 644 root root",
                         TLS_DIR + "/tray.crt 644 root root", TLS_DIR + "/tray.key 600 root root"], (tray, modes)
        values = config_values(simulated_rack, tray)
        assert {k: values.get(k) for k in TLS_KEYS} == TLS_KEYS, tray
        # The daemon really started with authentication on (its log is rewritten at each start).
        log = simulated_rack.ssh(tray, "cat", "/var/log/nvidia-imex.log").stdout
        assert "Authentication and Encryption enabled = 1" in log, log[-2000:]


def test_no_key_material_in_the_run_output(tls_run, pki, reports):
    # The run really had a private key as PEM text to keep quiet (PEM_TRAY's host var).
    with open(pki["good"]) as handle:
        given = hosts_of(yaml.safe_load(handle))[PEM_TRAY]["imex_tls_key"]
    assert given.startswith("-----BEGIN PRIVATE KEY-----")
    recorded = everything_recorded(tls_run)
    for root, _, files in os.walk(reports):
        for name in files:
            with open(os.path.join(root, name), errors="replace") as handle:
                recorded += "\n" + handle.read()
    # Booleans first: a failing assertion must not print the output it found the key in.
    leaked = "PRIVATE KEY" in recorded
    assert not leaked, "a PEM private key header appears in the run's output or artifacts"
    for key, _ in pki["certs"].values():
        leaked = [line for line in key_body_lines(key) if line in recorded]
        assert not leaked, "%d line(s) of %s appear in the run's output or artifacts" % (len(leaked), key)


def test_tls_converges_and_gauges_each_certificates_expiry(tls_run, simulated_rack, reports, textfiles):
    assert tls_run.rc == 0, tls_run.stdout[-6000:]
    verdict = report(reports)
    assert verdict["verdict"] == "healthy" and verdict["status"]["domain_state"] == "UP"
    assert sorted(verdict["tls_certificates"]) == TRAYS
    gauges = "".join(open(os.path.join(textfiles, name)).read() for name in os.listdir(textfiles))
    for tray in TRAYS:
        assert 'rackscale_imex_tls_certificate_expiry_timestamp_seconds{domain="rack1",tray="%s"}' % tray in gauges


# A tray whose certificate and key are controller paths: the renewal writes new files to the same paths.
RENEWED = TRAYS[1]


def test_a_renewed_certificate_is_reloaded_without_a_restart(tls_run, simulated_rack, pki, reports):
    assert tls_run.rc == 0, tls_run.stdout[-6000:]
    before = daemon_pids(simulated_rack)
    assert all(pid not in ("", "0") for pid in before.values()), before
    key, cert = make_tray_cert(pki["dir"], pki["ca"], RENEWED, address_of(simulated_rack, RENEWED))
    assert (key, cert) == pki["certs"][RENEWED]
    run = site(pki["good"], reports)
    assert run.rc == 0, run.stdout[-6000:]
    assert tray_tls_files(simulated_rack, RENEWED) == local_tls_files(pki["ca"], key, cert)
    # No restart: every daemon kept its process; the renewed tray's daemon was signalled, and only it.
    assert daemon_pids(simulated_rack) == before
    assert changed_hosts(run, "Stop IMEX daemon") == [] and changed_hosts(run, "Start IMEX daemon") == []
    assert changed_hosts(run, RELOAD) == [RENEWED]
    # The simulated daemon reloaded its files in that same process, as its log and record show.
    events = reload_events(simulated_rack, RENEWED)
    assert events and events[-1]["tls"] is True and str(events[-1]["pid"]) == before[RENEWED], events
    log = simulated_rack.ssh(RENEWED, "cat", "/var/log/nvidia-imex.log").stdout
    assert "Reloaded SSL/TLS credentials" in log, log[-2000:]
    # Proven UP after the reload, and the run says it reloaded.
    verdict = report(reports)
    assert verdict["verdict"] == "healthy" and verdict["status"]["domain_state"] == "UP", verdict
    assert verdict["tls_reloaded"] == [RENEWED]
    assert "TLS credentials reloaded without a restart on %s" % RENEWED in verdict["message"]
    with open(os.path.join(reports, "summary.md")) as handle:
        assert "rack1: TLS credentials reloaded without a restart (SIGUSR1) on %s." % RENEWED in handle.read()


def test_the_next_run_changes_nothing_and_finds_no_reload_pending(tls_run, simulated_rack, pki, reports):
    before = daemon_pids(simulated_rack)
    run = site(pki["good"], reports)
    assert run.rc == 0, run.stdout[-6000:]
    assert changed_hosts(run, RELOAD) == [] and changed_hosts(run, "Stop IMEX daemon") == []
    assert daemon_pids(simulated_rack) == before
    verdict = report(reports)
    assert verdict["verdict"] == "healthy" and verdict["tls_reloaded"] == []


def test_command_service_bound_to_each_trays_own_address(tls_run, simulated_rack, pki, reports):
    # From the converged TLS bed.
    run = site(pki["good"], reports, imex_cmd_bind_own_address=True)
    assert run.rc == 0, run.stdout[-6000:]
    assert report(reports)["status"]["domain_state"] == "UP"
    for tray in TRAYS:
        address = address_of(simulated_rack, tray)
        assert config_values(simulated_rack, tray)["IMEX_CMD_BIND_INTERFACE_IP"] == address
        assert listeners(simulated_rack, tray, 50005) == [address], tray
    # nvidia-imex-ctl -q (local, to the bound address) and -N (every tray's command port) still work.
    check = run_playbook("validate.yml", pki["good"], extravars={"imex_report_dir": reports, "imex_validate_timeout_s": 30})
    assert check.rc == 0, check.stdout[-4000:]
    assert report(reports)["verdict"] == "healthy"


@pytest.fixture(scope="module")
def plain_again(simulated_rack, reports):
    """site.yml with the bed's own inventory again: command service unbound, imex_tls off."""
    return site(simulated_rack.inventory, reports)


def test_command_service_unbound_again(plain_again, simulated_rack, reports):
    assert plain_again.rc == 0, plain_again.stdout[-6000:]
    assert report(reports)["status"]["domain_state"] == "UP"
    for tray in TRAYS:
        assert config_values(simulated_rack, tray)["IMEX_CMD_BIND_INTERFACE_IP"] == ""
        assert listeners(simulated_rack, tray, 50005) == ["0.0.0.0"], tray


def test_tls_switched_off_again(plain_again, simulated_rack, reports):
    """imex_tls back to false turns authentication off on the trays (the key files stay)."""
    assert plain_again.rc == 0, plain_again.stdout[-6000:]
    assert report(reports)["status"]["domain_state"] == "UP"
    for tray in TRAYS:
        assert config_values(simulated_rack, tray)["IMEX_ENABLE_AUTH_ENCRYPTION"] == "0", tray
        log = simulated_rack.ssh(tray, "cat", "/var/log/nvidia-imex.log").stdout
        assert "Authentication and Encryption enabled = 0" in log, log[-2000:]


def test_unix_socket_isolation_channel_and_file_modes(plain_again, simulated_rack, reports):
    """dra_host_managed adds the command service's unix socket; an isolation channel gets exactly the
    owner, group and mode asked for; the files and directories are root-owned, 0644 and 0755."""
    assert plain_again.rc == 0, plain_again.stdout[-6000:]
    run = site(simulated_rack.inventory, reports, imex_mode="dra_host_managed",
               imex_channels=[{"channel": 5, "owner": "root", "group": "daemon", "mode": "0660"}])
    assert run.rc == 0, run.stdout[-6000:]
    assert report(reports)["status"]["domain_state"] == "UP"
    for tray in TRAYS:
        assert config_values(simulated_rack, tray)["IMEX_CMD_UNIX_DOMAIN_PATH"] == "/etc/nvidia-imex/imex_ctrl.sock"
        assert simulated_rack.ssh(tray, "stat", "-c", "%F", "/etc/nvidia-imex/imex_ctrl.sock").stdout.strip() == "socket"
        channel = simulated_rack.ssh(tray, "stat", "-c", "%F %a %U %G", "/dev/nvidia-caps-imex-channels/channel5")
        assert channel.stdout.strip() == "character special file 660 root daemon", channel.stdout + channel.stderr
        paths = ["/etc/nvidia-imex", CONFIG, "/etc/nvidia-imex/nodes_config.cfg", "/etc/modprobe.d/nvidia-imex.conf",
                 "/dev/nvidia-caps-imex-channels"]
        modes = simulated_rack.ssh(tray, "stat", "-c", "%n %a %U %G", *paths).stdout.splitlines()
        assert modes == ["/etc/nvidia-imex 755 root root", CONFIG + " 644 root root",
                         "/etc/nvidia-imex/nodes_config.cfg 644 root root",
                         "/etc/modprobe.d/nvidia-imex.conf 644 root root",
                         "/dev/nvidia-caps-imex-channels 755 root root"], modes
    # The status of this validation came through nvidia-imex-ctl with the unix socket configured.
    check = run_playbook("validate.yml", simulated_rack.inventory,
                         extravars={"imex_report_dir": reports, "imex_mode": "dra_host_managed",
                                    "imex_validate_timeout_s": 30})
    assert check.rc == 0, check.stdout[-4000:]
