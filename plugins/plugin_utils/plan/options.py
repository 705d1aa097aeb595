# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""The boundary: each option's value as the role received it, converted once to its declared type, and the
options that must hold one value on every tray of the run."""
from __future__ import annotations

import json

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.rackscale.imex.plugins.plugin_utils._options import whole_number

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
