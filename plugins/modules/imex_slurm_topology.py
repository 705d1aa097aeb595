#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: imex_slurm_topology
short_description: Write Slurm's block topology of the IMEX domains on a Slurm controller
version_added: 0.3.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Runs on a host with C(scontrol) that reaches C(slurmctld) (the Slurm controller). Without O(content) it
    only reads what Slurm is and runs (RV(version), RV(config), RV(nodes), RV(topology)).
  - Also lists which of C(topology.conf) and C(topology.yaml) exist beside C(slurm.conf) (RV(topology_files)),
    since Slurm 25.05 and later read C(topology.yaml) first and then ignore C(topology.conf), and returns the
    file at O(path) as it is (RV(existing)), so that the action replaces only a file it wrote itself.
  - With O(content), writes it to O(path) atomically (a backup of the previous file with O(backup)),
    runs C(scontrol reconfigure) when the file changed and O(reconfigure) is true, then reads
    C(scontrol show topology) again, waiting up to O(timeout) seconds for C(slurmctld) to answer.
  - The content is made and checked on the controller by the action plugin of the same name, which
    builds one block per IMEX domain from the inventory, refuses what Slurm would accept silently or
    die on (naming group, host and value) before anything is written, and compares Slurm's topology
    with the inventory afterwards. Use it through the C(rackscale.imex.imex_slurm) role or the
    C(rackscale.imex.slurm_topology) playbook.
  - Never edits C(slurm.conf).
  - Every C(scontrol) call is bounded by coreutils C(timeout).
options:
  path:
    description:
      - The topology file. Slurm reads C(topology.conf) (or, from 25.05, C(topology.yaml)) in the directory of
        C(slurm.conf).
    type: path
    default: /etc/slurm/topology.conf
  content:
    description: The whole file to write. Without it nothing is written and nothing is reconfigured.
    type: str
  backup:
    description: Keep a timestamped copy of the previous file when it changes.
    type: bool
    default: false
  reconfigure:
    description:
      - Run C(scontrol reconfigure) when the file changed (never in check mode), so that C(slurmctld) reads it.
    type: bool
    default: true
  read_nodes:
    description: Also read Slurm's node names (C(scontrol show nodes --future --oneliner)) into RV(nodes).
    type: bool
    default: false
  timeout:
    description:
      - Bound in seconds of each C(scontrol) call, and of the wait for C(slurmctld) to answer again after
        C(scontrol reconfigure).
    type: int
    default: 30
attributes:
  check_mode:
    description: Reads Slurm and predicts the write exactly; writes nothing and runs no C(scontrol reconfigure).
    support: full
  diff_mode:
    description: Returns the file content before and after.
    support: full
  idempotent:
    description: A second run with the same content reports no change and reconfigures nothing.
    support: full
requirements:
  - C(scontrol) of Slurm 23.11 or later (topology/block) on the target, reaching C(slurmctld).
  - coreutils C(timeout).
seealso:
  - module: rackscale.imex.imex_tray_info
"""

EXAMPLES = r"""
- name: What the controller's Slurm is and runs
  rackscale.imex.imex_slurm_topology:
    read_nodes: true
  register: slurm

- name: Use the role, which builds the blocks from the inventory and checks Slurm's answer
  ansible.builtin.import_role:
    name: rackscale.imex.imex_slurm
"""

RETURN = r"""
version:
  description: Slurm's version from C(scontrol --version), as numbers.
  returned: success
  type: list
  elements: int
  sample: [24, 11, 5]
version_text:
  description: Slurm's version as printed, without the package name.
  returned: success
  type: str
  sample: 24.11.5
config:
  description:
    - The main section of C(scontrol show config), C(Key = Value) lines as a mapping; C((null)) is null.
  returned: success
  type: dict
  sample: {TopologyPlugin: topology/block, PrologFlags: "Alloc,Contain", SLURM_CONF: /etc/slurm/slurm.conf}
topology_files:
  description:
    - Which of C(topology.conf) and C(topology.yaml) exist in the directory of C(slurm.conf) (SLURM_CONF of
      C(scontrol show config)); none when that is not an absolute path.
  returned: success
  type: list
  elements: str
  sample: [topology.conf]
nodes:
  description: Slurm's node names, FUTURE nodes included, in Slurm's order.
  returned: when O(read_nodes=true)
  type: list
  elements: str
  sample: [rack1-tray01, rack1-tray02]
topology:
  description:
    - The records of C(scontrol show topology), in the order printed; none when the topology is not
      topology/block.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The block's name; for an aggregated block the Slurm host list of the blocks it joins.
      type: str
    aggregated:
      description: Whether Slurm formed this block from neighbouring blocks.
      type: bool
    index:
      description: Slurm's BlockIndex.
      type: int
    nodes:
      description: The block's node names, expanded.
      type: list
      elements: str
    nodes_text:
      description: The block's nodes as printed (a Slurm host list).
      type: str
    size:
      description: Slurm's BlockSize of the block's level.
      type: int
    members:
      description: The names of the blocks an aggregated block joins; the block's own name otherwise.
      type: list
      elements: str
  sample:
    - {name: rack1, aggregated: false, index: 0, nodes: [rack1-tray01], nodes_text: rack1-tray01, size: 1,
       members: [rack1]}
topology_text:
  description: C(scontrol show topology) as printed.
  returned: success
  type: str
reconfigured:
  description: Whether C(scontrol reconfigure) ran.
  returned: when O(content) is given
  type: bool
  sample: true
existing:
  description:
    - The file at O(path) before any write, read without O(content); its first 64 KiB.
  returned: when O(content) is not given
  type: dict
  version_added: 0.3.0
  sample: {exists: true, size: 312, content: "# Slurm block topology (topology/block), written by rackscale.imex ..."}
  contains:
    exists:
      description: Whether a file is at O(path).
      type: bool
    size:
      description: Its size in bytes; V(0) when it does not exist.
      type: int
    content:
      description: Its first 64 KiB as text (undecodable bytes replaced); V(null) when it does not exist.
      type: str
backup_file:
  description: Path of the backup copy, when O(backup=true) and the file changed.
  returned: when a backup was made
  type: str
  sample: /etc/slurm/topology.conf.1234.2026-11-22@10:00:00~
diff:
  description: Content before and after, with C(before_header) and C(after_header) naming the file.
  returned: when diff mode is enabled and O(content) is given
  type: dict
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rackscale.imex.plugins.module_utils._bounded import BoundedRunner
from ansible_collections.rackscale.imex.plugins.module_utils._files import FileOpError, replace_file
from ansible_collections.rackscale.imex.plugins.module_utils._slurm import (
    parse_node_names,
    parse_show_config,
    parse_show_topology,
    parse_version,
)
from ansible_collections.rackscale.imex.plugins.module_utils._text import ParseError

# scontrol show topology cuts each line to SLURM_TOPO_LEN characters when it is set: never here.
TOPOLOGY_ENV = {'SLURM_TOPO_LEN': '1048576'}
RETRY_PAUSE_S = 1
# The files Slurm may read its topology from, beside slurm.conf; from 25.05 topology.yaml first.
TOPOLOGY_FILES = ('topology.conf', 'topology.yaml')
# How much of the file already at the path is returned: enough for any topology the inventory could replace.
EXISTING_MAX = 65536


class Scontrol:
    """scontrol calls, each bounded, failing the module with what scontrol said."""

    def __init__(self, module, seconds):
        module.run_command_environ_update = dict(module.run_command_environ_update or {}, **TOPOLOGY_ENV)
        self.module = module
        self.seconds = seconds
        self.runner = BoundedRunner(module)
        self.path = module.get_bin_path('scontrol', opt_dirs=['/usr/bin', '/usr/local/bin', '/opt/slurm/bin'])
        if not self.path:
            module.fail_json(msg='scontrol not found on PATH, /usr/bin, /usr/local/bin or /opt/slurm/bin: run this on '
                                 'a Slurm controller (or a host with the Slurm client that reaches slurmctld)')

    def call(self, *args):
        """(rc, out, err, hung) without failing."""
        return self.runner.run([self.path] + list(args), self.seconds)

    def run(self, *args):
        rc, out, err, hung = self.call(*args)
        if hung:
            self.module.fail_json(msg='scontrol %s did not answer within %d s' % (' '.join(args), self.seconds))
        if rc != 0:
            said = (err or out).strip()[:500]
            self.module.fail_json(msg='scontrol %s failed (rc %d): %s' % (' '.join(args), rc, said), rc=rc)
        return out


def read_topology(scontrol, module, wait_s):
    """(records, text) of scontrol show topology; after a reconfigure, waits up to wait_s for slurmctld."""
    deadline = time.monotonic() + wait_s
    while True:
        rc, out, err, hung = scontrol.call('show', 'topology')
        if rc == 0 and not hung:
            break
        if time.monotonic() >= deadline:
            module.fail_json(msg='scontrol show topology did not answer within %d s%s: %s'
                                 % (wait_s, ' of scontrol reconfigure' if wait_s else '', (err or out).strip()[:500]))
        time.sleep(RETRY_PAUSE_S)
    try:
        return parse_show_topology(out), out
    except ParseError as exc:
        module.fail_json(msg='scontrol show topology: %s' % exc.message, stdout=out)


def existing_file(path):
    """{exists, size, content}: the file at ``path`` before any write (its first EXISTING_MAX bytes)."""
    try:
        with open(path, 'rb') as handle:
            data = handle.read(EXISTING_MAX + 1)
            size = os.fstat(handle.fileno()).st_size
    except FileNotFoundError:
        return dict(exists=False, size=0, content=None)
    except OSError as exc:
        return dict(exists=True, size=0, content=None, error='%s cannot be read: %s' % (path, exc.strerror))
    return dict(exists=True, size=size, content=data[:EXISTING_MAX].decode('utf-8', 'replace'))


def topology_files(config):
    """Which of TOPOLOGY_FILES exist in the directory of slurm.conf, as `scontrol show config` names it."""
    conf = config.get('SLURM_CONF') or ''
    if not conf.startswith('/'):
        return []
    return [name for name in TOPOLOGY_FILES if os.path.exists(os.path.join(os.path.dirname(conf), name))]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', default='/etc/slurm/topology.conf'),
            content=dict(type='str'),
            backup=dict(type='bool', default=False),
            reconfigure=dict(type='bool', default=True),
            read_nodes=dict(type='bool', default=False),
            timeout=dict(type='int', default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params['timeout'] < 1:
        module.fail_json(msg='timeout must be at least 1 second, got %d' % params['timeout'])
    scontrol = Scontrol(module, params['timeout'])
    try:
        version = parse_version(scontrol.run('--version'))
        config = parse_show_config(scontrol.run('show', 'config'))
        nodes = parse_node_names(scontrol.run('show', 'nodes', '--future', '--oneliner')) \
            if params['read_nodes'] else None
    except ParseError as exc:
        module.fail_json(msg=exc.message)
    result = dict(changed=False, version=list(version['version']), version_text=version['text'], config=config,
                  topology_files=topology_files(config))
    if nodes is not None:
        result['nodes'] = nodes

    if params['content'] is None:
        result['existing'] = existing_file(params['path'])
        result['topology'], result['topology_text'] = read_topology(scontrol, module, 0)
        module.exit_json(**result)

    path = params['path']
    try:
        outcome = replace_file(module, path, params['content'], backup=params['backup'])
    except FileOpError as exc:
        module.fail_json(msg=str(exc), **result)
    result['changed'] = outcome['changed']
    if outcome['backup_file']:
        result['backup_file'] = outcome['backup_file']
    if module._diff:
        result['diff'] = outcome['diff']
    reconfigure = outcome['changed'] and params['reconfigure'] and not module.check_mode
    if reconfigure:
        rc, out, err, hung = scontrol.call('reconfigure')
        if hung or rc != 0:
            module.fail_json(msg='%s was written, but scontrol reconfigure %s: %s' % (
                path, 'did not answer within %d s' % params['timeout'] if hung else 'failed (rc %d)' % rc,
                (err or out).strip()[:500]), **result)
    result['reconfigured'] = reconfigure
    result['topology'], result['topology_text'] = read_topology(scontrol, module,
                                                                params['timeout'] if reconfigure else 0)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
