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
  - Describes each file of O(files) (checksum, text, change time, owner, group, mode) and reports the
    state of each systemd unit of O(services) and since when its main process runs, for example so
    that M(rackscale.imex.imex_nodes_config) and M(rackscale.imex.imex_config) run only where they
    would change something, and so that a daemon started before its config last changed is seen.
  - With O(fabric=false) it skips C(nvidia-smi -q), for a cheap read of what runs on the tray right
    now (O(compute_apps), O(slurm_state), O(services)), for example just before a restart.
  - Read-only; changes nothing on the target.
options:
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) binary. By default it is searched on E(PATH) and in C(/usr/bin).
    type: path
  fabric:
    description:
      - Read the NVLink fabric registration of every GPU (C(nvidia-smi -q)) and report RV(fabric_ok),
        RV(problems), RV(gpus), RV(cluster_uuid), RV(clique_id) and RV(driver_version).
      - With V(false), C(nvidia-smi -q) does not run and none of those keys is returned; O(strict) is
        then ignored, and C(nvidia-smi) is needed only for O(compute_apps).
    type: bool
    default: true
    version_added: 0.3.0
  strict:
    description:
      - Fail when the tray is not ready (GPUs disagree, State not C(Completed), Status not C(Success),
        CliqueId 0 or N/A, ClusterUUID all-zero or N/A). The message lists every problem.
      - With V(false) the module succeeds and reports RV(fabric_ok=false) and RV(problems).
      - Ignored with O(fabric=false).
    type: bool
    default: true
  files:
    description:
      - Files to describe in RV(files), content included. Symbolic links are followed.
    type: list
    elements: path
    default: []
  stat_files:
    description:
      - Files to describe in RV(stat_files) without reading them (existence, change time, owner,
        group, mode), for files whose content must never be in a result, such as TLS private keys.
        Symbolic links are followed.
    type: list
    elements: path
    default: []
    version_added: 0.3.0
  presence:
    description:
      - Paths whose presence to report in RV(presence), whatever is there (a file, a directory, a link),
        for what a role removes where it is present.
    type: list
    elements: path
    default: []
    version_added: 0.4.0
  certificate_files:
    description:
      - PEM files of public certificates (a CA bundle, a certificate with its chain) whose certificates
        to describe in RV(certificate_files) by their SHA-256 fingerprints, so that the controller can
        compare the CA bundle a tray holds with a new one. Only certificates are read from them; never
        give a key file here. Symbolic links are followed.
    type: list
    elements: path
    default: []
    version_added: 0.4.0
  hosts_file:
    description:
      - The hosts file whose managed block of slot names (between the C(rackscale.imex node names) markers)
        to describe in RV(hosts_block), for a node list that names slots (C(imex_node_names)).
    type: path
    version_added: 0.4.0
  hosts_names:
    description:
      - Slot names whose lines outside the managed block of O(hosts_file) to name in RV(hosts_block)
        (the resolver could answer with such a line instead of the block's).
    type: list
    elements: str
    default: []
    version_added: 0.4.0
  services:
    description:
      - systemd units whose state to report in RV(services), and for those that are active when their
        main process started in RV(services_started), and which instance runs and what it loaded in
        RV(services_instance). One C(systemctl show) per unit answers all three, from one moment.
    type: list
    elements: str
    default: []
  service_enabled:
    description:
      - Also report, for each unit of O(services), what C(systemctl is-enabled) says of it in
        RV(services_enabled) (C(enabled), C(disabled), C(masked), ...), for example to check that the
        daemon is left to a Slurm prolog (not enabled, not masked).
    type: bool
    default: false
    version_added: 0.3.0
  channel_device:
    description:
      - Also report the character device major of C(nvidia-caps-imex-channels) in C(/proc/devices) in
        RV(channel_major), which the NVIDIA driver registers and which channels (Slurm's
        C(switch/nvidia_imex) too) need.
    type: bool
    default: false
    version_added: 0.3.0
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
  daemon_release:
    description:
      - Also report which IMEX release the running daemon of O(daemon_service) runs, in
        RV(daemon_release), to compare with RV(imex_version). A package upgraded under a running
        daemon leaves it on the old release (its peers see C(!V!)) until it restarts.
      - Read from the daemon process's own executable (C(/proc/<MainPID>/exe)), the installed file
        or a replaced C(nvidia-imex) binary asked C(--version); else from the daemon's start line in
        the log file its O(daemon_config) names (C(IMEX version <release> is running), logged at
        C(LOG_LEVEL) 4).
    type: bool
    default: false
    version_added: 0.3.0
  daemon_service:
    description: The systemd unit of the IMEX daemon, for O(daemon_release).
    type: str
    default: nvidia-imex
    version_added: 0.3.0
  daemon_config:
    description: The daemon's C(config.cfg), whose C(LOG_FILE_NAME) and C(LOG_LEVEL) O(daemon_release) reads.
    type: path
    default: /etc/nvidia-imex/config.cfg
    version_added: 0.3.0
  slurm_state:
    description:
      - Also report this node's Slurm state (C(scontrol show node <slurm_node_name> --oneliner)) in
        RV(slurm) and RV(slurm_state).
    type: bool
    default: false
  slurm_config:
    description:
      - Also report what Slurm's configuration says of the IMEX channels and of prologs and epilogs
        (C(scontrol show config), one call) in RV(slurm_config), where C(scontrol) is installed.
      - C(scontrol show config) asks C(slurmctld); when it cannot be reached, RV(slurm_config.error)
        says so and the module still succeeds.
    type: bool
    default: false
    version_added: 0.3.0
  slurmd_version:
    description:
      - Also report the release of this tray's C(slurmd) (C(slurmd -V), which does not ask C(slurmctld)) in
        RV(slurmd_version).
    type: bool
    default: false
    version_added: 0.4.0
  channel_count:
    description:
      - Also report the loaded driver's C(NVreg_ImexChannelCount) in RV(channel_count), read from the
        first file of O(channel_count_paths) that shows it.
    type: bool
    default: false
    version_added: 0.3.0
  channel_count_paths:
    description:
      - Where O(channel_count) looks, in order. A file named C(NVreg_ImexChannelCount) holds the bare
        number (sysfs); any other is read as C(/proc/driver/nvidia/params), whose line is C(ImexChannelCount) and the number.
    type: list
    elements: path
    default: [/proc/driver/nvidia/params, /sys/module/nvidia/parameters/NVreg_ImexChannelCount]
    version_added: 0.3.0
  slurm_node_name:
    description:
      - The Slurm NodeName of this tray, asked of C(scontrol) with O(slurm_state=true); it can differ
        from the host name on a cluster whose C(slurm.conf) names its nodes otherwise.
      - Default the tray's short host name (up to the first dot).
      - Must be one node name (no blanks, commas or brackets, not starting with C(-)).
    type: str
    version_added: 0.3.0
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
  - A Health Summary other than C(Healthy) on a registered GPU is reported in RV(fabric_warnings); it does
    not make RV(fabric_ok) false because IMEX can still run.
  - Fabric registration is done by the NVLink fabric (NMX / fabric manager). A GPU stuck in
    C(In Progress) or with Status C(Insufficient Resources) cannot be fixed by IMEX configuration.
  - Needs coreutils C(timeout), which stops C(nvidia-smi) after 120 seconds so that a stuck GPU cannot
    hang the play, and C(systemctl), C(scontrol) and C(nvidia-imex --version) after 30 seconds the same way.
  - RV(files), RV(stat_files) and RV(services) are what the tray held when it was read; a play that
    decides on them acts on that moment.
  - A daemon whose RV(services_instance) record is of its own instance runs the content the record
    holds, to compare with the RV(files) C(sha256). Without one (a daemon started by hand or by an
    older release of the collection), a daemon that began to start (RV(services_instance.inactive_exit))
    before the RV(files) C(ctime) of its config may run an older config than the one on disk. Both
    times come from the tray's own clock.
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
    stat_files:
      - /etc/nvidia-imex/tls/server.key
    services:
      - nvidia-imex
  register: tray_info

- name: The daemon runs an older config than the one on disk
  ansible.builtin.debug:
    msg: nvidia-imex started before its config last changed
  when:
    - tray_info.services_started['nvidia-imex'] is not none
    - tray_info.files['/etc/nvidia-imex/config.cfg'].ctime is not none
    - tray_info.services_started['nvidia-imex'] < tray_info.files['/etc/nvidia-imex/config.cfg'].ctime

- name: What runs here right now, without reading the fabric
  rackscale.imex.imex_tray_info:
    fabric: false
    compute_apps: true
    slurm_state: true
    slurm_node_name: gpu-a07
    services:
      - nvidia-imex
  register: tray_activity
"""

RETURN = r"""
driver_version:
  description: The driver release C(nvidia-smi -q) reports; V(null) when it prints none.
  returned: when O(fabric) is true (the default)
  type: str
  sample: 580.95.09
imex_version:
  description: The release of the installed C(nvidia-imex), with O(imex_version); V(null) when it cannot be read.
  returned: when O(imex_version) is true
  type: str
  sample: 580.95.09
daemon_release:
  description: Which IMEX release the running daemon runs, with O(daemon_release).
  returned: when O(daemon_release) is true
  type: dict
  version_added: 0.3.0
  sample: {running: 580.105.08, source: log, executable: /usr/bin/python3.11, replaced: false, unknown: null}
  contains:
    running:
      description: The release the running daemon runs; V(null) when it does not run or this cannot be told.
      type: str
    source:
      description: Where RV(daemon_release.running) was read, C(executable) or C(log); V(null) without it.
      type: str
    executable:
      description: What C(/proc/<MainPID>/exe) of the daemon reads; V(null) when it could not be read.
      type: str
    replaced:
      description:
        - Whether the file the daemon runs was removed or replaced after it started (C(/proc/<MainPID>/exe)
          ends in C( (deleted))); V(null) when that could not be read.
      type: bool
    unknown:
      description: Why RV(daemon_release.running) is V(null) although the daemon runs; V(null) otherwise.
      type: str
compute_apps:
  description:
    - The GPU compute processes of the tray, with O(compute_apps); an empty list when none runs.
    - V(null) when they could not be read (the query failed, hung or printed something unreadable).
  returned: when O(compute_apps) is true
  type: list
  elements: dict
  sample: [{pid: 4242, name: python3, used_memory: 40960 MiB}]
slurm_state:
  description:
    - This node's Slurm state, for example C(ALLOCATED+DRAIN); V(null) without C(scontrol) or when it gave none.
    - The same as RV(slurm.state), kept for callers of earlier releases.
  returned: when O(slurm_state) is true
  type: str
  sample: IDLE
slurm:
  description: What C(scontrol show node <slurm_node_name> --oneliner) said of this node.
  returned: when O(slurm_state) is true
  type: dict
  version_added: 0.3.0
  sample: {installed: true, node: rack1-tray02, state: MIXED+DRAIN, error: null}
  contains:
    installed:
      description: Whether C(scontrol) is installed; without it RV(slurm.state) and RV(slurm.error) are V(null).
      type: bool
    node:
      description: The node name asked (O(slurm_node_name), or the short host name).
      type: str
    state:
      description: The node's State=, for example C(IDLE) or C(ALLOCATED+DRAIN); V(null) when C(scontrol) gave none.
      type: str
    error:
      description:
        - Why there is no state although C(scontrol) is installed, in one line of at most 300 characters;
          V(null) when there is a state or no C(scontrol).
        - 'The first line C(scontrol) printed when it exited non-zero, for example C(Node X not found) for
          a name that is not a Slurm NodeName, or C(slurm_load_node error: Unable to contact slurm controller)
          when C(slurmctld) is unreachable; else that it hung, or answered without State=.'
      type: str
gpus:
  description: Fabric information of every GPU, in C(nvidia-smi) order. N/A values are V(null).
  returned: when O(fabric) is true (the default)
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
  returned: when O(fabric) is true (the default)
  type: str
  sample: 5f0a8c2e-1b3d-4e6f-8a9b-0c1d2e3f4a5b
clique_id:
  description:
    - The CliqueId shared by every GPU.
    - V(null) unless every GPU completed registration and all report the same non-zero value.
  returned: when O(fabric) is true (the default)
  type: int
  sample: 32766
fabric_ok:
  description: True when RV(problems) is empty.
  returned: when O(fabric) is true (the default)
  type: bool
  sample: true
problems:
  description: One sentence per problem, naming the GPUs.
  returned: when O(fabric) is true (the default)
  type: list
  elements: str
  sample:
    - "GPUs 0-3: fabric state is In Progress, not Completed (the GPU has not finished registering with the
       NVLink fabric; wait, or check the NVLink fabric manager / NMX)"
fabric_warnings:
  description: One sentence per fabric health remark that does not stop IMEX, naming the GPUs.
  returned: when O(fabric) is true (the default)
  type: list
  elements: str
  sample:
    - "GPUs 0-3: fabric health is Unhealthy (Bandwidth: Full, Route Recovery in progress: False)"
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
      ctime: 1764079311.482913
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
    ctime:
      description:
        - The file's inode change time (C(st_ctime)), epoch seconds; null when it does not exist.
        - Moves with every change of content, owner or mode, and cannot be set back by C(touch).
      type: float
      version_added: 0.3.0
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
certificate_files:
  description:
    - Each path of O(certificate_files) mapped to the SHA-256 fingerprints of the certificates it holds.
    - A fingerprint is the SHA-256 (lower-case hex, no separators) of a certificate's DER encoding, as
      C(openssl x509 -noout -fingerprint -sha256) prints it without the colons.
  returned: when O(certificate_files) is not empty
  type: dict
  version_added: 0.4.0
  sample:
    /etc/nvidia-imex/tls/ca.crt:
      exists: true
      sha256: [5f1c0d0b5a0e8e3c2f6b7d1e9a4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c]
      error: null
  contains:
    exists:
      description: The path is a file (a link is described by its target); null when that cannot be told.
      type: bool
    sha256:
      description:
        - The fingerprints of the PEM certificates in the file, in file order; null when it does not exist
          or cannot be read, empty when it holds no certificate.
      type: list
      elements: str
    error:
      description: Why the certificates could not be read, or that the file holds none; null otherwise.
      type: str
stat_files:
  description: Each path of O(stat_files) mapped to what C(stat) says of it; the content is never read.
  returned: success
  type: dict
  version_added: 0.3.0
  sample:
    /etc/nvidia-imex/tls/server.key:
      exists: true
      ctime: 1764079311.482913
      uid: 0
      gid: 0
      mode: "0600"
      error: null
  contains:
    exists:
      description: The path is a file (a link is described by its target).
      type: bool
    ctime:
      description: The file's inode change time (C(st_ctime)), epoch seconds; null when it does not exist.
      type: float
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
      description: Why the file could not be inspected (then the other keys are null), for example not a regular file.
      type: str
presence:
  description: Each path of O(presence) mapped to whether something is there.
  returned: when O(presence) is given
  type: dict
  version_added: 0.4.0
  sample:
    /etc/rackscale-imex/channels.d:
      exists: false
      error: null
  contains:
    exists:
      description: Something is at the path (a link counts, whatever it points to).
      type: bool
    error:
      description: Why the path could not be inspected (then RV(presence.exists) is false); null otherwise.
      type: str
services:
  description:
    - Each unit of O(services) mapped to its C(ActiveState), what C(systemctl is-active) prints (C(active),
      C(inactive), C(failed), C(activating), ...).
    - Null when C(systemctl) is not installed or C(systemctl show) did not answer.
  returned: success
  type: dict
  sample: {nvidia-imex: active}
services_started:
  description:
    - Each unit of O(services) mapped to when its main process started, epoch seconds
      (C(ExecMainStartTimestampMonotonic), else C(ActiveEnterTimestampMonotonic), moved onto the
      tray's wall clock).
    - Null when the unit is not active (RV(services) other than C(active)) or the time cannot be read.
  returned: success
  type: dict
  version_added: 0.3.0
  sample: {nvidia-imex: 1764079325.118204}
services_instance:
  description:
    - Each unit of O(services) mapped to the instance that runs and what it loaded, for a unit that is
      active; null for one that is not, or when C(systemctl show) did not answer.
  returned: success
  type: dict
  version_added: 0.4.0
  sample:
    nvidia-imex:
      invocation_id: 3b1c9e0f5d2a4c6e8f0a1b2c3d4e5f60
      inactive_exit: 1764079324.902113
      loaded:
        invocation_id: 3b1c9e0f5d2a4c6e8f0a1b2c3d4e5f60
        files: {/etc/nvidia-imex/config.cfg: 0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0}
  contains:
    invocation_id:
      description: systemd's C(InvocationID) of the running instance, new at every start of the unit; null when systemd shows none.
      type: str
    inactive_exit:
      description:
        - When the unit began to start, epoch seconds (C(InactiveExitTimestampMonotonic), moved onto the
          tray's wall clock as RV(services_started) is), before the daemon read its files, where
          RV(services_started) can be after it.
      type: float
    loaded:
      description:
        - The record M(rackscale.imex.imex_daemon_record) wrote when a run started the unit
          (C(/run/rackscale-imex/loaded/<unit>.json)), with C(invocation_id), the instance it describes,
          and C(files), each file mapped to the SHA-256 of the content that instance loaded (null for
          a file that was absent). C(hosts_block), where recorded, is the SHA-256 of the managed block of
          C(/etc/hosts) the instance resolved its slot names through (null for none); a record without it
          says nothing of the block.
        - Null when there is none (the unit was started otherwise, or the tray rebooted since) or it
          cannot be read as one. A record whose C(invocation_id) is not the running one's describes an
          earlier instance.
      type: dict
services_enabled:
  description:
    - Each unit of O(services) mapped to the first word C(systemctl is-enabled) printed (C(enabled),
      C(disabled), C(masked), C(static), ...); null when C(systemctl) did not answer.
  returned: when O(service_enabled) is true
  type: dict
  version_added: 0.3.0
  sample: {nvidia-imex: disabled}
slurm_config:
  description: What C(scontrol show config) says of the IMEX channels, prologs and epilogs, with O(slurm_config).
  returned: when O(slurm_config) is true
  type: dict
  version_added: 0.3.0
  sample:
    installed: true
    error: null
    config:
      switch_type: switch/nvidia_imex
      switch_parameters: imex_channel_count=2048
      imex_channel_count: 2048
      prolog_flags: [Alloc]
      prolog: [/etc/slurm/prolog.d/*]
      epilog: [/etc/slurm/epilog.d/*]
      version: 24.11.5
      prolog_timeout: null
      epilog_timeout: null
  contains:
    installed:
      description: Whether C(scontrol) is installed; without it RV(slurm_config.config) and RV(slurm_config.error) are V(null).
      type: bool
    error:
      description:
        - 'Why there is no configuration although C(scontrol) is installed, in one line of at most 300
          characters, for example C(slurm_load_ctl_conf error: Unable to contact slurm controller (connect
          failure)); V(null) otherwise.'
      type: str
    config:
      description:
        - C(switch_type) (SwitchType, V(null) when unset), C(switch_parameters), C(imex_channel_count)
          (of SwitchParameters, 2048 when it does not say; V(null) when not a number), C(prolog_flags),
          C(prolog) and C(epilog) (every Prolog= and Epilog= entry, in order), C(version) (C(SLURM_VERSION),
          slurmctld's release), and C(prolog_timeout) and C(epilog_timeout) (seconds slurmd gives a prolog or
          an epilog, C(PrologTimeout) or C(EpilogTimeout) where the release has them, else C(PrologEpilogTimeout);
          V(null) when unlimited).
      type: dict
slurmd_version:
  description:
    - The release of this tray's C(slurmd) (C(slurmd -V)), for example V(26.05.5); V(null) when C(slurmd) is not
      installed or did not say. The per-job program applies the job-exclusivity rule of this release.
  returned: when O(slurmd_version) is true
  type: str
  version_added: 0.4.0
  sample: 24.11.5
hosts_block:
  description: The managed block of slot names of O(hosts_file).
  returned: when O(hosts_file) is given
  type: dict
  version_added: 0.4.0
  sample: {path: /etc/hosts, exists: true, sha256: 9f2c..., entries: [[198.18.1.11, rack07-slot-00]],
           names_outside: {}, error: null}
  contains:
    path:
      description: O(hosts_file).
      type: str
    exists:
      description: Whether the file exists.
      type: bool
    sha256:
      description: SHA-256 of the block's text, markers included; V(null) when the file holds no block.
      type: str
    entries:
      description: The block's C([address, name]) pairs as written.
      type: list
      elements: list
    names_outside:
      description: Each name of O(hosts_names) that lines outside the block map too, with their line numbers.
      type: dict
    error:
      description: Why the file or its block could not be read (broken markers name their lines); V(null) when it was.
      type: str
channel_count:
  description: The loaded driver's C(NVreg_ImexChannelCount), with O(channel_count).
  returned: when O(channel_count) is true
  type: dict
  version_added: 0.3.0
  sample: {value: 2048, source: /proc/driver/nvidia/params}
  contains:
    value:
      description: The count; V(null) when no file of O(channel_count_paths) shows it (driver not loaded, or too old).
      type: int
    source:
      description: The file it was read from; V(null) with no value.
      type: str
channel_major:
  description: The major of C(nvidia-caps-imex-channels) in C(/proc/devices); null when it is not there (driver not loaded).
  returned: when O(channel_device) is true
  type: int
  version_added: 0.3.0
  sample: 234
raw:
  description: Output of nvidia-smi that could not be parsed.
  returned: when the output of C(nvidia-smi -q) could not be parsed
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
import os
import socket
import time

from ansible_collections.rackscale.imex.plugins.module_utils import _activity, _ctl, _daemon_record, _fabric, _hosts_block
from ansible_collections.rackscale.imex.plugins.module_utils import _running_release
from ansible_collections.rackscale.imex.plugins.module_utils import _slurm, _tls_reload
from ansible_collections.rackscale.imex.plugins.module_utils._bounded import BoundedRunner
from ansible_collections.rackscale.imex.plugins.module_utils._channel import (
    CHANNEL_COUNT_PATHS,
    MODPROBE_PATH,
    PATH_DEFAULTS,
    PROC_DEVICES,
    driver_channel_count,
    imex_channel_major,
    predict_channels,
)
from ansible_collections.rackscale.imex.plugins.module_utils._daemon_log import LogRefused, log_file_of
from ansible_collections.rackscale.imex.plugins.module_utils._files import (
    FileOpError,
    describe_file,
    path_presence,
    read_text,
    stat_file,
)
from ansible_collections.rackscale.imex.plugins.module_utils._text import ParseError

_SMI_TIMEOUT_SECONDS = 120
_SYSTEMCTL_TIMEOUT_SECONDS = 30
# Everything the read asks systemd of a unit, in one systemctl show: its state (what is-active prints),
# its main process's start, its instance, and (for the daemon's release) its main process.
UNIT_PROPERTIES = tuple(sorted(set(('ActiveState',) + _activity.START_PROPERTIES + _daemon_record.INSTANCE_PROPERTIES
                                   + _running_release.SHOW_PROPERTIES)))
# Where the kernel shows each process (its executable as /proc/<pid>/exe).
_PROC = '/proc'
# Characters that make scontrol read a node list or an option instead of one node name.
_NOT_IN_NODE_NAME = frozenset(',[]')


def unit_shows(runner, systemctl, units):
    """Map each unit to {property: value} of one ``systemctl show`` of UNIT_PROPERTIES, or None when it
    cannot be asked (no systemctl, a call that hung or failed, an answer without ActiveState).

    One call per unit: its state, its start and its instance are one snapshot, never the state of one
    instance with the start time of the next (a daemon restarting between two calls).
    """
    shows = dict((unit, None) for unit in units)
    if not systemctl:
        return shows
    args = [systemctl, 'show']
    for prop in UNIT_PROPERTIES:
        args += ['-p', prop]
    for unit in units:
        rc, out, _err, hung = runner.run(args + ['--', unit], _SYSTEMCTL_TIMEOUT_SECONDS)
        show = {} if hung or rc != 0 else _running_release.parse_show(out)
        if show.get('ActiveState'):
            shows[unit] = show
    return shows


def service_states(shows):
    """Map each unit to its ActiveState (what systemctl is-active prints), or None when it cannot be asked."""
    return dict((unit, show['ActiveState'] if show else None) for unit, show in shows.items())


def service_enablement(runner, systemctl, units):
    """Map each unit to the first word ``systemctl is-enabled`` prints for it, or None when it cannot be asked.

    is-enabled exits non-zero for every answer but "enabled"; the answer is on stdout either way.
    """
    states = dict((unit, None) for unit in units)
    if not systemctl:
        return states
    for unit in units:
        _rc, out, _err, hung = runner.run([systemctl, 'is-enabled', '--', unit], _SYSTEMCTL_TIMEOUT_SECONDS)
        words = out.split()
        if words and not hung:
            states[unit] = words[0]
    return states


def channel_major(proc_devices=PROC_DEVICES):
    """The major of nvidia-caps-imex-channels, or None when /proc/devices lacks it or cannot be read."""
    try:
        with open(proc_devices) as handle:
            return imex_channel_major(handle.read())
    except (IOError, OSError):
        return None


def unit_started(show, wall_minus_monotonic):
    """Epoch seconds the unit's main process started, or None when it is not active or systemd does not say.

    systemd keeps each timestamp twice: as text in the local time zone, whose format changed across
    systemd releases, and as microseconds of CLOCK_MONOTONIC. The monotonic value is a plain integer
    precise to the microsecond, so it is read and moved onto the wall clock with the offset between
    the two clocks read here, on the same kernel (a container shares its host's CLOCK_MONOTONIC).
    """
    if not show or show['ActiveState'] != 'active':
        return None
    # A unit without a main process of its own (a oneshot that exited) has 0 for the first.
    for prop in _activity.START_PROPERTIES:
        usec = _activity.parse_monotonic_usec(show.get(prop))
        if usec is not None:
            return _activity.monotonic_to_epoch(usec, wall_minus_monotonic)
    return None


def services_started(shows):
    """Map each unit to when its main process started (unit_started), or None."""
    wall_minus_monotonic = time.time() - time.monotonic()
    return dict((unit, unit_started(show, wall_minus_monotonic)) for unit, show in shows.items())


def services_instance(shows, record_dir=None):
    """Map each active unit to {invocation_id, inactive_exit, loaded}: the running instance, when its
    unit began to start (epoch seconds) and the record of what a run loaded into it; None for a unit
    that is not active or when systemctl does not answer."""
    instances = dict((unit, None) for unit in shows)
    wall_minus_monotonic = time.time() - time.monotonic()
    for unit, show in shows.items():
        if not show or show['ActiveState'] != 'active':
            continue
        usec = _activity.parse_monotonic_usec(show.get('InactiveExitTimestampMonotonic'))
        instances[unit] = dict(
            invocation_id=_daemon_record.invocation_id(show.get('InvocationID')),
            inactive_exit=None if usec is None else _activity.monotonic_to_epoch(usec, wall_minus_monotonic),
            loaded=_daemon_record.read(unit, record_dir))
    return instances


def compute_apps(runner, smi):
    """The tray's GPU compute processes, or None when they cannot be read."""
    rc, out, _err, hung = runner.run([smi] + _activity.COMPUTE_APPS_QUERY, _SMI_TIMEOUT_SECONDS)
    if hung or rc != 0:
        return None
    try:
        return _activity.parse_compute_apps(out)
    except _activity.ParseError:
        return None


def installed_imex(module):
    """The path of the installed nvidia-imex, or None."""
    return module.get_bin_path('nvidia-imex', opt_dirs=['/usr/bin', '/usr/sbin'])


def imex_version(module, runner):
    """The release of the installed nvidia-imex, or None when it cannot be read."""
    imex = installed_imex(module)
    if not imex:
        return None
    return _release_of(runner, imex)


def _release_of(runner, binary):
    rc, out, _err, hung = runner.run([binary, '--version'], _SYSTEMCTL_TIMEOUT_SECONDS)
    return None if hung or rc != 0 else _ctl.parse_imex_version(out)


def _same_file(path, other):
    try:
        first, second = os.stat(path), os.stat(other)
    except OSError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def daemon_release(module, runner, show, started, config_path, installed_release):
    """{running, source, executable, replaced, unknown}: the IMEX release the running daemon runs.

    ``show``: the daemon unit's unit_shows answer (None: systemctl did not answer); ``started``: epoch
    seconds its main process started (None: not running); ``installed_release``: what the installed
    nvidia-imex says of itself. Unknown is no answer: the caller takes no decision on it.
    """
    found = dict(running=None, source=None, executable=None, replaced=None, unknown=None)
    if started is None:
        return found
    show = show or {}
    pid = _running_release.main_pid(show)
    installed = installed_imex(module)
    if pid:
        executable = '%s/%d/exe' % (_PROC, pid)
        try:
            link = os.readlink(executable)
        except OSError:
            link = None
        if link is not None:
            found.update(executable=link, replaced=_running_release.executable_replaced(link))
            if installed and _same_file(executable, installed):
                # The very file installed: its release is the installed one.
                found.update(running=installed_release, source='executable')
                return found
            if _running_release.is_daemon_binary(link):
                # The kernel keeps a replaced binary reachable through the link; ask it itself.
                release = _release_of(runner, executable)
                if release:
                    found.update(running=release, source='executable')
                    return found
    found['unknown'] = _release_from_log(found, show, started, config_path)
    return found


def _release_from_log(found, show, started, config_path):
    """Fill found[running] from the daemon's start line in its log file; returns why not, or None."""
    since_usec = _activity.parse_monotonic_usec(show.get('InactiveExitTimestampMonotonic'))
    if since_usec is None:
        return 'systemd does not say when the unit began to start'
    since = _activity.monotonic_to_epoch(since_usec, time.time() - time.monotonic())
    try:
        config = read_text(config_path)
    except FileOpError as error:
        return 'cannot read %s: %s' % (config_path, error)
    level = _running_release.log_level(config)
    path = log_file_of(config)
    if level < 4:
        return 'LOG_LEVEL=%d leaves out the daemon\'s start line, which names its release' % level
    if not path:
        return 'the daemon logs to stderr (LOG_FILE_NAME is empty), not to a file read here'
    try:
        lines = _running_release.last_start_lines(path)
    except LogRefused as error:
        return str(error)
    release = _running_release.release_started_between(lines, since, started)
    if release is None:
        return '%s holds no start line of the running daemon' % path
    found.update(running=release, source='log')
    return None


def slurm_node(module, runner, node):
    """{installed, node, state, error}: the Slurm state of ``node`` as scontrol reports it."""
    scontrol = module.get_bin_path('scontrol', opt_dirs=['/usr/bin', '/usr/local/bin'])
    slurm = dict(installed=bool(scontrol), node=node, state=None, error=None)
    if scontrol:
        rc, out, err, hung = runner.run([scontrol, 'show', 'node', node, '--oneliner'], _SYSTEMCTL_TIMEOUT_SECONDS)
        slurm.update(_activity.read_slurm_answer(node, rc, out, err, hung, _SYSTEMCTL_TIMEOUT_SECONDS))
    return slurm


def slurmd_version(module, runner):
    """The release of this tray's slurmd (C(slurmd -V)), as printed ("24.11.5"); None when unknown.

    The environment slurmd gives a prolog changed in 26.05, so the per-job program needs the tray's own
    release; scontrol show config tells slurmctld's.
    """
    slurmd = module.get_bin_path('slurmd', opt_dirs=['/usr/sbin', '/usr/local/sbin', '/usr/bin', '/usr/local/bin'])
    if not slurmd:
        return None
    rc, out, _err, hung = runner.run([slurmd, '-V'], _SYSTEMCTL_TIMEOUT_SECONDS)
    if hung or rc != 0:
        return None
    try:
        return _slurm.parse_version(out)['text']
    except ParseError:
        return None


def slurm_config(module, runner):
    """{installed, config, error}: what scontrol show config says of the IMEX channels and the prologs."""
    scontrol = module.get_bin_path('scontrol', opt_dirs=['/usr/bin', '/usr/local/bin'])
    found = dict(installed=bool(scontrol), config=None, error=None)
    if not scontrol:
        return found
    rc, out, err, hung = runner.run([scontrol, 'show', 'config'], _SYSTEMCTL_TIMEOUT_SECONDS)
    if hung:
        found['error'] = 'scontrol show config did not answer within %d s' % _SYSTEMCTL_TIMEOUT_SECONDS
    elif rc != 0:
        first = next((line.strip() for line in (err or out or '').splitlines() if line.strip()), 'no output')
        found['error'] = ('scontrol show config failed (rc %d): %s' % (rc, first))[:300]
    else:
        try:
            found['config'] = _slurm.channel_plugin_config(_slurm.parse_show_config(out))
        except ParseError as error:
            found['error'] = str(error)[:300]
    return found


def channel_count(paths):
    """{value, source}: the driver's NVreg_ImexChannelCount from the first of ``paths`` that shows it."""
    for path in paths:
        try:
            value = driver_channel_count(path, read_text(path))
        except FileOpError:
            continue
        if value is not None:
            return dict(value=value, source=path)
    return dict(value=None, source=None)


def node_name_problem(name):
    """Why ``name`` cannot be asked of scontrol as one node, or None."""
    if not name:
        return 'must not be empty'
    if name.startswith('-'):
        return 'must not start with "-" (scontrol would read it as an option)'
    if any(char.isspace() or ord(char) < 32 or char in _NOT_IN_NODE_NAME for char in name):
        return 'must be one Slurm node name, without blanks, control characters, "," or brackets'
    return None


def read_fabric(module, runner, smi):
    """The tray's fabric summary and driver release from nvidia-smi -q; fails the module when unreadable."""
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
    # Returned, not warned: a warning does not say which tray it came from; the caller names the tray.
    summary['fabric_warnings'] = summary.pop('warnings')
    summary['driver_version'] = _fabric.parse_driver_version(out)
    return summary


def certificate_fingerprints(path):
    """{exists, sha256, error} of the PEM certificates of a file (public certificates only)."""
    try:
        return dict(exists=True, sha256=_tls_reload.file_fingerprints(path), error=None)
    except _tls_reload.MaterialError as error:
        return dict(exists=True, sha256=[], error=str(error))
    except FileNotFoundError:
        return dict(exists=False, sha256=None, error=None)
    except OSError as error:
        return dict(exists=None if not os.path.exists(path) else os.path.isfile(path), sha256=None,
                    error='cannot read %s: %s' % (path, error.strerror or error))


def hosts_block(path, names):
    """{path, exists, sha256, entries, names_outside, error} of the managed block of a hosts file."""
    found = dict(path=path, exists=False, sha256=None, entries=[], names_outside={}, error=None)
    try:
        text = read_text(path)
    except FileOpError as error:
        found.update(exists=None, error=str(error))
        return found
    if text is None:
        return found
    described = _hosts_block.describe(text)
    found.update(exists=True, sha256=described['sha256'], entries=described['entries'], error=described['error'])
    if not described['error']:
        found['names_outside'] = _hosts_block.names_outside(text, names)
    return found


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type='path'),
            fabric=dict(type='bool', default=True),
            strict=dict(type='bool', default=True),
            files=dict(type='list', elements='path', default=[]),
            stat_files=dict(type='list', elements='path', default=[]),
            presence=dict(type='list', elements='path', default=[]),
            certificate_files=dict(type='list', elements='path', default=[]),
            services=dict(type='list', elements='str', default=[]),
            compute_apps=dict(type='bool', default=False),
            service_enabled=dict(type='bool', default=False),
            channel_device=dict(type='bool', default=False),
            slurm_state=dict(type='bool', default=False),
            slurm_node_name=dict(type='str'),
            slurm_config=dict(type='bool', default=False),
            slurmd_version=dict(type='bool', default=False),
            channel_count=dict(type='bool', default=False),
            channel_count_paths=dict(type='list', elements='path', default=list(CHANNEL_COUNT_PATHS)),
            imex_version=dict(type='bool', default=False),
            daemon_release=dict(type='bool', default=False),
            daemon_service=dict(type='str', default='nvidia-imex'),
            daemon_config=dict(type='path', default='/etc/nvidia-imex/config.cfg'),
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
            hosts_file=dict(type='path'),
            hosts_names=dict(type='list', elements='str', default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    node = params['slurm_node_name']
    if node is None:
        node = socket.gethostname().split('.')[0]
    elif params['slurm_state'] and node_name_problem(node):
        module.fail_json(msg='slurm_node_name %r %s' % (node, node_name_problem(node)))

    smi = None
    # Without the fabric read, nvidia-smi is needed only for the compute processes.
    if params['fabric'] or params['compute_apps']:
        smi = params['nvidia_smi'] or module.get_bin_path('nvidia-smi', opt_dirs=['/usr/bin'])
        if not smi:
            # The roles have no option for this path: name what a role user can do first.
            module.fail_json(msg='nvidia-smi not found on PATH or in /usr/bin: install the NVIDIA driver '
                                 'utilities there (the rackscale.imex roles look nowhere else), or give '
                                 'its path in the nvidia_smi option of rackscale.imex.imex_tray_info')

    runner = BoundedRunner(module)
    summary = read_fabric(module, runner, smi) if params['fabric'] else None
    systemctl = None
    if params['services'] or params['daemon_release']:
        systemctl = module.get_bin_path('systemctl', opt_dirs=['/usr/bin', '/bin'])
    service = params['daemon_service']
    units = list(params['services'])
    if params['daemon_release'] and service not in units:
        units.append(service)
    shows = unit_shows(runner, systemctl, units)
    started = services_started(shows)
    listed = dict((unit, shows[unit]) for unit in params['services'])
    result = dict(changed=False,
                  files=dict((path, describe_file(path)) for path in params['files']),
                  stat_files=dict((path, stat_file(path)) for path in params['stat_files']),
                  services=service_states(listed),
                  services_started=dict((unit, started[unit]) for unit in listed),
                  services_instance=services_instance(listed))
    if params['presence']:
        result['presence'] = dict((path, path_presence(path)) for path in params['presence'])
    if params['certificate_files']:
        result['certificate_files'] = dict((path, certificate_fingerprints(path)) for path in params['certificate_files'])
    if summary is not None:
        result.update(summary)
    if params['service_enabled']:
        result['services_enabled'] = service_enablement(runner, systemctl, params['services'])
    if params['channel_device']:
        result['channel_major'] = channel_major()
    installed_release = None
    if params['imex_version'] or params['daemon_release']:
        installed_release = imex_version(module, runner)
    if params['imex_version']:
        result['imex_version'] = installed_release
    if params['daemon_release']:
        release = daemon_release(module, runner, shows[service], started[service], params['daemon_config'],
                                 installed_release)
        if release['unknown']:
            module.warn('cannot tell which IMEX release the running %s daemon runs (%s); a daemon left on another '
                        'release than the installed one is not restarted for that' % (service, release['unknown']))
        result['daemon_release'] = release
    if params['compute_apps']:
        result['compute_apps'] = compute_apps(runner, smi)
    if params['slurm_state']:
        result['slurm'] = slurm_node(module, runner, node)
        result['slurm_state'] = result['slurm']['state']
    if params['slurm_config']:
        result['slurm_config'] = slurm_config(module, runner)
    if params['slurmd_version']:
        result['slurmd_version'] = slurmd_version(module, runner)
    if params['channel_count']:
        result['channel_count'] = channel_count(params['channel_count_paths'])
    if params['hosts_file']:
        result['hosts_block'] = hosts_block(params['hosts_file'], params['hosts_names'])
    if params['channels']:
        paths = dict(PATH_DEFAULTS)
        paths['modprobe_path'] = params['channels_modprobe_path']
        result['channels'] = predict_channels(module, params['channels'], **paths)
    if summary is not None and params['strict'] and not summary['fabric_ok']:
        module.fail_json(msg='GPU fabric not ready for IMEX: ' + '; '.join(summary['problems']), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
