# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One shared way to replace, remove and inspect the small text files the IMEX modules manage.

Every write goes render -> compare -> (check mode: report only) -> temporary file in the target's
own directory -> owner/group/mode -> ``module.atomic_move`` -> ``module.set_fs_attributes_if_different``
(ansible-core's file common arguments: owner, group, octal or symbolic mode, SELinux context, file
attributes). The target therefore either keeps its old content or has the complete new content; it
is never half written, and never readable or writable beyond its wanted mode, nor is its backup.

Errors are raised as :class:`FileOpError` whose message names the host path, so modules can hand
it to ``fail_json`` unchanged.
"""

from __future__ import annotations

import errno
import glob
import grp
import hashlib
import os
import pwd
import re
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule

_OCTAL_MODE = re.compile(r"^0?[0-7]{3,4}$")
# What module.load_file_common_arguments returns, less the path: the file common arguments.
_NO_FILE_ARGS = dict(owner=None, group=None, mode=None, seuser=None, serole=None, setype=None, selevel=None,
                     secontext=None, attributes=None)


class FileOpError(Exception):
    """A file operation failed or was refused; the message names the path at fault."""


def _os_reason(exc):
    return exc.strerror or str(exc)


def parse_mode(mode):
    """Return an octal ``mode`` ('0644', '644', 0o644) as an int, or None when not given.

    For the modes the collection fixes itself (device nodes, its own files): only octal modes, so
    the result never depends on the current mode. :func:`mode_after` also takes symbolic modes.
    """
    if mode is None:
        return None
    if isinstance(mode, bool):
        raise FileOpError("mode %r is not an octal file mode such as '0644'" % (mode,))
    if isinstance(mode, int):
        if 0 <= mode <= 0o7777:
            return mode
        raise FileOpError("mode %r is outside 0..07777" % (mode,))
    text = str(mode).strip()
    if not _OCTAL_MODE.match(text):
        raise FileOpError("mode %r is not an octal file mode such as '0644'" % (mode,))
    return int(text, 8)


def mode_after(current_mode, mode):
    """The permission bits a file of ``current_mode`` (st_mode) has once ``mode`` is applied.

    ``mode`` is what the file common argument takes: an octal number or string, or a symbolic mode
    such as ``u=rw,g=r,o=`` (applied to the current bits, as chmod and ansible.builtin.file do); None
    keeps the current bits. Raises FileOpError naming the value when it is neither.
    """
    if mode is None:
        return stat.S_IMODE(current_mode)
    if isinstance(mode, str) and not mode.strip():
        raise FileOpError("mode %r is empty: give an octal mode such as '0644' or a symbolic one" % (mode,))
    try:
        return parse_mode(mode)
    except FileOpError:
        if isinstance(mode, (bool, int)):
            raise
    try:
        after = AnsibleModule._symbolic_mode_to_octal(os.stat_result((current_mode,) + (0,) * 9), str(mode))
    except (ValueError, KeyError, IndexError, TypeError):
        after = None
    if after is None or after != stat.S_IMODE(after):
        raise FileOpError("mode %r is neither an octal mode such as '0644' nor a symbolic one such as "
                          "'u=rw,g=r,o=r'" % (mode,))
    return after


def _resolve_id(value, lookup, what):
    """The id for a name or numeric id (``lookup`` maps a name to it), None when not given."""
    if value is None or value == "":
        return None
    text = str(value)
    if text.isdigit():
        return int(text)
    try:
        return lookup(text)
    except KeyError:
        raise FileOpError("%s %r does not exist on this host" % (what, text)) from None


def resolve_uid(owner):
    """Return the uid for a user name or numeric id, None when not given."""
    return _resolve_id(owner, lambda name: pwd.getpwnam(name).pw_uid, "owner")


def resolve_gid(group):
    """Return the gid for a group name or numeric id, None when not given."""
    return _resolve_id(group, lambda name: grp.getgrnam(name).gr_gid, "group")


def user_label(uid):
    """'root (0)' style label for messages and diffs; bare number when the uid has no name."""
    try:
        return "%s (%d)" % (pwd.getpwuid(uid).pw_name, uid)
    except KeyError:
        return str(uid)


def group_label(gid):
    try:
        return "%s (%d)" % (grp.getgrgid(gid).gr_name, gid)
    except KeyError:
        return str(gid)


def _resolve_target(path):
    """Follow a symlink at ``path`` so that the link survives and its target gets the content.

    Operators sometimes point /etc/nvidia-imex/config.cfg at shared storage; replacing the link
    by a regular file would silently detach that node from the shared copy.
    """
    if os.path.islink(path):
        return os.path.realpath(path)
    return path


def read_bytes(path):
    """Content of a regular file, or None when it does not exist."""
    target = _resolve_target(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileOpError("cannot inspect %s: %s" % (path, _os_reason(exc))) from exc
    if not stat.S_ISREG(st.st_mode):
        raise FileOpError("%s exists but is not a regular file" % (path,))
    try:
        with open(target, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise FileOpError("cannot read %s: %s" % (path, _os_reason(exc))) from exc


def _stat_fields(st):
    return dict(ctime=st.st_ctime, uid=st.st_uid, gid=st.st_gid, mode="%04o" % stat.S_IMODE(st.st_mode))


def describe_file(path):
    """What a write of ``path`` would compare against, read once for a play to decide on.

    Returns {exists, sha256, content, ctime, uid, gid, mode, error}: the target's bytes as their
    SHA-256 and, when they are UTF-8, as text; its inode change time (epoch seconds); owner, group
    and permission bits as numbers and an octal string. ``error`` names what made the file
    unreadable (then the other keys are null), so the caller runs the write module, which reports
    it properly. Symbolic links are followed as :func:`replace_file` follows them.
    """
    described = dict(exists=False, sha256=None, content=None, ctime=None, uid=None, gid=None, mode=None,
                     error=None)
    try:
        data = read_bytes(path)
        if data is None:
            return described
        st = os.stat(_resolve_target(path))
    except (FileOpError, OSError) as exc:
        described["error"] = str(exc)
        return described
    described.update(exists=True, sha256=hashlib.sha256(data).hexdigest(), **_stat_fields(st))
    try:
        described["content"] = data.decode("utf-8")
    except UnicodeDecodeError:
        pass  # the hash still says whether the bytes match; an edit in place needs the module
    return described


def stat_file(path):
    """{exists, ctime, uid, gid, mode, error} of ``path`` without opening it.

    For files whose content must never leave the host (TLS keys): the caller learns whether the
    file is there, since when (ctime: content, owner and mode changes all move it) and how it is
    protected. Symbolic links are followed and only regular files count, as in :func:`describe_file`.
    """
    described = dict(exists=False, ctime=None, uid=None, gid=None, mode=None, error=None)
    try:
        st = os.stat(_resolve_target(path))
    except FileNotFoundError:
        return described
    except OSError as exc:
        described["error"] = "cannot inspect %s: %s" % (path, _os_reason(exc))
        return described
    if not stat.S_ISREG(st.st_mode):
        described["error"] = "%s exists but is not a regular file" % (path,)
        return described
    described.update(exists=True, **_stat_fields(st))
    return described


def path_presence(path):
    """{exists, error} of whatever is at ``path`` (file, directory, link: the link itself), without opening it:
    for what a role removes where it is present."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return dict(exists=False, error=None)
    except OSError as exc:
        return dict(exists=False, error="cannot inspect %s: %s" % (path, _os_reason(exc)))
    return dict(exists=True, error=None)


def read_text(path):
    """Content of a text file decoded as UTF-8, or None when it does not exist.

    Undecodable bytes are kept as surrogates so that an edit round-trips them unchanged.
    """
    data = read_bytes(path)
    if data is None:
        return None
    return data.decode("utf-8", "surrogateescape")


def _encode(content):
    if isinstance(content, bytes):
        return content
    return content.encode("utf-8", "surrogateescape")


def _diff_text(data):
    if data is None:
        return ""
    return data.decode("utf-8", "replace")


def ensure_directory(module, path, mode=0o755, uid=0, gid=0):
    """Create ``path`` and any missing parents with ``mode`` and uid/gid; existing ones are left alone.

    Returns True when something was (or, in check mode, would be) created.
    """
    missing = []
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    if not os.path.isdir(current):
        raise FileOpError("%s exists but is not a directory (needed for %s)" % (current, path))
    if not missing:
        return False
    if module.check_mode:
        return True
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
            # mkdir honours the umask; the requested mode is what the caller documented.
            os.chmod(directory, mode)
            if (uid is not None and uid != os.geteuid()) or (gid is not None and gid != os.getegid()):
                os.chown(directory, -1 if uid is None else uid, -1 if gid is None else gid)
        except OSError as exc:
            raise FileOpError("cannot create directory %s: %s" % (directory, _os_reason(exc))) from exc
    return True


def _attribute_changes(st, uid, gid, mode):
    """(name, before, after) for each requested attribute that differs from the stat result."""
    changes = []
    if uid is not None and st.st_uid != uid:
        changes.append(("owner", user_label(st.st_uid), user_label(uid)))
    if gid is not None and st.st_gid != gid:
        changes.append(("group", group_label(st.st_gid), group_label(gid)))
    if mode is not None and stat.S_IMODE(st.st_mode) != mode:
        changes.append(("mode", "%04o" % stat.S_IMODE(st.st_mode), "%04o" % mode))
    return changes


def _apply_attributes(path, uid, gid, mode, shown_path=None):
    shown = shown_path or path
    try:
        if uid is not None or gid is not None:
            st = os.lstat(path)
            if (uid is not None and st.st_uid != uid) or (gid is not None and st.st_gid != gid):
                os.chown(path, -1 if uid is None else uid, -1 if gid is None else gid)
        if mode is not None:
            os.chmod(path, mode)
    except OSError as exc:
        raise FileOpError("cannot set owner/group/mode of %s: %s" % (shown, _os_reason(exc))) from exc


def wanted_attributes(owner=None, group=None, mode=None, file_args=None):
    """The file common arguments of a write: ``file_args`` (what ``module.load_file_common_arguments``
    returns: owner, group, mode, se*, attributes) with ``owner``/``group``/``mode`` filled in where it
    leaves them unset. The path is set per file by the writer."""
    wanted = dict(_NO_FILE_ARGS)
    wanted.update({key: value for key, value in (file_args or {}).items() if key in _NO_FILE_ARGS})
    for key, value in (("owner", owner), ("group", group), ("mode", mode)):
        if wanted[key] is None:
            wanted[key] = value
    return wanted


def _context_change(module, path, wanted):
    """(current, wanted) SELinux context of ``path`` as 'u:r:t[:l]' text when they differ, else None.

    Read-only (a prediction in check mode may not change anything); the change itself is made by
    ``module.set_fs_attributes_if_different``, as in ansible.builtin.copy.
    """
    context = wanted.get("secontext")
    if not context or all(part is None for part in context) or not module.selinux_enabled():
        return None
    current = list(module.selinux_context(path))
    after = [context[i] if i < len(context) and context[i] is not None else part for i, part in enumerate(current)]
    if after == current:
        return None
    return ":".join(str(part) for part in current), ":".join(str(part) for part in after)


def _set_fs_attributes(module, path, wanted):
    """module.set_fs_attributes_if_different on ``path`` with the wanted file common arguments."""
    file_args = dict(wanted, path=path)
    if file_args["secontext"] is None:
        file_args["secontext"] = [None, None, None]
    module.set_fs_attributes_if_different(file_args, False)


def _write_temp(directory, basename, data, uid, gid, mode, shown_path):
    """Write ``data`` to a new file next to the target and give it its final attributes.

    Returns the temporary path. The file is flushed to disk before it can replace the target, so
    a crash after the rename cannot leave an empty file behind.
    """
    try:
        fd, tmp_path = tempfile.mkstemp(prefix=".%s." % basename, suffix=".tmp", dir=directory)
    except OSError as exc:
        raise FileOpError("cannot create a temporary file in %s to replace %s: %s"
                          % (directory, shown_path, _os_reason(exc))) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        _apply_attributes(tmp_path, uid, gid, mode, shown_path=shown_path)
    except OSError as exc:
        _discard(tmp_path)
        raise FileOpError("cannot write %s: %s" % (shown_path, _os_reason(exc))) from exc
    except FileOpError:
        _discard(tmp_path)
        raise
    return tmp_path


def _discard(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _umask_default_mode():
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _headers(path, existed):
    return {
        "before_header": path if existed else "%s (absent)" % path,
        "after_header": path,
    }


def replace_file(module, path, content, owner=None, group=None, mode=None, backup=False, file_args=None):
    """Make ``path`` hold exactly ``content`` (str or bytes) with the given attributes.

    ``owner``/``group``/``mode`` (or the same keys of ``file_args``, the module's file common
    arguments, which also carry the SELinux context and file attributes) left as None keep the
    current values (new files: the current user and the umask default). ``mode`` may be octal or
    symbolic. A backup copy gets the same owner, group and mode as the new file, so that it never
    keeps looser permissions than the file it stands for. Returns a dict with ``changed``,
    ``backup_file`` (None unless a backup was written) and ``diff`` ({before, after, before_header,
    after_header}, plus ``prepared`` describing attribute changes, which the diff callback prints
    verbatim).
    """
    wanted = wanted_attributes(owner, group, mode, file_args)
    # Checked before anything is read or written, so that a wrong value is named in the module's
    # message instead of surfacing as a failed chown half way through.
    try:
        uid = resolve_uid(wanted["owner"])
        gid = resolve_gid(wanted["group"])
        mode_after(0o100644, wanted["mode"])
    except FileOpError as exc:
        raise FileOpError("%s: %s" % (path, exc)) from None
    new_data = _encode(content)

    # atomic_move documents that it needs absolute paths.
    target = os.path.abspath(_resolve_target(path))
    old_data = read_bytes(path)
    existed = old_data is not None
    directory = os.path.dirname(target)
    # In check mode the caller's ensure_directory only predicted the directory; the file would
    # then be new, which is exactly what the result below reports.
    if not os.path.isdir(directory) and not module.check_mode:
        raise FileOpError("cannot write %s: directory %s does not exist" % (path, directory))

    attr_changes = []
    context_change = None
    if existed:
        try:
            st = os.stat(target)
        except OSError as exc:
            raise FileOpError("cannot inspect %s: %s" % (path, _os_reason(exc))) from exc
        attr_changes = _attribute_changes(st, uid, gid, mode_after(st.st_mode, wanted["mode"]))
        context_change = _context_change(module, target, wanted)
        if context_change:
            attr_changes.append(("secontext",) + context_change)
    content_changed = (not existed) or old_data != new_data

    diff = dict(_headers(path, existed), before=_diff_text(old_data), after=_diff_text(new_data))
    if attr_changes:
        diff["prepared"] = "%s: %s\n" % (
            path, ", ".join("%s %s -> %s" % change for change in attr_changes))
    result = {"changed": content_changed or bool(attr_changes), "backup_file": None, "diff": diff}
    if module.check_mode or not result["changed"]:
        return result

    if not content_changed:
        _set_fs_attributes(module, target, wanted)
        return result

    # The temporary file is born with the final owner, group and mode, so the target never has
    # other ones, not even between the rename and the attribute pass: the old file's where the
    # caller asks for none, so replacing a vendor file never loosens or tightens its permissions.
    if existed:
        base_uid, base_gid, base_mode = st.st_uid, st.st_gid, st.st_mode
    else:
        base_uid, base_gid, base_mode = os.geteuid(), os.getegid(), stat.S_IFREG | _umask_default_mode()
    tmp_uid = base_uid if uid is None else uid
    tmp_gid = base_gid if gid is None else gid
    tmp_mode = mode_after(base_mode, wanted["mode"])
    # The new content is written first: a read-only or full file system fails here, with the OS
    # reason, before any backup copy is attempted (and before the target is touched at all).
    tmp_path = _write_temp(directory, os.path.basename(target), new_data, tmp_uid, tmp_gid, tmp_mode, path)
    if backup and existed:
        try:
            result["backup_file"] = module.backup_local(target) or None
            if result["backup_file"]:
                # backup_local copies the old owner and mode: a world-writable file owned by nobody
                # would stay so in its copy, beside the repaired file.
                _apply_attributes(result["backup_file"], tmp_uid, tmp_gid, tmp_mode, shown_path=result["backup_file"])
        except Exception as exc:  # backup_local raises a bare Exception in ansible-core >= 2.19
            _discard(tmp_path)
            # backup_local names its copy <target>.<pid>.<time>~; one that failed half way (disk
            # full) would be left empty or truncated, so this process's copies are removed.
            for partial in glob.glob("%s.%d.*~" % (glob.escape(target), os.getpid())):
                _discard(partial)
            reason = exc.__cause__ if exc.__cause__ is not None else exc
            raise FileOpError("cannot back up %s before replacing it: %s" % (path, reason)) from exc
        _set_fs_attributes(module, result["backup_file"], dict(wanted, mode=tmp_mode, owner=tmp_uid, group=tmp_gid))
    try:
        # keep_dest_attrs=False: the temporary file already carries the final owner/group/mode,
        # and copying the old file's would overwrite a requested change. (On SELinux hosts the
        # file then gets the policy default context of its path, or the one asked for below.)
        module.atomic_move(tmp_path, target, unsafe_writes=bool(getattr(module, "params", {}).get("unsafe_writes")),
                           keep_dest_attrs=False)
    except Exception as exc:  # atomic_move raises bare Exceptions (and OSError) in ansible-core >= 2.19
        _discard(tmp_path)
        raise FileOpError("cannot replace %s: %s" % (path, exc)) from exc
    # atomic_move resets the mode and owner of a file it creates (umask default, current user); the
    # SELinux context and file attributes asked for are set here too.
    _set_fs_attributes(module, target, dict(wanted, mode=tmp_mode, owner=tmp_uid, group=tmp_gid))
    return result


def remove_file(module, path, backup=False):
    """Make sure ``path`` does not exist. Returns the same dict shape as :func:`replace_file`."""
    if os.path.isdir(path) and not os.path.islink(path):
        raise FileOpError("%s is a directory; refusing to remove it" % (path,))
    existed = os.path.lexists(path)
    old_data = None
    if existed and not os.path.islink(path):
        old_data = read_bytes(path)
    diff = {
        "before_header": path if existed else "%s (absent)" % path,
        "after_header": "%s (absent)" % path,
        "before": _diff_text(old_data),
        "after": "",
    }
    result = {"changed": existed, "backup_file": None, "diff": diff}
    if module.check_mode or not existed:
        return result
    if backup and old_data is not None:
        try:
            result["backup_file"] = module.backup_local(path) or None
        except Exception as exc:  # backup_local raises a bare Exception in ansible-core >= 2.19
            raise FileOpError("cannot back up %s before removing it: %s" % (path, exc)) from exc
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise FileOpError("cannot remove %s: %s" % (path, _os_reason(exc))) from exc
    return result


def lstat_or_none(path):
    """os.lstat that returns None for a missing path and names the path on other errors."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            return None
        raise FileOpError("cannot inspect %s: %s" % (path, _os_reason(exc))) from exc
