# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan's CA decisions: a CA bundle that keeps the CA the trays hold is reloaded, also under work; a CA that
replaces it outright is restart-class, so a busy domain refuses it and an idle whole domain restarts for it."""
from __future__ import annotations

import time

from cryptography import x509

from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.plugins.plugin_utils._tls import fingerprint
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import TLS_DIR, TLS_PEM, planned, refused, wrote
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan_tls_reload import BUSY, RACK, TLS
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import cert_pem, key_pem, make_ca, make_tray_cert

ADDRESSES = ["198.18.%d.%d" % (group, 11 + index) for group in range(1, 5) for index in range(8)]
NEW_CA = make_ca("rack-ca-2026", now=time.time())
NEW_CERT, NEW_KEY = make_tray_cert(NEW_CA, ips=ADDRESSES, now=time.time(), days=3650)
BOTH_CAS = TLS_PEM["imex_tls_ca"] + cert_pem(NEW_CA[0])
CA_PATH, CERT_PATH = TLS_DIR + "/ca.crt", TLS_DIR + "/tray.crt"


def prints(pem):
    return [fingerprint(certificate) for certificate in x509.load_pem_x509_certificates(pem.encode())]


def holding(ca_pem, cert_pem_text, **extra):
    """read_of keyword arguments: the tray holds these CA and certificate files."""
    return dict(extra, certificate_files={CA_PATH: {"exists": True, "sha256": prints(ca_pem), "error": None},
                                          CERT_PATH: {"exists": True, "sha256": prints(cert_pem_text), "error": None}})


def tls_planned(reads=None, every=None):
    return planned(domains=RACK, every=TLS if every is None else every, reads=reads)


NEW_LEAVES = dict(imex_tls_cert=cert_pem(NEW_CERT), imex_tls_key=key_pem(NEW_KEY))


def test_a_ca_that_replaces_the_old_one_outright_is_refused_on_a_busy_domain():
    every = dict(TLS, imex_tls_ca=cert_pem(NEW_CA[0]), **NEW_LEAVES)
    _model, _options, plan = tls_planned(reads={"t2": BUSY}, every=every)
    assert [plan["trays"][tray]["tls_reload_ok"] for tray in RACK["rack1"]] == [False] * 3
    # Busy: the writes are predictions, nothing lands on a tray.
    assert all(plan["trays"][tray]["tls_predicted"] for tray in RACK["rack1"])
    problems = refused(run_plan.restart.restart, plan, ["rack1"], {tray: wrote(tls=True) for tray in RACK["rack1"]}, {})
    assert "domain rack1 is not restarted: work runs on it (t2: pid 4242 python3)" in problems[0]
    assert "Its TLS change cannot be made by reload: tray t1: the new CA bundle" in problems[0]
    assert "replaces the CA it holds" in problems[0]


def test_a_ca_that_replaces_the_old_one_outright_restarts_an_idle_whole_domain():
    every = dict(TLS, imex_tls_ca=cert_pem(NEW_CA[0]), **NEW_LEAVES)
    _model, _options, plan = tls_planned(every=every)
    after = run_plan.restart.restart(plan, ["rack1"], {tray: wrote(tls=True) for tray in RACK["rack1"]}, {})
    assert after["domains"]["rack1"]["restart"] is True and after["domains"]["rack1"]["reload"] == {}


def test_a_ca_rotation_in_two_runs_is_reloaded_under_work():
    # Run 1: the bundle of both CAs, the certificates unchanged.
    _model, _options, plan = tls_planned(reads={"t2": BUSY}, every=dict(TLS, imex_tls_ca=BOTH_CAS))
    assert [plan["trays"][tray]["tls_reload_ok"] for tray in RACK["rack1"]] == [True] * 3
    after = run_plan.restart.restart(plan, ["rack1"], {tray: wrote(tls=True) for tray in RACK["rack1"]}, {})
    assert after["domains"]["rack1"]["restart"] is False and sorted(after["domains"]["rack1"]["reload"]) == RACK["rack1"]
    # Run 2: every tray holds both CAs; the certificates of the new CA.
    held = holding(BOTH_CAS, TLS_PEM["imex_tls_cert"])
    _model, _options, plan = tls_planned(reads={"t1": held, "t2": dict(held, **BUSY), "t3": held},
                                         every=dict(TLS, imex_tls_ca=BOTH_CAS, **NEW_LEAVES))
    assert [plan["trays"][tray]["tls_reload_ok"] for tray in RACK["rack1"]] == [True] * 3


def test_both_cas_and_the_new_certificates_in_one_run_are_refused_under_work():
    _model, _options, plan = tls_planned(reads={"t2": BUSY}, every=dict(TLS, imex_tls_ca=BOTH_CAS, **NEW_LEAVES))
    assert plan["domains"]["rack1"]["tls_restart_why"][0].startswith(
        "tray t1: its new certificate is signed by a CA (%s) that the CA file of t2, t3 does not hold yet"
        % prints(cert_pem(NEW_CA[0]))[0][:16])
