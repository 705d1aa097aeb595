# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Options that contradict each other or could only fail on a tray, found on the controller.

Everything here runs before any tray is contacted, so a refused run has changed nothing. Each
problem is one sentence naming the option (and the tray, group or entry) and the value at fault.
"""
from __future__ import annotations

import json
import os
import re
import unicodedata

from ansible_collections.rackscale.imex.plugins.module_utils._channel import MAX_CHANNEL
from ansible_collections.rackscale.imex.plugins.module_utils._daemon_log import LOG_DIRECTORY, SYSTEM_LOG_NAMES
from ansible_collections.rackscale.imex.plugins.module_utils._nodes import FAMILY_HOSTNAME, classify
from ansible_collections.rackscale.imex.plugins.plugin_utils._option_table import (
    DOMAIN,
    RUN,
    convert_option,
    kind_of,
    options_of,
    whole_number,
)

# Every pattern here is matched whole (fullmatch: '$' would accept a trailing newline) and over ASCII
# alone ([0-9], never \d or str.isdigit, which take '²', '٥' and '５').
# A systemd unit name: systemctl takes it as one argument, and nothing but a unit. No backslash: a
# '\x2d' escape names another unit than the one shown.
_UNIT = re.compile(r"[A-Za-z0-9_.:@-]{1,250}")
_DIGITS = re.compile(r"[0-9]+")
# A Slurm node name as slurm.conf's NodeName and scontrol take it: one word, not an option.
_SLURM_NODE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
# An NVIDIA driver release, with the suffix of a distribution package: 580.95.05, 580.95.09-0ubuntu1.
_DRIVER_VERSION = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+)?(?:[-+~][A-Za-z0-9.+~_-]*)?")
# The largest uid or gid a tray can hold (2^32 - 2; 2^32 - 1 is the "no id" value).
MAX_ID = 4294967294
# Directories the collection never writes into directly, nor makes 0700: a tray path must lie in a
# directory of its own below them (/etc/nvidia-imex/..., /opt/imex/...).
SYSTEM_DIRS = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media", "/mnt",
               "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin",
               "/usr/lib", "/usr/local", "/usr/local/bin", "/usr/sbin", "/usr/share", "/var", "/var/lib",
               "/var/log", "/var/tmp", "/var/run")
_USER_OR_GROUP = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?|[0-9]{1,10})")
_MODE = re.compile(r"0?[0-7]{3}")
_TARGET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:_-]{0,252}")
# A report is written as <domain>.json: the domain group name must be a plain file name.
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# The modes in which this collection owns the channels.
_AUTH_FILE_KEYS = ("IMEX_SERVER_KEY", "IMEX_SERVER_CERT", "IMEX_SERVER_CERT_AUTH",
                   "IMEX_CLIENT_KEY", "IMEX_CLIENT_CERT", "IMEX_CLIENT_CERT_AUTH")
_AUTH_KEYS = ("IMEX_ENABLE_AUTH_ENCRYPTION", "IMEX_AUTH_ENCRYPTION_MODE", "IMEX_AUTH_SOURCE") + _AUTH_FILE_KEYS
# Tray paths the collection writes into config.cfg (or writes to).
PATH_OPTIONS = ("imex_config_path", "imex_nodes_config_path", "imex_unix_socket", "imex_tls_dir")
# Files and directories of other software, on a tray and on the controller: no path option may be one
# of them or lie below one (the collection would overwrite it, make it 0700, or read it back into a
# report). Remote logins, privileges, scheduled jobs, authentication, units, accounts, the kernel's
# views, the boot files, the package databases and the system logs.
OTHER_SOFTWARE_PATHS = (
    "/etc/ssh", "/root/.ssh", "/etc/sudoers", "/etc/sudoers.d", "/etc/crontab", "/etc/cron.d", "/etc/cron.hourly",
    "/etc/cron.daily", "/etc/cron.weekly", "/etc/cron.monthly", "/etc/anacrontab", "/var/spool/cron",
    "/etc/pam.d", "/etc/pam.conf", "/etc/security", "/etc/systemd", "/lib/systemd", "/usr/lib/systemd",
    "/run/systemd", "/etc/init.d", "/etc/passwd", "/etc/passwd-", "/etc/shadow", "/etc/shadow-", "/etc/group",
    "/etc/group-", "/etc/gshadow", "/etc/gshadow-", "/etc/subuid", "/etc/subgid", "/proc", "/sys", "/boot",
    "/dev", "/etc/apt", "/var/lib/apt", "/var/lib/dpkg", "/var/lib/rpm", "/var/lib/dnf", "/var/lib/yum",
    "/etc/yum.repos.d", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.preload", "/etc/profile",
    "/etc/profile.d", "/etc/environment", "/etc/hosts", "/etc/resolv.conf", "/etc/fstab", "/etc/modprobe.d",
    "/etc/sysctl.conf", "/etc/sysctl.d", "/etc/udev",
) + tuple("/var/log/" + name for name in SYSTEM_LOG_NAMES)
# Controller directories the run writes its records into.
CONTROLLER_DIR_OPTIONS = ("imex_report_dir", "imex_textfile_dir")
# Directories that hold a user's or a service's keys wherever they are.
KEY_DIRECTORY_NAMES = (".ssh", ".gnupg")
# The controller's own system trees: a report or gauge directory is never in one (output is not
# configuration nor software), nor one of the SYSTEM_DIRS themselves.
CONTROLLER_SYSTEM_TREES = ("/etc", "/usr", "/boot", "/proc", "/sys", "/dev", "/bin", "/sbin", "/lib", "/lib32",
                           "/lib64")
CONTROLLER_SYSTEM_DIRS = ("/var/cache", "/var/spool", "/var/mail", "/var/opt", "/var/backups", "/var/local",
                          "/snap", "/lost+found")
# The daemon's own log files (config.cfg keys): held under /var/log, where the vendor puts them.
LOG_SETTINGS = ("LOG_FILE_NAME", "STATS_FILE_NAME")
# The TLS files the collection writes under imex_tls_dir: nothing else may lie there.
TLS_DIR_FILES = ("ca.crt", "tray.crt", "tray.key", "reloaded")
# Task files of the operator's, run on the trays of a domain before and after its restart.
HOOK_OPTIONS = ("imex_pre_restart_tasks", "imex_post_restart_tasks")
# Whole-number options and the range each must fall in (seconds unless said).
BOUNDS = {
    "imex_max_nodes": (1, 1024),            # trays per domain
    "imex_lock_wait_s": (0, 86400),
    "imex_lock_stale_after_s": (0, 7 * 86400),
    "imex_validate_timeout_s": (0, 86400),
    "imex_validate_interval_s": (1, 3600),
    "imex_ctl_timeout_s": (1, 3600),
    "imex_allowed_broken_pairs": (0, 1024 * 1024),
    "imex_rolling_batch": (1, 1024),        # domains per wave
    "imex_tls_min_days_left": (0, 3650),    # days
}


def _shown(value):
    return repr(value)


def hostile_character(text):
    """The first character of ``text`` that would split or disguise a line of a tray file or a log:
    controls (C0, DEL, C1 such as NEL), format characters (zero-width, bidi overrides) and every
    Unicode separator but the ASCII space (line, paragraph, no-break and wide spaces); else None."""
    for character in text:
        category = unicodedata.category(character)
        if category in ("Cc", "Cf", "Zl", "Zp") or (category == "Zs" and character != " "):
            return character
    return None


def _control_problem(option, value):
    if isinstance(value, str) and hostile_character(value) is not None:
        return "%s: value %s contains a control character or line separator" % (option, _shown(value))
    return None


def _flag(value):
    return str(value).strip() == "1" or value is True


def settings_problems(settings, tls):
    """Contradictions inside imex_settings and with imex_tls (value rules are imex_config's)."""
    problems = []
    for key, value in sorted(settings.items()):
        problem = _control_problem("imex_settings.%s" % key, value)
        if problem:
            problems.append(problem)
    if "BIND_INTERFACE_IP" in settings:
        problems.append("imex_settings.BIND_INTERFACE_IP = %s: one value for every tray of a domain gives them all "
                        "one address, and every daemon but one would fail to start; each daemon finds its own "
                        "address in the node list, so leave it out" % _shown(settings["BIND_INTERFACE_IP"]))
    if "DAEMONIZE" in settings and str(settings["DAEMONIZE"]).strip() in ("0", "False", "false"):
        problems.append("imex_settings.DAEMONIZE = %s: the nvidia-imex unit is Type=forking, so a daemon that "
                        "does not fork never reports started; remove DAEMONIZE from imex_settings"
                        % _shown(settings["DAEMONIZE"]))
    auth_set = sorted(key for key in _AUTH_KEYS if key in settings)
    if tls and auth_set:
        problems.append("imex_tls is true, which sets the authentication keys itself, but imex_settings also sets "
                        "%s; remove them from imex_settings, or set imex_tls to false" % ", ".join(auth_set))
    elif not tls and _flag(settings.get("IMEX_ENABLE_AUTH_ENCRYPTION")):
        mode = settings.get("IMEX_AUTH_ENCRYPTION_MODE")
        source = settings.get("IMEX_AUTH_SOURCE")
        if not mode:
            problems.append("imex_settings.IMEX_ENABLE_AUTH_ENCRYPTION is 1 but IMEX_AUTH_ENCRYPTION_MODE is not set; "
                            "set it (SSL_TLS, GSS_AUTH_ENCRYPT or GSS_AUTH_ONLY), or use imex_tls for mutual TLS")
        elif mode == "SSL_TLS":
            if not source:
                problems.append("imex_settings.IMEX_AUTH_ENCRYPTION_MODE is SSL_TLS but IMEX_AUTH_SOURCE is not set; "
                                "set it to FILE, ENV_PATH or ENV_VAL, or use imex_tls")
            missing = [key for key in _AUTH_FILE_KEYS if not settings.get(key)]
            if missing:
                problems.append("imex_settings.IMEX_AUTH_ENCRYPTION_MODE is SSL_TLS but %s %s not set; the daemons "
                                "could not authenticate each other, or use imex_tls"
                                % (", ".join(missing), "is" if len(missing) == 1 else "are"))
    return problems


# The keys of an isolation channel entry.
CHANNEL_KEYS = ("channel", "owner", "group", "mode", "state")


def channel_problems(channels, imex_mode):
    """Isolation channel entries: numbers, owners, groups and modes a tray would refuse, duplicates,
    and any entry in a mode whose channels belong to Slurm or the DRA driver."""
    # Imported here: the plan package, whose mode classes say who owns the channels, imports this module.
    from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes  # pylint: disable=import-outside-toplevel
    owner = modes.of(imex_mode).channels_owner
    problems = []
    seen = {}
    for position, entry in enumerate(channels):
        if not isinstance(entry, dict):
            problems.append("imex_channels[%d] = %s is not a mapping with a channel key" % (position, _shown(entry)))
            continue
        label = "imex_channels[%d] (channel %s)" % (position, entry.get("channel", "?"))
        unknown = sorted(str(key) for key in entry if key not in CHANNEL_KEYS)
        if unknown:
            problems.append("%s: unknown key%s %s (an entry takes %s)" % (
                label, "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(CHANNEL_KEYS)))
        if "channel" not in entry:
            problems.append("%s: channel is required" % label)
            continue
        if owner:
            problems.append("%s: the channels belong to %s in imex_mode %s; remove imex_channels"
                            % (label, owner, imex_mode))
            continue
        try:
            number = whole_number(entry.get("channel"))
        except ValueError:
            number = None
        if number is None or not 1 <= number <= MAX_CHANNEL:
            problems.append("%s: channel must be a whole number from 1 to %d (channel0 is imex_channel0; the "
                            "driver's own limit, 2048 by default, is checked on each tray)" % (label, MAX_CHANNEL))
        for key in ("owner", "group"):
            value = entry.get(key)
            if value is not None and not _USER_OR_GROUP.fullmatch(str(value)):
                problems.append("%s: %s %s is not a user or group name, nor a numeric id" % (label, key, _shown(value)))
            elif value is not None and _DIGITS.fullmatch(str(value)) and int(str(value)) > MAX_ID:
                problems.append("%s: %s %s is beyond the largest id a tray can hold (%d)" % (
                    label, key, _shown(value), MAX_ID))
        node_mode = entry.get("mode")
        # An unquoted 0660 is the YAML integer 432: only a quoted string says what was meant.
        if node_mode is not None and not (isinstance(node_mode, str) and _MODE.fullmatch(node_mode)):
            problems.append("%s: mode %s is not an octal mode string such as \"0660\" (quote it in YAML)"
                            % (label, _shown(node_mode)))
        elif node_mode is not None and int(node_mode, 8) & 0o002:
            problems.append("%s: mode %s lets every local user write the channel, which isolates nothing; use "
                            "a group, for example \"0660\"" % (label, _shown(node_mode)))
        state = entry.get("state", "present")
        if state not in ("present", "absent"):
            problems.append("%s: state %s is not present or absent" % (label, _shown(state)))
        # 5, "05" and 5.0 are one channel.
        channel = number if number is not None else repr(entry.get("channel"))
        if channel in seen:
            problems.append("%s repeats imex_channels[%d]: each channel is listed once" % (label, seen[channel]))
        else:
            seen[channel] = position
    return problems


def model_problems(model, cmd_bind_own_address):
    """Domain names that cannot be report files; a command service bound to a host name."""
    problems = []
    for name in sorted(model["domains"]):
        if not _FILE_NAME.fullmatch(name) or name in (".", ".."):
            problems.append("domain group %s: the name cannot be a report file name (%s.json); use letters, digits, "
                            "'_', '-' and '.'" % (_shown(name), name))
        named = [node["host"] for node in model["domains"][name]["nodes"]
                 if classify(node["address"])[0] == FAMILY_HOSTNAME]
        if cmd_bind_own_address and named:
            problems.append("imex_cmd_bind_own_address is true but domain %s uses host names (%s): "
                            "IMEX_CMD_BIND_INTERFACE_IP takes an IP address; set imex_address to the trays' "
                            "IP addresses, or leave imex_cmd_bind_own_address false" % (name, ", ".join(named)))
    return problems


def path_problem(option, path):
    """A tray path the collection writes (or makes 0700): absolute, normalised, no '#' (config.cfg
    reads it as a comment) nor blank, and in a directory of its own, not a system directory itself
    nor a file directly in one (imex_tls_dir=/etc would make /etc 0700; /etc/shadow is not a config)."""
    if path is None:
        return None
    text = str(path)
    rule = ("must be an absolute, normalised path without '#' or blanks, in a directory of its own below the "
            "system directories (for example /etc/nvidia-imex/...)")
    if (not text.startswith("/") or os.path.normpath(text) != text or text.startswith("//") or "#" in text
            or any(character.isspace() for character in text)):
        return "%s = %s %s" % (option, _shown(path), rule)
    if text in SYSTEM_DIRS or os.path.dirname(text) in SYSTEM_DIRS + ("/dev/shm",):
        return ("%s = %s is a system directory or directly in one; it must lie in a directory of its own below "
                "them (for example /etc/nvidia-imex/...)" % (option, _shown(path)))
    return _other_software_problem(option, path, text)


def _under(path, directory):
    """True when ``path`` is ``directory`` or lies below it (both absolute and normalised)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def other_software(path):
    """The file or directory of other software that ``path`` is or lies in, else None."""
    for known in OTHER_SOFTWARE_PATHS:
        if _under(path, known):
            return known
    found = [part for part in path.split("/") if part in KEY_DIRECTORY_NAMES]
    return found[0] if found else None


def _other_software_problem(option, path, text):
    known = other_software(text)
    if known:
        return ("%s = %s is %s of other software (%s): the collection would write or read it back; choose a "
                "path of its own" % (option, _shown(path), "a file or directory" if known == text else "inside one",
                                     known))
    return None


def controller_dir_problem(option, path, cwd=None, resolve=os.path.realpath):
    """A controller directory the run writes its records into (imex_report_dir, imex_textfile_dir).

    Relative paths are the working directory's. Refused: control characters; a system directory of
    the controller (SYSTEM_DIRS, CONTROLLER_SYSTEM_DIRS) or, named absolute, anything in its system
    trees (/etc, /usr, ...); other software's files and directories (OTHER_SOFTWARE_PATHS, any .ssh);
    each as written and with its symbolic links resolved. A collector directory such as
    /var/lib/node_exporter/textfile_collector is the operator's to name."""
    if path is None or path == "":
        return None
    text = str(path)
    problem = _control_problem(option, path)
    if problem:
        return problem
    absolute = os.path.normpath(os.path.join(cwd or os.getcwd(), text))
    for candidate in dict.fromkeys((absolute, resolve(absolute))):
        if candidate in SYSTEM_DIRS + CONTROLLER_SYSTEM_DIRS:
            return ("%s = %s is %s, a system directory of the controller: name a directory of the run's records "
                    "(the default imex-reports, or for example /var/lib/rackscale-imex/reports)"
                    % (option, _shown(path), candidate))
        # A relative path stays allowed in the working directory, wherever ansible-playbook runs (from
        # /etc/ansible, say); it still may not climb to a system directory or into other software's.
        trees = [tree for tree in CONTROLLER_SYSTEM_TREES if _under(candidate, tree)] if text.startswith("/") else []
        if trees:
            return ("%s = %s lies in %s, a system tree of the controller: name a directory of the run's records "
                    "(the default imex-reports, or for example /var/lib/rackscale-imex/reports)"
                    % (option, _shown(path), trees[0]))
        problem = _other_software_problem(option, path, candidate)
        if problem:
            return problem
    return None


def log_setting_problem(key, value):
    """imex_settings LOG_FILE_NAME or STATS_FILE_NAME: empty (the daemon logs to its journal), or a file of
    its own under /var/log, absolute and normalised; never another program's (a failed proof reads the
    log back into the reports)."""
    option = "imex_settings.%s" % key
    text = "" if value is None else str(value)
    # A control character is named once, by settings_problems.
    if not text or hostile_character(text) is not None:
        return None
    if (not text.startswith("/") or os.path.normpath(text) != text or "#" in text
            or any(character.isspace() for character in text) or not text.startswith(LOG_DIRECTORY + "/")):
        return ("%s = %s must be an absolute, normalised path of a file under %s without '#' or blanks (the vendor "
                "default is %s/nvidia-imex.log), or empty for the journal"
                % (option, _shown(value), LOG_DIRECTORY, LOG_DIRECTORY))
    return _other_software_problem(option, value, text)


def tray_path_problems(paths):
    """The tray paths of a run against each other, by rule (no tray is asked): two that are equal or
    nest (a config inside the TLS directory, the node list as the config) and any file under
    imex_tls_dir but the TLS files. ``paths``: {label: absolute path} of the paths that are set."""
    problems = []
    labels = sorted(paths)
    for position, first in enumerate(labels):
        for second in labels[position + 1:]:
            one, other = paths[first], paths[second]
            if one == other:
                problems.append("%s and %s are both %s: each names a file of its own" % (first, second, _shown(one)))
            elif _under(one, other) or _under(other, one):
                outer, inner = (first, second) if _under(other, one) else (second, first)
                if outer == "imex_tls_dir":
                    problems.append("%s = %s lies in imex_tls_dir = %s, which holds the TLS files (%s) alone"
                                    % (inner, _shown(paths[inner]), _shown(paths[outer]), ", ".join(TLS_DIR_FILES)))
                else:
                    problems.append("%s = %s lies in %s = %s: one path cannot be inside another"
                                    % (inner, _shown(paths[inner]), outer, _shown(paths[outer])))
    return problems


def hook_problems(options, is_file):
    """Operator task files run around a domain restart: absolute paths of files on the controller."""
    problems = []
    for option in HOOK_OPTIONS:
        path = options.get(option) or ""
        if not path:
            continue
        if not path.startswith("/"):
            problems.append("%s = %s is not an absolute path on the controller (for example "
                            "\"{{ inventory_dir }}/hooks/drain.yml\")" % (option, _shown(path)))
        elif not is_file(path):
            problems.append("%s = %s is not a file on the controller" % (option, _shown(path)))
    return problems


TLS_FILE_OPTIONS = ("imex_tls_ca", "imex_tls_cert", "imex_tls_key")


def is_pem(value):
    """The TLS options take PEM text (from a vault or an AWX credential) as well as controller paths."""
    return isinstance(value, str) and value.lstrip().startswith("-----BEGIN ")


def tls_file_problems(trays, is_file=os.path.isfile):
    """One sentence per tray with TLS on whose CA, certificate or key is unset, or neither PEM text
    nor a file on the controller. ``trays``: (tray, {option: path or PEM}) of the trays with TLS on.
    Values are not printed."""
    problems = []
    for tray, values in trays:
        missing = [option for option in TLS_FILE_OPTIONS
                   if not (values.get(option) and (is_pem(values[option]) or is_file(values[option])))]
        if missing:
            problems.append("tray %s: imex_tls is true but %s %s unset or not a file on the controller (nor PEM text)"
                            % (tray, ", ".join(missing), "is" if len(missing) == 1 else "are"))
    return problems


# Option checks run on one tray per domain or run: a value set on another tray alone would reach it
# unchecked, so the options of the DOMAIN and RUN scopes must hold one value on their trays (a daemon
# whose peers listen elsewhere, speak TLS when it does not, or lack a channel breaks the domain).


def _compared(name, value):
    """An option's value as trays are compared on it: as convert_option makes it (the same strict
    booleans, whole numbers and parsed text), a mapping's values as the text config.cfg holds."""
    converted, _problem = convert_option(name, value)
    if kind_of(name) == "dict" and isinstance(converted, dict):
        converted = {str(key): None if item is None else str(item) for key, item in converted.items()}
    return json.dumps(converted, sort_keys=True, default=str)


def variance_problems(scope, trays, tray_options, domain_of=None):
    """One sentence per option of ``scope`` (RUN or DOMAIN) whose trays hold different values, naming
    each value and the trays that hold it.

    ``trays``: the trays to compare, in the order they are named. RUN compares them all together;
    DOMAIN compares the trays of each domain with each other only, ``domain_of`` mapping each tray to
    its domain (the model's host_domain; a tray it does not map is not compared). ``tray_options``:
    {tray: {option: value}}, gathered or converted alike: "yes" and true, or "50000" and 50000, are one
    value; a null list or mapping is empty, any other null a value of its own.
    """
    if scope == RUN:
        groups = {None: list(trays)}
    elif scope == DOMAIN:
        if domain_of is None:
            raise ValueError("the DOMAIN scope compares the trays of each domain: give domain_of")
        groups = {}
        for tray in trays:
            if tray in domain_of:
                groups.setdefault(domain_of[tray], []).append(tray)
    else:
        raise ValueError("only the %s and %s scopes hold one value per group of trays, not %r" % (RUN, DOMAIN, scope))
    problems = []
    for group in sorted(groups, key=str):
        for name in sorted(options_of(scope)):
            held = {}
            for tray in groups[group]:
                held.setdefault(_compared(name, (tray_options.get(tray) or {}).get(name)), []).append(tray)
            if len(held) < 2:
                continue
            values = "; ".join("%s on %s" % (shown, ", ".join(held_by)) for shown, held_by in held.items())
            if scope == RUN:
                problems.append("%s differs between the trays of the run (%s); it applies to the whole run: set it "
                                "once, for example in group_vars/imex_domains.yml or with -e" % (name, values))
            else:
                problems.append("domain %s: %s differs between its trays (%s); one domain runs one daemon "
                                "configuration: set it for the whole domain group" % (group, name, values))
    return problems


def is_unit_name(value):
    """One systemd unit, named as systemctl shows it."""
    text = value if isinstance(value, str) else ""
    return bool(_UNIT.fullmatch(text)) and ".." not in text and not text.startswith((".", "-"))


# Options whose whole value is matched by a rule of their own, which says what they take.
NAME_OPTIONS = ("imex_service", "imex_tls_target_override", "imex_slurm_node_name", "imex_driver_version",
                "imex_slurm_probe_partition")


def string_problems(options):
    """Every other string option (but the TLS options, which take PEM text) free of the characters
    that split or disguise a line."""
    problems = []
    for option, value in sorted(options.items()):
        if option not in TLS_FILE_OPTIONS + PATH_OPTIONS + NAME_OPTIONS + CONTROLLER_DIR_OPTIONS:
            problem = _control_problem(option, value)
            if problem:
                problems.append(problem)
    return problems


def option_problems(options, model, is_file=os.path.isfile):
    """Every problem of the role's options (already type-checked by the argument spec)."""
    problems = []
    for option, (low, high) in BOUNDS.items():
        if option in options and not low <= int(options[option]) <= high:
            problems.append("%s = %s is out of range %d..%d" % (option, options[option], low, high))
    path_failed = False
    for option in PATH_OPTIONS:
        problem = _control_problem(option, options.get(option)) or path_problem(option, options.get(option))
        if problem:
            problems.append(problem)
            path_failed = True
    for option in CONTROLLER_DIR_OPTIONS:
        problem = controller_dir_problem(option, options.get(option))
        if problem:
            problems.append(problem)
    if options.get("imex_report_dir", "imex-reports") == "":
        problems.append("imex_report_dir is empty: name the controller directory of the run's records (the default "
                        "is imex-reports)")
    settings = dict(options.get("imex_settings") or {})
    logs = {}
    for key in LOG_SETTINGS:
        problem = log_setting_problem(key, settings.get(key))
        if problem:
            problems.append(problem)
            path_failed = True
        elif settings.get(key):
            logs["imex_settings.%s" % key] = str(settings[key])
    if not path_failed:
        paths = {option: str(options[option]) for option in PATH_OPTIONS if options.get(option)}
        # The stats may share the log's file (the daemon then writes both there).
        if logs.get("imex_settings.LOG_FILE_NAME") == logs.get("imex_settings.STATS_FILE_NAME"):
            logs.pop("imex_settings.STATS_FILE_NAME", None)
        problems.extend(tray_path_problems(dict(paths, **logs)))
    problems.extend(string_problems(options))
    service = options.get("imex_service")
    if service is not None and not is_unit_name(service):
        problems.append("imex_service = %s is not a systemd unit name (letters, digits and ':_.@-', one unit)"
                        % _shown(service))
    override = options.get("imex_tls_target_override") or ""
    if override and not _TARGET_NAME.fullmatch(str(override)):
        problems.append("imex_tls_target_override = %s is not a host name or address (letters, digits, '.', "
                        "'-', ':', '_')" % _shown(override))
    node_name = options.get("imex_slurm_node_name") or ""
    if node_name and not _SLURM_NODE_NAME.fullmatch(str(node_name)):
        problems.append("imex_slurm_node_name = %s is not a Slurm node name (letters, digits, '_', '.', '-', not "
                        "starting with '-' or '.')" % _shown(node_name))
    driver = options.get("imex_driver_version") or ""
    if driver and not _DRIVER_VERSION.fullmatch(str(driver)):
        problems.append("imex_driver_version = %s is not a driver release such as 580.95.05" % _shown(driver))
    problems.extend(settings_problems(dict(options.get("imex_settings") or {}), bool(options.get("imex_tls"))))
    problems.extend(channel_problems(list(options.get("imex_channels") or []), options.get("imex_mode", "static")))
    problems.extend(model_problems(model, bool(options.get("imex_cmd_bind_own_address"))))
    problems.extend(hook_problems(options, is_file))
    return problems
