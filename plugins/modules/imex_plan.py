#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: imex_plan
short_description: The run plan of the rackscale.imex roles (internal to the roles)
version_added: 0.3.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - B(Internal to the rackscale.imex roles:) it reads the variables the rackscale.imex.imex role's own
    tasks register, and its arguments and results may change in any release. Use the roles.
  - "O(stage=channels) is the rackscale.imex.imex_channels role's, for the tray it runs on: the channels
    its mode wants and those a read of the tray shows would change."
  - "Makes every decision of a run of the role in one place, on the controller, stage by stage
    (O(stage)): the options of each tray with the role's defaults applied on that tray, the domain
    model and the waves; after the read of each tray, the NVLink fabric and version gate, what to
    write where, which daemons run files older than those on disk and the locks of the domains with
    something to do; after the second read of their trays under those locks (O(stage=reread)), all of
    that again from what they hold then; for each wave, which domains restart and why; right before
    the daemons stop, the busy guard; after the proof, the verdicts."
  - "O(stage=stopped) runs in the rescue of a run that stopped: from the failed task, the registered
    results of the reads and locks (which alone show a tray ssh did not reach) and the plan so far, it
    decides the stage the run stopped at (a refusal of the plan records where it stopped the run; another
    task stopped it after the last stage the plan records it reached), the domains and trays concerned, the
    locks its release left on a tray it did not reach (with when each goes stale), why (never a private key),
    a report (verdict V(not_proven)) of every domain of the run it did not judge, the summary and the
    job artifacts."
  - Each problem is one sentence naming the tray, group, key or value at fault; a stage with
    problems fails and nothing after it runs.
  - Runs entirely in the controller process as an action plugin; no module is executed and no tray
    is contacted.
options:
  stage:
    description: The stage of the plan to make.
    type: str
    required: true
    choices: [arguments, preflight, read, reread, restart, guard, verdicts, discover, channels, stopped]
  entry_point:
    description:
      - For O(stage=arguments), the entry point of the rackscale.imex.imex role's argument spec to check the
        trays' values against (V(main) for the role, V(validate) for its validate tasks).
      - O(stage=arguments) runs before the role, on the controller; it reads the trays of the group
        O(group) and says each error once, naming the trays.
    type: str
    default: main
  group:
    description:
      - For O(stage=arguments), the parent group of the IMEX domains whose trays are checked.
      - For O(stage=stopped), the parent group whose trays the record is about when the play is not on
        the trays (the playbooks' first play, on C(localhost)).
    type: str
    default: imex_domains
  wave:
    description: The domains of the wave, for O(stage=restart) and O(stage=guard).
    type: list
    elements: str
  with_logs:
    description:
      - For O(stage=verdicts), add the daemon log excerpts the role read on the trays a failed proof names.
      - The status reads and log reads are the role's own registered results, read by the plan itself.
    type: bool
    default: false
  domains:
    description: For O(stage=verdicts), the domains to judge.
    type: list
    elements: str
  converge:
    description:
      - For O(stage=read) and O(stage=reread), whether the run may change the trays (V(false) for a
        read-only proof, which takes no lock, refuses no hand-over to the DRA driver and proves every
        domain, in check mode too).
      - For O(stage=preflight), V(false) puts every domain in one wave (a proof changes nothing, so it does
        not stop at the first unhealthy domain).
    type: bool
    default: true
  mode:
    description: For O(stage=channels), who owns the channels (the imex_channels role's mode).
    type: str
    default: static
  channel0:
    description: For O(stage=channels), whether channel0 is wanted.
    type: bool
    default: true
  extra:
    description: For O(stage=channels), the isolation channels (a list, or its JSON or YAML text).
    type: raw
  observed:
    description: For O(stage=channels), the C(channels) result of M(rackscale.imex.imex_tray_info) for these channels.
    type: dict
  reboot_allowed:
    description:
      - For O(stage=channels), whether a reboot may bring the channel0 option into effect (never on a tray
        reached with C(ansible_connection=local), the controller itself).
    type: bool
    default: false
  report_dir:
    description:
      - For O(stage=stopped), the run's C(imex_report_dir), where the trays do not give it (their
        inventory value wins, since a play before the role sees no role default).
    type: str
  textfile_dir:
    description: For O(stage=stopped), the run's C(imex_textfile_dir), as O(report_dir).
    type: str
  lock_stale_after_s:
    description:
      - For O(stage=stopped), the run's C(imex_lock_stale_after_s), as O(report_dir). The record names each lock
        the release of the run's locks left on a tray it did not reach, and when that lock goes stale.
    type: int
  max_nodes:
    description: For O(stage=discover), the largest NVLink partition a domain may be.
    type: int
    default: 18
  allowed_broken_pairs:
    description: For O(stage=verdicts), the broken pairs a domain may have and still pass.
    type: int
    default: 0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.conn
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  become:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    description: Plans the same in check mode; the plan says whether the writes are predictions.
    support: full
  connection:
    support: none
  delegation:
    support: none
    details: Always runs on the controller.
  diff_mode:
    support: none
  idempotent:
    description: Running the action again with the same inputs gives the same plan (but for a new run id).
    support: full
    details: Reads and decides only.
  platform:
    support: full
    platforms: all
    details: Runs on the controller; the target's platform does not matter.
"""

EXAMPLES = r"""
# Only the rackscale.imex.imex role runs this, in its own tasks, for example:
- name: Plan the run
  rackscale.imex.imex_plan:
    stage: preflight
  register: __imex_plan
  run_once: true
"""

RETURN = r"""
plan:
  description:
    - The plan so far. Its shape is internal to the rackscale.imex.imex role.
  returned: success
  type: dict
  sample: {run_id: run-ops@ctl01-pid4242-20261125T141500Z-1, waves: [[rack1], [rack2]]}
problems:
  description: Every problem that stopped the stage, one sentence each.
  returned: failure
  type: list
  elements: str
run_id:
  description: The run's id, from the plan before the stage that failed (for the records of the stopped run).
  returned: failure after the preflight
  type: str
judged:
  description: The domains the run judged before the stage that failed; their reports stand.
  returned: failure after the preflight
  type: list
  elements: str
reached:
  description:
    - The last stage of the run's plan that the run reached before the stage that failed (the plan records it
      as C(reached) after each of its stages), for the records of the stopped run.
  returned: failure after the preflight
  type: str
stopped_at:
  description: Where the refusal stopped the run, as the run's records name it (C(gate) for a refusal of the read).
  returned: failure
  type: str
"""
