# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""The run plan of the rackscale.imex.imex role: every decision of a run, made once, on the controller.

The role's tasks carry the plan out and branch on it alone. It is built in stages, each a pure
function of the previous plan and of what the run has read since:

preflight(...)  the tray options (each tray's own, role defaults applied on that tray), the domain
                model, the waves, the run id; every option problem, each naming tray, key and value.
after_read(...) the one read of each tray: NVLink fabric and version gate, what to write on each
                tray (node list, config), the channels to ensure, pending restarts (a daemon older
                than its files), the busy state seen at the start.
restart(...)    one wave, after its writes and its status read: which domains restart (and why),
                which trays only start, and what refuses a restart.
guard(...)      the busy guard, on what runs on the trays read right before their daemons stop.
verdicts(...)   the verdict of each domain from its proof (and the daemon logs that explain it).

Nothing here touches a tray, the network or the clock: every input is an argument.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.rackscale.imex.plugins.module_utils._activity import slurm_busy
from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import ConfigError, validate_settings
from ansible_collections.rackscale.imex.plugins.plugin_utils._channels import channel_entries, channels_to_ensure
from ansible_collections.rackscale.imex.plugins.plugin_utils._drift import daemon_drift
from ansible_collections.rackscale.imex.plugins.plugin_utils._fabric_gate import fabric_problems, version_problems
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import (
    DOMAIN_WIDE_OPTIONS,
    TLS_FILE_OPTIONS,
    domain_variance_problems,
    is_pem,
    option_problems,
    path_problem,
    tls_file_problems,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils._report import (
    domain_report,
    problems_message,
    trays_to_explain,
    with_daemon_logs,
)

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core depends on PyYAML
    yaml = None

# The type of every option of the role, as meta/argument_specs.yml declares it (a unit test keeps the
# two in step). Values from -e or an AWX survey arrive as strings and are converted here, once.
OPTION_TYPES = {
    "imex_domains_group": "str", "imex_max_nodes": "int", "imex_allow_mixed_families": "bool",
    "imex_driver_version": "str", "imex_require_declared_size": "bool", "imex_domain": "str",
    "imex_mode": "str", "imex_channel0": "bool", "imex_channels": "list", "imex_reboot_allowed": "bool",
    "imex_settings": "dict", "imex_server_port": "int", "imex_cmd_port": "int",
    "imex_cmd_bind_own_address": "bool", "imex_tls": "bool", "imex_tls_ca": "str", "imex_tls_cert": "str",
    "imex_tls_key": "str", "imex_tls_target_override": "str", "imex_backup": "bool",
    "imex_lock_wait_s": "int", "imex_lock_stale_after_s": "int", "imex_allow_busy_restart": "bool",
    "imex_pre_restart_tasks": "str", "imex_post_restart_tasks": "str", "imex_rolling": "bool",
    "imex_rolling_batch": "int", "imex_skip_fabric_check": "bool", "imex_shared_partition": "bool",
    "imex_validate_timeout_s": "int", "imex_validate_interval_s": "int", "imex_ctl_timeout_s": "int",
    "imex_allowed_broken_pairs": "int", "imex_report_dir": "str", "imex_textfile_dir": "str",
    "imex_config_path": "str", "imex_nodes_config_path": "str", "imex_service": "str",
    "imex_unix_socket": "str", "imex_tls_dir": "str", "imex_slurm_node_name": "str",
    "imex_trays_out_of_service": "list", "imex_slurm_prolog_dir": "str", "imex_slurm_epilog_dir": "str",
    "imex_slurm_probe_partition": "str",
}

# Options that shape the whole run (the model, the waves, the locks, the reports): one value for
# every tray of the run, or the run is refused naming who holds which.
RUN_WIDE_OPTIONS = ("imex_domains_group", "imex_max_nodes", "imex_allow_mixed_families", "imex_driver_version",
                    "imex_require_declared_size", "imex_rolling", "imex_rolling_batch", "imex_lock_wait_s",
                    "imex_lock_stale_after_s", "imex_report_dir", "imex_textfile_dir", "imex_skip_fabric_check",
                    "imex_shared_partition", "imex_validate_timeout_s", "imex_validate_interval_s",
                    "imex_ctl_timeout_s", "imex_allowed_broken_pairs", "imex_allow_busy_restart",
                    "imex_trays_out_of_service")

# The daemon's TLS material under imex_tls_dir: (file, mode).
TLS_FILES = (("ca.crt", "0644"), ("tray.crt", "0644"), ("tray.key", "0600"))
# A file whose change time is later than the daemon's start by more than this ran no restart since it
# was written. The daemon's start is read from the monotonic clock and the change time from the wall
# clock: a second covers their conversion and a file written in the same instant as a start.
PENDING_SLACK_S = 1.0

# The per-job mode: the Slurm prolog of each job starts the daemon with the job's nodes of the tray's
# domain, the epilog stops it (roles/imex/files/rackscale-imex-slurm-job). A run installs the program,
# the map it reads and config.cfg, and leaves the service stopped, disabled and not masked.
PER_JOB = "slurm_per_job"
# Where the program reads its map (its MAP_PATH; a unit test keeps the two equal).
SLURM_JOB_MAP = "/etc/rackscale-imex/slurm-job.json"
# The program as the role ships it (roles/imex/files) and as it is installed in each directory.
SLURM_JOB_SCRIPT = "rackscale-imex-slurm-job"
SLURM_JOB_INSTALLED = "90-rackscale-imex"
# Bounds the program keeps (seconds): written into the map, so that a tray shows what it runs with.
# The whole prolog stays within total_timeout_s, well under the PrologEpilogTimeout slurm.conf needs.
SLURM_JOB_BOUNDS = {"total_timeout_s": 240, "hostlist_timeout_s": 10, "stop_timeout_s": 30, "kill_timeout_s": 10,
                    "start_timeout_s": 60, "ready_timeout_s": 120, "poll_interval_s": 1, "domain_wait_s": 30}
SLURM_JOB_CTL = "/usr/bin/nvidia-imex-ctl"


class PlanError(ValueError):
    """Problems that stop the run; each one sentence naming the tray, group, key or value at fault."""

    def __init__(self, problems):
        super().__init__("\n".join(problems))
        self.problems = list(problems)


# ---------------------------------------------------------------------------------------------------
# The boundary: option values as the role received them, converted once.

def _parsed(value, kind):
    """A dict or list given as JSON or YAML text (-e 'x={...}', an AWX textarea survey) parsed."""
    if isinstance(value, str) and yaml is not None:
        text = value.strip()
        if not text:
            return {} if kind == "dict" else []
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            return value
    return value


def convert_option(name, value):
    """(value in its declared type, problem or None)."""
    kind = OPTION_TYPES.get(name, "raw")
    if value is None:
        return value, None
    try:
        if kind == "bool":
            return boolean(value, strict=True), None
        if kind == "int":
            if isinstance(value, bool):
                raise ValueError(value)
            return int(str(value).strip()), None
        if kind == "str":
            return str(value), None
        if kind in ("dict", "list"):
            parsed = _parsed(value, kind)
            wanted = dict if kind == "dict" else list
            if parsed is None:
                parsed = wanted()
            if not isinstance(parsed, wanted):
                raise ValueError(value)
            return (dict(parsed) if kind == "dict" else list(parsed)), None
    except (TypeError, ValueError):
        wanted = {"bool": "boolean", "int": "whole number", "dict": "mapping", "list": "list"}.get(kind, kind)
        return value, "%s = %r is not a %s" % (name, value, wanted)
    return value, None


def convert_options(raw):
    """({option: value}, [problem]) for one tray's options."""
    options, problems = {}, []
    for name, value in dict(raw).items():
        options[name], problem = convert_option(name, value)
        if problem:
            problems.append(problem)
    return options, problems


# ---------------------------------------------------------------------------------------------------
# What each tray is meant to hold.

def daemon_settings(options, address):
    """The config.cfg keys of a tray: the operator's, then the keys the collection owns and the mode's,
    TLS on (its keys) or off (explicitly, since config.cfg keeps keys a run does not set)."""
    settings = {"IMEX_ENABLE_AUTH_ENCRYPTION": "0"}
    settings.update(options.get("imex_settings") or {})
    settings.update(owned_settings(options, address))
    if options.get("imex_tls"):
        tls_dir = options["imex_tls_dir"]
        settings.update({
            "IMEX_ENABLE_AUTH_ENCRYPTION": "1", "IMEX_AUTH_ENCRYPTION_MODE": "SSL_TLS", "IMEX_AUTH_SOURCE": "FILE",
            "IMEX_SERVER_KEY": tls_dir + "/tray.key", "IMEX_SERVER_CERT": tls_dir + "/tray.crt",
            "IMEX_SERVER_CERT_AUTH": tls_dir + "/ca.crt", "IMEX_CLIENT_KEY": tls_dir + "/tray.key",
            "IMEX_CLIENT_CERT": tls_dir + "/tray.crt", "IMEX_CLIENT_CERT_AUTH": tls_dir + "/ca.crt",
            "IMEX_SECURITY_TARGET_OVERRIDE": options.get("imex_tls_target_override") or "",
        })
    return settings


def owned_settings(options, address):
    """The keys the collection sets itself (imex_settings may not): the command service that
    nvidia-imex-ctl -N asks on every tray, the ports, the node list, and the mode's unix socket (empty
    outside dra_host_managed, so that switching modes back really closes it)."""
    return {
        "IMEX_CMD_ENABLED": "1",
        "IMEX_CMD_PORT": str(options["imex_cmd_port"]),
        "SERVER_PORT": str(options["imex_server_port"]),
        "IMEX_NODE_CONFIG_FILE": options["imex_nodes_config_path"],
        "IMEX_CMD_BIND_INTERFACE_IP": address if options.get("imex_cmd_bind_own_address") else "",
        "IMEX_CMD_UNIX_DOMAIN_PATH": options["imex_unix_socket"] if options["imex_mode"] == "dra_host_managed" else "",
    }


def tls_paths(options):
    return [os.path.join(options["imex_tls_dir"], name) for name, _mode in TLS_FILES] if options.get("imex_tls") else []


# A Slurm partition name: one word, as srun --partition takes it.
_PARTITION = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


def per_job_option_problems(options):
    """The per-job mode's own options: where the prolog and epilog go, the probe's partition."""
    problems = []
    for option in ("imex_slurm_prolog_dir", "imex_slurm_epilog_dir"):
        problem = path_problem(option, options.get(option) or "")
        if problem:
            problems.append(problem)
    if options.get("imex_slurm_prolog_dir") and options.get("imex_slurm_prolog_dir") == options.get("imex_slurm_epilog_dir"):
        problems.append("imex_slurm_prolog_dir and imex_slurm_epilog_dir are both %s: the prolog and the epilog are "
                        "installed under one name, so they need two directories (Prolog=.../prolog.d/*, "
                        "Epilog=.../epilog.d/*)" % options["imex_slurm_prolog_dir"])
    partition = options.get("imex_slurm_probe_partition") or ""
    if partition and not _PARTITION.match(partition):
        problems.append("imex_slurm_probe_partition = %r is not a Slurm partition name (letters, digits, '_', '.', "
                        "'-')" % partition)
    return problems


def slurm_job_paths(options):
    """{what: tray path} of the per-job installation: the map, the prolog, the epilog."""
    return {"map": SLURM_JOB_MAP,
            "prolog": os.path.join(options["imex_slurm_prolog_dir"], SLURM_JOB_INSTALLED),
            "epilog": os.path.join(options["imex_slurm_epilog_dir"], SLURM_JOB_INSTALLED)}


def slurm_node_names(trays, tray_options, reads, fallback=None):
    """{tray: its Slurm node name}: imex_slurm_node_name where set, else the name the tray's read asked
    scontrol about (its short host name), else ``fallback`` (the inventory's value for a tray outside the
    run), else the inventory name up to its first dot."""
    names = {}
    for tray in trays:
        own = (tray_options.get(tray) or {}).get("imex_slurm_node_name") or ""
        read = ((reads.get(tray) or {}).get("slurm") or {}).get("node") or ""
        names[tray] = own or read or (fallback or {}).get(tray) or str(tray).split(".", maxsplit=1)[0]
    return names


def slurm_job_map(domain_name, nodes, this_node, options):
    """The text of a tray's per-job map: its domain's Slurm node names and IMEX addresses in the domain's
    order (the order every node of a job writes its list in), and what the program needs."""
    content = {
        "format": 1,
        "domain": domain_name,
        "this_node": this_node,
        "nodes": [{"name": name, "address": address} for name, address in nodes],
        "service": options["imex_service"],
        "nodes_config_path": options["imex_nodes_config_path"],
        "config_path": options["imex_config_path"],
        "ctl": SLURM_JOB_CTL,
        "ctl_timeout_s": min(int(options["imex_ctl_timeout_s"]), 30),
    }
    content.update(SLURM_JOB_BOUNDS)
    return json.dumps(content, indent=2, sort_keys=True) + "\n"


def _file_differs(observed, sha256, mode):
    """True unless the read shows the file with this content, root-owned, with this mode."""
    if not isinstance(observed, dict) or observed.get("error") or not observed.get("exists"):
        return True
    return observed.get("sha256") != sha256 or observed.get("uid") != 0 or observed.get("gid") != 0 \
        or observed.get("mode") != mode


def per_job_drift(read, paths, map_text, script_sha256):
    """[what differs] of a tray's per-job installation, from its one read."""
    files = (read or {}).get("files") or {}
    wanted = {"map": (hashlib.sha256(map_text.encode("utf-8")).hexdigest(), "0644"),
              "prolog": (script_sha256, "0755"), "epilog": (script_sha256, "0755")}
    return [what for what in ("map", "prolog", "epilog") if _file_differs(files.get(paths[what]), *wanted[what])]


def per_job_state_problems(read, service):
    """What a tray's read shows against the per-job mode besides its files: the service left to the prolog
    (not enabled, not masked) and the channel device of the driver."""
    read = read or {}
    problems = []
    enabled = (read.get("services_enabled") or {}).get(service)
    if enabled in ("enabled", "enabled-runtime", "masked", "masked-runtime", "linked", "linked-runtime", "alias"):
        problems.append("service %s is %s: in the per-job mode it is neither enabled (it would start at boot with "
                        "no job) nor masked (the prolog starts it)" % (service, enabled))
    elif "services_enabled" in read and enabled is None:
        problems.append("whether service %s is enabled could not be read" % service)
    if "channel_major" in read and read.get("channel_major") is None:
        problems.append("nvidia-caps-imex-channels is not in /proc/devices: the NVIDIA driver is not loaded, and "
                        "Slurm's switch/nvidia_imex cannot give a job its channel")
    return problems


def _tray_problems(tray, options, model):
    """Problems of one tray's own options, each prefixed with its domain."""
    domain = model["host_domain"][tray]
    problems = []
    if options["imex_mode"] in ("slurm", PER_JOB, "dra") and options.get("imex_channel0"):
        problems.append("imex_mode=%s conflicts with imex_channel0=true: %s; set imex_channel0 to false" % (
            options["imex_mode"], "the Kubernetes DRA driver injects channels into its pods"
            if options["imex_mode"] == "dra" else "Slurm switch/nvidia_imex owns the channels and reserves channel 0"))
    if options["imex_mode"] == PER_JOB:
        problems.extend(per_job_option_problems(options))
    if options["imex_server_port"] == options["imex_cmd_port"]:
        problems.append("imex_server_port and imex_cmd_port are both %s: the peer and command services need two "
                        "ports" % options["imex_server_port"])
    owned = set(owned_settings(options, "")) & set(options.get("imex_settings") or {})
    if owned:
        problems.append("imex_settings sets %s, which the collection manages: use imex_server_port, imex_cmd_port "
                        "and imex_cmd_bind_own_address instead (the command service must stay enabled for "
                        "nvidia-imex-ctl -N, and the node list path is the collection's)" % ", ".join(sorted(owned)))
    try:
        validate_settings(dict(options.get("imex_settings") or {}, SERVER_PORT=options["imex_server_port"],
                               IMEX_CMD_PORT=options["imex_cmd_port"]))
    except ConfigError as error:
        problems.extend("daemon settings (imex_settings, imex_server_port, imex_cmd_port): " + part.strip()
                        for part in str(error).split("; ") if part.strip())
    # Judged on the tray's own domain only: its options say nothing of another domain's trays.
    problems.extend(option_problems(options, {"domains": {domain: model["domains"][domain]},
                                              "host_domain": model["host_domain"]}))
    return ["domain %s: %s" % (domain, problem) for problem in problems]


def lock_problems(options):
    """A lock that may go stale while its run still works would let a second run in."""
    stale_after = options["imex_lock_stale_after_s"]
    longest_wait = options["imex_validate_timeout_s"] + 2 * options["imex_ctl_timeout_s"]
    if stale_after and stale_after <= longest_wait:
        return ["imex_lock_stale_after_s = %d is not longer than the run's longest wait without a lock refresh "
                "(imex_validate_timeout_s %d + 2 x imex_ctl_timeout_s %d = %d s): another run could take the lock "
                "over while this one proves a domain; raise it, or set 0 (never stale)"
                % (stale_after, options["imex_validate_timeout_s"], options["imex_ctl_timeout_s"], longest_wait)]
    return []


def _differences(trays, options_of, names):
    """{option: {shown value: [trays]}} for each option that is not the same on all of ``trays``."""
    found = {}
    for name in names:
        held = {}
        for tray in trays:
            held.setdefault(json.dumps(options_of[tray].get(name), sort_keys=True, default=str), []).append(tray)
        if len(held) > 1:
            found[name] = held
    return found


def run_wide_problems(trays, tray_options):
    """One sentence per option of RUN_WIDE_OPTIONS whose trays hold different values."""
    return ["%s differs between the trays of the run (%s); it applies to the whole run: set it once, for "
            "example in group_vars/imex_domains.yml or with -e"
            % (name, "; ".join("%s on %s" % (shown, ", ".join(held_by)) for shown, held_by in held.items()))
            for name, held in sorted(_differences(trays, tray_options, RUN_WIDE_OPTIONS).items())]


def preflight(model, tray_options, play_hosts, run_id, check_mode=False, report_only=False, is_file=os.path.isfile):
    """The plan of a run before any tray is contacted; PlanError with every problem.

    model: the domain model (imex_domain_model); tray_options: {tray: its options, converted}, for
    every tray of the play (each tray's own values: its host and group variables, else the role's
    defaults evaluated for that tray, never another tray's); play_hosts: the trays of the play in
    inventory order.
    """
    problems = []
    first = tray_options[[tray for tray in play_hosts if tray in tray_options][0]]
    # Trays away (for repair): kept in their domain's node list, never contacted, tolerated by the proof.
    away = [str(tray) for tray in first.get("imex_trays_out_of_service") or []]
    problems.extend("imex_trays_out_of_service names %s, which is in no IMEX domain of the inventory" % tray
                    for tray in away if tray not in model["host_domain"])
    trays = [tray for tray in play_hosts if tray in tray_options and tray not in away]
    for name in sorted({model["host_domain"][tray] for tray in away if tray in model["host_domain"]}):
        if not [tray for tray in trays if model["host_domain"][tray] == name]:
            problems.append("domain %s: every tray of the run is out of service (imex_trays_out_of_service); leave "
                            "the domain out of the run (--limit) while it is away" % name)
    if not trays:
        raise PlanError(problems or ["no tray of the run is in service"])
    domains_in_run = sorted({model["host_domain"][tray] for tray in trays})
    domain_trays = {name: [node["host"] for node in model["domains"][name]["nodes"]] for name in domains_in_run}
    # Per tray, each tray's own values; a domain's trays compared with each other only.
    per_domain = {name: [tray for tray in domain_trays[name] if tray in tray_options and tray not in away]
                  for name in domains_in_run}
    values = {name: [tray_options[tray].get(name) for tray in trays] for name in DOMAIN_WIDE_OPTIONS}
    problems.extend(domain_variance_problems({"domains": {name: model["domains"][name] for name in domains_in_run}},
                                             trays, values))
    seen = set()
    for tray in trays:
        for problem in _tray_problems(tray, tray_options[tray], model):
            if problem not in seen:
                seen.add(problem)
                problems.append(problem)
    problems.extend(lock_problems(first))
    problems.extend(tls_file_problems([(tray, tray_options[tray]) for tray in trays if tray_options[tray].get("imex_tls")],
                                      is_file=is_file))
    if problems:
        raise PlanError(problems)

    batch = max(first["imex_rolling_batch"], 1)
    if first["imex_rolling"] and not report_only:
        waves = [domains_in_run[start:start + batch] for start in range(0, len(domains_in_run), batch)]
    else:
        # A report changes nothing: every domain in one wave, so it does not stop at the first unhealthy one.
        waves = [domains_in_run] if domains_in_run else []
    plan = {
        "run_id": run_id,
        "check_mode": bool(check_mode),
        "report_only": bool(report_only),
        "waves": waves,
        "domains": {},
        "trays": {},
        "locks": [],
        "prove_now": [],
        "restarting": [],
        "verdicts": [],
        "run_verdicts": [],
        "explain": [],
        "out_of_service": [tray for tray in play_hosts if tray in away],
    }
    for name in domains_in_run:
        domain = model["domains"][name]
        in_run = per_domain[name]
        out = [tray for tray in domain_trays[name] if tray in away]
        plan["domains"][name] = {
            "trays": domain_trays[name],
            "trays_in_run": in_run,
            "out_of_service": out,
            "absent_addresses": [node["address"] for node in domain["nodes"] if node["host"] in away],
            "addresses": list(domain["addresses"]),
            "leader": in_run[0],
            # The lock file lives on the domain's first tray in service, whichever trays the run holds.
            "lock_holder": [tray for tray in domain_trays[name] if tray not in away][0],
            "partial": len(in_run) + len(out) < len(domain_trays[name]),
            "mode": tray_options[in_run[0]]["imex_mode"],
            "service": tray_options[in_run[0]]["imex_service"],
            "allow_busy": tray_options[in_run[0]]["imex_allow_busy_restart"],
        }
    # One domain at a time, in a fixed order, so that two runs never wait for each other's locks.
    plan["locks"] = [{"domain": name, "holder": plan["domains"][name]["lock_holder"]}
                     for wave in waves for name in wave]
    # The domains whose host daemon runs all the time; per-job domains run it only under a job.
    plan["host_daemon_domains"] = [name for name in domains_in_run
                                   if plan["domains"][name]["mode"] not in ("dra", PER_JOB)]
    plan["per_job_domains"] = [name for name in domains_in_run if plan["domains"][name]["mode"] == PER_JOB]
    for tray in trays:
        options = tray_options[tray]
        name = model["host_domain"][tray]
        address = next(node["address"] for node in model["domains"][name]["nodes"] if node["host"] == tray)
        plan["trays"][tray] = {
            "domain": name,
            "address": address,
            "settings": daemon_settings(options, address),
            "channel_entries": channel_entries(options["imex_mode"], options["imex_channel0"],
                                               options.get("imex_channels") or []),
            # The isolation channels as a list (they may have come as JSON or YAML text).
            "channels_extra": list(options.get("imex_channels") or []),
            "read_files": [options["imex_nodes_config_path"], options["imex_config_path"]],
            "read_stat_files": tls_paths(options),
            "per_job": options["imex_mode"] == PER_JOB,
            "slurm_job_paths": slurm_job_paths(options) if options["imex_mode"] == PER_JOB else {},
            # Each TLS option (CA, certificate, key) is PEM text or a controller path.
            "tls_pem": [is_pem(options.get(option)) for option in TLS_FILE_OPTIONS],
        }
        if options["imex_mode"] == PER_JOB:
            # No node list to read: the prolog writes it per job.
            plan["trays"][tray]["read_files"] = [options["imex_config_path"]] + [
                plan["trays"][tray]["slurm_job_paths"][what] for what in ("map", "prolog", "epilog")]
    return plan


# ---------------------------------------------------------------------------------------------------
# After the one read of each tray.

def daemon_started(read, service):
    """Epoch seconds at which the tray's daemon started, when the read shows it running; else None."""
    if ((read or {}).get("services") or {}).get(service) != "active":
        return None
    return ((read or {}).get("services_started") or {}).get(service)


def pending_restart(read, service, paths, stat_paths=()):
    """Why a running daemon runs files older than those on disk (a run stopped between its writes and
    its restart, or a hand edit), or None.

    The daemon reads its files only when it starts: a file changed after the start is not in force.
    Change times, not modification times: copying a file with its times kept still moves its ctime.
    """
    started = daemon_started(read, service)
    if started is None:
        return None
    files = dict((read or {}).get("files") or {})
    files.update((read or {}).get("stat_files") or {})
    newer = []
    for path in list(paths) + list(stat_paths):
        ctime = (files.get(path) or {}).get("ctime")
        if ctime is not None and ctime > started + PENDING_SLACK_S:
            newer.append((ctime, path))
    if not newer:
        return None
    newest, _path = max(newer)
    return "daemon started at %s, before %s %s written at %s" % (
        _utc(started), ", ".join(path for _ctime, path in sorted(newer)), "was" if len(newer) == 1 else "were",
        _utc(newest))


def _utc(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def busy_reasons(tray, read, service):
    """What runs on one tray (GPU compute processes, a Slurm job, or either unreadable), as phrases.

    Unreadable counts as busy: a restart that cuts a job is worse than a run refused for a reason
    the operator can see and override.
    """
    read = read or {}
    work = []
    if "compute_apps" in read:
        if read["compute_apps"] is None:
            work.append("GPU processes could not be read")
        else:
            work.extend("pid %s %s" % (app.get("pid"), app.get("name")) for app in read["compute_apps"])
    slurm = read.get("slurm")
    if isinstance(slurm, dict) and slurm.get("installed"):
        if slurm.get("error") or not slurm.get("state"):
            work.append("Slurm state of node %s could not be read (%s)"
                        % (slurm.get("node"), slurm.get("error") or "no state"))
        elif slurm_busy(slurm["state"]):
            work.append("Slurm node %s state %s" % (slurm.get("node"), slurm["state"]))
    elif slurm_busy(read.get("slurm_state")):
        work.append("Slurm node state %s" % read["slurm_state"])
    return work


def busy_guard(trays, reads, service, allow_busy=False):
    """One phrase per tray of a domain with work on it while its daemon runs; [] when the domain may
    restart. A domain whose daemons all are stopped is never busy: nothing can be using it."""
    if allow_busy:
        return []
    if not any(((reads.get(tray) or {}).get("services") or {}).get(service) == "active" for tray in trays):
        return []
    found = []
    for tray in trays:
        work = busy_reasons(tray, reads.get(tray), service)
        if work:
            found.append("%s: %s" % (tray, ", ".join(work)))
    return found


def per_job_busy(trays, reads, service, allow_busy=False):
    """One phrase per tray with work on it, daemon running or not: in the per-job mode a job that
    shares its nodes runs without a daemon, and its trays are not rewritten under it either."""
    if allow_busy:
        return []
    found = []
    for tray in trays:
        work = busy_reasons(tray, reads.get(tray), service)
        if work:
            found.append("%s: %s" % (tray, ", ".join(work)))
    return found


# What a per-job tray holds, as the verdicts name it.
_PER_JOB_ITEMS = {"map": "the per-job map %s", "prolog": "the prolog %s", "epilog": "the epilog %s",
                  "config": "config.cfg %s", "service": "service %s (stopped, disabled, not masked)"}


def _per_job_tray(name, domain, tray, entry, options, read, names, script_sha256, converge):
    """The per-job part of a tray's plan: what to write and what the verdict will say of it."""
    service = domain["service"]
    paths = entry["slurm_job_paths"]
    nodes = [(names[member], address) for member, address in zip(domain["trays"], domain["addresses"])]
    entry["slurm_map"] = slurm_job_map(name, nodes, names[tray], options)
    entry["slurm_node_name"] = names[tray]
    differs = per_job_drift(read, paths, entry["slurm_map"], script_sha256)
    state = (read.get("services") or {}).get(service)
    enabled = (read.get("services_enabled") or {}).get(service)
    # Left to the prolog: not running between jobs, not started at boot, not masked. A run stops a
    # daemon only on a tray where nothing runs (a busy domain's writes are predictions).
    release = state not in ("inactive", "failed") or enabled != "disabled"
    entry.update(write_map="map" in differs, write_prolog="prolog" in differs, write_epilog="epilog" in differs,
                 scripts_to_install=[what for what in ("prolog", "epilog") if what in differs], release=release)
    entry["write_slurm_job"] = bool(differs)
    items = [what for what in ("map", "prolog", "epilog") if what in differs]
    if entry["write_config"]:
        items.append("config")
    shown = dict(paths, config=options["imex_config_path"], service=service)
    problems = []
    if converge:
        # site.yml writes what differs; only what it holds back stays wrong.
        if entry["predicted"] and (items or release):
            held = [_PER_JOB_ITEMS[what] % shown[what] for what in items + (["service"] if release else [])]
            why = ("work runs on the domain (%s)" % "; ".join(domain["busy"]) if domain["busy"]
                   else "this run holds only part of the domain" if domain["partial"] else "check mode")
            problems.append("tray %s: not written, as %s: %s; run site.yml again once it has ended"
                            % (tray, why, ", ".join(held)))
        problems.extend("tray %s: %s" % (tray, problem)
                        for problem in per_job_state_problems(read, service) if not problem.startswith("service"))
    else:
        problems.extend("tray %s: %s is missing or differs from what site.yml installs (content, root-owned, mode %s)"
                        % (tray, _PER_JOB_ITEMS[what] % shown[what], "0755" if what in ("prolog", "epilog") else
                           "0644") for what in items if what != "config")
        if "config" in items:
            problems.append("tray %s: %s differs from the inventory's settings" % (
                tray, _PER_JOB_ITEMS["config"] % shown["config"]))
        problems.extend("tray %s: %s" % (tray, problem) for problem in per_job_state_problems(read, service))
    entry["per_job_problems"] = problems


# The bound of a long tray command of the run (the initramfs rebuild: minutes with several kernels).
LONG_COMMAND_TIMEOUT_S = 900


def command_timeout(stale_after_s):
    """Seconds a long tray command may run: LONG_COMMAND_TIMEOUT_S, or half the staleness of the
    run's locks when that is shorter, so that one hung command cannot outlive the locks it runs under."""
    return max(1, min(LONG_COMMAND_TIMEOUT_S, int(stale_after_s) // 2))


def after_read(plan, model, tray_options, reads, shared_partition=False, skip_fabric=False, converge=True,
               script_sha256=None, slurm_names=None):
    """The plan after each tray was read once; PlanError with the fabric and version gate's problems.

    converge: the run may change the trays (site.yml); False for a read-only proof (validate.yml),
    which refuses no hand-over and proves every domain, in check mode too.
    script_sha256: the checksum of the per-job program the role ships; slurm_names: {tray: Slurm node
    name} from the inventory, for the trays of a per-job domain that the run does not read.
    """
    notes = [] if shared_partition else None
    gate = [] if skip_fabric else fabric_problems(model, reads, notes=notes)
    gate += version_problems(model, reads)
    if gate:
        raise PlanError(["NVLink fabric or versions do not match the inventory; nothing was changed:"] + gate)
    plan = json.loads(json.dumps(plan))
    plan["notes"] = notes or []
    handover = []
    for name, domain in plan["domains"].items():
        service = domain["service"]
        in_run = {tray: reads.get(tray) or {} for tray in domain["trays_in_run"]}
        per_job = domain["mode"] == PER_JOB
        # Per job, what a tray runs is never the collection's daemon to stop: any work holds the writes.
        busy = (per_job_busy if per_job else busy_guard)(domain["trays_in_run"], in_run, service, domain["allow_busy"])
        domain.update(busy=busy, predicted=plan["check_mode"] or domain["partial"] or bool(busy))
        if per_job:
            names = slurm_node_names(domain["trays"], tray_options, reads, slurm_names)
            shared = {}
            for tray in domain["trays"]:
                shared.setdefault(names[tray], []).append(tray)
            handover.extend("domain %s: trays %s share the Slurm node name %s; the per-job map needs one name per "
                            "tray (set imex_slurm_node_name)" % (name, ", ".join(trays), node)
                            for node, trays in sorted(shared.items()) if len(trays) > 1)
        pending = {}
        for tray in domain["trays_in_run"]:
            options = tray_options[tray]
            read = in_run[tray]
            entry = plan["trays"][tray]
            drift = daemon_drift(read, domain["addresses"], options["imex_nodes_config_path"], entry["settings"],
                                 options["imex_config_path"], options["imex_max_nodes"])
            host_daemon = domain["mode"] != "dra"
            entry.update(
                # Per job, the prolog writes the node list.
                write_nodes=bool(drift["nodes"]) and host_daemon and not per_job,
                write_config=bool(drift["config"]) and host_daemon,
                write_tls=bool(options.get("imex_tls")) and host_daemon,
                handover=not host_daemon,
                channels=channels_to_ensure(entry["channel_entries"], read.get("channels") or {}),
                stopped=((read.get("services") or {}).get(service) in ("inactive", "failed")),
                # A reboot for the channel option cuts what runs on the tray as a restart does.
                reboot_allowed=bool(options["imex_reboot_allowed"]) and not busy,
                command_timeout_s=command_timeout(options["imex_lock_stale_after_s"]),
                predicted=domain["predicted"],
            )
            entry.update(write_map=False, write_prolog=False, write_epilog=False, scripts_to_install=[], write_slurm_job=False,
                         release=False)
            if per_job:
                _per_job_tray(name, domain, tray, entry, options, read, names, script_sha256, converge)
            entry["write"] = any(entry[key] for key in ("write_nodes", "write_config", "write_tls", "handover",
                                                        "write_map", "write_prolog", "write_epilog", "release"))
            entry["channels_role"] = (domain["mode"] in ("slurm", PER_JOB, "dra") or bool(options.get("imex_channels"))
                                      or bool(entry["channels"]))
            why = pending_restart(read, service, entry["read_files"], entry["read_stat_files"])
            # Per job, each prolog starts the daemon afresh with the files on disk.
            if why and domain["mode"] not in ("dra", PER_JOB):
                pending[tray] = why
        domain["pending"] = pending
        if domain["mode"] == "dra" and converge:
            running = [tray for tray in domain["trays_in_run"]
                       if (in_run[tray].get("services") or {}).get(service) == "active"]
            left_out = [tray for tray in domain["trays"] if tray not in in_run]
            if busy:
                handover.append(_handover_refusal(name, "while work runs on it (%s)" % "; ".join(busy),
                                                  "Drain the trays, wait for the work to end and run again, or set "
                                                  "imex_allow_busy_restart=true."))
            elif running and left_out:
                handover.append(_handover_refusal(name, "on part of the domain (this run leaves out %s)"
                                                  % ", ".join(left_out),
                                                  "Run against the whole domain (drop --limit, or do not slice the "
                                                  "job)."))
    if handover:
        raise PlanError(handover)
    # Under --check a converge restarts nothing and so proves nothing; the DRA driver's domains are
    # not the host daemon's to prove.
    # A per-job domain has no daemon to prove between jobs: its installation is judged instead.
    plan["prove_now"] = [name for name, domain in sorted(plan["domains"].items())
                         if domain["mode"] != PER_JOB
                         and (not converge or (domain["mode"] != "dra" and not plan["check_mode"]))]
    # Judged: those proven now, those a read before the restarts already proved (restart()), and the
    # per-job installations (after their writes).
    plan["judge_now"] = sorted(plan["prove_now"] + [name for name in plan["per_job_domains"]
                                                    if not converge or not plan["check_mode"]])
    return plan


def _handover_refusal(name, reason, advice):
    return ("domain %s: the host nvidia-imex is not handed over to the DRA driver %s. Stopping its daemons makes "
            "the domain's jobs lose the memory they share. Nothing was stopped. %s" % (name, reason, advice))


# ---------------------------------------------------------------------------------------------------
# One wave: restart, start, refuse.

def restart(plan, wave, writes, statuses):
    """The plan of one wave after its writes and its status read; PlanError with what refuses it.

    writes: {tray: {"node list": result, "config": result, "TLS material": result}} of the wave's trays
    ({} where a write did not run); statuses: {domain: the imex_status result its leader read}.
    A domain restarts, every tray together, when a write changed a file of one of its trays or when a
    daemon runs files older than those on disk (pending); a tray the status does not show READY in a
    domain that does not restart is only started.
    """
    plan = json.loads(json.dumps(plan))
    problems = []
    for name in wave:
        domain = plan["domains"][name]
        if domain["mode"] in ("dra", PER_JOB):
            continue
        in_run = domain["trays_in_run"]
        left_out = [tray for tray in domain["trays"] if tray not in in_run]
        by_checksum = {}
        for tray in in_run:
            checksum = ((writes.get(tray) or {}).get("node list") or {}).get("checksum")
            if checksum is not None:
                by_checksum.setdefault(checksum, []).append(tray)
        if len(by_checksum) > 1:
            problems.append("domain %s: trays hold different node lists (%s); the daemons would answer !M!. Nothing "
                            "was restarted." % (name, "; ".join("%s on %s" % (str(checksum)[:12], ", ".join(holders))
                                                                for checksum, holders in by_checksum.items())))
            continue
        changes, reasons, joining = {}, {}, []
        for tray in in_run:
            changes[tray] = [what for what, result in sorted((writes.get(tray) or {}).items())
                             if (result or {}).get("changed")]
            # Not where the writes were held back (a partial or busy domain): they were not made.
            if changes[tray] and plan["trays"][tray].get("stopped") and not (domain["partial"] or domain["busy"]):
                # A stopped daemon reads its new files when it starts; the running trays' files did not
                # change (else they restart too), so it joins their domain as a tray back from repair does.
                joining.append(tray)
            elif changes[tray]:
                reasons[tray] = "new " + " and ".join(changes[tray])
            elif tray in domain["pending"]:
                reasons[tray] = "pending restart: " + domain["pending"][tray]
        if reasons:
            # The domain restarts: the stopped trays' new files count among its reasons.
            reasons.update((tray, "new " + " and ".join(changes[tray])) for tray in joining)
            joining = []
        domain["restart_reasons"] = reasons
        domain["restart"] = False
        changed = [tray for tray in in_run if changes[tray]]
        stale = [tray for tray in in_run if tray in reasons and not changes[tray]]
        if reasons and left_out:
            problems.extend(
                "tray %s needs %s, which takes a restart of every tray of its domain together, but this run leaves "
                "out %s. Nothing was changed. Run against the whole domain (drop --limit, or do not slice the job)."
                % (tray, "a new " + " and ".join(changes[tray]) if changes[tray] else "a restart (%s)" % reasons[tray],
                   ", ".join(left_out)) for tray in in_run if tray in reasons)
        elif reasons and domain["busy"]:
            held_back = []
            if changed:
                held_back.append("Its new %s (on %s) was not written." % (
                    " and ".join(sorted({what for tray in changed for what in changes[tray]})), ", ".join(changed)))
            if stale:
                held_back.append("Its daemons on %s run files older than those on disk (%s)."
                                 % (", ".join(stale), "; ".join(domain["pending"][tray] for tray in stale)))
            problems.append(
                "domain %s is not restarted: work runs on it (%s). A restart makes every IMEX daemon of the domain a "
                "new instance and cuts the memory its jobs share. %s Drain the trays (for example scontrol update "
                "nodename=... state=drain, or kubectl cordon), wait for the work to end and run again, or set "
                "imex_allow_busy_restart=true." % (name, "; ".join(domain["busy"]), " ".join(held_back)))
        elif reasons:
            domain["restart"] = True
            # The restart puts the files on disk in force: the proof judges the new daemons.
            domain["pending"] = {}
        status = statuses.get(name) or {}
        ready = {node.get("address") for node in status.get("nodes") or [] if node.get("status") == "READY"}
        starts = [] if domain["restart"] else [
            tray for tray in in_run if plan["trays"][tray]["address"] not in ready or tray in joining]
        domain["start"] = starts
        domain["proven_before_restart"] = bool(status.get("healthy")) and not domain["restart"] and not starts
    if problems:
        raise PlanError(problems)
    # A domain whose status read before any restart proves it, and in which nothing restarts or
    # starts, needs no second read.
    plan["prove_now"] = [name for name in plan["prove_now"]
                         if name not in wave or not plan["domains"][name].get("proven_before_restart")]
    plan["restarting"] = [name for name in wave if plan["domains"][name].get("restart")]
    for name in wave:
        domain = plan["domains"][name]
        reasons = domain.get("restart_reasons") or {}
        for tray in domain["trays_in_run"]:
            entry = plan["trays"][tray]
            entry["restart"] = bool(domain.get("restart"))
            entry["start"] = tray in domain.get("start", [])
            if entry["restart"]:
                entry["action"] = "restarting all %d trays of domain %s together: %s" % (
                    len(domain["trays"]), name, reasons.get(tray) or "%s of its trays: %s" % (
                        "one" if len(reasons) == 1 else len(reasons),
                        "; ".join("%s: %s" % item for item in sorted(reasons.items()))))
            elif entry["start"]:
                entry["action"] = "starting the daemon: the status of domain %s does not show this tray READY" % name
    return plan


def guard(plan, wave, reads):
    """The busy guard at the last moment: for each domain of the wave that restarts, what runs on its
    trays as read right before their daemons stop (after the operator's pre-restart tasks)."""
    problems = []
    for name in wave:
        domain = plan["domains"][name]
        if not domain.get("restart"):
            continue
        busy = busy_guard(domain["trays_in_run"], reads, domain["service"], domain["allow_busy"])
        if busy:
            problems.append(
                "domain %s is not restarted: work runs on it (%s), as read just before its daemons would stop. A "
                "restart makes every IMEX daemon of the domain a new instance and cuts the memory its jobs share. "
                "Its files are written (%s); the next run restarts it once the work has ended. Drain the trays, or "
                "set imex_allow_busy_restart=true."
                % (name, "; ".join(busy), "; ".join("%s: %s" % item for item in sorted(domain["restart_reasons"].items()))))
    if problems:
        raise PlanError(problems)
    return plan


# ---------------------------------------------------------------------------------------------------
# Verdicts.

def verdicts(plan, model, domains, statuses, play_hosts, allowed_broken_pairs=0, logs=None, pending=None):
    """The report of each domain of ``domains`` from its proof (statuses: {domain: imex_status result}).

    pending: {domain: {tray: why}} daemons that run older files than those on disk: the domain is not
    proven to run what the inventory says, whatever its matrix shows.
    """
    reports = []
    for name in domains:
        if plan["domains"][name].get("mode") == PER_JOB:
            reports.append(per_job_report(plan, model, name))
            continue
        leader = plan["domains"][name]["leader"]
        report = domain_report(name, model, list(play_hosts), {leader: statuses.get(name) or {}},
                               allowed_broken_pairs=int(allowed_broken_pairs))
        away = plan["domains"][name].get("out_of_service") or []
        report["out_of_service"] = away
        if away and report["verdict"] in ("healthy", "tolerated"):
            report["message"] = "domain %s: %s, every tray in service READY and connected; out of service: %s" % (
                name, (report.get("status") or {}).get("domain_state") or "UNKNOWN", ", ".join(away))
        stale = (pending or {}).get(name) or {}
        if stale:
            report["ok"] = False
            if report["verdict"] in ("healthy", "tolerated"):
                report["verdict"] = "stale"
            report["problems"] = report["problems"] + [
                "tray %s runs a config other than the one on disk (%s): a restart of the domain is pending; "
                "run site.yml to restart it" % (tray, why) for tray, why in sorted(stale.items())]
            report["message"] = problems_message(name, (report.get("status") or {}).get("domain_state") or "UNKNOWN",
                                                 report["verdict"], report["problems"])
        if logs:
            report = with_daemon_logs(report, model, logs)
        reports.append(report)
    return reports


def per_job_report(plan, model, name):
    """The report of a per-job domain: its installation (no daemon runs between jobs to be proven)."""
    domain = plan["domains"][name]
    problems = [problem for tray in domain["trays_in_run"]
                for problem in plan["trays"][tray].get("per_job_problems") or []]
    report = {
        "domain": name,
        "mode": PER_JOB,
        "per_job": True,
        "expected_nodes": list(model["domains"][name]["addresses"]),
        "leader": domain["leader"],
        "trays_not_in_run": [tray for tray in domain["trays"] if tray not in domain["trays_in_run"]],
        "out_of_service": domain.get("out_of_service") or [],
        "slurm_node_names": {tray: plan["trays"][tray].get("slurm_node_name") for tray in domain["trays_in_run"]},
        "status": {"domain_state": None},
        "verdict": "unhealthy" if problems else "healthy",
        "ok": not problems,
        "problems": problems,
    }
    if problems:
        report["message"] = problems_message(name, "PER-JOB", "unhealthy", problems)
    else:
        report["message"] = ("domain %s: per-job IMEX installed on %d tray(s) (prolog, epilog, map, config.cfg; the "
                             "service left to the prolog); the daemon runs only under an exclusive job"
                             % (name, len(domain["trays_in_run"])))
    return report


def judged(plan, reports, report_dir=""):
    """The plan with the verdicts of one proof: those of the run so far (earlier waves too) for the
    summary, and what the run says of them."""
    plan = json.loads(json.dumps(plan))
    names = [report["domain"] for report in reports]
    plan["verdicts"] = reports
    plan["run_verdicts"] = [report for report in plan.get("run_verdicts") or [] if report["domain"] not in names] \
        + reports
    failed = [report["message"] for report in reports if not report["ok"]]
    plan["proven"] = not failed
    plan["outcome"] = "\n".join(failed or [report["message"] for report in reports])
    return plan


def explain(reports, model, play_hosts):
    """The trays whose daemon log says why their domain failed."""
    return [tray for report in reports if not report.get("per_job")
            for tray in trays_to_explain(report, model, list(play_hosts))]
