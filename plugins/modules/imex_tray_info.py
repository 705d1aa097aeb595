#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
module: imex_tray_info
short_description: Read a tray once for IMEX, its NVLink fabric registration and the state of its IMEX files and services
version_added: 0.2.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - One module run per tray gives a play everything it compares before changing anything, so a
    re-run of a healthy rack writes nothing and runs no write module there.
  - Runs C(nvidia-smi -q) and reads the C(Fabric) block of every GPU (State, Status, CliqueId,
    ClusterUUID, Health Summary).
  - A tray is ready for IMEX (RV(fabric_ok)) when every GPU has State C(Completed) and Status
    C(Success), a non-zero CliqueId and a non-zero ClusterUUID, and all GPUs agree on both.
  - ClusterUUID identifies the NVLink domain (rack) and CliqueId the NVLink partition; all trays of
    one IMEX domain must report the same pair. Compare RV(cluster_uuid) and RV(clique_id) across trays.
  - Describes each file of O(files) (checksum, text, owner, group, mode) and reports the state of each
    systemd unit of O(services), for example so that M(rackscale.imex.imex_nodes_config) and
    M(rackscale.imex.imex_config) run only where they would change something.
  - Read-only; changes nothing on the target.
options:
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) binary. By default it is searched on E(PATH) and in C(/usr/bin).
    type: path
  strict:
    description:
      - Fail when the tray is not ready (GPUs disagree, State not C(Completed), Status not C(Success),
        CliqueId 0 or N/A, ClusterUUID all-zero or N/A). The message lists every problem.
      - With V(false) the module succeeds and reports RV(fabric_ok=false) and RV(problems).
    type: bool
    default: true
  files:
    description:
      - Files to describe in RV(files). Symbolic links are followed.
    type: list
    elements: path
    default: []
  services:
    description:
      - systemd units whose state (C(systemctl is-active)) to report in RV(services).
    type: list
    elements: str
    default: []
  compute_apps:
    description:
      - Also list the GPU compute processes (C(nvidia-smi --query-compute-apps)) in RV(compute_apps),
        so that a caller can tell whether a restart of the IMEX daemon would cut running work.
    type: bool
    default: false
  imex_version:
    description:
      - Also report the release of the installed C(nvidia-imex) (C(nvidia-imex --version)) in
        RV(imex_version), to compare with RV(driver_version).
    type: bool
    default: false
  slurm_state:
    description:
      - Also report this node's Slurm state (C(scontrol show node <short host name>)) in RV(slurm_state)
        when C(scontrol) is installed.
    type: bool
    default: false
  channels:
    description:
      - IMEX channels to check against what M(rackscale.imex.imex_channel) would make of them, with the
        same options (the path options are that module's defaults, but for O(channels_modprobe_path)).
      - For each, RV(channels) says whether M(rackscale.imex.imex_channel) would change anything, found by
        running its own code in check mode, so that a caller runs it only where it would.
    type: list
    elements: dict
    default: []
    suboptions:
      channel:
        description: Channel number.
        type: int
        required: true
      state:
        description: As M(rackscale.imex.imex_channel) takes it.
        type: str
        choices: [present, absent]
        default: present
      persistent:
        description: As M(rackscale.imex.imex_channel) takes it.
        type: bool
      immediate:
        description: As M(rackscale.imex.imex_channel) takes it.
        type: bool
        default: true
      owner:
        description: As M(rackscale.imex.imex_channel) takes it (default C(root)).
        type: str
      group:
        description: As M(rackscale.imex.imex_channel) takes it (default C(root)).
        type: str
      mode:
        description: As M(rackscale.imex.imex_channel) takes it.
        type: str
  channels_modprobe_path:
    description: The channel0 drop-in, as O(rackscale.imex.imex_channel#module:modprobe_path).
    type: path
    default: /etc/modprobe.d/nvidia-imex.conf
extends_documentation_fragment:
  - rackscale.imex._read_only
notes:
  - A Health Summary other than C(Healthy) on a registered GPU is reported as a warning; it does not
    make RV(fabric_ok) false because IMEX can still run.
  - Fabric registration is done by the NVLink fabric (NMX / fabric manager). A GPU stuck in
    C(In Progress) or with Status C(Insufficient Resources) cannot be fixed by IMEX configuration.
  - Needs coreutils C(timeout), which stops C(nvidia-smi) after 120 seconds so that a stuck GPU cannot
    hang the play, and C(systemctl is-active) after 30 seconds the same way.
  - RV(files) and RV(services) are what the tray held when it was read; a play that decides on them
    acts on that moment.
seealso:
  - module: rackscale.imex.imex_status
  - module: rackscale.imex.imex_nodes_config
  - module: rackscale.imex.imex_config
"""

EXAMPLES = r"""
- name: Check that every GPU of the tray is registered with the NVLink fabric
  rackscale.imex.imex_tray_info:
  register: fabric

- name: All trays of the rack share one NVLink domain and partition
  ansible.builtin.assert:
    that:
      - groups['rack1'] | map('extract', hostvars, ['fabric', 'cluster_uuid']) | unique | length == 1
      - groups['rack1'] | map('extract', hostvars, ['fabric', 'clique_id']) | unique | length == 1
  run_once: true

- name: Report without failing, with the daemon's files and service
  rackscale.imex.imex_tray_info:
    strict: false
    files:
      - /etc/nvidia-imex/nodes_config.cfg
      - /etc/nvidia-imex/config.cfg
    services:
      - nvidia-imex
  register: tray_info
"""

RETURN = r"""
driver_version:
  description: The driver release C(nvidia-smi -q) reports; V(null) when it prints none.
  returned: success
  type: str
  sample: 580.95.09
imex_version:
  description: The release of the installed C(nvidia-imex), with O(imex_version); V(null) when it cannot be read.
  returned: when O(imex_version) is true
  type: str
  sample: 580.95.09
compute_apps:
  description:
    - The GPU compute processes of the tray, with O(compute_apps); an empty list when none runs.
    - V(null) when they could not be read (the query failed, hung or printed something unreadable).
  returned: when O(compute_apps) is true
  type: list
  elements: dict
  sample: [{pid: 4242, name: python3, used_memory: 40960 MiB}]
slurm_state:
  description: This node's Slurm state, for example C(ALLOCATED+DRAIN); V(null) without C(scontrol) or when it gave none.
  returned: when O(slurm_state) is true
  type: str
  sample: IDLE
gpus:
  description: Fabric information of every GPU, in C(nvidia-smi) order. N/A values are V(null).
  returned: success
  type: list
  elements: dict
  contains:
    index:
      description: Position of the GPU in the C(nvidia-smi -q) output (0-based).
      type: int
      sample: 0
    bus_id:
      description: PCI bus id of the GPU.
      type: str
      sample: "00000008:01:00.0"
    state:
      description: Fabric registration state (C(Completed), C(In Progress), C(Not Started), C(Not Supported)).
      type: str
      sample: Completed
    status:
      description: Fabric registration result (C(Success), C(Insufficient Resources), ...).
      type: str
      sample: Success
    clique_id:
      description:
        - NVLink partition (clique) id; C(32766) is the default full-rack partition.
        - An integer; kept as the printed text if the driver ever prints something non-numeric.
      type: int
      sample: 32766
    cluster_uuid:
      description: NVLink domain (rack) identity.
      type: str
      sample: 5f0a8c2e-1b3d-4e6f-8a9b-0c1d2e3f4a5b
    health:
      description: Fabric Health Summary (C(Healthy), C(Unhealthy), C(Limited Capacity)).
      type: str
      sample: Healthy
cluster_uuid:
  description:
    - The ClusterUUID shared by every GPU.
    - V(null) unless every GPU completed registration and all report the same non-zero value.
  returned: success
  type: str
  sample: 5f0a8c2e-1b3d-4e6f-8a9b-0c1d2e3f4a5b
clique_id:
  description:
    - The CliqueId shared by every GPU.
    - V(null) unless every GPU completed registration and all report the same non-zero value.
  returned: success
  type: int
  sample: 32766
fabric_ok:
  description: True when RV(problems) is empty.
  returned: success
  type: bool
  sample: true
problems:
  description: One sentence per problem, naming the GPUs.
  returned: success
  type: list
  elements: str
  sample:
    - "GPUs 0-3: fabric state is In Progress, not Completed (the GPU has not finished registering with the
       NVLink fabric; wait, or check the NVLink fabric manager / NMX)"
channels:
  description:
    - Each channel of O(channels) (as a string) mapped to C({changed}), whether
      M(rackscale.imex.imex_channel) would change it, or to C({error}), why it would fail.
  returned: when O(channels) is given
  type: dict
  sample: {"0": {"changed": false}, "5": {"changed": true}}
files:
  description: Each path of O(files) mapped to its description.
  returned: success
  type: dict
  sample:
    /etc/nvidia-imex/nodes_config.cfg:
      exists: true
      sha256: 4b2c0b0c8e6f1f0ec5bb2a33fa0cf0b1a4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9
      content: "198.18.1.1\n198.18.1.2\n"
      uid: 0
      gid: 0
      mode: "0644"
      error: null
  contains:
    exists:
      description: The path is a file (a link is described by its target).
      type: bool
    sha256:
      description: SHA-256 of the file's bytes; null when it does not exist.
      type: str
    content:
      description: The file's text; null when it does not exist or is not UTF-8.
      type: str
    uid:
      description: Owner of the file.
      type: int
    gid:
      description: Group of the file.
      type: int
    mode:
      description: Permission bits, in octal.
      type: str
    error:
      description: Why the file could not be read (then the other keys are null), for example not a regular file.
      type: str
services:
  description:
    - Each unit of O(services) mapped to the first word C(systemctl is-active) printed (C(active),
      C(inactive), C(failed), C(activating), ...).
    - Null when C(systemctl) is not installed or did not answer.
  returned: success
  type: dict
  sample: {nvidia-imex: active}
raw:
  description: Output of nvidia-smi that could not be parsed.
  returned: when the output could not be parsed
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
import socket

from ansible_collections.rackscale.imex.plugins.module_utils import _activity, _ctl, _fabric
from ansible_collections.rackscale.imex.plugins.module_utils._bounded import BoundedRunner
from ansible_collections.rackscale.imex.plugins.module_utils._channel import (
    MODPROBE_PATH,
    PATH_DEFAULTS,
    predict_channels,
)
from ansible_collections.rackscale.imex.plugins.module_utils._files import describe_file

_SMI_TIMEOUT_SECONDS = 120
_SYSTEMCTL_TIMEOUT_SECONDS = 30


def service_states(module, runner, units):
    """Map each unit to the state systemctl is-active prints, or None when it cannot be asked."""
    states = dict((unit, None) for unit in units)
    systemctl = module.get_bin_path('systemctl', opt_dirs=['/usr/bin', '/bin']) if units else None
    if not systemctl:
        return states
    for unit in units:
        # is-active exits non-zero for every state but active; the state is on stdout either way.
        _rc, out, _err, hung = runner.run([systemctl, 'is-active', '--', unit], _SYSTEMCTL_TIMEOUT_SECONDS)
        words = out.split()
        if words and not hung:
            states[unit] = words[0]
    return states


def compute_apps(runner, smi):
    """The tray's GPU compute processes, or None when they cannot be read."""
    rc, out, _err, hung = runner.run([smi] + _activity.COMPUTE_APPS_QUERY, _SMI_TIMEOUT_SECONDS)
    if hung or rc != 0:
        return None
    try:
        return _activity.parse_compute_apps(out)
    except _activity.ParseError:
        return None


def imex_version(module, runner):
    """The release of the installed nvidia-imex, or None when it cannot be read."""
    imex = module.get_bin_path('nvidia-imex', opt_dirs=['/usr/bin', '/usr/sbin'])
    if not imex:
        return None
    rc, out, _err, hung = runner.run([imex, '--version'], _SYSTEMCTL_TIMEOUT_SECONDS)
    return None if hung or rc != 0 else _ctl.parse_imex_version(out)


def slurm_state(module, runner):
    """This node's Slurm state, or None without scontrol or an answer."""
    scontrol = module.get_bin_path('scontrol', opt_dirs=['/usr/bin', '/usr/local/bin'])
    if not scontrol:
        return None
    node = socket.gethostname().split('.')[0]
    rc, out, _err, hung = runner.run([scontrol, 'show', 'node', node, '--oneliner'], _SYSTEMCTL_TIMEOUT_SECONDS)
    return None if hung or rc != 0 else _activity.parse_slurm_state(out)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type='path'),
            strict=dict(type='bool', default=True),
            files=dict(type='list', elements='path', default=[]),
            services=dict(type='list', elements='str', default=[]),
            compute_apps=dict(type='bool', default=False),
            slurm_state=dict(type='bool', default=False),
            imex_version=dict(type='bool', default=False),
            channels=dict(type='list', elements='dict', default=[], options=dict(
                channel=dict(type='int', required=True),
                state=dict(type='str', choices=['present', 'absent'], default='present'),
                persistent=dict(type='bool'),
                immediate=dict(type='bool', default=True),
                owner=dict(type='str'),
                group=dict(type='str'),
                mode=dict(type='str'),
            )),
            channels_modprobe_path=dict(type='path', default=MODPROBE_PATH),
        ),
        supports_check_mode=True,
    )
    smi = module.params['nvidia_smi'] or module.get_bin_path('nvidia-smi', opt_dirs=['/usr/bin'])
    if not smi:
        module.fail_json(msg='nvidia-smi not found on PATH or in /usr/bin: install the NVIDIA driver '
                             'utilities or set nvidia_smi')

    runner = BoundedRunner(module)
    rc, out, err, hung = runner.run([smi, '-q'], _SMI_TIMEOUT_SECONDS)
    if hung:
        module.fail_json(msg='%s -q did not finish within %d s and was stopped' % (smi, _SMI_TIMEOUT_SECONDS),
                         rc=rc, stdout=out, stderr=err)
    if rc != 0:
        module.fail_json(msg='%s -q failed with rc %d: %s' % (smi, rc, (err or out).strip()[:1000]),
                         rc=rc, stdout=out, stderr=err)
    try:
        gpus = _fabric.parse_smi_query(out)
    except _fabric.SmiParseError as error:
        module.fail_json(msg='cannot read the output of %s -q: %s' % (smi, error.message), raw=error.raw)

    summary = _fabric.summarise_tray(gpus)
    for warning in summary.pop('warnings'):
        module.warn(warning)
    result = dict(changed=False,
                  files=dict((path, describe_file(path)) for path in module.params['files']),
                  services=service_states(module, runner, module.params['services']),
                  driver_version=_fabric.parse_driver_version(out),
                  **summary)
    if module.params['imex_version']:
        result['imex_version'] = imex_version(module, runner)
    if module.params['compute_apps']:
        result['compute_apps'] = compute_apps(runner, smi)
    if module.params['slurm_state']:
        result['slurm_state'] = slurm_state(module, runner)
    if module.params['channels']:
        paths = dict(PATH_DEFAULTS)
        paths['modprobe_path'] = module.params['channels_modprobe_path']
        result['channels'] = predict_channels(module, module.params['channels'], **paths)
    if module.params['strict'] and not summary['fabric_ok']:
        module.fail_json(msg='GPU fabric not ready for IMEX: ' + '; '.join(summary['problems']), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
