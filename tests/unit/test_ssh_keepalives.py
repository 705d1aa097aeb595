# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every ansible.cfg the project ships or tells an operator to write keeps SSH keepalives in its ssh_args,
so that a tray gone silent in a network partition fails its task instead of hanging the run past its locks."""
from __future__ import annotations

import configparser
import os
import re

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KEEPALIVES = ("ServerAliveInterval=15", "ServerAliveCountMax=4")
# Ansible's own default ssh_args: setting ssh_args replaces them, so multiplexing must be kept by hand.
DEFAULTS = ("-C", "ControlMaster=auto", "ControlPersist=60s")
INI_BLOCK = re.compile(r"```ini\n(.*?)```", re.S)
# The README's Install writes the project's ansible.cfg with a shell here-document.
HEREDOC = re.compile(r"cat > ansible\.cfg <<'EOF'\n(.*?)\nEOF\n", re.S)


def _documented_configs():
    found = []
    for name in ("README.md", os.path.join("docs", "awx.md")):
        with open(os.path.join(ROOT, name)) as handle:
            text = handle.read()
            for block in INI_BLOCK.findall(text) + HEREDOC.findall(text):
                if "[ssh_connection]" in block:
                    found.append((name, block))
    # Molecule writes an ansible.cfg of its own for the staging scenario, from provisioner.config_options.
    with open(os.path.join(ROOT, "molecule", "staging", "molecule.yml")) as handle:
        options = yaml.safe_load(handle)["provisioner"]["config_options"]
    found.append(("molecule/staging/molecule.yml", "[ssh_connection]\nssh_args = %s\n"
                  % options["ssh_connection"]["ssh_args"]))
    checkout_cfg = os.path.join(ROOT, "ansible.cfg")   # not in the tarball the units run from
    if os.path.exists(checkout_cfg):
        with open(checkout_cfg) as handle:
            found.append(("ansible.cfg", handle.read()))
    return found


CONFIGS = _documented_configs()


def test_the_operator_project_layout_documents_an_ssh_connection_section():
    documented = [name for name, _text in CONFIGS]
    assert "README.md" in documented and os.path.join("docs", "awx.md") in documented


@pytest.mark.parametrize("name, text", CONFIGS, ids=[name for name, _text in CONFIGS])
def test_ssh_args_keep_ansible_s_defaults_and_add_keepalives(name, text):
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    ssh_args = parser.get("ssh_connection", "ssh_args", fallback="")
    words = set(ssh_args.replace("-o ", "").split())
    missing = [word for word in KEEPALIVES + DEFAULTS if word not in words]
    assert not missing, "%s: ssh_args = %r lacks %s" % (name, ssh_args, ", ".join(missing))
