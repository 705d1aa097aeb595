# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""What a tray's daemon is meant to hold: its config.cfg keys and its TLS files."""
from __future__ import annotations

import os

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes

# The daemon's TLS material under imex_tls_dir: (file, mode).
TLS_FILES = (("ca.crt", "0644"), ("tray.crt", "0644"), ("tray.key", "0600"))
# Written under imex_tls_dir right after a run signalled the daemon to reload its TLS files (SIGUSR1):
# TLS files older than it are in force although the daemon started before them.
TLS_RELOAD_MARK = "reloaded"


def daemon_settings(options, address):
    """The config.cfg keys of a tray: the operator's, then the keys the collection owns and the mode's,
    TLS on (its keys) or off (explicitly, since config.cfg keeps keys a run does not set)."""
    settings = {"IMEX_ENABLE_AUTH_ENCRYPTION": "0"}
    settings.update(options.get("imex_settings") or {})
    settings.update(owned_settings(options, address))
    if options.get("imex_tls"):
        tls_dir = options["imex_tls_dir"]
        settings.update({
            "IMEX_ENABLE_AUTH_ENCRYPTION": "1", "IMEX_AUTH_ENCRYPTION_MODE": "SSL_TLS", "IMEX_AUTH_SOURCE": "FILE",
            "IMEX_SERVER_KEY": tls_dir + "/tray.key", "IMEX_SERVER_CERT": tls_dir + "/tray.crt",
            "IMEX_SERVER_CERT_AUTH": tls_dir + "/ca.crt", "IMEX_CLIENT_KEY": tls_dir + "/tray.key",
            "IMEX_CLIENT_CERT": tls_dir + "/tray.crt", "IMEX_CLIENT_CERT_AUTH": tls_dir + "/ca.crt",
            "IMEX_SECURITY_TARGET_OVERRIDE": options.get("imex_tls_target_override") or "",
        })
    return settings


def owned_settings(options, address):
    """The keys the collection sets itself (imex_settings may not): the command service that
    nvidia-imex-ctl -N asks on every tray, the ports, the node list, and the mode's unix socket (empty
    outside dra_host_managed, so that switching modes back really closes it)."""
    return {
        "IMEX_CMD_ENABLED": "1",
        "IMEX_CMD_PORT": str(options["imex_cmd_port"]),
        "SERVER_PORT": str(options["imex_server_port"]),
        "IMEX_NODE_CONFIG_FILE": options["imex_nodes_config_path"],
        "IMEX_CMD_BIND_INTERFACE_IP": address if options.get("imex_cmd_bind_own_address") else "",
        "IMEX_CMD_UNIX_DOMAIN_PATH": options["imex_unix_socket"] if modes.of(options["imex_mode"]).unix_socket else "",
    }


def tls_paths(options):
    return [os.path.join(options["imex_tls_dir"], name) for name, _permissions in TLS_FILES] if options.get("imex_tls") else []


def tls_reload_mark(options):
    return os.path.join(options["imex_tls_dir"], TLS_RELOAD_MARK)
