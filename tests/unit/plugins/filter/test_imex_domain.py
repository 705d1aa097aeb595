"""Tests for the IMEX domain filters (plugins/filter/imex_domain.py).

Most tests feed the filters what a play feeds them: ``groups`` and the HostVars object of a real
ansible-core inventory. One test runs ansible-playbook on the example inventory with ``--limit``;
it runs only action plugins (set_fact, debug) with ``ansible_connection=local``, so no tray
address is ever contacted.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import vars_loader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.rackscale.imex.plugins.filter import imex_domain as filters
from ansible_collections.rackscale.imex.plugins.filter.imex_domain import FilterModule, imex_domain_model, model_or_problems

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))  # tests/unit/plugins/filter -> root
EXAMPLE = os.path.join(ROOT, "inventories", "example")
FILTER_DIR = os.path.join(ROOT, "plugins", "filter")


def play_vars(source, limit=None):
    """``groups`` and ``hostvars`` as a play sees them, for an inventory path, with the vars plugin
    rackscale.imex.group_tree enabled as this repository's ansible.cfg enables it: ansible-core runs
    every vars plugin its loader has loaded, so loading it here enables it."""
    if vars_loader.get("rackscale.imex.group_tree") is None:
        raise RuntimeError("the vars plugin rackscale.imex.group_tree cannot be loaded")
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[source])
    variable_manager = VariableManager(loader=loader, inventory=inventory)
    HostVars(inventory=inventory, variable_manager=variable_manager, loader=loader)
    if limit:
        inventory.subset(limit)
    host = inventory.get_hosts()[0]
    variables = variable_manager.get_vars(host=host, include_hostvars=True)
    return variables["groups"], variables["hostvars"], [h.name for h in inventory.get_hosts()]


def write_inventory(tmp_path, text):
    path = tmp_path / "hosts.yml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def domain_groups_vars(tmp_path, children):
    """``groups`` and ``hostvars`` of a play on an inventory whose imex_domains has the child groups ``children`` (YAML)."""
    text = "all:\n  children:\n    imex_domains:\n      children:\n" + textwrap.indent(textwrap.dedent(children), " " * 8)
    groups, hostvars, _play_hosts = play_vars(write_inventory(tmp_path, text))
    return groups, hostvars


def filter_error(*args, **kwargs):
    with pytest.raises(AnsibleFilterError) as info:
        imex_domain_model(*args, **kwargs)
    return str(info.value)


# --- the example inventory ----------------------------------------------------------------------

def test_example_inventory_model():
    groups, hostvars, unused_hosts = play_vars(EXAMPLE)

    model = imex_domain_model(groups, hostvars)

    assert list(model["domains"]) == ["rack07", "rack08_p1", "rack08_p2"]  # rack08 is not a domain
    rack07 = model["domains"]["rack07"]
    assert rack07["addresses"] == ["198.18.7.%d" % (10 + tray) for tray in range(1, 19)]  # ansible_host
    assert (rack07["size"], rack07["declared_size"], rack07["order"]) == (18, 18, "natural")
    part1, part2 = model["domains"]["rack08_p1"], model["domains"]["rack08_p2"]
    assert part1["addresses"] == ["198.19.8.%d" % (10 + tray) for tray in range(1, 10)]  # imex_address
    assert (part1["declared_size"], part1["order"]) == (9, "natural")
    assert (part2["declared_size"], part2["order"]) == (9, "explicit")
    assert part2["nodes"][0] == {"host": "rack08-tray10", "address": "198.19.8.20", "index": 0}
    assert model["host_domain"]["rack08-tray10"] == "rack08_p2"
    assert all(address.__class__ is str for domain in model["domains"].values() for address in domain["addresses"])


def test_limit_to_one_tray_gives_the_same_model():
    groups, hostvars, unused_hosts = play_vars(EXAMPLE)
    limited_groups, limited_hostvars, play_hosts = play_vars(EXAMPLE, limit="rack07-tray03")

    assert play_hosts == ["rack07-tray03"]
    limited = imex_domain_model(limited_groups, limited_hostvars)
    assert limited == imex_domain_model(groups, hostvars)
    assert len(limited["domains"]["rack07"]["addresses"]) == 18


def test_example_inventory_with_driver_and_declared_sizes_required():
    groups, hostvars, unused_hosts = play_vars(EXAMPLE)
    model = imex_domain_model(groups, hostvars, driver_version="570.124.06", require_declared_size=True,
                              job_slice_count=4)
    assert sorted(model["domains"]) == ["rack07", "rack08_p1", "rack08_p2"]


# --- inventories with problems ------------------------------------------------------------------

def test_rack_group_and_its_partitions_both_under_the_parent(tmp_path):
    groups, hostvars = domain_groups_vars(tmp_path, """\
        rackb:
          children:
            rackb_p1:
              hosts:
                b1: {ansible_host: 198.18.2.11}
        rackb_p2:
          hosts:
            b2: {ansible_host: 198.18.2.12}
        """)

    # rackb is the child of imex_domains; its own child rackb_p1 is not a domain.
    model = imex_domain_model(groups, hostvars)
    assert list(model["domains"]) == ["rackb", "rackb_p2"]
    assert model["domains"]["rackb"]["addresses"] == ["198.18.2.11"]


def test_a_group_across_racks_is_not_a_domain(tmp_path):
    # The first tray of each rack in a group of its own, outside imex_domains: its hosts are all in
    # imex_domains (so ``groups`` alone cannot tell it from a rack), yet it is no domain.
    source = write_inventory(tmp_path, """\
        all:
          children:
            imex_domains:
              children:
                rack1:
                  hosts:
                    r1t1: {ansible_host: 198.18.1.11}
                    r1t2: {ansible_host: 198.18.1.12}
                rack2:
                  hosts:
                    r2t1: {ansible_host: 198.18.2.11}
            first_trays:
              hosts:
                r1t1:
                r2t1:
        """)
    groups, hostvars, _play_hosts = play_vars(source)

    assert hostvars["r1t1"]["imex_group_children"]["imex_domains"] == ["rack1", "rack2"]
    assert hostvars["r1t1"]["imex_group_children"]["first_trays"] == []
    assert list(imex_domain_model(groups, hostvars)["domains"]) == ["rack1", "rack2"]


def test_all_problems_reach_the_filter_error(tmp_path):
    groups, hostvars = domain_groups_vars(tmp_path, """\
        rack1:
          hosts:
            rack1-tray01: {ansible_host: 198.18.1.11}
            rack1-tray02: {ansible_host: 198.18.1.11}
            rack1-tray03: {imex_address: rack1-tray03.example.net, ansible_host: 198.18.1.13}
        rack2:
          hosts:
            rack1-tray01:
        rack3:
          hosts: {}
        """)

    message = filter_error(groups, hostvars, driver_version="570.148.08", allow_mixed_families=True)

    assert message.startswith("IMEX domain model: 4 problems in the inventory:")
    assert ("- domain group rack3 (child of imex_domains) holds no trays; add its trays or remove the group "
            "from imex_domains") in message
    assert "- tray rack1-tray01 is in 2 domain groups under imex_domains: rack1, rack2;" in message
    assert ("- tray rack1-tray03 (group rack1): imex_address 'rack1-tray03.example.net' is a host name; "
            "nodes_config.cfg accepts host names only from driver 570.158.01") in message
    assert ("- address 198.18.1.11 is used by 2 trays: rack1-tray01 (group rack1, ansible_host '198.18.1.11'); "
            "rack1-tray02 (group rack1, ansible_host '198.18.1.11')") in message


def test_template_error_names_tray_and_key(tmp_path):
    groups, hostvars = domain_groups_vars(tmp_path, """\
        rack1:
          hosts:
            rack1-tray01: {ansible_host: 198.18.1.11}
            rack1-tray02: {imex_address: "{{ undefined_compute_net }}.12"}
        """)

    message = filter_error(groups, hostvars)

    assert "- tray rack1-tray02: imex_address cannot be templated: " in message
    assert "undefined_compute_net" in message


def test_templated_address_is_resolved(tmp_path):
    source = write_inventory(tmp_path, """\
        all:
          vars:
            compute_net: 198.19.1
          children:
            imex_domains:
              children:
                rack1:
                  hosts:
                    rack1-tray01: {imex_address: "{{ compute_net }}.11"}
                    rack1-tray02: {imex_address: "{{ compute_net }}.12"}
        """)
    groups, hostvars, unused_hosts = play_vars(source)

    assert imex_domain_model(groups, hostvars)["domains"]["rack1"]["addresses"] == ["198.19.1.11", "198.19.1.12"]


def test_parent_missing_from_the_inventory():
    groups, hostvars, unused_hosts = play_vars(EXAMPLE)
    message = filter_error(groups, hostvars, parent="nvl72_domains")
    assert "group nvl72_domains (parent of the IMEX domain groups) is not in the inventory" in message


def test_parent_without_children(tmp_path):
    source = write_inventory(tmp_path, """\
        all:
          children:
            imex_domains:
              hosts:
                rack1-tray01: {ansible_host: 198.18.1.11}
        """)
    groups, hostvars, unused_hosts = play_vars(source)

    message = filter_error(groups, hostvars)

    assert "- group imex_domains has no child groups;" in message


def test_partial_rack_from_a_slice(tmp_path):
    # What an AWX slice job receives: part of the rack, the group vars unchanged.
    groups, hostvars = domain_groups_vars(tmp_path, """\
        rack1:
          vars:
            imex_domain_size: 18
          hosts:
            rack1-tray01: {ansible_host: 198.18.1.11}
            rack1-tray04: {ansible_host: 198.18.1.14}
        """)

    message = filter_error(groups, hostvars)

    assert ("- domain group rack1: imex_domain_size = 18 but the inventory holds 2 trays (rack1-tray01, "
            "rack1-tray04)") in message


# --- plain data instead of a play's variables ---------------------------------------------------

def plain_inventory():
    groups = {"imex_domains": ["t2", "t10", "t1"], "rack1": ["t2", "t10", "t1"]}
    hostvars = {"t1": {"ansible_host": "198.18.1.11"}, "t2": {"ansible_host": "198.18.1.12"},
                "t10": {"ansible_host": "198.18.1.20"}}
    return groups, hostvars


def test_plain_dicts_with_explicit_domains():
    groups, hostvars = plain_inventory()
    model = imex_domain_model(groups, hostvars, domains=["rack1"])
    assert model["domains"]["rack1"]["addresses"] == ["198.18.1.11", "198.18.1.12", "198.18.1.20"]


def test_without_the_vars_plugin_the_error_says_how_to_enable_it():
    groups, hostvars = plain_inventory()
    assert filter_error(groups, hostvars) == CANNOT_TELL


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    (("groups", {}), {}, "imex_domain_model input must be the groups mapping (use groups), got str"),
    (({}, ["hostvars"]), {}, "imex_domain_model needs hostvars as its first argument, got list"),
    (({}, {}), {"domains": "rack1"}, "domains must be a list of group names, got str"),
])
def test_bad_filter_arguments(args, kwargs, message):
    assert filter_error(*args, **kwargs) == message


def test_max_nodes_reaches_the_model():
    groups, hostvars = plain_inventory()
    assert "domain group rack1 holds 3 trays, above the limit of 2" in filter_error(
        groups, hostvars, domains=["rack1"], max_nodes=2)


def test_command_line_extra_vars_arrive_as_strings():
    # -e imex_max_nodes=2 -e require=true hands the filter strings, not int and bool.
    groups, hostvars = plain_inventory()
    assert "above the limit of 2" in filter_error(groups, hostvars, domains=["rack1"], max_nodes="2")
    assert "imex_domain_size is not set (require_declared_size is on)" in filter_error(
        groups, hostvars, domains=["rack1"], require_declared_size="true")
    assert "imex_domain_size is not set (job_slice_count is 3" in filter_error(
        groups, hostvars, domains=["rack1"], job_slice_count="3")
    assert imex_domain_model(groups, hostvars, domains=["rack1"], allow_mixed_families="no",
                             require_declared_size="false", job_slice_count="1")


def test_flag_that_is_not_a_boolean():
    groups, hostvars = plain_inventory()
    assert filter_error(groups, hostvars, domains=["rack1"], allow_mixed_families="sometimes") == (
        "allow_mixed_families must be true or false, got 'sometimes'")


# --- imex_domain: a tray's domain from a host variable ------------------------------------------------

CANNOT_TELL = (
    "imex_domain_model cannot tell the IMEX domains (no tray of imex_domains sets imex_domain, and none has "
    "imex_group_children): set imex_domain on every tray to the name of its domain group (for example "
    "imex_domain: rack07 in group_vars/rack07.yml), or enable the vars plugin rackscale.imex.group_tree, which "
    "gives plays the inventory's group tree: vars_plugins_enabled = host_group_vars,rackscale.imex.group_tree in "
    "the [defaults] section of ansible.cfg (or ANSIBLE_VARS_ENABLED=host_group_vars,rackscale.imex.group_tree); "
    "the domain groups are the child groups of imex_domains")


def declared_inventory(domains, groups_too=True):
    """Plain ``groups`` and ``hostvars`` (no imex_group_children anywhere) of {tray: its imex_domain or None}:
    tray i at 198.18.1.(11+i); ``groups_too`` adds a group of each domain's name holding its trays."""
    groups = {"all": list(domains), "imex_domains": list(domains)}
    hostvars = {}
    for index, (tray, domain) in enumerate(domains.items()):
        hostvars[tray] = {"ansible_host": "198.18.1.%d" % (11 + index)}
        if domain is not None:
            hostvars[tray]["imex_domain"] = domain
            if groups_too:
                groups.setdefault(domain, []).append(tray)
    return groups, hostvars


def test_the_domains_come_from_imex_domain_alone_without_the_vars_plugin():
    groups, hostvars = declared_inventory({"b2": "rackB", "a1": "rackA", "b1": "rackB", "a2": "rackA"})
    assert not any("imex_group_children" in values for values in hostvars.values())
    model = imex_domain_model(groups, hostvars)
    assert sorted(model["domains"]) == ["rackA", "rackB"]
    assert [node["host"] for node in model["domains"]["rackA"]["nodes"]] == ["a1", "a2"]
    assert [node["host"] for node in model["domains"]["rackB"]["nodes"]] == ["b1", "b2"]
    assert model["domains"]["rackB"]["addresses"] == ["198.18.1.13", "198.18.1.11"]
    assert model["host_domain"] == {"a1": "rackA", "a2": "rackA", "b1": "rackB", "b2": "rackB"}
    assert model_or_problems(groups, hostvars, ["a1", "b1"]) == {"model": model, "problems": []}


def test_imex_domain_names_the_trays_of_a_domain_even_where_no_group_of_that_name_exists():
    # A constructed inventory that only composes imex_domain: the trays sit directly in imex_domains.
    groups, hostvars = declared_inventory({"t1": "nvl_3f2c_32766", "t2": "nvl_3f2c_32766", "t3": "nvl_9a01_1"},
                                          groups_too=False)
    assert sorted(groups) == ["all", "imex_domains"]
    model = imex_domain_model(groups, hostvars)
    assert {name: domain["addresses"] for name, domain in model["domains"].items()} == {
        "nvl_3f2c_32766": ["198.18.1.11", "198.18.1.12"], "nvl_9a01_1": ["198.18.1.13"]}


def test_trays_without_imex_domain_while_others_have_it_are_refused_naming_them():
    groups, hostvars = declared_inventory({"a1": "rackA", "a2": None, "b1": "rackB", "b2": ""})
    assert filter_error(groups, hostvars) == (
        "IMEX domain model: 1 problem in the inventory:\n"
        "- trays a2, b2 set no imex_domain while other trays of imex_domains do; set it on every tray (the name of "
        "its domain group)")
    assert model_or_problems(groups, hostvars, ["a1"])["problems"] == [
        "trays a2, b2 set no imex_domain while other trays of imex_domains do; set it on every tray (the name of its "
        "domain group)"]


def test_a_group_of_the_domains_name_must_hold_the_same_trays():
    groups, hostvars = declared_inventory({"a1": "rackA", "a2": "rackA", "a3": "rackA"})
    groups["rackA"] = ["a1", "a2"]  # a3 says rackA, but the group rackA does not hold it
    assert filter_error(groups, hostvars) == (
        "IMEX domain model: 1 problem in the inventory:\n"
        "- imex_domain = rackA on a1, a2, a3, but group rackA holds a1, a2; make them name the same trays")


def test_the_variable_and_the_group_tree_that_agree_give_the_model_of_either(tmp_path):
    groups, hostvars = domain_groups_vars(tmp_path, """\
        rack1:
          vars:
            imex_domain: rack1
          hosts:
            r1t1: {ansible_host: 198.18.1.11}
            r1t2: {ansible_host: 198.18.1.12}
        rack2:
          vars:
            imex_domain: rack2
          hosts:
            r2t1: {ansible_host: 198.18.2.11}
        """)
    assert hostvars["r1t1"]["imex_group_children"]["imex_domains"] == ["rack1", "rack2"]
    model = imex_domain_model(groups, hostvars)
    assert list(model["domains"]) == ["rack1", "rack2"]
    assert model == imex_domain_model(groups, hostvars, domains=["rack1", "rack2"])


def test_the_example_inventory_sets_imex_domain_on_every_tray_in_agreement_with_its_groups():
    groups, hostvars, _play_hosts = play_vars(EXAMPLE)
    model = imex_domain_model(groups, hostvars)
    assert all(hostvars[tray]["imex_domain"] == domain for tray, domain in model["host_domain"].items())


def test_the_variable_and_the_group_tree_that_disagree_are_refused_naming_the_trays(tmp_path):
    groups, hostvars = domain_groups_vars(tmp_path, """\
        rack1:
          vars:
            imex_domain: rack1
          hosts:
            r1t1: {ansible_host: 198.18.1.11}
            r1t2: {ansible_host: 198.18.1.12, imex_domain: rack2}
        rack2:
          vars:
            imex_domain: rack2
          hosts:
            r2t1: {ansible_host: 198.18.2.11}
            r2t2: {ansible_host: 198.18.2.12, imex_domain: rack9}
        """)
    problems = model_or_problems(groups, hostvars, ["r1t1"])["problems"]
    assert problems[0] == (
        "imex_domain and the child groups of imex_domains disagree on trays r1t2 (imex_domain = rack2, group rack1); "
        "r2t2 (imex_domain = rack9, group rack2); make them name the same domain")
    # The groups of those names say which trays they hold.
    assert problems[1:] == [
        "imex_domain = rack1 on r1t1, but group rack1 holds r1t1, r1t2; make them name the same trays",
        "imex_domain = rack2 on r1t2, r2t1, but group rack2 holds r2t1, r2t2; make them name the same trays"]
    assert filter_error(groups, hostvars).startswith(
        "IMEX domain model: 3 problems in the inventory:\n- imex_domain and the child groups of imex_domains disagree "
        "on trays r1t2")


def test_a_tray_in_no_child_group_disagrees_with_its_imex_domain(tmp_path):
    source = write_inventory(tmp_path, """\
        all:
          children:
            imex_domains:
              hosts:
                loose: {ansible_host: 198.18.3.11, imex_domain: rack3}
              children:
                rack1:
                  vars:
                    imex_domain: rack1
                  hosts:
                    r1t1: {ansible_host: 198.18.1.11}
        """)
    groups, hostvars, _play_hosts = play_vars(source)
    assert model_or_problems(groups, hostvars, ["r1t1"])["problems"] == [
        "imex_domain and the child groups of imex_domains disagree on trays loose (imex_domain = rack3, group none); "
        "make them name the same domain"]


def test_an_imex_domain_that_cannot_be_templated_names_the_tray(tmp_path):
    groups, hostvars = domain_groups_vars(tmp_path, """\
        rack1:
          hosts:
            r1t1: {ansible_host: 198.18.1.11, imex_domain: rack1}
            r1t2: {ansible_host: 198.18.1.12, imex_domain: "{{ undefined_rack_name }}"}
        """)
    message = filter_error(groups, hostvars)
    assert "- tray r1t2: imex_domain cannot be read: " in message and "undefined_rack_name" in message


def test_neither_imex_domain_nor_the_group_tree_says_how_to_give_either():
    groups, hostvars = declared_inventory({"a1": None, "a2": ""})
    assert filter_error(groups, hostvars) == CANNOT_TELL
    assert "imex_domain" in CANNOT_TELL and "rackscale.imex.group_tree" in CANNOT_TELL


def test_explicit_domains_ignore_imex_domain():
    groups, hostvars = declared_inventory({"a1": "rackA", "a2": None})
    groups["pair"] = ["a1", "a2"]
    assert list(imex_domain_model(groups, hostvars, domains=["pair"])["domains"]) == ["pair"]


# --- the plan's model: every problem, one sentence each ---------------------------------------------

def test_model_or_problems_returns_every_problem_instead_of_raising():
    groups, hostvars = plain_inventory()
    model = imex_domain_model(groups, hostvars, domains=["rack1"])

    assert model_or_problems(groups, hostvars, ["t1"], domains=["rack1"]) == {"model": model, "problems": []}
    assert model_or_problems(groups, hostvars, ["t1", "login01"], domains=["rack1"]) == {"model": None, "problems": [
        "tray login01 is in the play but in no IMEX domain (no child group of imex_domains holds it); add it to the "
        "group of its rack or NVLink partition, or leave it out of the play"]}
    found = model_or_problems(groups, hostvars, ["t1"], domains=["rack1"], max_nodes=0)
    assert found == {"model": None, "problems": ["max_nodes = 0 (int) is not a positive integer"]}
    # A filter error without problem lines is one problem.
    assert model_or_problems(groups, hostvars, ["t1"]) == {"model": None, "problems": [CANNOT_TELL]}


# --- plugin registration and documentation ------------------------------------------------------

def test_filter_module_registers_the_model_filter_only():
    assert FilterModule().filters() == {"imex_domain_model": imex_domain_model}


@pytest.mark.parametrize("name", ["imex_domain_model"])
def test_documentation_matches_the_signature(name):
    with open(os.path.join(FILTER_DIR, name + ".yml")) as handle:
        doc = yaml.safe_load(handle)
    documentation = doc["DOCUMENTATION"]
    assert documentation["name"] == name
    assert doc["EXAMPLES"].count("rackscale.imex.%s(" % name) >= 1
    assert "_value" in doc["RETURN"]

    parameters = inspect.signature(getattr(filters, name)).parameters
    names = list(parameters)
    assert set(documentation["options"]) == {"_input"} | set(names[1:])
    positional = [part.strip() for part in documentation["positional"].split(",")]
    assert positional == ["_input", names[1]]
    for option, spec in documentation["options"].items():
        if option == "_input" or parameters[option].default is inspect.Parameter.empty:
            assert spec.get("required") is True, option
        elif parameters[option].default is not None:
            assert spec.get("default") == parameters[option].default, option


# --- a real play --------------------------------------------------------------------------------

def _collections_path():
    parts = ROOT.split(os.sep)
    if len(parts) >= 3 and parts[-3] == "ansible_collections":
        return os.sep.join(parts[:-3])
    return os.path.join(ROOT, ".build", "pytest-path")


PLAYBOOK = """\
---
- name: Domain model on the controller
  hosts: all
  gather_facts: false
  tasks:
    - name: Build the model
      ansible.builtin.set_fact:
        model: "{{ groups | rackscale.imex.imex_domain_model(hostvars, driver_version='580.95.09') }}"
      run_once: true
    - name: Report
      ansible.builtin.debug:
        msg:
          model: "{{ model }}"
"""


def test_playbook_with_limit_writes_the_full_rack(tmp_path):
    playbook_cli = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook_cli):
        pytest.skip("ansible-playbook is not installed next to %s" % sys.executable)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    tree = tmp_path / "tree"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=_collections_path(),
               ANSIBLE_VARS_ENABLED="host_group_vars,rackscale.imex.group_tree",
               ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.tree", ANSIBLE_CALLBACK_TREE_DIR=str(tree),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))

    run = subprocess.run(
        [playbook_cli, "-i", EXAMPLE, str(tmp_path / "play.yml"), "--limit", "rack08-tray12",
         "-e", "ansible_connection=local"],
        env=env, capture_output=True, text=True, timeout=120, check=False)

    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads((tree / "rack08-tray12").read_text())["msg"]
    assert result["model"]["domains"]["rack08_p2"]["addresses"] == ["198.19.8.%d" % (10 + t) for t in range(10, 19)]
    assert len(result["model"]["domains"]["rack07"]["addresses"]) == 18
