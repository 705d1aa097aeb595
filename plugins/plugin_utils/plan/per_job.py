# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""The per-job mode's installation (slurm_per_job): the program that the Slurm prolog and epilog run, the map it
reads, what a tray's read shows of them, and the probe job validate.yml runs across a domain."""
from __future__ import annotations

import hashlib
import json
import os
import re

from ansible_collections.rackscale.imex.plugins.module_utils._slurm import glob_covers
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import PATH_OPTIONS, path_problem, tray_path_problems
from ansible_collections.rackscale.imex.plugins.plugin_utils._report import problems_message
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import TrayRead

# The per-job mode: the Slurm prolog of each job starts the daemon with the job's nodes of the tray's
# domain, the epilog stops it (roles/imex/files/rackscale-imex-slurm-job). A run installs the program,
# the map it reads and config.cfg, and leaves the service stopped, disabled and not masked.
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
        read = TrayRead.of(reads.get(tray)).get("slurm", {}).get("node") or ""
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
    files = TrayRead.of(read).get("files", {})
    wanted = {"map": (hashlib.sha256(map_text.encode("utf-8")).hexdigest(), "0644"),
              "prolog": (script_sha256, "0755"), "epilog": (script_sha256, "0755")}
    return [what for what in ("map", "prolog", "epilog") if _file_differs(files.get(paths[what]), *wanted[what])]


def per_job_state_problems(read, service):
    """What a tray's read shows against the per-job mode besides its files: the service left to the prolog
    (not enabled, not masked) and the channel device of the driver."""
    read = TrayRead.of(read)
    problems = []
    enabled = read.get("services_enabled", {}).get(service)
    if enabled in ("enabled", "enabled-runtime", "masked", "masked-runtime", "linked", "linked-runtime", "alias"):
        problems.append("service %s is %s: in the per-job mode it is neither enabled (it would start at boot with "
                        "no job) nor masked (the prolog starts it)" % (service, enabled))
    elif read.has("services_enabled") and enabled is None:
        problems.append("whether service %s is enabled could not be read" % service)
    if read.has("channel_major") and read.channel_major is None:
        problems.append("nvidia-caps-imex-channels is not in /proc/devices: the NVIDIA driver is not loaded, and "
                        "Slurm's switch/nvidia_imex cannot give a job its channel")
    return problems


# What a per-job tray holds, as the verdicts name it.
_PER_JOB_ITEMS = {"map": "the per-job map %s", "prolog": "the prolog %s", "epilog": "the epilog %s",
                  "config": "config.cfg %s", "service": "service %s (stopped, disabled, not masked)"}


def plan_tray(name, domain, tray, entry, options, read, names, script_sha256, converge):
    """The per-job part of a tray's plan (a Tray record, changed in place): what to write and what the
    verdict will say of it."""
    service = domain.service
    paths = entry.slurm_job_paths
    nodes = [(names[member], address) for member, address in zip(domain.trays, domain.addresses)]
    entry.slurm_map = slurm_job_map(name, nodes, names[tray], options, read.get("slurmd_version"))
    entry.slurm_node_name = names[tray]
    differs = per_job_drift(read, paths, entry.slurm_map, script_sha256)
    # Left to the prolog: not running between jobs, not started at boot, not masked. A run stops a
    # daemon only on a tray where nothing runs (a busy domain's writes are predictions).
    release = not read.stopped(service) or read.enablement(service) != "disabled"
    entry.write_map = "map" in differs
    entry.scripts_to_install = [what for what in ("prolog", "epilog") if what in differs]
    entry.release = release
    entry.write_slurm_job = bool(differs)
    items = [what for what in ("map", "prolog", "epilog") if what in differs]
    if entry.write_config:
        items.append("config")
    shown = dict(paths, config=options["imex_config_path"], service=service)
    problems = []
    if converge:
        # site.yml writes what differs; only what it holds back stays wrong.
        if entry.predicted and (items or release):
            held = [_PER_JOB_ITEMS[what] % shown[what] for what in items + (["service"] if release else [])]
            why = ("work runs on the domain (%s)" % "; ".join(domain.busy) if domain.busy
                   else "this run holds only part of the domain" if domain.partial else "check mode")
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
    entry.per_job_problems = problems


def _slurm_idle(read):
    """(idle, what the read says of the node's Slurm state)."""
    slurm = TrayRead.of(read).get("slurm", {})
    if not slurm.get("installed"):
        return False, "scontrol is not installed"
    if slurm.get("error") or not slurm.get("state"):
        return False, "state unknown (%s)" % (slurm.get("error") or "no state")
    return slurm["state"] == "IDLE", slurm["state"]


def probe_decision(run, name, tray_options, reads):
    """(the probe's arguments, None) for a per-job domain validate.yml probes now, (None, why not) for one it
    skips, (None, None) where no probe is asked for (imex_slurm_probe_partition unset, or site.yml)."""
    domain = run.domains[name]
    partition = tray_options[domain.leader].get("imex_slurm_probe_partition") or ""
    if not partition:
        return None, None
    if run.check_mode:
        return None, "check mode: no job is submitted"
    if domain.partial:
        return None, "this run holds only part of the domain (--limit)"
    broken = [tray for tray in domain.trays_in_run if run.trays[tray].per_job_problems]
    if broken:
        return None, "its installation is not as site.yml leaves it on %s (see the problems)" % ", ".join(broken)
    states = {tray: _slurm_idle(reads.get(tray)) for tray in domain.trays_in_run}
    busy = ["%s: %s" % (tray, said) for tray, (idle, said) in states.items() if not idle]
    if busy:
        return None, "not idle in Slurm (%s)" % "; ".join(busy)
    trays = domain.trays_in_run
    addresses = dict(zip(domain.trays, domain.addresses))
    return {"partition": partition, "runner": domain.leader,
            "nodes": [run.trays[tray].slurm_node_name for tray in trays],
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


def per_job_report(run, model, name, probe_result=None):
    """The report of a per-job domain: its installation (no daemon runs between jobs to be proven), and the
    matrix of a probe job where validate.yml ran one."""
    domain = run.domains[name]
    problems = [problem for tray in domain.trays_in_run for problem in run.trays[tray].per_job_problems or []]
    probe_said = None
    if domain.probe:
        found, probe_said = probe_verdict(name, domain.probe, probe_result)
        problems.extend(found)
    elif domain.probe_skipped:
        probe_said = "no probe job: " + domain.probe_skipped
    report = {
        "domain": name,
        "mode": domain.mode,
        "per_job": True,
        "expected_nodes": list(model["domains"][name]["addresses"]),
        "leader": domain.leader,
        "trays_not_in_run": [tray for tray in domain.trays if tray not in domain.trays_in_run],
        "out_of_service": domain.out_of_service or [],
        "slurm_node_names": {tray: run.trays[tray].slurm_node_name or None for tray in domain.trays_in_run},
        "status": {"domain_state": None},
        "verdict": "unhealthy" if problems else "healthy",
        "ok": not problems,
        "problems": problems,
        "probe": {"asked": bool(domain.probe), "result": probe_result if domain.probe else None,
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
                             % (name, len(domain.trays_in_run), "; " + probe_said if probe_said else ""))
    return report


def slurm_conf_problems(config, entry, options):
    """[problem] of slurm.conf (scontrol show config) against the per-job program installed on a tray (its Tray
    record): the time Slurm gives it, PrologFlags, and the Prolog and Epilog entries that run it."""
    problems = []
    problems.extend(_script_timeout_issues(config, SLURM_JOB_BOUNDS["total_timeout_s"]))
    if "Alloc" not in (config.get("prolog_flags") or []):
        problems.append("PrologFlags is %s: the per-job prolog must run on every node of a job when it is "
                        "allocated; add PrologFlags=Alloc to slurm.conf (keeping any other flag: "
                        "PrologFlags=Alloc,...)" % (",".join(config.get("prolog_flags") or []) or "not set"))
    for what, key, option in (("prolog", "Prolog", "imex_slurm_prolog_dir"),
                              ("epilog", "Epilog", "imex_slurm_epilog_dir")):
        installed = (entry.slurm_job_paths or {}).get(what)
        entries = config.get(what) or []
        if installed and not any(glob_covers(pattern, installed) for pattern in entries):
            problems.append("slurm.conf runs %s, not %s, where the role installs the per-job %s (%s=%s): add "
                            "the line %s=%s/* to slurm.conf (slurmd runs every %s= entry), or set %s to the "
                            "directory slurm.conf runs"
                            % ("%s=%s" % (key, ",".join(entries)) if entries else "no %s" % key, installed, what,
                               option, options.get(option), key, options.get(option), key, option))
    return problems


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
