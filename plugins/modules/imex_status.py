#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
module: imex_status
short_description: Report the health of an NVIDIA IMEX domain from nvidia-imex-ctl
version_added: 0.1.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Runs C(nvidia-imex-ctl -N -j) on the target (falling back to the formatted C(-N) output for
    daemons without JSON support) and, optionally, C(nvidia-imex-ctl -q) for the local daemon state.
  - Reports the domain state, every node with its daemon state and version, every connection of the
    From/To matrix that is not C(C) (connected), and one sentence per problem naming the trays
    (node index and address) and pairs involved.
  - The domain is RV(healthy) when the domain state is C(UP), every node is C(READY), every pair is
    connected, all nodes run the same version, the local daemon is C(READY) (when O(query_local)),
    and the node list equals O(expected_nodes) (when given).
  - Every C(nvidia-imex-ctl) call is bounded by coreutils C(timeout), because the tool can hang
    when a peer's command port does not answer.
  - Read-only; changes nothing on the target.
options:
  config:
    description:
      - Path of the IMEX daemon configuration, passed to C(nvidia-imex-ctl -c). The tool reads the
        command port and the node list from it.
    type: path
    default: /etc/nvidia-imex/config.cfg
  expected_nodes:
    description:
      - The node list the domain should have, in node-index order (line order of
        C(nodes_config.cfg)), as addresses or host names.
      - When given, a different list (missing, unexpected or reordered nodes) makes the domain
        unhealthy. Host names compare case-insensitively.
    type: list
    elements: str
  expected_names:
    description:
      - Names of the trays of O(expected_nodes), in the same order, for example their inventory names.
      - A node whose host name the output does not give (an unreachable node, output without C(-H)) and
        whose address is the expected one at its index is named by it in RV(nodes) and RV(problems), so
        that an operator reads which tray is at fault.
    type: list
    version_added: 0.2.0
    elements: str
  wait:
    description:
      - Poll until the domain is healthy or O(timeout) seconds have passed.
      - While waiting, failures of C(nvidia-imex-ctl) itself (daemon not running yet, hung call,
        unreadable output) are retried instead of failing the task.
      - When the time is up and the domain is still unhealthy, the task fails if O(fail_unhealthy)
        is set and otherwise returns the last report with a warning.
      - A long wait is shown while it lasts; every 30 seconds the run prints how long it has waited and
        what is still broken (the action plugin waits in slices).
    type: bool
    default: false
  timeout:
    description: Seconds to keep polling when O(wait=true).
    type: int
    default: 300
  interval:
    description: Seconds between two polls when O(wait=true).
    type: int
    default: 5
  fail_unhealthy:
    description:
      - Fail the task when the domain is not healthy. The failure message lists every problem
        sentence (which trays, which pairs), not just the domain state.
    type: bool
    default: false
  query_local:
    description:
      - Also run C(nvidia-imex-ctl -q) and report the local daemon state as RV(local_state).
      - C(-q) reports the local daemon only; it is C(READY) as soon as the local daemon finished
        starting, even when peers are missing.
    type: bool
    default: true
  command_timeout:
    description:
      - Seconds each C(nvidia-imex-ctl) invocation may take before it is stopped and reported as hung.
    type: int
    default: 30
  hostnames:
    description:
      - Pass C(-H) so that node host names are reported (driver 580 and later). JSON output of 580
        drivers carries host names without it.
    type: bool
    default: false
  absent_nodes:
    description:
      - Addresses (or host names) of listed nodes known to be away, for example a tray out of service for
        repair that stays in the node list so that it can rejoin without a restart of its peers.
      - Their daemon states and every pair from or to them are not judged, and a C(DEGRADED) domain is
        healthy when they alone make it so; they are listed in RV(absent).
    type: list
    elements: str
    default: []
    version_added: 0.3.0
extends_documentation_fragment:
  - rackscale.imex._read_only
attributes:
  action:
    description: The wait runs in slices from an action plugin on the controller, which prints progress.
    support: full
notes:
  - Needs C(nvidia-imex-ctl) on the target and C(IMEX_CMD_ENABLED=1) in the daemon configuration;
    node states and versions are gathered over each node's C(IMEX_CMD_PORT) (50005 by default), so a
    blocked command port keeps peers C(UNAVAILABLE) and the domain C(DEGRADED).
  - Run it on one tray per domain; every tray sees the whole domain.
  - Connection states in RV(broken_pairs) are the matrix letters (C(N), C(R), C(D), C(A), C(I), C(!V!),
    C(!M!)) for text output and the vendor words (for example C(INVALID)) for JSON output; C(missing)
    marks a pair the JSON output does not mention at all.
seealso:
  - name: NVIDIA IMEX guide, command service
    description: nvidia-imex-ctl usage.
    link: https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/cmdservice.html
"""

EXAMPLES = r"""
- name: Report the IMEX domain of this rack
  rackscale.imex.imex_status:
  register: imex
  run_once: true

- name: Wait up to 10 minutes for all 18 trays to be connected, fail with the reasons otherwise
  rackscale.imex.imex_status:
    expected_nodes: "{{ groups['rack1'] | map('extract', hostvars, 'imex_address') | list }}"
    wait: true
    timeout: 600
    fail_unhealthy: true
  run_once: true

- name: Show the problems without failing
  ansible.builtin.debug:
    var: imex.problems
  when: not imex.healthy
"""

RETURN = r"""
domain_state:
  description: Domain state printed by nvidia-imex-ctl (C(UP), C(DEGRADED) or C(DOWN)).
  returned: success
  type: str
  sample: DEGRADED
local_state:
  description:
    - State of the local daemon from C(nvidia-imex-ctl -q) (for example C(READY), C(INITIALIZING)).
    - V(null) when O(query_local=false) or when C(-q) failed (RV(problems) then says why).
  returned: success
  type: str
  sample: READY
nodes:
  description: Every node of the domain, ordered by node index.
  returned: success
  type: list
  elements: dict
  contains:
    index:
      description: Node index (line position in C(nodes_config.cfg)).
      type: int
      sample: 5
    address:
      description: Node address or name as configured.
      type: str
      sample: 198.18.1.16
    status:
      description: Daemon state of the node (C(READY), C(UNAVAILABLE), ...); V(null) when the output names the node only in connections.
      type: str
      sample: UNAVAILABLE
    version:
      description: IMEX version of the node; V(null) when unknown (unreachable node, or old output without versions).
      type: str
      sample: 580.95.09
    hostname:
      description: Host name of the node when reported (C(-H) or 580 JSON), otherwise V(null).
      type: str
      sample: rack1-tray06
    reported:
      description:
        - False for a node of O(expected_nodes) that the output does not mention at all (580-series JSON leaves
          out nodes it could not reach); its address is the expected one and its other fields are V(null).
      type: bool
      sample: true
      version_added: 0.2.0
node_count:
  description: Number of entries in RV(nodes).
  returned: success
  type: int
  sample: 18
absent:
  description: The nodes of O(absent_nodes) found in the node list, by index and address.
  returned: success
  type: list
  elements: dict
  version_added: 0.3.0
  sample: [{index: 17, address: 10.20.7.28}]
broken_pairs:
  description:
    - Every connection of the From/To matrix that is not connected, ordered by from/to index.
    - Pairs from or to a node of O(absent_nodes) are left out.
  returned: success
  type: list
  elements: dict
  contains:
    from_index:
      description: Node index of the row.
      type: int
    from_address:
      description: Address of the row node.
      type: str
    to_index:
      description: Node index of the column.
      type: int
    to_address:
      description: Address of the column node.
      type: str
    state:
      description: Matrix letter (text output), vendor word (JSON output), or C(missing).
      type: str
      sample: R
healthy:
  description: True when RV(problems) is empty.
  returned: success
  type: bool
  sample: false
problems:
  description: One sentence per problem, naming trays (index and address) and pairs.
  returned: success
  type: list
  elements: str
  sample:
    - domain state is DEGRADED, not UP
    - "pair 3 (198.18.1.14) -> 7 (198.18.1.18): R (recovering: connection lost, cleanup not yet triggered)"
source:
  description: Which output was parsed, C(json) (C(-N -j)) or C(text) (C(-N)).
  returned: success
  type: str
  sample: json
ctl_rc:
  description:
    - Exit code of the C(nvidia-imex-ctl -N) call whose output was parsed. Its output is read whatever
      the code (only 0 is documented); a non-zero code is told in RV(problems) when the domain is not
      healthy, and as a warning when it is.
  returned: success
  type: int
  version_added: 0.3.0
  sample: 0
attempts:
  description: Number of polls made (more than one only with O(wait=true)).
  returned: always
  type: int
  sample: 3
elapsed:
  description: Seconds spent, including waiting.
  returned: always
  type: float
  sample: 10.2
reason:
  description:
    - Why a wait ran out, without how long it waited (the message says both).
  returned: when O(wait=true) and the domain is not healthy or nvidia-imex-ctl still fails at the end
  type: str
  version_added: 0.2.0
  sample: "IMEX domain is not healthy (domain state DEGRADED): node 3 (198.18.1.13, rack1-tray03) is UNAVAILABLE"
raw:
  description: Output of nvidia-imex-ctl that could not be parsed.
  returned: when the output could not be parsed
  type: str
"""

import os
import shlex
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rackscale.imex.plugins.module_utils import _assess, _ctl
from ansible_collections.rackscale.imex.plugins.module_utils._bounded import BoundedRunner
from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import CONFIG_PATH
from ansible_collections.rackscale.imex.plugins.module_utils._text import DetailedError


class CtlFailure(DetailedError):
    """One nvidia-imex-ctl call failed; carries what the user needs to see."""


class ImexCtl:
    """Runs nvidia-imex-ctl, bounded, and returns parsed output."""

    def __init__(self, module, ctl_path):
        self.runner = BoundedRunner(module)
        self.ctl_path = ctl_path
        self.config = module.params['config']
        self.command_timeout = module.params['command_timeout']
        self.hostnames = module.params['hostnames']

    def _ctl_args(self, *flags):
        args = [self.ctl_path, '-c', self.config] + list(flags)
        if self.hostnames and '-N' in flags:
            args.append('-H')
        return args

    def run(self, *flags):
        """Return (rc, stdout, stderr, shown command); raise CtlFailure when the call hung."""
        ctl_args = self._ctl_args(*flags)
        shown = ' '.join(shlex.quote(arg) for arg in ctl_args)
        rc, out, err, hung = self.runner.run(ctl_args, self.command_timeout)
        if hung:
            raise CtlFailure(
                '%s did not answer within %d s (command_timeout) and was stopped: the local IMEX daemon '
                'or the command port (IMEX_CMD_PORT) of a peer is not responding'
                % (shown, self.command_timeout), rc=rc, stdout=out, stderr=err, cmd=shown)
        return rc, out, err, shown

    def domain(self):
        """Parse -N -j, falling back to -N text; returns the parsed dict, with the call's exit code
        (``exit_code``) and command line (``command``)."""
        # Only rc 0 on success is documented; which codes a degraded or down domain gives is UNKNOWN
        # (a daemon that answers may still make the tool exit non-zero). So the output is read
        # whatever the code, and the code is kept and told: a table that parses names the broken
        # trays, which "the call failed" would hide. Only output that does not parse makes a non-zero
        # code a failure. The same goes for a ctl without -j, which prints its usage instead.
        rc, out, err, shown = self.run('-N', '-j')
        parsed = _ctl.parse_domain_output(out) or _ctl.parse_domain_output(err)
        if parsed is not None:
            return dict(parsed, exit_code=rc, command=shown)
        json_attempt = 'rc %d' % rc if rc else 'output not JSON'
        rc, out, err, shown = self.run('-N')
        try:
            return dict(_ctl.parse_text(out), exit_code=rc, command=shown)
        except _ctl.CtlParseError as error:
            if rc != 0:
                raise CtlFailure(
                    '%s failed with rc %d (the JSON call -N -j gave %s): %s. Check that the nvidia-imex service '
                    'is running, that IMEX_CMD_ENABLED=1 is set in %s, and that the config file is readable'
                    % (shown, rc, json_attempt, _output_excerpt(out, err), self.config),
                    rc=rc, stdout=out, stderr=err, cmd=shown)
            raise CtlFailure('cannot read the output of %s: %s' % (shown, error.message),
                             rc=rc, stdout=out, stderr=err, cmd=shown, raw=error.raw)

    def local_state(self):
        """Return (state, error sentence); exactly one of them is None."""
        try:
            rc, out, err, shown = self.run('-q')
        except CtlFailure as failure:
            return None, failure.message
        try:
            state = _ctl.parse_query(out if out.strip() else err)
        except _ctl.CtlParseError:
            return None, '%s returned rc %d: %s' % (shown, rc, _output_excerpt(out, err))
        if rc != 0:
            return None, '%s printed %s but returned rc %d' % (shown, state, rc)
        return state, None


def exit_code_note(parsed):
    """The sentence telling that the ctl call whose output was read exited non-zero, or None."""
    if not parsed.get('exit_code'):
        return None
    return ('%s exited with rc %d; its output was read all the same (domain state %s)'
            % (parsed['command'], parsed['exit_code'], parsed['domain_state']))


def _output_excerpt(out, err, limit=600):
    parts = []
    for name, text in (('stdout', out), ('stderr', err)):
        text = (text or '').strip()
        if text:
            parts.append('%s: %s' % (name, text[:limit] + (' ...' if len(text) > limit else '')))
    return '; '.join(parts) or 'no output'


def _name_nodes(parsed, expected_nodes, expected_names):
    """Name each node the output leaves unnamed after its tray, where its address is the expected one."""
    for index, node in parsed['nodes'].items():
        if (not node.get('hostname') and index < min(len(expected_nodes), len(expected_names))
                and node.get('address') == expected_nodes[index]):
            node['hostname'] = expected_names[index]


def _observe(ctl, params):
    """One poll: the assessment plus the source, or raise CtlFailure."""
    local_state = local_error = None
    if params['query_local']:
        local_state, local_error = ctl.local_state()
    parsed = ctl.domain()
    if params['expected_nodes'] is not None:
        _assess.add_unreported(parsed, params['expected_nodes'])
    _name_nodes(parsed, params['expected_nodes'] or [], params['expected_names'] or [])
    assessment = _assess.assess(parsed, expected_nodes=params['expected_nodes'],
                                local_state=local_state, local_error=local_error,
                                absent_nodes=params['absent_nodes'])
    assessment['source'] = parsed['source']
    assessment['ctl_rc'] = parsed.get('exit_code', 0)
    note = exit_code_note(parsed)
    if note and not assessment['healthy']:
        # Said among the problems, so that the verdict keeps the exit code beside the trays it names.
        assessment['problems'].append(note)
    elif note:
        # A table that shows every node READY and every pair connected is the proof asked for; the
        # code, whose meaning is not documented, is told without overruling it.
        assessment['ctl_warning'] = note
    return assessment


def main():
    module = AnsibleModule(
        argument_spec=dict(
            config=dict(type='path', default=CONFIG_PATH),
            expected_nodes=dict(type='list', elements='str'),
            expected_names=dict(type='list', elements='str'),
            wait=dict(type='bool', default=False),
            timeout=dict(type='int', default=_assess.WAIT_TIMEOUT_S),
            interval=dict(type='int', default=5),
            fail_unhealthy=dict(type='bool', default=False),
            query_local=dict(type='bool', default=True),
            command_timeout=dict(type='int', default=30),
            hostnames=dict(type='bool', default=False),
            absent_nodes=dict(type='list', elements='str', default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name, minimum in (('timeout', 0), ('interval', 1), ('command_timeout', 1)):
        if params[name] < minimum:
            module.fail_json(msg='%s must be at least %d, got %d' % (name, minimum, params[name]))
    if not os.path.isfile(params['config']):
        module.fail_json(msg='IMEX config file %s does not exist (option config); nvidia-imex-ctl reads the '
                             'command port and the node list from it' % params['config'])

    ctl_path = module.get_bin_path('nvidia-imex-ctl', opt_dirs=['/usr/bin', '/usr/sbin'])
    if not ctl_path:
        module.fail_json(msg='nvidia-imex-ctl not found on PATH, /usr/bin or /usr/sbin: install the '
                             'nvidia-imex package matching the driver')
    ctl = ImexCtl(module, ctl_path)

    started = time.monotonic()
    deadline = started + (params['timeout'] if params['wait'] else 0)
    attempts = 0
    while True:
        attempts += 1
        assessment = failure = None
        try:
            assessment = _observe(ctl, params)
        except CtlFailure as error:
            failure = error
        if not params['wait'] or (assessment is not None and assessment['healthy']):
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(params['interval'], remaining))
    elapsed = round(time.monotonic() - started, 1)

    if failure is not None:
        msg = failure.message
        if params['wait']:
            msg = _assess.waited_message(failure.message, attempts, elapsed, unhealthy=False)
            failure.details['reason'] = failure.message
        module.fail_json(msg=msg, attempts=attempts, elapsed=elapsed, **failure.details)

    warning = assessment.pop('ctl_warning', None)
    if warning:
        module.warn(warning)
    result = dict(changed=False, attempts=attempts, elapsed=elapsed, **assessment)
    if not assessment['healthy']:
        message = _assess.unhealthy_message(assessment)
        if params['wait']:
            result['reason'] = message
            message = _assess.waited_message(message, attempts, elapsed, unhealthy=True)
        if params['fail_unhealthy']:
            module.fail_json(msg=message, **result)
        if params['wait']:
            module.warn(message)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
