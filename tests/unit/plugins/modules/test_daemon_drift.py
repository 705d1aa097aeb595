# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The daemon drift filter agrees with the write modules: "no drift" exactly where the module changes nothing.

Each case reads the tray's files as imex_tray_info does (describe_file), asks the filter, then runs
the real module (check mode) on the same files and compares its "changed" with the filter's answer.
"""
from __future__ import annotations

import os
import shutil
from types import MappingProxyType

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils._drift import daemon_drift
from ansible_collections.rackscale.imex.plugins.module_utils._files import describe_file
from ansible_collections.rackscale.imex.plugins.modules import imex_config, imex_nodes_config

STOCK = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "files", "stock_config.cfg")
NODES = ("198.18.1.1", "198.18.1.2", "198.18.1.3")
SETTINGS = MappingProxyType({
    "IMEX_CMD_ENABLED": "1", "IMEX_CMD_PORT": "50005", "SERVER_PORT": "50000",
    "IMEX_NODE_CONFIG_FILE": "/etc/nvidia-imex/nodes_config.cfg", "IMEX_CMD_BIND_INTERFACE_IP": "",
    "IMEX_ENABLE_AUTH_ENCRYPTION": "0", "LOG_LEVEL": 2, "STATS_FILE_NAME": None})


@pytest.fixture
def tray(tmp_path, run_module):
    """A tray's two files (written once by the modules) and a way to compare filter and modules on them."""
    nodes_path, config_path = tmp_path / "nodes_config.cfg", tmp_path / "config.cfg"
    shutil.copy(STOCK, str(config_path))
    os.chmod(str(config_path), 0o644)

    def verdicts(nodes=NODES, settings=SETTINGS):
        read = {"files": dict((str(path), describe_file(str(path))) for path in (nodes_path, config_path))}
        nodes, settings = list(nodes), dict(settings)
        drift = daemon_drift(read, nodes, str(nodes_path), settings, str(config_path), 18)
        wrote_nodes = run_module(imex_nodes_config, dict(nodes=nodes, path=str(nodes_path)), check=True)
        wrote_config = run_module(imex_config, dict(settings=settings, path=str(config_path)), check=True)
        return drift, {"nodes": wrote_nodes.get("changed", True), "config": wrote_config.get("changed", True)}

    def converge():
        for module, args in ((imex_nodes_config, dict(nodes=list(NODES), path=str(nodes_path))),
                             (imex_config, dict(settings=dict(SETTINGS), path=str(config_path)))):
            assert run_module(module, args)["_exit_code"] == 0

    return nodes_path, config_path, verdicts, converge


def test_fresh_tray_drifts_on_both_files(tray):
    _nodes_path, _config_path, verdicts, _converge = tray
    drift, changed = verdicts()
    assert drift == changed == {"nodes": True, "config": True}


def test_converged_tray_has_no_drift(tray):
    _nodes_path, _config_path, verdicts, converge = tray
    converge()
    drift, changed = verdicts()
    assert drift == changed == {"nodes": False, "config": False}


@pytest.mark.parametrize("edit, drifted", [
    ("reordered", "nodes"),
    ("trailing blank", "nodes"),
    ("mode", "nodes"),
    ("other list", "nodes"),
    ("value", "config"),
    ("key removed by hand", "config"),
    ("new setting", "config"),
    ("crlf line", "config"),
    ("config world-writable", "config"),
    ("config owned by nobody", "config"),
])
def test_drift_of_one_file_matches_the_module(tray, edit, drifted):
    nodes_path, config_path, verdicts, converge = tray
    converge()
    wanted = {}
    text = config_path.read_text()
    if edit == "reordered":
        nodes_path.write_text("198.18.1.2\n198.18.1.1\n198.18.1.3\n")
    elif edit == "trailing blank":
        nodes_path.write_text("".join("%s\n" % node for node in NODES) + "\n")
    elif edit == "mode":
        os.chmod(str(nodes_path), 0o600)
    elif edit == "other list":
        wanted["nodes"] = NODES[:2]
    elif edit == "value":
        config_path.write_text(text.replace("IMEX_CMD_PORT=50005", "IMEX_CMD_PORT=50006"))
    elif edit == "key removed by hand":
        config_path.write_text(text.replace("LOG_LEVEL=2\n", ""))
    elif edit == "new setting":
        wanted["settings"] = dict(SETTINGS, IMEX_WAIT_FOR_QUORUM="NONE")
    elif edit == "config world-writable":
        os.chmod(str(config_path), 0o666)
    elif edit == "config owned by nobody":
        os.chown(str(config_path), 65534, 65534)
    else:
        config_path.write_text(text.replace("SERVER_PORT=50000\n", "SERVER_PORT=50001\r\n"))
    drift, changed = verdicts(**wanted)
    assert drift == changed == {"nodes": drifted == "nodes", "config": drifted == "config"}


def test_config_that_is_not_utf8_is_left_to_the_module(tray):
    _nodes_path, config_path, verdicts, converge = tray
    converge()
    with open(str(config_path), "ab") as handle:
        handle.write(b"# caf\xe9\n")
    drift, changed = verdicts()
    # The module edits such a file in place and finds nothing to change; the filter cannot tell.
    assert drift == {"nodes": False, "config": True}
    assert changed == {"nodes": False, "config": False}


def test_unknown_or_refused_input_is_drift():
    read = {"files": {"/n": {"exists": True, "sha256": "x", "content": "a\n", "uid": 0, "gid": 0,
                             "mode": "0644", "error": None}}}
    assert daemon_drift({}, list(NODES), "/n", dict(SETTINGS), "/c", 18) == {"nodes": True, "config": True}
    skipped = {"skipped": True}
    assert daemon_drift(skipped, list(NODES), "/n", dict(SETTINGS), "/c", 18) == {"nodes": True, "config": True}
    assert daemon_drift(read, [], "/n", {"IMEX_CMD_PORT": "not a port"}, "/n", 18)["nodes"] is True
    assert daemon_drift(read, list(NODES), "/n", {"IMEX_CMD_PORT": "not a port"}, "/n", 18)["config"] is True
    unreadable = {"files": {"/n": {"exists": False, "error": "/n exists but is not a regular file"}}}
    assert daemon_drift(unreadable, list(NODES), "/n", dict(SETTINGS), "/n", 18) == {"nodes": True, "config": True}
