# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: which of the daemon's files a write would change, from one read of the tray."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._drift import config_file_drifts, nodes_file_drifts


def imex_daemon_drift(tray_info, nodes, nodes_path, settings, config_path, max_nodes=18):
    """See plugins/filter/imex_daemon_drift.yml."""
    files = (tray_info or {}).get("files") or {}
    return {
        "nodes": nodes_file_drifts(files.get(nodes_path), nodes, max_nodes=max_nodes),
        "config": config_file_drifts(files.get(config_path), settings),
    }


class FilterModule:
    """rackscale.imex daemon drift filter."""

    def filters(self):
        return {"imex_daemon_drift": imex_daemon_drift}
