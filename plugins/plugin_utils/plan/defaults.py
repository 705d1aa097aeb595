# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""The options whose default depends on other options or on the run: the role's defaults leave them null
(none given), and the plan decides them here, once, for every stage that reads a tray's options. The
preflight records the decided values (Tray.channel0, Tray.nodes_config_path, Run.require_declared_size),
and the role's tasks read those."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes

NODES_CONFIG_PATH = "/etc/nvidia-imex/nodes_config.cfg"
# Per job, the prolog writes each job's node list under /run: nothing stale survives a reboot.
PER_JOB_NODES_CONFIG_PATH = "/run/nvidia-imex/nodes_config.cfg"
# The options decided here, each null in the role's defaults.
DECIDED = ("imex_require_declared_size", "imex_channel0", "imex_nodes_config_path")


def decided(options, under_awx=False):
    """One tray's converted options with the value of each DECIDED option that was not given:
    imex_channel0 where its mode owns the channels; the node list where its mode keeps it; the declared
    size required under AWX (``under_awx``: awx_job_id is set), whose job slices hold part of each group
    with nothing saying so. A value given (false, a path) stays as given."""
    found = dict(options)
    mode = modes.of(found.get("imex_mode"))
    if found.get("imex_channel0") is None:
        found["imex_channel0"] = mode.owns_channels
    if found.get("imex_nodes_config_path") in (None, ""):
        found["imex_nodes_config_path"] = PER_JOB_NODES_CONFIG_PATH if mode.per_job else NODES_CONFIG_PATH
    if found.get("imex_require_declared_size") is None:
        found["imex_require_declared_size"] = bool(under_awx)
    return found
