# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Slurm's IMEX channel plugin (switch/nvidia_imex), as scontrol show config tells it (slurmctld's configuration,
asked once per domain by its leader), against the mode, each tray's channel options and its driver's channel count."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.module_utils._slurm import SWITCH_NVIDIA_IMEX, release
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import TrayRead

# What scontrol says when slurmctld cannot be reached (a cluster is there, but not answering), and
# what the read says of a call that hung.
_CONTROLLER_UNREACHABLE = ("Unable to contact slurm controller", "did not answer")


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


def _tray_slurm_issues(options, slurm_config, read, entry):
    """([problem], [warning]) of one tray, each a sentence without the tray's name. slurm_config: slurmctld's
    configuration as its domain's read of it gave it (None where none was read)."""
    mode = modes.of(options["imex_mode"])
    asks_channels = bool(options.get("imex_channel0")) or bool(options.get("imex_channels"))
    problems, warnings = [], []
    if not isinstance(slurm_config, dict):
        return problems, warnings
    if not slurm_config.get("installed"):
        if mode.slurm_owns_channels:
            warnings.append("scontrol is not installed: slurm.conf is not checked against imex_mode=%s (SwitchType, "
                            "the channel count%s)" % (mode.name, "".join(", " + what for what in mode.slurm_conf_checks)))
        return problems, warnings
    config = slurm_config.get("config")
    if slurm_config.get("error") or not isinstance(config, dict):
        # Outside the Slurm modes, an scontrol that finds no cluster (no configuration source) is no cluster.
        if mode.slurm_owns_channels or (asks_channels and _unreachable(slurm_config.get("error"))):
            warnings.append("Slurm's configuration could not be read (%s): slurm.conf is not checked against the IMEX "
                            "channels%s" % (slurm_config.get("error") or "no answer",
                                            " and the per-job prolog" if mode.slurm_conf_checks else ""))
        return problems, warnings
    owns = config.get("switch_type") == SWITCH_NVIDIA_IMEX
    if mode.slurm_owns_channels and not owns:
        problems.append("imex_mode=%s, but Slurm's SwitchType is %s: add SwitchType=%s to slurm.conf; Slurm then owns "
                        "the channels (a change of SwitchType takes a restart of every Slurm daemon)"
                        % (mode.name, config.get("switch_type") or "not set", SWITCH_NVIDIA_IMEX))
    if owns:
        why = ("Slurm's %s (SwitchType in slurm.conf) owns the IMEX channels: slurmd empties "
               "/dev/nvidia-caps-imex-channels when it starts and gives each job its own channel" % SWITCH_NVIDIA_IMEX)
        if options.get("imex_channel0"):
            problems.append("imex_channel0=true (imex_mode=%s), but %s; set imex_channel0=false" % (mode.name, why))
        if options.get("imex_channels"):
            problems.append("imex_channels asks for channel(s) %s (imex_mode=%s), but %s; set imex_channels=[]"
                            % (", ".join(str((channel or {}).get("channel")) for channel in options["imex_channels"]),
                               mode.name, why))
        plugin_count = config.get("imex_channel_count")
        count = (read.get("channel_count") or {}).get("value")
        if plugin_count is None:
            warnings.append("SwitchParameters=%s in slurm.conf gives no whole number for imex_channel_count: the "
                            "channel count is not checked" % config.get("switch_parameters"))
        elif count is not None:
            refusals, said = _channel_count_issues(config.get("version"), plugin_count, count,
                                                   (read.get("channel_count") or {}).get("source"))
            problems.extend(refusals)
            warnings.extend(said)
        elif mode.slurm_owns_channels:
            warnings.append("the driver's NVreg_ImexChannelCount could not be read (driver not loaded?): its match with "
                            "Slurm's imex_channel_count=%d is not checked" % plugin_count)
    problems.extend(mode.slurm_conf_problems(config, entry, options))
    return problems, warnings


def slurm_channel_checks(run, tray_options, reads):
    """([problem], [warning]) of the run's trays against Slurm's configuration and the driver's channel count.

    Each sentence names its domain and trays, and the slurm.conf line or option to change. A configuration
    that cannot be read (slurmctld unreachable, or the tray that asks it for the domain not reached) is a
    warning, not a refusal.
    """
    problems, warnings = [], []
    for name, domain in sorted(run.domains.items()):
        refused, warned, counts = {}, {}, {}
        # Asked of slurmctld by the domain's leader alone (its Tray.read_slurm_config); none where ssh did not reach it.
        config = TrayRead.of(reads.get(domain.leader)).get("slurm_config")
        if config is None and modes.of(domain.mode).slurm_owns_channels:
            warnings.append("domain %s: Slurm's configuration was not read (its tray %s, which asks slurmctld for the "
                            "domain, was not reached): slurm.conf is not checked against imex_mode=%s"
                            % (name, domain.leader, domain.mode))
        for tray in domain.trays_in_run:
            read = TrayRead.of(reads.get(tray))
            found, said = _tray_slurm_issues(tray_options[tray], config, read, run.trays[tray])
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
