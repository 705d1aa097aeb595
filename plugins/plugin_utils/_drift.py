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

from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import (
    CONFIG_GROUP,
    CONFIG_MODE,
    CONFIG_OWNER,
    ConfigError,
    apply_settings,
    validate_settings,
)
from ansible_collections.rackscale.imex.plugins.module_utils._files import resolve_gid, resolve_uid
from ansible_collections.rackscale.imex.plugins.module_utils._nodes import (
    FILE_GROUP,
    FILE_MODE,
    FILE_OWNER,
    MAX_NODES,
    NodesError,
    nodes_checksum,
    render_nodes,
    validate_nodes,
)


def _read(observed):
    """The description of a file that was read without error, else None (unknown)."""
    if not isinstance(observed, dict) or observed.get("error") or "exists" not in observed:
        return None
    return observed


def nodes_file_drifts(observed, nodes, max_nodes=MAX_NODES):
    """True unless ``observed`` already holds exactly the node list imex_nodes_config would write."""
    described = _read(observed)
    if described is None or not described["exists"]:
        return True
    try:
        content = render_nodes(validate_nodes(list(nodes), max_nodes=int(max_nodes)))
    except (NodesError, TypeError, ValueError):
        return True
    return nodes_checksum(content) != described["sha256"] or _attributes_drift(described, FILE_OWNER, FILE_GROUP, FILE_MODE)


def _attributes_drift(described, owner, group, mode):
    # root is uid and gid 0 on the controller as on every tray.
    return (described["uid"] != resolve_uid(owner) or described["gid"] != resolve_gid(group)
            or described["mode"] != mode)


def config_file_drifts(observed, settings):
    """True unless ``observed`` already holds every key of ``settings`` as imex_config would set it."""
    described = _read(observed)
    if described is None or not described["exists"] or described["content"] is None:
        return True
    try:
        wanted, _effective = apply_settings(described["content"], validate_settings(dict(settings)))
    except (ConfigError, TypeError, ValueError):
        return True
    # imex_config enforces the owner and mode of the file even where its keys are right.
    return wanted != described["content"] or _attributes_drift(described, CONFIG_OWNER, CONFIG_GROUP, CONFIG_MODE)


def daemon_drift(tray_info, nodes, nodes_path, settings, config_path, max_nodes):
    """{nodes, config}: would writing the node list / the config change the tray, from its read.

    tray_info is the tray's imex_tray_info result ({} or a skipped result when it was not read).
    """
    files = (tray_info or {}).get("files") or {}
    return {
        "nodes": nodes_file_drifts(files.get(nodes_path), nodes, max_nodes=int(max_nodes)),
        "config": config_file_drifts(files.get(config_path), settings),
    }
