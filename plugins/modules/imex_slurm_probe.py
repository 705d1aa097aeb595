#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
module: imex_slurm_probe
short_description: Prove a per-job IMEX domain with a short exclusive Slurm job on all its nodes
version_added: 0.3.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - For IMEX run per job by a Slurm prolog and epilog (the C(slurm_per_job) mode of the
    P(rackscale.imex.imex#role) role), where no daemon runs between jobs to be asked.
  - Submits, with C(srun) on the target, one exclusive job on exactly the Slurm nodes of O(nodes)
    (C(--exclusive --nodes N --nodelist ... --time O(time_limit) --immediate O(immediate))). Its prolog
    starts the IMEX daemons of the job's nodes; inside the job, the first task runs
    C(nvidia-imex-ctl -N -j) until the domain is C(UP) or O(wait) seconds have passed, and the full
    connectivity matrix is judged as M(rackscale.imex.imex_status) judges it. The epilog stops the
    daemons when the job ends.
  - A domain Slurm cannot give the job at once (a job runs there, a node is drained or down) is not
    probed; RV(probed) is false and RV(reason) says what Slurm answered. Nothing waits for it.
  - Every call is bounded, C(srun) by coreutils C(timeout) (O(timeout)), C(nvidia-imex-ctl) inside the
    job by O(command_timeout), the job by O(time_limit).
  - Leaves no file behind; the job is recorded in Slurm's accounting like any other.
options:
  partition:
    description: The Slurm partition to submit the job to; it must hold every node of O(nodes).
    type: str
    required: true
  nodes:
    description: The Slurm node names of the domain's trays, in the domain's node order.
    type: list
    elements: str
    required: true
  expected_nodes:
    description:
      - The IMEX addresses of O(nodes), in the same order; the node list the prolog writes for the job,
        and the one the matrix must show.
    type: list
    elements: str
    required: true
  expected_names:
    description: Names of the trays of O(expected_nodes), in the same order, to name them in RV(problems).
    type: list
    elements: str
    default: []
  config:
    description: The IMEX daemon configuration on the job's nodes, passed to C(nvidia-imex-ctl -c).
    type: path
    default: /etc/nvidia-imex/config.cfg
  ctl:
    description: Path of C(nvidia-imex-ctl) on the job's nodes.
    type: path
    default: /usr/bin/nvidia-imex-ctl
  time_limit:
    description: The job's time limit in minutes (C(srun --time)); Slurm ends it then whatever happens.
    type: int
    default: 2
  immediate:
    description: Seconds Slurm may take to allocate the nodes (C(srun --immediate)); else the domain is busy.
    type: int
    default: 10
  wait:
    description: Seconds the job waits for the domain to become C(UP) before its matrix is judged.
    type: int
    default: 30
  interval:
    description: Seconds between two C(nvidia-imex-ctl) calls inside the job.
    type: int
    default: 2
  command_timeout:
    description: Seconds each C(nvidia-imex-ctl) call inside the job may take.
    type: int
    default: 30
  timeout:
    description:
      - Seconds the whole C(srun) may take (allocation, the prolog on every node, the job, the epilog);
        C(srun) is stopped then. Default O(immediate) + 300 + O(wait) + O(command_timeout), 300 being the
        bound the role's prolog keeps (240 s) with room for the epilog.
    type: int
  job_name:
    description: The job's name in Slurm (C(squeue), accounting).
    type: str
    default: rackscale-imex-probe
attributes:
  check_mode:
    description: Submits no job in check mode; RV(probed) is false and RV(reason) says so.
    support: full
  diff_mode:
    description: Changes no file, so there is nothing to show.
    support: none
  idempotent:
    description: Changes nothing on the target; each run submits one short job, which Slurm records.
    support: full
notes:
  - The job runs as the user the module runs as (root for the role); Slurm must accept its jobs
    (C(DisableRootJobs=NO), the default) in O(partition).
  - A prolog that fails on a node makes Slurm drain that node, as for any job; the role's prolog fails
    only when the node's own daemon cannot start.
  - Needs C(srun) and coreutils C(timeout) on the target, and C(timeout) and C(sh) on the job's nodes.
seealso:
  - module: rackscale.imex.imex_status
  - module: rackscale.imex.imex_tray_info
"""

EXAMPLES = r"""
- name: Prove rack1's per-job IMEX with a short exclusive job, from its first tray
  rackscale.imex.imex_slurm_probe:
    partition: gpu
    nodes: [rack1-tray01, rack1-tray02, rack1-tray03, rack1-tray04]
    expected_nodes: [198.18.1.11, 198.18.1.12, 198.18.1.13, 198.18.1.14]
    expected_names: [rack1-tray01, rack1-tray02, rack1-tray03, rack1-tray04]
  register: probe

- name: Stop unless the domain was proven or was busy
  ansible.builtin.assert:
    that: not probe.probed or probe.healthy
    fail_msg: "{{ probe.problems | join('; ') }}"
"""

RETURN = r"""
probed:
  description: Whether the job ran and its matrix was read; false when Slurm could not give the nodes at once, or in check mode.
  returned: always
  type: bool
  sample: true
reason:
  description: Why the domain was not probed (what C(srun) said, or check mode); V(null) when it was.
  returned: always
  type: str
  sample: "srun: error: Unable to allocate resources: Requested nodes are busy"
healthy:
  description: Whether the matrix the job read is healthy (as RV(rackscale.imex.imex_status#module:healthy)); V(null) when not probed.
  returned: always
  type: bool
  sample: true
domain_state:
  description: The domain state the job read (C(UP), C(DEGRADED), ...); V(null) when not probed.
  returned: always
  type: str
  sample: UP
problems:
  description: One sentence per problem of the matrix, naming the trays and pairs.
  returned: always
  type: list
  elements: str
  sample: ["2 pairs from 198.18.1.13 (rack1-tray03) to 198.18.1.14 (rack1-tray04): ..."]
broken_pairs:
  description: Every pair of the matrix that is not connected, as M(rackscale.imex.imex_status) returns them.
  returned: always
  type: list
  elements: dict
nodes:
  description: The nodes of the matrix, as M(rackscale.imex.imex_status) returns them.
  returned: always
  type: list
  elements: dict
command:
  description: The C(srun) command line run (the job's script abridged).
  returned: always
  type: str
srun_rc:
  description: The exit code of C(srun); V(null) in check mode.
  returned: always
  type: int
  sample: 0
elapsed:
  description: Seconds the probe took.
  returned: always
  type: float
  sample: 6.2
"""

import shlex
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rackscale.imex.plugins.module_utils import _assess, _ctl
from ansible_collections.rackscale.imex.plugins.module_utils._bounded import BoundedRunner

# The job step's program, run by every task; only the first reads the matrix (one view of the
# whole domain is the proof: each row is a node's own view of its peers). It waits for UP, bounded,
# and prints the last answer.
STEP_SCRIPT = r'''[ "${SLURM_PROCID:-0}" = 0 ] || exit 0
ctl=$1 config=$2 wait_s=$3 interval=$4 ctl_timeout=$5
start=$(date +%s)
while :; do
  out=$(timeout -k 5 "$ctl_timeout" "$ctl" -c "$config" -N -j 2>&1); rc=$?
  case $out in *'"UP"'*|*'Domain State: UP'*) break ;; esac
  [ $(( $(date +%s) - start )) -ge "$wait_s" ] && break
  sleep "$interval"
done
printf '%s\n' "$out"
echo "rackscale-imex-probe: nvidia-imex-ctl -N -j rc $rc on $(hostname)" >&2
exit 0
'''
# What srun says when Slurm cannot give the nodes at once (--immediate): a busy domain, not a broken one.
NOT_AVAILABLE = ('Requested nodes are busy', 'Nodes required for job are DOWN, DRAINED',
                 'Immediate execution impossible', 'Unable to allocate resources: Resource temporarily unavailable')
# The bound of the role's prolog (its total_timeout_s) with room for the epilog.
PROLOG_BOUND_S = 300


def srun_argv(srun, params):
    nodes = params['nodes']
    return [srun, '--partition=%s' % params['partition'], '--exclusive', '--nodes=%d' % len(nodes),
            '--ntasks-per-node=1', '--nodelist=%s' % ','.join(nodes), '--time=%d' % params['time_limit'],
            '--immediate=%d' % params['immediate'], '--job-name=%s' % params['job_name'], '--quiet',
            '/bin/sh', '-c', STEP_SCRIPT, params['job_name'], params['ctl'], params['config'],
            str(params['wait']), str(params['interval']), str(params['command_timeout'])]


def shown(argv):
    """The command line as a log shows it, the step's script abridged."""
    return ' '.join(shlex.quote(arg) if arg != STEP_SCRIPT else "'<probe script>'" for arg in argv)


def not_available(err):
    """The line of srun's answer that says the nodes cannot be had now, or None."""
    for line in (err or '').splitlines():
        if any(text in line for text in NOT_AVAILABLE):
            return line.strip()
    return None


def judge(out, expected_nodes, expected_names):
    """The assessment of the matrix the job printed, or None when it printed none."""
    parsed = _ctl.parse_domain_output(out)
    if parsed is None:
        return None
    _assess.add_unreported(parsed, expected_nodes)
    for index, node in parsed['nodes'].items():
        if (not node.get('hostname') and index < min(len(expected_nodes), len(expected_names))
                and node.get('address') == expected_nodes[index]):
            node['hostname'] = expected_names[index]
    return _assess.assess(parsed, expected_nodes=expected_nodes)


def excerpt(text, limit=600):
    text = (text or '').strip()
    return text[:limit] + (' ...' if len(text) > limit else '') if text else 'no output'


def main():
    module = AnsibleModule(
        argument_spec=dict(
            partition=dict(type='str', required=True),
            nodes=dict(type='list', elements='str', required=True),
            expected_nodes=dict(type='list', elements='str', required=True),
            expected_names=dict(type='list', elements='str', default=[]),
            config=dict(type='path', default='/etc/nvidia-imex/config.cfg'),
            ctl=dict(type='path', default='/usr/bin/nvidia-imex-ctl'),
            time_limit=dict(type='int', default=2),
            immediate=dict(type='int', default=10),
            wait=dict(type='int', default=30),
            interval=dict(type='int', default=2),
            command_timeout=dict(type='int', default=30),
            timeout=dict(type='int'),
            job_name=dict(type='str', default='rackscale-imex-probe'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name, minimum in (('time_limit', 1), ('immediate', 1), ('wait', 0), ('interval', 1),
                          ('command_timeout', 1), ('timeout', 1)):
        if params[name] is not None and params[name] < minimum:
            module.fail_json(msg='%s must be at least %d, got %d' % (name, minimum, params[name]))
    if not params['nodes'] or len(params['nodes']) != len(params['expected_nodes']):
        module.fail_json(msg='nodes (%d) and expected_nodes (%d) must name the same trays, at least one'
                             % (len(params['nodes']), len(params['expected_nodes'])))
    bad = [node for node in params['nodes'] if not node or node.startswith('-') or any(c in node for c in ' ,[]')]
    if bad:
        module.fail_json(msg='nodes must be plain Slurm node names (no blanks, commas or brackets): %s'
                             % ', '.join(repr(node) for node in bad))
    result = dict(changed=False, probed=False, reason=None, healthy=None, domain_state=None, problems=[],
                  broken_pairs=[], nodes=[], command=None, srun_rc=None, elapsed=0.0)
    srun = module.get_bin_path('srun', opt_dirs=['/usr/bin', '/usr/local/bin'])
    if not srun:
        module.fail_json(msg='srun not found on PATH, /usr/bin or /usr/local/bin: the probe needs a Slurm client '
                             'on the tray it runs from', **result)
    argv = srun_argv(srun, params)
    result['command'] = shown(argv)
    if module.check_mode:
        result['reason'] = 'check mode: no job submitted'
        module.exit_json(**result)
    timeout = params['timeout'] or (params['immediate'] + PROLOG_BOUND_S + params['wait'] + params['command_timeout'])
    runner = BoundedRunner(module)
    started = time.monotonic()
    rc, out, err, hung = runner.run(argv, timeout)
    result.update(srun_rc=rc, elapsed=round(time.monotonic() - started, 1))
    if hung:
        module.fail_json(msg='%s did not finish within %d s (timeout) and was stopped; Slurm ends the job at its '
                             'time limit (%d min). stderr: %s' % (result['command'], timeout, params['time_limit'],
                                                                  excerpt(err)), **result)
    busy = not_available(err) if rc != 0 else None
    if busy:
        result['reason'] = busy
        module.exit_json(**result)
    assessment = judge(out, params['expected_nodes'], params['expected_names'])
    if assessment is None:
        module.fail_json(msg='the probe job printed no nvidia-imex-ctl matrix (srun rc %d): stdout: %s; stderr: %s'
                             % (rc, excerpt(out), excerpt(err)), stderr=err, stdout=out, **result)
    result.update(probed=True, healthy=assessment['healthy'], domain_state=assessment['domain_state'],
                  problems=assessment['problems'], broken_pairs=assessment['broken_pairs'],
                  nodes=assessment['nodes'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
