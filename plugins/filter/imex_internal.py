# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Glue of the rackscale.imex.imex role: PRIVATE to the role, not a public interface.

These filters turn what the role's tasks gathered into the role's next decision. Each takes all of
its data as arguments (no hostvars, no register names), so the role's task files stay the one
place that knows what they registered. Their arguments may change without notice; use the role.

imex_internal_domain_model(groups, hostvars, play_hosts, **options)
    {model, problems}: the domain model (options as imex_domain_model's), or every problem of the
    inventory, the trays of the play in no domain included, one sentence each.
imex_internal_settings_problems(settings)
    One sentence per config.cfg setting imex_config would refuse on a tray.
imex_internal_option_problems(options, model)
    One sentence per option that contradicts another or could only fail on a tray.
imex_internal_domain_variance_problems(model, trays, values)
    One sentence per domain and option whose trays hold different values of a domain-wide option.
imex_internal_is_pem(value)
    Whether a TLS option holds PEM text (else it names a controller file).
imex_internal_tls_file_problems(trays, tls, ca, cert, key)
    One sentence per tray with TLS on whose CA, certificate or key is not a file on the controller.
imex_internal_tray_gate(model, fabric_by_tray, shared_partition)
    {problems, notes}: one sentence per tray or domain whose NVLink fabric or versions disagree
    with the model; notes for domains sharing a partition when shared_partition allows it.
imex_internal_daemon_drift(tray_info, nodes, nodes_path, settings, config_path, max_nodes)
    {nodes, config}: whether writing the node list / config would change the tray, from its read.
imex_internal_restart_plan(domains, trays, nodes_results, config_results, tls_results, tray_infos, service,
                           allow_busy)
    {problems, restart}: the trays to restart after the writes of one wave; busy domains refused.
imex_internal_busy_trays(trays, tray_infos, service)
    One phrase per tray of a domain with work on it (GPU processes, a Slurm job) while its daemon runs.
imex_internal_domain_report(domain, model, play_hosts, statuses, earlier, allowed_broken_pairs)
    The verdict and report of one domain from its leader's status (its earlier read where the proof
    was skipped).
imex_internal_trays_to_explain(verdicts, model, play_hosts)
    The trays of the domains that are not ok whose daemon log says why (not READY, not reported).
imex_internal_with_daemon_logs(verdicts, model, log_reads)
    The verdicts with the daemon log excerpts read on those trays, in the report and its message.
imex_internal_discovery(trays, reads, tray_vars, max_nodes)
    {problems, inventory, domains, summary}: an inventory skeleton, one group per NVLink partition.
imex_internal_channel_entries(mode, channel0, extra)
    The imex_channel options of every channel the mode wants, channel0 first.
imex_internal_channels_to_ensure(entries, observed)
    The entries a read of the tray shows would change (all without a read).
"""
from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.rackscale.imex.plugins.filter.imex_domain import model_or_problems
from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import ConfigError, validate_settings
from ansible_collections.rackscale.imex.plugins.plugin_utils._channels import channel_entries, channels_to_ensure
from ansible_collections.rackscale.imex.plugins.plugin_utils._discover import CONNECTION_VARS, skeleton_of
from ansible_collections.rackscale.imex.plugins.plugin_utils._drift import daemon_drift
from ansible_collections.rackscale.imex.plugins.plugin_utils._fabric_gate import fabric_problems, version_problems
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import (
    domain_variance_problems,
    is_pem,
    option_problems,
    tls_file_problems,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils._report import domain_report, trays_to_explain, with_daemon_logs
from ansible_collections.rackscale.imex.plugins.plugin_utils._restart import busy_trays, handover_problems, restart_plan


def imex_internal_domain_model(groups, hostvars, play_hosts, **options):
    return model_or_problems(groups, hostvars, play_hosts, **options)


def imex_internal_settings_problems(settings):
    try:
        validate_settings(dict(settings or {}))
    except ConfigError as error:
        return [problem.strip() for problem in str(error).split("; ") if problem.strip()]
    return []


def imex_internal_option_problems(options, model):
    return option_problems(dict(options), model)


def imex_internal_domain_variance_problems(model, trays, values):
    return domain_variance_problems(model, [str(tray) for tray in trays], dict(values))


def imex_internal_is_pem(value):
    return is_pem(value)


def imex_internal_tls_file_problems(trays, tls, ca, cert, key):
    # One value per tray of each list, in the order of trays (its host var, or the role's value).
    with_tls = [(tray, {"imex_tls_ca": tray_ca, "imex_tls_cert": tray_cert, "imex_tls_key": tray_key})
                for tray, tray_tls, tray_ca, tray_cert, tray_key in zip(trays, tls, ca, cert, key)
                if boolean(tray_tls, strict=False)]
    return tls_file_problems(with_tls)


def imex_internal_tray_gate(model, fabric_by_tray, shared_partition, skip_fabric=False):
    found = dict(fabric_by_tray)
    notes = [] if shared_partition else None
    problems = [] if boolean(skip_fabric, strict=True) else fabric_problems(model, found, notes=notes)
    problems += version_problems(model, found)
    return {"problems": problems, "notes": notes or []}


def imex_internal_daemon_drift(tray_info, nodes, nodes_path, settings, config_path, max_nodes):
    return daemon_drift(tray_info, list(nodes), nodes_path, dict(settings), config_path, max_nodes)


def imex_internal_restart_plan(domains, trays, nodes_results, config_results, tls_results, tray_infos, service,
                               allow_busy):
    return restart_plan(dict(domains), list(trays), list(nodes_results), list(config_results), list(tls_results),
                        tray_infos=list(tray_infos), service=service, allow_busy=bool(allow_busy))


def imex_internal_busy_trays(trays, tray_infos, service):
    return busy_trays(list(trays), list(tray_infos), service)


def imex_internal_handover_problems(model, trays, tray_infos, service, allow_busy):
    trays = list(trays)
    domains = {name: [node["host"] for node in domain["nodes"]] for name, domain in model["domains"].items()
               if any(node["host"] in trays for node in domain["nodes"])}
    return handover_problems(domains, trays, list(tray_infos), service, allow_busy=boolean(allow_busy, strict=True))


def _result_for(domain, loop_result):
    """The imex_status result a loop over domains (a registered run_once task) holds for ``domain``."""
    for result in (loop_result or {}).get("results") or []:
        if result.get("item") == domain and not result.get("skipped"):
            return result
    return None


def imex_internal_domain_report(domain, model, play_hosts, statuses, earlier=None, allowed_broken_pairs=0):
    # A domain the proof did not read again, because its read before the restarts already proved it,
    # is judged on that read.
    play_hosts = list(play_hosts)
    status = _result_for(domain, statuses) or _result_for(domain, earlier) or {}
    in_run = [node["host"] for node in model["domains"][domain]["nodes"] if node["host"] in play_hosts]
    by_leader = {in_run[0]: status} if in_run else {}
    return domain_report(domain, model, play_hosts, by_leader, allowed_broken_pairs=int(allowed_broken_pairs))


def imex_internal_trays_to_explain(verdicts, model, play_hosts):
    play_hosts = list(play_hosts)
    return [tray for verdict in verdicts for tray in trays_to_explain(verdict, model, play_hosts)]


def imex_internal_with_daemon_logs(verdicts, model, log_reads):
    # log_reads: the registered run_once loop over trays (item is the tray) of imex_daemon_log.
    logs = {}
    for result in (log_reads or {}).get("results") or []:
        if result.get("skipped") or "item" not in result:
            continue
        if result.get("failed"):
            logs[result["item"]] = {"error": result.get("msg") or "unknown error"}
        else:
            logs[result["item"]] = {key: result[key] for key in ("source", "path", "lines", "truncated") if key in result}
    return [with_daemon_logs(verdict, model, logs) for verdict in verdicts]


def imex_internal_discovery(trays, reads, tray_vars, max_nodes):
    # tray_vars: each tray's hostvars; only its connection variables are kept.
    entries = []
    for tray, read, found in zip(trays, reads, tray_vars):
        kept = {name: found[name] for name in CONNECTION_VARS if name in found and found[name] is not None}
        entries.append({"name": tray, "read": dict(read or {}), "vars": kept})
    return skeleton_of(entries, int(max_nodes))


def imex_internal_channel_entries(mode, channel0, extra):
    return channel_entries(str(mode), bool(channel0), list(extra or []))


def imex_internal_channels_to_ensure(entries, observed):
    return channels_to_ensure(list(entries), dict(observed or {}))


class FilterModule:
    """Private glue of the rackscale.imex.imex role."""

    def filters(self):
        return {
            "imex_internal_domain_model": imex_internal_domain_model,
            "imex_internal_settings_problems": imex_internal_settings_problems,
            "imex_internal_option_problems": imex_internal_option_problems,
            "imex_internal_domain_variance_problems": imex_internal_domain_variance_problems,
            "imex_internal_is_pem": imex_internal_is_pem,
            "imex_internal_tls_file_problems": imex_internal_tls_file_problems,
            "imex_internal_tray_gate": imex_internal_tray_gate,
            "imex_internal_daemon_drift": imex_internal_daemon_drift,
            "imex_internal_restart_plan": imex_internal_restart_plan,
            "imex_internal_busy_trays": imex_internal_busy_trays,
            "imex_internal_handover_problems": imex_internal_handover_problems,
            "imex_internal_domain_report": imex_internal_domain_report,
            "imex_internal_trays_to_explain": imex_internal_trays_to_explain,
            "imex_internal_with_daemon_logs": imex_internal_with_daemon_logs,
            "imex_internal_discovery": imex_internal_discovery,
            "imex_internal_channel_entries": imex_internal_channel_entries,
            "imex_internal_channels_to_ensure": imex_internal_channels_to_ensure,
        }
