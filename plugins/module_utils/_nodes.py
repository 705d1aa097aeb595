# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Node entries of an IMEX domain: validation, nodes_config.cfg rendering/parsing, local detection.

The daemon gives each node the 0-based line position of its entry as its node index, and refuses
to start unless one entry is an address of the host it runs on. Every node of the domain must hold
the same list in the same order, so validation errors always name the position of the entry.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import socket

from ansible_collections.rackscale.imex.plugins.module_utils._text import ProblemsError

FAMILY_IPV4 = "ipv4"
FAMILY_IPV6 = "ipv6"
FAMILY_HOSTNAME = "hostname"
# The daemon's node list, and its size limit: the 18 compute trays of an NVL72 rack.
NODES_CONFIG_PATH = "/etc/nvidia-imex/nodes_config.cfg"
MAX_NODES = 18

# RFC 1123 label: letters, digits and hyphens, 1-63 characters, no hyphen at either end.
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_MAX_HOSTNAME = 253
# Characters that have a special meaning in a shell or a config file; named in the error so the
# operator sees what slipped into the inventory.
_SHELL_META = set("|&;<>()$`\\\"' *?[]#~=%!{},^")


class NodesError(ProblemsError):
    """The node list is invalid; the message lists every bad entry with its position.

    ``problems`` holds one message per problem; str() joins them with '; '.
    """


class NodeEntry(object):
    """A validated entry: its position, text as written, address family and identity key."""

    __slots__ = ("index", "text", "family", "key")

    def __init__(self, index, text, family, key):
        self.index = index
        self.text = text
        self.family = family
        self.key = key

    def __repr__(self):
        return "NodeEntry(%d, %r, %s)" % (self.index, self.text, self.family)


def classify(entry):
    """Return (family, key) for one entry, or raise ValueError with the reason it is invalid.

    ``key`` identifies the node independent of spelling: the address object for IPs (so
    ``2001:db8::1`` and ``2001:0db8:0:0::1`` are the same node) and the lower-cased name for
    host names (DNS names are case-insensitive).
    """
    if not isinstance(entry, str):
        raise ValueError("is not a string")
    if entry == "":
        raise ValueError("is empty")
    if any(char.isspace() for char in entry):
        raise ValueError("contains whitespace")
    if "/" in entry:
        raise ValueError("contains '/' (write the bare address without a prefix length)")
    if "%" in entry:
        # The daemon's handling of zone ids is UNKNOWN; the documented way to pick the interface
        # of an IPv6 link-local address is NETWORK_INTERFACE in config.cfg, so refuse zone ids.
        raise ValueError("has an IPv6 zone id ('%'): list the bare address and set NETWORK_INTERFACE in config.cfg")
    bad = sorted(set(entry) & _SHELL_META)
    if bad:
        raise ValueError("contains %s, which is not allowed in an address or host name" % " ".join(repr(c) for c in bad))
    if ":" in entry:
        try:
            return FAMILY_IPV6, ipaddress.IPv6Address(entry)
        except ValueError:
            raise ValueError("is not a valid IPv6 address") from None
    try:
        return FAMILY_IPV4, ipaddress.IPv4Address(entry)
    except ValueError:
        pass
    try:
        # The C resolver reads forms such as '10.1', '010.0.0.1' or '0x0a000001' as IPv4 addresses
        # (inet_aton), so a "host name" in one of those forms would silently become an address.
        packed = socket.inet_aton(entry)
    except OSError:
        packed = None
    if packed is not None:
        raise ValueError("is not a valid dotted-quad IPv4 address (the resolver would read it as %s)"
                         % socket.inet_ntoa(packed))
    if len(entry) > _MAX_HOSTNAME:
        raise ValueError("is longer than %d characters" % _MAX_HOSTNAME)
    for label in entry.split("."):
        if not _LABEL.match(label):
            if label == "":
                raise ValueError("has an empty label (leading, trailing or doubled '.')")
            raise ValueError("has the label %r, which is not an RFC 1123 host name label "
                             "(letters, digits and '-', 1-63 characters, no '-' at either end)" % label)
    if entry.rsplit(".", 1)[-1].isdigit():
        # RFC 1123 2.1: the last label of a host name is never all digits, so '256.1.1.1' is a
        # mistyped address, not a name.
        raise ValueError("is not a valid IPv4 address, and a host name cannot end in an all-digit label")
    return FAMILY_HOSTNAME, entry.lower()


def validate_nodes(entries, max_nodes=MAX_NODES, allow_mixed_families=False, allow_hostnames=True):
    """Validate the whole list; return a list of :class:`NodeEntry` or raise :class:`NodesError`.

    All problems are collected so that one run shows every bad entry.
    """
    if max_nodes is None or int(max_nodes) < 1:
        raise NodesError("max_nodes must be at least 1, got %r" % (max_nodes,))
    if entries is None or len(entries) == 0:
        raise NodesError("the node list is empty: an IMEX domain needs at least one node")

    problems = []
    if len(entries) > max_nodes:
        problems.append("the node list has %d entries, more than max_nodes=%d (an NVL72 rack has %d compute trays)"
                        % (len(entries), max_nodes, MAX_NODES))
    valid = []
    seen = {}
    for index, text in enumerate(entries):
        where = "nodes[%d] %r (line %d)" % (index, text, index + 1)
        try:
            family, key = classify(text)
        except ValueError as exc:
            problems.append("%s %s" % (where, exc))
            continue
        if family == FAMILY_HOSTNAME and not allow_hostnames:
            problems.append("%s is a host name, but allow_hostnames is false "
                            "(host names need IMEX from driver 570.158.01)" % where)
            continue
        if key in seen:
            first = seen[key]
            problems.append("%s is the same node as nodes[%d] %r (every node must appear once)"
                            % (where, first.index, first.text))
            continue
        entry = NodeEntry(index, text, family, key)
        seen[key] = entry
        valid.append(entry)

    families = []
    for entry in valid:
        if entry.family not in families:
            families.append(entry.family)
    if len(families) > 1 and not allow_mixed_families:
        first_family = valid[0].family
        for entry in valid:
            if entry.family != first_family:
                problems.append("nodes[%d] %r (line %d) is %s, but nodes[0] %r is %s (set allow_mixed_families to mix them)"
                                % (entry.index, entry.text, entry.index + 1, entry.family, valid[0].text, first_family))
    if problems:
        raise NodesError(problems)
    return valid


# Owner, group and mode of nodes_config.cfg: imex_nodes_config's defaults, which the roles keep.
FILE_OWNER = "root"
FILE_GROUP = "root"
FILE_MODE = "0644"


def nodes_checksum(content):
    """SHA-256 of rendered nodes_config.cfg content: what imex_nodes_config returns as its checksum."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def render_nodes(entries):
    """nodes_config.cfg content: one entry per line, newline-terminated.

    No comments: the daemon tolerating '#' lines is only INFERRED from third-party use, and the
    file must be byte-identical on every node anyway.
    """
    return "".join("%s\n" % (entry.text if isinstance(entry, NodeEntry) else entry) for entry in entries)


def _can_bind(family, sockaddr):
    """True when a socket can be bound to ``sockaddr``, i.e. the address is configured on this host.

    Binding to an address that no local interface holds fails with EADDRNOTAVAIL. This needs no
    privileges, no extra Python packages and no netlink parsing, and works for IPv4 and IPv6
    alike. Caveat: with net.ipv4.ip_nonlocal_bind / net.ipv6.ip_nonlocal_bind set, any address
    binds; callers only use the result to find (not to exclude) the local entry.
    """
    try:
        sock = socket.socket(family, socket.SOCK_DGRAM)
    except OSError:
        return False  # address family not supported here (e.g. IPv6 disabled): not local
    try:
        sock.bind(sockaddr)
        return True
    except OSError:
        # EADDRNOTAVAIL (not ours) in the normal case; EINVAL for a link-local address without
        # its scope. Either way the address cannot be this node's bind address.
        return False
    finally:
        sock.close()


def _resolve(name):
    """All addresses a host name resolves to on this host (empty when it does not resolve)."""
    try:
        infos = socket.getaddrinfo(name, None, 0, socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError):
        return []
    addresses = []
    for info in infos:
        address = info[4][0]
        if address not in addresses:
            addresses.append(address)
    return addresses


def _is_local_address(address, can_bind):
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if ip.is_unspecified:
        # 0.0.0.0 and :: bind everywhere; they are placeholders, never this host's own entry.
        return False
    if ip.version == 4:
        return can_bind(socket.AF_INET, (str(ip), 0))
    if can_bind(socket.AF_INET6, (str(ip), 0, 0, 0)):
        return True
    if ip.is_link_local:
        # A link-local address only binds together with the interface (scope) that holds it.
        try:
            interfaces = socket.if_nameindex()
        except OSError:
            interfaces = []
        for ifindex, _name in interfaces:
            if can_bind(socket.AF_INET6, (str(ip), 0, 0, ifindex)):
                return True
    return False


def find_local(entries, resolver=_resolve, can_bind=_can_bind):
    """Indexes of the entries that are addresses of this host.

    Host names are resolved first (every address they resolve to is tried); each address is then
    tried with a bind test. More than one index means the list names this host twice.
    """
    local = []
    for index, entry in enumerate(entries):
        text = entry.text if isinstance(entry, NodeEntry) else entry
        try:
            family, _key = classify(text)
        except ValueError:
            continue
        addresses = resolver(text) if family == FAMILY_HOSTNAME else [text]
        for address in addresses:
            try:
                if _is_local_address(address, can_bind):
                    local.append(index)
                    break
            except ValueError:
                continue
    return local
