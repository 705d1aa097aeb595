# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
"""Would a write of the daemon's files change anything, judged from what was read on the tray.

A tray is read once per run (rackscale.imex.imex_tray_info, which describes each file with
_files.describe_file); the play then runs imex_nodes_config and imex_config only where these
functions say so. They render with the very functions the modules write with (render_nodes,
apply_settings), so "no drift" here means the module would report no change. Whenever the answer
is not certain (file unread or unreadable, input the module would refuse), they say "drift" and the
module runs, with its own checks and messages.
"""
from __future__ import annotations

import hashlib

from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import (
    ConfigError,
    apply_settings,
    validate_settings,
)
from ansible_collections.rackscale.imex.plugins.module_utils._nodes import NodesError, render_nodes, validate_nodes

# imex_nodes_config's default owner, group and mode, which the imex_daemon role keeps.
NODES_FILE_UID = 0
NODES_FILE_GID = 0
NODES_FILE_MODE = "0644"


def _read(observed):
    """The description of a file that was read without error, else None (unknown)."""
    if not isinstance(observed, dict) or observed.get("error") or "exists" not in observed:
        return None
    return observed


def nodes_file_drifts(observed, nodes, max_nodes=18):
    """True unless ``observed`` already holds exactly the node list imex_nodes_config would write."""
    described = _read(observed)
    if described is None or not described["exists"]:
        return True
    try:
        content = render_nodes(validate_nodes(list(nodes), max_nodes=int(max_nodes)))
    except (NodesError, TypeError, ValueError):
        return True
    return (hashlib.sha256(content.encode("utf-8")).hexdigest() != described["sha256"]
            or described["uid"] != NODES_FILE_UID or described["gid"] != NODES_FILE_GID
            or described["mode"] != NODES_FILE_MODE)


def config_file_drifts(observed, settings):
    """True unless ``observed`` already holds every key of ``settings`` as imex_config would set it."""
    described = _read(observed)
    if described is None or not described["exists"] or described["content"] is None:
        return True
    try:
        wanted, _effective = apply_settings(described["content"], validate_settings(dict(settings)))
    except (ConfigError, TypeError, ValueError):
        return True
    return wanted != described["content"]
