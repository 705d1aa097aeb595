#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: imex_report
short_description: Write the reports of IMEX domains on the controller (JSON, Markdown, node_exporter)
version_added: 0.2.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Writes each report of O(reports) as C(<dir>/<domain>.json) on the controller, formatted as the
    P(ansible.builtin.to_nice_json#filter) filter prints it (indent 4, sorted keys) plus a final
    newline. Each report is stamped with C(run_id), C(generated_at) (UTC) and
    C(collection_version), and gets C(last_proven_at), when the domain was last found healthy or
    tolerated (C(generated_at) when the report is ok, else carried from the domain's previous report;
    V(null) when none was).
  - With O(summary), also writes C(<dir>/summary.md), a Markdown table of those domains and the
    problems of each one not healthy.
  - With O(textfile_dir), also writes C(<textfile_dir>/rackscale_imex_<domain>.prom) per report,
    gauges for the node_exporter textfile collector; see O(textfile_dir).
  - Runs entirely in the controller process as an action plugin; no module is executed, locally or
    on a tray, and the target host is never contacted.
  - Each file is replaced atomically (a temporary file in O(dir), flushed to disk, given its mode,
    then renamed over the report), so a reader sees the old report or the complete new one; a failed
    write leaves the old report intact and no temporary file behind.
  - Reports and the summary are C(0640) in a directory of at most C(0750), whatever the umask, since
    they name the trays, their addresses and what is broken; they are for the operator who runs the
    play and a group of theirs. The node_exporter textfiles stay C(0644) in a C(0755) directory (when
    created here), since node_exporter reads them as a user of its own.
  - Every domain name is checked before the first write; a name that cannot be a file name in
    O(dir) fails the task naming it, and nothing is written.
  - Reports are output of the run, not a change to the rack, so the task always returns
    C(changed=false).
  - Used by the rackscale.imex.imex role (its validate step).
options:
  dir:
    description:
      - Controller directory of the reports. A relative path is relative to the controller's
        working directory (where C(ansible-playbook) or the AWX job runs).
      - Created with mode C(0750), parents included, when missing. An existing directory of the
        controller user loses any permission beyond C(0750) (a C(0755) one becomes C(0750), a C(0700)
        one stays so); another user's is left as it is.
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
  run_id:
    description: Identifier of the run, written into each report and the summary.
    type: str
    default: ""
  stopped:
    description:
      - Where a run that stopped stopped, written into the summary - C(stage), C(domains), C(trays),
        C(not_reached), C(task) and C(reasons) (the record the rackscale.imex.imex role's plan makes).
      - A report of a domain such a run did not judge carries C(stopped_at) (verdict V(not_proven)); its
        textfile then holds only what the run knows (see O(textfile_dir)).
    type: dict
  summary:
    description:
      - Every report of the run so far (for example the domains of earlier waves and of this one),
        summarised in C(<dir>/summary.md). Not stamped again and not written as JSON here.
      - Omitted, no summary is written.
    type: list
    elements: dict
  textfile_dir:
    description:
      - Directory read by the node_exporter textfile collector (C(--collector.textfile.directory)).
      - One file per domain of O(reports), replaced atomically, so a run over some domains leaves
        the others' files as they are. Gauges, each labelled C(domain) -
        C(rackscale_imex_domain_ok), C(rackscale_imex_domain_up), C(rackscale_imex_domain_nodes),
        C(rackscale_imex_domain_nodes_ready), C(rackscale_imex_domain_broken_pairs),
        C(rackscale_imex_domain_version_skew), C(rackscale_imex_domain_last_run_timestamp_seconds),
        C(rackscale_imex_domain_last_success_timestamp_seconds) (carried over from the previous file, or
        from C(last_proven_at), while the domain is not healthy), and C(rackscale_imex_node_ready) per
        node (labels C(node), C(address)).
      - For a report with C(stopped_at) (a run that stopped before it judged the domain), only
        C(rackscale_imex_domain_ok) (V(0)), C(rackscale_imex_domain_nodes), the last run and last success
        times, and C(rackscale_imex_domain_run_stopped_timestamp_seconds) (label C(stage)), so no state or
        READY node of an earlier run is left standing.
      - Omitted or empty, no textfile is written.
    type: path
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
    details: Writing the same reports again gives the same files but for their stamp; the task never reports a change.
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
    dir: imex-reports
    reports: "{{ my_domain_reports }}"
    summary: "{{ my_domain_reports }}"
    run_id: "{{ my_run_id }}"
    textfile_dir: /var/lib/node_exporter/textfile_collector
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
    - /srv/ansible/imex-reports/rack1.json
    - /srv/ansible/imex-reports/rack2.json
dir:
  description: O(dir) as an absolute path.
  returned: always
  type: str
  sample: /srv/ansible/imex-reports
summary:
  description: The summary written, or V(null) without O(summary) (or when a write before it failed).
  returned: always
  type: str
  sample: /srv/ansible/imex-reports/summary.md
textfiles:
  description: The node_exporter textfiles written, in the order of O(reports).
  returned: always
  type: list
  elements: str
  sample:
    - /var/lib/node_exporter/textfile_collector/rackscale_imex_rack1.prom
"""
