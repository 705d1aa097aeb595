#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: imex_channel
short_description: Manage an NVIDIA IMEX channel device node and the boot-time channel0 option
version_added: 0.1.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Creates, repairs or removes the character device C(<device_dir>/channel<N>) that grants
    access to IMEX channel N. The major number is read from C(/proc/devices)
    (C(nvidia-caps-imex-channels), it differs per node), the minor number is the channel number.
  - For channel 0 it can also make the driver create the channel at every module load, through
    a dedicated modprobe drop-in holding C(options nvidia NVreg_CreateImexChannel0=1).
    Other files modprobe reads (every directory of O(modprobe_dirs)) that set this option to a
    different value make the module fail with the file and line, because the outcome at boot would
    depend on file names; so does a different value on the kernel command line (O(proc_cmdline)).
  - Device nodes do not survive a reboot. Channels other than 0 must be created again after
    every boot (or by the scheduler, for example Slurm's C(switch/nvidia_imex)).
  - IMEX channels are global across the IMEX domain; channel N must grant access to the same
    users on every node.
options:
  channel:
    description:
      - IMEX channel number, the minor number of the device.
      - Must be below the driver's C(ImexChannelCount) (2048 unless changed) when O(immediate=true).
    type: int
    default: 0
  state:
    description:
      - V(present) creates or repairs the node (with O(immediate=true)) and, when persistent,
        writes the drop-in.
      - V(absent) removes the node (with O(immediate=true)) and, when persistent, removes the drop-in.
    type: str
    choices: [present, absent]
    default: present
  persistent:
    description:
      - Make the channel exist after a reboot too.
      - For channel 0, manage the boot-time C(NVreg_CreateImexChannel0) drop-in at O(modprobe_path).
        A changed drop-in only takes effect after the initramfs is rebuilt and the node reboots
        (or the nvidia module is reloaded); see RV(initramfs_rebuild_needed) and RV(reboot_needed).
      - For any other channel, which the driver never makes by itself, write the boot entry
        C(<boot_dir>/channel<N>) (C(<N> <owner> <group> <mode>)) that the C(rackscale-imex-channels)
        boot unit of the rackscale.imex.imex_channels role reads; with O(state=absent) remove it.
      - Defaults to V(true) for channel 0 and V(false) for every other channel. With V(false) an
        existing drop-in or boot entry is left alone.
    type: bool
  immediate:
    description:
      - Create, repair or remove the device node now.
      - Set to V(false) when building an image where the driver is not loaded; then only the
        drop-in is managed and C(/proc/devices) is not read.
    type: bool
    default: true
  owner:
    description: Owner (name or uid) of the device node; access to the channel is governed by the node's owner, group and mode.
    type: str
    default: root
  group:
    description: Group (name or gid) of the device node.
    type: str
    default: root
  mode:
    description:
      - Octal mode of the device node, for example V('0660').
      - Defaults to V('0666') for channel 0, the mode the driver itself gives channel0, and to
        V('0600') for every other channel, so that a tenant channel is never world-accessible
        by accident.
    type: str
  modprobe_path:
    description:
      - The drop-in file holding only the C(NVreg_CreateImexChannel0) option line (and a comment).
      - The module refuses to replace or remove a file that holds other settings; it never appends
        to files with other options.
    type: path
    default: /etc/modprobe.d/nvidia-imex.conf
  boot_dir:
    description: Directory of the boot entries of persistent channels other than 0.
    type: path
    version_added: 0.2.0
    default: /etc/rackscale-imex/channels.d
  modprobe_dirs:
    description:
      - The directories modprobe reads, highest precedence first, whose C(*.conf) files are scanned for
        conflicting C(NVreg_CreateImexChannel0) values (modprobe.d(5)). A file name found in an earlier
        directory hides the file of that name in the later ones (a link to C(/dev/null) masks it); the
        files left are applied in name order, whichever directory holds them.
    type: list
    elements: path
    aliases: [modprobe_dir]
    version_added: 0.3.0
    default: [/etc/modprobe.d, /run/modprobe.d, /usr/local/lib/modprobe.d, /usr/lib/modprobe.d, /lib/modprobe.d]
  proc_cmdline:
    description:
      - The kernel command line, scanned for C(nvidia.NVreg_CreateImexChannel0=); modprobe applies such a
        word after every modprobe.d file, so a different value there is refused like a conflicting file.
    type: path
    version_added: 0.3.0
    default: /proc/cmdline
  proc_devices:
    description: Where to read the character device majors from.
    type: path
    default: /proc/devices
  params_path:
    description: The driver's parameter file; C(ImexChannelCount) is read from it when present (else 2048).
    type: path
    default: /proc/driver/nvidia/params
  device_dir:
    description: Directory of the channel nodes; created (mode 0755, root) when missing.
    type: path
    default: /dev/nvidia-caps-imex-channels
attributes:
  check_mode:
    description: Can run in check mode and return an exact prediction of the changes without modifying the target.
    support: full
  diff_mode:
    description: Returns the drop-in content and a description of the device node before and after.
    support: full
  idempotent:
    description: A second run with the same options reports no change.
    support: full
notes:
  - Needs C(CAP_MKNOD) (root) to create device nodes.
  - Slurm's C(switch/nvidia_imex) plugin empties O(device_dir) when slurmd starts and reserves
    channel 0; do not manage channels with this module on nodes where that plugin manages them.
seealso:
  - name: IMEX channels (NVIDIA IMEX guide)
    description: How channels are created and why they govern memory sharing.
    link: https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/imexchannels.html
"""

EXAMPLES = r"""
- name: Channel 0 for everyone, now and after every boot
  rackscale.imex.imex_channel:
  register: channel0

- name: Rebuild the initramfs when the boot-time option changed
  ansible.builtin.command:
    argv: "{{ channel0.initramfs_rebuild_command }}"
  changed_when: true
  when: channel0.initramfs_rebuild_needed

- name: Prepare channel 0 in an image build (driver not loaded)
  rackscale.imex.imex_channel:
    immediate: false

- name: Channel 5 for one tenant group only
  rackscale.imex.imex_channel:
    channel: 5
    group: tenant-a
    mode: "0660"

- name: No world-accessible channel 0, now and at boot
  rackscale.imex.imex_channel:
    state: absent
"""

RETURN = r"""
device:
  description: Path of the channel device node.
  returned: always
  type: str
  sample: /dev/nvidia-caps-imex-channels/channel0
major:
  description:
    - Major number of C(nvidia-caps-imex-channels) read from O(proc_devices).
    - Null when the node was not created now (O(immediate=false) or O(state=absent)).
  returned: always
  type: int
  sample: 234
minor:
  description: Minor number of the node, equal to O(channel).
  returned: always
  type: int
  sample: 0
initramfs_rebuild_needed:
  description:
    - The drop-in was (or in check mode would be) written or removed.
    - Rebuild the initramfs (C(update-initramfs -u) or C(dracut --force)) so it applies at boot.
  returned: always
  type: bool
  sample: true
initramfs_rebuild_command:
  description:
    - When RV(initramfs_rebuild_needed) is true, the argument list that rebuilds every kernel's
      initramfs on this node (C(update-initramfs -u -k all) where it exists, else
      C(dracut --force --regenerate-all)), found on the node so the caller needs no facts.
    - Null when no rebuild is needed, or when neither tool is installed (then a warning says so).
  returned: always
  type: list
  elements: str
  sample: [/usr/sbin/update-initramfs, -u, -k, all]
reboot_needed:
  description:
    - The boot-time change only takes effect after a reboot (or module reload) and the node does
      not match the wanted state now, for example O(immediate=false) in an image build.
  returned: always
  type: bool
  sample: false
diff:
  description:
    - One entry per managed object, drop-in first, then the device node; each has C(before),
      C(after), C(before_header) and C(after_header). The device entry describes type,
      major, minor, owner, group and mode.
  returned: when diff mode is enabled
  type: list
  elements: dict
  sample:
    - before_header: /dev/nvidia-caps-imex-channels/channel0 (device node)
      after_header: /dev/nvidia-caps-imex-channels/channel0 (device node)
      before: "absent\n"
      after: "type: character device\nmajor: 234\nminor: 0\nowner: root (0)\ngroup: root (0)\nmode: 0666\n"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rackscale.imex.plugins.module_utils._channel import (
    MODPROBE_DIRS,
    PATH_DEFAULTS,
    ChannelError,
    channel_options,
    ensure_channel,
)
from ansible_collections.rackscale.imex.plugins.module_utils._files import FileOpError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            channel=dict(type="int", default=0),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            persistent=dict(type="bool"),
            immediate=dict(type="bool", default=True),
            owner=dict(type="str", default="root"),
            group=dict(type="str", default="root"),
            mode=dict(type="str"),
            modprobe_dirs=dict(type="list", elements="path", default=list(MODPROBE_DIRS), aliases=["modprobe_dir"]),
            **{name: dict(type="path", default=default) for name, default in PATH_DEFAULTS.items()}
        ),
        supports_check_mode=True,
    )
    params = module.params
    channel = params["channel"]
    persistent, mode = channel_options(channel, params["persistent"], params["mode"])
    try:
        result = ensure_channel(
            module,
            channel=channel,
            state=params["state"],
            persistent=persistent,
            immediate=params["immediate"],
            owner=params["owner"],
            group=params["group"],
            mode=mode,
            modprobe_dirs=params["modprobe_dirs"],
            **{name: params[name] for name in PATH_DEFAULTS}
        )
    except (ChannelError, FileOpError) as exc:
        module.fail_json(msg=str(exc))
    if not module._diff:
        result.pop("diff")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
