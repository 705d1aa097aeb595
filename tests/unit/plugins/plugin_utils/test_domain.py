"""Unit tests for the controller-side IMEX domain model (plugins/plugin_utils/_domain.py)."""
from __future__ import annotations

import copy
import json
import random

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils._domain import (
    DomainModelError,
    build_model,
    check_play,
    natural_key,
    parse_driver_version,
)


def rack_hosts(rack, count=18, first=1):
    return ["rack%d-tray%02d" % (rack, tray) for tray in range(first, first + count)]


def rack_address(host):
    """rack<r>-tray<t> -> 198.18.<r>.<10+t>, the simulated rack's addressing."""
    rack_part, tray_part = host.split("-")
    return "198.18.%d.%d" % (int(rack_part[4:]), 10 + int(tray_part[4:]))


def inventory(domains, parent="imex_domains", extra_groups=None):
    """groups and hostvars (ansible_host only) for {domain group: [hosts]}."""
    groups = {"all": [], parent: []}
    hostvars = {}
    for name, hosts in domains.items():
        groups[name] = list(hosts)
        for host in hosts:
            groups["all"].append(host)
            groups[parent].append(host)
            hostvars[host] = {"ansible_host": rack_address(host)}
    for name, hosts in (extra_groups or {}).items():
        groups[name] = list(hosts)
    return groups, hostvars


def model_of(domains, **kwargs):
    groups, hostvars = inventory(domains)
    return build_model(groups, hostvars, domain_groups=list(domains), **kwargs)


def domain_of(hosts, key, values, **kwargs):
    """The model of the one domain group rack<r> of ``hosts``, after setting their ``key`` to ``values`` in turn."""
    name = hosts[0].split("-")[0]
    groups, hostvars = inventory({name: hosts})
    for host, value in zip(hosts, values):
        hostvars[host][key] = value
    return build_model(groups, hostvars, domain_groups=[name], **kwargs)["domains"][name]


def problems_of(groups, hostvars, **kwargs):
    with pytest.raises(DomainModelError) as info:
        build_model(groups, hostvars, **kwargs)
    return info.value.problems


def only_problem(groups, hostvars, **kwargs):
    problems = problems_of(groups, hostvars, **kwargs)
    assert len(problems) == 1, problems
    return problems[0]


# --- shapes -------------------------------------------------------------------------------------

def test_one_rack_of_18():
    hosts = rack_hosts(1)
    model = model_of({"rack1": hosts})

    domain = model["domains"]["rack1"]
    assert domain["name"] == "rack1"
    assert domain["size"] == 18
    assert domain["family"] == "ipv4"
    assert domain["order"] == "natural"
    assert domain["declared_size"] is None
    assert domain["addresses"] == ["198.18.1.%d" % (10 + tray) for tray in range(1, 19)]
    assert domain["nodes"][0] == {"host": "rack1-tray01", "address": "198.18.1.11", "index": 0}
    assert domain["nodes"][17] == {"host": "rack1-tray18", "address": "198.18.1.28", "index": 17}
    assert [node["index"] for node in domain["nodes"]] == list(range(18))
    assert model["host_domain"] == {host: "rack1" for host in hosts}
    assert model["parent"] == "imex_domains"


def test_rack_split_into_two_partitions():
    part1, part2 = rack_hosts(2, 9, 1), rack_hosts(2, 9, 10)
    groups, hostvars = inventory({"rack2_p1": part1, "rack2_p2": part2},
                                 extra_groups={"rack2": part1 + part2})

    model = build_model(groups, hostvars, domain_groups=["rack2_p1", "rack2_p2"])

    assert sorted(model["domains"]) == ["rack2_p1", "rack2_p2"]
    assert model["domains"]["rack2_p1"]["addresses"] == ["198.18.2.%d" % (10 + t) for t in range(1, 10)]
    assert model["domains"]["rack2_p2"]["addresses"] == ["198.18.2.%d" % (10 + t) for t in range(10, 19)]
    # Each partition numbers its own nodes from 0: they are separate IMEX domains.
    assert model["domains"]["rack2_p2"]["nodes"][0] == {"host": "rack2-tray10", "address": "198.18.2.20", "index": 0}
    assert model["host_domain"]["rack2-tray09"] == "rack2_p1"
    assert model["host_domain"]["rack2-tray10"] == "rack2_p2"
    assert "rack2" not in model["domains"]


def test_two_racks():
    model = model_of({"rack1": rack_hosts(1), "rack2": rack_hosts(2)})

    assert list(model["domains"]) == ["rack1", "rack2"]
    assert model["domains"]["rack1"]["addresses"][5] == "198.18.1.16"
    assert model["domains"]["rack2"]["addresses"][5] == "198.18.2.16"
    assert len(model["host_domain"]) == 36
    assert model["host_domain"]["rack2-tray18"] == "rack2"


def test_domains_are_listed_in_natural_order_of_names():
    model = model_of({"rack10": rack_hosts(10, 2), "rack9": rack_hosts(9, 2), "rack1": rack_hosts(1, 2)})
    assert list(model["domains"]) == ["rack1", "rack9", "rack10"]


# --- order --------------------------------------------------------------------------------------

def test_natural_order_puts_tray2_before_tray10():
    hosts = ["tray%d" % number for number in (10, 2, 1, 12, 3, 11)]
    groups = {"imex_domains": hosts, "rack": hosts}
    hostvars = {host: {"ansible_host": "198.18.5.%d" % int(host[4:])} for host in hosts}

    model = build_model(groups, hostvars, domain_groups=["rack"])

    assert [node["host"] for node in model["domains"]["rack"]["nodes"]] == [
        "tray1", "tray2", "tray3", "tray10", "tray11", "tray12"]
    # A plain string sort (AWX's host order) would have put tray10 before tray2.
    assert sorted(hosts)[:2] == ["tray1", "tray10"]


def test_natural_key_is_total_and_case_insensitive():
    names = ["Tray2", "tray10", "tray1", "tray01", "a-tray3"]
    assert sorted(names, key=natural_key) == ["a-tray3", "tray01", "tray1", "Tray2", "tray10"]


def test_explicit_index_order():
    hosts = rack_hosts(3, 4)

    domain = domain_of(hosts, "imex_node_index", reversed(range(len(hosts))))

    assert domain["order"] == "explicit"
    assert [node["host"] for node in domain["nodes"]] == list(reversed(hosts))
    assert domain["addresses"] == ["198.18.3.14", "198.18.3.13", "198.18.3.12", "198.18.3.11"]


def test_explicit_index_may_be_a_string_of_digits():
    # INI [group:vars] and some dynamic sources hand every value over as a string.
    hosts = rack_hosts(3, 2)

    domain = domain_of(hosts, "imex_node_index", ["1", "0"])

    assert [node["host"] for node in domain["nodes"]] == [hosts[1], hosts[0]]


def test_tray_swap_that_changes_only_the_address_keeps_every_position():
    hosts = rack_hosts(1)
    groups, hostvars = inventory({"rack1": hosts})
    before = build_model(groups, hostvars, domain_groups=["rack1"])["domains"]["rack1"]

    swapped = copy.deepcopy(hostvars)
    swapped["rack1-tray05"]["ansible_host"] = "198.18.1.99"  # new tray, new DHCP lease
    after = build_model(groups, swapped, domain_groups=["rack1"])["domains"]["rack1"]

    assert after["nodes"][4] == {"host": "rack1-tray05", "address": "198.18.1.99", "index": 4}
    for position in range(18):
        if position != 4:
            assert after["nodes"][position] == before["nodes"][position]


def test_model_is_independent_of_inventory_order():
    domains = {"rack1": rack_hosts(1), "rack2_p1": rack_hosts(2, 9), "rack2_p2": rack_hosts(2, 9, 10)}
    groups, hostvars = inventory(domains)
    reference = build_model(groups, hostvars, domain_groups=list(domains))

    shuffler = random.Random(7)
    for _attempt in range(5):
        shuffled_groups = {name: shuffler.sample(hosts, len(hosts)) for name, hosts in groups.items()}
        names = list(domains)
        shuffler.shuffle(names)
        host_order = list(hostvars)
        shuffler.shuffle(host_order)
        shuffled_vars = {host: hostvars[host] for host in host_order}

        model = build_model(shuffled_groups, shuffled_vars, domain_groups=names)

        assert json.dumps(model) == json.dumps(reference)


def test_limit_does_not_shorten_the_node_list():
    # groups is the whole inventory whatever --limit says; the model never looks at play hosts.
    model = model_of({"rack1": rack_hosts(1)})
    assert model["domains"][model["host_domain"]["rack1-tray03"]]["size"] == 18


# --- addresses ----------------------------------------------------------------------------------

def test_imex_address_wins_over_ansible_host():
    domain = domain_of(rack_hosts(1, 2), "imex_address", ["198.19.1.11", "198.19.1.12"])

    assert domain["addresses"] == ["198.19.1.11", "198.19.1.12"]


def test_ipv6_and_hostname_domains():
    hosts = rack_hosts(1, 2)
    assert domain_of(hosts, "imex_address", ["2001:db8::11", "2001:db8::12"])["family"] == "ipv6"

    domain = domain_of(hosts, "imex_address", ["rack1-tray01.example.net", "rack1-tray02.example.net"],
                       driver_version="580.95.09")
    assert domain["family"] == "hostname"
    assert domain["addresses"] == ["rack1-tray01.example.net", "rack1-tray02.example.net"]


def test_duplicate_address_within_a_domain():
    hosts = rack_hosts(1, 3)
    groups, hostvars = inventory({"rack1": hosts})
    hostvars["rack1-tray03"]["imex_address"] = "198.18.1.11"

    problem = only_problem(groups, hostvars, domain_groups=["rack1"])

    assert problem == (
        "address 198.18.1.11 is used by 2 trays: rack1-tray01 (group rack1, ansible_host '198.18.1.11'); "
        "rack1-tray03 (group rack1, imex_address '198.18.1.11'); every tray needs its own address "
        "across all IMEX domains")


def test_duplicate_address_across_domains_in_another_spelling():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2), "rack2": rack_hosts(2, 2)})
    for host in groups["imex_domains"]:
        hostvars[host]["imex_address"] = "2001:db8:%s::%s" % (host[4], host[-1])
    hostvars["rack2-tray02"]["imex_address"] = "2001:0DB8:1:0:0:0:0:2"  # rack1-tray02's address

    problem = only_problem(groups, hostvars, domain_groups=["rack1", "rack2"])

    assert "is used by 2 trays" in problem
    assert "rack1-tray02 (group rack1, imex_address '2001:db8:1::2')" in problem
    assert "rack2-tray02 (group rack2, imex_address '2001:0DB8:1:0:0:0:0:2')" in problem


@pytest.mark.parametrize(("value", "reason"), [
    ("198.18.1.300", "is not a valid IPv4 address, and a host name cannot end in an all-digit label"),
    ("198.18.1", "is not a valid dotted-quad IPv4 address (the resolver would read it as 198.18.0.1)"),
    ("10.1", "is not a valid dotted-quad IPv4 address (the resolver would read it as 10.0.0.1)"),
    ("198.18.1.11/16", "contains '/'"),
    ("", "is empty"),
    (" 198.18.1.11", "contains whitespace"),
    ("tray_01", "is not an RFC 1123 host name label"),
    ("fe80::1%eth0", "has an IPv6 zone id"),
    ("0.0.0.0", "is the unspecified address (a placeholder, not a tray)"),
    ("127.0.0.1", "is a loopback address; peers on other trays cannot reach it"),
    ("::1", "is a loopback address"),
    ("239.1.1.1", "is a multicast address"),
    ("255.255.255.255", "is the broadcast address"),
])
def test_bad_address_names_tray_group_key_and_value(value, reason):
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2)})
    hostvars["rack1-tray02"]["imex_address"] = value

    problem = only_problem(groups, hostvars, domain_groups=["rack1"])

    assert problem.startswith("tray rack1-tray02 (group rack1): imex_address %r " % value)
    assert reason in problem


def test_address_that_is_not_a_string():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2)})
    hostvars["rack1-tray01"]["ansible_host"] = 3232235777

    problem = only_problem(groups, hostvars, domain_groups=["rack1"])

    assert problem == "tray rack1-tray01 (group rack1): ansible_host 3232235777 (int) is not a string"


def test_tray_without_any_address():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2)})
    del hostvars["rack1-tray02"]["ansible_host"]

    problem = only_problem(groups, hostvars, domain_groups=["rack1"])

    assert problem == (
        "tray rack1-tray02 (group rack1): neither imex_address nor ansible_host is set; set "
        "imex_address to the address the IMEX peers use to reach this tray")


def test_mixed_families():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 3)})
    hostvars["rack1-tray02"]["imex_address"] = "2001:db8::12"
    hostvars["rack1-tray03"]["imex_address"] = "rack1-tray03.example.net"

    problem = only_problem(groups, hostvars, domain_groups=["rack1"])

    assert problem == (
        "domain group rack1 mixes address families: hostname: rack1-tray03; ipv4: rack1-tray01; "
        "ipv6: rack1-tray02; every tray of a domain must use the same family (allow_mixed_families overrides)")

    model = build_model(groups, hostvars, domain_groups=["rack1"], allow_mixed_families=True)
    assert model["domains"]["rack1"]["family"] == "mixed"


def test_families_may_differ_between_domains():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2), "rack2": rack_hosts(2, 2)})
    for host in rack_hosts(2, 2):
        hostvars[host]["imex_address"] = "2001:db8:2::%s" % host[-1]

    model = build_model(groups, hostvars, domain_groups=["rack1", "rack2"])

    assert (model["domains"]["rack1"]["family"], model["domains"]["rack2"]["family"]) == ("ipv4", "ipv6")


def test_hostnames_with_a_driver_older_than_570_158_01():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2)})
    for host in rack_hosts(1, 2):
        hostvars[host]["imex_address"] = host + ".example.net"

    problems = problems_of(groups, hostvars, domain_groups=["rack1"], driver_version="570.148.08")

    assert problems == [
        "tray rack1-tray01 (group rack1): imex_address 'rack1-tray01.example.net' is a host name; "
        "nodes_config.cfg accepts host names only from driver 570.158.01, the configured driver_version "
        "is 570.148.08; use an IP address or upgrade the driver",
        "tray rack1-tray02 (group rack1): imex_address 'rack1-tray02.example.net' is a host name; "
        "nodes_config.cfg accepts host names only from driver 570.158.01, the configured driver_version "
        "is 570.148.08; use an IP address or upgrade the driver",
    ]
    # The first release that reads host names, and no release given at all, both pass.
    assert build_model(groups, hostvars, domain_groups=["rack1"], driver_version="570.158.01")
    assert build_model(groups, hostvars, domain_groups=["rack1"])


def test_ip_addresses_pass_with_an_old_driver():
    assert model_of({"rack1": rack_hosts(1, 2)}, driver_version="570.124.06")


@pytest.mark.parametrize(("text", "parsed"), [
    ("570.158.01", (570, 158, 1)),
    ("580.95.09-0ubuntu1", (580, 95, 9)),
    ("590.48", (590, 48)),
])
def test_parse_driver_version(text, parsed):
    assert parse_driver_version(text) == parsed


def test_bad_driver_version():
    problem = only_problem(*inventory({"rack1": rack_hosts(1, 2)}), domain_groups=["rack1"], driver_version="latest")
    assert problem == "driver_version 'latest' is not a driver release such as 570.158.01"


# --- membership ---------------------------------------------------------------------------------

def test_tray_in_two_domains():
    hosts = rack_hosts(2, 4)
    groups, hostvars = inventory({"rack2": hosts, "rack2_p1": hosts[:2]})

    problems = problems_of(groups, hostvars, domain_groups=["rack2", "rack2_p1"])

    assert problems == [
        "tray %s is in 2 domain groups under imex_domains: rack2, rack2_p1; a tray belongs to exactly one "
        "IMEX domain (for a partitioned rack, make the partitions the children of imex_domains, not the rack)"
        % host for host in ("rack2-tray01", "rack2-tray02")]


def test_domain_above_max_nodes():
    hosts = rack_hosts(1, 19)
    problem = only_problem(*inventory({"rack1": hosts}), domain_groups=["rack1"])
    assert problem.startswith("domain group rack1 holds 19 trays, above the limit of 18 per IMEX domain (max_nodes): "
                              "rack1-tray01, rack1-tray02,")
    assert problem.endswith("rack1-tray19")


def test_smaller_max_nodes():
    problem = only_problem(*inventory({"rack1": rack_hosts(1, 5)}), domain_groups=["rack1"], max_nodes=4)
    assert problem.startswith("domain group rack1 holds 5 trays, above the limit of 4 per IMEX domain")


def test_empty_domain():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2)})
    groups["rack2"] = []

    problem = only_problem(groups, hostvars, domain_groups=["rack1", "rack2"])

    assert problem == ("domain group rack2 (child of imex_domains) holds no trays; add its trays or remove the "
                       "group from imex_domains")


def test_parent_group_missing():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2)})
    del groups["imex_domains"]

    problem = only_problem(groups, hostvars, domain_groups=[])

    assert problem.startswith("group imex_domains (parent of the IMEX domain groups) is not in the inventory;")


def test_custom_parent_group_missing_is_named():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2)})
    problem = only_problem(groups, hostvars, parent="nvl72_domains", domain_groups=[])
    assert problem.startswith("group nvl72_domains (parent of the IMEX domain groups) is not in the inventory;")


def test_parent_group_without_children():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2)})
    problem = only_problem(groups, hostvars, domain_groups=[])
    assert problem.startswith("group imex_domains has no child groups;")


def test_unknown_children():
    problem = only_problem(*inventory({"rack1": rack_hosts(1, 2)}))
    assert problem == "the child groups of imex_domains are unknown; pass the domain group names (domain_groups)"


def test_domain_group_not_in_inventory():
    problem = only_problem(*inventory({"rack1": rack_hosts(1, 2)}), domain_groups=["rack1", "rack9"])
    assert problem == "domain group rack9 (child of imex_domains) is not in the inventory"


def test_direct_member_of_parent_in_no_domain():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2)})
    groups["imex_domains"].append("spare-tray")
    hostvars["spare-tray"] = {"ansible_host": "198.18.9.9"}

    problem = only_problem(groups, hostvars, domain_groups=["rack1"])

    assert problem == ("tray spare-tray is a direct member of imex_domains but of none of its child groups; put it "
                       "in the group of its rack or NVLink partition")


# --- imex_node_index ----------------------------------------------------------------------------

def indexed(count, indexes):
    hosts = rack_hosts(1, count)
    groups, hostvars = inventory({"rack1": hosts})
    for host, index in zip(hosts, indexes):
        hostvars[host]["imex_node_index"] = index
    return groups, hostvars


def test_index_on_some_trays_only():
    groups, hostvars = indexed(4, [0, 1])
    problem = only_problem(groups, hostvars, domain_groups=["rack1"])
    assert problem == ("domain group rack1: imex_node_index is set on 2 of 4 trays; set it on every tray or on none "
                       "(then hostnames give the order). Trays without it: rack1-tray03, rack1-tray04")


def test_duplicate_index():
    problem = only_problem(*indexed(3, [0, 1, 1]), domain_groups=["rack1"])
    assert problem == ("domain group rack1: imex_node_index = 1 is set on 2 trays: rack1-tray02, rack1-tray03; "
                       "each tray needs its own index")


@pytest.mark.parametrize("value", [18, -1])
def test_index_out_of_range(value):
    problem = only_problem(*indexed(2, [0, value]), domain_groups=["rack1"])
    assert problem == "tray rack1-tray02 (group rack1): imex_node_index = %d is out of range 0..17 (max_nodes 18)" % value


@pytest.mark.parametrize(("value", "shown"), [
    ("one", "'one' (str)"),
    (1.5, "1.5 (float)"),
    (True, "True (bool)"),
    ([1], "[1] (list)"),
])
def test_index_not_an_integer(value, shown):
    problem = only_problem(*indexed(2, [0, value]), domain_groups=["rack1"])
    assert problem == "tray rack1-tray02 (group rack1): imex_node_index = %s is not an integer" % shown


def test_index_gap():
    problem = only_problem(*indexed(3, [0, 1, 5]), domain_groups=["rack1"])
    assert problem == ("domain group rack1: imex_node_index must use 0..2 once each (the index is the tray's line in "
                       "nodes_config.cfg and its IMEX node ID); missing 2; beyond the 3 trays: rack1-tray03=5")


# --- declared size, partial racks, AWX slicing ---------------------------------------------------

def sized(domains, sizes):
    groups, hostvars = inventory(domains)
    for name, size in sizes.items():
        for host in domains[name]:
            hostvars[host]["imex_domain_size"] = size
    return groups, hostvars


def test_declared_size_matching():
    groups, hostvars = sized({"rack1": rack_hosts(1)}, {"rack1": 18})
    model = build_model(groups, hostvars, domain_groups=["rack1"], require_declared_size=True)
    assert model["domains"]["rack1"]["declared_size"] == 18


def test_partial_rack_detected_by_declared_size():
    groups, hostvars = sized({"rack1": rack_hosts(1, 17)}, {"rack1": 18})

    problem = only_problem(groups, hostvars, domain_groups=["rack1"])

    assert problem.startswith(
        "domain group rack1: imex_domain_size = 18 but the inventory holds 17 trays (rack1-tray01, ")
    assert "a partial domain (AWX job slicing, a disabled or missing host, an inventory mistake)" in problem


def test_more_trays_than_declared():
    problem = only_problem(*sized({"rack1": rack_hosts(1, 3)}, {"rack1": 2}), domain_groups=["rack1"])
    assert problem == ("domain group rack1: imex_domain_size = 2 but the inventory holds 3 trays (rack1-tray01, "
                       "rack1-tray02, rack1-tray03); a tray was added to the wrong group, or imex_domain_size is "
                       "out of date")


def test_awx_slice_of_the_inventory_is_refused():
    # AWX gives slice n of N the hosts sorted by name, [n-1::N], and nothing else tells the play.
    domains = {"rack1": rack_hosts(1), "rack2": rack_hosts(2)}
    everything = sorted(rack_hosts(1) + rack_hosts(2))
    slice_hosts = set(everything[0::3])
    sliced = {name: [host for host in hosts if host in slice_hosts] for name, hosts in domains.items()}
    groups, hostvars = sized(sliced, {"rack1": 18, "rack2": 18})

    problems = problems_of(groups, hostvars, domain_groups=["rack1", "rack2"])

    assert [p.split(" but ")[0] for p in problems] == [
        "domain group rack1: imex_domain_size = 18", "domain group rack2: imex_domain_size = 18"]
    assert "the inventory holds 6 trays" in problems[0]


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"require_declared_size": True}, "require_declared_size is on"),
    ({"job_slice_count": 3}, "job_slice_count is 3: a sliced job sees part of each domain"),
])
def test_declared_size_required(kwargs, why):
    groups, hostvars = inventory({"rack1": rack_hosts(1, 2)})

    problem = only_problem(groups, hostvars, domain_groups=["rack1"], **kwargs)

    assert problem == ("domain group rack1: imex_domain_size is not set (%s); set it in the group vars of rack1 to "
                       "the number of trays the domain really has, so a partial domain cannot pass as complete" % why)


def test_job_slice_count_of_one_does_not_require_a_size():
    assert model_of({"rack1": rack_hosts(1, 2)}, job_slice_count=1)


def test_declared_size_not_an_integer():
    problem = only_problem(*sized({"rack1": rack_hosts(1, 2)}, {"rack1": "eighteen"}), domain_groups=["rack1"])
    assert problem == "domain group rack1: imex_domain_size = 'eighteen' (str) is not a positive integer"


def test_declared_size_above_max_nodes():
    problem = only_problem(*sized({"rack1": rack_hosts(1, 2)}, {"rack1": 36}), domain_groups=["rack1"])
    assert problem == ("domain group rack1: imex_domain_size = 36 is above the limit of 18 trays per IMEX domain "
                       "(max_nodes)")


def test_declared_size_differs_between_trays():
    groups, hostvars = sized({"rack1": rack_hosts(1, 3)}, {"rack1": 3})
    hostvars["rack1-tray02"]["imex_domain_size"] = 2
    del hostvars["rack1-tray03"]["imex_domain_size"]

    problem = only_problem(groups, hostvars, domain_groups=["rack1"])

    assert problem == ("domain group rack1: imex_domain_size differs between its trays (2 on rack1-tray02; 3 on "
                       "rack1-tray01; unset on rack1-tray03); set it once, as a group var of rack1")


# --- everything at once, bad arguments ----------------------------------------------------------

def test_every_problem_is_reported_in_one_error():
    groups, hostvars = inventory({"rack1": rack_hosts(1, 3), "rack2": rack_hosts(2, 2)})
    groups["rack3"] = []
    hostvars["rack1-tray02"]["imex_address"] = "198.18.1.12/16"
    hostvars["rack2-tray01"]["imex_address"] = "198.18.1.11"
    hostvars["rack2-tray02"]["imex_node_index"] = 0

    with pytest.raises(DomainModelError) as info:
        build_model(groups, hostvars, domain_groups=["rack1", "rack2", "rack3"])

    message = str(info.value)
    assert message.startswith("IMEX domain model: 4 problems in the inventory:\n- ")
    assert len(info.value.problems) == 4
    for fragment in ("domain group rack3", "'198.18.1.12/16'", "address 198.18.1.11 is used by 2 trays",
                     "imex_node_index is set on 1 of 2 trays"):
        assert fragment in message


@pytest.mark.parametrize(("kwargs", "problem"), [
    ({"max_nodes": 0}, "max_nodes = 0 (int) is not a positive integer"),
    ({"max_nodes": "18"}, "max_nodes = '18' (str) is not a positive integer"),
    ({"job_slice_count": 0}, "job_slice_count = 0 (int) is not a positive integer"),
])
def test_bad_arguments(kwargs, problem):
    assert only_problem(*inventory({"rack1": rack_hosts(1, 2)}), domain_groups=["rack1"], **kwargs) == problem


# --- play checks --------------------------------------------------------------------------------

def test_check_play_passes_when_every_tray_is_in_a_domain():
    model = model_of({"rack1": rack_hosts(1), "rack2": rack_hosts(2), "rack3": rack_hosts(3)})
    # True, not a list: the roles use it as an assert condition, which must be a boolean.
    assert check_play(model, ["rack3-tray01", "rack1-tray05"]) is True
    assert check_play(model, []) is True


def test_check_play_refuses_trays_in_no_domain():
    model = model_of({"rack1": rack_hosts(1)})

    with pytest.raises(DomainModelError) as info:
        check_play(model, ["rack1-tray01", "login01", "rack9-tray01"])

    assert info.value.problems == [
        "tray login01 is in the play but in no IMEX domain (no child group of imex_domains holds it); add it "
        "to the group of its rack or NVLink partition, or leave it out of the play",
        "tray rack9-tray01 is in the play but in no IMEX domain (no child group of imex_domains holds it); add "
        "it to the group of its rack or NVLink partition, or leave it out of the play",
    ]


def test_check_play_refuses_something_else_than_a_model():
    with pytest.raises(DomainModelError) as info:
        check_play({"rack1": []}, [])
    assert info.value.problems == ["the input is not an IMEX domain model (the result of build_model)"]
