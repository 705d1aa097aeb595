# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each wave's loops go over (the status reads, the proofs, the verdicts), as plan fields indexed by the
wave: the tasks read them and select nothing themselves."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import WAVE_LISTS, from_register, to_register
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import (
    all_ready,
    model_of,
    options_of,
    planned,
    preflight,
    wrote,
)

THREE_RACKS = {"rackA": ["a1", "a2"], "rackB": ["b1", "b2"], "rackC": ["c1", "c2"]}


def wave_lists(plan):
    return {name: plan[name] for name in WAVE_LISTS}


def test_each_wave_lists_its_own_domains_in_wave_order():
    _model, _options, plan = planned(THREE_RACKS, by_tray={"b1": {"imex_mode": "dra", "imex_channel0": False},
                                                           "b2": {"imex_mode": "dra", "imex_channel0": False}})
    assert plan["waves"] == [["rackA"], ["rackB"], ["rackC"]]
    # The DRA driver's domain has no host daemon to read or prove (but its verdict: not proven on converge).
    assert wave_lists(plan) == {"wave_status_reads": [["rackA"], [], ["rackC"]],
                                "wave_proofs": [["rackA"], [], ["rackC"]],
                                "wave_verdicts": [["rackA"], [], ["rackC"]]}


def test_a_domain_proven_by_the_read_before_the_restarts_leaves_its_wave_proofs():
    _model, _options, plan = planned(every={"imex_rolling": False})
    assert plan["waves"] == [["rackA", "rackB"]]
    writes = {"a1": wrote(), "a2": wrote(config=True), "b1": wrote(), "b2": wrote()}
    after = run_plan.restart.restart(plan, ["rackA", "rackB"], writes, all_ready(plan, ["rackA", "rackB"]))
    assert wave_lists(after) == {"wave_status_reads": [["rackA", "rackB"]], "wave_proofs": [["rackA"]],
                                 "wave_verdicts": [["rackA", "rackB"]]}


def test_a_proof_puts_every_domain_in_one_wave():
    model = model_of(THREE_RACKS)
    options = options_of(model)
    assert preflight(model, options)["waves"] == [["rackA"], ["rackB"], ["rackC"]]
    assert preflight(model, options, converge=False)["waves"] == [["rackA", "rackB", "rackC"]]


def test_the_wave_lists_follow_the_run_lists_whatever_the_register_said():
    # A seeded stale list in a register is derived again from the run's lists on the way out.
    _model, _options, plan = planned(reads={"a2": {"config": "LOG_LEVEL=4\n"}})
    run = from_register(dict(plan, wave_proofs=[["rackB"], ["rackA"]]))
    assert to_register(run)["wave_proofs"] == [["rackA"], ["rackB"]]
