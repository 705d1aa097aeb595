#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: imex_report
short_description: Write the JSON report of each IMEX domain on the controller
version_added: 0.2.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Writes each report of O(reports) as C(<dir>/<domain>.json) on the controller, formatted as the
    P(ansible.builtin.to_nice_json#filter) filter prints it (indent 4, sorted keys) plus a final
    newline.
  - Runs entirely in the controller process as an action plugin; no module is executed, locally or
    on a tray, and the target host is never contacted.
  - Each file is replaced atomically (a temporary file in O(dir), flushed to disk, given mode
    C(0644), then renamed over the report), so a reader sees the old report or the complete new
    one; a failed write leaves the old report intact and no temporary file behind.
  - Every domain name is checked before the first write; a name that cannot be a file name in
    O(dir) fails the task naming it, and nothing is written.
  - Reports are output of the run, not a change to the rack, so the task always returns
    C(changed=false).
  - Used by the rackscale.imex.imex_validate role.
options:
  dir:
    description:
      - Controller directory of the reports.
      - Created with mode C(0755), parents included, when missing; an existing directory is left as
        it is.
    type: path
    required: true
  reports:
    description:
      - The reports, for example the verdicts the rackscale.imex.imex role judges for each domain.
      - Each needs a C(domain) key naming the file; the name must be a non-empty string without
        C(/), and not C(.) or C(..). Two reports may not name the same domain.
      - Every value must be JSON data (strings, numbers, booleans, null, lists and dicts).
    type: list
    elements: dict
    required: true
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
    description:
      - Runs in check mode and writes the reports there too, unlike a module that only predicts.
      - The reports are output of the run on the controller, not a change to the rack, and a
        read-only run such as C(validate.yml --check) is expected to leave them behind.
    support: full
  connection:
    support: none
  delegation:
    support: none
    details: The reports are always written on the controller; C(delegate_to) changes nothing.
  diff_mode:
    support: none
  idempotent:
    description: Running the action again with the same options changes nothing.
    support: full
    details: Writing the same reports again gives the same files; the task never reports a change.
  platform:
    support: full
    platforms: all
    details: Runs on the controller; the target's platform does not matter.
seealso:
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Write the report of every domain, once per run
  rackscale.imex.imex_report:
    dir: "{{ playbook_dir }}/../reports"
    reports: "{{ my_domain_reports }}"
  run_once: true

- name: Write a report built by hand
  rackscale.imex.imex_report:
    dir: /var/tmp/imex-reports
    reports:
      - domain: rack1
        verdict: healthy
        ok: true
"""

RETURN = r"""
paths:
  description:
    - The report files written, in the order of O(reports).
    - When a write fails, the files written before it.
  returned: always
  type: list
  elements: str
  sample:
    - /srv/ansible/reports/rack1.json
    - /srv/ansible/reports/rack2.json
"""
