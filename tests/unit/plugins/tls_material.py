# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test CAs, certificates and keys made with ``cryptography`` (as PEM text), for the unit tests of
the controller's TLS checks and of the plan that calls them."""
from __future__ import annotations

import datetime
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The tests' "now": 2026-06-01T00:00:00Z.
NOW = datetime.datetime(2026, 6, 1, tzinfo=datetime.timezone.utc).timestamp()
DAY = datetime.timedelta(days=1)


def _moment(epoch):
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)


def new_key():
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def cert_pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def make_ca(name="rack-ca", days=3650, now=NOW, key=None):
    """(certificate, key) of a self-signed CA valid from a day before ``now`` for ``days``."""
    key = key or new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_moment(now) - DAY).not_valid_after(_moment(now) + days * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def make_tray_cert(ca, ips=(), dns=(), days=365, now=NOW, not_before=None, key=None, eku=("server", "client"),
                   digital_signature=True, name="tray"):
    """(certificate, key) of a tray signed by ``ca`` ((certificate, key)), valid from a day before now for
    ``days``; eku=None leaves the extended key usage out."""
    key = key or new_key()
    ca_cert, ca_key = ca
    start = _moment(not_before) if not_before is not None else _moment(now) - DAY
    builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
               .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(_moment(now) + days * DAY))
    names = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips] + [x509.DNSName(name) for name in dns]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    builder = builder.add_extension(x509.KeyUsage(
        digital_signature=digital_signature, key_encipherment=True, content_commitment=False, data_encipherment=False,
        key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
    if eku is not None:
        usages = {"server": ExtendedKeyUsageOID.SERVER_AUTH, "client": ExtendedKeyUsageOID.CLIENT_AUTH}
        builder = builder.add_extension(x509.ExtendedKeyUsage([usages[usage] for usage in eku]), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def material(ips=(), dns=(), **kwargs):
    """{"imex_tls_ca", "imex_tls_cert", "imex_tls_key"} as PEM text: a fresh CA and a tray certificate."""
    ca = make_ca()
    cert, key = make_tray_cert(ca, ips=ips, dns=dns, **kwargs)
    return {"imex_tls_ca": cert_pem(ca[0]), "imex_tls_cert": cert_pem(cert), "imex_tls_key": key_pem(key)}
