#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copyright: rackscale.imex maintainers
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: imex_lock
short_description: Hold a run lock on a tray so that two runs never work on one IMEX domain at once
version_added: 0.1.0
author: rackscale.imex maintainers (!UNKNOWN)
description:
  - Takes (O(state=present)) or releases (O(state=absent)) a lock file on the target tray for
    the duration of a run, so that a second run against the same rack (another operator, another
    AWX job, another controller) waits or fails with a clear message instead of interleaving
    daemon restarts with the first.
  - The lock lives on the trays, not on the controller, because concurrent runs may come from
    different controllers.
  - Taking the lock is atomic, the file is created with C(O_CREAT|O_EXCL); of two runs that find
    the tray free, exactly one gets it. The file holds JSON with the owner, the time it was taken
    (C(since), epoch seconds, and C(since_utc)), the tray's host name and the holder's O(stale_after).
  - The same O(owner) taking the lock again is a no-op (C(changed=false)), so the lock can be
    taken at several points of one run; with O(refresh=true) it writes a new C(since), so that a run
    longer than O(stale_after) is not taken over while it works. Either way the task fails when the
    lock is no longer this owner's, which makes it a check before a step that needs the lock.
  - A lock held by another owner is waited for up to O(wait) seconds; then the task fails with a
    message naming the holder and since when.
  - A lock older than O(stale_after) seconds is taken to be abandoned by a run that was killed
    before it could release it, and is taken over; RV(took_over), RV(holder) and a warning report
    the old owner. When the holder recorded a larger O(stale_after) (or V(0)) in the lock, that one
    counts, so a long run is not taken over by a run expecting shorter ones.
  - Releasing removes the lock only when O(owner) holds it; a lock held by anyone else is never
    removed.
options:
  state:
    description:
      - V(present) takes the lock, V(absent) releases it.
    type: str
    choices: [present, absent]
    default: present
  path:
    description:
      - The lock file. Under C(/run) by default, so that a reboot of the tray clears it.
      - Every run against a domain must use the same path. The parent directory is created
        (mode 0700) when missing; an existing one must belong to the module's user and not be
        writable by group or others (not C(/run/lock), which any local user can write), or the task
        fails naming it.
      - Symbolic links, non-regular files and files of another owner at this path are refused.
    type: path
    default: /run/rackscale-imex/run.lock
  owner:
    description:
      - Identifier of the run holding the lock, unique per run and the same on every task of
        that run, for example C(<controller host>:<pid>:<playbook start time>) or the AWX job id.
      - It appears in the failure message of any other run, so it should tell an operator who
        runs what.
    type: str
    required: true
  wait:
    description:
      - Seconds to wait for a lock held by another owner before failing. V(0) fails at once.
    type: int
    default: 0
  interval:
    description: Seconds between two looks at a held lock while waiting.
    type: int
    default: 2
  stale_after:
    description:
      - A lock older than this many seconds is considered abandoned by a crashed run and is taken
        over. Must exceed the longest run; V(0) never takes a lock over.
      - It is recorded in the lock this task takes, and another run honours the larger of its own
        and the recorded one (V(0), never, counting as the largest); RV(holder_stale_after) reports
        the value found. Locks written by earlier releases, which record none, are judged by this
        option alone.
      - A lock file that cannot be read as a lock (for example empty) counts as held by an unknown
        owner since its modification time.
    type: int
    default: 3600
  refresh:
    description:
      - With O(state=present), when O(owner) already holds the lock, write a new C(since)
        (C(changed=true)). Without it, holding the lock already changes nothing.
      - The owner must hold the lock already; one that has gone (a reboot clears C(/run), or it was
        removed by hand) fails naming the path and the tray, and is never taken again, since another
        run may have worked on the domain meanwhile. In check mode, where the take wrote no lock, a
        missing lock is what the take left.
    type: bool
    version_added: 0.2.0
    default: false
attributes:
  check_mode:
    description:
      - Can run in check mode and reports what would happen without creating or removing anything.
      - A lock held by another owner still makes the task fail (after O(wait)), so a check run
        reports the truth.
    support: full
  diff_mode:
    description: Will return details on what has changed when in diff mode.
    support: none
  idempotent:
    description: Running the module again with the same options changes nothing.
    support: full
  platform:
    description: Target OS families that can be operated against.
    support: full
    platforms: posix
notes:
  - Removing a lock (release, takeover) is serialised with an C(flock) on the empty companion file
    C(<path>.guard), so that two runs finding the same abandoned lock cannot both take it over.
    The guard file is harmless and needs no cleanup.
  - The C(flock) on the guard is waited for at most 30 seconds. A lock whose C(since) lies more than
    300 seconds in the future of the tray's clock is refused, naming it, because it would never
    become stale.
  - A run killed hard cannot release its lock. Either wait O(stale_after) seconds or, after
    making sure that run is gone, remove O(path) on the tray by hand.
  - Take the lock before the first change and release it at the end of the run, also when the run
    fails (for example in an C(always) section), but only where this run took it; releasing a lock
    held by another owner fails.
  - When the lock is taken on several trays, take it in the same order in every run (for example
    with C(throttle=1) in inventory order) or on one designated tray per domain; two runs taking
    locks on several trays in parallel can each end up with part of them and both fail.
"""

EXAMPLES = r"""
- name: Name the run once; every tray must see the same owner
  ansible.builtin.set_fact:
    imex_run_owner: >-
      {{ lookup('ansible.builtin.pipe', 'hostname') }}:{{ awx_job_id | default('cli') }}:{{ now(utc=true).isoformat() }}
  run_once: true

- name: Work on the domain while holding the lock on every tray
  block:
    - name: Take the run lock, waiting up to 10 minutes for another run to finish
      rackscale.imex.imex_lock:
        owner: "{{ imex_run_owner }}"
        wait: 600
        interval: 5
      register: imex_lock_taken

    - name: Restart the daemons (only one run at a time gets here)
      ansible.builtin.debug:
        msg: restarts go here
  always:
    - name: Release the run lock where this run took it, also when the run failed
      rackscale.imex.imex_lock:
        owner: "{{ imex_run_owner }}"
        state: absent
      when: imex_lock_taken is succeeded

- name: Fail at once when another run holds the lock; take over locks older than 2 hours
  rackscale.imex.imex_lock:
    owner: "{{ imex_run_owner }}"
    stale_after: 7200
  # A run that holds this lock and recorded stale_after 10800 is taken over only after 3 hours.
"""

RETURN = r"""
owner:
  description: The owner this task acted for (O(owner)).
  returned: always
  type: str
  sample: "awx-ctl-1:4711:2025-01-31T12:00:00Z"
holder:
  description:
    - Owner recorded in the lock file found on the tray before acting.
    - V(null) when there was no lock, or when the file could not be read as a lock.
    - Equal to RV(owner) on a repeated acquire; the old owner on a takeover; the other run when the
      task fails because the lock is held.
  returned: always
  type: str
  sample: "rack-ops-2:812:2025-01-31T11:58:02Z"
since:
  description: When RV(holder) took the lock, epoch seconds; V(null) when there was no lock.
  returned: always
  type: float
  sample: 1738324682.25
holder_stale_after:
  description:
    - The O(stale_after) RV(holder) recorded in its lock, seconds (V(0) - never taken over).
    - V(null) when there was no lock, the lock could not be read, or it was written by an earlier
      release that recorded none (then O(stale_after) alone decides).
  returned: always
  type: int
  sample: 7200
  version_added: 0.3.0
took_over:
  description:
    - True when an abandoned lock was (check mode - would be) taken over, one older than O(stale_after)
      or RV(holder_stale_after), whichever is larger.
  returned: always
  type: bool
  sample: false
waited:
  description: Seconds spent waiting for another run's lock.
  returned: always
  type: float
  sample: 12.0
lock:
  description:
    - The lock record in the file after the task (in check mode - what would be written); V(null)
      after a release.
  returned: success
  type: dict
  contains:
    owner:
      description: Owner holding the lock.
      type: str
    since:
      description: When the lock was taken, epoch seconds.
      type: float
    since_utc:
      description: RV(lock.since) as C(YYYY-MM-DD HH:MM:SS UTC).
      type: str
    hostname:
      description: Host name of the tray holding the lock file.
      type: str
    stale_after:
      description:
        - O(stale_after) of the run holding the lock; absent from locks written by earlier releases.
      type: int
      version_added: 0.3.0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rackscale.imex.plugins.module_utils._lock import (
    DEFAULT_PATH,
    LockError,
    acquire,
    effective_stale_after,
    release,
    utc_text,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "absent"], default="present"),
            path=dict(type="path", default=DEFAULT_PATH),
            owner=dict(type="str", required=True),
            wait=dict(type="int", default=0),
            interval=dict(type="int", default=2),
            stale_after=dict(type="int", default=3600),
            refresh=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    owner = params["owner"]
    if not owner.strip():
        module.fail_json(msg="owner must not be empty: give an identifier unique to this run, for example "
                             "<controller host>:<pid>:<playbook start time>")
    if owner != owner.strip() or any(ord(char) < 32 for char in owner):
        module.fail_json(msg="owner %r must not have leading/trailing blanks or control characters" % owner)
    for name, minimum in (("wait", 0), ("interval", 1), ("stale_after", 0)):
        if params[name] < minimum:
            module.fail_json(msg="%s must be at least %d, got %d" % (name, minimum, params[name]))

    try:
        if params["state"] == "absent":
            result = release(params["path"], owner, check_mode=module.check_mode)
        else:
            result = acquire(params["path"], owner, wait=params["wait"], interval=params["interval"],
                             stale_after=params["stale_after"], check_mode=module.check_mode,
                             refresh_own=params["refresh"])
    except LockError as exc:
        details = dict(owner=owner, holder=None, since=None, holder_stale_after=None, took_over=False, waited=0.0)
        details.update(exc.details)
        module.fail_json(msg=exc.message, **details)

    if result["took_over"]:
        limit = effective_stale_after(params["stale_after"], result["holder_stale_after"])
        module.warn("%s: %s the abandoned lock of %s taken %s (older than stale_after=%d s%s); that run is "
                    "assumed to have crashed"
                    % (params["path"], "would take over" if module.check_mode else "took over",
                       result["holder"] or "an unknown owner (unreadable lock file)",
                       utc_text(result["since"]), limit,
                       ", as its holder recorded" if limit != params["stale_after"] else ""))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
