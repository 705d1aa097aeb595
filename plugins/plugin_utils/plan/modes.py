# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""One class per imex_mode: what the mode reads and writes on a tray, whether and how its domain restarts,
who owns the IMEX channels, and how the domain is proven. The stages ask the domain's mode; nothing
outside this file tests a mode's name.

              daemon of the collection   writes                         restart     proof
static        always running             node list, config.cfg, TLS     whole domain  status (nvidia-imex-ctl -N)
dra_host_managed  as static, with the unix socket the DRA driver asks
slurm         as static; Slurm's switch/nvidia_imex owns the channels (slurm.conf checked)
slurm_per_job started by each job's prolog  config.cfg, map, prolog, epilog   never  the installation (+ a probe job)
dra           none: handed over to the DRA driver (stopped, masked)           never  not on converge
"""
from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.rackscale.imex.plugins.module_utils._channel import BOOT_DIR as CHANNEL_BOOT_DIR
from ansible_collections.rackscale.imex.plugins.plugin_utils._options import whole_number
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import daemon, per_job, proof


class Static:
    """The static mode, and what every mode does unless it says otherwise: this collection's daemon runs on
    every tray all the time, its files are written where they differ, a change restarts the whole domain,
    the collection owns the channels, and the domain's status read proves it."""

    name = "static"
    # The collection's daemon runs on the host between jobs: its files are written, a change restarts the
    # domain, a pending restart is judged, and its status proves the domain.
    runs_host_daemon = True
    # The collection writes the daemon's files (not where the host daemon is handed over).
    writes_daemon_files = True
    # The collection writes the node list (the per-job prolog writes its own, per job).
    writes_node_list = True
    # A running daemon whose TLS files alone changed reloads them (SIGUSR1) instead of restarting.
    reloads_tls = True
    # The collection makes the channels (channel0 and the isolation channels); else it only drops its channel0
    # option and the channels role runs on every tray.
    owns_channels = True
    # Slurm's switch/nvidia_imex owns the channels: slurm.conf is checked against the mode.
    slurm_owns_channels = False
    # Who makes the isolation channels instead of the collection (imex_channels is refused), or None.
    channels_owner = None
    # What else of slurm.conf the mode checks, as the warnings name it.
    slurm_conf_checks = ()
    # Who owns channel 0 instead of the collection (imex_channel0=true is refused), or None.
    channel0_owner = None
    # The daemon opens the unix socket imex_unix_socket (for the DRA driver's kubelet plugin).
    unix_socket = False
    # The domain is the Slurm prolog's (per job): its installation is judged, not a daemon.
    per_job = False
    # The read asks systemd whether the daemon's unit is enabled (systemctl is-enabled): where the mode
    # leaves the daemon to another owner and checks that it is left so.
    reads_enablement = False
    # A converge proves the domain (else only validate.yml does).
    proven_after_converge = True
    # The node list may name slots (imex_node_names), mapped to addresses in each tray's /etc/hosts; else why not.
    node_names = True
    node_names_refused = None

    def option_problems(self, options):
        """Problems of the mode's own options on one tray."""
        problems = []
        if self.channel0_owner and options.get("imex_channel0"):
            problems.append("imex_mode=%s conflicts with imex_channel0=true: %s; set imex_channel0 to false"
                            % (self.name, self.channel0_owner))
        if options.get("imex_node_names") and not self.node_names:
            problems.append("imex_mode=%s does not take imex_node_names=true: %s; set imex_node_names to false"
                            % (self.name, self.node_names_refused))
        return problems

    def channel_entries(self, channel0, extra):
        """The rackscale.imex.imex_channel options of every channel of the mode, channel0 first.

        Where the mode owns the channels: channel0 as asked and the isolation channels, all persistent
        (channel0 through the modprobe option, the others through a boot entry) and made now. Where the
        channels belong to slurmd or the DRA kubelet plugin, whose device nodes may be in use: only this
        collection's channel0 option goes, and no node is touched.
        """
        entries = [{"channel": 0, "state": "present" if self.owns_channels and channel0 else "absent"}]
        if self.owns_channels:
            # The number as the options' check took it: "5" and 5.0 (an AWX float) are channel 5.
            entries.extend(dict(entry, channel=whole_number(entry["channel"])) for entry in extra)
        for entry in entries:
            entry.update(persistent=True, immediate=self.owns_channels)
        return entries

    def read_presence(self):
        """The paths a tray's read reports the presence of: where the channels are slurmd's or the DRA driver's,
        the boot entries of isolation channels made under another mode, which the imex_channels role removes."""
        return [] if self.owns_channels else [CHANNEL_BOOT_DIR]

    def channel_cleanup(self, read):
        """Whether the imex_channels role has boot entries to remove on the tray (read: its TrayRead): where the
        mode does not own the channels and the read found them there, or could not tell (a read without
        presence, or one that could not look)."""
        if self.owns_channels:
            return False
        found = (read.get("presence") or {}).get(CHANNEL_BOOT_DIR)
        return not isinstance(found, Mapping) or bool(found.get("exists") or found.get("error"))

    def job_paths(self, options):
        """{what: tray path} of the per-job installation the mode installs ({} outside the per-job mode)."""
        return {}

    def leftovers(self, options):
        """Paths of another mode's installation that a read looks for, to remove them: out of the per-job mode
        its program would still stop and start the daemon around every exclusive job."""
        return sorted(per_job.slurm_job_paths(options).values())

    def read_files(self, options, job_paths):
        """The files a tray's read reads (content): the node list and config.cfg."""
        return [options["imex_nodes_config_path"], options["imex_config_path"]]

    def busy(self, trays, reads, service, allow_busy):
        """What keeps the domain from a restart (and its writes from being made): work on a tray while its
        daemon runs."""
        return daemon.busy_guard(trays, reads, service, allow_busy)

    def slurm_conf_problems(self, config, entry, options):
        """[problem] of slurm.conf against what the mode installs on a tray."""
        return []

    def handover_problems(self, name, domain, reads, converge):
        """Refusals of handing the host daemon over to another owner."""
        return []

    def handover(self, read, service):
        """Whether the run hands the host daemon over to another owner (stops and masks it) on a tray (read: its
        TrayRead)."""
        return False

    def proven_now(self, converge, check_mode):
        """Whether the domain's status read proves it in this run (check mode restarts, so proves, nothing)."""
        return not converge or (self.proven_after_converge and not check_mode)

    def judge(self, run, model, name, statuses, play_hosts, allowed_broken_pairs=0, logs=None, pending=None,
              probe_result=None):
        """The report of the domain from its proof."""
        return proof.daemon_report(run, model, name, statuses, play_hosts, allowed_broken_pairs, logs, pending)


class DraHostManaged(Static):
    """The host daemon serves the DRA driver's kubelet plugin over a unix socket; the collection owns it."""

    name = "dra_host_managed"
    unix_socket = True
    node_names = False
    node_names_refused = "the DRA driver's kubelet plugin works with the address list"


class Slurm(Static):
    """The host daemon runs all the time; Slurm's switch/nvidia_imex gives each job its channel."""

    name = "slurm"
    owns_channels = False
    slurm_owns_channels = True
    channels_owner = "Slurm"
    channel0_owner = "Slurm switch/nvidia_imex owns the channels and reserves channel 0"


class SlurmPerJob(Slurm):
    """Each exclusive job's Slurm prolog starts the daemon with the job's nodes, the epilog stops it. A run
    installs the program, the map it reads and config.cfg; it never restarts a daemon."""

    name = "slurm_per_job"
    runs_host_daemon = False
    writes_node_list = False
    reloads_tls = False
    per_job = True
    reads_enablement = True
    slurm_conf_checks = ("PrologFlags", "Prolog and Epilog")
    node_names = False
    node_names_refused = "the prolog writes each job's node list of addresses"

    def option_problems(self, options):
        return super().option_problems(options) + per_job.per_job_option_problems(options)

    def job_paths(self, options):
        return per_job.slurm_job_paths(options)

    def leftovers(self, options):
        return []

    def read_files(self, options, job_paths):
        # No node list to read: the prolog writes it per job.
        return [options["imex_config_path"]] + [job_paths[what] for what in ("map", "prolog", "epilog")]

    def busy(self, trays, reads, service, allow_busy):
        # What runs on a tray is never the collection's daemon to stop: any work, daemon running or not,
        # holds the writes (a job that shares its nodes runs without a daemon).
        return [] if allow_busy else daemon.work_on(trays, reads, service)

    def slurm_conf_problems(self, config, entry, options):
        return per_job.slurm_conf_problems(config, entry, options)

    def proven_now(self, converge, check_mode):
        return False

    def judge(self, run, model, name, statuses, play_hosts, allowed_broken_pairs=0, logs=None, pending=None,
              probe_result=None):
        return per_job.per_job_report(run, model, name, probe_result)


class Dra(Static):
    """The Kubernetes DRA driver runs its own IMEX daemons: the host daemon is handed over (stopped, disabled)."""

    name = "dra"
    runs_host_daemon = False
    writes_daemon_files = False
    writes_node_list = False
    reads_enablement = True
    owns_channels = False
    channels_owner = "the DRA driver"
    channel0_owner = "the Kubernetes DRA driver injects channels into its pods"
    proven_after_converge = False
    node_names = False
    node_names_refused = "the DRA driver writes its own node list of names in its pods"

    def handover(self, read, service):
        # Stopped and masked: handed over already, nothing to write (nor to lock for). A read that cannot tell
        # (no enablement read) hands it over again, which changes nothing on a tray handed over.
        return not (read.stopped(service) and read.enablement(service) == "masked")

    def handover_problems(self, name, domain, reads, converge):
        if not converge:
            return []
        running = [tray for tray in domain.trays_in_run if reads[tray].service(domain.service) == "active"]
        if domain.busy:
            return [_handover_refusal(name, "while work runs on it (%s)" % "; ".join(domain.busy),
                                      "Drain the trays, wait for the work to end and run again, or set "
                                      "imex_allow_busy_restart=true.")]
        if running and domain.left_out:
            return [_handover_refusal(name, "on part of the domain (this run leaves out %s)" % ", ".join(domain.left_out),
                                      "Run against the whole domain (drop --limit, or do not slice the job).")]
        return []


def _handover_refusal(name, reason, advice):
    return ("domain %s: the host nvidia-imex is not handed over to the DRA driver %s. Stopping its daemons makes "
            "the domain's jobs lose the memory they share. Nothing was stopped. %s" % (name, reason, advice))


MODES = {mode.name: mode for mode in (Static(), DraHostManaged(), Slurm(), SlurmPerJob(), Dra())}


def of(name):
    """The mode of an imex_mode value (the argument spec refuses any other; such a value is taken as static,
    as the options' check names it first)."""
    return MODES.get(name) or MODES["static"]
