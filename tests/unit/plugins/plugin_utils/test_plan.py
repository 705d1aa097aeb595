# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run plan of the imex role (plugins/plugin_utils/plan/), stage by stage, in pure Python.

Every input is what the role hands the planner: each tray's own options (the role's defaults
applied on that tray), the domain model of _domain.build_model, the one read of each tray as
imex_tray_info returns it (files described as _files.describe_file describes them), the writes'
registered results and the leader's imex_status result. Nothing here touches a file of a tray.
"""
from __future__ import annotations

import hashlib
import os
import time
import uuid

import pytest
import yaml
from cryptography import x509

from ansible_collections.rackscale.imex.plugins.plugin_utils._option_table import RUN
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import variance_problems
from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import apply_settings, validate_settings
from ansible_collections.rackscale.imex.plugins.module_utils._nodes import FILE_MODE, render_nodes, validate_nodes
from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.plugins.plugin_utils._domain import build_model
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import is_pem
from ansible_collections.rackscale.imex.plugins.plugin_utils._tls import fingerprint
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import PlanError
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.defaults import DECIDED, decided
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import material
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
SERVICE = "nvidia-imex"
NODES_PATH = "/etc/nvidia-imex/nodes_config.cfg"
CONFIG_PATH = "/etc/nvidia-imex/config.cfg"
TLS_DIR = "/etc/nvidia-imex/tls"
SOCKET = "/etc/nvidia-imex/imex_ctrl.sock"
STOCK = read_sample("files", "stock_config.cfg")
DRIVER = "580.95.09"
# When the daemons of a read started (2025-11-25T14:00:00Z), and a change time well before it.
STARTED = 1764079200.0
BEFORE = STARTED - 3600
PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
# TLS material that passes the controller's checks for every address model_of gives, now and for years.
TLS_PEM = material(ips=["198.18.%d.%d" % (group, 11 + index) for group in range(1, 5) for index in range(8)],
                   now=time.time(), days=3650)
TLS_PEM_HELD = [[fingerprint(certificate) for certificate in x509.load_pem_x509_certificates(TLS_PEM[option].encode())]
                for option in ("imex_tls_ca", "imex_tls_cert")]
TWO_RACKS = {"rackA": ["a1", "a2"], "rackB": ["b1", "b2"]}
SAME = "9f2c" * 16


# --- inputs --------------------------------------------------------------------------------------

def _load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


# What the role's first task gathers on each tray, and the role's defaults.
GATHERED = _load("roles", "imex", "vars", "main.yml")["__imex_options"]
DEFAULTS = _load("roles", "imex", "defaults", "main.yml")


def role_options(**overrides):
    """One tray's options as the plan takes them: its own values over the role's defaults, converted, with
    the defaults the plan decides (imex_channel0 from the mode, ...) decided for that tray (outside AWX)."""
    options = {name: run_plan.convert_option(name, DEFAULTS[name])[0] for name in GATHERED}
    options.update(overrides)
    return decided(options)


def model_of(domains, hostnames=(), order=None):
    """The domain model of {domain group: [trays]}: tray i of the n-th group at 198.18.n.(11+i), or
    <tray>.example.net for the groups in ``hostnames``; ``order`` gives imex_node_index per tray."""
    groups = {"imex_domains": [tray for trays in domains.values() for tray in trays]}
    hostvars = {}
    for number, (name, trays) in enumerate(domains.items(), start=1):
        groups[name] = list(trays)
        for index, tray in enumerate(trays):
            hostvars[tray] = {"imex_address": "%s.example.net" % tray if name in hostnames
                              else "198.18.%d.%d" % (number, 11 + index)}
            if order:
                hostvars[tray]["imex_node_index"] = order[tray]
    return build_model(groups, hostvars, domain_groups=list(domains))


def options_of(model, every=None, **by_tray):
    """{tray: its options} for every tray of the model: ``every`` on all, then each tray's own."""
    return {tray: role_options(**dict(every or {}, **by_tray.get(tray, {}))) for tray in model["host_domain"]}


def preflight(model, options, play_hosts=None, **kwargs):
    return run_plan.preflight.preflight(model, options, list(options) if play_hosts is None else play_hosts, "run-1", **kwargs)


def subset(found, expected):
    """``found`` holds every key of ``expected`` with its value (the plan may carry more)."""
    assert {key: found.get(key) for key in expected} == expected
    return True


def refused(function, *args, **kwargs):
    with pytest.raises(PlanError) as info:
        function(*args, **kwargs)
    assert str(info.value) == "\n".join(info.value.problems)
    return info.value.problems


def described(content, ctime=BEFORE, mode=FILE_MODE):
    """A file as _files.describe_file describes it."""
    return {"exists": True, "sha256": hashlib.sha256(content.encode("utf-8")).hexdigest(), "content": content,
            "ctime": ctime, "uid": 0, "gid": 0, "mode": mode, "error": None}


def stated(ctime=BEFORE, mode="0644"):
    """A file as _files.stat_file describes it (TLS material: never read)."""
    return {"exists": True, "ctime": ctime, "uid": 0, "gid": 0, "mode": mode, "error": None}


# What a tray out of the per-job mode is read for: the per-job program and map, to remove them.
LEFTOVERS = ["/etc/rackscale-imex/slurm-job.json", "/etc/slurm/epilog.d/90-rackscale-imex",
             "/etc/slurm/prolog.d/90-rackscale-imex"]
ABSENT = {"exists": False, "ctime": None, "uid": None, "gid": None, "mode": None, "error": None}


def cluster(name):
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, name))


def wanted_files(plan, tray):
    """(node list, config.cfg) text exactly as the write modules would leave them on ``tray``."""
    entry = plan["trays"][tray]
    nodes = render_nodes(validate_nodes(plan["domains"][entry["domain"]]["addresses"]))
    return nodes, apply_settings(STOCK, validate_settings(entry["settings"]))[0]


def instance_of(tray, started, loaded):
    """services_instance of a daemon started at ``started`` whose record says it loaded ``loaded``
    ({path: text}; None: no record, as for a daemon started by hand)."""
    invocation = hashlib.md5(("%s %s" % (tray, started)).encode()).hexdigest()
    record = None if loaded is None else {"invocation_id": invocation, "files": {
        path: hashlib.sha256(text.encode("utf-8")).hexdigest() for path, text in loaded.items()}}
    return {"invocation_id": invocation, "inactive_exit": started, "loaded": record}


def read_of(plan, tray, active=True, started=STARTED, nodes=None, config=None, ctime=BEFORE, loaded=(), **extra):
    """The imex_tray_info read of a converged tray (no drift, daemon younger than its files, which a
    run of the collection started: its record says it loaded them) on the NVLink partition of its
    domain; keyword arguments replace what differs. ``loaded``: what the record of the running daemon
    says it loaded ({path: text}; None: no record, as for a daemon started by hand); by default the
    files on disk, but no record for a daemon older than its files, judged by their change times."""
    entry = plan["trays"][tray]
    nodes_text, config_text = wanted_files(plan, tray)
    if loaded == ():
        loaded = {NODES_PATH: nodes_text, CONFIG_PATH: config_text} if started >= ctime else None
    read = {
        "fabric_ok": True, "cluster_uuid": cluster(entry["domain"]), "clique_id": 32766, "problems": [],
        "driver_version": DRIVER, "imex_version": DRIVER,
        "files": {NODES_PATH: described(nodes_text if nodes is None else nodes, ctime),
                  CONFIG_PATH: described(config_text if config is None else config, ctime)},
        # The per-job program is not installed (a tray that never ran the slurm_per_job mode).
        "stat_files": {path: ABSENT if path in entry["slurm_job_leftovers"] else stated(ctime)
                       for path in entry["read_stat_files"]},
        "services": {SERVICE: "active" if active else "inactive"},
        "services_started": {SERVICE: started if active else None},
        "services_instance": {SERVICE: instance_of(tray, started, loaded) if active else None},
        "compute_apps": [],
        "slurm": {"installed": False, "node": tray, "state": None, "error": None}, "slurm_state": None,
        "channels": {str(item["channel"]): {"changed": False} for item in entry["channel_entries"]},
        # The TLS material on disk is TLS_PEM's (what imex_tray_info reports of ca.crt and tray.crt).
        "certificate_files": {path: {"exists": True, "sha256": held, "error": None}
                              for path, held in zip(entry.get("read_certificate_files") or [], TLS_PEM_HELD)},
    }
    read.update(extra)
    return read


def reads_of(plan, **by_tray):
    return {tray: read_of(plan, tray, **by_tray.get(tray, {})) for tray in plan["trays"]}


def unreachable_read():
    """What the run registers for a tray ssh did not reach."""
    return {"unreachable": True, "changed": False, "msg": "Failed to connect to the host via ssh"}


def planned(domains=None, every=None, by_tray=None, reads=None, play_hosts=None, check_mode=False, converge=True,
            model=None, **after):
    """(model, options, plan after the read): preflight then after_read on converged trays, or on
    ``reads`` ({tray: read_of keyword arguments})."""
    model = model or model_of(domains or TWO_RACKS)
    options = options_of(model, every, **(by_tray or {}))
    if play_hosts is not None:
        options = {tray: options[tray] for tray in play_hosts}
    plan = preflight(model, options, check_mode=check_mode)
    found = reads_of(plan, **(reads or {}))
    return model, options, run_plan.read.after_read(plan, model, options, found, converge=converge, **after)


def wrote(nodes=False, config=False, tls=None, checksum=SAME):
    """A tray's registered results of the three writes; TLS not copied (None) is what no register gives."""
    return {"node list": {"changed": nodes, "checksum": checksum}, "config": {"changed": config},
            "TLS material": {} if tls is None else {"changed": tls}}


SKIPPED = {"node list": {"changed": False, "skipped": True}, "config": {"changed": False, "skipped": True},
           "TLS material": {}}


def status_of(plan, name, not_ready=(), healthy=None, **fields):
    """The imex_status result the leader of ``name`` reads: every node READY but ``not_ready`` trays."""
    domain = plan["domains"][name]
    down = [domain["trays"].index(tray) for tray in not_ready]
    nodes = [{"index": index, "address": address, "status": "UNAVAILABLE" if index in down else "READY",
              "version": DRIVER, "hostname": domain["trays"][index], "reported": True}
             for index, address in enumerate(domain["addresses"])]
    healthy = not down if healthy is None else healthy
    status = {"domain_state": "UP" if healthy else "DEGRADED", "local_state": "READY", "healthy": healthy,
              "nodes": nodes, "broken_pairs": [], "source": "json", "elapsed": 0.1,
              "problems": ["node %d (%s, %s) is UNAVAILABLE" % (index, domain["addresses"][index], domain["trays"][index])
                           for index in down]}
    status.update(fields)
    return status


def all_ready(plan, wave):
    return {name: status_of(plan, name) for name in wave}


# --- the boundary: option values converted once ---------------------------------------------------

@pytest.mark.parametrize(("given", "converted"), [
    ("true", True), ("yes", True), ("True", True), ("1", True), (1, True), (True, True),
    ("false", False), ("no", False), ("0", False), ("off", False), (0, False), (False, False),
])
def test_booleans_from_the_command_line_or_a_survey_are_converted(given, converted):
    assert run_plan.convert_option("imex_tls", given) == (converted, None)


@pytest.mark.parametrize("given", ["maybe", "", "2", 2, [True]])
def test_a_value_that_is_no_boolean_is_named_with_its_option(given):
    assert run_plan.convert_option("imex_allow_busy_restart", given) == (
        given, "imex_allow_busy_restart = %r is not a boolean" % (given,))


@pytest.mark.parametrize(("given", "converted"), [("50000", 50000), (" 7 ", 7), (50000, 50000), ("0", 0)])
def test_whole_numbers_given_as_text_are_converted(given, converted):
    assert run_plan.convert_option("imex_server_port", given) == (converted, None)


@pytest.mark.parametrize("given", ["fifty", "", "5e4", "3.5", 3.5, True, False, [1]])
def test_a_value_that_is_no_whole_number_is_named_with_its_option(given):
    assert run_plan.convert_option("imex_ctl_timeout_s", given) == (
        given, "imex_ctl_timeout_s = %r is not a whole number" % (given,))


@pytest.mark.parametrize(("given", "converted"), [
    ('{"LOG_LEVEL": 2, "IMEX_WAIT_FOR_QUORUM": "NONE"}', {"LOG_LEVEL": 2, "IMEX_WAIT_FOR_QUORUM": "NONE"}),  # -e JSON
    ("LOG_LEVEL: 2\nSTATS_FILE_NAME: null\n", {"LOG_LEVEL": 2, "STATS_FILE_NAME": None}),  # AWX textarea, YAML
    ("{LOG_LEVEL: 2}", {"LOG_LEVEL": 2}),
    ("", {}), ("   \n", {}), ("null", {}), ("~", {}),
    ({"LOG_LEVEL": 2}, {"LOG_LEVEL": 2}),
])
def test_mappings_given_as_json_or_yaml_text_are_parsed(given, converted):
    assert run_plan.convert_option("imex_settings", given) == (converted, None)


@pytest.mark.parametrize(("given", "converted"), [
    ('[{"channel": 5, "owner": "alice", "mode": "0660"}]', [{"channel": 5, "owner": "alice", "mode": "0660"}]),
    ("- channel: 5\n  group: tenant-a\n- channel: 6\n", [{"channel": 5, "group": "tenant-a"}, {"channel": 6}]),
    ("[]", []), ("", []), (" ", []), ("null", []),
    ([{"channel": 5}], [{"channel": 5}]),
])
def test_lists_given_as_json_or_yaml_text_are_parsed(given, converted):
    assert run_plan.convert_option("imex_channels", given) == (converted, None)


@pytest.mark.parametrize(("name", "given", "kind"), [
    ("imex_settings", "LOG_LEVEL=2", "mapping"),
    ("imex_settings", "[1, 2]", "mapping"),
    ("imex_settings", "{LOG_LEVEL: [", "mapping"),  # not YAML at all
    ("imex_settings", ["LOG_LEVEL"], "mapping"),
    ("imex_channels", "{channel: 5}", "list"),
    ("imex_channels", "5", "list"),
    ("imex_channels", {"channel": 5}, "list"),
])
def test_text_that_is_not_the_declared_mapping_or_list_is_named(name, given, kind):
    assert run_plan.convert_option(name, given) == (given, "%s = %r is not a %s" % (name, given, kind))


def test_text_options_are_text_and_unknown_options_pass_unchanged():
    assert run_plan.convert_option("imex_driver_version", 580) == ("580", None)
    assert run_plan.convert_option("imex_tls_key", PEM) == (PEM, None)
    assert run_plan.convert_option("imex_something_new", {"a": 1}) == ({"a": 1}, None)
    # An option left unset stays unset; the role's argument spec refuses null where it has a default.
    assert run_plan.convert_option("imex_server_port", None) == (None, None)


def test_convert_options_converts_every_option_and_names_every_bad_one():
    options, problems = run_plan.convert_options({
        "imex_tls": "yes", "imex_server_port": "50100", "imex_settings": '{"LOG_LEVEL": "2"}', "imex_channels": "",
        "imex_cmd_port": "fifty", "imex_rolling": "sometimes", "imex_mode": "static"})
    assert options == {"imex_tls": True, "imex_server_port": 50100, "imex_settings": {"LOG_LEVEL": "2"},
                       "imex_channels": [], "imex_cmd_port": "fifty", "imex_rolling": "sometimes",
                       "imex_mode": "static"}
    assert problems == ["imex_cmd_port = 'fifty' is not a whole number", "imex_rolling = 'sometimes' is not a boolean"]


def test_these_tests_feed_the_plan_the_role_defaults():
    # test_option_table.py keeps the option table and the gathered options in step with the spec.
    assert sorted(role_options()) == sorted(GATHERED)
    # No default computes: the role leaves null what the plan decides.
    assert [name for name in DEFAULTS if isinstance(DEFAULTS[name], str) and "{{" in DEFAULTS[name]] == []
    assert sorted(name for name in GATHERED if DEFAULTS[name] is None) == sorted(DECIDED)
    options = role_options()
    assert (options["imex_config_path"], options["imex_nodes_config_path"], options["imex_service"]) == (
        CONFIG_PATH, NODES_PATH, SERVICE)
    assert (options["imex_unix_socket"], options["imex_tls_dir"]) == (SOCKET, TLS_DIR)
    assert (options["imex_mode"], options["imex_channel0"], options["imex_tls"]) == ("static", True, False)
    assert (options["imex_server_port"], options["imex_cmd_port"]) == (50000, 50005)
    assert role_options(imex_mode="slurm")["imex_channel0"] is False


# --- what each tray is meant to hold --------------------------------------------------------------

def test_daemon_settings_without_tls_switch_authentication_off_and_set_the_owned_keys():
    settings = run_plan.daemon_settings(role_options(imex_settings={"LOG_LEVEL": 2, "STATS_FILE_NAME": None}),
                                        "198.18.1.11")
    assert settings == {
        "IMEX_ENABLE_AUTH_ENCRYPTION": "0", "LOG_LEVEL": 2, "STATS_FILE_NAME": None,
        "IMEX_CMD_ENABLED": "1", "IMEX_CMD_PORT": "50005", "SERVER_PORT": "50000",
        "IMEX_NODE_CONFIG_FILE": NODES_PATH, "IMEX_CMD_BIND_INTERFACE_IP": "", "IMEX_CMD_UNIX_DOMAIN_PATH": ""}


def test_daemon_settings_with_tls_point_at_the_trays_own_material():
    settings = run_plan.daemon_settings(role_options(imex_tls=True, imex_tls_dir="/etc/imex-tls",
                                                     imex_tls_target_override="imex.rack1.example"), "198.18.1.11")
    assert {key: value for key, value in settings.items() if "AUTH" in key or "_KEY" in key or "CERT" in key
            or "SECURITY" in key} == {
        "IMEX_ENABLE_AUTH_ENCRYPTION": "1", "IMEX_AUTH_ENCRYPTION_MODE": "SSL_TLS", "IMEX_AUTH_SOURCE": "FILE",
        "IMEX_SERVER_KEY": "/etc/imex-tls/tray.key", "IMEX_SERVER_CERT": "/etc/imex-tls/tray.crt",
        "IMEX_SERVER_CERT_AUTH": "/etc/imex-tls/ca.crt", "IMEX_CLIENT_KEY": "/etc/imex-tls/tray.key",
        "IMEX_CLIENT_CERT": "/etc/imex-tls/tray.crt", "IMEX_CLIENT_CERT_AUTH": "/etc/imex-tls/ca.crt",
        "IMEX_SECURITY_TARGET_OVERRIDE": "imex.rack1.example"}
    assert run_plan.daemon_settings(role_options(imex_tls=True), "x")["IMEX_SECURITY_TARGET_OVERRIDE"] == ""
    assert run_plan.tls_paths(role_options(imex_tls=True)) == [TLS_DIR + "/ca.crt", TLS_DIR + "/tray.crt",
                                                               TLS_DIR + "/tray.key"]
    assert run_plan.tls_paths(role_options()) == []


def test_authentication_set_by_hand_without_imex_tls_is_kept():
    settings = run_plan.daemon_settings(role_options(imex_settings={"IMEX_ENABLE_AUTH_ENCRYPTION": "1",
                                                                    "IMEX_AUTH_ENCRYPTION_MODE": "GSS_AUTH_ONLY"}), "x")
    assert settings["IMEX_ENABLE_AUTH_ENCRYPTION"] == "1" and settings["IMEX_AUTH_ENCRYPTION_MODE"] == "GSS_AUTH_ONLY"


@pytest.mark.parametrize(("mode", "socket"), [("dra_host_managed", SOCKET), ("static", ""), ("slurm", ""), ("dra", "")])
def test_the_unix_socket_is_open_in_dra_host_managed_only(mode, socket):
    assert run_plan.owned_settings(role_options(imex_mode=mode), "198.18.1.11")["IMEX_CMD_UNIX_DOMAIN_PATH"] == socket


def test_the_command_service_binds_to_the_trays_own_address_only_when_asked():
    owned = run_plan.owned_settings(role_options(imex_cmd_bind_own_address=True, imex_cmd_port=50105,
                                                 imex_server_port=50100), "198.18.1.12")
    assert owned == {"IMEX_CMD_ENABLED": "1", "IMEX_CMD_PORT": "50105", "SERVER_PORT": "50100",
                     "IMEX_NODE_CONFIG_FILE": NODES_PATH, "IMEX_CMD_BIND_INTERFACE_IP": "198.18.1.12",
                     "IMEX_CMD_UNIX_DOMAIN_PATH": ""}
    assert run_plan.owned_settings(role_options(), "198.18.1.12")["IMEX_CMD_BIND_INTERFACE_IP"] == ""


def test_each_tray_gets_the_settings_of_its_own_address():
    model = model_of(TWO_RACKS)
    plan = preflight(model, options_of(model, {"imex_cmd_bind_own_address": True}))
    assert [plan["trays"][tray]["settings"]["IMEX_CMD_BIND_INTERFACE_IP"] for tray in ("a1", "a2", "b1", "b2")] == [
        "198.18.1.11", "198.18.1.12", "198.18.2.11", "198.18.2.12"]


# --- preflight: the motivating defect -------------------------------------------------------------

@pytest.mark.parametrize("rack_a_mode", ["slurm", "static"])
def test_a_mode_that_differs_inside_one_rack_refuses_that_rack_alone(rack_a_mode):
    # Rack A holds one mode on both trays; in rack B, b1 is slurm and b2 static (each tray's own
    # options, its channel0 default evaluated for its own mode).
    model = model_of(TWO_RACKS)
    options = options_of(model, a1={"imex_mode": rack_a_mode}, a2={"imex_mode": rack_a_mode},
                         b1={"imex_mode": "slurm"}, b2={"imex_mode": "static"})
    assert (options["b1"]["imex_channel0"], options["b2"]["imex_channel0"]) == (False, True)
    problems = refused(preflight, model, options)
    assert problems == [
        'domain rackB: imex_mode differs between its trays ("slurm" on b1; "static" on b2); one domain runs one '
        "daemon configuration: set it for the whole domain group"]
    assert not any("rackA" in problem or "a1" in problem or "a2" in problem for problem in problems)


def test_racks_in_different_modes_each_get_their_own():
    model = model_of(TWO_RACKS)
    options = options_of(model, a1={"imex_mode": "slurm"}, a2={"imex_mode": "slurm"},
                         b1={"imex_mode": "dra_host_managed"}, b2={"imex_mode": "dra_host_managed"})
    plan = preflight(model, options)
    assert (plan["domains"]["rackA"]["mode"], plan["domains"]["rackB"]["mode"]) == ("slurm", "dra_host_managed")
    assert plan["trays"]["a1"]["channel_entries"] == [
        {"channel": 0, "state": "absent", "persistent": True, "immediate": False}]
    assert plan["trays"]["b2"]["channel_entries"] == [
        {"channel": 0, "state": "present", "persistent": True, "immediate": True}]
    assert plan["trays"]["a2"]["settings"]["IMEX_CMD_UNIX_DOMAIN_PATH"] == ""
    assert plan["trays"]["b1"]["settings"]["IMEX_CMD_UNIX_DOMAIN_PATH"] == SOCKET


def test_a_difference_with_a_tray_outside_the_run_is_not_judged():
    model = model_of(TWO_RACKS)
    options = options_of(model, b1={"imex_mode": "slurm"})
    plan = preflight(model, {"b2": options["b2"]}, play_hosts=["b2"])
    assert list(plan["domains"]) == ["rackB"] and plan["domains"]["rackB"]["mode"] == "static"


def test_every_domain_wide_option_that_differs_is_named_per_domain():
    model = model_of({"rackA": ["a1", "a2"], "rackB": ["b1", "b2"], "rackC": ["c1", "c2"]})
    tls = dict(TLS_PEM, imex_tls=True)
    options = options_of(model, a2={"imex_server_port": 50100}, b1=tls, c1={"imex_settings": {"LOG_LEVEL": 4}})
    assert refused(preflight, model, options) == [
        "domain rackA: imex_server_port differs between its trays (50000 on a1; 50100 on a2); one domain runs one "
        "daemon configuration: set it for the whole domain group",
        "domain rackB: imex_tls differs between its trays (true on b1; false on b2); one domain runs one daemon "
        "configuration: set it for the whole domain group",
        'domain rackC: imex_settings differs between its trays ({"LOG_LEVEL": "4"} on c1; {} on c2); one domain '
        "runs one daemon configuration: set it for the whole domain group"]


# --- preflight: each tray's own options -----------------------------------------------------------

@pytest.mark.parametrize(("mode", "why"), [
    ("slurm", "Slurm switch/nvidia_imex owns the channels and reserves channel 0"),
    ("dra", "the Kubernetes DRA driver injects channels into its pods"),
])
def test_channel0_in_a_mode_that_does_not_own_the_channels_is_refused(mode, why):
    model = model_of(TWO_RACKS)
    options = options_of(model, {"imex_mode": "static"}, b1={"imex_mode": mode, "imex_channel0": True},
                         b2={"imex_mode": mode, "imex_channel0": True})
    assert refused(preflight, model, options) == [
        "domain rackB: imex_mode=%s conflicts with imex_channel0=true: %s; set imex_channel0 to false" % (mode, why)]


def test_equal_ports_are_refused_naming_the_port():
    model = model_of(TWO_RACKS)
    options = options_of(model, a1={"imex_cmd_port": 50000}, a2={"imex_cmd_port": 50000})
    assert refused(preflight, model, options) == [
        "domain rackA: imex_server_port and imex_cmd_port are both 50000: the peer and command services need two "
        "ports"]


def test_keys_the_collection_owns_are_refused_in_imex_settings():
    model = model_of(TWO_RACKS)
    settings = {"SERVER_PORT": 50000, "IMEX_CMD_ENABLED": 0, "IMEX_NODE_CONFIG_FILE": "/tmp/nodes"}
    options = options_of(model, b1={"imex_settings": settings}, b2={"imex_settings": settings})
    assert refused(preflight, model, options) == [
        "domain rackB: imex_settings sets IMEX_CMD_ENABLED, IMEX_NODE_CONFIG_FILE, SERVER_PORT, which the "
        "collection manages: use imex_server_port, imex_cmd_port and imex_cmd_bind_own_address instead (the "
        "command service must stay enabled for nvidia-imex-ctl -N, and the node list path is the collection's)"]
    owned_socket = options_of(model, {"imex_settings": {"IMEX_CMD_UNIX_DOMAIN_PATH": "/run/imex.sock"}})
    assert refused(preflight, model, owned_socket)[0].startswith(
        "domain rackA: imex_settings sets IMEX_CMD_UNIX_DOMAIN_PATH, which the collection manages")


def test_bad_daemon_settings_are_named_with_key_and_value_once_per_domain():
    model = model_of(TWO_RACKS)
    options = options_of(model, {"imex_settings": {"LOG_LEVEL": 9, "IMEX_WAIT_FOR_QUORUM": "MAYBE"}},
                         b1={"imex_settings": {}, "imex_server_port": 70000},
                         b2={"imex_settings": {}, "imex_server_port": 70000})
    assert refused(preflight, model, options) == [
        "domain rackA: daemon settings (imex_settings, imex_server_port, imex_cmd_port): LOG_LEVEL: value '9' is "
        "not an integer from 0 to 4",
        "domain rackA: daemon settings (imex_settings, imex_server_port, imex_cmd_port): IMEX_WAIT_FOR_QUORUM: value "
        "'MAYBE' is not one of 'NONE', 'RECOVERY', 'FULL'",
        "domain rackB: daemon settings (imex_settings, imex_server_port, imex_cmd_port): SERVER_PORT: value '70000' "
        "is not an integer from 1 to 65535"]


def test_unknown_config_keys_are_refused():
    model = model_of({"rackA": ["a1"]})
    assert refused(preflight, model, options_of(model, {"imex_settings": {"IMEX_NO_SUCH_KEY": 1}})) == [
        "domain rackA: daemon settings (imex_settings, imex_server_port, imex_cmd_port): IMEX_NO_SUCH_KEY: unknown "
        "config.cfg key (value '1'), set allow_unknown to write it anyway"]


def test_option_problems_reach_the_run_prefixed_with_the_domain():
    model = model_of(TWO_RACKS)
    options = options_of(model, {"imex_ctl_timeout_s": 0, "imex_lock_stale_after_s": 0},
                         b1={"imex_settings": {"DAEMONIZE": "0"}, "imex_pre_restart_tasks": "hooks/drain.yml"},
                         b2={"imex_settings": {"DAEMONIZE": "0"}, "imex_pre_restart_tasks": "hooks/drain.yml"})
    assert refused(preflight, model, options) == [
        "domain rackA: imex_ctl_timeout_s = 0 is out of range 1..3600",
        "domain rackB: imex_ctl_timeout_s = 0 is out of range 1..3600",
        "domain rackB: imex_settings.DAEMONIZE = '0': the nvidia-imex unit is Type=forking, so a daemon that does "
        "not fork never reports started; remove DAEMONIZE from imex_settings",
        "domain rackB: imex_pre_restart_tasks = 'hooks/drain.yml' is not an absolute path on the controller (for "
        "example \"{{ inventory_dir }}/hooks/drain.yml\")"]


def test_binding_to_the_own_address_is_judged_on_the_trays_own_domain():
    # Rack A binds its command service to its IP addresses; rack B uses host names and does not bind.
    model = model_of(TWO_RACKS, hostnames=("rackB",))
    by_rack = options_of(model, a1={"imex_cmd_bind_own_address": True}, a2={"imex_cmd_bind_own_address": True})
    plan = preflight(model, by_rack)
    assert plan["trays"]["a1"]["settings"]["IMEX_CMD_BIND_INTERFACE_IP"] == "198.18.1.11"
    assert plan["trays"]["b1"]["settings"]["IMEX_CMD_BIND_INTERFACE_IP"] == ""
    everywhere = options_of(model, {"imex_cmd_bind_own_address": True})
    assert refused(preflight, model, everywhere) == [
        "domain rackB: imex_cmd_bind_own_address is true but domain rackB uses host names (b1, b2): "
        "IMEX_CMD_BIND_INTERFACE_IP takes an IP address; set imex_address to the trays' IP addresses, or leave "
        "imex_cmd_bind_own_address false"]


def test_a_domain_name_that_cannot_be_a_report_file_is_named_once():
    model = model_of({"rack 1": ["a1", "a2"], "rack2": ["b1"]})
    assert refused(preflight, model, options_of(model)) == [
        "domain rack 1: domain group 'rack 1': the name cannot be a report file name (rack 1.json); use letters, "
        "digits, '_', '-' and '.'"]


# --- preflight: the run's own options -------------------------------------------------------------

def test_a_lock_that_could_go_stale_while_the_run_works_is_refused():
    longest = role_options(imex_lock_stale_after_s=360)  # 300 + 2 x 30
    assert run_plan.lock_problems(longest) == [
        "imex_lock_stale_after_s = 360 is not longer than the run's longest wait without a lock refresh "
        "(imex_validate_timeout_s 300 + 2 x imex_ctl_timeout_s 30 = 360 s): another run could take the lock over "
        "while this one proves a domain; raise it, or set 0 (never stale)"]
    assert run_plan.lock_problems(role_options(imex_lock_stale_after_s=60, imex_validate_timeout_s=10,
                                               imex_ctl_timeout_s=30))[0].startswith(
        "imex_lock_stale_after_s = 60 is not longer than the run's longest wait without a lock refresh "
        "(imex_validate_timeout_s 10 + 2 x imex_ctl_timeout_s 30 = 70 s)")
    assert run_plan.lock_problems(role_options(imex_lock_stale_after_s=361)) == []
    assert run_plan.lock_problems(role_options(imex_lock_stale_after_s=0)) == []


def test_preflight_refuses_a_lock_that_could_go_stale():
    model = model_of(TWO_RACKS)
    problems = refused(preflight, model, options_of(model, {"imex_lock_stale_after_s": 120}))
    assert len(problems) == 1 and problems[0].startswith("imex_lock_stale_after_s = 120 is not longer")


def test_run_wide_options_that_differ_between_trays_are_named_with_each_value():
    model = model_of(TWO_RACKS)
    options = options_of(model, b2={"imex_rolling_batch": 2, "imex_report_dir": "/srv/reports"},
                         a1={"imex_backup": False, "imex_reboot_allowed": True})
    assert variance_problems(RUN, list(options), options) == [
        'imex_report_dir differs between the trays of the run ("imex-reports" on a1, a2, b1; "/srv/reports" on b2); '
        "it applies to the whole run: set it once, for example in group_vars/imex_domains.yml or with -e",
        "imex_rolling_batch differs between the trays of the run (1 on a1, a2, b1; 2 on b2); it applies to the "
        "whole run: set it once, for example in group_vars/imex_domains.yml or with -e"]
    assert variance_problems(RUN, list(options_of(model)), options_of(model)) == []


def test_run_wide_options_are_compared_after_conversion_and_only_among_the_given_trays():
    model = model_of(TWO_RACKS)
    options = options_of(model, b1={"imex_rolling_batch": 3})
    converted = {tray: run_plan.convert_options(dict(values, imex_allow_busy_restart="no"))[0]
                 for tray, values in options.items()}
    converted["a2"] = run_plan.convert_options(dict(options["a2"], imex_allow_busy_restart=False))[0]
    assert variance_problems(RUN, ["a1", "a2", "b2"], converted) == []
    assert len(variance_problems(RUN, ["a1", "b1"], converted)) == 1


def test_tls_files_are_checked_on_each_tray_with_tls_on_only(tmp_path):
    present = tmp_path / "ca.crt"
    present.write_text("x")
    model = model_of({"rackA": ["a1", "a2"], "rackB": ["b1", "b2"], "rackC": ["c1"]})
    tls = {"imex_tls": True, "imex_tls_ca": str(present), "imex_tls_cert": str(present)}
    options = options_of(model, a1=dict(tls, imex_tls_key=str(present)),
                         a2=dict(tls, imex_tls_key=str(tmp_path / "missing.key")),
                         b1=dict(tls, imex_tls_key=PEM, imex_tls_ca=PEM, imex_tls_cert=""),
                         b2=dict(tls, imex_tls_key=PEM, imex_tls_cert=PEM),
                         # TLS off: unset and missing files are never looked at.
                         c1={"imex_tls_ca": str(tmp_path / "nothing"), "imex_tls_key": "BEGIN nothing"})
    assert refused(preflight, model, options) == [
        "tray a2: imex_tls is true but imex_tls_key is unset or not a file on the controller (nor PEM text)",
        "tray b1: imex_tls is true but imex_tls_cert is unset or not a file on the controller (nor PEM text)"]
    looked_at = []
    everyone = options_of(model, {"imex_tls": True, "imex_tls_ca": "/pki/ca", "imex_tls_cert": "/pki/c",
                                  "imex_tls_key": "/pki/k"}, c1={"imex_tls": False})
    files = {"/pki/ca": TLS_PEM["imex_tls_ca"], "/pki/c": TLS_PEM["imex_tls_cert"], "/pki/k": TLS_PEM["imex_tls_key"]}
    plan = preflight(model, everyone, is_file=lambda path: looked_at.append(path) or True,
                     read_text=lambda path: files[path].encode())
    assert looked_at == ["/pki/ca", "/pki/c", "/pki/k"] * 4
    assert plan["trays"]["a1"]["tls_pem"] == [False, False, False]
    assert plan["trays"]["a1"]["read_stat_files"] == [TLS_DIR + "/ca.crt", TLS_DIR + "/tray.crt", TLS_DIR + "/tray.key",
                                                      TLS_DIR + "/reloaded"] + LEFTOVERS
    assert plan["trays"]["c1"]["read_stat_files"] == LEFTOVERS


def test_tls_material_given_as_pem_text_is_told_from_a_controller_path():
    model = model_of({"rackA": ["a1"]})
    plan = preflight(model, options_of(model, {"imex_tls": True, "imex_tls_ca": "\n  " + TLS_PEM["imex_tls_ca"],
                                               "imex_tls_cert": TLS_PEM["imex_tls_cert"],
                                               "imex_tls_key": "/srv/pki/a1.key"}), is_file=lambda path: True,
                     read_text={"/srv/pki/a1.key": TLS_PEM["imex_tls_key"].encode()}.get)
    assert plan["trays"]["a1"]["tls_pem"] == [True, True, False]
    assert not is_pem("/srv/pki/ca.crt") and not is_pem("") and not is_pem(None)


def test_every_problem_is_reported_at_once():
    model = model_of(TWO_RACKS)
    options = options_of(model, {"imex_lock_stale_after_s": 10}, a1={"imex_mode": "slurm"},
                         b1={"imex_cmd_port": 50000}, b2={"imex_cmd_port": 50000, "imex_tls": True})
    problems = refused(preflight, model, options, is_file=lambda path: False)
    assert [problem.split(":")[0] for problem in problems] == [
        "domain rackA", "domain rackB", "domain rackB",
        "imex_lock_stale_after_s = 10 is not longer than the run's longest wait without a lock refresh "
        "(imex_validate_timeout_s 300 + 2 x imex_ctl_timeout_s 30 = 360 s)", "tray b2"]
    assert 'imex_mode differs between its trays ("slurm" on a1; "static" on a2)' in problems[0]
    assert "imex_tls differs between its trays (false on b1; true on b2)" in problems[1]
    # Both trays of rackB hold the same equal ports: said once for the domain.
    assert problems[2] == ("domain rackB: imex_server_port and imex_cmd_port are both 50000: the peer and command "
                           "services need two ports")
    assert problems[4] == ("tray b2: imex_tls is true but imex_tls_ca, imex_tls_cert, imex_tls_key are unset or not "
                           "a file on the controller (nor PEM text)")


# --- preflight: the plan ----------------------------------------------------------------------------

def test_the_plan_of_a_whole_run():
    model = model_of({"rackB": ["b1", "b2"], "rackA": ["a1", "a2", "a3"]})
    plan = preflight(model, options_of(model), play_hosts=["b1", "b2", "a1", "a2", "a3"])
    assert plan["run_id"] == "run-1" and plan["check_mode"] is False and plan["report_only"] is False
    # Rolling follows the play (rackB's trays come first); the locks go by the domains' names.
    assert plan["waves"] == [["rackB"], ["rackA"]]
    # A majority of each domain's first three trays: 2 of 3, 2 of 2.
    assert plan["locks"] == [{"domain": "rackA", "holder": "a1"}, {"domain": "rackA", "holder": "a2"},
                             {"domain": "rackB", "holder": "b1"}, {"domain": "rackB", "holder": "b2"}]
    assert plan["host_daemon_domains"] == ["rackA", "rackB"]
    assert subset(plan["domains"]["rackA"], {
        "trays": ["a1", "a2", "a3"], "trays_in_run": ["a1", "a2", "a3"],
        "addresses": ["198.18.2.11", "198.18.2.12", "198.18.2.13"], "leader": "a1", "lock_holders": ["a1", "a2"],
        "partial": False, "mode": "static", "service": SERVICE, "allow_busy": False})
    assert subset(plan["trays"]["a2"], {
        "domain": "rackA", "address": "198.18.2.12",
        "settings": run_plan.daemon_settings(role_options(), "198.18.2.12"),
        "channel_entries": [{"channel": 0, "state": "present", "persistent": True, "immediate": True}],
        "read_files": [NODES_PATH, CONFIG_PATH], "read_stat_files": LEFTOVERS, "tls_pem": [False, False, False]})
    for key in ("prove_now", "restarting", "verdicts", "run_verdicts", "explain"):
        assert plan[key] == []


def test_a_run_limited_to_part_of_a_domain_leads_with_its_first_tray_and_locks_on_node_0():
    model = model_of({"rackA": ["a1", "a2", "a3"], "rackB": ["b1"]}, order={"a3": 0, "a1": 1, "a2": 2, "b1": 0})
    options = options_of(model)
    plan = preflight(model, {tray: options[tray] for tray in ("a1", "a2")}, play_hosts=["a1", "a2"])
    assert list(plan["domains"]) == ["rackA"] and plan["waves"] == [["rackA"]]
    domain = plan["domains"]["rackA"]
    assert domain["trays"] == ["a3", "a1", "a2"] and domain["trays_in_run"] == ["a1", "a2"]
    assert (domain["leader"], domain["lock_holders"], domain["partial"]) == ("a1", ["a3", "a1"], True)
    assert plan["locks"] == [{"domain": "rackA", "holder": "a3"}, {"domain": "rackA", "holder": "a1"}]


@pytest.mark.parametrize(("every", "report_only", "waves"), [
    ({}, False, [["r1"], ["r2"], ["r3"]]),
    ({"imex_rolling_batch": 2}, False, [["r1", "r2"], ["r3"]]),
    ({"imex_rolling_batch": 5}, False, [["r1", "r2", "r3"]]),
    ({"imex_rolling": False}, False, [["r1", "r2", "r3"]]),
    ({}, True, [["r1", "r2", "r3"]]),
])
def test_waves(every, report_only, waves):
    model = model_of({"r3": ["c1"], "r1": ["a1"], "r2": ["b1"]})
    plan = preflight(model, options_of(model, every), report_only=report_only, check_mode=True)
    assert plan["waves"] == waves and plan["report_only"] is report_only and plan["check_mode"] is True
    assert [lock["domain"] for lock in plan["locks"]] == ["r1", "r2", "r3"]


def test_dra_domains_are_no_host_daemon_domains():
    model = model_of(TWO_RACKS)
    plan = preflight(model, options_of(model, b1={"imex_mode": "dra"}, b2={"imex_mode": "dra"}))
    assert plan["host_daemon_domains"] == ["rackA"] and plan["domains"]["rackB"]["mode"] == "dra"


# --- after the read: the fabric and version gate ------------------------------------------------------

GATE = "NVLink fabric or versions do not match the inventory; nothing was changed:"


def gate(found, model=None, **kwargs):
    model = model or model_of(TWO_RACKS)
    options = options_of(model)
    plan = preflight(model, options)
    reads = reads_of(plan)
    for tray, changes in found.items():
        reads[tray].update(changes)
    return run_plan.read.after_read(plan, model, options, reads, **kwargs)


def test_a_tray_off_the_fabric_or_unanswered_is_refused_before_any_change():
    problems = refused(gate, {
        "a1": {"fabric_ok": False, "problems": ["GPU 2: fabric state is In Progress, not Completed"]},
        "b2": {"failed": True, "msg": "nvidia-smi not found"}})
    assert problems == [GATE, "tray a1 (domain rackA): GPU 2: fabric state is In Progress, not Completed",
                        "tray b2 (domain rackB): fabric identity unknown: nvidia-smi not found"]


def test_a_domain_across_two_partitions_and_two_domains_on_one_are_refused():
    spans = refused(gate, {"a2": {"clique_id": 7}})
    assert spans[0] == GATE and spans[1].startswith("domain rackA spans several NVLink partitions:")
    assert "clique 7 on a2" in spans[1] and "clique 32766 on a1" in spans[1]
    shared = refused(gate, {"b1": {"cluster_uuid": cluster("rackA")}, "b2": {"cluster_uuid": cluster("rackA")}})
    assert shared == [GATE, "domains rackA and rackB share the NVLink partition cluster %s clique 32766 (trays b1, "
                            "b2): two IMEX domains on one partition break memory sharing unless each job stays inside "
                            "one domain (imex_shared_partition: true allows it)" % cluster("rackA")]


def test_a_shared_partition_is_noted_when_allowed_and_the_fabric_check_can_be_skipped():
    same = {"b1": {"cluster_uuid": cluster("rackA")}, "b2": {"cluster_uuid": cluster("rackA")}}
    plan = gate(same, shared_partition=True)
    assert plan["notes"] == ["domains rackA and rackB share the NVLink partition cluster %s clique 32766 (trays b1, "
                             "b2), as imex_shared_partition allows: a job must stay inside one IMEX domain"
                             % cluster("rackA")]
    assert gate({"a1": {"fabric_ok": False}}, skip_fabric=True)["notes"] == []
    assert gate({})["notes"] == []


def test_versions_are_checked_even_without_the_fabric_check():
    problems = refused(gate, {"b2": {"driver_version": "580.105.08", "imex_version": DRIVER}}, skip_fabric=True)
    assert problems == [
        GATE,
        "tray b2 (domain rackB): nvidia-imex 580.95.09 does not match the driver 580.105.08; install the nvidia-imex "
        "package of the driver's release (the daemon refuses to start otherwise)",
        "domain rackB runs different driver releases: 580.105.08 on b2; 580.95.09 on b1; the daemons would answer "
        "!V! (version mismatch); run one release on every tray of a domain"]


# --- after the read: what to write ------------------------------------------------------------------

def test_converged_trays_write_nothing_and_need_no_channel_work():
    _model, _options, plan = planned()
    for tray in ("a1", "a2", "b1", "b2"):
        entry = plan["trays"][tray]
        assert (entry["write_nodes"], entry["write_config"], entry["write_tls"], entry["handover"], entry["write"]) \
            == (False, False, False, False, False), tray
        assert entry["channels"] == [] and entry["channels_role"] is False and entry["predicted"] is False
        assert entry["stopped"] is False and entry["reboot_allowed"] is False
    assert plan["domains"]["rackA"]["busy"] == [] and plan["domains"]["rackA"]["pending"] == {}


def test_drift_of_each_file_is_written_on_that_tray_only():
    plan0 = preflight(model_of(TWO_RACKS), options_of(model_of(TWO_RACKS)))
    nodes, config = wanted_files(plan0, "a1")
    _model, _options, plan = planned(reads={
        "a1": {"nodes": "198.18.1.12\n198.18.1.11\n"},                               # reordered
        "a2": {"config": config.replace("IMEX_CMD_PORT=50005", "IMEX_CMD_PORT=50006")},  # a value edited
        "b1": {"files": {}},                                                          # not read
        "b2": {"files": {NODES_PATH: {"exists": False, "sha256": None, "content": None, "ctime": None, "uid": None,
                                      "gid": None, "mode": None, "error": None},
                         CONFIG_PATH: dict(described(config), error="/etc/nvidia-imex/config.cfg is a directory")}},
    })
    found = {tray: (plan["trays"][tray]["write_nodes"], plan["trays"][tray]["write_config"], plan["trays"][tray]["write"])
             for tray in ("a1", "a2", "b1", "b2")}
    assert found == {"a1": (True, False, True), "a2": (False, True, True), "b1": (True, True, True),
                     "b2": (True, True, True)}
    assert nodes == "198.18.1.11\n198.18.1.12\n"


def test_a_node_list_with_other_owner_or_mode_is_written_again():
    plan0 = preflight(model_of(TWO_RACKS), options_of(model_of(TWO_RACKS)))
    nodes, _config = wanted_files(plan0, "a1")
    _model, _options, plan = planned(reads={"a1": {"files": {
        NODES_PATH: described(nodes, mode="0600"), CONFIG_PATH: read_of(plan0, "a1")["files"][CONFIG_PATH]}}})
    assert plan["trays"]["a1"]["write_nodes"] is True and plan["trays"]["a1"]["write_config"] is False


def test_tls_material_is_always_ensured_where_tls_is_on():
    model = model_of(TWO_RACKS)
    tls = dict(TLS_PEM, imex_tls=True)
    _model, _options, plan = planned(model=model, by_tray={"a1": tls, "a2": tls})
    assert [plan["trays"][tray]["write_tls"] for tray in ("a1", "a2", "b1", "b2")] == [True, True, False, False]
    assert plan["trays"]["a1"]["write"] is True and plan["trays"]["b1"]["write"] is False
    # The read of a TLS tray covers its TLS files without their content, and the mark of its last reload.
    assert plan["trays"]["a1"]["read_stat_files"] == [TLS_DIR + "/ca.crt", TLS_DIR + "/tray.crt", TLS_DIR + "/tray.key",
                                                      TLS_DIR + "/reloaded"] + LEFTOVERS


def test_a_dra_domain_hands_over_and_writes_none_of_the_host_daemons_files():
    dra = {"imex_mode": "dra"}
    _model, _options, plan = planned(by_tray={"b1": dra, "b2": dra}, reads={
        "b1": {"active": False, "files": {}}, "b2": {"active": False, "files": {}}})
    entry = plan["trays"]["b1"]
    assert (entry["handover"], entry["write"], entry["write_nodes"], entry["write_config"], entry["write_tls"]) == (
        True, True, False, False, False)
    assert entry["channels_role"] is True and entry["stopped"] is True
    assert plan["trays"]["a1"]["handover"] is False


@pytest.mark.parametrize(("kwargs", "predicted"), [
    ({}, False),
    ({"check_mode": True}, True),
    ({"play_hosts": ["a1", "b1", "b2"]}, True),  # rackA only partly in the run
])
def test_writes_are_predictions_under_check_on_part_of_a_domain_or_on_a_busy_one(kwargs, predicted):
    _model, _options, plan = planned(**kwargs)
    assert plan["domains"]["rackA"]["predicted"] is predicted and plan["trays"]["a1"]["predicted"] is predicted
    assert plan["domains"]["rackB"]["predicted"] is plan["check_mode"]


def test_writes_on_a_busy_domain_are_predictions_and_no_reboot_cuts_its_work():
    _model, _options, plan = planned(every={"imex_reboot_allowed": True},
                                     reads={"a2": {"compute_apps": [{"pid": 4242, "name": "python3"}]}})
    assert plan["domains"]["rackA"]["busy"] == ["a2: pid 4242 python3"]
    assert plan["domains"]["rackA"]["predicted"] is True and plan["trays"]["a1"]["predicted"] is True
    assert [plan["trays"][tray]["reboot_allowed"] for tray in ("a1", "a2", "b1", "b2")] == [False, False, True, True]
    assert plan["domains"]["rackB"]["predicted"] is False


def test_a_long_tray_command_is_bounded_below_the_staleness_of_the_locks():
    _model, _options, plan = planned(every={"imex_lock_stale_after_s": 1200})
    assert {entry["command_timeout_s"] for entry in plan["trays"].values()} == {600}
    _model, _options, plan = planned()
    assert {entry["command_timeout_s"] for entry in plan["trays"].values()} == {run_plan.LONG_COMMAND_TIMEOUT_S}
    assert run_plan.command_timeout("3600") == 900 and run_plan.command_timeout(1) == 1


def test_the_channels_to_ensure_come_from_the_read():
    channels = [{"channel": 5, "owner": "alice", "mode": "0660"}]
    _model, _options, plan = planned(
        by_tray={"a1": {"imex_channels": channels}, "a2": {"imex_channels": channels}},
        reads={"a1": {"channels": {"0": {"changed": False}, "5": {"changed": True}}},
               "a2": {"channels": {"0": {"error": "the driver has no IMEX channels"}, "5": {"changed": False}}},
               "b1": {"channels": {}},
               "b2": {"channels": {"0": {"changed": True}}}})
    assert plan["trays"]["a1"]["channels"] == [dict(channels[0], persistent=True, immediate=True)]
    assert plan["trays"]["a2"]["channels"] == [{"channel": 0, "state": "present", "persistent": True,
                                                "immediate": True}]
    # No read of the channels (a read-only proof): every entry.
    assert plan["trays"]["b1"]["channels"] == plan["trays"]["b1"]["channel_entries"]
    assert plan["trays"]["b2"]["channels"] == plan["trays"]["b2"]["channel_entries"]
    assert all(plan["trays"][tray]["channels_role"] for tray in ("a1", "a2", "b1", "b2"))


@pytest.mark.parametrize(("mode", "role"), [("static", False), ("dra_host_managed", False), ("slurm", True),
                                            ("dra", True)])
def test_the_channels_role_runs_where_its_mode_has_steps_of_its_own(mode, role):
    reads = {}
    if mode == "dra":
        reads = {tray: {"active": False} for tray in ("a1", "a2", "b1", "b2")}
    _model, _options, plan = planned(every={"imex_mode": mode}, reads=reads)
    assert plan["trays"]["a1"]["channels_role"] is role


def test_a_stopped_or_failed_daemon_is_said():
    _model, _options, plan = planned(reads={"a1": {"active": False}, "a2": {"services": {SERVICE: "failed"}},
                                            "b1": {"services": {SERVICE: "activating"}}})
    assert [plan["trays"][tray]["stopped"] for tray in ("a1", "a2", "b1", "b2")] == [True, True, False, False]


def test_trays_without_a_read_write_everything():
    model = model_of(TWO_RACKS)
    options = options_of(model)
    plan = run_plan.read.after_read(preflight(model, options), model, options, {}, skip_fabric=True)
    entry = plan["trays"]["a1"]
    assert (entry["write_nodes"], entry["write_config"], entry["stopped"]) == (True, True, False)
    assert entry["channels"] == entry["channel_entries"]


def test_the_plan_given_to_after_read_is_not_changed():
    model = model_of(TWO_RACKS)
    options = options_of(model)
    plan = preflight(model, options)
    kept = repr(plan)
    run_plan.read.after_read(plan, model, options, reads_of(plan))
    assert repr(plan) == kept


# --- after the read: the hand-over to the DRA driver, and what is proven --------------------------------

DRA = {"imex_mode": "dra"}


def test_the_hand_over_of_a_busy_domain_is_refused_naming_the_work():
    problems = refused(planned, by_tray={"b1": DRA, "b2": DRA}, reads={
        "b2": {"compute_apps": [{"pid": 4242, "name": "python3"}]}})
    assert problems == [
        "domain rackB: the host nvidia-imex is not handed over to the DRA driver while work runs on it (b2: pid 4242 "
        "python3). Stopping its daemons makes the domain's jobs lose the memory they share. Nothing was stopped. "
        "Drain the trays, wait for the work to end and run again, or set imex_allow_busy_restart=true."]
    _model, _options, allowed = planned(by_tray={"b1": DRA, "b2": DRA}, every={"imex_allow_busy_restart": True},
                                        reads={"b2": {"compute_apps": [{"pid": 4242, "name": "python3"}]}})
    assert allowed["trays"]["b2"]["handover"] is True and allowed["domains"]["rackB"]["busy"] == []


def test_the_hand_over_of_part_of_a_running_domain_is_refused_and_of_a_stopped_one_goes_ahead():
    model = model_of({"rackA": ["a1"], "rackB": ["b1", "b2", "b3"]})
    by_tray = {tray: DRA for tray in ("b1", "b2", "b3")}
    problems = refused(planned, model=model, by_tray=by_tray, play_hosts=["a1", "b1", "b2"])
    assert problems == [
        "domain rackB: the host nvidia-imex is not handed over to the DRA driver on part of the domain (this run "
        "leaves out b3). Stopping its daemons makes the domain's jobs lose the memory they share. Nothing was "
        "stopped. Run against the whole domain (drop --limit, or do not slice the job)."]
    stopped = {"b1": {"active": False}, "b2": {"active": False, "compute_apps": [{"pid": 1, "name": "a.out"}]}}
    _model, _options, plan = planned(model=model, by_tray=by_tray, play_hosts=["a1", "b1", "b2"], reads=stopped)
    assert plan["trays"]["b1"]["handover"] and plan["domains"]["rackB"]["busy"] == []


def test_a_read_only_proof_refuses_no_hand_over_and_proves_every_domain_even_under_check():
    model = model_of({"rackA": ["a1"], "rackB": ["b1", "b2", "b3"]})
    by_tray = {tray: DRA for tray in ("b1", "b2", "b3")}
    busy = {"b2": {"compute_apps": [{"pid": 4242, "name": "python3"}]}}
    _model, _options, plan = planned(model=model, by_tray=by_tray, play_hosts=["a1", "b1", "b2"], reads=busy,
                                     converge=False, check_mode=True)
    assert plan["prove_now"] == plan["judge_now"] == ["rackA", "rackB"]


def test_a_converge_proves_the_host_daemon_domains_and_nothing_under_check():
    _model, _options, plan = planned(by_tray={"b1": DRA, "b2": DRA},
                                     reads={"b1": {"active": False}, "b2": {"active": False}})
    assert plan["prove_now"] == plan["judge_now"] == ["rackA"]
    _model, _options, checked = planned(check_mode=True)
    assert checked["prove_now"] == checked["judge_now"] == []


# --- pending restarts ---------------------------------------------------------------------------------

def test_a_file_changed_after_the_daemon_started_makes_a_restart_pending():
    read = {"services": {SERVICE: "active"}, "services_started": {SERVICE: STARTED},
            "files": {CONFIG_PATH: {"ctime": STARTED + 300}, NODES_PATH: {"ctime": STARTED - 10}}}
    assert run_plan.pending_restart(read, SERVICE, [NODES_PATH, CONFIG_PATH]) == (
        "daemon started at 2025-11-25T14:00:00Z, before /etc/nvidia-imex/config.cfg was written at "
        "2025-11-25T14:05:00Z")


def test_several_newer_files_are_named_in_the_order_written_with_the_newest_time():
    read = {"services": {SERVICE: "active"}, "services_started": {SERVICE: STARTED},
            "files": {CONFIG_PATH: {"ctime": STARTED + 300}, NODES_PATH: {"ctime": STARTED + 60}},
            "stat_files": {TLS_DIR + "/tray.key": {"ctime": STARTED + 600}}}
    assert run_plan.pending_restart(read, SERVICE, [NODES_PATH, CONFIG_PATH], [TLS_DIR + "/tray.key"]) == (
        "daemon started at 2025-11-25T14:00:00Z, before /etc/nvidia-imex/nodes_config.cfg, "
        "/etc/nvidia-imex/config.cfg, /etc/nvidia-imex/tls/tray.key were written at 2025-11-25T14:10:00Z")


def test_tls_material_counts_through_its_stat():
    read = {"services": {SERVICE: "active"}, "services_started": {SERVICE: STARTED},
            "files": {CONFIG_PATH: {"ctime": BEFORE}}, "stat_files": {TLS_DIR + "/ca.crt": {"ctime": STARTED + 5}}}
    assert run_plan.pending_restart(read, SERVICE, [CONFIG_PATH], [TLS_DIR + "/ca.crt"]).endswith(
        "before /etc/nvidia-imex/tls/ca.crt was written at 2025-11-25T14:00:05Z")
    assert run_plan.pending_restart(read, SERVICE, [CONFIG_PATH]) is None  # not asked about: not judged


@pytest.mark.parametrize("later", [0.0, 0.5, run_plan.PENDING_SLACK_S, -100.0])
def test_a_file_written_within_the_slack_of_the_start_is_in_force(later):
    read = {"services": {SERVICE: "active"}, "services_started": {SERVICE: STARTED},
            "files": {CONFIG_PATH: {"ctime": STARTED + later}}}
    assert run_plan.pending_restart(read, SERVICE, [CONFIG_PATH]) is None


def test_just_beyond_the_slack_is_pending():
    read = {"services": {SERVICE: "active"}, "services_started": {SERVICE: STARTED},
            "files": {CONFIG_PATH: {"ctime": STARTED + run_plan.PENDING_SLACK_S + 0.01}}}
    assert run_plan.pending_restart(read, SERVICE, [CONFIG_PATH]) is not None


@pytest.mark.parametrize("read", [
    {"services": {SERVICE: "inactive"}, "services_started": {SERVICE: STARTED}},
    {"services": {SERVICE: "failed"}, "services_started": {SERVICE: None}},
    {"services": {SERVICE: "active"}, "services_started": {SERVICE: None}},
    {"services": {SERVICE: "active"}},
    {"services": None},
    {},
    None,
])
def test_no_running_daemon_or_no_start_time_is_never_pending(read):
    if read:
        read = dict(read, files={CONFIG_PATH: {"ctime": STARTED + 3600}})
    assert run_plan.pending_restart(read, SERVICE, [CONFIG_PATH]) is None
    assert run_plan.daemon_started(read, SERVICE) is None


def test_missing_or_unreadable_files_are_not_pending():
    read = {"services": {SERVICE: "active"}, "services_started": {SERVICE: STARTED},
            "files": {CONFIG_PATH: {"exists": False, "ctime": None}, NODES_PATH: {"error": "denied"}}}
    assert run_plan.pending_restart(read, SERVICE, [NODES_PATH, CONFIG_PATH, "/not/read"]) is None


def test_after_read_records_pending_restarts_of_host_daemons_only():
    _model, _options, plan = planned(reads={"a2": {"started": BEFORE - 60}})  # files younger than the daemon
    assert plan["domains"]["rackA"]["pending"] == {
        "a2": "daemon started at 2025-11-25T12:59:00Z, before /etc/nvidia-imex/config.cfg, "
              "/etc/nvidia-imex/nodes_config.cfg were written at 2025-11-25T13:00:00Z"}
    assert plan["domains"]["rackB"]["pending"] == {}
    _model, _options, dra = planned(by_tray={"b1": DRA, "b2": DRA}, reads={"b1": {"started": BEFORE - 60}},
                                    every={"imex_allow_busy_restart": True})
    assert dra["domains"]["rackB"]["pending"] == {}


# --- restart(): one wave -------------------------------------------------------------------------------

def test_nothing_changed_and_every_node_ready_restarts_and_starts_nothing_and_needs_no_second_read():
    _model, _options, plan = planned()
    writes = {tray: SKIPPED for tray in plan["trays"]}
    after = run_plan.restart.restart(plan, ["rackA"], writes, all_ready(plan, ["rackA"]))
    domain = after["domains"]["rackA"]
    assert (domain["restart"], domain["start"], domain["restart_reasons"], domain["proven_before_restart"]) == (
        False, [], {}, True)
    assert after["prove_now"] == ["rackB"] and after["judge_now"] == ["rackA", "rackB"]
    assert after["restarting"] == []
    assert [(after["trays"][tray]["restart"], after["trays"][tray]["start"]) for tray in ("a1", "a2")] == [
        (False, False), (False, False)]
    assert "restart" not in after["trays"]["b1"]  # not of this wave


def test_one_changed_tray_restarts_its_whole_domain_and_no_other():
    _model, _options, plan = planned()
    writes = {"a1": wrote(), "a2": wrote(config=True), "b1": wrote(), "b2": wrote()}
    after = run_plan.restart.restart(plan, ["rackA", "rackB"], writes, all_ready(plan, ["rackA", "rackB"]))
    assert after["domains"]["rackA"]["restart"] is True and after["domains"]["rackA"]["restart_reasons"] == {
        "a2": "new config"}
    assert after["domains"]["rackA"]["start"] == [] and after["domains"]["rackA"]["proven_before_restart"] is False
    assert after["domains"]["rackB"]["restart"] is False and after["domains"]["rackB"]["proven_before_restart"]
    assert after["restarting"] == ["rackA"] and after["prove_now"] == ["rackA"]
    assert [after["trays"][tray]["restart"] for tray in ("a1", "a2", "b1", "b2")] == [True, True, False, False]


def test_every_changed_file_is_a_reason_and_an_unregistered_tls_write_is_none():
    _model, _options, plan = planned()
    writes = {"a1": wrote(nodes=True, config=True, tls=True), "a2": wrote(tls=True), "b1": wrote(tls=False),
              "b2": {}}
    after = run_plan.restart.restart(plan, ["rackA", "rackB"], writes, {})
    assert after["domains"]["rackA"]["restart_reasons"] == {
        "a1": "new TLS material and config and node list", "a2": "new TLS material"}
    assert after["domains"]["rackB"]["restart"] is False


def test_trays_whose_write_was_skipped_restart_with_a_changed_domain_and_are_not_compared():
    _model, _options, plan = planned(domains={"rack1": ["t1", "t2", "t3"]})
    after = run_plan.restart.restart(plan, ["rack1"], {"t1": wrote(nodes=True), "t2": SKIPPED, "t3": wrote()}, {})
    assert after["domains"]["rack1"]["restart"] is True
    assert [after["trays"][tray]["restart"] for tray in ("t1", "t2", "t3")] == [True, True, True]
    all_skipped = run_plan.restart.restart(plan, ["rack1"], {"t1": SKIPPED, "t2": SKIPPED, "t3": SKIPPED},
                                           all_ready(plan, ["rack1"]))
    assert all_skipped["domains"]["rack1"]["restart"] is False and all_skipped["restarting"] == []


def test_differing_node_lists_are_named_and_never_restarted():
    _model, _options, plan = planned(domains={"rack1": ["t1", "t2", "t3"]})
    writes = {"t1": wrote(nodes=True), "t2": wrote(checksum="aa" * 32), "t3": wrote(), }
    assert refused(run_plan.restart.restart, plan, ["rack1"], writes, {}) == [
        "domain rack1: trays hold different node lists (9f2c9f2c9f2c on t1, t3; aaaaaaaaaaaa on t2); the daemons "
        "would answer !M!. Nothing was restarted. Written before this refusal: node list on t1."]


def test_a_pending_restart_without_a_write_restarts_the_domain_with_its_reason():
    _model, _options, plan = planned(reads={"a2": {"started": BEFORE - 60}})
    why = plan["domains"]["rackA"]["pending"]["a2"]
    after = run_plan.restart.restart(plan, ["rackA"], {"a1": SKIPPED, "a2": SKIPPED}, all_ready(plan, ["rackA"]))
    domain = after["domains"]["rackA"]
    assert domain["restart"] is True and domain["restart_reasons"] == {"a2": "pending restart: " + why}
    assert after["restarting"] == ["rackA"] and after["prove_now"] == ["rackA", "rackB"]
    assert domain["proven_before_restart"] is False
    # The restart puts the files on disk in force: the proof judges the new daemons, not the old read.
    assert domain["pending"] == {}


def test_a_written_file_wins_over_a_pending_restart_as_the_reason():
    _model, _options, plan = planned(reads={"a2": {"started": BEFORE - 60}})
    after = run_plan.restart.restart(plan, ["rackA"], {"a1": wrote(), "a2": wrote(config=True)}, {})
    assert after["domains"]["rackA"]["restart_reasons"] == {"a2": "new config"}


def test_a_change_on_a_domain_partly_in_the_run_is_refused_naming_the_trays_left_out():
    model = model_of({"rack1": ["t1", "t2", "t3"]}, order={"t3": 0, "t1": 1, "t2": 2})
    _model, _options, plan = planned(model=model, play_hosts=["t1", "t2"])
    problems = refused(run_plan.restart.restart, plan, ["rack1"], {"t1": wrote(), "t2": wrote(nodes=True, config=True)}, {})
    assert problems == [
        "tray t2 needs a new config and node list, which takes a restart of every tray of its domain together, but "
        "this run leaves out t3. Nothing was written. Run against the whole domain (drop --limit, or do not slice "
        "the job)."]


def test_a_pending_restart_on_a_domain_partly_in_the_run_is_refused_naming_the_trays_left_out():
    model = model_of({"rack1": ["t1", "t2", "t3"]})
    _model, _options, plan = planned(model=model, play_hosts=["t1", "t2"], reads={"t1": {"started": BEFORE - 60}})
    problems = refused(run_plan.restart.restart, plan, ["rack1"], {"t1": SKIPPED, "t2": SKIPPED}, {})
    assert len(problems) == 1
    assert problems[0].startswith("tray t1 needs a restart (pending restart: daemon started at 2025-11-25T12:59:00Z")
    assert problems[0].endswith("which takes a restart of every tray of its domain together, but this run leaves "
                                "out t3. Nothing was written. Run against the whole domain (drop --limit, or do not "
                                "slice the job).")


def test_an_unchanged_domain_partly_in_the_run_passes_and_starts_what_is_not_ready():
    model = model_of({"rack1": ["t1", "t2", "t3"]})
    # t2's daemon was found stopped by the read: the wave's work includes it.
    _model, _options, plan = planned(model=model, play_hosts=["t1", "t2"], reads={"t2": {"active": False}})
    assert plan["wave_workers"] == [["t2"]]
    statuses = {"rack1": status_of(plan, "rack1", not_ready=["t2", "t3"])}
    after = run_plan.restart.restart(plan, ["rack1"], {"t1": SKIPPED, "t2": SKIPPED}, statuses)
    assert after["domains"]["rack1"]["restart"] is False and after["domains"]["rack1"]["start"] == ["t2"]
    assert (after["trays"]["t1"]["start"], after["trays"]["t2"]["start"]) == (False, True)


def test_a_running_daemon_not_ready_in_a_domain_with_nothing_to_do_is_not_started_and_its_peers_reconnect():
    # The read found every daemon running and nothing to write: no tray includes the wave's work, so none
    # is started (a start of a running unit changes nothing); the running peers reconnect to t2 (SIGUSR1).
    _model, _options, plan = planned(domains={"rack1": ["t1", "t2", "t3"]})
    assert plan["wave_workers"] == [[]] and plan["wave_trays"] == [["t1"]]
    statuses = {"rack1": status_of(plan, "rack1", not_ready=["t2"])}
    after = run_plan.restart.restart(plan, ["rack1"], {}, statuses)
    assert after["domains"]["rack1"]["start"] == ["t2"]
    assert {tray: entry["start"] or entry["reload_or_restart"] for tray, entry in after["trays"].items()} == {
        "t1": False, "t2": False, "t3": False}
    assert [entry["tray"] for entry in after["reconnects"]] == ["t1", "t3"]
    assert after["domains"]["rack1"]["proven_before_restart"] is False


def test_a_busy_domain_with_a_change_is_refused_naming_the_work_and_what_was_held_back():
    _model, _options, plan = planned(domains={"rack1": ["t1", "t2", "t3"]}, reads={
        "t2": {"compute_apps": [{"pid": 4242, "name": "python3"}, {"pid": 4243, "name": "nccl"}]},
        "t3": {"slurm": {"installed": True, "node": "gpu-t3", "state": "MIXED", "error": None}}})
    assert plan["domains"]["rack1"]["predicted"] is True
    problems = refused(run_plan.restart.restart, plan, ["rack1"], {"t1": wrote(config=True), "t2": wrote(config=True),
                                                                   "t3": wrote()}, {})
    assert problems == [
        "domain rack1 is not restarted: work runs on it (t2: pid 4242 python3, pid 4243 nccl; t3: Slurm node gpu-t3 "
        "state MIXED). A restart makes every IMEX daemon of the domain a new instance and cuts the memory its jobs "
        "share. Its new config (on t1, t2) is held back. Nothing was written. Drain the trays (for example scontrol "
        "update nodename=... state=drain, or kubectl cordon), wait for the work to end and run again, or set "
        "imex_allow_busy_restart=true."]


def test_a_busy_domain_with_a_pending_restart_is_refused_naming_the_old_daemons():
    _model, _options, plan = planned(reads={"a1": {"started": BEFORE - 60},
                                            "a2": {"compute_apps": [{"pid": 7, "name": "a.out"}]}})
    problems = refused(run_plan.restart.restart, plan, ["rackA"], {"a1": SKIPPED, "a2": SKIPPED}, {})
    assert problems == [
        "domain rackA is not restarted: work runs on it (a2: pid 7 a.out). A restart makes every IMEX daemon of the "
        "domain a new instance and cuts the memory its jobs share. Its daemons on a1 do not run what is on disk "
        "(%s). Nothing was written. Drain the trays (for example scontrol update nodename=... state=drain, or "
        "kubectl cordon), wait for the work to end and run again, or set imex_allow_busy_restart=true."
        % plan["domains"]["rackA"]["pending"]["a1"]]


def test_an_idle_domain_restarts():
    idle = {"t1": {"slurm": {"installed": True, "node": "t1", "state": "IDLE", "error": None}},
            "t2": {"slurm": {"installed": True, "node": "t2", "state": "DOWN+DRAIN", "error": None}},
            "t3": {"slurm": {"installed": False, "node": "t3", "state": None, "error": None}, "slurm_state": None}}
    _model, _options, plan = planned(domains={"rack1": ["t1", "t2", "t3"]}, reads=idle)
    assert plan["domains"]["rack1"]["busy"] == [] and plan["domains"]["rack1"]["predicted"] is False
    after = run_plan.restart.restart(plan, ["rack1"], {"t1": wrote(config=True), "t2": wrote(), "t3": wrote()}, {})
    assert after["restarting"] == ["rack1"]


def test_a_busy_domain_without_a_change_passes_and_allow_busy_restarts_anyway():
    busy = {"a2": {"compute_apps": [{"pid": 7, "name": "a.out"}]}}
    _model, _options, plan = planned(reads=busy)
    after = run_plan.restart.restart(plan, ["rackA"], {"a1": SKIPPED, "a2": SKIPPED}, all_ready(plan, ["rackA"]))
    assert after["domains"]["rackA"]["restart"] is False and after["domains"]["rackA"]["proven_before_restart"]
    _model, _options, allowed = planned(reads=busy, every={"imex_allow_busy_restart": True})
    assert allowed["domains"]["rackA"]["busy"] == [] and allowed["domains"]["rackA"]["predicted"] is False
    after = run_plan.restart.restart(allowed, ["rackA"], {"a1": wrote(config=True), "a2": wrote()}, {})
    assert after["domains"]["rackA"]["restart"] is True


def test_trays_not_ready_in_an_unchanged_domain_only_start():
    # The read found a2's daemon stopped; both domains in one wave.
    _model, _options, plan = planned(every={"imex_rolling": False}, reads={"a2": {"active": False}})
    statuses = {"rackA": status_of(plan, "rackA", not_ready=["a2"]), "rackB": status_of(plan, "rackB")}
    after = run_plan.restart.restart(plan, ["rackA", "rackB"], {tray: SKIPPED for tray in plan["trays"]}, statuses)
    domain = after["domains"]["rackA"]
    assert (domain["restart"], domain["start"], domain["proven_before_restart"]) == (False, ["a2"], False)
    assert [(after["trays"][tray]["restart"], after["trays"][tray]["start"]) for tray in ("a1", "a2")] == [
        (False, False), (False, True)]
    assert after["restarting"] == [] and after["prove_now"] == ["rackA"]


def test_a_status_that_could_not_be_read_starts_every_tray_of_the_domain():
    _model, _options, plan = planned()
    for status in ({"failed": True, "msg": "nvidia-imex-ctl -N failed"}, None):
        after = run_plan.restart.restart(plan, ["rackA"], {}, {"rackA": status} if status else {})
        assert after["domains"]["rackA"]["start"] == ["a1", "a2"]
        assert after["domains"]["rackA"]["proven_before_restart"] is False and after["prove_now"] == ["rackA", "rackB"]


def test_a_ready_but_unhealthy_domain_is_proven_again():
    _model, _options, plan = planned()
    statuses = {"rackA": status_of(plan, "rackA", healthy=False, broken_pairs=[{"from_index": 0, "to_index": 1}])}
    after = run_plan.restart.restart(plan, ["rackA"], {}, statuses)
    assert after["domains"]["rackA"]["start"] == [] and after["domains"]["rackA"]["proven_before_restart"] is False
    assert after["prove_now"] == ["rackA", "rackB"]


def test_the_dra_domains_of_a_wave_are_neither_restarted_nor_started():
    _model, _options, plan = planned(by_tray={"b1": DRA, "b2": DRA}, reads={"b1": {"active": False},
                                                                            "b2": {"active": False}})
    after = run_plan.restart.restart(plan, ["rackB"], {"b1": wrote(config=True), "b2": wrote(checksum="x")}, {})
    assert "restart" not in after["domains"]["rackB"] and after["restarting"] == []
    assert [(after["trays"][tray]["restart"], after["trays"][tray]["start"]) for tray in ("b1", "b2")] == [
        (False, False), (False, False)]


def test_every_domain_of_a_wave_is_refused_at_once():
    model = model_of({"rack1": ["t1", "t2"], "rack2": ["u1", "u2", "u3"]})
    _model, _options, plan = planned(model=model, every={"imex_rolling": False}, play_hosts=["t1", "t2", "u1"])
    writes = {"t1": wrote(nodes=True), "t2": wrote(checksum="bb" * 32), "u1": wrote(config=True)}
    problems = refused(run_plan.restart.restart, plan, ["rack1", "rack2"], writes, {})
    assert [problem.split(" ")[:2] for problem in problems] == [["domain", "rack1:"], ["tray", "u1"]]


def test_the_plan_given_to_restart_is_not_changed():
    _model, _options, plan = planned()
    kept = repr(plan)
    run_plan.restart.restart(plan, ["rackA"], {"a1": wrote(config=True)}, {})
    assert repr(plan) == kept


# --- the busy guard -------------------------------------------------------------------------------------

def activity(active=True, apps=(), slurm=None, slurm_state=None, **extra):
    """A tray's read of what runs on it (imex_tray_info fabric=false compute_apps slurm_state)."""
    read = {"services": {SERVICE: "active" if active else "inactive"},
            "compute_apps": None if apps is None else [{"pid": pid, "name": name, "used_memory": "1 MiB"}
                                                       for pid, name in apps]}
    if slurm is not None:
        read["slurm"] = slurm
    if slurm_state is not None:
        read["slurm_state"] = slurm_state
    read.update(extra)
    return read


def slurm(state=None, error=None, installed=True, node="gpu-a07"):
    return {"installed": installed, "node": node, "state": state, "error": error}


@pytest.mark.parametrize(("read", "work"), [
    (activity(), []),
    (activity(apps=[(4242, "python3"), (4243, "nccl-tests")]), ["pid 4242 python3", "pid 4243 nccl-tests"]),
    (activity(apps=None), ["GPU processes could not be read"]),
    ({"services": {SERVICE: "active"}}, []),  # not asked (a read-only proof)
    (activity(slurm=slurm("ALLOCATED")), ["Slurm node gpu-a07 state ALLOCATED"]),
    (activity(slurm=slurm("MIXED+DRAIN")), ["Slurm node gpu-a07 state MIXED+DRAIN"]),
    (activity(slurm=slurm("COMPLETING")), ["Slurm node gpu-a07 state COMPLETING"]),
    (activity(slurm=slurm("mixed")), ["Slurm node gpu-a07 state mixed"]),
    (activity(slurm=slurm("IDLE")), []),
    (activity(slurm=slurm("DOWN+DRAIN")), []),
    (activity(slurm=slurm(error="Node gpu-a07 not found")),
     ["Slurm state of node gpu-a07 could not be read (Node gpu-a07 not found)"]),
    (activity(slurm=slurm(error="slurm_load_node error: Unable to contact slurm controller (connect failure)")),
     ["Slurm state of node gpu-a07 could not be read (slurm_load_node error: Unable to contact slurm controller "
      "(connect failure))"]),
    (activity(slurm=slurm()), ["Slurm state of node gpu-a07 could not be read (no state)"]),
    (activity(slurm=slurm(installed=False)), []),
    (activity(slurm=slurm(installed=False), slurm_state=None), []),
    (activity(slurm_state="ALLOCATED"), ["Slurm node state ALLOCATED"]),  # a read of an earlier release
    (activity(slurm_state="IDLE"), []),
    (activity(apps=[(7, "a.out")], slurm=slurm("ALLOCATED")), ["pid 7 a.out", "Slurm node gpu-a07 state ALLOCATED"]),
    ({}, []), (None, []),
])
def test_busy_reasons(read, work):
    assert run_plan.busy_reasons("t1", read, SERVICE) == work


def test_the_busy_guard_names_each_busy_tray_while_a_daemon_runs():
    trays = ["t1", "t2", "t3"]
    reads = {"t1": activity(), "t2": activity(apps=[(7, "a.out")]),
             "t3": activity(active=False, slurm=slurm("ALLOCATED", node="gpu-t3"))}
    assert run_plan.busy_guard(trays, reads, SERVICE) == ["t2: pid 7 a.out", "t3: Slurm node gpu-t3 state ALLOCATED"]
    assert run_plan.busy_guard(trays, reads, SERVICE, allow_busy=True) == []


def test_a_domain_whose_daemons_are_all_stopped_is_never_busy():
    reads = {"t1": activity(active=False, apps=[(7, "a.out")]), "t2": activity(active=False, apps=None),
             "t3": {"skipped": True}}
    assert run_plan.busy_guard(["t1", "t2", "t3"], reads, SERVICE) == []
    assert run_plan.busy_guard(["t1", "t2"], {}, SERVICE) == []


def restarting_plan(reads=None, **kwargs):
    """rackA restarts (a new config on a1); rackB does not."""
    _model, _options, plan = planned(reads=reads, **kwargs)
    return run_plan.restart.restart(plan, ["rackA", "rackB"], {"a1": wrote(config=True), "a2": wrote(), "b1": SKIPPED,
                                                               "b2": SKIPPED}, all_ready(plan, ["rackA", "rackB"]))


def test_the_guard_refuses_a_restarting_domain_that_became_busy():
    plan = restarting_plan()
    reads = {"a1": activity(), "a2": activity(slurm=slurm("ALLOCATED", node="gpu-a2"))}
    assert refused(run_plan.guard.guard, plan, ["rackA", "rackB"], reads) == [
        "domain rackA is not restarted: work runs on it (a2: Slurm node gpu-a2 state ALLOCATED), as read just before "
        "its daemons would stop. A restart makes every IMEX daemon of the domain a new instance and cuts the memory "
        "its jobs share. It was to restart for a1: new config. Written before this refusal: config on a1. The next "
        "run restarts it once the work has ended. Drain the trays, or set imex_allow_busy_restart=true."]


def test_the_guard_checks_only_the_domains_that_restart():
    plan = restarting_plan()
    busy = {tray: activity(apps=[(7, "a.out")]) for tray in ("b1", "b2")}
    assert run_plan.guard.guard(plan, ["rackA", "rackB"], dict(busy, a1=activity(), a2=activity())) == plan
    assert run_plan.guard.guard(plan, ["rackB"], busy) == plan


def test_the_guard_lets_a_restart_under_work_through_when_allowed_or_when_every_daemon_is_stopped():
    allowed = restarting_plan(every={"imex_allow_busy_restart": True})
    busy = {"a1": activity(apps=[(7, "a.out")]), "a2": activity(apps=None)}
    assert run_plan.guard.guard(allowed, ["rackA"], busy) == allowed
    plan = restarting_plan()
    stopped = {"a1": activity(active=False, apps=[(7, "a.out")]), "a2": activity(active=False, apps=None)}
    assert run_plan.guard.guard(plan, ["rackA"], stopped) == plan


def test_unreadable_work_on_a_restarting_domain_counts_as_work():
    plan = restarting_plan()
    problems = refused(run_plan.guard.guard, plan, ["rackA"], {"a1": activity(apps=None), "a2": activity(
        slurm=slurm(error="scontrol show node gpu-a07 did not finish within 10 s and was stopped"))})
    assert "work runs on it (a1: GPU processes could not be read; a2: Slurm state of node gpu-a07 could not be read " \
           "(scontrol show node gpu-a07 did not finish within 10 s and was stopped))" in problems[0]


# --- verdicts -------------------------------------------------------------------------------------------

def judge(plan, model, statuses, domains=None, **kwargs):
    domains = list(plan["judge_now"]) if domains is None else domains
    return run_plan.verdicts.verdicts(plan, model, domains, statuses, list(plan["trays"]), **kwargs)


def test_a_healthy_domain():
    model, _options, plan = planned()
    (report,) = judge(plan, model, {"rackA": status_of(plan, "rackA")}, ["rackA"])
    assert report["verdict"] == "healthy" and report["ok"] is True and report["problems"] == []
    assert report["leader"] == "a1" and report["trays_not_in_run"] == []
    assert report["message"] == "domain rackA: UP, 2 nodes READY, every pair connected"


def test_tolerated_unhealthy_and_unknown_domains():
    model, _options, plan = planned(domains={"r1": ["a1", "a2"], "r2": ["b1", "b2"], "r3": ["c1"], "r4": ["d1"]})
    pairs = [{"from_index": 0, "to_index": 1, "state": "R"}]
    statuses = {"r1": status_of(plan, "r1", healthy=False, broken_pairs=pairs, problems=["pair 0 -> 1: R"]),
                "r2": status_of(plan, "r2", not_ready=["b2"]),
                "r3": {"failed": True, "msg": "did not answer"}}
    reports = judge(plan, model, statuses, allowed_broken_pairs="1")
    assert [(report["domain"], report["verdict"], report["ok"]) for report in reports] == [
        ("r1", "tolerated", True), ("r2", "unhealthy", False), ("r3", "unknown", False), ("r4", "unknown", False)]
    assert reports[0]["problems"] == ["1 broken pair(s) tolerated (allowed 1): pair 0 -> 1: R"]
    assert reports[1]["message"] == "domain r2: DEGRADED (unhealthy):\n  - node 1 (198.18.2.12, b2) is UNAVAILABLE"
    assert reports[2]["problems"] == ["status could not be read from tray c1: did not answer"]
    assert reports[3]["problems"] == ["status could not be read from tray d1: no result"]
    assert judge(plan, model, statuses, ["r1"])[0]["verdict"] == "unhealthy"  # no pair allowed by default


def test_a_domain_partly_in_the_run_is_judged_by_its_first_tray_in_the_run():
    model = model_of({"rack1": ["t1", "t2", "t3"]})
    _model, _options, plan = planned(model=model, play_hosts=["t2", "t3"])
    (report,) = judge(plan, model, {"rack1": status_of(plan, "rack1")})
    assert report["leader"] == "t2" and report["trays_not_in_run"] == ["t1"] and report["verdict"] == "healthy"


def test_a_pending_restart_makes_a_healthy_domain_stale_naming_the_tray():
    model, _options, plan = planned(reads={"a2": {"started": BEFORE - 60}}, converge=False)
    pending = {name: plan["domains"][name]["pending"] for name in plan["judge_now"]}
    reports = judge(plan, model, {"rackA": status_of(plan, "rackA"), "rackB": status_of(plan, "rackB")},
                    pending=pending)
    stale, healthy = reports
    why = plan["domains"]["rackA"]["pending"]["a2"]
    assert (stale["verdict"], stale["ok"]) == ("stale", False) and (healthy["verdict"], healthy["ok"]) == ("healthy", True)
    assert stale["problems"] == ["tray a2 runs a config other than the one on disk (%s): a restart of the domain is "
                                 "pending; run site.yml to restart it" % why]
    assert stale["message"] == "domain rackA: UP (stale):\n  - " + stale["problems"][0]


def test_a_pending_restart_on_an_unhealthy_or_unread_domain_keeps_its_verdict_and_adds_the_tray():
    model, _options, plan = planned()
    pending = {"rackA": {"a1": "daemon started at X, before Y was written at Z"}, "rackB": {"b2": "why"}}
    unhealthy, unknown = judge(plan, model, {"rackA": status_of(plan, "rackA", not_ready=["a2"])}, ["rackA", "rackB"],
                               pending=pending)
    assert unhealthy["verdict"] == "unhealthy" and unhealthy["problems"] == [
        "node 1 (198.18.1.12, a2) is UNAVAILABLE",
        "tray a1 runs a config other than the one on disk (daemon started at X, before Y was written at Z): a restart "
        "of the domain is pending; run site.yml to restart it"]
    assert unhealthy["message"].startswith("domain rackA: DEGRADED (unhealthy):\n  - node 1")
    assert unknown["verdict"] == "unknown" and unknown["message"].startswith("domain rackB: UNKNOWN (unknown):\n  - ")
    assert "tray b2 runs a config other than the one on disk (why)" in unknown["message"]


def test_a_domain_restarted_for_its_pending_restart_is_judged_on_its_new_daemons():
    model, _options, plan = planned(reads={"a2": {"started": BEFORE - 60}})
    plan = run_plan.restart.restart(plan, ["rackA"], {"a1": SKIPPED, "a2": SKIPPED}, {})
    pending = {name: plan["domains"][name].get("pending") or {} for name in ["rackA"]}
    (report,) = judge(plan, model, {"rackA": status_of(plan, "rackA")}, ["rackA"], pending=pending)
    assert report["verdict"] == "healthy"


def test_the_daemon_logs_of_a_failed_proof_are_named_and_joined():
    model, _options, plan = planned(domains={"rack1": ["t1", "t2", "t3"]})
    statuses = {"rack1": status_of(plan, "rack1", not_ready=["t2", "t3"])}
    first = judge(plan, model, statuses)
    assert run_plan.verdicts.explain(first, model, list(plan["trays"])) == ["t2", "t3"]
    assert run_plan.verdicts.explain(first, model, ["t1", "t2"]) == ["t2"]  # a tray outside the play is not read
    logs = {"t2": {"source": "file", "path": "/var/log/nvidia-imex.log", "truncated": False,
                   "lines": ["[ERROR] No matching network interface found"]},
            "t3": {"error": "no such file"}, "elsewhere": {"lines": ["not of this domain"]}}
    (report,) = judge(plan, model, statuses, logs=logs)
    assert report["daemon_logs"] == {"t2": logs["t2"], "t3": logs["t3"]}
    assert report["message"].endswith(
        "\n  daemon log of t2 (/var/log/nvidia-imex.log, last 1 lines):\n      [ERROR] No matching network interface "
        "found\n  daemon log of t3 could not be read: no such file")


def test_a_refused_daemon_log_file_is_said_beside_the_journal_lines():
    model, _options, plan = planned(domains={"rack1": ["t1", "t2", "t3"]})
    statuses = {"rack1": status_of(plan, "rack1", not_ready=["t2"])}
    refused = "/var/log/nvidia-imex.log is not read: its directory /var/log is writable by its group (mode 0775, group 4)"
    logs = {"t2": {"source": "journal", "truncated": False, "refused": refused,
                   "lines": ["2026-11-24T14:02:11+0000 tray02 systemd[1]: nvidia-imex.service: Failed with result 'exit-code'."]}}
    (report,) = judge(plan, model, statuses, logs=logs)
    assert report["message"].endswith(
        "\n  daemon log of t2 (journal, last 1 lines):\n      2026-11-24T14:02:11+0000 tray02 systemd[1]: "
        "nvidia-imex.service: Failed with result 'exit-code'.\n  daemon log file of t2 not read: " + refused)


def test_a_healthy_proof_reads_no_log_and_an_unread_status_asks_the_leader():
    model, _options, plan = planned()
    reports = judge(plan, model, {"rackA": status_of(plan, "rackA")})
    assert run_plan.verdicts.explain(reports, model, list(plan["trays"])) == ["b1"]
    assert "daemon_logs" not in judge(plan, model, {"rackA": status_of(plan, "rackA")}, ["rackA"],
                                      logs={"b1": {"lines": ["x"]}})[0]


def test_judged_keeps_the_verdicts_of_every_wave_for_the_summary():
    model, _options, plan = planned(domains={"r1": ["a1"], "r2": ["b1"], "r3": ["c1"]})
    statuses = {name: status_of(plan, name) for name in ("r1", "r2", "r3")}
    first = run_plan.verdicts.judged(plan, judge(plan, model, statuses, ["r1"]))
    assert first["proven"] is True and first["outcome"] == "domain r1: UP, 1 nodes READY, every pair connected"
    second = run_plan.verdicts.judged(first, judge(first, model, statuses, ["r2", "r3"]))
    assert [report["domain"] for report in second["verdicts"]] == ["r2", "r3"]
    assert [report["domain"] for report in second["run_verdicts"]] == ["r1", "r2", "r3"]
    assert second["outcome"] == ("domain r2: UP, 1 nodes READY, every pair connected\n"
                                 "domain r3: UP, 1 nodes READY, every pair connected")
    # The same domain judged again (the logs added to a failed proof) replaces its verdict.
    failed = dict(statuses, r3=status_of(plan, "r3", not_ready=["c1"]))
    third = run_plan.verdicts.judged(second, judge(second, model, failed, ["r3"], logs={"c1": {"error": "gone"}}))
    assert [(report["domain"], report["verdict"]) for report in third["run_verdicts"]] == [
        ("r1", "healthy"), ("r2", "healthy"), ("r3", "unhealthy")]
    assert third["proven"] is False and third["outcome"] == third["verdicts"][0]["message"]
    assert third["outcome"].startswith("domain r3: DEGRADED (unhealthy):\n  - node 0 (198.18.3.11, c1) is UNAVAILABLE")
    assert "daemon log of c1 could not be read: gone" in third["outcome"]
    assert first["run_verdicts"] == first["verdicts"] and plan["run_verdicts"] == []


def test_judged_outcome_lists_only_the_failed_domains():
    model, _options, plan = planned()
    reports = judge(plan, model, {"rackA": status_of(plan, "rackA"), "rackB": {"msg": "unreachable"}})
    judged = run_plan.verdicts.judged(plan, reports)
    assert judged["proven"] is False and judged["outcome"] == reports[1]["message"]
    assert judged["outcome"] == "domain rackB: UNKNOWN (unknown):\n  - status could not be read from tray b1: unreachable"


# --- a whole run, stage after stage --------------------------------------------------------------------

def test_a_run_of_two_waves_from_preflight_to_the_summary():
    model = model_of(TWO_RACKS)
    options = options_of(model)
    plan = preflight(model, options)
    # The package's own config.cfg already holds what the role's defaults set: only b2's edit is written.
    assert wanted_files(plan, "b2")[1] == STOCK
    edited = STOCK.replace("IMEX_CMD_PORT=50005", "IMEX_CMD_PORT=50006")
    plan = run_plan.read.after_read(plan, model, options, reads_of(plan, b2={"config": edited}))
    assert [tray for tray in plan["trays"] if plan["trays"][tray]["write"]] == ["b2"]
    # Wave 1: nothing to do, proven by the read before the restarts.
    earlier = all_ready(plan, ["rackA"])
    plan = run_plan.restart.restart(plan, ["rackA"], {}, earlier)
    assert plan["prove_now"] == ["rackB"] and plan["judge_now"] == ["rackA", "rackB"]
    plan = run_plan.verdicts.judged(plan, run_plan.verdicts.verdicts(plan, model, ["rackA"], earlier, list(plan["trays"])))
    # Wave 2: b2's config written, the domain restarted together, proven.
    plan = run_plan.restart.restart(plan, ["rackB"], {"b1": SKIPPED, "b2": {"node list": {"changed": False, "skipped": True},
                                                                            "config": {"changed": True}}},
                                    {"rackB": status_of(plan, "rackB")})
    assert plan["restarting"] == ["rackB"] and plan["domains"]["rackB"]["restart_reasons"] == {"b2": "new config"}
    plan = run_plan.guard.guard(plan, ["rackB"], {"b1": activity(), "b2": activity(slurm=slurm("IDLE"))})
    plan = run_plan.verdicts.judged(plan, run_plan.verdicts.verdicts(plan, model, ["rackB"], {"rackB": status_of(plan, "rackB")},
                                                                     list(plan["trays"])))
    assert plan["proven"] is True and [report["verdict"] for report in plan["run_verdicts"]] == ["healthy"] * 2


# --- trays out of service, and a stopped tray joining its running domain ----------------------------

def test_a_tray_out_of_service_stays_in_the_node_list_is_not_planned_for_and_is_the_proofs_only_allowance():
    model = model_of({"rack1": ["t1", "t2", "t3"]})
    options = options_of(model, every={"imex_trays_out_of_service": ["t1"]})
    plan = preflight(model, options)
    domain = plan["domains"]["rack1"]
    assert plan["out_of_service"] == ["t1"] and sorted(plan["trays"]) == ["t2", "t3"]
    assert subset(domain, {"trays": ["t1", "t2", "t3"], "trays_in_run": ["t2", "t3"], "out_of_service": ["t1"],
                           "absent_addresses": ["198.18.1.11"], "partial": False, "leader": "t2",
                           "lock_holders": ["t2", "t3"]})
    # The node list every tray in service writes still names it.
    assert domain["addresses"] == ["198.18.1.11", "198.18.1.12", "198.18.1.13"]


def test_out_of_service_names_checked_and_a_domain_wholly_away_refused():
    model = model_of({"rack1": ["t1", "t2"], "rack2": ["u1"]})
    problems = refused(preflight, model, options_of(model, every={"imex_trays_out_of_service": ["u1", "zz9"]}))
    assert problems == ["imex_trays_out_of_service names zz9, which is in no IMEX domain of the inventory",
                        "domain rack2: every tray of the run is out of service (imex_trays_out_of_service); leave "
                        "the domain out of the run (--limit) while it is away"]


def test_the_report_of_a_domain_with_a_tray_away_names_it():
    model = model_of({"rack1": ["t1", "t2", "t3"]})
    options = options_of(model, every={"imex_trays_out_of_service": ["t3"]})
    plan = preflight(model, options)
    degraded = status_of(plan, "rack1", healthy=True, domain_state="DEGRADED")
    [report] = run_plan.verdicts.verdicts(plan, model, ["rack1"], {"rack1": degraded}, ["t1", "t2"])
    assert report["ok"] and report["out_of_service"] == ["t3"]
    assert report["message"] == ("domain rack1: DEGRADED, every tray in service READY and connected; "
                                 "out of service: t3")


def test_a_stopped_tray_with_new_files_joins_its_running_domain_without_a_restart():
    _model, _options, plan = planned({"rack1": ["t1", "t2", "t3"]}, reads={"t3": {"active": False}})
    writes = {"t1": SKIPPED, "t2": SKIPPED, "t3": wrote(nodes=True, config=True)}
    found = run_plan.restart.restart(plan, ["rack1"], writes, {"rack1": status_of(plan, "rack1", not_ready=["t3"])})
    domain = found["domains"]["rack1"]
    assert domain["restart"] is False and domain["start"] == ["t3"] and found["restarting"] == []
    assert [found["trays"][tray]["start"] for tray in ("t1", "t2", "t3")] == [False, False, True]


def test_a_running_tray_with_new_files_still_restarts_the_domain_and_the_stopped_ones_with_it():
    _model, _options, plan = planned({"rack1": ["t1", "t2", "t3"]}, reads={"t3": {"active": False}})
    writes = {"t1": wrote(config=True), "t2": SKIPPED, "t3": wrote(config=True)}
    found = run_plan.restart.restart(plan, ["rack1"], writes, all_ready(plan, ["rack1"]))
    assert found["domains"]["rack1"]["restart"] is True
    assert found["domains"]["rack1"]["restart_reasons"] == {"t1": "new config", "t3": "new config"}


def test_a_stopped_tray_of_a_busy_domain_does_not_start_on_files_that_were_not_written():
    _model, _options, plan = planned({"rack1": ["t1", "t2"]},
                                     reads={"t1": {"compute_apps": [{"pid": 7, "name": "a.out"}]},
                                            "t2": {"active": False}})
    problems = refused(run_plan.restart.restart, plan, ["rack1"], {"t1": SKIPPED, "t2": wrote(config=True)},
                       all_ready(plan, ["rack1"]))
    assert problems[0].startswith("domain rack1 is not restarted: work runs on it (t1: pid 7 a.out)")


def test_the_per_job_program_left_from_an_earlier_mode_is_removed_and_causes_no_restart():
    leftovers = LEFTOVERS
    _model, _options, plan = planned()
    tray = sorted(plan["trays"])[0]
    assert plan["trays"][tray]["slurm_job_leftovers"] == leftovers
    assert plan["trays"][tray]["remove_slurm_job"] == [] and not plan["trays"][tray]["write"]
    # Installed after the daemon started (a newer ctime): removed, and no reason to restart the daemon.
    _model, _options, plan = planned(reads={tray: {"stat_files": {path: stated(STARTED + 60) for path in leftovers}}})
    entry = plan["trays"][tray]
    assert (entry["remove_slurm_job"], entry["write"]) == (leftovers, True)
    assert plan["domains"][entry["domain"]]["pending"] == {}
