# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""IMEX channels: /proc/devices, /proc/driver/nvidia/params, modprobe.d and the channel device nodes.

A channel is the character device ``<device_dir>/channel<N>`` with the dynamic major of
``nvidia-caps-imex-channels`` (it differs per node) and minor N. The driver creates channel0
(mode 0666) at module load only when ``options nvidia NVreg_CreateImexChannel0=1`` is visible to
modprobe; every other channel, and channel0 without that option, must be created with mknod.
"""

from __future__ import annotations

import os
import shlex
import stat

from ansible_collections.rackscale.imex.plugins.module_utils._files import (
    FileOpError,
    ensure_directory,
    group_label,
    lstat_or_none,
    parse_mode,
    read_text,
    remove_file,
    replace_file,
    resolve_gid,
    resolve_uid,
    user_label,
)

IMEX_CHANNELS_DEVICE_NAME = "nvidia-caps-imex-channels"
CREATE_CHANNEL0_PARAM = "NVreg_CreateImexChannel0"
NVIDIA_MODULE = "nvidia"
DEFAULT_CHANNEL_COUNT = 2048
# The collection's own drop-in for the channel0 option.
MODPROBE_PATH = "/etc/modprobe.d/nvidia-imex.conf"
# Where the driver and modprobe keep what the module reads and writes.
MODPROBE_DIR = "/etc/modprobe.d"
# Every directory modprobe reads, highest precedence first (modprobe.d(5)): a file name in an earlier
# directory hides the file of that name in the later ones; the files left are applied in name order.
MODPROBE_DIRS = (MODPROBE_DIR, "/run/modprobe.d", "/usr/local/lib/modprobe.d", "/usr/lib/modprobe.d",
                 "/lib/modprobe.d")
# The kernel command line: modprobe adds its nvidia.<param>=<value> words to every load of the module,
# after the options of modprobe.d, so such a word wins over every file.
PROC_CMDLINE = "/proc/cmdline"
PROC_DEVICES = "/proc/devices"
PARAMS_PATH = "/proc/driver/nvidia/params"
DEVICE_DIR = "/dev/nvidia-caps-imex-channels"
# One file per isolation channel to make again at boot (the boot unit of the imex_channels role).
BOOT_DIR = "/etc/rackscale-imex/channels.d"
# The path options of ensure_channel and where they point on a tray: imex_channel offers them as
# options, imex_tray_info predicts with them.
PATH_DEFAULTS = {
    "modprobe_path": MODPROBE_PATH,
    "proc_cmdline": PROC_CMDLINE,
    "proc_devices": PROC_DEVICES,
    "params_path": PARAMS_PATH,
    "device_dir": DEVICE_DIR,
    "boot_dir": BOOT_DIR,
}
# NVreg_ImexChannelCount is limited to 20 bits, like the minor number of a dev_t.
MAX_CHANNEL = (1 << 20) - 1
DROPIN_OPTION_LINE = "options %s %s=1" % (NVIDIA_MODULE, CREATE_CHANNEL0_PARAM)
DROPIN_CONTENT = (
    "# Managed by rackscale.imex (imex_channel): the nvidia module creates IMEX channel0 when it loads.\n"
    + DROPIN_OPTION_LINE + "\n"
)


class ChannelError(Exception):
    """A channel cannot be managed as requested; the message names the file or value at fault."""


# ---------------------------------------------------------------------------------------------
# /proc/devices and /proc/driver/nvidia/params


def imex_channel_major(proc_devices_text):
    """Major number of ``nvidia-caps-imex-channels`` from /proc/devices content, or None.

    Only the ``Character devices:`` section counts and the name must match exactly (as the DRA
    driver and Slurm do), so a block device or a longer name with the same prefix never matches.
    """
    in_character_section = False
    for line in proc_devices_text.splitlines():
        stripped = line.strip()
        if stripped.endswith(":") and not stripped[:1].isdigit():
            in_character_section = stripped == "Character devices:"
            continue
        if not in_character_section:
            continue
        fields = stripped.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1] == IMEX_CHANNELS_DEVICE_NAME:
            return int(fields[0])
    return None


def parse_nvidia_params(text):
    """``Name: value`` pairs of /proc/driver/nvidia/params as a dict of strings."""
    params = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip():
            params[name.strip()] = value.strip()
    return params


def imex_channel_count(params_text):
    """Channel count from params content (``ImexChannelCount: N``); 2048 when absent.

    The params file only lists ImexChannelCount on drivers that know the option (INFERRED from
    gVisor parsing it there); 2048 is the driver's documented default.
    """
    if params_text is None:
        return DEFAULT_CHANNEL_COUNT
    value = parse_nvidia_params(params_text).get("ImexChannelCount")
    if value is None:
        return DEFAULT_CHANNEL_COUNT
    try:
        return int(value, 0)
    except ValueError:
        return DEFAULT_CHANNEL_COUNT


# Where a tray shows the loaded driver's NVreg_ImexChannelCount: its params file, else sysfs.
SYSFS_CHANNEL_COUNT = "/sys/module/nvidia/parameters/NVreg_ImexChannelCount"
CHANNEL_COUNT_PATHS = (PARAMS_PATH, SYSFS_CHANNEL_COUNT)


def driver_channel_count(path, text):
    """NVreg_ImexChannelCount of the loaded driver as ``path`` shows it, or None when it does not.

    A params file ("ImexChannelCount: N", absent from drivers without the option) or a sysfs
    parameter file (the bare number). Unlike imex_channel_count, no default: an unknown count is
    told as unknown.
    """
    if text is None:
        return None
    if os.path.basename(path) == "NVreg_ImexChannelCount":
        value = text.strip()
    else:
        value = parse_nvidia_params(text).get("ImexChannelCount")
    try:
        return int(value, 0) if value is not None else None
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# modprobe.d


class ModprobeSetting(object):
    """One ``NVreg_CreateImexChannel0=<value>`` found in a modprobe.d file."""

    __slots__ = ("path", "line", "value")

    def __init__(self, path, line, value):
        self.path = path
        self.line = line
        self.value = value

    def as_tuple(self):
        return (self.path, self.line, self.value)

    def __repr__(self):
        return "%s:%d: %s=%s" % (self.path, self.line, CREATE_CHANNEL0_PARAM, self.value)


def _tokens(line):
    try:
        return shlex.split(line, posix=True)
    except ValueError:
        # Unbalanced quotes: modprobe would still read the plain words, so do the same.
        return line.split()


def option_values(text, param=CREATE_CHANNEL0_PARAM, module=NVIDIA_MODULE):
    """(line number, value) for every ``options <module> ... <param>=<value>`` in modprobe.d text.

    Several parameters may share one line; only whole-line '#' comments exist in modprobe.d.
    """
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        words = _tokens(stripped)
        if len(words) < 3 or words[0] != "options":
            continue
        # modprobe treats '-' and '_' in module names as the same character.
        if words[1].replace("-", "_") != module.replace("-", "_"):
            continue
        for word in words[2:]:
            name, sep, value = word.partition("=")
            if sep and name == param:
                found.append((number, value))
    return found


def _normalize_value(value):
    try:
        return str(int(value, 0))
    except ValueError:
        return value


def _read_setting_file(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError as exc:
        raise ChannelError("cannot read %s: %s" % (path, exc.strerror or exc)) from exc


def effective_modprobe_files(directories):
    """The *.conf files modprobe applies, in the order it applies them (modprobe.d(5)).

    ``directories`` are given highest precedence first: a name already found in an earlier directory
    hides the file of that name in the later ones, whatever it is (a link to /dev/null masks a vendor
    file). The files left are applied sorted by name, whichever directory holds them. modprobe only
    reads names ending in .conf, so backups such as nvidia.conf.dpkg-old cannot conflict.
    """
    chosen = {}
    for directory in directories:
        if not os.path.isdir(directory):
            continue
        try:
            names = os.listdir(directory)
        except OSError as exc:
            raise ChannelError("cannot list %s: %s" % (directory, exc.strerror or exc)) from exc
        for name in names:
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = os.path.join(directory, name)
    return [chosen[name] for name in sorted(chosen)]


def scan_modprobe_dir(directory, exclude=None):
    """Every CreateImexChannel0 setting in ``directory``/*.conf, sorted like modprobe reads them."""
    return scan_modprobe_dirs([directory], exclude=exclude)


def scan_modprobe_dirs(directories, exclude=None):
    """Every CreateImexChannel0 setting of the files modprobe applies from ``directories``
    (highest precedence first), in the order it applies them. ``exclude`` is our own drop-in."""
    excluded = os.path.realpath(exclude) if exclude else None
    settings = []
    for path in effective_modprobe_files(directories):
        if excluded and os.path.realpath(path) == excluded:
            continue
        if not os.path.isfile(path):
            continue
        for number, value in option_values(_read_setting_file(path)):
            settings.append(ModprobeSetting(path, number, value))
    return settings


def cmdline_values(text, param=CREATE_CHANNEL0_PARAM, module=NVIDIA_MODULE):
    """Every value the kernel command line gives ``<module>.<param>`` (double quotes as the kernel
    reads them; '-' and '_' alike in the module name, as modprobe takes them)."""
    found = []
    for word in _tokens((text or "").strip()):
        name, sep, value = word.partition("=")
        owner, dot, parameter = name.partition(".")
        if sep and dot and parameter == param and owner.replace("-", "_") == module.replace("-", "_"):
            found.append(value)
    return found


def scan_cmdline(path):
    """The CreateImexChannel0 settings of the kernel command line at ``path`` (none when unreadable:
    a container or chroot without /proc)."""
    try:
        text = read_text(path)
    except FileOpError:
        return []
    return [ModprobeSetting(path, 1, value) for value in cmdline_values(text)]


def conflicting_settings(settings, wanted):
    """Settings whose value differs from ``wanted`` ('1' or '0'), as (file, line, value) tuples."""
    wanted = _normalize_value(wanted)
    return [setting.as_tuple() for setting in settings if _normalize_value(setting.value) != wanted]


def foreign_dropin_lines(text):
    """(line number, line) of everything in a drop-in that is not a comment, blank or our option.

    Our drop-in must hold nothing else: replacing or removing it would otherwise destroy other
    module options.
    """
    foreign = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if " ".join(stripped.split()) == DROPIN_OPTION_LINE:
            continue
        foreign.append((number, stripped))
    return foreign


# ---------------------------------------------------------------------------------------------
# device nodes


class NodeState(object):
    """What is at a channel path: kind ('absent', 'char', 'file', 'symlink', 'directory', 'other')."""

    __slots__ = ("kind", "major", "minor", "uid", "gid", "mode")

    def __init__(self, kind, major=None, minor=None, uid=None, gid=None, mode=None):
        self.kind = kind
        self.major = major
        self.minor = minor
        self.uid = uid
        self.gid = gid
        self.mode = mode

    @classmethod
    def from_path(cls, path):
        st = lstat_or_none(path)
        if st is None:
            return cls("absent")
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISCHR(st.st_mode):
            return cls("char", os.major(st.st_rdev), os.minor(st.st_rdev), st.st_uid, st.st_gid, mode)
        if stat.S_ISLNK(st.st_mode):
            kind = "symlink"
        elif stat.S_ISDIR(st.st_mode):
            kind = "directory"
        elif stat.S_ISREG(st.st_mode):
            kind = "file"
        else:
            kind = "other"
        return cls(kind, uid=st.st_uid, gid=st.st_gid, mode=mode)

    @property
    def exists(self):
        return self.kind != "absent"

    def describe(self):
        """Multi-line text for diffs: one attribute per line so a diff shows exactly what moved."""
        if self.kind == "absent":
            return "absent\n"
        if self.kind != "char":
            return "type: %s (not a character device)\n" % self.kind
        return ("type: character device\nmajor: %d\nminor: %d\nowner: %s\ngroup: %s\nmode: %04o\n"
                % (self.major, self.minor, user_label(self.uid), group_label(self.gid), self.mode))


class DevicePlan(object):
    """What to do at one channel path to reach the wanted node (or its absence)."""

    def __init__(self, path, before, after, recreate=False, create=False, remove=False,
                 set_owner=False, set_mode=False):
        self.path = path
        self.before = before
        self.after = after
        self.recreate = recreate
        self.create = create
        self.remove = remove
        self.set_owner = set_owner
        self.set_mode = set_mode

    @property
    def changed(self):
        return self.create or self.recreate or self.remove or self.set_owner or self.set_mode

    def diff(self):
        return {
            "before_header": "%s (device node)" % self.path,
            "after_header": "%s (device node)" % self.path,
            "before": self.before.describe(),
            "after": self.after.describe(),
        }


def plan_device(path, major, minor, uid, gid, mode):
    """Plan for a char device ``major:minor`` at ``path`` owned by uid:gid with ``mode``."""
    before = NodeState.from_path(path)
    after = NodeState("char", major, minor, uid, gid, mode)
    if before.kind == "directory":
        raise ChannelError("%s is a directory, not a channel device; remove it by hand" % path)
    if before.kind == "absent":
        return DevicePlan(path, before, after, create=True)
    if before.kind != "char" or before.major != major or before.minor != minor:
        # A node with the wrong type or numbers grants access to the wrong channel (or nothing):
        # replace it rather than trying to repair it.
        return DevicePlan(path, before, after, recreate=True)
    return DevicePlan(path, before, after,
                      set_owner=(before.uid != uid or before.gid != gid),
                      set_mode=(before.mode != mode))


def plan_device_absent(path):
    before = NodeState.from_path(path)
    if before.kind == "directory":
        raise ChannelError("%s is a directory, not a channel device; remove it by hand" % path)
    return DevicePlan(path, before, NodeState("absent"), remove=before.exists)


def apply_device_plan(plan):
    """Carry out a :class:`DevicePlan` (never called in check mode)."""
    path = plan.path
    wanted = plan.after
    step = "inspect"
    try:
        if plan.remove or plan.recreate:
            step = "remove the old node at"
            os.unlink(path)
        if plan.create or plan.recreate:
            step = "create character device %d:%d at" % (wanted.major, wanted.minor)
            # mknod honours the umask; the exact mode is set with chmod right after.
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(wanted.major, wanted.minor))
        if wanted.kind == "char" and (plan.create or plan.recreate or plan.set_owner):
            step = "set owner %s, group %s of" % (user_label(wanted.uid), group_label(wanted.gid))
            os.chown(path, wanted.uid, wanted.gid)
        if wanted.kind == "char" and (plan.create or plan.recreate or plan.set_mode):
            step = "set mode %04o of" % wanted.mode
            os.chmod(path, wanted.mode)
    except OSError as exc:
        raise FileOpError("cannot %s %s: %s" % (step, path, exc.strerror or exc)) from exc


# ---------------------------------------------------------------------------------------------
# the whole channel: validate and plan everything first, then change things


def _persistent_conflict_message(conflicts, wanted, proc_cmdline=PROC_CMDLINE):
    in_files = ["%s line %d sets %s=%s" % (path, line, CREATE_CHANNEL0_PARAM, value)
                for path, line, value in conflicts if path != proc_cmdline]
    on_cmdline = ["%s sets %s.%s=%s" % (path, NVIDIA_MODULE, CREATE_CHANNEL0_PARAM, value)
                  for path, _line, value in conflicts if path == proc_cmdline]
    sources, why = [], []
    if in_files:
        sources.append("modprobe.d")
        why.append("modprobe applies its files in name order across its directories (a name in an earlier "
                   "directory hides the later ones), so the result at boot would depend on file names; remove "
                   "or fix those lines")
    if on_cmdline:
        sources.append("the kernel command line")
        why.append("The kernel command line is applied after every modprobe.d file and wins; remove the "
                   "parameter from the boot loader's configuration and reboot")
    return ("%s conflicts with the wanted %s=%s: %s. %s"
            % (" and ".join(sources), CREATE_CHANNEL0_PARAM, wanted, "; ".join(in_files + on_cmdline), "; ".join(why)))


def _plan_dropin(state, modprobe_path, modprobe_dirs, proc_cmdline):
    """Validate our drop-in, every modprobe.d directory and the kernel command line for a persistent channel0."""
    existing = read_text(modprobe_path)
    if existing is not None:
        foreign = foreign_dropin_lines(existing)
        if foreign:
            number, line = foreign[0]
            raise ChannelError(
                "%s holds other settings (line %d: %r); modprobe_path must name a file dedicated to "
                "the %s line so that replacing or removing it cannot drop other options"
                % (modprobe_path, number, line, CREATE_CHANNEL0_PARAM))
    wanted = "1" if state == "present" else "0"
    settings = scan_modprobe_dirs(modprobe_dirs, exclude=modprobe_path) + scan_cmdline(proc_cmdline)
    conflicts = conflicting_settings(settings, wanted)
    if conflicts:
        raise ChannelError(_persistent_conflict_message(conflicts, wanted, proc_cmdline))


def _read_major(proc_devices):
    try:
        text = read_text(proc_devices)
    except FileOpError as exc:
        raise ChannelError(str(exc)) from exc
    major = imex_channel_major(text) if text is not None else None
    if major is None:
        raise ChannelError(
            "%s has no '%s' entry in its Character devices section: the nvidia driver is not loaded, "
            "is too old for IMEX channels (R550 or newer is needed), or was loaded with "
            "NVreg_ImexChannelCount=0. Load the driver first, or use immediate=false to only "
            "prepare the boot-time setting" % (proc_devices, IMEX_CHANNELS_DEVICE_NAME))
    return major


# The initramfs tools, in order of preference: Debian/Ubuntu's own interface first (it wraps dracut
# where dracut is the generator), then dracut (RHEL family, SUSE, Azure Linux). All kernels are
# rebuilt, so the option also applies when the tray boots a newer kernel installed meanwhile.
INITRAMFS_TOOLS = (
    ("update-initramfs", ["-u", "-k", "all"]),
    ("dracut", ["--force", "--regenerate-all"]),
)


def initramfs_rebuild_command(module):
    """argv that rebuilds the tray's initramfs, or None when no known tool is installed."""
    for tool, args in INITRAMFS_TOOLS:
        path = module.get_bin_path(tool, opt_dirs=["/usr/sbin", "/sbin"])
        if path:
            return [path] + args
    return None


def channel_options(channel, persistent=None, mode=None):
    """(persistent, mode) of a channel with the module's defaults filled in: channel0 persistent and
    0666 as the driver makes it, any other channel not persistent and 0600."""
    if persistent is None:
        persistent = channel == 0
    if mode is None:
        mode = "0666" if channel == 0 else "0600"
    return persistent, mode


class _Predicting(object):
    """The module as ensure_channel sees it while predicting: in check mode, warnings kept aside."""

    check_mode = True

    def __init__(self, module):
        self._module = module
        self.warnings = []

    def warn(self, message):
        self.warnings.append(message)

    def __getattr__(self, name):
        return getattr(self._module, name)


def predict_channels(module, entries, **paths):
    """Whether ensure_channel would change each entry, from running it in check mode here.

    entries: dicts with channel and optionally state, persistent, immediate, owner, group, mode
    (the imex_channel options); paths: the path options common to all entries. Returns
    {"<channel>": {"changed": bool}} or {"<channel>": {"error": message}} per entry, so that a
    caller can run the module only where it would do something (or fail, saying why).
    """
    predicted = {}
    for entry in entries:
        channel = int(entry["channel"])
        persistent, mode = channel_options(channel, entry.get("persistent"), entry.get("mode"))
        try:
            result = ensure_channel(_Predicting(module), channel=channel, state=entry.get("state") or "present",
                                    persistent=persistent, immediate=entry.get("immediate", True) is not False,
                                    owner=entry.get("owner") or "root", group=entry.get("group") or "root",
                                    mode=mode, **paths)
            predicted[str(channel)] = {"changed": bool(result["changed"])}
        except (ChannelError, FileOpError) as exc:
            predicted[str(channel)] = {"error": str(exc)}
    return predicted


def boot_entry(channel, owner, group, mode):
    """The line a boot entry file holds: what the boot unit makes the node with."""
    return "%d %s %s %s\n" % (channel, owner, group, mode)


def ensure_channel(module, channel, state, persistent, immediate, owner, group, mode,
                   modprobe_path, proc_devices, params_path, device_dir, boot_dir=BOOT_DIR,
                   modprobe_dirs=MODPROBE_DIRS, proc_cmdline=PROC_CMDLINE):
    """Bring channel ``channel`` to ``state``; returns the module result (diff as a list).

    Nothing is changed until every input has been read and validated. The device node is handled
    before the drop-in: if the node fails, the drop-in is still unchanged and the next run reports
    initramfs_rebuild_needed again instead of losing that signal.
    """
    if channel < 0 or channel > MAX_CHANNEL:
        raise ChannelError("channel %d is outside 0..%d (IMEX channel numbers are 20-bit minors)"
                           % (channel, MAX_CHANNEL))
    uid = resolve_uid(owner)
    gid = resolve_gid(group)
    wanted_mode = parse_mode(mode)
    if uid is None or gid is None or wanted_mode is None:
        raise ChannelError("owner, group and mode of %s must not be empty (got %r, %r, %r)"
                           % (os.path.join(device_dir, "channel%d" % channel), owner, group, mode))
    device = os.path.join(device_dir, "channel%d" % channel)
    result = {
        "changed": False,
        "device": device,
        "major": None,
        "minor": channel,
        "initramfs_rebuild_needed": False,
        "reboot_needed": False,
        "initramfs_rebuild_command": None,
        "diff": [],
    }

    if persistent and channel == 0:
        _plan_dropin(state, modprobe_path, modprobe_dirs, proc_cmdline)

    plan = None
    if immediate and state == "present":
        major = _read_major(proc_devices)
        count = imex_channel_count(read_text(params_path))
        if channel >= count:
            raise ChannelError("channel %d is outside 0..%d: %s sets ImexChannelCount=%d"
                               % (channel, count - 1, params_path, count))
        if os.path.lexists(device_dir) and not os.path.isdir(device_dir):
            raise ChannelError("%s exists but is not a directory" % device_dir)
        plan = plan_device(device, major, channel, uid, gid, wanted_mode)
        result["major"] = major
    elif immediate:
        plan = plan_device_absent(device)

    if plan is not None:
        if state == "present":
            result["changed"] |= ensure_directory(module, device_dir, 0o755, 0, 0)
        if plan.changed and not module.check_mode:
            apply_device_plan(plan)
        result["changed"] |= plan.changed
        result["diff"].append(plan.diff())
        device_exists_after = plan.after.exists
    else:
        device_exists_after = NodeState.from_path(device).exists

    if persistent and channel != 0:
        # The driver makes only channel0 at boot: the boot unit of the imex_channels role makes the
        # others from these entries, one file per channel so that each is written on its own.
        entry = os.path.join(boot_dir, "channel%d" % channel)
        if state == "present":
            result["changed"] |= ensure_directory(module, boot_dir, 0o755, 0, 0)
            outcome = replace_file(module, entry, boot_entry(channel, owner, group, mode), owner=0, group=0,
                                   mode=0o644)
        else:
            outcome = remove_file(module, entry)
        result["diff"].insert(0, outcome["diff"])
        result["changed"] |= outcome["changed"]
    elif persistent:
        if state == "present":
            result["changed"] |= ensure_directory(module, os.path.dirname(modprobe_path), 0o755, 0, 0)
            outcome = replace_file(module, modprobe_path, DROPIN_CONTENT, owner=0, group=0, mode=0o644)
        else:
            outcome = remove_file(module, modprobe_path)
        result["diff"].insert(0, outcome["diff"])
        result["changed"] |= outcome["changed"]
        result["initramfs_rebuild_needed"] = outcome["changed"]
        if outcome["changed"]:
            result["initramfs_rebuild_command"] = initramfs_rebuild_command(module)
            if result["initramfs_rebuild_command"] is None:
                module.warn("%s changed but neither update-initramfs nor dracut is installed: rebuild the "
                            "initramfs by hand so the option applies at boot" % modprobe_path)
        # The boot-time setting only matters now if the node does not already match it: a present
        # channel that does not exist yet, or an absent one that still exists.
        result["reboot_needed"] = outcome["changed"] and device_exists_after != (state == "present")
    return result
