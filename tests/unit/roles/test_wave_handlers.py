# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The handlers a wave flushes are those of its own domains' trays. The first wave ensures the channels of
every tray; a tray of a later wave's domain runs their handlers (a reboot for the channel option, which clears
its domain's run lock under /run) in its own domain's wave, which it includes too (plan/work.py), not in the
first: rebooted there, the lock its domain's wave refreshes would be gone."""
from __future__ import annotations

import os

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
WAVE = os.path.join(ROOT, "roles", "imex", "tasks", "wave.yml")
OWN_DOMAINS = "__imex_tray.domain in __imex_wave"


def flushes(path):
    with open(path, encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    return [task for task in tasks if str(task.get("ansible.builtin.meta", "")) == "flush_handlers"]


def test_the_wave_flushes_the_handlers_of_its_own_domains_trays_alone():
    found = flushes(WAVE)
    assert found, "wave.yml flushes no handlers"
    for task in found:
        when = task.get("when")
        assert OWN_DOMAINS in (when if isinstance(when, list) else [when]), task


def test_a_flush_without_the_gate_is_found(tmp_path):
    seeded = tmp_path / "wave.yml"
    seeded.write_text("- name: Flush\n  ansible.builtin.meta: flush_handlers\n  tags: [imex_daemon]\n")
    task = flushes(str(seeded))[0]
    assert OWN_DOMAINS not in [task.get("when")]
