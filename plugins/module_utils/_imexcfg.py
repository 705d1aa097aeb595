# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""/etc/nvidia-imex/config.cfg: parse, edit in place, validate keys.

The file is a vendor conffile of ``KEY=value`` lines with long '#' comment blocks. Edits touch
only the lines of the keys being managed, so comments, blank lines, order, unknown keys and
commented-out ``#KEY=`` examples survive byte for byte.
"""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.rackscale.imex.plugins.module_utils._text import ProblemsError

_KEY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# An active setting line. Leading/trailing blanks around the key are tolerated when reading; the
# daemon's own handling of them is UNKNOWN, so lines we manage are rewritten as plain KEY=value.
_SETTING_LINE = re.compile(r"^[ \t]*(?P<key>[A-Za-z_][A-Za-z0-9_]*)[ \t]*=(?P<value>.*)$")
_INTEGER = re.compile(r"^-?[0-9]+$")
_IFNAME = re.compile(r"^[^\s/:]{1,15}$")
MAX_PATH_LENGTH = 256
# The daemon's config file, as the nvidia-imex package installs it.
CONFIG_PATH = "/etc/nvidia-imex/config.cfg"
# Who owns config.cfg and its mode, as the nvidia-imex package ships it: the daemon runs as root and
# trusts the file (it names the TLS key, the log file and the node list), so these are enforced.
CONFIG_OWNER = "root"
CONFIG_GROUP = "root"
CONFIG_MODE = "0644"


class ConfigError(ProblemsError):
    """A setting is invalid; the message names the key and the value.

    ``problems`` holds one message per bad setting; str() joins them with '; '.
    """


class _Spec(object):
    __slots__ = ("kind", "minimum", "maximum", "choices", "allow_empty")

    def __init__(self, kind, minimum=None, maximum=None, choices=None, allow_empty=True):
        self.kind = kind
        self.minimum = minimum
        self.maximum = maximum
        self.choices = choices
        self.allow_empty = allow_empty


def _flag():
    return _Spec("flag")


def _int(minimum, maximum=None):
    return _Spec("int", minimum=minimum, maximum=maximum)


def _port():
    return _Spec("int", minimum=1, maximum=65535)


def _enum(*choices):
    return _Spec("enum", choices=choices)


def _path(allow_empty=True):
    return _Spec("path", allow_empty=allow_empty)


def _ip():
    return _Spec("ip")


def _text():
    return _Spec("text")


# Keys documented in the stock config.cfg and the IMEX guide (reference section 1.1).
KNOWN_KEYS = {
    "LOG_LEVEL": _int(0, 4),
    "LOG_FILE_NAME": _path(),               # empty: log to stderr
    "STATS_FILE_NAME": _path(),
    "LOG_APPEND_TO_LOG": _flag(),
    "LOG_FILE_MAX_SIZE": _int(0),           # MB; "Any Integer values", negative sizes make no sense
    "LOG_MAX_ROTATE_COUNT": _int(0),        # 0 = no rotation
    "LOG_USE_SYSLOG": _flag(),
    "DAEMONIZE": _flag(),
    "BIND_INTERFACE_IP": _ip(),             # empty: pick the local entry of the node list
    "SERVER_PORT": _port(),
    "IMEX_NODE_CONFIG_FILE": _path(allow_empty=False),
    "NETWORK_INTERFACE": _Spec("ifname"),
    # FULL only appears in daemon log text (legacy); accepted so existing setups can be kept.
    "IMEX_WAIT_FOR_QUORUM": _enum("NONE", "RECOVERY", "FULL"),
    "IMEX_ENABLE_AUTH_ENCRYPTION": _flag(),
    "IMEX_AUTH_ENCRYPTION_MODE": _enum("SSL_TLS", "GSS_AUTH_ENCRYPT", "GSS_AUTH_ONLY"),
    "IMEX_AUTH_SOURCE": _enum("", "FILE", "ENV_PATH", "ENV_VAL"),
    # Interpreted per IMEX_AUTH_SOURCE: file paths or environment variable names.
    "IMEX_SERVER_KEY": _text(),
    "IMEX_SERVER_CERT": _text(),
    "IMEX_SERVER_CERT_AUTH": _text(),
    "IMEX_CLIENT_KEY": _text(),
    "IMEX_CLIENT_CERT": _text(),
    "IMEX_CLIENT_CERT_AUTH": _text(),
    "IMEX_SECURITY_TARGET_OVERRIDE": _text(),
    "IMEX_GSS_SERVICE_NAME": _text(),
    "IMEX_GSS_TIMEOUT_SEC": _int(-1),                  # -1: retry forever
    "IMEX_GSS_RETRY_INTERVAL_SEC": _int(0),
    "IMEX_GSS_SEC_CONTEXT_LIFETIME_SEC": _int(-1),     # -1: credential lifetime
    "IMEX_GSS_SHUTDOWN_ON_FAILURE": _flag(),
    "IMEX_CMD_ENABLED": _flag(),
    "IMEX_CMD_BIND_INTERFACE_IP": _ip(),    # empty: all interfaces
    "IMEX_CMD_PORT": _port(),
    "IMEX_CMD_UNIX_DOMAIN_PATH": _path(),
    "IMEX_NODE_DISCONNECTED_GRACE_TIME": _int(-1),     # -1: never clean up, 0: immediately
}


def _describe(spec):
    if spec.kind == "flag":
        return "0 or 1"
    if spec.kind == "int":
        if spec.maximum is None:
            return "an integer >= %d" % spec.minimum
        return "an integer from %d to %d" % (spec.minimum, spec.maximum)
    if spec.kind == "enum":
        return "one of %s" % ", ".join(repr(choice) for choice in spec.choices)
    if spec.kind == "path":
        return "an absolute path of at most %d characters%s" % (
            MAX_PATH_LENGTH, " or empty" if spec.allow_empty else "")
    if spec.kind == "ip":
        return "an IPv4/IPv6 address or empty"
    if spec.kind == "ifname":
        return "a network interface name (1-15 characters, no '/', ':' or blanks) or empty"
    return "a single-line string"


def _to_text(key, value):
    """Settings arrive from YAML as str, int or bool; anything else is refused."""
    if isinstance(value, bool):
        spec = KNOWN_KEYS.get(key)
        if spec is not None and spec.kind == "flag":
            return "1" if value else "0"
        raise ConfigError("%s: value %r is a boolean, which only the 0/1 flag keys accept" % (key, value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    raise ConfigError("%s: value %r is a %s (use a string or an integer)" % (key, value, type(value).__name__))


def normalize_setting(key, value, allow_unknown=False):
    """Return ``value`` as the exact text to write after ``KEY=``, or raise :class:`ConfigError`."""
    if not isinstance(key, str) or not _KEY_NAME.match(key):
        raise ConfigError("%r is not a valid config.cfg key (letters, digits and '_', not starting with a digit)" % (key,))
    text = _to_text(key, value)
    if "\n" in text or "\r" in text:
        raise ConfigError("%s: value %r contains a line break (config.cfg values are single lines)" % (key, text))
    if text != text.strip():
        raise ConfigError("%s: value %r has leading or trailing blanks (how the daemon treats them is unknown)" % (key, text))
    if "#" in text:
        # Whether the daemon reads '#' after a value as a comment is UNKNOWN; refuse the ambiguity.
        raise ConfigError("%s: value %r contains '#', which the daemon may read as the start of a comment" % (key, text))
    spec = KNOWN_KEYS.get(key)
    if spec is None:
        if allow_unknown:
            return text
        hint = ""
        for known in KNOWN_KEYS:
            if known.lower() == key.lower():
                hint = " (did you mean %s? keys are case-sensitive)" % known
                break
        raise ConfigError("%s: unknown config.cfg key (value %r)%s, set allow_unknown to write it anyway"
                          % (key, text, hint))
    return _check(key, text, spec)


def _check(key, text, spec):
    problem = "%s: value %r is not %s" % (key, text, _describe(spec))
    if spec.kind == "flag":
        if text not in ("0", "1"):
            raise ConfigError(problem)
        return text
    if spec.kind == "int":
        if not _INTEGER.match(text):
            raise ConfigError(problem)
        number = int(text)
        if number < spec.minimum or (spec.maximum is not None and number > spec.maximum):
            raise ConfigError(problem)
        return str(number)  # canonical form: '050000' and '50000' are the same setting
    if spec.kind == "enum":
        if text not in spec.choices:
            raise ConfigError(problem)
        return text
    if spec.kind == "path":
        if text == "":
            if spec.allow_empty:
                return text
            raise ConfigError(problem)
        if not text.startswith("/") or len(text) > MAX_PATH_LENGTH:
            raise ConfigError(problem)
        return text
    if spec.kind == "ip":
        if text == "":
            return text
        try:
            ipaddress.ip_address(text)
        except ValueError:
            raise ConfigError(problem) from None
        return text
    if spec.kind == "ifname":
        if text == "" or _IFNAME.match(text):
            return text
        raise ConfigError(problem)
    return text


def validate_settings(settings, allow_unknown=False):
    """Normalize a {key: value-or-None} dict; None (remove the key) passes through.

    Raises one :class:`ConfigError` listing every bad setting.
    """
    normalized = {}
    problems = []
    for key, value in settings.items():
        if value is None:
            if not isinstance(key, str) or not _KEY_NAME.match(key):
                problems.append("%r is not a valid config.cfg key" % (key,))
            else:
                normalized[key] = None
            continue
        try:
            normalized[key] = normalize_setting(key, value, allow_unknown=allow_unknown)
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError(problems)
    return normalized


def _split_eol(line):
    for eol in ("\r\n", "\n"):
        if line.endswith(eol):
            return line[:-len(eol)], eol
    return line, ""


class ConfigFile(object):
    """An editable config.cfg that renders back byte-identical where nothing was changed."""

    def __init__(self, text=""):
        parts = text.split("\n")
        self.lines = [part + "\n" for part in parts[:-1]]
        if parts[-1]:
            self.lines.append(parts[-1])

    @staticmethod
    def _parse(line):
        body, _eol = _split_eol(line)
        match = _SETTING_LINE.match(body)
        if not match:
            return None, None
        return match.group("key"), match.group("value")

    def items(self):
        """(line number, key, value) for every active setting, in file order."""
        found = []
        for number, line in enumerate(self.lines, start=1):
            key, value = self._parse(line)
            if key is not None:
                found.append((number, key, value.strip()))
        return found

    def get(self, key):
        """Value of ``key`` or None when absent. With duplicate lines the last one is returned."""
        value = None
        for _number, found, found_value in self.items():
            if found == key:
                value = found_value
        return value

    def _eol(self):
        for line in reversed(self.lines):
            _body, eol = _split_eol(line)
            if eol:
                return eol
        return "\n"

    def set(self, key, value):
        """Set ``key`` to ``value`` (text); None removes every active line of the key.

        Returns True when the content changed. Every active occurrence is rewritten: which of
        duplicate lines the daemon honours is UNKNOWN, so after an edit they all agree.
        """
        if value is None:
            return self._remove(key)
        wanted = "%s=%s" % (key, value)
        changed = False
        present = False
        for position, line in enumerate(self.lines):
            found, _value = self._parse(line)
            if found != key:
                continue
            present = True
            body, eol = _split_eol(line)
            if body != wanted:
                self.lines[position] = wanted + (eol or "")
                changed = True
        if not present:
            eol = self._eol()
            if self.lines and not _split_eol(self.lines[-1])[1]:
                self.lines[-1] += eol
            self.lines.append(wanted + eol)
            changed = True
        return changed

    def _remove(self, key):
        kept = [line for line in self.lines if self._parse(line)[0] != key]
        changed = len(kept) != len(self.lines)
        self.lines = kept
        return changed

    def render(self):
        return "".join(self.lines)


def apply_settings(text, settings):
    """Apply normalized ``settings`` to config text; return (new_text, {key: effective value})."""
    config = ConfigFile(text)
    for key, value in settings.items():
        config.set(key, value)
    effective = dict((key, config.get(key)) for key in settings)
    return config.render(), effective
