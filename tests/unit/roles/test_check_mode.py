# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""--check predicts exactly what the real run does, as the modules' check modes alone cannot:

- On a tray that has never been configured, the systemd module looks a unit up even under --check and fails
  with "Could not find the requested service" when it is not installed: so no task of the roles may start,
  stop, enable, disable or mask, through the systemd module, a unit that the roles themselves install (a copy
  or template into a systemd unit directory). The unit is then enabled by its `WantedBy` link, which the file
  module predicts.
- Under --check the daemon's start is only predicted: a handler that acts on the started instance finds the
  old one (or none), so it predicts its change (`changed_when: ... or ansible_check_mode`, or the plan's
  `start_predicted`)."""
from __future__ import annotations

import os

from ansible_collections.rackscale.imex.tests.unit.roles.role_files import ROOT, load, task_files

UNIT_DIRS = ("/etc/systemd/system/", "/usr/lib/systemd/system/", "/lib/systemd/system/")
INSTALLERS = ("ansible.builtin.copy", "ansible.builtin.template")
SYSTEMD = ("ansible.builtin.systemd_service", "ansible.builtin.systemd")


def tasks_of(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from tasks_of(task.get(key))


def role_tasks(root=ROOT):
    for path in task_files(os.path.join(root, "roles", "*")):
        for task in tasks_of(load(path)):
            yield os.path.relpath(path, root), task


def units_the_roles_install(tasks):
    units = set()
    for _path, task in tasks:
        for action in INSTALLERS:
            dest = str((task.get(action) or {}).get("dest", ""))
            if dest.startswith(UNIT_DIRS):
                units.add(os.path.basename(dest))
    return units


def systemd_tasks_on(units, tasks):
    found = []
    for path, task in tasks:
        for action in SYSTEMD:
            args = task.get(action) or {}
            if str(args.get("name", "")) in units:
                found.append("%s: %s" % (path, task.get("name")))
    return found


def test_no_systemd_module_task_acts_on_a_unit_the_roles_install():
    tasks = list(role_tasks())
    units = units_the_roles_install(tasks)
    assert "rackscale-imex-channels.service" in units
    assert systemd_tasks_on(units, tasks) == []


def test_the_rule_finds_an_enable_of_a_unit_installed_just_before():
    # The shape of the boot unit's tasks before --check learnt to predict them.
    install = {"src": "x.service", "dest": "/etc/systemd/system/x.service"}
    enable = {"name": "x.service", "enabled": True}
    start = {"name": "nvidia-imex.service", "state": "started"}
    tasks = [("roles/x/tasks/boot.yml", {"name": "Install the unit", "ansible.builtin.copy": install}),
             ("roles/x/tasks/boot.yml", {"name": "Enable the unit", "ansible.builtin.systemd_service": enable}),
             ("roles/x/tasks/boot.yml", {"name": "Start the vendor's daemon", "ansible.builtin.systemd_service": start})]
    assert systemd_tasks_on(units_the_roles_install(tasks), tasks) == ["roles/x/tasks/boot.yml: Enable the unit"]


START = "Start IMEX daemon"
PREDICTIONS = ("ansible_check_mode", "start_predicted")


def handlers_unpredicted_after_the_start(handlers):
    """The handlers run with the daemon's start whose change --check cannot see and does not predict."""
    found = []
    for handler in handlers:
        if handler.get("listen") != START and handler.get("name") != START:
            continue
        changed_when = handler.get("changed_when", True)
        if changed_when is False or str(changed_when).strip().lower() == "false":
            continue
        if not any(word in str(changed_when) for word in PREDICTIONS):
            found.append(handler.get("name"))
    return found


def test_every_handler_of_the_start_predicts_its_change_under_check():
    handlers = list(tasks_of(load(os.path.join("roles", "imex", "handlers", "main.yml"))))
    assert any(h.get("listen") == START for h in handlers)
    assert handlers_unpredicted_after_the_start(handlers) == []


def test_the_rule_finds_the_record_of_the_started_instance_without_a_prediction():
    # The daemon record's handler before --check learnt to predict it.
    handlers = [{"name": START, "ansible.builtin.systemd_service": {"name": "nvidia-imex", "state": "started"},
                 "changed_when": "__imex_daemon_start.changed or __imex_tray.start_predicted"},
                {"name": "Reset the start limit", "listen": START, "changed_when": False},
                {"name": "Record what the started IMEX daemon loaded", "listen": START,
                 "rackscale.imex.imex_daemon_record": {"service": "nvidia-imex"}}]
    assert handlers_unpredicted_after_the_start(handlers) == ["Record what the started IMEX daemon loaded"]
