# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Stage read, after the read of each tray: the NVLink fabric and version gate, Slurm's channel plugin, what to
write on each tray (node list, config, TLS, the per-job installation), the channels to ensure, pending restarts
and reloads (a daemon older than its files), the busy state seen at the start, the locks to take, and the probe
jobs of validate.yml. Stage reread makes the same decisions again from the second read, under the locks."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._drift import daemon_drift
from ansible_collections.rackscale.imex.plugins.plugin_utils._fabric_gate import fabric_problems, version_problems
from ansible_collections.rackscale.imex.plugins.plugin_utils._tls import TLS_RESTART, held_material, tls_change_class
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.channels import channels_to_ensure
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import daemon, modes, node_names, per_job
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.errors import PlanError
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.locks import command_timeout
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import TrayRead, registered
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.settings import tls_reload_mark
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.slurm_conf import slurm_channel_checks
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.work import plan_waves

# Said once, after the read, when the gate does not compare the trays' NVLink fabric with the inventory.
FABRIC_SKIPPED = "imex_skip_fabric_check is true: the NVLink fabric identity of the trays is NOT checked."


@registered
def after_read(run, model, tray_options, reads, shared_partition=False, skip_fabric=False, converge=True,
               script_sha256=None, slurm_names=None, locked=False):
    """The plan after each tray was read; PlanError with the fabric and version gate's problems.

    converge: the run may change the trays (site.yml); False for a read-only proof (validate.yml),
    which refuses no hand-over and proves every domain, in check mode too.
    script_sha256: the checksum of the per-job program the role ships; slurm_names: {tray: Slurm node
    name} from the inventory, for the trays of a per-job domain that the run does not read.
    locked: the plan made again from the second read, under the locks the first plan took (after_reread).
    """
    notes = [] if shared_partition else None
    gate = [] if skip_fabric else fabric_problems(model, reads, notes=notes)
    gate += version_problems(model, reads)
    gate += node_names.driver_problems(run, reads)
    if gate:
        raise PlanError(["NVLink fabric or versions do not match the inventory; nothing was changed:"] + gate)
    # Fabric health remarks that do not stop IMEX (a Health Summary of Unhealthy on registered GPUs), by tray.
    health = ["tray %s: %s" % (tray, remark) for tray in run.trays
              for remark in TrayRead.of(reads.get(tray)).get("fabric_warnings") or []]
    run.notes = (notes or []) + health
    # What the gate skipped and noted, said in one message.
    run.gate_messages = ([FABRIC_SKIPPED] if skip_fabric else []) + run.notes
    # The run goes on without them, as without any tray ssh does not reach.
    run.unreachable = [tray for tray in run.trays if TrayRead.of(reads.get(tray)).get("unreachable", False)]
    # They leave the play after this stage, through one include (read.yml): the trays out of service (never
    # contacted, their read skipped) and those ssh did not reach.
    run.leaving = list(run.out_of_service or []) + run.unreachable
    slurm_problems, run.warnings = slurm_channel_checks(run, tray_options, reads)
    if slurm_problems:
        raise PlanError(["slurm.conf, the driver's channel count and the role's options do not fit together; nothing "
                         "was changed:"] + slurm_problems)
    handover = []
    # Trays whose running daemon has no record of what it loaded: judged by change times (said once).
    unrecorded = []
    for name, domain in run.domains.items():
        mode = modes.of(domain.mode)
        service = domain.service
        in_run = {tray: TrayRead.of(reads.get(tray)) for tray in domain.trays_in_run}
        busy = mode.busy(domain.trays_in_run, in_run, service, domain.allow_busy)
        domain.busy = busy
        domain.predicted = run.check_mode or domain.partial or bool(busy)
        names = None
        if mode.per_job:
            names = per_job.slurm_node_names(domain.trays, tray_options, reads, slurm_names)
            shared = {}
            for tray in domain.trays:
                shared.setdefault(names[tray], []).append(tray)
            handover.extend("domain %s: trays %s share the Slurm node name %s; the per-job map needs one name per "
                            "tray (set imex_slurm_node_name)" % (name, ", ".join(trays), node)
                            for node, trays in sorted(shared.items()) if len(trays) > 1)
        # A TLS change is made by reload only where no tray can be cut off its peers on the way (a CA that
        # replaces the old one outright is restart-class); judged across the domain's trays in service.
        tls_class, domain.tls_restart_why = None, []
        if mode.reloads_tls and any(tray_options[tray].get("imex_tls") for tray in domain.trays_in_run):
            tls_class, domain.tls_restart_why = tls_change_class([
                (tray, held_material(in_run[tray].get("certificate_files", {}), *run.trays[tray].read_certificate_files)
                 if tray in in_run else None, tray_options[tray] if tray in in_run else None)
                for tray in domain.trays if tray not in domain.out_of_service])
        pending, pending_reloads, pending_releases = {}, {}, {}
        for tray in domain.trays_in_run:
            options = tray_options[tray]
            read = in_run[tray]
            entry = run.trays[tray]
            drift = daemon_drift(read.raw, domain.addresses, options["imex_nodes_config_path"], entry.settings,
                                 options["imex_config_path"], options["imex_max_nodes"])
            entry.write_nodes = bool(drift["nodes"]) and mode.writes_node_list
            entry.write_config = bool(drift["config"]) and mode.writes_daemon_files
            entry.write_tls = bool(options.get("imex_tls")) and mode.writes_daemon_files
            entry.handover = mode.handover(read, service)
            entry.channels = channels_to_ensure(entry.channel_entries, read.get("channels", {}))
            entry.stopped = read.stopped(service)
            # A reboot for the channel option cuts what runs on the tray as a restart does.
            entry.reboot_allowed = bool(options["imex_reboot_allowed"]) and not busy
            entry.command_timeout_s = command_timeout(options["imex_lock_stale_after_s"])
            entry.predicted = domain.predicted
            entry.write_map, entry.scripts_to_install, entry.write_slurm_job, entry.release = False, [], False, False
            if mode.per_job:
                per_job.plan_tray(name, domain, tray, entry, options, read, names, script_sha256, converge)
            stats = read.get("stat_files", {})
            leftovers = entry.slurm_job_leftovers or []
            entry.remove_slurm_job = [path for path in leftovers if (stats.get(path) or {}).get("exists")]
            hosts_read = read.raw.get("hosts_block")
            handover.extend(node_names.hosts_problems(tray, hosts_read) if entry.read_hosts else [])
            entry.write_hosts = bool(entry.read_hosts) and node_names.hosts_drift(hosts_read, domain.hosts_entries)
            entry.write_node_list = entry.write_nodes or entry.write_hosts
            # (New addresses of the slots alone are written even while work runs: made_under_work below.)
            entry.node_list_predicted = entry.predicted
            entry.hosts_unresolved, entry.hosts_resolved_unknown = (
                node_names.resolved_hosts(domain, read, service, hosts_read) if entry.read_hosts else ("", ""))
            entry.write = bool(entry.write_node_list or entry.write_config or entry.write_tls or entry.handover
                               or entry.write_slurm_job or entry.release or entry.remove_slurm_job)
            # Where the channels are slurmd's or the DRA driver's, the role runs only to remove what another mode
            # left: a run with nothing to do does not run it (nor take a lock for it).
            entry.channels_role = (bool(options.get("imex_channels")) or bool(entry.channels)
                                   or mode.channel_cleanup(read))
            tls_files = entry.tls_files or []
            mark = tls_reload_mark(options)
            why = daemon.pending_restart(read, service, entry.read_files,
                                         [path for path in entry.read_stat_files
                                          if path not in tls_files and path != mark and path not in leftovers])
            tls_why = daemon.pending_reload(read, service, tls_files, mark)
            release_why = daemon.release_restart(tray, read, service)
            if release_why:
                pending_releases[tray] = release_why
            why = "; ".join(reason for reason in (why, release_why) if reason) or None
            # The running daemon runs the config on disk, TLS on with these files: new TLS files alone are
            # put in force by SIGUSR1, which reloads file-based TLS credentials without making the daemon
            # a new instance (its peers keep what it exports). Anything else in config.cfg takes a restart.
            entry.tls_reload_ok = bool(entry.write_tls and mode.reloads_tls and not entry.write_nodes
                                       and not entry.write_config and not why
                                       and daemon.daemon_started(read, service) is not None
                                       and tls_class != TLS_RESTART)
            # Written for real where only a reload follows, even in a busy or partly run domain.
            entry.tls_predicted = bool(run.check_mode or (entry.predicted and not entry.tls_reload_ok))
            # Per job, each prolog starts the daemon afresh with the files on disk.
            if mode.runs_host_daemon:
                if daemon.daemon_started(read, service) is not None and daemon.loaded_record(read, service) is None:
                    unrecorded.append(tray)
                if why or (tls_why and not entry.tls_reload_ok):
                    pending[tray] = why or tls_why
                elif tls_why:
                    pending_reloads[tray] = tls_why
        if domain.predicted and not run.check_mode:
            # Held back, but no running tray needs a restart: a swapped tray joins, the hosts blocks are
            # written, and the running daemons reconnect (restart stage).
            joining, hosts_alone = node_names.made_under_work(domain, run.trays, pending)
            for tray in joining:
                run.trays[tray].predicted = run.trays[tray].node_list_predicted = run.trays[tray].tls_predicted = False
            for tray in hosts_alone:
                run.trays[tray].node_list_predicted = False
        domain.pending = pending
        domain.pending_reload = pending_reloads
        domain.slots_moved = node_names.slots_moved(domain, in_run)
        # The trays of pending whose daemon runs another release (the verdicts name it so).
        domain.pending_release = {tray: why for tray, why in pending_releases.items() if tray in pending}
        handover.extend(mode.handover_problems(name, domain, in_run, converge))
    if handover:
        raise PlanError(handover)
    if unrecorded:
        run.warnings.append(
            "tray%s %s: no record of what the running IMEX daemon loaded (it was started at boot, by hand or by an older "
            "release of rackscale.imex): a restart is pending there when its config.cfg or node list changed after "
            "the daemon began to start, so even a no-op chmod, touch or identical rewrite of them restarts its "
            "domain. The next start of the daemon by this collection records it"
            % ("s" if len(unrecorded) > 1 else "", ", ".join(unrecorded)))
    # validate.yml probes the idle per-job domains with a job, where a partition is given.
    run.probe_now, run.probe_skipped = [], []
    for name in run.per_job_domains:
        probe, skipped = (None, None) if converge else per_job.probe_decision(run, name, tray_options, reads)
        run.domains[name].probe, run.domains[name].probe_skipped = probe, skipped
        if probe:
            run.probe_now.append(name)
        elif skipped:
            run.probe_skipped.append("domain %s: no probe job: %s" % (name, skipped))
    # The domains whose status read proves them now (a converge under --check restarts, so proves, nothing;
    # the DRA driver's domains are not the host daemon's to prove; a per-job domain has no daemon between jobs).
    run.prove_now = [name for name, domain in sorted(run.domains.items())
                     if modes.of(domain.mode).proven_now(converge, run.check_mode)]
    # Judged: those proven now, those a read before the restarts already proved (restart()), and the
    # per-job installations (after their writes).
    run.judge_now = sorted(run.prove_now + [name for name in run.per_job_domains
                                            if not converge or not run.check_mode])
    return plan_waves(run, reads, converge=converge, locked=locked)
