# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options that contradict each other, or could only fail on a tray, are named on the controller."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils._channel import MAX_CHANNEL
from ansible_collections.rackscale.imex.plugins.plugin_utils._option_table import DOMAIN, RUN, TRAY
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import (
    channel_problems,
    option_problems,
    variance_problems,
)

TLS_FILES = {"IMEX_SERVER_KEY": "/k", "IMEX_SERVER_CERT": "/c", "IMEX_SERVER_CERT_AUTH": "/a",
             "IMEX_CLIENT_KEY": "/k", "IMEX_CLIENT_CERT": "/c", "IMEX_CLIENT_CERT_AUTH": "/a"}


def model(*addresses, name="rack1"):
    nodes = [{"host": "t%d" % position, "address": address, "index": position}
             for position, address in enumerate(addresses)]
    return {"domains": {name: {"name": name, "nodes": nodes, "addresses": list(addresses)}}, "host_domain": {}}


IPV4 = model("198.18.1.11", "198.18.1.12")


def test_consistent_options_pass():
    options = {"imex_max_nodes": 18, "imex_lock_wait_s": 0, "imex_validate_timeout_s": 300, "imex_tls": False,
               "imex_settings": {"LOG_LEVEL": 2, "DAEMONIZE": 1}, "imex_tls_target_override": "imex.rack1.example",
               "imex_channels": [{"channel": 5, "owner": "alice", "group": "tenant-a", "mode": "0660"}],
               "imex_cmd_bind_own_address": True}
    assert option_problems(options, IPV4) == []


def test_a_daemon_that_does_not_fork_is_refused():
    assert option_problems({"imex_settings": {"DAEMONIZE": "0"}}, IPV4) == [
        "imex_settings.DAEMONIZE = '0': the nvidia-imex unit is Type=forking, so a daemon that does not fork never "
        "reports started; remove DAEMONIZE from imex_settings"]


def test_authentication_switched_on_by_hand_needs_its_mode_source_and_files():
    assert option_problems({"imex_settings": {"IMEX_ENABLE_AUTH_ENCRYPTION": 1}}, IPV4) == [
        "imex_settings.IMEX_ENABLE_AUTH_ENCRYPTION is 1 but IMEX_AUTH_ENCRYPTION_MODE is not set; set it (SSL_TLS, "
        "GSS_AUTH_ENCRYPT or GSS_AUTH_ONLY), or use imex_tls for mutual TLS"]
    problems = option_problems({"imex_settings": {"IMEX_ENABLE_AUTH_ENCRYPTION": "1",
                                                  "IMEX_AUTH_ENCRYPTION_MODE": "SSL_TLS",
                                                  "IMEX_SERVER_KEY": "/k"}}, IPV4)
    assert problems[0].startswith("imex_settings.IMEX_AUTH_ENCRYPTION_MODE is SSL_TLS but IMEX_AUTH_SOURCE is not set")
    assert "IMEX_SERVER_CERT, IMEX_SERVER_CERT_AUTH, IMEX_CLIENT_KEY, IMEX_CLIENT_CERT, IMEX_CLIENT_CERT_AUTH are not set" \
        in problems[1]
    complete = dict(TLS_FILES, IMEX_ENABLE_AUTH_ENCRYPTION="1", IMEX_AUTH_ENCRYPTION_MODE="SSL_TLS", IMEX_AUTH_SOURCE="FILE")
    assert option_problems({"imex_settings": complete}, IPV4) == []
    assert option_problems({"imex_settings": {"IMEX_ENABLE_AUTH_ENCRYPTION": 1,
                                              "IMEX_AUTH_ENCRYPTION_MODE": "GSS_AUTH_ONLY"}}, IPV4) == []


def test_imex_tls_and_hand_written_authentication_keys_contradict():
    assert option_problems({"imex_tls": True, "imex_settings": {"IMEX_AUTH_SOURCE": "ENV_VAL"}}, IPV4) == [
        "imex_tls is true, which sets the authentication keys itself, but imex_settings also sets IMEX_AUTH_SOURCE; "
        "remove them from imex_settings, or set imex_tls to false"]


def test_control_characters_are_refused_in_every_value_written_to_a_tray():
    problems = option_problems({"imex_settings": {"LOG_FILE_NAME": "/var/log/imex\u2028.log",
                                                  "IMEX_GSS_SERVICE_NAME": "imex\x1b[0m"}}, IPV4)
    assert problems == [
        "imex_settings.IMEX_GSS_SERVICE_NAME: value 'imex\\x1b[0m' contains a control character or line separator",
        "imex_settings.LOG_FILE_NAME: value '/var/log/imex\\u2028.log' contains a control character or line separator"]
    assert option_problems({"imex_unix_socket": "/etc/nvidia-imex/ctl\n.sock", "imex_tls_dir": "/etc/imex/tls"}, IPV4) == [
        "imex_unix_socket: value '/etc/nvidia-imex/ctl\\n.sock' contains a control character or line separator"]
    assert option_problems({"imex_tls_target_override": "tray\x7f"}, IPV4) == [
        "imex_tls_target_override = 'tray\\x7f' is not a host name or address (letters, digits, '.', '-', ':', '_')"]


def test_isolation_channels_with_bad_owner_group_mode_or_twice_are_refused():
    channels = [{"channel": 5, "owner": "alice;reboot"}, {"channel": 6, "group": "ten ant"},
                {"channel": 7, "mode": 660}, {"channel": 5}, {"channel": 8, "state": "gone"}]
    assert option_problems({"imex_channels": channels}, IPV4) == [
        "imex_channels[0] (channel 5): owner 'alice;reboot' is not a user or group name, nor a numeric id",
        "imex_channels[1] (channel 6): group 'ten ant' is not a user or group name, nor a numeric id",
        "imex_channels[2] (channel 7): mode 660 is not an octal mode string such as \"0660\" (quote it in YAML)",
        "imex_channels[3] (channel 5) repeats imex_channels[0]: each channel is listed once",
        "imex_channels[4] (channel 8): state 'gone' is not present or absent"]


def test_the_command_service_cannot_bind_to_a_host_name():
    named = model("tray1.example", "tray2.example")
    assert option_problems({"imex_cmd_bind_own_address": True}, named) == [
        "imex_cmd_bind_own_address is true but domain rack1 uses host names (t0, t1): IMEX_CMD_BIND_INTERFACE_IP "
        "takes an IP address; set imex_address to the trays' IP addresses, or leave imex_cmd_bind_own_address false"]
    assert option_problems({"imex_cmd_bind_own_address": False}, named) == []


def test_domain_names_must_be_report_file_names():
    assert option_problems({}, model("198.18.1.11", name="rack 1")) == [
        "domain group 'rack 1': the name cannot be a report file name (rack 1.json); use letters, digits, '_', '-' and '.'"]


def test_whole_numbers_are_bounded():
    assert option_problems({"imex_ctl_timeout_s": 0, "imex_max_nodes": 100000, "imex_lock_wait_s": "5"}, IPV4) == [
        "imex_max_nodes = 100000 is out of range 1..1024", "imex_ctl_timeout_s = 0 is out of range 1..3600"]


def test_channel_numbers_and_the_modes_that_own_channels():
    assert option_problems({"imex_channels": [{"channel": "0"}, {"channel": 1048576}, {"channel": "x"}]}, IPV4) == [
        "imex_channels[%d] (channel %s): channel must be a whole number from 1 to 1048575 (channel0 is imex_channel0; "
        "the driver's own limit, 2048 by default, is checked on each tray)" % (position, number)
        for position, number in ((0, "0"), (1, 1048576), (2, "x"))]
    assert option_problems({"imex_mode": "dra", "imex_channels": [{"channel": 5}]}, IPV4) == [
        "imex_channels[0] (channel 5): the channels belong to the DRA driver in imex_mode dra; remove imex_channels"]
    assert option_problems({"imex_mode": "dra_host_managed", "imex_channels": [{"channel": 5}]}, IPV4) == []


def test_restart_hooks_are_absolute_paths_of_controller_files(tmp_path):
    hook = tmp_path / "drain.yml"
    hook.write_text("---\n")
    assert option_problems({"imex_pre_restart_tasks": str(hook), "imex_post_restart_tasks": ""}, IPV4) == []
    assert option_problems({"imex_pre_restart_tasks": "hooks/drain.yml",
                            "imex_post_restart_tasks": str(tmp_path / "resume.yml")}, IPV4) == [
        "imex_pre_restart_tasks = 'hooks/drain.yml' is not an absolute path on the controller "
        "(for example \"{{ inventory_dir }}/hooks/drain.yml\")",
        "imex_post_restart_tasks = '%s' is not a file on the controller" % (tmp_path / "resume.yml"),
    ]


# One check for the options of a domain and those of the run: one rule for what is the same value.
DOMAIN_OF = {"t0": "rack1", "t1": "rack1", "u0": "rack2", "u1": "rack2"}
TRAYS = ["t0", "t1", "u0", "u1"]


def by_tray(values):
    """{tray: {option: value}} of {option: [value of each of TRAYS]}."""
    return {tray: {name: held[position] for name, held in values.items()} for position, tray in enumerate(TRAYS)}


def test_one_value_per_domain_passes_whatever_its_spelling():
    values = {"imex_server_port": [50000, "50000", 50100, 50100], "imex_tls": ["yes", True, "false", False],
              "imex_settings": [{"LOG_LEVEL": 2}, {"LOG_LEVEL": "2"}, {}, {}], "imex_mode": ["static"] * 4}
    assert variance_problems(DOMAIN, TRAYS, by_tray(values), DOMAIN_OF) == []


def test_a_tray_set_apart_from_its_domain_is_named_with_both_values():
    values = {"imex_settings": [{}, {"LOG_LEVEL": 4}, {}, {}], "imex_cmd_port": [50005, 50005, 50005, 50006],
              "imex_channels": [[], [], [], []]}
    expected = [
        'domain rack1: imex_settings differs between its trays ({} on t0; {"LOG_LEVEL": "4"} on t1); one domain '
        "runs one daemon configuration: set it for the whole domain group",
        "domain rack2: imex_cmd_port differs between its trays (50005 on u0; 50006 on u1); one domain runs one "
        "daemon configuration: set it for the whole domain group"]
    assert variance_problems(DOMAIN, TRAYS, by_tray(values), DOMAIN_OF) == expected


def test_trays_outside_the_play_are_not_compared():
    # Under --limit only t0 of rack1 runs: nothing to compare it with.
    assert variance_problems(DOMAIN, ["t0"], by_tray({"imex_settings": [{"LOG_LEVEL": 4}, {}, {}, {}]}), DOMAIN_OF) == []


@pytest.mark.parametrize(("scope", "option"), [(DOMAIN, "imex_tls"), (RUN, "imex_rolling")])
def test_a_boolean_given_as_yes_on_one_tray_and_true_on_another_is_one_value(scope, option):
    given = {"t0": {option: "yes"}, "t1": {option: True}, "u0": {option: "on"}, "u1": {option: 1}}
    assert variance_problems(scope, TRAYS, given, DOMAIN_OF) == []
    given["u1"] = {option: "no"}
    assert len(variance_problems(scope, TRAYS, given, DOMAIN_OF)) == 1


@pytest.mark.parametrize(("scope", "option"), [(DOMAIN, "imex_tls"), (RUN, "imex_skip_fabric_check")])
def test_a_value_that_is_no_boolean_is_not_taken_for_false(scope, option):
    """Its own problem is named at the boundary; here it is still not the value false of its peer."""
    given = {"t0": {option: "maybe"}, "t1": {option: False}}
    assert variance_problems(scope, ["t0", "t1"], given, DOMAIN_OF) == [
        {DOMAIN: 'domain rack1: %s differs between its trays ("maybe" on t0; false on t1); one domain runs one '
                 "daemon configuration: set it for the whole domain group",
         RUN: '%s differs between the trays of the run ("maybe" on t0; false on t1); it applies to the whole run: '
              "set it once, for example in group_vars/imex_domains.yml or with -e"}[scope] % option]


@pytest.mark.parametrize(("scope", "option", "given", "converted"), [
    (DOMAIN, "imex_server_port", "50000", 50000), (RUN, "imex_rolling_batch", " 2 ", 2),
    (DOMAIN, "imex_channels", "[{channel: 5}]", [{"channel": 5}]), (RUN, "imex_trays_out_of_service", "", []),
    (DOMAIN, "imex_settings", None, {}), (DOMAIN, "imex_channels", None, []),
    (DOMAIN, "imex_settings", {"LOG_LEVEL": 2}, {"LOG_LEVEL": "2"}),
])
def test_values_are_compared_as_the_converter_makes_them(scope, option, given, converted):
    assert variance_problems(scope, ["t0", "t1"], {"t0": {option: given}, "t1": {option: converted}},
                             DOMAIN_OF) == []


def test_a_null_is_a_value_of_its_own_where_the_type_has_no_empty_value():
    assert variance_problems(RUN, ["t0", "t1"], {"t0": {"imex_max_nodes": None}, "t1": {"imex_max_nodes": 18}}) == [
        "imex_max_nodes differs between the trays of the run (null on t0; 18 on t1); it applies to the whole run: "
        "set it once, for example in group_vars/imex_domains.yml or with -e"]


def test_the_run_compares_every_tray_and_a_domain_its_own_only():
    given = {"t0": {"imex_mode": "static", "imex_report_dir": "r"}, "t1": {"imex_mode": "static", "imex_report_dir": "r"},
             "u0": {"imex_mode": "slurm", "imex_report_dir": "r"}, "u1": {"imex_mode": "slurm", "imex_report_dir": "s"}}
    assert variance_problems(DOMAIN, TRAYS, given, DOMAIN_OF) == []
    assert variance_problems(RUN, TRAYS, given) == [
        'imex_report_dir differs between the trays of the run ("r" on t0, t1, u0; "s" on u1); it applies to the '
        "whole run: set it once, for example in group_vars/imex_domains.yml or with -e"]
    # A tray of no domain of the run (out of service, say) is compared with none.
    assert variance_problems(DOMAIN, TRAYS, dict(given, u1={"imex_mode": "dra"}), {"t0": "rack1", "t1": "rack1",
                                                                                   "u0": "rack2"}) == []


def test_tray_options_may_differ_and_a_domain_check_needs_the_domains():
    with pytest.raises(ValueError, match="not 'tray'"):
        variance_problems(TRAY, TRAYS, {})
    with pytest.raises(ValueError, match="give domain_of"):
        variance_problems(DOMAIN, TRAYS, {})


def test_a_channel_entry_with_an_unknown_key_or_no_channel_is_refused_naming_it():
    assert channel_problems([{"channel": 5, "onwer": "alice"}, {"owner": "bob"}], "static") == [
        "imex_channels[0] (channel 5): unknown key onwer (an entry takes channel, owner, group, mode, state)",
        "imex_channels[1] (channel ?): channel is required"]


@pytest.mark.parametrize(("option", "path"), [
    ("imex_tls_dir", "/etc"), ("imex_tls_dir", "/tmp"), ("imex_tls_dir", "/etc/ssl"), ("imex_tls_dir", "/tmp/tls"),
    ("imex_config_path", "/etc/shadow"), ("imex_config_path", "etc/nvidia-imex/config.cfg"),
    ("imex_config_path", "/etc/nvidia-imex/../shadow"), ("imex_nodes_config_path", "/etc/nvidia-imex/a#b"),
    ("imex_unix_socket", "/etc/nvidia-imex/imex ctrl.sock"), ("imex_config_path", "//etc/nvidia-imex/config.cfg"),
])
def test_tray_paths_outside_a_directory_of_their_own_are_refused(option, path):
    from ansible_collections.rackscale.imex.plugins.plugin_utils._options import path_problem
    problem = path_problem(option, path)
    assert problem and problem.startswith("%s = %r " % (option, path)), problem


@pytest.mark.parametrize("path", ["/etc/nvidia-imex/config.cfg", "/etc/nvidia-imex/tls", "/opt/imex/tls",
                                  "/etc/nvidia-imex/imex_ctrl.sock"])
def test_tray_paths_in_a_directory_of_their_own_pass(path):
    from ansible_collections.rackscale.imex.plugins.plugin_utils._options import path_problem
    assert path_problem("imex_tls_dir", path) is None


@pytest.mark.parametrize("service", ["nvidia-imex' 'sshd", "nvidia-imex sshd", "-nvidia-imex", "imex;reboot", ""])
def test_a_service_that_is_not_one_systemd_unit_is_refused(service):
    problems = option_problems({"imex_service": service}, {"domains": {}, "host_domain": {}})
    assert problems == ["imex_service = %r is not a systemd unit name (letters, digits and ':_.@-', one unit)"
                        % service]


def test_channel_entries_are_compared_as_numbers_and_ids_and_modes_that_cannot_hold_are_refused():
    assert channel_problems([{"channel": 5}, {"channel": "05"}, {"channel": 6, "owner": 4294967295},
                             {"channel": 7, "group": "9999999999"}, {"channel": 8, "mode": "0666"},
                             {"channel": 9, "mode": "0777"}, {"channel": 10, "mode": "0660", "owner": 1000}],
                            "static") == [
        "imex_channels[1] (channel 05) repeats imex_channels[0]: each channel is listed once",
        "imex_channels[2] (channel 6): owner 4294967295 is beyond the largest id a tray can hold (4294967294)",
        "imex_channels[3] (channel 7): group '9999999999' is beyond the largest id a tray can hold (4294967294)",
        "imex_channels[4] (channel 8): mode '0666' lets every local user write the channel, which isolates "
        "nothing; use a group, for example \"0660\"",
        "imex_channels[5] (channel 9): mode '0777' lets every local user write the channel, which isolates "
        "nothing; use a group, for example \"0660\""]


@pytest.mark.parametrize("text", ["imex\x85host", "imex\u2028host", "imex\u2029host", "imex\x00host"])
def test_line_breaking_characters_are_refused_in_settings(text):
    problems = option_problems({"imex_settings": {"IMEX_GSS_SERVICE_NAME": text}}, {"domains": {}, "host_domain": {}})
    assert problems == ["imex_settings.IMEX_GSS_SERVICE_NAME: value %r contains a control character or line "
                        "separator" % text]


def test_a_bind_address_for_every_tray_of_a_domain_is_refused():
    problems = option_problems({"imex_settings": {"BIND_INTERFACE_IP": "10.0.0.1"}}, {"domains": {}, "host_domain": {}})
    assert problems == ["imex_settings.BIND_INTERFACE_IP = '10.0.0.1': one value for every tray of a domain gives "
                        "them all one address, and every daemon but one would fail to start; each daemon finds its "
                        "own address in the node list, so leave it out"]


# Hostile values as -e and an AWX survey send them (strings), each refused naming its option.
NO_DOMAINS = {"domains": {}, "host_domain": {}}


@pytest.mark.parametrize("channel", ["²", "5\n", "٥", "５", "-5", "5.5", True, None])
def test_a_channel_number_of_anything_but_ascii_digits_is_refused_naming_the_option(channel):
    problems = channel_problems([{"channel": channel}], "static")
    assert problems == ["imex_channels[0] (channel %s): channel must be a whole number from 1 to %d (channel0 is "
                        "imex_channel0; the driver's own limit, 2048 by default, is checked on each tray)"
                        % (channel, MAX_CHANNEL)]


def test_a_channel_given_as_text_or_an_awx_float_is_one_channel():
    assert channel_problems([{"channel": "5"}, {"channel": 5.0}], "static") == [
        "imex_channels[1] (channel 5.0) repeats imex_channels[0]: each channel is listed once"]


@pytest.mark.parametrize("owner", ["alice\n", "٥", "1000\n", "alice\u2028", "bob\u00a0"])
def test_channel_owners_and_groups_are_matched_whole(owner):
    for key in ("owner", "group"):
        problems = channel_problems([{"channel": 5, key: owner}], "static")
        assert problems == ["imex_channels[0] (channel 5): %s %r is not a user or group name, nor a numeric id"
                            % (key, owner)]


@pytest.mark.parametrize("mode", ["0660\n", "０660"])
def test_a_channel_mode_is_matched_whole(mode):
    assert channel_problems([{"channel": 5, "mode": mode}], "static")[0].startswith(
        "imex_channels[0] (channel 5): mode %r is not an octal mode string" % mode)


@pytest.mark.parametrize("service", ["..", "nvidia-imex\n", "nvidia\\x2dimex", ".nvidia-imex", "a..b", "nvidia\u200bimex"])
def test_a_service_name_is_matched_whole_without_escapes_or_dot_dot(service):
    assert option_problems({"imex_service": service}, NO_DOMAINS) == [
        "imex_service = %r is not a systemd unit name (letters, digits and ':_.@-', one unit)" % service]


@pytest.mark.parametrize("name", ["-n", "node\n", "node x", "node\u2029", ".node", "nöde"])
def test_a_slurm_node_name_is_one_word_matched_whole(name):
    assert option_problems({"imex_slurm_node_name": name}, NO_DOMAINS) == [
        "imex_slurm_node_name = %r is not a Slurm node name (letters, digits, '_', '.', '-', not starting with '-' "
        "or '.')" % name]


@pytest.mark.parametrize("version", ["580.95.05\n", "５80.95.05", "580.95.05-x\ny", "580", "580.95.05 "])
def test_a_driver_version_is_matched_whole(version):
    assert option_problems({"imex_driver_version": version}, NO_DOMAINS) == [
        "imex_driver_version = %r is not a driver release such as 580.95.05" % version]


@pytest.mark.parametrize("version", ["580.95.05", "570.158.01", "580.95.09-0ubuntu1", "580.95"])
def test_driver_releases_pass(version):
    assert option_problems({"imex_driver_version": version}, NO_DOMAINS) == []


@pytest.mark.parametrize("override", ["imex.rack1\n", "imex\u3000rack1"])
def test_a_tls_target_override_is_matched_whole(override):
    assert option_problems({"imex_tls_target_override": override}, NO_DOMAINS) == [
        "imex_tls_target_override = %r is not a host name or address (letters, digits, '.', '-', ':', '_')"
        % override]


@pytest.mark.parametrize("value", ["rack\u0085", "rack\u200e", "rack\u00a0a", "rack\x1b[31m"])
def test_every_other_string_option_is_free_of_control_and_separator_characters(value):
    assert option_problems({"imex_domains_group": value}, NO_DOMAINS) == [
        "imex_domains_group: value %r contains a control character or line separator" % value]


def test_tls_options_may_hold_pem_text_with_its_newlines():
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    assert option_problems({"imex_tls_ca": pem, "imex_tls_cert": pem}, NO_DOMAINS) == []


def test_the_partition_of_the_probe_is_matched_whole():
    from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import per_job_option_problems
    options = {"imex_slurm_prolog_dir": "/etc/slurm/prolog.d", "imex_slurm_epilog_dir": "/etc/slurm/epilog.d"}
    for partition in ("batch\n", "-p", "bätch"):
        assert per_job_option_problems(dict(options, imex_slurm_probe_partition=partition)) == [
            "imex_slurm_probe_partition = %r is not a Slurm partition name (letters, digits, '_', '.', '-')"
            % partition]
    assert per_job_option_problems(dict(options, imex_slurm_probe_partition="batch")) == []


# The controller directories of the run's records.
@pytest.mark.parametrize("path", ["imex-reports", "reports/rack1", "/var/lib/node_exporter/textfile_collector",
                                  "/var/lib/prometheus/node-exporter", "/srv/imex/reports", "/home/ops/imex"])
def test_record_directories_of_the_operator_pass(path):
    from ansible_collections.rackscale.imex.plugins.plugin_utils._options import controller_dir_problem
    for option in ("imex_report_dir", "imex_textfile_dir"):
        assert controller_dir_problem(option, path, cwd="/home/ops", resolve=lambda found: found) is None


@pytest.mark.parametrize(("path", "reason"), [
    ("/", "is /, a system directory of the controller"),
    ("/etc", "is /etc, a system directory of the controller"),
    ("/usr", "is /usr, a system directory of the controller"),
    ("/var/lib", "is /var/lib, a system directory of the controller"),
    ("/var/lib/", "is /var/lib, a system directory of the controller"),
    ("/var/cache", "is /var/cache, a system directory of the controller"),
    ("/etc/ssh", "lies in /etc, a system tree of the controller"),
    ("/usr/share/imex", "lies in /usr, a system tree of the controller"),
    ("../../../etc", "is /etc, a system directory of the controller"),
    ("/var/lib/dpkg", "is a file or directory of other software (/var/lib/dpkg)"),
    ("/var/lib/dpkg/info", "is inside one of other software (/var/lib/dpkg)"),
    ("/root/.ssh", "is a file or directory of other software (/root/.ssh)"),
    ("/home/ops/.ssh/reports", "is inside one of other software (.ssh)"),
    ("/var/log/journal", "is a file or directory of other software (/var/log/journal)"),
])
def test_system_and_other_software_directories_of_the_controller_are_refused(path, reason):
    from ansible_collections.rackscale.imex.plugins.plugin_utils._options import controller_dir_problem
    for option in ("imex_report_dir", "imex_textfile_dir"):
        problem = controller_dir_problem(option, path, cwd="/home/ops", resolve=lambda found: found)
        assert problem and problem.startswith("%s = %r %s" % (option, path, reason)), problem


def test_the_default_relative_directory_stays_allowed_wherever_the_playbook_runs():
    from ansible_collections.rackscale.imex.plugins.plugin_utils._options import controller_dir_problem
    assert controller_dir_problem("imex_report_dir", "imex-reports", cwd="/etc/ansible",
                                  resolve=lambda found: found) is None
    assert controller_dir_problem("imex_report_dir", "../ssh", cwd="/etc/ansible", resolve=lambda found: found) \
        .startswith("imex_report_dir = '../ssh' is a file or directory of other software (/etc/ssh)")
    assert controller_dir_problem("imex_report_dir", "..", cwd="/etc/ansible", resolve=lambda found: found) \
        .startswith("imex_report_dir = '..' is /etc, a system directory of the controller")


def test_a_record_directory_that_is_a_link_to_a_system_directory_is_refused():
    from ansible_collections.rackscale.imex.plugins.plugin_utils._options import controller_dir_problem
    problem = controller_dir_problem("imex_report_dir", "/srv/reports", resolve={"/srv/reports": "/etc"}.get)
    assert problem.startswith("imex_report_dir = '/srv/reports' is /etc, a system directory of the controller")


def test_the_record_directories_are_checked_with_the_options():
    assert option_problems({"imex_report_dir": "/etc", "imex_textfile_dir": "reports\n"}, NO_DOMAINS) == [
        "imex_report_dir = '/etc' is /etc, a system directory of the controller: name a directory of the run's "
        "records (the default imex-reports, or for example /var/lib/rackscale-imex/reports)",
        "imex_textfile_dir: value 'reports\\n' contains a control character or line separator"]
    assert option_problems({"imex_report_dir": ""}, NO_DOMAINS) == [
        "imex_report_dir is empty: name the controller directory of the run's records (the default is imex-reports)"]
    assert option_problems({"imex_report_dir": "imex-reports", "imex_textfile_dir": ""}, NO_DOMAINS) == []


# The daemon's own log files.
@pytest.mark.parametrize("path", ["/var/log/nvidia-imex.log", "/var/log/imex/rack1.log", ""])
def test_daemon_logs_under_var_log_pass(path):
    assert option_problems({"imex_settings": {"LOG_FILE_NAME": path, "STATS_FILE_NAME": path}}, NO_DOMAINS) == []


@pytest.mark.parametrize(("path", "reason"), [
    ("/etc/shadow", "must be an absolute, normalised path of a file under /var/log"),
    ("/var/log", "must be an absolute, normalised path of a file under /var/log"),
    ("/var/log/../../etc/shadow", "must be an absolute, normalised path of a file under /var/log"),
    ("var/log/imex.log", "must be an absolute, normalised path of a file under /var/log"),
    ("/var/log/imex #1.log", "must be an absolute, normalised path of a file under /var/log"),
    ("/var/log/auth.log", "is a file or directory of other software (/var/log/auth.log)"),
    ("/var/log/journal/imex.log", "is inside one of other software (/var/log/journal)"),
])
def test_a_daemon_log_anywhere_else_is_refused_naming_the_key(path, reason):
    for key in ("LOG_FILE_NAME", "STATS_FILE_NAME"):
        problems = option_problems({"imex_settings": {key: path}}, NO_DOMAINS)
        assert len(problems) == 1 and problems[0].startswith("imex_settings.%s = %r %s" % (key, path, reason)), problems


# The tray paths against each other and against other software.
DEFAULT_PATHS = {"imex_config_path": "/etc/nvidia-imex/config.cfg",
                 "imex_nodes_config_path": "/etc/nvidia-imex/nodes_config.cfg",
                 "imex_unix_socket": "/etc/nvidia-imex/imex_ctrl.sock", "imex_tls_dir": "/etc/nvidia-imex/tls"}


def test_the_default_tray_paths_pass():
    assert option_problems(dict(DEFAULT_PATHS), NO_DOMAINS) == []


@pytest.mark.parametrize(("changes", "refused"), [
    ({"imex_nodes_config_path": "/etc/nvidia-imex/config.cfg"},
     "imex_config_path and imex_nodes_config_path are both '/etc/nvidia-imex/config.cfg': each names a file of its own"),
    ({"imex_config_path": "/etc/nvidia-imex/tls/config.cfg"},
     "imex_config_path = '/etc/nvidia-imex/tls/config.cfg' lies in imex_tls_dir = '/etc/nvidia-imex/tls', which "
     "holds the TLS files (ca.crt, tray.crt, tray.key, reloaded) alone"),
    ({"imex_settings": {"LOG_FILE_NAME": "/var/log/imex/tls/x.log"}, "imex_tls_dir": "/var/log/imex/tls"},
     "imex_settings.LOG_FILE_NAME = '/var/log/imex/tls/x.log' lies in imex_tls_dir = '/var/log/imex/tls', which holds the "
     "TLS files (ca.crt, tray.crt, tray.key, reloaded) alone"),
    ({"imex_unix_socket": "/etc/nvidia-imex/config.cfg/ctl.sock"},
     "imex_unix_socket = '/etc/nvidia-imex/config.cfg/ctl.sock' lies in imex_config_path = "
     "'/etc/nvidia-imex/config.cfg': one path cannot be inside another"),
    ({"imex_settings": {"LOG_FILE_NAME": "/var/log/imex.log", "STATS_FILE_NAME": "/var/log/imex.log"}}, None),
])
def test_tray_paths_that_are_equal_or_nest_are_refused(changes, refused):
    problems = option_problems(dict(DEFAULT_PATHS, **changes), NO_DOMAINS)
    assert problems == ([refused] if refused else [])


@pytest.mark.parametrize(("option", "path", "known"), [
    ("imex_config_path", "/etc/ssh/sshd_config", "/etc/ssh"),
    ("imex_config_path", "/root/.ssh/id_ed25519", "/root/.ssh"),
    ("imex_config_path", "/proc/sys/kernel/core_pattern", "/proc"),
    ("imex_nodes_config_path", "/etc/sudoers.d/imex", "/etc/sudoers.d"),
    ("imex_nodes_config_path", "/etc/cron.d/imex", "/etc/cron.d"),
    ("imex_config_path", "/etc/pam.d/imex", "/etc/pam.d"),
    ("imex_config_path", "/etc/systemd/system/imex.service", "/etc/systemd"),
    ("imex_config_path", "/usr/lib/systemd/system/nvidia-imex.service", "/usr/lib/systemd"),
    ("imex_tls_dir", "/sys/kernel/imex", "/sys"),
    ("imex_tls_dir", "/boot/grub/imex", "/boot"),
    ("imex_unix_socket", "/home/ops/.ssh/ctl.sock", ".ssh"),
    ("imex_config_path", "/etc/security/limits.conf", "/etc/security"),
])
def test_tray_paths_of_other_software_are_refused(option, path, known):
    problems = option_problems(dict(DEFAULT_PATHS, **{option: path}), NO_DOMAINS)
    assert len(problems) == 1 and problems[0].startswith("%s = %r is " % (option, path)) \
        and problems[0].endswith("of other software (%s): the collection would write or read it back; choose a "
                                 "path of its own" % known), problems


@pytest.mark.parametrize(("option", "path"), [("imex_config_path", "/etc/shadow"), ("imex_config_path", "/etc/passwd"),
                                              ("imex_nodes_config_path", "/etc/group"), ("imex_tls_dir", "/proc")])
def test_account_files_and_kernel_views_are_refused_as_system_paths(option, path):
    problems = option_problems(dict(DEFAULT_PATHS, **{option: path}), NO_DOMAINS)
    assert problems == ["%s = %r is a system directory or directly in one; it must lie in a directory of its own "
                        "below them (for example /etc/nvidia-imex/...)" % (option, path)]
