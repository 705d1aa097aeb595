# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The managed block of a tray's /etc/hosts that maps the node list's slot names to the trays' addresses.

With host names in the node list, the list names slots, the same on every tray, and this block says
which address each slot has now. The block sits between two marker lines; everything outside it
(what cloud-init, the operator or another tool keep there) is kept byte for byte. Pure functions:
parse, render, replace, digest; the modules read and write the file.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re

from ansible_collections.rackscale.imex.plugins.module_utils._text import ProblemsError

HOSTS_PATH = "/etc/hosts"
BEGIN = "# BEGIN rackscale.imex node names (managed by Ansible: edits inside this block are replaced)"
END = "# END rackscale.imex node names"
# What identifies a marker line, whatever follows it on the line (a hand edit of its comment text).
_BEGIN_PREFIX = "# BEGIN rackscale.imex node names"
_END_PREFIX = "# END rackscale.imex node names"
# RFC 1123 label; a slot name is one or more of them.
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


class HostsBlockError(ProblemsError):
    """The hosts file or the wanted entries cannot be handled; each problem names the line or entry."""


def _is_name(name):
    labels = str(name).rstrip(".").split(".")
    return (0 < len(str(name)) <= 253 and all(_LABEL.match(label) for label in labels)
            and not labels[-1].isdigit())


def validate_entries(entries):
    """[(address, name)] from [{address, name}] or pairs; HostsBlockError naming every bad entry.

    An address is an IPv4 or IPv6 address (a hosts file maps names to addresses, not to names); a name
    is an RFC 1123 host name, each used once.
    """
    problems, found, seen = [], [], {}
    for position, entry in enumerate(entries or []):
        if isinstance(entry, dict):
            address, name = entry.get("address"), entry.get("name")
        else:
            try:
                address, name = entry
            except (TypeError, ValueError):
                problems.append("entry %d (%r) is not {address, name}" % (position, entry))
                continue
        try:
            text = str(ipaddress.ip_address(str(address)))
        except ValueError:
            problems.append("entry %d: address %r is not an IPv4 or IPv6 address" % (position, address))
            continue
        if not isinstance(name, str) or not _is_name(name):
            problems.append("entry %d: %r is not a host name (RFC 1123)" % (position, name))
            continue
        key = name.rstrip(".").lower()
        if key in seen:
            problems.append("entry %d: name %s is also entry %d" % (position, name, seen[key]))
            continue
        seen[key] = position
        found.append((text, name))
    if problems:
        raise HostsBlockError(problems)
    return found


def render_block(entries):
    """The block's lines (markers included, newline-terminated) for validated [(address, name)]; "" for none."""
    if not entries:
        return ""
    return "\n".join([BEGIN] + ["%s\t%s" % (address, name) for address, name in entries] + [END]) + "\n"


def split(text):
    """(before, block, after) of a hosts file's text: block is the managed block's text (markers included)
    or None when the file has none. HostsBlockError for a second block or a marker without its pair,
    naming the lines: such a file was edited by hand and is left for the operator to repair."""
    lines = (text or "").splitlines(True)
    begins = [number for number, line in enumerate(lines) if line.startswith(_BEGIN_PREFIX)]
    ends = [number for number, line in enumerate(lines) if line.startswith(_END_PREFIX)]
    if not begins and not ends:
        return text or "", None, ""
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise HostsBlockError(["the managed block's markers are broken (BEGIN on line%s %s, END on line%s %s); "
                               "repair the file by hand" % ("s" if len(begins) != 1 else "",
                                                            ", ".join(str(n + 1) for n in begins) or "none",
                                                            "s" if len(ends) != 1 else "",
                                                            ", ".join(str(n + 1) for n in ends) or "none")])
    start, stop = begins[0], ends[0] + 1
    block = "".join(lines[start:stop])
    if not block.endswith("\n"):
        block += "\n"
    return "".join(lines[:start]), block, "".join(lines[stop:])


def block_entries(block):
    """[(address, name)] of a block's text as written (None gives [])."""
    found = []
    for line in (block or "").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2:
            found.extend((fields[0], name) for name in fields[1:])
    return found


def names_outside(text, names):
    """{name: [line number]} of ``names`` that lines outside the block also map (the resolver may answer
    with either line, so such a name would not follow the block)."""
    before, block, after = split(text)
    wanted = {str(name).rstrip(".").lower(): name for name in names}
    found = {}
    offset = len(before.splitlines()) + len((block or "").splitlines())
    for start, part in ((0, before), (offset, after)):
        for number, line in enumerate(part.splitlines(), start + 1):
            for field in line.split("#", 1)[0].split()[1:]:
                key = field.rstrip(".").lower()
                if key in wanted:
                    found.setdefault(wanted[key], []).append(number)
    return found


def replace_block(text, entries):
    """The file's text with its block holding ``entries`` (validated [(address, name)]), everything else kept.

    A file without a block gets it at its end (after a newline where its last line has none); no entries
    remove the block.
    """
    before, block, after = split(text)
    rendered = render_block(entries)
    if block is None:
        if not rendered:
            return text or ""
        if before and not before.endswith("\n"):
            before += "\n"
        return before + rendered
    return before + rendered + after


def block_digest(block):
    """SHA-256 (hex) of a block's text, or None when there is no block."""
    if block is None:
        return None
    return hashlib.sha256(block.encode("utf-8")).hexdigest()


def wanted_digest(entries):
    """The digest of the block ``entries`` render to (None for no block): compared with a read's."""
    rendered = render_block(validate_entries(entries))
    return block_digest(rendered) if rendered else None


def describe(text):
    """What the read returns of a hosts file's text: {block, sha256, entries, error}."""
    try:
        _before, block, _after = split(text)
    except HostsBlockError as exc:
        return {"block": None, "sha256": None, "entries": [], "error": str(exc)}
    return {"block": block, "sha256": block_digest(block), "entries": [list(entry) for entry in block_entries(block)],
            "error": None}
