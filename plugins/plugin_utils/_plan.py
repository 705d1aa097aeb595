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
from ansible_collections.rackscale.imex.plugins.module_utils._slurm import SWITCH_NVIDIA_IMEX, glob_covers, release
from ansible_collections.rackscale.imex.plugins.plugin_utils._channels import channel_entries, channels_to_ensure
from ansible_collections.rackscale.imex.plugins.plugin_utils._drift import daemon_drift
from ansible_collections.rackscale.imex.plugins.plugin_utils._fabric_gate import fabric_problems, version_problems
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import (
    DOMAIN_WIDE_OPTIONS,
    TLS_FILE_OPTIONS,
    domain_variance_problems,
    is_pem,
    option_problems,
    PATH_OPTIONS,
    path_problem,
    tls_file_problems,
    tray_path_problems,
    whole_number,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils._tls import tls_problems_and_expiry
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
    "imex_slurm_probe_partition": "str", "imex_tls_min_days_left": "int",
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
# Written under imex_tls_dir right after a run signalled the daemon to reload its TLS files (SIGUSR1):
# TLS files older than it are in force although the daemon started before them.
TLS_RELOAD_MARK = "reloaded"
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
            return whole_number(value), None
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


def tls_reload_mark(options):
    return os.path.join(options["imex_tls_dir"], TLS_RELOAD_MARK)


# A Slurm partition name: one word, as srun --partition takes it.
_PARTITION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def per_job_option_problems(options):
    """The per-job mode's own options: where the prolog and epilog go, the probe's partition."""
    problems = []
    for option in ("imex_slurm_prolog_dir", "imex_slurm_epilog_dir"):
        problem = path_problem(option, options.get(option) or "")
        if problem:
            problems.append(problem)
    # Neither directory may be, hold or lie in a path of the daemon's (the program would land in the TLS
    # directory, or the node list in slurmd's prolog directory, which runs every file there).
    for option in ("imex_slurm_prolog_dir", "imex_slurm_epilog_dir"):
        if not options.get(option) or problems:
            continue
        for other in PATH_OPTIONS:
            if options.get(other):
                problems.extend(tray_path_problems({option: str(options[option]), other: str(options[other])}))
    if options.get("imex_slurm_prolog_dir") and options.get("imex_slurm_prolog_dir") == options.get("imex_slurm_epilog_dir"):
        problems.append("imex_slurm_prolog_dir and imex_slurm_epilog_dir are both %s: the prolog and the epilog are "
                        "installed under one name, so they need two directories (Prolog=.../prolog.d/*, "
                        "Epilog=.../epilog.d/*)" % options["imex_slurm_prolog_dir"])
    partition = options.get("imex_slurm_probe_partition") or ""
    if partition and not _PARTITION.fullmatch(partition):
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


def slurm_job_map(domain_name, nodes, this_node, options, slurm_version=None):
    """The text of a tray's per-job map: its domain's Slurm node names and IMEX addresses in the domain's
    order (the order every node of a job writes its list in), the tray's slurmd release (whose rule tells
    whether a job holds its trays alone), and what the program needs."""
    content = {
        "format": 1,
        "domain": domain_name,
        "this_node": this_node,
        "slurm_version": slurm_version,
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


# Where the lock of a domain lives. Two runs of one domain must always meet at one lock file, whatever
# their out-of-service lists or --limit, and a tray away for repair must not hold back its peers. So the
# place is fixed by the inventory alone: the domain's lock trays are its first LOCK_TRAYS trays in node
# order, and a run holds the domain when it holds the lock file on a majority of them (the first ones in
# service, in order). Any two majorities of one set share a tray, so two runs always contend there; one
# lock tray away (out of service, or in repair and unreachable once marked so) leaves a majority to its
# peers. --limit never moves it: a lock tray outside the play is still where the lock is taken.
LOCK_TRAYS = 3


def lock_trays(domain_trays):
    """(the domain's lock trays, how many of them a run must hold)."""
    candidates = list(domain_trays[:LOCK_TRAYS])
    return candidates, len(candidates) // 2 + 1


def lock_holders(domain_trays, away):
    """The trays on which a run takes the lock of a domain: the first of its lock trays in service, as many
    as a majority ([] when too many are away: lock_problems_away refuses the run)."""
    candidates, needed = lock_trays(domain_trays)
    in_service = [tray for tray in candidates if tray not in away]
    return in_service[:needed] if len(in_service) >= needed else []


def lock_problems_away(domains, domain_trays, away):
    """A domain whose lock trays are too many out of service for a majority: no run could exclude another."""
    problems = []
    for name in domains:
        candidates, needed = lock_trays(domain_trays[name])
        gone = [tray for tray in candidates if tray in away]
        if len(candidates) - len(gone) < needed:
            verb = "is" if len(gone) == 1 else "are"
            problems.append(
                "domain %s: its lock is held on %d of its lock trays %s (its first trays in node order), but %s %s "
                "out of service (imex_trays_out_of_service): two runs could then miss each other. Bring %s back "
                "into service first" % (name, needed, ", ".join(candidates), ", ".join(gone), verb, " or ".join(gone)))
    return problems


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


def preflight(model, tray_options, play_hosts, run_id, check_mode=False, report_only=False, is_file=os.path.isfile,
              tls_check_time=None, read_text=None):
    """The plan of a run before any tray is contacted; PlanError with every problem.

    tls_check_time: epoch seconds at which each tray's certificate must be valid (and stay valid for
    imex_tls_min_days_left); the clock is read once for it when not given. read_text: reads a
    controller file as bytes (the TLS material given as paths).

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
    tls_trays = [tray for tray in trays if tray_options[tray].get("imex_tls")]
    missing = tls_file_problems([(tray, tray_options[tray]) for tray in tls_trays], is_file=is_file)
    problems.extend(missing)
    certificates = {}
    if tls_trays and not missing:
        addresses = {node["host"]: node["address"] for name in domains_in_run for node in model["domains"][name]["nodes"]}
        certificates, found = tls_problems_and_expiry(
            [(tray, addresses[tray], tray_options[tray]) for tray in tls_trays],
            time.time() if tls_check_time is None else tls_check_time, **({"read_text": read_text} if read_text else {}))
        problems.extend(found)
    problems.extend(lock_problems_away(domains_in_run, domain_trays, away))
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
            "lock_holders": lock_holders(domain_trays[name], away),
            "partial": len(in_run) + len(out) < len(domain_trays[name]),
            # Left out by --limit (or a sliced job) alone: a tray out of service is away, not left out, and
            # never holds back its peers.
            "left_out": [tray for tray in domain_trays[name] if tray not in in_run and tray not in out],
            "mode": tray_options[in_run[0]]["imex_mode"],
            "service": tray_options[in_run[0]]["imex_service"],
            "allow_busy": tray_options[in_run[0]]["imex_allow_busy_restart"],
        }
    # One domain at a time, in a fixed order (and each domain's lock trays in node order), so that two runs
    # never wait for each other's locks.
    plan["locks"] = [{"domain": name, "holder": holder}
                     for wave in waves for name in wave for holder in plan["domains"][name]["lock_holders"]]
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
            # The reload mark after the TLS files: a daemon that reloaded them runs them.
            "read_stat_files": tls_paths(options) + ([tls_reload_mark(options)] if options.get("imex_tls") else []),
            "tls_files": tls_paths(options),
            "tls_certificate": certificates.get(tray),
            "per_job": options["imex_mode"] == PER_JOB,
            "slurm_job_paths": slurm_job_paths(options) if options["imex_mode"] == PER_JOB else {},
            # Out of the per-job mode, its program would still stop and start the daemon around every
            # exclusive job: where a read finds it (or its map), it is removed.
            "slurm_job_leftovers": [] if options["imex_mode"] == PER_JOB else sorted(slurm_job_paths(options).values()),
            # Each TLS option (CA, certificate, key) is PEM text or a controller path.
            "tls_pem": [is_pem(options.get(option)) for option in TLS_FILE_OPTIONS],
        }
        plan["trays"][tray]["read_stat_files"] += plan["trays"][tray]["slurm_job_leftovers"]
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


def daemon_start_bound(read, service):
    """Epoch seconds from which a file change may have missed the running daemon, or None when it does
    not run: when its unit began to start (InactiveExitTimestamp). systemd sets ExecMainStartTimestamp
    after the daemon has read its files, so that one alone would miss a change made in between."""
    started = daemon_started(read, service)
    if started is None:
        return None
    began = (((read or {}).get("services_instance") or {}).get(service) or {}).get("inactive_exit")
    return started if began is None else min(began, started)


def loaded_record(read, service):
    """{path: sha256, null for an absent file} the running daemon loaded, as recorded when a run started
    it; None when no record is of the running instance (systemd's InvocationID): a daemon started by
    hand or by an older release of the collection, a tray rebooted since, or a read that could not tell."""
    if daemon_started(read, service) is None:
        return None
    instance = ((read or {}).get("services_instance") or {}).get(service) or {}
    loaded = instance.get("loaded") or {}
    if not instance.get("invocation_id") or loaded.get("invocation_id") != instance["invocation_id"]:
        return None
    return dict(loaded.get("files") or {})


def pending_restart(read, service, paths, stat_paths=()):
    """Why a running daemon runs files other than those on disk (a run stopped between its writes and
    its restart, or a hand edit), or None.

    The daemon reads its files only when it starts. Where a record says what the running instance
    loaded, a file of ``paths`` is pending when its content differs: a no-op chmod, chown, restorecon,
    an identical rewrite or a clock step changes nothing. A file the record does not cover (and each of
    ``stat_paths``, never read) is pending when it changed after the daemon began to start. Change
    times, not modification times: copying a file with its times kept still moves its ctime.
    """
    started = daemon_started(read, service)
    if started is None:
        return None
    loaded = loaded_record(read, service)
    files = (read or {}).get("files") or {}
    other, by_time = [], list(stat_paths)
    for path in paths:
        described = files.get(path) or {}
        if loaded is None or path not in loaded or described.get("error") or "exists" not in described:
            by_time.append(path)
        elif (described.get("sha256") if described["exists"] else None) != loaded[path]:
            other.append(path)
    reasons = []
    if other:
        reasons.append("daemon started at %s loaded another %s than the one on disk" % (_utc(started), ", ".join(other)))
    bound = daemon_start_bound(read, service)
    newer = _written_after(read, by_time, bound)
    if newer:
        reasons.append("daemon started at %s, before %s" % (_utc(bound), newer))
    return "; ".join(reasons) or None


def release_restart(tray, read, service):
    """Why the tray's running daemon runs another IMEX release than the installed one, or None.

    A package changed under a running daemon leaves it on the old release, whose peers see a version
    mismatch, while every installed release agrees: only a restart puts the installed one in force.
    A release the tray read could not tell (null) decides nothing.
    """
    if daemon_started(read, service) is None:
        return None
    installed = (read or {}).get("imex_version")
    running = ((read or {}).get("daemon_release") or {}).get("running")
    if not installed or not running or running == installed:
        return None
    return "the daemon on %s runs IMEX %s, but %s is installed" % (tray, running, installed)


def _written_after(read, paths, since):
    """'<paths> was/were written at <time>' for those of ``paths`` the read shows changed after ``since``."""
    files = dict((read or {}).get("files") or {})
    files.update((read or {}).get("stat_files") or {})
    newer = []
    for path in paths:
        ctime = (files.get(path) or {}).get("ctime")
        if ctime is not None and ctime > since + PENDING_SLACK_S:
            newer.append((ctime, path))
    if not newer:
        return None
    newest, _path = max(newer)
    return "%s %s written at %s" % (", ".join(path for _ctime, path in sorted(newer)),
                                    "was" if len(newer) == 1 else "were", _utc(newest))


def pending_reload(read, service, tls_files, reload_mark):
    """Why a running daemon runs TLS files older than those on disk, or None: files changed after both
    its start and the last reload a run signalled (the mark it writes right after the signal)."""
    started = daemon_started(read, service)
    if started is None:
        return None
    marked = (((read or {}).get("stat_files") or {}).get(reload_mark) or {}).get("ctime")
    since = max(started, marked or 0)
    newer = _written_after(read, tls_files, since)
    if not newer:
        return None
    return "TLS credentials loaded at %s, before %s" % (_utc(since), newer)


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
    return _work_on(trays, reads, service)


def per_job_busy(trays, reads, service, allow_busy=False):
    """One phrase per tray with work on it, daemon running or not: in the per-job mode a job that
    shares its nodes runs without a daemon, and its trays are not rewritten under it either."""
    if allow_busy:
        return []
    return _work_on(trays, reads, service)


def _work_on(trays, reads, service):
    """'<tray>: <what runs there>' for each tray with work on it."""
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
    entry["slurm_map"] = slurm_job_map(name, nodes, names[tray], options,
                                       (read.get("slurm_config") or {}).get("slurmd_version"))
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


# ---------------------------------------------------------------------------------------------------
# Slurm's IMEX channel plugin (switch/nvidia_imex), as scontrol show config tells it on each tray.

# What scontrol says when slurmctld cannot be reached (a cluster is there, but not answering), and
# what the read says of a call that hung.
_CONTROLLER_UNREACHABLE = ("Unable to contact slurm controller", "did not answer")
SLURM_MODES = ("slurm", PER_JOB)


def _unreachable(error):
    return any(text in str(error or "") for text in _CONTROLLER_UNREACHABLE)


# From Slurm 25.11 the channel plugin hands out channels 1 to imex_channel_count (before: 1 to
# imex_channel_count - 1); the driver makes channels 0 to NVreg_ImexChannelCount - 1.
FULL_CHANNEL_RANGE_FROM = (25, 11)


def _channel_count_issues(slurm_version, plugin_count, count, source):
    """([problem], [warning]) of the plugin's channel pool against the driver's channels, by slurmctld's release."""
    where = ("either SwitchParameters=imex_channel_count=%d in slurm.conf or \"options nvidia NVreg_ImexChannelCount=%d\" "
             "in /etc/modprobe.d on every tray (then rebuild the initramfs and reload the driver)")
    driver = "the driver makes channels 0 to %d (NVreg_ImexChannelCount=%d, read from %s)" % (count - 1, count, source)
    found = release(slurm_version)
    if found is None:
        # Either rule may hold: refuse only what neither release accepts.
        if plugin_count > count:
            return ["Slurm's %s hands out channels up to %d or %d by its release (imex_channel_count=%d; SLURM_VERSION "
                    "%s unknown), but %s: make imex_channel_count at most NVreg_ImexChannelCount, %s"
                    % (SWITCH_NVIDIA_IMEX, plugin_count - 1, plugin_count, plugin_count, slurm_version or "not shown",
                       driver, where % (count, plugin_count + 1))], []
        return [], ["slurmctld's release (SLURM_VERSION=%s) is unknown: imex_channel_count=%d is checked only against "
                    "the rule both releases accept (at most NVreg_ImexChannelCount=%d)"
                    % (slurm_version or "not shown", plugin_count, count)]
    if found[:2] >= FULL_CHANNEL_RANGE_FROM:
        if plugin_count <= count - 1:
            return [], []
        return ["Slurm %s's %s hands out channels 1 to %d (imex_channel_count=%d: SwitchParameters in slurm.conf, 2048 "
                "when unset), but %s: from Slurm 25.11 imex_channel_count must be at most NVreg_ImexChannelCount - 1, "
                "%s" % (slurm_version, SWITCH_NVIDIA_IMEX, plugin_count, plugin_count, driver,
                        where % (count - 1, plugin_count + 1))], []
    if plugin_count == count:
        return [], []
    return ["Slurm %s's %s hands out channels 1 to %d (imex_channel_count=%d: SwitchParameters in slurm.conf, 2048 "
            "when unset), but the driver makes %d (NVreg_ImexChannelCount=%d, read from %s): before Slurm 25.11 the two "
            "counts must be one value, %s" % (slurm_version, SWITCH_NVIDIA_IMEX, plugin_count - 1, plugin_count, count,
                                              count, source, where % (count, plugin_count))], []


def _script_timeout_issues(config, total_timeout_s):
    """[problem]: a Slurm limit on the prolog or epilog shorter than the per-job program's own bound (slurmd would
    kill the program mid-way and drain the node)."""
    problems = []
    for phase, key in (("prolog", "prolog_timeout"), ("epilog", "epilog_timeout")):
        limit = config.get(key)
        if limit is not None and limit < total_timeout_s:
            own = "%sTimeout" % phase.capitalize()
            problems.append("slurm.conf gives the per-job %s %d s (%s, or PrologEpilogTimeout where the release has no "
                            "%s), less than the %d s the program may take (its total_timeout_s): slurmd would kill it "
                            "mid-way and drain the node; set PrologEpilogTimeout (or %s) to %d or more in slurm.conf"
                            % (phase, limit, own, own, total_timeout_s, own, total_timeout_s))
    return problems


def _tray_slurm_issues(options, read, entry):
    """([problem], [warning]) of one tray, each a sentence without the tray's name."""
    mode = options["imex_mode"]
    asks_channels = bool(options.get("imex_channel0")) or bool(options.get("imex_channels"))
    found = read.get("slurm_config")
    problems, warnings = [], []
    if not isinstance(found, dict):
        return problems, warnings
    if not found.get("installed"):
        if mode in SLURM_MODES:
            warnings.append("scontrol is not installed: slurm.conf is not checked against imex_mode=%s (SwitchType, "
                            "the channel count%s)" % (mode, ", PrologFlags, Prolog and Epilog" if mode == PER_JOB else ""))
        return problems, warnings
    config = found.get("config")
    if found.get("error") or not isinstance(config, dict):
        # Outside the Slurm modes, an scontrol that finds no cluster (no configuration source) is no cluster.
        if mode in SLURM_MODES or (asks_channels and _unreachable(found.get("error"))):
            warnings.append("Slurm's configuration could not be read (%s): slurm.conf is not checked against the IMEX "
                            "channels%s" % (found.get("error") or "no answer",
                                            " and the per-job prolog" if mode == PER_JOB else ""))
        return problems, warnings
    owns = config.get("switch_type") == SWITCH_NVIDIA_IMEX
    if mode in SLURM_MODES and not owns:
        problems.append("imex_mode=%s, but Slurm's SwitchType is %s: add SwitchType=%s to slurm.conf; Slurm then owns "
                        "the channels (a change of SwitchType takes a restart of every Slurm daemon)"
                        % (mode, config.get("switch_type") or "not set", SWITCH_NVIDIA_IMEX))
    if owns:
        why = ("Slurm's %s (SwitchType in slurm.conf) owns the IMEX channels: slurmd empties "
               "/dev/nvidia-caps-imex-channels when it starts and gives each job its own channel" % SWITCH_NVIDIA_IMEX)
        if options.get("imex_channel0"):
            problems.append("imex_channel0=true (imex_mode=%s), but %s; set imex_channel0=false" % (mode, why))
        if options.get("imex_channels"):
            problems.append("imex_channels asks for channel(s) %s (imex_mode=%s), but %s; set imex_channels=[]"
                            % (", ".join(str((channel or {}).get("channel")) for channel in options["imex_channels"]),
                               mode, why))
        plugin_count = config.get("imex_channel_count")
        count = (read.get("channel_count") or {}).get("value")
        if plugin_count is None:
            warnings.append("SwitchParameters=%s in slurm.conf gives no whole number for imex_channel_count: the "
                            "channel count is not checked" % config.get("switch_parameters"))
        elif count is not None:
            found, said = _channel_count_issues(config.get("version"), plugin_count, count,
                                                (read.get("channel_count") or {}).get("source"))
            problems.extend(found)
            warnings.extend(said)
        elif mode in SLURM_MODES:
            warnings.append("the driver's NVreg_ImexChannelCount could not be read (driver not loaded?): its match with "
                            "Slurm's imex_channel_count=%d is not checked" % plugin_count)
    if mode == PER_JOB:
        problems.extend(_script_timeout_issues(config, SLURM_JOB_BOUNDS["total_timeout_s"]))
        if "Alloc" not in (config.get("prolog_flags") or []):
            problems.append("PrologFlags is %s: the per-job prolog must run on every node of a job when it is "
                            "allocated; add PrologFlags=Alloc to slurm.conf (keeping any other flag: "
                            "PrologFlags=Alloc,...)" % (",".join(config.get("prolog_flags") or []) or "not set"))
        for what, key, option in (("prolog", "Prolog", "imex_slurm_prolog_dir"),
                                  ("epilog", "Epilog", "imex_slurm_epilog_dir")):
            installed = (entry.get("slurm_job_paths") or {}).get(what)
            entries = config.get(what) or []
            if installed and not any(glob_covers(pattern, installed) for pattern in entries):
                problems.append("slurm.conf runs %s, not %s, where the role installs the per-job %s (%s=%s): add "
                                "the line %s=%s/* to slurm.conf (slurmd runs every %s= entry), or set %s to the "
                                "directory slurm.conf runs"
                                % ("%s=%s" % (key, ",".join(entries)) if entries else "no %s" % key, installed, what,
                                   option, options.get(option), key, options.get(option), key, option))
    return problems, warnings


def slurm_channel_checks(plan, tray_options, reads):
    """([problem], [warning]) of the run's trays against Slurm's configuration and the driver's channel count.

    Each sentence names its domain and trays, and the slurm.conf line or option to change. A configuration
    that cannot be read (slurmctld unreachable) is a warning, not a refusal.
    """
    problems, warnings = [], []
    for name, domain in sorted(plan["domains"].items()):
        refused, warned, counts = {}, {}, {}
        for tray in domain["trays_in_run"]:
            read = reads.get(tray) or {}
            found, said = _tray_slurm_issues(tray_options[tray], read, plan["trays"][tray])
            for sentence in found:
                refused.setdefault(sentence, []).append(tray)
            for sentence in said:
                warned.setdefault(sentence, []).append(tray)
            count = (read.get("channel_count") or {}).get("value")
            if count is not None:
                counts.setdefault(count, []).append(tray)
        problems.extend("domain %s, tray%s %s: %s" % (name, "s" if len(trays) > 1 else "", ", ".join(trays), sentence)
                        for sentence, trays in refused.items())
        warnings.extend("domain %s, tray%s %s: %s" % (name, "s" if len(trays) > 1 else "", ", ".join(trays), sentence)
                        for sentence, trays in warned.items())
        if len(counts) > 1:
            problems.append("domain %s: NVreg_ImexChannelCount differs between its trays (%s); the driver needs one "
                            "value on every node: set \"options nvidia NVreg_ImexChannelCount=N\" in /etc/modprobe.d "
                            "alike on every tray (then rebuild the initramfs and reload the driver)"
                            % (name, "; ".join("%d on %s" % (count, ", ".join(trays))
                                               for count, trays in sorted(counts.items()))))
    return problems, warnings


# ---------------------------------------------------------------------------------------------------
# The probe of a per-job domain (validate.yml): a short exclusive job across it, its matrix judged.

def _slurm_idle(read):
    """(idle, what the read says of the node's Slurm state)."""
    slurm = (read or {}).get("slurm") or {}
    if not slurm.get("installed"):
        return False, "scontrol is not installed"
    if slurm.get("error") or not slurm.get("state"):
        return False, "state unknown (%s)" % (slurm.get("error") or "no state")
    return slurm["state"] == "IDLE", slurm["state"]


def probe_decision(plan, name, tray_options, reads):
    """(the probe's arguments, None) for a per-job domain validate.yml probes now, (None, why not) for one it
    skips, (None, None) where no probe is asked for (imex_slurm_probe_partition unset, or site.yml)."""
    domain = plan["domains"][name]
    partition = tray_options[domain["leader"]].get("imex_slurm_probe_partition") or ""
    if not partition:
        return None, None
    if plan["check_mode"]:
        return None, "check mode: no job is submitted"
    if domain["partial"]:
        return None, "this run holds only part of the domain (--limit)"
    broken = [tray for tray in domain["trays_in_run"] if plan["trays"][tray].get("per_job_problems")]
    if broken:
        return None, "its installation is not as site.yml leaves it on %s (see the problems)" % ", ".join(broken)
    states = {tray: _slurm_idle(reads.get(tray)) for tray in domain["trays_in_run"]}
    busy = ["%s: %s" % (tray, said) for tray, (idle, said) in states.items() if not idle]
    if busy:
        return None, "not idle in Slurm (%s)" % "; ".join(busy)
    trays = domain["trays_in_run"]
    addresses = dict(zip(domain["trays"], domain["addresses"]))
    return {"partition": partition, "runner": domain["leader"],
            "nodes": [plan["trays"][tray]["slurm_node_name"] for tray in trays],
            "expected_nodes": [addresses[tray] for tray in trays], "expected_names": list(trays)}, None


def probe_verdict(name, probe, found):
    """([problem], sentence for the report) of a domain's probe from the imex_slurm_probe result."""
    where = "a probe job in partition %s on %s" % (probe["partition"], ", ".join(probe["nodes"]))
    if not found:
        return ["%s did not run (no result)" % where], None
    if found.get("failed") or found.get("unreachable") or "probed" not in found:
        return ["%s failed: %s" % (where, found.get("msg") or "unknown error")], None
    if not found.get("probed"):
        return [], "%s was not run, as Slurm could not give the nodes at once: %s" % (where, found.get("reason"))
    if found.get("healthy"):
        return [], "%s saw the domain %s, every node READY and every pair connected" % (
            where, found.get("domain_state"))
    return ["%s saw domain state %s: %s" % (where, found.get("domain_state"), problem)
            for problem in found.get("problems") or ["no problem recorded"]], None


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
    slurm_problems, plan["warnings"] = slurm_channel_checks(plan, tray_options, reads)
    if slurm_problems:
        raise PlanError(["slurm.conf, the driver's channel count and the role's options do not fit together; nothing "
                         "was changed:"] + slurm_problems)
    handover = []
    # Trays whose running daemon has no record of what it loaded: judged by change times (said once).
    unrecorded = []
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
        pending, pending_reloads, pending_releases = {}, {}, {}
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
            stats = (read or {}).get("stat_files") or {}
            leftovers = entry.get("slurm_job_leftovers") or []
            entry["remove_slurm_job"] = [path for path in leftovers if (stats.get(path) or {}).get("exists")]
            entry["write"] = any(entry[key] for key in ("write_nodes", "write_config", "write_tls", "handover",
                                                        "write_map", "write_prolog", "write_epilog", "release",
                                                        "remove_slurm_job"))
            entry["channels_role"] = (domain["mode"] in ("slurm", PER_JOB, "dra") or bool(options.get("imex_channels"))
                                      or bool(entry["channels"]))
            tls_files = entry.get("tls_files") or []
            mark = tls_reload_mark(options)
            why = pending_restart(read, service, entry["read_files"],
                                  [path for path in entry["read_stat_files"]
                                   if path not in tls_files and path != mark and path not in leftovers])
            tls_why = pending_reload(read, service, tls_files, mark)
            release_why = release_restart(tray, read, service)
            if release_why:
                pending_releases[tray] = release_why
            why = "; ".join(reason for reason in (why, release_why) if reason) or None
            # The running daemon runs the config on disk, TLS on with these files: new TLS files alone are
            # put in force by SIGUSR1, which reloads file-based TLS credentials without making the daemon
            # a new instance (its peers keep what it exports). Anything else in config.cfg takes a restart.
            entry["tls_reload_ok"] = bool(entry["write_tls"] and not per_job and not entry["write_nodes"]
                                          and not entry["write_config"] and not why
                                          and daemon_started(read, service) is not None)
            # Written for real where only a reload follows, even in a busy or partly run domain.
            entry["tls_predicted"] = bool(plan["check_mode"] or (entry["predicted"] and not entry["tls_reload_ok"]))
            # Per job, each prolog starts the daemon afresh with the files on disk.
            if domain["mode"] not in ("dra", PER_JOB):
                if daemon_started(read, service) is not None and loaded_record(read, service) is None:
                    unrecorded.append(tray)
                if why or (tls_why and not entry["tls_reload_ok"]):
                    pending[tray] = why or tls_why
                elif tls_why:
                    pending_reloads[tray] = tls_why
        domain["pending"] = pending
        domain["pending_reload"] = pending_reloads
        # The trays of pending whose daemon runs another release (the verdicts name it so).
        domain["pending_release"] = {tray: why for tray, why in pending_releases.items() if tray in pending}
        if domain["mode"] == "dra" and converge:
            running = [tray for tray in domain["trays_in_run"]
                       if (in_run[tray].get("services") or {}).get(service) == "active"]
            left_out = domain["left_out"]
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
    if unrecorded:
        plan["warnings"].append(
            "tray%s %s: no record of what the running IMEX daemon loaded (it was started at boot, by hand or by an older "
            "release of rackscale.imex): a restart is pending there when its config.cfg or node list changed after "
            "the daemon began to start, so even a no-op chmod, touch or identical rewrite of them restarts its "
            "domain. The next start of the daemon by this collection records it"
            % ("s" if len(unrecorded) > 1 else "", ", ".join(unrecorded)))
    # validate.yml probes the idle per-job domains with a job, where a partition is given.
    plan["probe_now"], plan["probe_skipped"] = [], []
    for name in plan["per_job_domains"]:
        probe, skipped = (None, None) if converge else probe_decision(plan, name, tray_options, reads)
        plan["domains"][name].update(probe=probe, probe_skipped=skipped)
        if probe:
            plan["probe_now"].append(name)
        elif skipped:
            plan["probe_skipped"].append("domain %s: no probe job: %s" % (name, skipped))
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
    domain that does not restart is only started. A running daemon whose TLS files alone changed (the
    plan's tls_reload_ok) reloads them instead (SIGUSR1): no restart, so work running on the domain or
    trays left out of the run do not hold it back.
    """
    plan = json.loads(json.dumps(plan))
    problems = []
    for name in wave:
        domain = plan["domains"][name]
        if domain["mode"] in ("dra", PER_JOB):
            continue
        in_run = domain["trays_in_run"]
        left_out = domain["left_out"]
        written = _written(plan, in_run, writes)
        domain["written"] = written
        by_checksum = {}
        for tray in in_run:
            checksum = ((writes.get(tray) or {}).get("node list") or {}).get("checksum")
            if checksum is not None:
                by_checksum.setdefault(checksum, []).append(tray)
        if len(by_checksum) > 1:
            problems.append("domain %s: trays hold different node lists (%s); the daemons would answer !M!. Nothing "
                            "was restarted. %s" % (name, "; ".join("%s on %s" % (str(checksum)[:12], ", ".join(holders))
                                                                   for checksum, holders in by_checksum.items()),
                                                   written_sentence(written)))
            continue
        changes, reasons, joining, reloads = {}, {}, [], {}
        for tray in in_run:
            changes[tray] = [what for what, result in sorted((writes.get(tray) or {}).items())
                             if (result or {}).get("changed")]
            if plan["trays"][tray].get("tls_reload_ok") and changes[tray] == ["TLS material"]:
                reloads[tray] = "new TLS material"
                changes[tray] = []
            elif not changes[tray] and tray in (domain.get("pending_reload") or {}):
                reloads[tray] = "pending reload: " + domain["pending_reload"][tray]
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
                "out %s. %s Run against the whole domain (drop --limit, or do not slice the job)."
                % (tray, "a new " + " and ".join(changes[tray]) if changes[tray] else "a restart (%s)" % reasons[tray],
                   ", ".join(left_out), written_sentence(written)) for tray in in_run if tray in reasons)
        elif reasons and domain["busy"]:
            held_back = []
            if changed:
                held_back.append("Its new %s (on %s) is held back." % (
                    " and ".join(sorted({what for tray in changed for what in changes[tray]})), ", ".join(changed)))
            if stale:
                held_back.append("Its daemons on %s do not run what is on disk (%s)."
                                 % (", ".join(stale), "; ".join(domain["pending"][tray] for tray in stale)))
            problems.append(
                "domain %s is not restarted: work runs on it (%s). A restart makes every IMEX daemon of the domain a "
                "new instance and cuts the memory its jobs share. %s Drain the trays (for example scontrol update "
                "nodename=... state=drain, or kubectl cordon), wait for the work to end and run again, or set "
                "imex_allow_busy_restart=true." % (name, "; ".join(domain["busy"]),
                                                   " ".join(held_back + [written_sentence(written)])))
        elif reasons:
            domain["restart"] = True
            # The restart puts the files on disk in force: the proof judges the new daemons.
            domain["pending"] = {}
            domain["pending_release"] = {}
        # A restart loads the new TLS files too; else the reload puts them in force.
        domain["reload"] = {} if domain["restart"] else reloads
        if domain["restart"] or reloads:
            domain["pending_reload"] = {}
        status = statuses.get(name) or {}
        ready = {node.get("address") for node in status.get("nodes") or [] if node.get("status") == "READY"}
        starts = [] if domain["restart"] else [
            tray for tray in in_run if plan["trays"][tray]["address"] not in ready or tray in joining]
        domain["start"] = starts
        domain["proven_before_restart"] = (bool(status.get("healthy")) and not domain["restart"] and not starts
                                           and not domain["reload"])
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
            entry["reload"] = tray in (domain.get("reload") or {})
            if entry["restart"]:
                entry["action"] = "restarting all %d trays of domain %s together: %s" % (
                    len(domain["trays"]), name, reasons.get(tray) or "%s of its trays: %s" % (
                        "one" if len(reasons) == 1 else len(reasons),
                        "; ".join("%s: %s" % item for item in sorted(reasons.items()))))
            elif entry["start"]:
                entry["action"] = "starting the daemon: the status of domain %s does not show this tray READY" % name
            elif entry["reload"]:
                entry["action"] = "reloading the TLS credentials of the daemon (SIGUSR1; no restart of domain %s): %s" % (
                    name, domain["reload"][tray])
    return plan


def _written(plan, trays, writes):
    """{tray: [what]} this wave wrote for real on ``trays``: not the predictions (--check, a domain that is
    busy or only partly in the run), which ran in check mode."""
    written = {}
    for tray in trays:
        entry = plan["trays"][tray]
        real = [what for what, result in sorted((writes.get(tray) or {}).items()) if (result or {}).get("changed")
                and not (entry.get("tls_predicted") if what == "TLS material" else entry.get("predicted"))]
        if real:
            written[tray] = real
    return written


def written_sentence(written):
    """What a refusal says was written before it: exactly the writes made, tray by tray."""
    if not written:
        return "Nothing was written."
    return "Written before this refusal: %s." % "; ".join(
        "%s on %s" % (" and ".join(what), tray) for tray, what in sorted(written.items()))


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
                "It was to restart for %s. %s The next run restarts it once the work has ended. Drain the trays, or "
                "set imex_allow_busy_restart=true."
                % (name, "; ".join(busy), "; ".join("%s: %s" % item for item in sorted(domain["restart_reasons"].items())),
                   written_sentence(domain.get("written") or {})))
    if problems:
        raise PlanError(problems)
    return plan


# ---------------------------------------------------------------------------------------------------
# Verdicts.

def verdicts(plan, model, domains, statuses, play_hosts, allowed_broken_pairs=0, logs=None, pending=None,
             probes=None):
    """The report of each domain of ``domains`` from its proof (statuses: {domain: imex_status result}).

    probes: {domain: imex_slurm_probe result} of the per-job domains validate.yml probed.

    pending: {domain: {tray: why}} daemons that run older files than those on disk: the domain is not
    proven to run what the inventory says, whatever its matrix shows.
    """
    reports = []
    for name in domains:
        if plan["domains"][name].get("mode") == PER_JOB:
            reports.append(per_job_report(plan, model, name, (probes or {}).get(name)))
            continue
        leader = plan["domains"][name]["leader"]
        report = domain_report(name, model, list(play_hosts), {leader: statuses.get(name) or {}},
                               allowed_broken_pairs=int(allowed_broken_pairs))
        away = plan["domains"][name].get("out_of_service") or []
        report["out_of_service"] = away
        if away and report["verdict"] in ("healthy", "tolerated"):
            report["message"] = "domain %s: %s, every tray in service READY and connected; out of service: %s" % (
                name, (report.get("status") or {}).get("domain_state") or "UNKNOWN", ", ".join(away))
        restarts = (pending or {}).get(name) or {}
        releases = plan["domains"][name].get("pending_release") or {}
        stale = {tray: "tray %s runs %s (%s): a restart of the domain is pending; run site.yml to restart it"
                       % (tray, "another IMEX release than the one installed" if tray in releases
                          else "a config other than the one on disk", why) for tray, why in restarts.items()}
        stale.update((tray, "tray %s runs TLS credentials older than its files on disk (%s): a reload is pending; run "
                            "site.yml to reload them (no restart)" % (tray, why))
                     for tray, why in (plan["domains"][name].get("pending_reload") or {}).items() if tray not in stale)
        report["tls_reloaded"] = sorted(plan["domains"][name].get("reload") or {})
        report["tls_certificates"] = {
            tray: plan["trays"][tray]["tls_certificate"] for tray in plan["domains"][name].get("trays_in_run") or []
            if (plan["trays"].get(tray) or {}).get("tls_certificate")}
        if report["tls_reloaded"] and report["verdict"] in ("healthy", "tolerated"):
            report["message"] += "; TLS credentials reloaded without a restart on %s" % ", ".join(report["tls_reloaded"])
        if stale:
            report["ok"] = False
            if report["verdict"] in ("healthy", "tolerated"):
                report["verdict"] = "stale"
            report["problems"] = report["problems"] + [problem for _tray, problem in sorted(stale.items())]
            report["message"] = problems_message(name, (report.get("status") or {}).get("domain_state") or "UNKNOWN",
                                                 report["verdict"], report["problems"])
        if logs:
            report = with_daemon_logs(report, model, logs)
        reports.append(report)
    return reports


def per_job_report(plan, model, name, probe_result=None):
    """The report of a per-job domain: its installation (no daemon runs between jobs to be proven), and the
    matrix of a probe job where validate.yml ran one."""
    domain = plan["domains"][name]
    problems = [problem for tray in domain["trays_in_run"]
                for problem in plan["trays"][tray].get("per_job_problems") or []]
    probe_said = None
    if domain.get("probe"):
        found, probe_said = probe_verdict(name, domain["probe"], probe_result)
        problems.extend(found)
    elif domain.get("probe_skipped"):
        probe_said = "no probe job: " + domain["probe_skipped"]
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
        "probe": {"asked": bool(domain.get("probe")), "result": probe_result if domain.get("probe") else None,
                  "said": probe_said},
    }
    if probe_result and probe_result.get("domain_state"):
        report["status"] = {"domain_state": probe_result["domain_state"], "nodes": probe_result.get("nodes") or [],
                            "broken_pairs": probe_result.get("broken_pairs") or []}
    if problems:
        report["message"] = problems_message(name, "PER-JOB", "unhealthy", problems)
    else:
        report["message"] = ("domain %s: per-job IMEX installed on %d tray(s) (prolog, epilog, map, config.cfg; the "
                             "service left to the prolog); the daemon runs only under an exclusive job%s"
                             % (name, len(domain["trays_in_run"]), "; " + probe_said if probe_said else ""))
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
