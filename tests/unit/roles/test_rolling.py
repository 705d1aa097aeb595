# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What keeps one wave's trouble to itself, as the playbook and the wave's tasks wire it. Which locks each wave
refreshes and in what order the waves run is the plan's (tests/unit/plan/test_scenarios.py, test_plan_work.py)."""
from __future__ import annotations

from ansible_collections.rackscale.imex.tests.unit.roles.role_files import load


def test_a_failed_tray_stops_the_site_run_so_no_later_wave_touches_another_rack():
    """Without any_errors_fatal the other trays would go on to the next waves after one tray's failed write."""
    trays = [play for play in load("playbooks/site.yml") if play["hosts"] == "imex_domains"]
    assert len(trays) == 1 and trays[0].get("any_errors_fatal") is True, trays


def test_a_wave_refreshes_its_domains_locks_before_it_does_anything_else():
    """A lock another run took over stops the wave before its channels or writes."""
    first = load("roles/imex/tasks/wave.yml")[0]
    assert first.get("ansible.builtin.import_tasks") == "refresh.yml" and "when" not in first, first
    refresh = load("roles/imex/tasks/refresh.yml")
    assert [task.get("rackscale.imex.imex_lock", {}).get("refresh") for task in refresh] == [True]
    assert refresh[0]["loop"] == "{{ __imex_run.wave_locks[__imex_wave_index] }}"
