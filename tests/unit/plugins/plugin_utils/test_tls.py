# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's checks of each tray's CA, certificate and key, on material made here."""
from __future__ import annotations

import datetime
import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from ansible_collections.rackscale.imex.plugins.plugin_utils._tls import (
    check_material,
    expected_identity,
    name_matches,
    tls_problems_and_expiry,
)
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import (
    DAY,
    NOW,
    cert_pem,
    key_pem,
    make_ca,
    make_tray_cert,
    new_key,
)

ADDRESS = "198.18.1.11"
CA = make_ca()
GOOD_CERT, GOOD_KEY = make_tray_cert(CA, ips=[ADDRESS], days=365)


def checked(cert=GOOD_CERT, key=GOOD_KEY, ca=CA, address=ADDRESS, now=NOW, **kwargs):
    return check_material("t1", address, cert_pem(ca[0]), cert_pem(cert), key_pem(key), now, **kwargs)


def test_good_material_passes_and_gives_the_expiry():
    found, problems = checked()
    assert problems == []
    assert found["not_after"] == (datetime.datetime.fromtimestamp(NOW, tz=datetime.timezone.utc) + 365 * DAY).timestamp()
    assert found["subject"] == "CN=tray"


def test_an_expired_certificate_is_refused_with_its_date():
    cert, key = make_tray_cert(CA, ips=[ADDRESS], days=-2, not_before=NOW - 30 * 86400)
    _found, problems = checked(cert, key)
    assert problems == ["tray t1: imex_tls_cert (PEM text): the certificate expired at 2026-05-30T00:00:00Z"]


def test_a_certificate_not_yet_valid_is_refused_with_its_start():
    cert, key = make_tray_cert(CA, ips=[ADDRESS], not_before=NOW + 3 * 86400)
    _found, problems = checked(cert, key)
    assert problems == ["tray t1: imex_tls_cert (PEM text): the certificate is not valid before 2026-06-04T00:00:00Z"]


@pytest.mark.parametrize(("days", "minimum", "refused"),
                         [(10, 14, True), (14.5, 14, False), (10, 0, False), (10, 11, True)])
def test_a_certificate_expiring_within_the_minimum_days_left_is_refused(days, minimum, refused):
    cert, key = make_tray_cert(CA, ips=[ADDRESS], days=days)
    _found, problems = checked(cert, key, min_days_left=minimum)
    if refused:
        assert problems == ["tray t1: imex_tls_cert (PEM text): the certificate expires at %s, in %.1f days, fewer than "
                            "imex_tls_min_days_left = %d; renew it (or lower imex_tls_min_days_left)"
                            % (datetime.datetime.fromtimestamp(NOW + days * 86400, tz=datetime.timezone.utc)
                               .strftime("%Y-%m-%dT%H:%M:%SZ"), days, minimum)]
    else:
        assert problems == []


def test_a_certificate_for_another_address_is_refused_naming_what_it_holds():
    cert, key = make_tray_cert(CA, ips=["198.18.1.12"], dns=["t2.rack1"])
    _found, problems = checked(cert, key)
    assert problems == ["tray t1: imex_tls_cert (PEM text): the certificate's subject alternative names (DNS:t2.rack1, "
                        "IP:198.18.1.12) do not include IP its IMEX address 198.18.1.11; its peers would refuse it"]


def test_a_certificate_without_subject_alternative_names_is_refused():
    cert, key = make_tray_cert(CA)
    _found, problems = checked(cert, key)
    assert problems == ["tray t1: imex_tls_cert (PEM text): the certificate's subject alternative names (none) do not "
                        "include IP its IMEX address 198.18.1.11; its peers would refuse it"]


def test_a_node_list_of_names_wants_the_name_as_dns_san():
    cert, key = make_tray_cert(CA, dns=["Tray1.Rack1.example"])
    assert checked(cert, key, address="tray1.rack1.example")[1] == []
    assert checked(cert, key, address="tray2.rack1.example")[1] == [
        "tray t1: imex_tls_cert (PEM text): the certificate's subject alternative names (DNS:Tray1.Rack1.example) do "
        "not include DNS name its IMEX address tray2.rack1.example; its peers would refuse it"]
    # An IP SAN does not stand for a name, nor a name for an address.
    assert checked(*make_tray_cert(CA, ips=[ADDRESS]), address="tray1.rack1.example")[1] != []


def test_the_target_override_is_what_the_certificate_must_name():
    assert expected_identity(ADDRESS, "imex.rack1") == ("DNS", "imex.rack1")
    cert, key = make_tray_cert(CA, dns=["imex.rack1"])
    assert checked(cert, key, target_override="imex.rack1")[1] == []
    problems = checked(target_override="imex.rack1")[1]
    assert problems == ["tray t1: imex_tls_cert (PEM text): the certificate's subject alternative names "
                        "(IP:198.18.1.11) do not include DNS name IMEX_SECURITY_TARGET_OVERRIDE imex.rack1 "
                        "(imex_tls_target_override); its peers would refuse it"]


def test_a_certificate_without_san_is_accepted_by_its_common_name_for_a_name_target():
    """As gRPC: with no subject alternative name at all, the CN stands for the name the peers check."""
    cert, key = make_tray_cert(CA, name="Tray1.Rack1.example")
    assert checked(cert, key, address="tray1.rack1.example")[1] == []
    # NVIDIA's config example: CN=localhost with IMEX_SECURITY_TARGET_OVERRIDE=localhost.
    cert, key = make_tray_cert(CA, name="localhost")
    assert checked(cert, key, target_override="localhost")[1] == []
    assert checked(cert, key, target_override="imex.rack1")[1] == [
        "tray t1: imex_tls_cert (PEM text): the certificate has no subject alternative name and its common name "
        "(localhost) is not DNS name IMEX_SECURITY_TARGET_OVERRIDE imex.rack1 (imex_tls_target_override); its peers "
        "would refuse it"]


def test_the_common_name_never_stands_for_an_address_nor_beside_a_san():
    # An address is matched against IP SANs only, even when the CN spells it.
    cert, key = make_tray_cert(CA, name=ADDRESS)
    assert checked(cert, key)[1] == [
        "tray t1: imex_tls_cert (PEM text): the certificate's subject alternative names (none) do not include IP its "
        "IMEX address 198.18.1.11; its peers would refuse it"]
    # A certificate with any SAN is judged by its SANs alone: its CN is not looked at.
    cert, key = make_tray_cert(CA, name="tray1.rack1.example", ips=[ADDRESS])
    assert checked(cert, key, address="tray1.rack1.example")[1] == [
        "tray t1: imex_tls_cert (PEM text): the certificate's subject alternative names (IP:198.18.1.11) do not "
        "include DNS name its IMEX address tray1.rack1.example; its peers would refuse it"]


@pytest.mark.parametrize(("entry", "name", "matches"), [
    ("tray1.rack1.example", "TRAY1.rack1.example.", True),
    ("tray1.rack1.example.", "tray1.rack1.example", True),
    ("*.rack1.example", "tray1.rack1.example", True),
    ("*.rack1.example", "a.tray1.rack1.example", False),
    ("*.rack1.example", "rack1.example", False),
    ("*.example", "rack1.example", False),
    ("t*.rack1.example", "tray1.rack1.example", False),
    ("*", "tray1", False),
    ("", "tray1", False),
])
def test_names_match_as_grpc_matches_them(entry, name, matches):
    assert name_matches(entry, name) is matches


def test_a_wildcard_san_or_common_name_covers_one_label():
    cert, key = make_tray_cert(CA, dns=["*.rack1.example"])
    assert checked(cert, key, address="tray1.rack1.example")[1] == []
    cert, key = make_tray_cert(CA, name="*.rack1.example")
    assert checked(cert, key, address="tray1.rack1.example")[1] == []
    assert checked(cert, key, address="tray1.rack2.example")[1] != []


def test_a_key_of_another_certificate_is_refused_and_never_quoted():
    other = new_key()
    _found, problems = checked(GOOD_CERT, other)
    assert problems == ["tray t1: imex_tls_key (PEM text) does not belong to the certificate in imex_tls_cert (PEM "
                        "text) (their public keys differ)"]
    assert "PRIVATE" not in " ".join(problems)


def test_a_certificate_from_another_ca_is_refused():
    rogue = make_ca("rogue-ca")
    cert, key = make_tray_cert(rogue, ips=[ADDRESS])
    _found, problems = checked(cert, key)
    assert problems == ["tray t1: imex_tls_cert (PEM text): the certificate (issuer CN=rogue-ca) is not signed by the CA "
                        "given in tray t1: imex_tls_ca (PEM text) (CN=rack-ca); its peers would refuse it"]


def test_a_ca_with_the_same_name_but_another_key_is_refused():
    impostor = make_ca("rack-ca")
    cert, key = make_tray_cert(impostor, ips=[ADDRESS])
    assert "is not signed by the CA given" in checked(cert, key)[1][0]


def test_a_chain_through_an_intermediate_in_the_certificate_file_verifies():
    intermediate_key = new_key()
    intermediate = make_tray_cert(CA, key=intermediate_key, eku=None, name="rack-intermediate")[0]
    leaf, leaf_key = make_tray_cert((intermediate, intermediate_key), ips=[ADDRESS])
    found, problems = check_material("t1", ADDRESS, cert_pem(CA[0]), cert_pem(leaf) + cert_pem(intermediate),
                                     key_pem(leaf_key), NOW)
    assert problems == [] and found["subject"] == "CN=tray"
    # Without the intermediate the leaf does not reach the CA.
    assert "is not signed by the CA given" in check_material(
        "t1", ADDRESS, cert_pem(CA[0]), cert_pem(leaf), key_pem(leaf_key), NOW)[1][0]


def test_a_bundle_of_cas_verifies_a_certificate_of_any_of_them():
    other = make_ca("next-ca")
    cert, key = make_tray_cert(other, ips=[ADDRESS])
    assert check_material("t1", ADDRESS, cert_pem(CA[0]) + cert_pem(other[0]), cert_pem(cert), key_pem(key), NOW)[1] == []


def test_an_expired_ca_is_refused():
    old = make_ca("old-ca", days=-1, now=NOW)
    cert, key = make_tray_cert(old, ips=[ADDRESS])
    problems = checked(cert, key, ca=old)[1]
    assert problems == ["tray t1: imex_tls_ca (PEM text): the CA CN=old-ca that signed it expired at 2026-05-31T00:00:00Z"]


def _code_signing_only(cert, key):
    """The certificate again with an extended key usage that allows neither TLS role."""
    return (x509.CertificateBuilder().subject_name(cert.subject).issuer_name(cert.issuer).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(cert.not_valid_before_utc).not_valid_after(cert.not_valid_after_utc)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ADDRESS))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .sign(CA[1], hashes.SHA256()))


@pytest.mark.parametrize(("eku", "missing"), [(("server",), "clientAuth"), (("client",), "serverAuth"),
                                              ((), "serverAuth and clientAuth")])
def test_an_extended_key_usage_without_client_or_server_auth_is_refused(eku, missing):
    cert, key = make_tray_cert(CA, ips=[ADDRESS], eku=eku or ["server"])
    if not eku:
        cert = _code_signing_only(cert, key)
    problems = checked(cert, key)[1]
    assert problems == ["tray t1: imex_tls_cert (PEM text): its extended key usage lacks %s; each daemon uses the one "
                        "certificate as server and as client (mutual TLS)" % missing]


def test_no_extended_key_usage_allows_both():
    cert, key = make_tray_cert(CA, ips=[ADDRESS], eku=None)
    assert checked(cert, key)[1] == []


def test_a_key_usage_without_digital_signature_is_refused():
    cert, key = make_tray_cert(CA, ips=[ADDRESS], digital_signature=False)
    assert checked(cert, key)[1] == [
        "tray t1: imex_tls_cert (PEM text): its key usage does not allow digitalSignature, which TLS client and server "
        "authentication need"]


def test_files_on_the_controller_are_named_by_path():
    files = {"/pki/ca.crt": cert_pem(CA[0]).encode(), "/pki/t1.crt": cert_pem(GOOD_CERT).encode()}

    def read(path):
        if path not in files:
            raise FileNotFoundError(2, "No such file or directory")
        return files[path]

    found, problems = check_material("t1", ADDRESS, "/pki/ca.crt", "/pki/t1.crt", "/pki/t1.key", NOW, read_text=read)
    assert problems == ["tray t1: imex_tls_key (/pki/t1.key) cannot be read on the controller: No such file or directory"]
    assert found["subject"] == "CN=tray"
    cert, key = make_tray_cert(CA, ips=["198.18.9.9"])
    files.update({"/pki/t1.crt": cert_pem(cert).encode(), "/pki/t1.key": key_pem(key).encode()})
    assert check_material("t1", ADDRESS, "/pki/ca.crt", "/pki/t1.crt", "/pki/t1.key", NOW, read_text=read)[1][0].startswith(
        "tray t1: imex_tls_cert (/pki/t1.crt): the certificate's subject alternative names (IP:198.18.9.9)")


def test_garbage_and_an_encrypted_key_are_refused_without_quoting_them():
    encrypted = GOOD_KEY.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.BestAvailableEncryption(b"secret")).decode()
    found, problems = check_material("t1", ADDRESS, "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n",
                                     cert_pem(GOOD_CERT), encrypted, NOW)
    assert problems == ["tray t1: imex_tls_ca (PEM text) holds no PEM certificate",
                        "tray t1: imex_tls_key (PEM text) is an encrypted private key; the daemon reads it without a "
                        "passphrase"]
    assert found is not None
    assert check_material("t1", ADDRESS, cert_pem(CA[0]), "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----",
                          key_pem(GOOD_KEY), NOW) == (None, ["tray t1: imex_tls_cert (PEM text) holds no PEM certificate"])


def test_every_tray_is_checked_with_its_own_minimum_and_override():
    soon, soon_key = make_tray_cert(CA, ips=["198.18.1.12"], days=5)
    trays = [
        ("t1", ADDRESS, {"imex_tls_ca": cert_pem(CA[0]), "imex_tls_cert": cert_pem(GOOD_CERT),
                         "imex_tls_key": key_pem(GOOD_KEY), "imex_tls_min_days_left": 14}),
        ("t2", "198.18.1.12", {"imex_tls_ca": cert_pem(CA[0]), "imex_tls_cert": cert_pem(soon),
                               "imex_tls_key": key_pem(soon_key), "imex_tls_min_days_left": 3}),
        ("t3", "198.18.1.12", {"imex_tls_ca": cert_pem(CA[0]), "imex_tls_cert": cert_pem(soon),
                               "imex_tls_key": key_pem(soon_key)}),
    ]
    expiry, problems = tls_problems_and_expiry(trays, NOW)
    assert sorted(expiry) == ["t1", "t2", "t3"]
    assert expiry["t2"]["not_after"] == NOW + 5 * 86400
    assert [problem.split(":")[0] for problem in problems] == ["tray t3"]
    assert "imex_tls_min_days_left = 14" in problems[0]
