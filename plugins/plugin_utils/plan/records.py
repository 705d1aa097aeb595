# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""The plan's records, declared once with their types: the run, its domains, its trays, and the tray read.

The role's tasks read the plan from the register of the imex_plan action (``__imex_plan.plan``): these
records are its shape, and ``from_register``/``to_register`` its one conversion. A field the run has not
reached yet (the restart of a domain before its wave) is UNSET, and absent from the register.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, Optional


class _Unset:
    """A field no stage has set yet: left out of the register."""

    def __repr__(self):
        return "UNSET"

    def __bool__(self):
        return False

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self


UNSET: Any = _Unset()


@dataclasses.dataclass
class TrayRead:
    """What the plan uses of a tray's one read (imex_tray_info's result); UNSET where the read has no such key.

    The NVLink fabric and version parts go to the fabric gate as the module returned them (``raw``).
    """

    services: dict = UNSET               # {unit: active/inactive/failed/...}
    services_started: dict = UNSET       # {unit: epoch seconds the daemon started}
    services_enabled: dict = UNSET       # {unit: systemctl is-enabled}
    services_instance: dict = UNSET      # {unit: {inactive_exit, invocation_id, loaded}}
    files: dict = UNSET                  # {path: described file, content and checksum}
    stat_files: dict = UNSET             # {path: described file, no content}
    presence: dict = UNSET               # {path: {exists, error}}
    certificate_files: dict = UNSET  # {path: {exists, sha256: [fingerprint], error}}
    compute_apps: Optional[list] = UNSET  # GPU compute processes; None when unreadable
    slurm: dict = UNSET                  # {installed, node, state, error}
    slurm_state: Optional[str] = UNSET   # an older read's Slurm node state
    slurm_config: dict = UNSET           # {installed, config, error}: on the tray that reads it for its domain
    slurmd_version: Optional[str] = UNSET  # the tray's slurmd release (per job)
    channels: dict = UNSET               # {channel: imex_channel's check-mode result}
    channel_count: dict = UNSET          # {value, source}
    channel_major: Optional[int] = UNSET
    imex_version: Optional[str] = UNSET
    daemon_release: dict = UNSET         # {running}
    fabric_warnings: list = UNSET        # fabric health remarks that do not stop IMEX, naming the GPUs
    unreachable: bool = UNSET
    raw: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, read):
        """The record of a registered read (a TrayRead is returned as it is)."""
        if isinstance(read, TrayRead):
            return read
        read = dict(read or {}) if isinstance(read, Mapping) else {}
        names = {field.name for field in dataclasses.fields(cls)} - {"raw"}
        return cls(raw=read, **{name: value for name, value in read.items() if name in names})

    def has(self, name):
        return getattr(self, name) is not UNSET

    def get(self, name, default=None):
        value = getattr(self, name)
        return default if value is UNSET or value is None else value

    def service(self, unit):
        """The state of ``unit`` as the read shows it, or None."""
        return self.get("services", {}).get(unit)

    def stopped(self, unit):
        """Whether the read shows ``unit`` not running (inactive, or failed)."""
        return self.service(unit) in ("inactive", "failed")

    def enablement(self, unit):
        """``systemctl is-enabled`` of ``unit`` as the read shows it (asked in the modes that read it), or None."""
        return self.get("services_enabled", {}).get(unit)


@dataclasses.dataclass
class Tray:
    """One tray of the run: what it is meant to hold (preflight), what it needs (read), what it does (restart)."""

    # preflight
    domain: str = UNSET
    address: str = UNSET
    settings: dict = UNSET               # config.cfg keys it must hold
    channel_entries: list = UNSET        # imex_channel options of every channel of its mode
    channels_extra: list = UNSET         # the isolation channels, as a list
    read_files: list = UNSET             # files its read reads (content)
    read_stat_files: list = UNSET        # files its read only stats
    read_presence: list = UNSET          # paths its read reports the presence of (what the channels role removes)
    read_enablement: bool = UNSET        # its read asks whether the daemon's unit is enabled
    read_certificate_files: list = UNSET  # its CA bundle and certificate, read as fingerprints
    tls_files: list = UNSET
    tls_certificate: Optional[dict] = UNSET
    per_job: bool = UNSET
    slurm_job_paths: dict = UNSET        # {map, prolog, epilog: tray path} in the per-job mode
    slurm_job_leftovers: list = UNSET    # the per-job installation's paths, removed outside that mode
    tls_pem: list = UNSET                # each TLS option is PEM text (True) or a controller path
    channel0: bool = UNSET               # channel0 is wanted (imex_channel0): the imex_channels role's input
    nodes_config_path: str = UNSET       # its node list (imex_nodes_config_path, as the plan decided it)
    pre_restart_hook: bool = UNSET       # imex_pre_restart_tasks names a task file
    post_restart_hook: bool = UNSET      # imex_post_restart_tasks names a task file
    read_hosts: str = UNSET              # the hosts file its read reads for the block of slot names ("": none)
    read_slurm_config: bool = UNSET      # its read asks slurmctld's configuration for its domain (its leader)
    # read
    write_nodes: bool = UNSET
    write_config: bool = UNSET
    write_tls: bool = UNSET
    handover: bool = UNSET               # its host daemon is stopped for the DRA driver
    channels: list = UNSET               # the channel entries the module must run for
    stopped: bool = UNSET
    reboot_allowed: bool = UNSET
    command_timeout_s: int = UNSET
    predicted: bool = UNSET              # its writes run in check mode
    write_map: bool = UNSET
    scripts_to_install: list = UNSET     # prolog, epilog
    write_slurm_job: bool = UNSET
    release: bool = UNSET                # its service is left to the per-job prolog
    slurm_map: str = UNSET
    slurm_node_name: str = UNSET
    per_job_problems: list = UNSET
    remove_slurm_job: list = UNSET
    write: bool = UNSET                  # write.yml runs on it
    channels_role: bool = UNSET          # the imex_channels role runs on it
    tls_reload_ok: bool = UNSET          # new TLS files alone: reloaded, not restarted
    tls_predicted: bool = UNSET
    write_hosts: bool = UNSET            # its hosts file's block of slot names differs
    write_node_list: bool = UNSET        # the one write of its node list and hosts block runs
    node_list_predicted: bool = UNSET    # that write runs in check mode
    hosts_unresolved: str = UNSET        # why its running daemon resolved another hosts block than on disk ("": not)
    hosts_resolved_unknown: str = UNSET  # why the read cannot tell which hosts block it resolved ("": it can)
    # restart
    restart: bool = UNSET
    start: bool = UNSET
    reload: bool = UNSET
    action: str = UNSET                  # what its restart, start or reload is, in words
    restart_tasks: bool = UNSET          # restart.yml runs on it: it restarts or only starts
    reload_or_restart: bool = UNSET      # reload_or_restart.yml runs on it: it reloads, restarts or only starts
    stop: bool = UNSET                   # its daemon is stopped for the restart (a running one: it restarts)
    start_predicted: bool = UNSET        # under --check, the start that follows its stop counts as a change
    pre_restart_tasks: bool = UNSET      # the operator's pre-restart tasks run on it (it restarts, a hook is given)
    post_restart_tasks: bool = UNSET     # and the post-restart ones, after the proof (never under --check)
    reconnect: str = UNSET               # why its running daemon is sent SIGUSR1 to reconnect after the starts ("": not)


@dataclasses.dataclass
class Domain:
    """One IMEX domain of the run."""

    # preflight
    trays: list = UNSET                  # every tray, in node order
    trays_in_run: list = UNSET
    out_of_service: list = UNSET
    absent_addresses: list = UNSET
    addresses: list = UNSET
    leader: str = UNSET
    lock_holders: list = UNSET
    partial: bool = UNSET
    left_out: list = UNSET               # left out by --limit (or a sliced job) alone
    mode: str = UNSET
    service: str = UNSET
    allow_busy: bool = UNSET
    node_names: bool = UNSET             # imex_node_names: its node list names slots (addresses: their entries)
    slot_names: list = UNSET             # the slot names in node order ([] without imex_node_names)
    hosts_entries: list = UNSET          # [{address, name}] of the hosts block of every tray ([]: no block)
    slots_moved: dict = UNSET            # {tray: its slot's new address} where a tray's hosts block held another
    # read
    busy: list = UNSET                   # '<tray>: <what runs there>'
    predicted: bool = UNSET
    pending: dict = UNSET                # {tray: why its daemon runs files other than on disk}
    pending_reload: dict = UNSET
    pending_release: dict = UNSET
    tls_restart_why: list = UNSET  # why its TLS change cannot be made by reload
    probe: Optional[dict] = UNSET
    probe_skipped: Optional[str] = UNSET
    # restart
    written: dict = UNSET                # {tray: [what]} written for real in its wave
    restart_reasons: dict = UNSET
    restart: bool = UNSET
    reload: dict = UNSET
    start: list = UNSET
    proven_before_restart: bool = UNSET


@dataclasses.dataclass
class Run:
    """The plan of one run."""

    # preflight
    run_id: str = UNSET
    check_mode: bool = UNSET
    report_only: bool = UNSET
    waves: list = UNSET                  # [[domain]]
    domains: dict = UNSET                # {name: Domain}
    trays: dict = UNSET                  # {name: Tray}
    locks: list = UNSET                  # [{domain, holder}] in the order they are taken (read: of the domains with work)
    prove_now: list = UNSET
    restarting: list = UNSET
    verdicts: list = UNSET
    run_verdicts: list = UNSET
    explain: list = UNSET
    out_of_service: list = UNSET
    host_daemon_domains: list = UNSET
    per_job_domains: list = UNSET
    model: dict = UNSET                  # the domain model, added by the action
    reached: str = UNSET                 # the last stage that made this plan (the stage table's name), set by the action
    fabric_check_skipped: bool = UNSET   # imex_skip_fabric_check: the gate does not compare NVLink fabrics
    wave_locks: list = UNSET             # [[{domain, holder}]] per wave, refreshed as it starts ([] for the first)
    # [[domain]] per wave, what its loops go over (derived by to_register, see WAVE_LISTS)
    wave_status_reads: list = UNSET      # the domains whose status is read before the restarts
    wave_proofs: list = UNSET            # the domains proven by a status read after them
    wave_verdicts: list = UNSET          # the domains judged
    require_declared_size: bool = UNSET  # imex_require_declared_size, as the plan decided it (the model's)
    # read
    notes: list = UNSET
    gate_messages: list = UNSET          # what the fabric gate skipped and noted, said once after the read
    warnings: list = UNSET
    probe_now: list = UNSET
    probe_skipped: list = UNSET
    judge_now: list = UNSET
    unreachable: list = UNSET            # trays ssh did not reach for the read: they leave the play
    leaving: list = UNSET                # the trays out of service and those unreachable: they leave the play
    read_again: list = UNSET             # the trays read again under the locks (those of the domains with work)
    lock_include_trays: list = UNSET     # the trays that include lock.yml: those leaving and those read again
    # [[tray]] per wave (plan/work.py): the trays that may do something in it, those whose channels it
    # ensures (the first wave), and those that include wave.yml (its workers and channels, else one runner).
    wave_workers: list = UNSET
    wave_channels: list = UNSET
    wave_trays: list = UNSET
    wave_include_throttle: int = UNSET   # 1 with several waves: the trays' includes come back in the play's order
    # restart
    restart_locks: list = UNSET          # the locks of the wave's restarting domains, checked before the stop
    reconnects: list = UNSET             # [{tray, service, reason}] of the wave's trays whose reconnect is set
    # verdicts
    proven: bool = UNSET
    outcome: str = UNSET


def _record(cls, found, where):
    if isinstance(found, cls):
        return found
    if not isinstance(found, Mapping):
        raise TypeError("%s is not a mapping" % where)
    names = {field.name for field in dataclasses.fields(cls)}
    unknown = sorted(set(found) - names)
    if unknown:
        raise TypeError("%s has keys the plan does not declare: %s" % (where, ", ".join(map(str, unknown))))
    return cls(**dict(found))


def from_register(plan):
    """The Run of a registered plan (``__imex_plan.plan``); a Run is returned as a copy."""
    run = _record(Run, to_register(plan) if isinstance(plan, Run) else plan, "the plan")
    run.domains = {name: _record(Domain, dict(found), "domain %s" % name) for name, found in (run.domains or {}).items()}
    run.trays = {name: _record(Tray, dict(found), "tray %s" % name) for name, found in (run.trays or {}).items()}
    return _plain_copy(run)


def _plain_copy(run):
    """A copy that shares nothing with what it came from (the plan a stage received stays as it was)."""
    return copy.deepcopy(run)


def _set_fields(record):
    return {field.name: getattr(record, field.name) for field in dataclasses.fields(record)
            if field.name != "raw" and getattr(record, field.name) is not UNSET}


# The lists each wave's loops read (by the wave's index), derived from the run's lists of domains in one
# place, so that no stage leaves them out of step: {wave list: the run's list it takes the wave's domains of}.
WAVE_LISTS = {"wave_status_reads": "host_daemon_domains", "wave_proofs": "prove_now", "wave_verdicts": "judge_now"}


def to_register(run):
    """The register's JSON of a Run: plain dicts and lists, UNSET fields left out, the WAVE_LISTS derived."""
    if not isinstance(run, Run):
        return run
    found = _set_fields(run)
    for wave_list, source in WAVE_LISTS.items():
        if "waves" in found and source in found:
            found[wave_list] = [[name for name in wave if name in found[source]] for wave in found["waves"]]
    if "domains" in found:
        found["domains"] = {name: _set_fields(domain) for name, domain in found["domains"].items()}
    if "trays" in found:
        found["trays"] = {name: _set_fields(tray) for name, tray in found["trays"].items()}
    return _json_copy(found)


def _json_copy(value):
    if isinstance(value, Mapping):
        return {key: _json_copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_copy(item) for item in value]
    return value


def registered(stage):
    """A stage on records, called with and returning the register's JSON: its first argument, the plan of
    the stage before (a Run or its register), is read with from_register, and the Run it returns is written
    with to_register. The stage itself stays at ``.on_records``."""

    @functools.wraps(stage)
    def on_register(plan, *args, **kwargs):
        return to_register(stage(from_register(plan), *args, **kwargs))

    on_register.on_records = stage
    return on_register


def builds_register(stage):
    """A stage that builds the Run (preflight), returning the register's JSON."""

    @functools.wraps(stage)
    def on_register(*args, **kwargs):
        return to_register(stage(*args, **kwargs))

    on_register.on_records = stage
    return on_register
