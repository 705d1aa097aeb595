# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import socket

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils._nodes import (
    FAMILY_HOSTNAME,
    FAMILY_IPV4,
    FAMILY_IPV6,
    NodesError,
    classify,
    find_local,
    render_nodes,
    validate_nodes,
)

RACK = ["198.18.1.%d" % (10 + i) for i in range(1, 19)]


@pytest.mark.parametrize("entry, family", [
    ("172.27.58.70", FAMILY_IPV4),
    ("0.0.0.0", FAMILY_IPV4),
    ("2001:db8::1", FAMILY_IPV6),
    ("fd00::2", FAMILY_IPV6),
    ("::ffff:10.0.0.1", FAMILY_IPV6),
    ("compute-domain-daemon-8585d4965d-0000", FAMILY_HOSTNAME),
    ("imex-vm-1.imex-service.default.svc.cluster.local", FAMILY_HOSTNAME),
    ("rack1-tray01", FAMILY_HOSTNAME),
    ("a", FAMILY_HOSTNAME),
    ("1tray", FAMILY_HOSTNAME),
])
def test_classify_families(entry, family):
    assert classify(entry)[0] == family


@pytest.mark.parametrize("entry, reason", [
    ("", "is empty"),
    (" 10.0.0.1", "contains whitespace"),
    ("10.0.0.1\n", "contains whitespace"),
    ("tray 1", "contains whitespace"),
    ("10.0.0.1/24", "contains '/'"),
    ("fe80::1%eth0", "zone id"),
    ("tray1;reboot", "';'"),
    ("$(reboot)", "'$'"),
    ("tray`id`", "'`'"),
    ("tray|x", "'|'"),
    ("tray*", "'*'"),
    ("2001:db8::zz", "not a valid IPv6 address"),
    ("1:2:3:4:5:6:7:8:9", "not a valid IPv6 address"),
    ("10.1", "resolver would read it as 10.0.0.1"),
    ("010.0.0.1", "resolver would read it as 8.0.0.1"),
    ("0x0a000001", "resolver would read it as 10.0.0.1"),
    ("12345", "resolver would read it as 0.0.48.57"),
    ("256.1.1.1", "not a valid IPv4 address"),
    ("10.0.0.300", "not a valid IPv4 address"),
    ("tray.01", "all-digit label"),
    ("tray!", "'!'"),
    ("-tray", "'-tray'"),
    ("tray-", "'tray-'"),
    ("tray_01", "'tray_01'"),
    ("tray..rack", "empty label"),
    ("tray.", "empty label"),
    ("a" * 64, "not an RFC 1123"),
    (".".join(["a" * 60] * 5), "longer than 253"),
])
def test_classify_rejects_with_reason(entry, reason):
    with pytest.raises(ValueError) as err:
        classify(entry)
    assert reason in str(err.value)


def test_same_ipv6_written_two_ways_has_one_key():
    assert classify("2001:db8::1")[1] == classify("2001:0DB8:0:0:0:0:0:1")[1]


def test_validate_full_rack():
    entries = validate_nodes(RACK)
    assert [entry.text for entry in entries] == RACK
    assert [entry.index for entry in entries] == list(range(18))
    assert {entry.family for entry in entries} == {FAMILY_IPV4}


def test_validate_names_every_bad_entry_with_position():
    with pytest.raises(NodesError) as err:
        validate_nodes(["10.0.0.1", "10.0.0.1/24", "10.0.0.2", "bad host"])
    message = str(err.value)
    assert "nodes[1] '10.0.0.1/24' (line 2) contains '/'" in message
    assert "nodes[3] 'bad host' (line 4) contains whitespace" in message
    assert "nodes[0]" not in message and "nodes[2]" not in message


def test_validate_rejects_duplicates():
    with pytest.raises(NodesError) as err:
        validate_nodes(["10.0.0.1", "10.0.0.2", "10.0.0.1"])
    assert "nodes[2] '10.0.0.1' (line 3) is the same node as nodes[0] '10.0.0.1'" in str(err.value)


def test_validate_rejects_ipv6_duplicate_in_other_spelling():
    with pytest.raises(NodesError) as err:
        validate_nodes(["2001:db8::1", "2001:db8::2", "2001:0db8:0000::0001"])
    assert "nodes[2] '2001:0db8:0000::0001' (line 3) is the same node as nodes[0] '2001:db8::1'" in str(err.value)


def test_validate_rejects_hostname_duplicate_in_other_case():
    with pytest.raises(NodesError, match=r"nodes\[1\] 'Tray01' \(line 2\) is the same node as nodes\[0\] 'tray01'"):
        validate_nodes(["tray01", "Tray01"])


def test_validate_rejects_mixed_families_unless_allowed():
    mixed = ["10.0.0.1", "2001:db8::1", "tray03"]
    with pytest.raises(NodesError) as err:
        validate_nodes(mixed)
    message = str(err.value)
    assert "nodes[1] '2001:db8::1' (line 2) is ipv6, but nodes[0] '10.0.0.1' is ipv4" in message
    assert "nodes[2] 'tray03' (line 3) is hostname" in message
    assert len(validate_nodes(mixed, allow_mixed_families=True)) == 3


def test_validate_rejects_hostnames_when_not_allowed():
    with pytest.raises(NodesError, match=r"nodes\[0\] 'tray01' \(line 1\) is a host name, but allow_hostnames is false"):
        validate_nodes(["tray01", "tray02"], allow_hostnames=False)


def test_validate_rejects_more_than_max_nodes():
    with pytest.raises(NodesError, match="19 entries, more than max_nodes=18"):
        validate_nodes(RACK + ["198.18.1.99"])
    assert len(validate_nodes(RACK + ["198.18.1.99"], max_nodes=19)) == 19


@pytest.mark.parametrize("entries, max_nodes, message", [
    ([], 18, "empty"),
    (None, 18, "empty"),
    (["10.0.0.1"], 0, "max_nodes must be at least 1"),
])
def test_validate_rejects_empty_list_and_bad_limit(entries, max_nodes, message):
    with pytest.raises(NodesError, match=message):
        validate_nodes(entries, max_nodes=max_nodes)


def test_validate_rejects_non_string():
    with pytest.raises(NodesError, match=r"nodes\[0\] 10 \(line 1\) is not a string"):
        validate_nodes([10])


def test_render_writes_one_entry_a_line():
    entries = validate_nodes(RACK[:4])
    text = render_nodes(entries)
    assert text == "198.18.1.11\n198.18.1.12\n198.18.1.13\n198.18.1.14\n"
    assert render_nodes(["a", "b"]) == "a\nb\n"


# --- find_local --------------------------------------------------------------------------------

def test_find_local_with_real_bind(remote_addresses):
    remote = remote_addresses(2)
    assert find_local([remote[0], "127.0.0.1", remote[1]]) == [1]
    assert find_local(remote) == []


def test_find_local_resolves_host_names(remote_addresses):
    remote = remote_addresses(1)
    assert find_local([remote[0], "localhost"]) == [1]


def test_find_local_ignores_unspecified_placeholder():
    # AWS starts IMEX with 0.0.0.0 placeholders; 0.0.0.0 binds everywhere but is no node.
    assert find_local(["0.0.0.0", "::"]) == []


def test_find_local_unresolvable_name_is_not_local():
    assert find_local(["tray01"], resolver=lambda name: []) == []


def test_find_local_hostname_with_several_addresses():
    binds = []

    def can_bind(family, sockaddr):
        binds.append(sockaddr[0])
        return sockaddr[0] == "10.0.0.7"

    assert find_local(["tray01", "tray02"], resolver=lambda name: {"tray01": ["10.0.0.5", "10.0.0.7"],
                                                                   "tray02": ["10.0.0.8"]}[name],
                      can_bind=can_bind) == [0]
    assert binds == ["10.0.0.5", "10.0.0.7", "10.0.0.8"]


def test_find_local_ipv6_link_local_tries_each_interface_scope():
    tried = []

    def can_bind(family, sockaddr):
        tried.append(sockaddr)
        return family == socket.AF_INET6 and sockaddr[3] != 0

    assert find_local(["fe80::1"], can_bind=can_bind) == [0]
    assert tried[0] == ("fe80::1", 0, 0, 0)
    assert tried[1][3] != 0


def test_find_local_reports_every_local_entry():
    assert find_local(["127.0.0.1", "127.0.0.2"]) == [0, 1]


def test_error_lists_problems_separately():
    with pytest.raises(NodesError) as err:
        validate_nodes(["10.0.0.1/24", "10.0.0.2", "10.0.0.2"])
    assert err.value.problems == [
        "nodes[0] '10.0.0.1/24' (line 1) contains '/' (write the bare address without a prefix length)",
        "nodes[2] '10.0.0.2' (line 3) is the same node as nodes[1] '10.0.0.2' (every node must appear once)",
    ]
    assert str(err.value) == "; ".join(err.value.problems)
