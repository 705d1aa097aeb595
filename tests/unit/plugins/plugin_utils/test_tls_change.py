# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A TLS change across a running domain: made by reload only when no tray can be cut off its peers on the
way (a CA rotation in two runs), else restart-class. Real CAs and certificates, made here."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils._tls import (
    TLS_RELOAD,
    TLS_RESTART,
    TLS_UNCHANGED,
    ca_bundle_change,
    fingerprint,
    held_material,
    tls_change_class,
)
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import cert_pem, make_ca, make_tray_cert

OLD_CA, NEW_CA = make_ca("rack-ca-2025"), make_ca("rack-ca-2026")
TRAYS = ("t1", "t2", "t3")
ADDRESSES = {"t1": "198.18.1.11", "t2": "198.18.1.12", "t3": "198.18.1.13"}
OLD_LEAVES = {tray: make_tray_cert(OLD_CA, ips=[ADDRESSES[tray]])[0] for tray in TRAYS}
NEW_LEAVES = {tray: make_tray_cert(NEW_CA, ips=[ADDRESSES[tray]])[0] for tray in TRAYS}
OLD, NEW = fingerprint(OLD_CA[0]), fingerprint(NEW_CA[0])


def held(cas, leaf):
    """What imex_tray_info reports of a tray's ca.crt and tray.crt."""
    return {"ca": [fingerprint(ca[0]) for ca in cas], "cert": [fingerprint(leaf)]}


def options(cas, leaf):
    return {"imex_tls_ca": "".join(cert_pem(ca[0]) for ca in cas), "imex_tls_cert": cert_pem(leaf)}


def domain(held_cas, held_leaves, new_cas, new_leaves, left_out=()):
    return [(tray, held(held_cas, held_leaves[tray]),
             None if tray in left_out else options(new_cas, new_leaves[tray])) for tray in TRAYS]


@pytest.mark.parametrize(("held_prints", "new_prints", "kind"), [
    (["a"], ["a"], "unchanged"),
    (["a", "b"], ["b", "a"], "unchanged"),
    (["a"], ["a", "b"], "extended"),
    (["a"], ["b"], "replaced"),
    (["a", "b"], ["b", "c"], "narrowed"),
    (None, ["a"], "unknown"),
])
def test_a_ca_bundle_change_is_told_from_the_fingerprints(held_prints, new_prints, kind):
    assert ca_bundle_change(held_prints, new_prints) == kind


def test_the_same_material_is_unchanged_and_a_leaf_renewed_by_the_same_ca_reloads():
    assert tls_change_class(domain([OLD_CA], OLD_LEAVES, [OLD_CA], OLD_LEAVES)) == (TLS_UNCHANGED, [])
    renewed = dict(OLD_LEAVES, t2=make_tray_cert(OLD_CA, ips=[ADDRESSES["t2"]])[0])
    assert tls_change_class(domain([OLD_CA], OLD_LEAVES, [OLD_CA], renewed)) == (TLS_RELOAD, [])


def test_a_ca_rotation_in_two_runs_reloads_each_time_and_the_old_ca_can_then_go():
    # Run 1: the bundle with both CAs, the certificates unchanged.
    assert tls_change_class(domain([OLD_CA], OLD_LEAVES, [OLD_CA, NEW_CA], OLD_LEAVES)) == (TLS_RELOAD, [])
    # Run 2: the certificates signed by the new CA, every tray trusting both already.
    assert tls_change_class(domain([OLD_CA, NEW_CA], OLD_LEAVES, [OLD_CA, NEW_CA], NEW_LEAVES)) == (TLS_RELOAD, [])
    # Later: the old CA dropped, no certificate signed by it left.
    assert tls_change_class(domain([OLD_CA, NEW_CA], NEW_LEAVES, [NEW_CA], NEW_LEAVES)) == (TLS_RELOAD, [])


def test_a_ca_that_replaces_the_old_one_outright_is_restart_class():
    kind, why = tls_change_class(domain([OLD_CA], OLD_LEAVES, [NEW_CA], NEW_LEAVES))
    assert kind == TLS_RESTART
    assert why == ["tray %s: the new CA bundle (%s) replaces the CA it holds (%s) outright; peers that have not "
                   "reloaded would refuse it and it them" % (tray, NEW[:16], OLD[:16]) for tray in TRAYS]


def test_both_cas_and_new_certificates_in_one_run_are_restart_class():
    """A tray that reloaded first presents a certificate of the new CA to peers that trust only the old one."""
    kind, why = tls_change_class(domain([OLD_CA], OLD_LEAVES, [OLD_CA, NEW_CA], NEW_LEAVES))
    assert kind == TLS_RESTART
    assert why[0] == ("tray t1: its new certificate is signed by a CA (%s) that the CA file of t2, t3 does not hold "
                      "yet; reload a CA bundle with that CA on every tray first, then the certificates" % NEW[:16])
    assert len(why) == 3


def test_a_tray_left_out_of_the_run_keeps_what_it_holds_and_is_judged_so():
    # Run 2 with t3 left out: it still trusts both CAs, so the others' new certificates reach it.
    assert tls_change_class(domain([OLD_CA, NEW_CA], OLD_LEAVES, [OLD_CA, NEW_CA], NEW_LEAVES,
                                   left_out=["t3"])) == (TLS_RELOAD, [])
    # Dropping the old CA while t3 (left out) still presents a certificate of it.
    kind, why = tls_change_class(domain([OLD_CA, NEW_CA], dict(NEW_LEAVES, t3=OLD_LEAVES["t3"]), [NEW_CA],
                                        dict(NEW_LEAVES, t3=OLD_LEAVES["t3"]), left_out=["t3"]))
    assert kind == TLS_RESTART
    assert why[0] == ("tray t1: the new CA bundle drops a CA it holds (%s) while t3 presents a certificate this run "
                      "cannot show to be signed by a CA kept (it changes in this run, or is not written by it)" % OLD[:16])


def test_dropping_the_ca_that_signs_a_peers_certificate_is_restart_class():
    leaves = dict(NEW_LEAVES, t2=OLD_LEAVES["t2"])
    trays = [(tray, held([OLD_CA, NEW_CA], leaves[tray]),
              options([OLD_CA, NEW_CA] if tray == "t2" else [NEW_CA], leaves[tray])) for tray in TRAYS]
    kind, why = tls_change_class(trays)
    assert kind == TLS_RESTART
    assert why == ["tray t1: the new CA bundle drops a CA it holds (%s) that signs the certificate of t2" % OLD[:16],
                   "tray t3: the new CA bundle drops a CA it holds (%s) that signs the certificate of t2" % OLD[:16]]


def test_a_ca_file_the_read_could_not_tell_and_unreadable_material_are_restart_class():
    trays = domain([OLD_CA], OLD_LEAVES, [OLD_CA, NEW_CA], OLD_LEAVES)
    trays[1] = ("t2", {"ca": None, "cert": None}, trays[1][2])
    kind, why = tls_change_class(trays)
    assert kind == TLS_RESTART and why == [
        "tray t2: the CA file it holds could not be read, so the new CA bundle cannot be compared with it"]
    trays = domain([OLD_CA], OLD_LEAVES, [OLD_CA], OLD_LEAVES)
    trays[0] = ("t1", trays[0][1], {"imex_tls_ca": "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n",
                                    "imex_tls_cert": cert_pem(OLD_LEAVES["t1"])})
    assert tls_change_class(trays) == (TLS_RESTART, ["tray t1: imex_tls_ca (PEM text) holds no PEM certificate"])


def test_a_tray_the_run_did_not_read_is_taken_to_hold_the_bundle_all_others_hold():
    trays = domain([OLD_CA], OLD_LEAVES, [OLD_CA, NEW_CA], OLD_LEAVES, left_out=["t3"])
    trays[2] = ("t3", None, None)
    assert tls_change_class(trays) == (TLS_RELOAD, [])
    # New certificates of the new CA in a run that leaves t3 out: t3 trusts only the old CA.
    trays = domain([OLD_CA, NEW_CA], OLD_LEAVES, [OLD_CA, NEW_CA], NEW_LEAVES, left_out=["t3"])
    trays[2] = ("t3", None, None)
    assert tls_change_class(trays) == (TLS_RELOAD, [])
    trays = domain([OLD_CA], OLD_LEAVES, [OLD_CA, NEW_CA], NEW_LEAVES, left_out=["t3"])
    trays[2] = ("t3", None, None)
    kind, why = tls_change_class(trays)
    assert kind == TLS_RESTART and "the CA file of t2, t3 does not hold yet" in why[0]
    # Read trays that disagree leave an unread one unknown: restart-class for a new certificate.
    trays = domain([OLD_CA, NEW_CA], OLD_LEAVES, [OLD_CA, NEW_CA], NEW_LEAVES, left_out=["t3"])
    trays[1] = ("t2", held([NEW_CA, OLD_CA, make_ca("third")], OLD_LEAVES["t2"]), trays[1][2])
    trays[2] = ("t3", None, None)
    assert tls_change_class(trays)[0] == TLS_RESTART


def test_what_the_tray_read_reports_is_what_the_controller_compares(tmp_path):
    """imex_tray_info's fingerprints (the tray's standard library) equal the controller's (cryptography)."""
    from ansible_collections.rackscale.imex.plugins.module_utils import _tls_reload

    bundle = tmp_path / "ca.crt"
    bundle.write_text(cert_pem(OLD_CA[0]) + cert_pem(NEW_CA[0]))
    leaf = tmp_path / "tray.crt"
    leaf.write_text(cert_pem(NEW_LEAVES["t1"]))
    files = {str(bundle): {"exists": True, "sha256": _tls_reload.file_fingerprints(str(bundle)), "error": None},
             str(leaf): {"exists": True, "sha256": _tls_reload.file_fingerprints(str(leaf)), "error": None}}
    assert held_material(files, str(bundle), str(leaf)) == held([OLD_CA, NEW_CA], NEW_LEAVES["t1"])
    assert held_material(None, str(bundle), str(leaf)) == {"ca": None, "cert": None}
