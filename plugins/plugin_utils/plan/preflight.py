# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Stage preflight, before any tray is contacted: the tray options (each tray's own, role defaults applied on that
tray), the domain model, the waves, the locks, what each tray is meant to hold; every option problem, each
naming tray, key and value."""
from __future__ import annotations

import os
import time

from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import HOSTS_PATH
from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import ConfigError, validate_settings
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import (
    TLS_FILE_OPTIONS,
    is_pem,
    option_problems,
    tls_file_problems,
    variance_problems,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils._option_table import DOMAIN
from ansible_collections.rackscale.imex.plugins.plugin_utils._tls import tls_problems_and_expiry
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes, node_names
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.errors import PlanError
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.locks import (
    lock_holders,
    lock_problems,
    lock_problems_away,
    wave_locks,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import Domain, Run, Tray, builds_register
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.settings import (
    daemon_settings,
    owned_settings,
    tls_paths,
    tls_reload_mark,
)


def _tray_problems(tray, options, model):
    """Problems of one tray's own options, each prefixed with its domain."""
    domain = model["host_domain"][tray]
    problems = modes.of(options["imex_mode"]).option_problems(options)
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


def _names_on(trays, tray_options):
    """imex_node_names of a domain (one value per domain: the variance check refuses a mix)."""
    return bool(trays) and bool(tray_options[trays[0]].get("imex_node_names"))


@builds_register
def preflight(model, tray_options, play_hosts, run_id, check_mode=False, report_only=False, is_file=os.path.isfile,
              tls_check_time=None, read_text=None, converge=True):
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
    problems.extend(variance_problems(DOMAIN, trays, tray_options, model["host_domain"]))
    seen = set()
    for tray in trays:
        for problem in _tray_problems(tray, tray_options[tray], model):
            if problem not in seen:
                seen.add(problem)
                problems.append(problem)
    problems.extend(lock_problems(first))
    problems.extend(node_names.preflight_problems(model, tray_options, trays, first.get("imex_driver_version")))
    # Each domain's node list: its slot names (imex_node_names, one value per domain) or its addresses.
    entries = {name: node_names.node_list(name, model["domains"][name], _names_on(per_domain[name], tray_options))
               for name in domains_in_run}
    tls_trays = [tray for tray in trays if tray_options[tray].get("imex_tls")]
    missing = tls_file_problems([(tray, tray_options[tray]) for tray in tls_trays], is_file=is_file)
    problems.extend(missing)
    certificates = {}
    if tls_trays and not missing:
        # Peers check a certificate against the tray's node list entry: its address, or its slot name.
        addresses = {node["host"]: entries[name][position] for name in domains_in_run
                     for position, node in enumerate(model["domains"][name]["nodes"])}
        certificates, found = tls_problems_and_expiry(
            [(tray, addresses[tray], tray_options[tray]) for tray in tls_trays],
            time.time() if tls_check_time is None else tls_check_time, **({"read_text": read_text} if read_text else {}))
        problems.extend(found)
    problems.extend(lock_problems_away(domains_in_run, domain_trays, away))
    if problems:
        raise PlanError(problems)

    batch = max(first["imex_rolling_batch"], 1)
    if first["imex_rolling"] and converge and not report_only:
        # Rolling takes the domains in the order of their first trays in the play (the inventory's): the order
        # in which Ansible runs the waves' includes (plan/work.py).
        position = {tray: index for index, tray in enumerate(trays)}
        rolling = sorted(domains_in_run, key=lambda name: min(position[tray] for tray in per_domain[name]))
        waves = [rolling[start:start + batch] for start in range(0, len(rolling), batch)]
    else:
        # A report or a proof (validate.yml, converge false) changes nothing: every domain in one wave, so it
        # does not stop at the first unhealthy one.
        waves = [domains_in_run] if domains_in_run else []
    run = Run(run_id=run_id, check_mode=bool(check_mode), report_only=bool(report_only), waves=waves, domains={},
              trays={}, locks=[], prove_now=[], restarting=[], verdicts=[], run_verdicts=[], explain=[],
              out_of_service=[tray for tray in play_hosts if tray in away])
    for name in domains_in_run:
        domain = model["domains"][name]
        in_run = per_domain[name]
        out = [tray for tray in domain_trays[name] if tray in away]
        run.domains[name] = Domain(
            trays=domain_trays[name],
            trays_in_run=in_run,
            out_of_service=out,
            absent_addresses=[entry for entry, node in zip(entries[name], domain["nodes"]) if node["host"] in away],
            # The node list's entries: what the daemons and their status name the trays by.
            addresses=list(entries[name]),
            node_names=_names_on(in_run, tray_options),
            slot_names=list(entries[name]) if _names_on(in_run, tray_options) else [],
            hosts_entries=node_names.hosts_entries(name, domain, _names_on(in_run, tray_options)),
            leader=in_run[0],
            lock_holders=lock_holders(domain_trays[name], away),
            partial=len(in_run) + len(out) < len(domain_trays[name]),
            # Left out by --limit (or a sliced job) alone: a tray out of service is away, not left out, and
            # never holds back its peers.
            left_out=[tray for tray in domain_trays[name] if tray not in in_run and tray not in out],
            mode=tray_options[in_run[0]]["imex_mode"],
            service=tray_options[in_run[0]]["imex_service"],
            allow_busy=tray_options[in_run[0]]["imex_allow_busy_restart"],
        )
    # One domain at a time, in the order of their names whatever the waves' order or either run's inventory
    # (and each domain's lock trays in node order), so that two runs never wait for each other's locks.
    run.locks = [{"domain": name, "holder": holder}
                 for name in domains_in_run for holder in run.domains[name].lock_holders]
    # Refreshed as each later wave starts, so that a long run is not taken for a crashed one.
    run.wave_locks = wave_locks(run.locks, waves)
    run.fabric_check_skipped = bool(first["imex_skip_fabric_check"])
    run.require_declared_size = bool(first["imex_require_declared_size"])
    # The domains whose host daemon runs all the time; per-job domains run it only under a job.
    run.host_daemon_domains = [name for name in domains_in_run if modes.of(run.domains[name].mode).runs_host_daemon]
    run.per_job_domains = [name for name in domains_in_run if modes.of(run.domains[name].mode).per_job]
    for tray in trays:
        options = tray_options[tray]
        mode = modes.of(options["imex_mode"])
        name = model["host_domain"][tray]
        address = next(node["address"] for node in model["domains"][name]["nodes"] if node["host"] == tray)
        job_paths = mode.job_paths(options)
        leftovers = mode.leftovers(options)
        run.trays[tray] = Tray(
            domain=name,
            address=address,
            settings=daemon_settings(options, address),
            channel_entries=mode.channel_entries(options["imex_channel0"], options.get("imex_channels") or []),
            # The isolation channels as a list (they may have come as JSON or YAML text).
            channels_extra=list(options.get("imex_channels") or []),
            read_files=mode.read_files(options, job_paths),
            # The reload mark after the TLS files: a daemon that reloaded them runs them; then the leftovers
            # of another mode's installation, to remove them.
            read_stat_files=tls_paths(options) + ([tls_reload_mark(options)] if options.get("imex_tls") else [])
            + leftovers,
            read_presence=mode.read_presence(),
            read_enablement=mode.reads_enablement,
            tls_files=tls_paths(options),
            # The CA bundle and certificate it holds, read as SHA-256 fingerprints (never the key): whether
            # a TLS change can be made by reload across the domain (tls_change_class).
            read_certificate_files=tls_paths(options)[:2],
            tls_certificate=certificates.get(tray),
            per_job=mode.per_job,
            slurm_job_paths=job_paths,
            slurm_job_leftovers=leftovers,
            # Each TLS option (CA, certificate, key) is PEM text or a controller path.
            tls_pem=[is_pem(options.get(option)) for option in TLS_FILE_OPTIONS],
            channel0=bool(options["imex_channel0"]),
            nodes_config_path=options["imex_nodes_config_path"],
            pre_restart_hook=bool(options.get("imex_pre_restart_tasks")),
            post_restart_hook=bool(options.get("imex_post_restart_tasks")),
            # Where the collection writes the node list, its read reads the block of slot names (to write
            # it, or to remove one left from before names were switched off).
            read_hosts=HOSTS_PATH if mode.writes_node_list else "",
            # slurmctld's configuration is one for the domain: asked once, by its leader, not by every tray.
            read_slurm_config=tray == run.domains[name].leader,
        )
    return run
