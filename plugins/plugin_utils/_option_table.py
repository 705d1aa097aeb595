# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Every option of the rackscale.imex.imex role: its type, its scope, and the one conversion of its value.

roles/imex/meta/argument_specs.yml names and types the options and documents them; its schema takes
no key of ours, so the scope of each option is written here, and a unit test keeps this table and
the spec equal both ways (every option, no other, the same type), and the options the role gathers
on each tray (``__imex_options`` in roles/imex/vars/main.yml) equal to GATHERED.

Scopes: RUN, one value for the whole run (the model, the waves, the locks, the records); DOMAIN, one
value for every tray of a domain (its daemons' configuration and its channels); TRAY, each tray's own.

Options from -e or an AWX survey arrive as strings: convert_option makes each value typed, once, at
the boundary (whole numbers, booleans, and mappings and lists given as JSON or YAML text).
"""
from __future__ import annotations

import re
from collections import namedtuple

from ansible.module_utils.parsing.convert_bool import boolean

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core depends on PyYAML
    yaml = None

RUN, DOMAIN, TRAY = "run", "domain", "tray"
SCOPES = (RUN, DOMAIN, TRAY)

# type: as meta/argument_specs.yml declares it. parsed: what a raw option holds (list or dict), given
# as such or as its JSON or YAML text.
Option = namedtuple("Option", ("type", "scope", "parsed"), defaults=(None,))

OPTIONS = {
    # The inventory and the model of the domains.
    "imex_domains_group": Option("str", RUN),
    "imex_domain": Option("str", TRAY),
    "imex_max_nodes": Option("int", RUN),
    "imex_allow_mixed_families": Option("bool", RUN),
    "imex_driver_version": Option("str", RUN),
    "imex_require_declared_size": Option("bool", RUN),
    # Who owns the daemon and the channels; the channels.
    "imex_mode": Option("str", DOMAIN),
    "imex_channel0": Option("bool", TRAY),
    "imex_channels": Option("raw", DOMAIN, "list"),
    "imex_reboot_allowed": Option("bool", TRAY),
    # The daemon's configuration.
    "imex_settings": Option("raw", DOMAIN, "dict"),
    "imex_server_port": Option("int", DOMAIN),
    "imex_cmd_port": Option("int", DOMAIN),
    "imex_cmd_bind_own_address": Option("bool", DOMAIN),
    "imex_tls": Option("bool", DOMAIN),
    "imex_tls_ca": Option("str", TRAY),
    "imex_tls_cert": Option("str", TRAY),
    "imex_tls_key": Option("str", TRAY),
    "imex_tls_target_override": Option("str", DOMAIN),
    "imex_tls_min_days_left": Option("int", TRAY),
    "imex_node_names": Option("bool", DOMAIN),
    "imex_node_index": Option("int", TRAY),
    "imex_backup": Option("bool", TRAY),
    # Locks, the busy guard and the operator's hooks.
    "imex_lock_wait_s": Option("int", RUN),
    "imex_lock_stale_after_s": Option("int", RUN),
    "imex_slurm_node_name": Option("str", TRAY),
    "imex_slurm_prolog_dir": Option("path", TRAY),
    "imex_slurm_epilog_dir": Option("path", TRAY),
    "imex_slurm_probe_partition": Option("str", TRAY),
    "imex_allow_busy_restart": Option("bool", RUN),
    "imex_pre_restart_tasks": Option("str", TRAY),
    "imex_post_restart_tasks": Option("str", TRAY),
    # Waves, the fabric gate and the proof.
    "imex_rolling": Option("bool", RUN),
    "imex_rolling_batch": Option("int", RUN),
    "imex_skip_fabric_check": Option("bool", RUN),
    "imex_shared_partition": Option("bool", RUN),
    "imex_trays_out_of_service": Option("list", RUN),
    "imex_validate_timeout_s": Option("int", RUN),
    "imex_validate_interval_s": Option("int", RUN),
    "imex_ctl_timeout_s": Option("int", RUN),
    "imex_allowed_broken_pairs": Option("int", RUN),
    # The run's records on the controller.
    "imex_report_dir": Option("path", RUN),
    "imex_textfile_dir": Option("path", RUN),
    # Where the daemon lives on a tray.
    "imex_config_path": Option("path", TRAY),
    "imex_nodes_config_path": Option("path", TRAY),
    "imex_service": Option("str", TRAY),
    "imex_unix_socket": Option("path", TRAY),
    "imex_tls_dir": Option("path", TRAY),
    # discover.yml's own.
    "imex_discover_output": Option("str", RUN),
}

# Options the role does not gather as options: the domain model reads imex_domain and imex_node_index
# from the inventory, and imex_discover_output belongs to the discover entry point alone.
NOT_GATHERED = ("imex_domain", "imex_node_index", "imex_discover_output")
GATHERED = tuple(name for name in OPTIONS if name not in NOT_GATHERED)


def options_of(scope):
    """The names of the options of one scope, in the table's order."""
    if scope not in SCOPES:
        raise ValueError("scope %r is not one of %s" % (scope, ", ".join(SCOPES)))
    return tuple(name for name, option in OPTIONS.items() if option.scope == scope)


def kind_of(name):
    """What the converter makes of an option: bool, int, str, list or dict; raw for an option it does not know."""
    option = OPTIONS.get(name)
    if option is None:
        return "raw"
    if option.parsed:
        return option.parsed
    return "str" if option.type == "path" else option.type


# A whole number as YAML, -e or an AWX survey give it: 30, " 30 ", and a float survey's 30.0. Matched
# whole (fullmatch) and over ASCII alone ([0-9]: never \d, which takes '٥' and '５').
_WHOLE_NUMBER = re.compile(r" *[+-]?[0-9]+(?:\.0*)? *")


def whole_number(value):
    """An int from a whole number as YAML, -e or an AWX survey give it (5, "5", 30.0, "30.0"); ValueError
    for anything else: 30.5, "5\\n", "²", "٥", "５", a boolean."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value):
        return int(value.strip(" ").split(".")[0])
    raise ValueError(value)


def _parsed(value, kind):
    """A dict or list given as JSON or YAML text (-e 'x={...}', an AWX textarea survey) parsed; a blank
    string is empty."""
    if isinstance(value, str) and yaml is not None:
        text = value.strip()
        if not text:
            return {} if kind == "dict" else []
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            return value
    return value


_KIND_NAMES = {"bool": "boolean", "int": "whole number", "dict": "mapping", "list": "list"}


def convert_option(name, value):
    """(value in its declared type, problem or None). A null stays null, but for a list or a mapping,
    where it is empty as a blank string is."""
    kind = kind_of(name)
    if value is None and kind not in ("dict", "list"):
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
            return wanted(parsed), None
    except (TypeError, ValueError):
        return value, "%s = %r is not a %s" % (name, value, _KIND_NAMES.get(kind, kind))
    return value, None


def convert_options(raw):
    """({option: value}, [problem]) for one tray's options."""
    options, problems = {}, []
    for name, value in dict(raw).items():
        options[name], problem = convert_option(name, value)
        if problem:
            problems.append(problem)
    return options, problems
