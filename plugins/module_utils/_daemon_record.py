# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a daemon instance loaded: the record the collection writes when it starts the daemon.

The IMEX daemon reads its config.cfg and node list only when it starts. A file's change time moves
on a no-op chmod, chown, setfacl, restorecon, a backup tool, an identical rewrite or a clock step,
so it cannot tell whether the daemon runs what is on disk; the content can. When a run starts the
daemon, it records the SHA-256 of each of those files, tied to the instance by systemd's
InvocationID (a new one for every start of the unit). The record lives under /run, which a reboot
clears together with the instance it describes.

One record per unit, JSON: {"format": 1, "service": unit, "invocation_id": id, "files": {path: sha256
or null for a file that was absent}, "hosts_block": sha256 or null}. imex_daemon_record writes it;
imex_tray_info reads it back.

With slot names in the node list, the daemon resolves them through the managed block of /etc/hosts when it
starts and again at each SIGUSR1: what it resolved is part of what it loaded. "hosts_block" is the digest
of that block (null: there was none), recorded at the start and moved on by imex_reconnect after a signal
to the same instance. A record without the key (an older release of the collection) says nothing of it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat

from ansible_collections.rackscale.imex.plugins.module_utils._files import FileOpError, read_text
from ansible_collections.rackscale.imex.plugins.module_utils._hosts_block import describe

RECORD_DIR = '/run/rackscale-imex/loaded'
RECORD_FORMAT = 1
# systemctl show: the instance, and when the unit began to start (before the daemon read its files).
INSTANCE_PROPERTIES = ('InvocationID', 'InactiveExitTimestampMonotonic')
# systemd prints the 128-bit id as 32 lowercase hex digits.
_INVOCATION_ID = re.compile(r'[0-9a-f]{32}')
# A unit name as systemd allows it; anything else is never turned into a file name.
_UNIT_NAME = re.compile(r'[A-Za-z0-9:_.\\@-]+')


class RecordError(Exception):
    pass


def record_path(service, record_dir=None):
    """The record file of ``service``: one per unit name, under RECORD_DIR."""
    if not _UNIT_NAME.fullmatch(service or '') or service in ('.', '..'):
        raise RecordError('%r is not a systemd unit name' % (service,))
    return os.path.join(record_dir or RECORD_DIR, '%s.json' % service)


def unsafe_place(path):
    """Why ``path`` (the record file) must not be written as root, or None: each existing directory from
    /run/rackscale-imex down, and the file itself, must be no symbolic link, belong to this user and not
    be writable by group or others (anyone who could write there could point the record elsewhere)."""
    directory = os.path.dirname(path)
    for place in (os.path.dirname(directory), directory, path):
        try:
            st = os.lstat(place)
        except FileNotFoundError:
            continue
        except OSError as error:
            return 'cannot inspect %s: %s' % (place, error.strerror or error)
        if stat.S_ISLNK(st.st_mode):
            return '%s is a symbolic link' % place
        if st.st_uid != os.geteuid():
            return '%s belongs to uid %d, not to uid %d that records' % (place, st.st_uid, os.geteuid())
        if st.st_mode & 0o022:
            return '%s is writable by group or others (mode %04o)' % (place, stat.S_IMODE(st.st_mode))
    return None


def invocation_id(value):
    """The InvocationID systemctl show printed, or None when the unit has none (never started)."""
    value = (value or '').strip().lower()
    return value if _INVOCATION_ID.fullmatch(value) else None


def file_digest(path):
    """SHA-256 of the file's bytes; None when it does not exist. Other read errors raise OSError."""
    digest = hashlib.sha256()
    try:
        with open(path, 'rb') as handle:
            for chunk in iter(lambda: handle.read(1024 * 1024), b''):
                digest.update(chunk)
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def hosts_block_digest(path):
    """SHA-256 of the managed block of the hosts file ``path`` (the digest the read compares), None when the
    file holds no block. Raises RecordError when the file cannot be read or its markers are broken: then
    nothing can be said of what the daemon resolves."""
    try:
        text = read_text(path)
    except FileOpError as error:
        raise RecordError(str(error)) from None
    if text is None:
        return None
    described = describe(text)
    if described['error']:
        raise RecordError('%s: %s' % (path, described['error']))
    return described['sha256']


def _is_digest(value):
    return value is None or (isinstance(value, str) and len(value) == 64)


def build(service, instance, digests, **hosts_block):
    """The record text (stable JSON, so that recording the same instance again changes nothing).
    ``hosts_block=digest`` (None: no block) adds the hosts block the instance resolved."""
    data = dict(format=RECORD_FORMAT, service=service, invocation_id=instance, files=dict(digests))
    if 'hosts_block' in hosts_block:
        data['hosts_block'] = hosts_block['hosts_block']
    return json.dumps(data, sort_keys=True, indent=1) + '\n'


def parse(text):
    """{invocation_id, files[, hosts_block]} of a record's text; None for anything that is not a record of this format.

    A damaged or foreign record is no record: the caller falls back to what it did without one.
    """
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get('format') != RECORD_FORMAT:
        return None
    instance = data.get('invocation_id')
    files = data.get('files')
    if not isinstance(instance, str) or invocation_id(instance) != instance or not isinstance(files, dict):
        return None
    if not all(isinstance(path, str) and _is_digest(digest) for path, digest in files.items()):
        return None
    record = dict(invocation_id=instance, files=files)
    if 'hosts_block' in data:
        if not _is_digest(data['hosts_block']):
            return None
        record['hosts_block'] = data['hosts_block']
    return record


def read(service, record_dir=None):
    """The parsed record of ``service``, or None when there is none or it cannot be read as one."""
    try:
        with open(record_path(service, record_dir), encoding='utf-8') as handle:
            return parse(handle.read(64 * 1024))
    except (OSError, UnicodeDecodeError, RecordError):
        return None
