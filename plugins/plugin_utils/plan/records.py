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


def _field(default=UNSET):
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default))
    return dataclasses.field(default=default)


@dataclasses.dataclass
class TrayRead:
    """What the plan uses of a tray's one read (imex_tray_info's result); UNSET where the read has no such key.

    The NVLink fabric and version parts go to the fabric gate as the module returned them (``raw``).
    """

    services: dict = _field()               # {unit: active/inactive/failed/...}
    services_started: dict = _field()       # {unit: epoch seconds the daemon started}
    services_enabled: dict = _field()       # {unit: systemctl is-enabled}
    services_instance: dict = _field()      # {unit: {inactive_exit, invocation_id, loaded}}
    files: dict = _field()                  # {path: described file, content and checksum}
    stat_files: dict = _field()             # {path: described file, no content}
    compute_apps: Optional[list] = _field()  # GPU compute processes; None when unreadable
    slurm: dict = _field()                  # {installed, node, state, error}
    slurm_state: Optional[str] = _field()   # an older read's Slurm node state
    slurm_config: dict = _field()           # {installed, config, error, slurmd_version}
    channels: dict = _field()               # {channel: imex_channel's check-mode result}
    channel_count: dict = _field()          # {value, source}
    channel_major: Optional[int] = _field()
    imex_version: Optional[str] = _field()
    daemon_release: dict = _field()         # {running}
    unreachable: bool = _field()
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


@dataclasses.dataclass
class Tray:
    """One tray of the run: what it is meant to hold (preflight), what it needs (read), what it does (restart)."""

    # preflight
    domain: str = _field()
    address: str = _field()
    settings: dict = _field()               # config.cfg keys it must hold
    channel_entries: list = _field()        # imex_channel options of every channel of its mode
    channels_extra: list = _field()         # the isolation channels, as a list
    read_files: list = _field()             # files its read reads (content)
    read_stat_files: list = _field()        # files its read only stats
    tls_files: list = _field()
    tls_certificate: Optional[dict] = _field()
    per_job: bool = _field()
    slurm_job_paths: dict = _field()        # {map, prolog, epilog: tray path} in the per-job mode
    slurm_job_leftovers: list = _field()    # the per-job installation's paths, removed outside that mode
    tls_pem: list = _field()                # each TLS option is PEM text (True) or a controller path
    # read
    write_nodes: bool = _field()
    write_config: bool = _field()
    write_tls: bool = _field()
    handover: bool = _field()               # its host daemon is stopped for the DRA driver
    channels: list = _field()               # the channel entries the module must run for
    stopped: bool = _field()
    reboot_allowed: bool = _field()
    command_timeout_s: int = _field()
    predicted: bool = _field()              # its writes run in check mode
    write_map: bool = _field()
    scripts_to_install: list = _field()     # prolog, epilog
    write_slurm_job: bool = _field()
    release: bool = _field()                # its service is left to the per-job prolog
    slurm_map: str = _field()
    slurm_node_name: str = _field()
    per_job_problems: list = _field()
    remove_slurm_job: list = _field()
    write: bool = _field()                  # write.yml runs on it
    channels_role: bool = _field()          # the imex_channels role runs on it
    tls_reload_ok: bool = _field()          # new TLS files alone: reloaded, not restarted
    tls_predicted: bool = _field()
    # restart
    restart: bool = _field()
    start: bool = _field()
    reload: bool = _field()
    action: str = _field()                  # what its restart, start or reload is, in words


@dataclasses.dataclass
class Domain:
    """One IMEX domain of the run."""

    # preflight
    trays: list = _field()                  # every tray, in node order
    trays_in_run: list = _field()
    out_of_service: list = _field()
    absent_addresses: list = _field()
    addresses: list = _field()
    leader: str = _field()
    lock_holders: list = _field()
    partial: bool = _field()
    left_out: list = _field()               # left out by --limit (or a sliced job) alone
    mode: str = _field()
    service: str = _field()
    allow_busy: bool = _field()
    # read
    busy: list = _field()                   # '<tray>: <what runs there>'
    predicted: bool = _field()
    pending: dict = _field()                # {tray: why its daemon runs files other than on disk}
    pending_reload: dict = _field()
    pending_release: dict = _field()
    probe: Optional[dict] = _field()
    probe_skipped: Optional[str] = _field()
    # restart
    written: dict = _field()                # {tray: [what]} written for real in its wave
    restart_reasons: dict = _field()
    restart: bool = _field()
    reload: dict = _field()
    start: list = _field()
    proven_before_restart: bool = _field()


@dataclasses.dataclass
class Run:
    """The plan of one run."""

    # preflight
    run_id: str = _field()
    check_mode: bool = _field()
    report_only: bool = _field()
    waves: list = _field()                  # [[domain]]
    domains: dict = _field()                # {name: Domain}
    trays: dict = _field()                  # {name: Tray}
    locks: list = _field()                  # [{domain, holder}] in the order they are taken
    prove_now: list = _field()
    restarting: list = _field()
    verdicts: list = _field()
    run_verdicts: list = _field()
    explain: list = _field()
    out_of_service: list = _field()
    host_daemon_domains: list = _field()
    per_job_domains: list = _field()
    model: dict = _field()                  # the domain model, added by the action
    # read
    notes: list = _field()
    warnings: list = _field()
    probe_now: list = _field()
    probe_skipped: list = _field()
    judge_now: list = _field()
    # verdicts
    proven: bool = _field()
    outcome: str = _field()


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


def to_register(run):
    """The register's JSON of a Run: plain dicts and lists, UNSET fields left out."""
    if not isinstance(run, Run):
        return run
    found = _set_fields(run)
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
