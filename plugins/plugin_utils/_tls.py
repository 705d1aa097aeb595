# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""The TLS material of each tray, checked on the controller before anything is written.

A daemon with a certificate its peers reject does not fail to start: its links stay down and the
domain is DEGRADED, after a restart or reload that cut the domain's work. So each tray's CA,
certificate and key are read here (PEM text, or a file on the controller) and refused with the tray,
the option, where it came from and the value at fault. Key material is never quoted.

Uses ``cryptography``, which ansible-core itself requires. Nothing here reads the clock: ``now``
(epoch seconds) is an argument.
"""
from __future__ import annotations

import datetime
import ipaddress

from ansible_collections.rackscale.imex.plugins.plugin_utils._options import is_pem

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - ansible-core depends on cryptography
    HAS_CRYPTOGRAPHY = False

# The chain a tray's certificate file may carry (leaf, intermediates) before a CA of the CA file.
MAX_CHAIN = 8
SECONDS_PER_DAY = 86400


class MaterialError(ValueError):
    """TLS material that cannot be read or parsed; the message names where it came from, never its content."""


def _where(option, value):
    """How a refusal names the material: the controller path, or that it was PEM text."""
    if is_pem(value):
        return "%s (PEM text)" % option
    return "%s (%s)" % (option, value)


def _text(option, value, read_text):
    if is_pem(value):
        return str(value).encode("utf-8")
    try:
        return read_text(value)
    except OSError as error:
        raise MaterialError("%s cannot be read on the controller: %s" % (_where(option, value), error.strerror)) from None


def _read_bytes(path):
    with open(path, "rb") as handle:
        return handle.read()


def _certificates(option, value, read_text):
    data = _text(option, value, read_text)
    try:
        found = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise MaterialError("%s holds no PEM certificate" % _where(option, value)) from None
    return found


def _private_key(option, value, read_text):
    data = _text(option, value, read_text)
    try:
        return serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise MaterialError("%s is an encrypted private key; the daemon reads it without a passphrase"
                            % _where(option, value)) from None
    except ValueError:
        raise MaterialError("%s holds no PEM private key" % _where(option, value)) from None


def _utc(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _spki(public_key):
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def expected_identity(address, target_override=""):
    """(kind, value) the peers check a tray's certificate against: IMEX_SECURITY_TARGET_OVERRIDE when
    set (the daemons then check that name for every peer), else the tray's address in the node list."""
    wanted = target_override or address
    try:
        return "IP", ipaddress.ip_address(wanted)
    except ValueError:
        return "DNS", str(wanted).rstrip(".").lower()


def san_entries(certificate):
    """['DNS:name', 'IP:address'] of a certificate's subject alternative names ([] without them)."""
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return ["DNS:%s" % name for name in names.get_values_for_type(x509.DNSName)] + \
        ["IP:%s" % address for address in names.get_values_for_type(x509.IPAddress)]


def _has_any_san(certificate):
    """Whether the certificate names anything in its subject alternative names (DNS, IP, URI, e-mail)."""
    try:
        return len(certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value) > 0
    except x509.ExtensionNotFound:
        return False


def common_names(certificate):
    """The subject's common names (CN), as text."""
    return [str(attribute.value) for attribute in certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]


def name_matches(entry, name):
    """Whether a certificate's DNS entry (a SAN, or the CN of a certificate without SAN) matches the target
    ``name`` as gRPC matches them: case-insensitive, a trailing dot ignored, and a wildcard ``*.`` only as
    the whole leftmost label, standing for exactly one label of a name that keeps at least two after it."""
    entry, name = str(entry).lower(), str(name).lower().rstrip(".")
    if entry.endswith("."):
        entry = entry[:-1]
    if not entry or not name:
        return False
    if entry == name:
        return True
    if not entry.startswith("*.") or len(entry) < 3:
        return False
    _label, dot, parent = name.partition(".")
    if not dot or not parent or "." not in parent.strip("."):
        return False
    return entry[2:] == parent


def _san_problem(certificate, where, address, target_override):
    kind, wanted = expected_identity(address, target_override)
    entries = san_entries(certificate)
    if kind == "IP":
        found = any(entry == "IP:%s" % wanted for entry in entries)
    else:
        found = any(name_matches(entry[len("DNS:"):], wanted) for entry in entries if entry.startswith("DNS:"))
        # gRPC checks the subject's CN only when the certificate has no subject alternative name at all, and
        # never against an address (NVIDIA's config example: CN=localhost with the target override).
        if not found and not _has_any_san(certificate):
            found = any(name_matches(cn, wanted) for cn in common_names(certificate))
    if found:
        return None
    what = ("IMEX_SECURITY_TARGET_OVERRIDE %s (imex_tls_target_override)" % wanted if target_override
            else "its IMEX address %s" % wanted)
    if kind == "DNS" and not _has_any_san(certificate):
        return ("%s: the certificate has no subject alternative name and its common name (%s) is not %s %s; its "
                "peers would refuse it" % (where, ", ".join(common_names(certificate)) or "none", "DNS name", what))
    return ("%s: the certificate's subject alternative names (%s) do not include %s %s; its peers would refuse it"
            % (where, ", ".join(entries) or "none", "IP" if kind == "IP" else "DNS name", what))


def _usage_problems(certificate, where):
    problems = []
    try:
        usage = certificate.extensions.get_extension_for_class(x509.KeyUsage).value
        if not usage.digital_signature:
            problems.append("%s: its key usage does not allow digitalSignature, which TLS client and server "
                            "authentication need" % where)
    except x509.ExtensionNotFound:
        pass
    try:
        extended = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        if ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in extended:
            missing = [name for name, oid in (("serverAuth", ExtendedKeyUsageOID.SERVER_AUTH),
                                              ("clientAuth", ExtendedKeyUsageOID.CLIENT_AUTH))
                       if oid not in extended]
            if missing:
                problems.append("%s: its extended key usage lacks %s; each daemon uses the one certificate as "
                                "server and as client (mutual TLS)" % (where, " and ".join(missing)))
    except x509.ExtensionNotFound:
        pass
    return problems


def _issued_by(certificate, issuer):
    try:
        certificate.verify_directly_issued_by(issuer)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def issuing_authority(chain, authorities):
    """The CA of ``authorities`` the certificate chain[0] leads to (through the intermediates after it in
    its file), or None."""
    current, rest = chain[0], list(chain[1:])
    for _depth in range(MAX_CHAIN):
        for authority in authorities:
            if _issued_by(current, authority):
                return authority
        step = next((candidate for candidate in rest if _issued_by(current, candidate)), None)
        if step is None:
            return None
        rest.remove(step)
        current = step
    return None


def _chain_problem(chain, authorities, where, ca_where, moment):
    """None when the certificate (and the intermediates after it in its file) leads to a CA of the CA file."""
    authority = issuing_authority(chain, authorities)
    if authority is not None:
        if authority.not_valid_after_utc < moment:
            return "%s: the CA %s that signed it expired at %s" % (
                ca_where, authority.subject.rfc4514_string(), _utc(authority.not_valid_after_utc))
        return None
    return "%s: the certificate (issuer %s) is not signed by the CA given in %s (%s); its peers would refuse it" % (
        where, chain[0].issuer.rfc4514_string(), ca_where,
        "; ".join(authority.subject.rfc4514_string() for authority in authorities))


def check_material(tray, address, ca, cert, key, now, min_days_left=14, target_override="", read_text=_read_bytes):
    """({"not_after": epoch seconds, "subject": text} or None, [problem]) of one tray's TLS material.

    ca, cert, key: the values of imex_tls_ca, imex_tls_cert and imex_tls_key (PEM text or a controller
    path); address: the tray's address in its domain's node list; now: epoch seconds.
    """
    if not HAS_CRYPTOGRAPHY:  # pragma: no cover
        return None, ["tray %s: the Python package cryptography is missing on the controller; the TLS material "
                      "cannot be checked" % tray]
    where = {"imex_tls_ca": _where("imex_tls_ca", ca), "imex_tls_cert": _where("imex_tls_cert", cert),
             "imex_tls_key": _where("imex_tls_key", key)}
    problems, loaded = [], {}
    for option, value, loader in (("imex_tls_ca", ca, _certificates), ("imex_tls_cert", cert, _certificates),
                                  ("imex_tls_key", key, _private_key)):
        try:
            loaded[option] = loader(option, value, read_text)
        except MaterialError as error:
            problems.append("tray %s: %s" % (tray, error))
    if "imex_tls_cert" not in loaded:
        return None, problems
    chain = loaded["imex_tls_cert"]
    leaf = chain[0]
    moment = datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc)
    cert_where = "tray %s: %s" % (tray, where["imex_tls_cert"])
    found = {"not_after": leaf.not_valid_after_utc.timestamp(), "subject": leaf.subject.rfc4514_string()}
    if leaf.not_valid_before_utc > moment:
        problems.append("%s: the certificate is not valid before %s" % (cert_where, _utc(leaf.not_valid_before_utc)))
    if leaf.not_valid_after_utc <= moment:
        problems.append("%s: the certificate expired at %s" % (cert_where, _utc(leaf.not_valid_after_utc)))
    else:
        left = (leaf.not_valid_after_utc - moment).total_seconds() / SECONDS_PER_DAY
        if left < min_days_left:
            problems.append("%s: the certificate expires at %s, in %.1f days, fewer than imex_tls_min_days_left = %d; "
                            "renew it (or lower imex_tls_min_days_left)"
                            % (cert_where, _utc(leaf.not_valid_after_utc), left, min_days_left))
    problem = _san_problem(leaf, cert_where, address, target_override)
    if problem:
        problems.append(problem)
    problems.extend(_usage_problems(leaf, cert_where))
    if "imex_tls_key" in loaded and _spki(loaded["imex_tls_key"].public_key()) != _spki(leaf.public_key()):
        problems.append("tray %s: %s does not belong to the certificate in %s (their public keys differ)"
                        % (tray, where["imex_tls_key"], where["imex_tls_cert"]))
    if "imex_tls_ca" in loaded:
        problem = _chain_problem(chain, loaded["imex_tls_ca"], cert_where, "tray %s: %s" % (tray, where["imex_tls_ca"]),
                                 moment)
        if problem:
            problems.append(problem)
    return found, problems


def tls_problems_and_expiry(trays, now, read_text=_read_bytes):
    """({tray: {"not_after", "subject"}}, [problem]) for ``trays``: (tray, address, options) with TLS on."""
    expiry, problems = {}, []
    for tray, address, options in trays:
        found, tray_problems = check_material(
            tray, address, options.get("imex_tls_ca"), options.get("imex_tls_cert"), options.get("imex_tls_key"),
            now, min_days_left=int(options.get("imex_tls_min_days_left", 14)),
            target_override=options.get("imex_tls_target_override") or "", read_text=read_text)
        if found:
            expiry[tray] = found
        problems.extend(tray_problems)
    return expiry, problems


# ---------------------------------------------------------------------------------------------------
# A TLS change across a running domain: reloaded in place, or restart-class.

TLS_UNCHANGED = "unchanged"
TLS_RELOAD = "reload"
TLS_RESTART = "restart"


def fingerprint(certificate):
    """SHA-256 of a certificate's DER encoding, lower-case hex: what imex_tray_info reports of a tray's files."""
    return certificate.fingerprint(hashes.SHA256()).hex()


def _short(fingerprints):
    return ", ".join(value[:16] for value in fingerprints) or "none"


def ca_bundle_change(held, new):
    """How a CA bundle changes, from the SHA-256 fingerprints of the CAs a tray holds (None when its read
    could not tell) to those of the new bundle: "unchanged" (the same CAs, in any order), "extended"
    (every CA held is kept, some are added), "replaced" (no CA held is kept), "narrowed" (some CA held is
    dropped, some kept), or "unknown"."""
    if held is None:
        return "unknown"
    held, new = set(held), set(new)
    if held == new:
        return "unchanged"
    if held <= new:
        return "extended"
    if not held & new:
        return "replaced"
    return "narrowed"


def held_material(certificate_files, ca_path, cert_path):
    """{"ca", "cert"}: the fingerprints imex_tray_info's certificate_files reports for the tray's CA file and
    certificate file, None for each it could not tell (or did not read)."""
    files = certificate_files or {}
    return {"ca": (files.get(ca_path) or {}).get("sha256"), "cert": (files.get(cert_path) or {}).get("sha256")}


def tls_change_class(trays, read_text=_read_bytes):
    """(TLS_UNCHANGED | TLS_RELOAD | TLS_RESTART, [why]) of a TLS change across one domain.

    A reload (SIGUSR1) puts new TLS files in force tray by tray: for a while, and for good on trays the
    run leaves out, trays on their new material talk to trays on their old one, each peer checking the
    other against its own CA file. So the change is made by reload only when every tray keeps trusting
    every certificate its peers can present, old or new:
      - the new certificate of each tray is signed by a CA that every tray's CA file holds now (or it is
        the certificate the tray holds already);
      - the new CA bundle of each tray trusts every certificate its peers present now and will present:
        it keeps every CA the tray held (a bundle that adds the new CA beside the old one), or the peers'
        certificates do not change and chain to a CA it keeps.
    Otherwise the change is restart-class: every daemon of the domain loads the new material together,
    which a busy or partly run domain refuses. A new CA that replaces the old one outright is always so;
    rotate a CA in two runs (the bundle with both CAs, then the leaves).

    trays: [(tray, held, options)] for every tray of the domain in service. held: {"ca": [...],
    "cert": [...]} (held_material), the SHA-256 fingerprints of the certificates of the tray's CA file
    and certificate file (None where the read could not tell); held None for a tray the run did not
    read (left out of it), taken to hold the CA bundle every tray read holds when they all agree, and an
    unknown certificate. options: the tray's imex_tls_ca and imex_tls_cert (PEM text or controller
    path), or None for a tray whose files this run does not write (left out: it keeps what it holds).
    The material itself is checked by check_material; material that cannot be read counts as restart-class.
    """
    read_bundles = {tuple(sorted(held.get("ca") or ())) if held.get("ca") is not None else None
                    for _tray, held, _options in trays if held is not None}
    common = list(next(iter(read_bundles))) if len(read_bundles) == 1 and None not in read_bundles else None
    trays = [(tray, {"ca": common, "cert": None} if held is None else held, options) for tray, held, options in trays]
    problems, new = [], {}
    for tray, held, options in trays:
        held = held or {}
        if options is None:
            continue
        try:
            authorities = _certificates("imex_tls_ca", options.get("imex_tls_ca"), read_text)
            chain = _certificates("imex_tls_cert", options.get("imex_tls_cert"), read_text)
        except MaterialError as error:
            problems.append("tray %s: %s" % (tray, error))
            continue
        new[tray] = {"ca": [fingerprint(authority) for authority in authorities], "authorities": authorities,
                     "chain": chain, "cert": fingerprint(chain[0]), "issuer": issuing_authority(chain, authorities)}
    if problems:
        return TLS_RESTART, problems
    held_of = {tray: (held or {}) for tray, held, _options in trays}
    changed = False
    for tray, entry in sorted(new.items()):
        held = held_of[tray]
        held_cert = (held.get("cert") or [None])[0]
        kind = ca_bundle_change(held.get("ca"), entry["ca"])
        changed = changed or kind != "unchanged" or held_cert != entry["cert"]
        if kind == "unknown":
            problems.append("tray %s: the CA file it holds could not be read, so the new CA bundle cannot be compared "
                            "with it" % tray)
            continue
        if kind == "replaced":
            problems.append("tray %s: the new CA bundle (%s) replaces the CA it holds (%s) outright; peers that have not "
                            "reloaded would refuse it and it them" % (tray, _short(entry["ca"]), _short(held["ca"])))
            continue
        # Its new certificate, as every peer checks it against the CA file it holds now.
        if held_cert != entry["cert"]:
            issuer = entry["issuer"]
            issuer_print = fingerprint(issuer) if issuer is not None else None
            refusing = sorted(peer for peer, peer_held in held_of.items()
                              if peer != tray and issuer_print not in (peer_held.get("ca") or []))
            if refusing:
                problems.append("tray %s: its new certificate is signed by a CA (%s) that the CA file of %s does not "
                                "hold yet; reload a CA bundle with that CA on every tray first, then the certificates"
                                % (tray, _short([issuer_print] if issuer_print else []), ", ".join(refusing)))
        # Its new CA bundle, as it checks its peers' certificates, old and new.
        if kind == "narrowed":
            dropped = _short(sorted(set(held["ca"]) - set(entry["ca"])))
            unproven, unsigned = [], []
            for peer, peer_held in sorted(held_of.items()):
                if peer == tray:
                    continue
                peer_new = new.get(peer)
                if peer_new is None or (peer_held.get("cert") or [None])[0] != peer_new["cert"]:
                    unproven.append(peer)
                elif issuing_authority(peer_new["chain"], entry["authorities"]) is None:
                    unsigned.append(peer)
            if unproven:
                problems.append("tray %s: the new CA bundle drops a CA it holds (%s) while %s present%s a certificate "
                                "this run cannot show to be signed by a CA kept (it changes in this run, or is not "
                                "written by it)" % (tray, dropped, ", ".join(unproven), "s" if len(unproven) == 1 else ""))
            if unsigned:
                problems.append("tray %s: the new CA bundle drops a CA it holds (%s) that signs the certificate of %s"
                                % (tray, dropped, ", ".join(unsigned)))
    if problems:
        return TLS_RESTART, problems
    return (TLS_RELOAD if changed else TLS_UNCHANGED), []
