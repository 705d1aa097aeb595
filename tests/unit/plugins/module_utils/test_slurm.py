# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers of scontrol's output, on what a real slurmctld 24.11.5 or 26.05.5 printed (tests/unit/samples/slurm/)."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils._slurm import (
    channel_plugin_config,
    config_flags,
    config_values,
    expand_hostlist,
    glob_covers,
    parse_node_names,
    parse_show_config,
    parse_show_config_sections,
    parse_show_topology,
    parse_version,
    script_timeouts,
    switch_channel_count,
    timeout_seconds,
)
from ansible_collections.rackscale.imex.plugins.module_utils._text import ParseError
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample


def sample(name):
    return read_sample("slurm", name)


def test_the_debian_version_line_and_schedmd_s_read_alike():
    assert parse_version(sample("scontrol_version_24.11.5.txt")) == {"version": (24, 11, 5), "text": "24.11.5"}
    assert parse_version("slurm 25.05.0-0rc1\n") == {"version": (25, 5, 0), "text": "25.05.0-0rc1"}
    assert parse_version(sample("scontrol_version_26.05.5.txt")) == {"version": (26, 5, 5), "text": "26.05.5"}


@pytest.mark.parametrize("text", ["", "scontrol: fatal: Could not establish a configuration source\n", "slurm\n"])
def test_no_version_is_refused_naming_what_was_printed(text):
    with pytest.raises(ParseError, match="no Slurm version"):
        parse_version(text)


def test_show_config_of_a_block_cluster_with_the_imex_switch():
    config = parse_show_config(sample("show_config_block_alloc_imex.txt"))
    assert config["TopologyPlugin"] == "topology/block"
    assert config_flags(config["PrologFlags"]) == ["Alloc", "Contain"]
    assert config["SwitchType"] == "switch/nvidia_imex"
    assert config["SwitchParameters"] == "imex_channel_count=2048"
    assert config["SLURM_VERSION"] == "24.11.5" and config["SLURM_CONF"] == "/etc/slurm/slurm.conf"
    # Units stay as printed; an empty value is the empty string, "(null)" is None.
    assert config["MessageTimeout"] == "10 sec" and config["PriorityFlags"] == ""
    assert config["TopologyParam"] is None and config_flags(None) == []


def test_show_config_of_a_default_cluster_has_no_topology_plugin_nor_prolog_flags():
    config = parse_show_config(sample("show_config_default.txt"))
    assert config["TopologyPlugin"] == "topology/default"
    assert config["PrologFlags"] is None


def test_contain_implies_alloc_in_what_slurm_reports():
    """slurm.conf said PrologFlags=Contain; slurmctld reports Alloc,Contain."""
    assert config_flags(parse_show_config(sample("show_config_block_contain.txt"))["PrologFlags"]) == ["Alloc", "Contain"]


def test_later_sections_do_not_override_the_main_one():
    sections = parse_show_config_sections(sample("show_config_block_alloc_imex.txt"))
    assert sections["MPI Plugins Configuration"]["PMIxTimeout"] == "300"
    assert "PMIxTimeout" not in sections[""]
    assert "Slurmctld(primary) at slurmctl is UP" not in str(sections)


def test_an_error_instead_of_a_configuration_is_refused():
    with pytest.raises(ParseError):
        parse_show_config("slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)\n")


@pytest.mark.parametrize("text, names", [
    ("tray[01-03]", ["tray01", "tray02", "tray03"]),
    ("rack1-tray[01-04],rack2-tray[01-02]", ["rack1-tray01", "rack1-tray02", "rack1-tray03", "rack1-tray04",
                                             "rack2-tray01", "rack2-tray02"]),
    ("rack[3,1-2]", ["rack3", "rack1", "rack2"]),
    ("a,b,c", ["a", "b", "c"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("r[1-2]t[1-2]", ["r1t1", "r1t2", "r2t1", "r2t2"]),
    ("", []),
    ("(null)", []),
])
def test_host_lists_expand_as_scontrol_show_hostnames_does(text, names):
    assert expand_hostlist(text) == names


@pytest.mark.parametrize("text", ["tray[01-03", "tray]1", "tray[a-b]", "tray[5-1]", "t[0-9999999]"])
def test_host_lists_that_are_not_are_refused(text):
    with pytest.raises(ParseError):
        expand_hostlist(text)


def test_show_topology_of_three_blocks_and_one_aggregated_block():
    records = parse_show_topology(sample("show_topology_3x4_sizes_4_8.txt"))
    assert [(r["name"], r["index"], r["aggregated"], r["size"]) for r in records] == [
        ("rack1", 0, False, 4), ("rack2", 1, False, 4), ("rack3", 2, False, 4), ("rack[1-2]", 3, True, 8)]
    assert records[0]["nodes"] == ["rack1-tray%02d" % n for n in range(1, 5)]
    assert records[3]["members"] == ["rack1", "rack2"]
    assert records[3]["nodes"] == ["rack1-tray%02d" % n for n in range(1, 5)] + ["rack2-tray%02d" % n for n in range(1, 5)]


def test_show_topology_after_reordering_keeps_slurm_s_order():
    records = parse_show_topology(sample("show_topology_after_reconfigure_3_1_2.txt"))
    assert [r["name"] for r in records if not r["aggregated"]] == ["rack3", "rack1", "rack2"]
    assert [(r["members"], r["size"]) for r in records if r["aggregated"]] == [
        (["rack3", "rack1"], 8), (["rack3", "rack1", "rack2"], 16)]


def test_show_topology_without_a_block_plugin_is_no_record():
    assert parse_show_topology(sample("show_topology_flat.txt")) == []
    assert parse_show_topology("SwitchName=s0 Level=0 LinkSpeed=1 Nodes=dev[0-5]\n") == []


def test_show_config_of_26_05_with_topology_yaml():
    """slurm.conf without a TopologyPlugin line, the blocks in topology.yaml: 26.05 reports topology/flat
    (24.11's topology/default), and still runs the blocks of topology.yaml."""
    config = parse_show_config(sample("show_config_26.05_yaml_alloc_imex.txt"))
    assert config["SLURM_VERSION"] == "26.05.5" and config["SLURM_CONF"] == "/etc/slurm/slurm.conf"
    assert config["TopologyPlugin"] == "topology/flat"
    assert channel_plugin_config(config) == {
        "switch_type": "switch/nvidia_imex", "switch_parameters": "imex_channel_count=2048",
        "imex_channel_count": 2048, "prolog_flags": ["Alloc"], "prolog": [], "epilog": [], "version": "26.05.5",
        "prolog_timeout": None, "epilog_timeout": None}


def test_show_topology_of_26_05_reads_as_24_11_s():
    """The same blocks from topology.yaml on 26.05 print exactly as from topology.conf on 24.11."""
    assert sample("show_topology_26.05_yaml_3x4_sizes_4_8.txt") == sample("show_topology_3x4_sizes_4_8.txt")
    records = parse_show_topology(sample("show_topology_26.05_yaml_9_9_18_18_sizes_18_36.txt"))
    assert [(r["name"], r["aggregated"], r["size"], len(r["nodes"])) for r in records] == [
        ("nvl_a", False, 18, 9), ("nvl_b", False, 18, 9), ("rack2", False, 18, 18), ("rack3", False, 18, 18),
        ("nvl_a,nvl_b", True, 36, 18), ("rack[2-3]", True, 36, 36)]
    assert records[4]["members"] == ["nvl_a", "nvl_b"] and records[5]["members"] == ["rack2", "rack3"]


def test_node_names_with_and_without_future_nodes():
    assert parse_node_names(sample("show_nodes_oneliner.txt")) == (
        ["rack%d-tray%02d" % (rack, n) for rack in (1, 2, 3) for n in range(1, 5)])
    assert parse_node_names(sample("show_nodes_oneliner_future.txt"))[-1] == "rack1-tray18"
    assert parse_node_names(sample("show_nodes_oneliner_future_26.05.txt")) == (
        ["rack%d-tray%02d" % (rack, n) for rack in (1, 2, 3) for n in range(1, 5)] + ["spare01"])


def test_repeated_keys_are_read_with_their_index_in_order():
    config = parse_show_config(sample("show_config_two_prologs_count1024_no_alloc.txt"))
    assert config["Prolog[0]"] == "/etc/slurm/prolog.sh" and config["Prolog[1]"] == "/etc/slurm/prolog.d/*"
    assert config_values(config, "Prolog") == ["/etc/slurm/prolog.sh", "/etc/slurm/prolog.d/*"]
    assert config_values(config, "Epilog") == ["/etc/slurm/epilog.sh"]
    assert config_values(parse_show_config(sample("show_config_default.txt")), "Prolog") == []
    # slurm.conf said Prolog=/etc/slurm/prolog.sh,/usr/local/slurm/prolog.d/*: one printed value, two programs.
    config = parse_show_config(sample("show_config_comma_prolog_no_epilog.txt"))
    assert config_values(config, "Prolog") == ["/etc/slurm/prolog.sh", "/usr/local/slurm/prolog.d/*"]
    assert config_values(config, "Epilog") == []


@pytest.mark.parametrize("parameters, count", [
    ("imex_channel_count=1024", 1024), (None, 2048), ("imex_dev_major=505", 2048),
    ("imex_dev_major=505,imex_channel_count=4096", 4096), ("imex_channel_count=lots", None),
])
def test_the_plugins_channel_count_defaults_to_2048(parameters, count):
    assert switch_channel_count(parameters) == count


@pytest.mark.parametrize("pattern, path, covered", [
    ("/etc/slurm/prolog.d/*", "/etc/slurm/prolog.d/90-rackscale-imex", True),
    ("/etc/slurm/prolog.d/9*", "/etc/slurm/prolog.d/90-rackscale-imex", True),
    ("/etc/slurm/prolog.d/90-rackscale-imex", "/etc/slurm/prolog.d/90-rackscale-imex", True),
    ("/etc/slurm/*", "/etc/slurm/prolog.d/90-rackscale-imex", False),
    ("/etc/slurm/prolog.sh", "/etc/slurm/prolog.d/90-rackscale-imex", False),
    ("prolog.d/*", "/etc/slurm/prolog.d/90-rackscale-imex", False),
])
def test_a_prolog_glob_covers_a_path_as_glob_3_matches(pattern, path, covered):
    assert glob_covers(pattern, path) is covered


@pytest.mark.parametrize("value, seconds", [
    ("65534", None), ("0", None), (None, None), ("INFINITE", None), ("UNLIMITED", None), ("300", 300),
    ("300 sec", 300), ("n/a", None),
])
def test_prolog_and_epilog_timeouts_read_as_seconds_or_unlimited(value, seconds):
    assert timeout_seconds(value) == seconds


def test_the_prolog_and_epilog_limits_fall_back_to_prolog_epilog_timeout():
    assert script_timeouts({"PrologEpilogTimeout": "300"}) == {"prolog_timeout": 300, "epilog_timeout": 300}
    assert script_timeouts({"PrologEpilogTimeout": "300", "PrologTimeout": "60"}) == {
        "prolog_timeout": 60, "epilog_timeout": 300}
    assert script_timeouts({}) == {"prolog_timeout": None, "epilog_timeout": None}
