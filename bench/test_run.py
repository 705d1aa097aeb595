"""Tests of the benchmark's own parts that need no bed: the estimate of the time left, the budget,
the progress line, and the stopping of its children on a signal.
Run: .venv/bin/python -m pytest -q bench/test_run.py (not part of tools/test: bench/ does not ship)."""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

RUN_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py")
SPEC = importlib.util.spec_from_file_location("bench_run", RUN_PY)
run = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(run)


# --------------------------------------------------------------------------- estimate

def test_estimate_uses_the_mean_of_a_measured_kind():
    assert run.estimate_seconds(["a", "a", "b"], {"a": [10, 20], "b": [4]}, {}) == 15 + 15 + 4


def test_estimate_scales_the_prior_of_an_unmeasured_kind_by_the_pace_so_far():
    # "a" took twice its prior: "c", not measured yet, is expected to take twice its own.
    priors = {"a": 10, "c": 100}
    assert run.estimate_seconds(["c"], {"a": [20, 20]}, priors) == pytest.approx(200)


def test_estimate_without_a_prior_takes_the_average_step():
    assert run.estimate_seconds(["new"], {"a": [10], "b": [30]}, {}) == 20


def test_estimate_before_anything_is_measured():
    assert run.estimate_seconds(["a", "new"], {}, {"a": 7}) == 7 + run.DEFAULT_STEP_S


def test_pace_ignores_kinds_without_a_prior():
    priors = {"a": 10, "c": 50}
    assert run.estimate_seconds(["c"], {"a": [10], "odd": [1000]}, priors) == pytest.approx(50)


# --------------------------------------------------------------------------- progress line

def test_progress_line():
    line = run.progress_line(7, 42, "converge-4x18", 1, 3, 372, 14 * 60 + 10)
    assert line == "[bench] 7/42 converge-4x18 rep 2/3 · elapsed 6m12s · about 14m left"


def test_progress_line_of_a_step_outside_the_repetitions():
    assert run.progress_line(1, 9, "up-4x18", None, 2, 5, 40) == "[bench] 1/9 up-4x18 · elapsed 5s · about 40s left"


def test_durations():
    assert run.duration(59.6) == "1m00s"
    assert run.duration(3725) == "62m05s"
    assert run.rough(89) == "90s"
    assert run.rough(20 * 60 + 20) == "20m"


# --------------------------------------------------------------------------- phases and budget

def phases(two=3, four=2):
    return [run.Phase("two racks", ["up", "s1", "s2", "down"], two),
            run.Phase("four racks", ["f1", "f2"], four, before=["up4", "conv4"], after=["down4"])]


def test_phase_steps_and_what_remains():
    phase = phases()[1]
    assert phase.steps() == [("up4", None), ("conv4", None), ("f1", 0), ("f2", 0), ("f1", 1), ("f2", 1),
                             ("down4", None)]
    phase.position = 3
    assert phase.remaining() == ["f2", "f1", "f2", "down4"]


def test_no_cut_within_the_budget():
    plan = phases()
    priors = {"s1": 1, "s2": 1, "down": 1, "up4": 1, "conv4": 1, "f1": 1, "f2": 1, "down4": 1}
    cuts, _, end = run.fit_budget(plan, 0, 1000, {"up": [1]}, priors)
    assert cuts == [] and [p.reps for p in plan] == [3, 2]
    assert end == pytest.approx(3 * 4 + 2 + 2 * 2 + 1)


def test_cuts_take_the_phase_with_the_most_repetitions_left_first():
    plan = phases()
    measured = {"up": [10], "s1": [10], "s2": [10], "down": [10], "up4": [10], "conv4": [10], "f1": [50],
                "f2": [50], "down4": [10]}
    # As planned: 3 x 40 + 20 + 2 x 100 + 10 = 350 s.
    cuts, planned, end = run.fit_budget(plan, 0, 300, measured, {})
    assert planned == cuts
    assert [(c["phase"], c["reps_from"], c["reps_to"]) for c in cuts] == [("two racks", 3, 2), ("four racks", 2, 1)]
    assert [p.reps for p in plan] == [2, 1]
    assert end == pytest.approx(2 * 40 + 20 + 100 + 10)
    assert cuts[0]["estimate_before_s"] == 350 and cuts[-1]["estimate_after_s"] == end


def test_on_a_tie_the_costlier_repetition_goes_first():
    plan = phases(two=2, four=2)
    measured = {"up": [10], "s1": [10], "s2": [10], "down": [10], "up4": [10], "conv4": [10], "f1": [50],
                "f2": [50], "down4": [10]}
    cuts, _, _ = run.fit_budget(plan, 0, 290, measured, {})
    assert [(c["phase"], c["reps_to"]) for c in cuts] == [("four racks", 1)]


def test_never_below_one_repetition_nor_below_those_started():
    plan = phases()
    plan[0].started, plan[0].position = 2, 8     # two repetitions of the first phase done
    measured = {kind: [100] for kind in ("up", "s1", "s2", "down", "up4", "conv4", "f1", "f2", "down4")}
    cuts, _, end = run.fit_budget(plan, 500, 10, measured, {})
    assert [p.reps for p in plan] == [2, 1]
    assert end > 10 and len(cuts) == 2


MEASURED = {"up": [10], "s1": [10], "s2": [10], "down": [10], "up4": [10], "conv4": [10], "f1": [50], "f2": [50],
            "down4": [10]}


def test_a_cut_of_a_later_phase_waits_for_its_repetition():
    """Before the second repetition of the first phase, the plan drops one of the four-rack phase
    (not begun): nothing is cut yet, that phase will decide on its own measurements."""
    plan = phases()
    plan[0].started, plan[0].position = 1, 4
    made, planned, end = run.fit_budget(plan, 40, 290, MEASURED, {}, current=plan[0])
    assert made == [] and [(c["phase"], c["reps_to"]) for c in planned] == [("four racks", 1)]
    assert [p.reps for p in plan] == [3, 2]
    assert end == pytest.approx(40 + 2 * 40 + 20 + 100 + 10)


def test_the_current_repetition_goes_when_the_plan_drops_it():
    plan = phases()
    plan[0].started, plan[0].position = 2, 8
    # 80 s spent; left: 1 x 40 + 20 + 2 x 100 + 10 = 270 s. Budget 240: the four-rack phase, with the
    # most repetitions left, loses one (250 s), then this phase its third (210 s), which goes now.
    made, planned, _ = run.fit_budget(plan, 80, 240, MEASURED, {}, current=plan[0])
    assert [(c["phase"], c["reps_from"], c["reps_to"]) for c in planned] == [("four racks", 2, 1),
                                                                            ("two racks", 3, 2)]
    assert [(c["phase"], c["reps_from"], c["reps_to"]) for c in made] == [("two racks", 3, 2)]
    assert [p.reps for p in plan] == [2, 2]


class FakeRunner:
    def check(self):
        pass


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_bench_reports_progress_and_drops_repetitions_to_fit(capsys):
    """Steps of fixed durations: the first repetition shows the second phase would overrun the budget."""
    clock = Clock()
    plan = [run.Phase("two racks", ["a", "b"], 3), run.Phase("four racks", ["c"], 3, before=["up4"])]
    bench = run.Bench(FakeRunner(), plan, 200, "/nonexistent", priors={"a": 10, "b": 10, "up4": 10, "c": 10},
                      clock=clock)
    took = {"a": 10, "b": 10, "up4": 20, "c": 40}

    def advance(kind):
        clock.now += took[kind]

    for _ in bench.reps(plan[0]):
        for kind in ("a", "b"):
            bench.step(plan[0], kind, lambda kind=kind: advance(kind))
    bench.step(plan[1], "up4", lambda: advance("up4"))
    for _ in bench.reps(plan[1]):
        bench.step(plan[1], "c", lambda: advance("c"))
    out = capsys.readouterr().out
    assert "[bench] 1/10 a rep 1/3 · elapsed 0s" in out
    # Until up4, every step took its prior: no cut. Then c, measured at 40 s (four times its prior),
    # makes 3 x 40 s end at 120 + 2 x 40 + 10 (results) = 210 s > 200 s: one repetition goes.
    assert [(c["phase"], c["reps_from"], c["reps_to"]) for c in bench.cuts] == [("four racks", 3, 2)]
    assert "budget 3m20s" in out and "four racks: 3 -> 2 repetitions" in out
    meta = bench.run_meta()
    assert meta["reduced_by_budget"] and meta["phases"][1] == {"name": "four racks", "reps_planned": 3, "reps_run": 2}
    assert [step["step"] for step in meta["steps"]] == ["a", "b"] * 3 + ["up4", "c", "c"]


def test_bench_refuses_a_step_out_of_plan():
    plan = [run.Phase("p", ["a", "b"], 1)]
    bench = run.Bench(FakeRunner(), plan, None, "/nonexistent", clock=Clock())
    list(zip(bench.reps(plan[0]), [0]))
    with pytest.raises(RuntimeError):
        bench.step(plan[0], "b", lambda: None)


# --------------------------------------------------------------------------- signals (no bed)

CHILD = textwrap.dedent("""
    import importlib.util, sys
    spec = importlib.util.spec_from_file_location("bench_run", %r)
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    runner = run.Runner()
    runner.install()
    try:
        # A "playbook" that leaves a grandchild in its process group, and ignores nothing.
        runner.run(["sh", "-c", "sleep 300 & echo $! > %s; sleep 300"], run.PLAYBOOK)
    except run.Interrupted as exc:
        print("interrupted", exc.signum, flush=True)
        sys.exit(128 + exc.signum)
""")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_stops_the_running_child_and_its_process_group(tmp_path, signum):
    pid_file = tmp_path / "grandchild.pid"
    bench = subprocess.Popen([sys.executable, "-c", CHILD % (RUN_PY, str(pid_file))], stdout=subprocess.PIPE,
                             text=True)
    deadline = time.monotonic() + 20
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "the child did not start"
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    bench.send_signal(signum)
    out, _ = bench.communicate(timeout=30)
    assert bench.returncode == 128 + signum
    assert "interrupted %d" % signum in out
    with pytest.raises(ProcessLookupError):
        os.kill(grandchild, 0)


def _scenario(name, racks, ratio):
    return {"name": name, "racks": racks, "trays": 18 * racks, "reps": 1, "wall_median_s": ratio * 4.0,
            "wall_min_s": ratio * 4.0, "wall_max_s": ratio * 4.0, "ratio_to_floor": ratio,
            "module_runs_per_tray": 1.0, "task_results_per_tray": 6.0, "controller_cpu_s": 1.0,
            "controller_cpu_s_per_tray": 0.1}


def test_the_table_states_the_targets_and_the_four_racks_ratio_against_one_racks():
    text = run.render_table([_scenario("floor", 1, 1.0), _scenario("site_nochange", 1, 2.0),
                             _scenario("floor_4racks", 4, 1.0), _scenario("site_nochange_4racks", 4, 2.5)])
    assert "no-change <= 6 task results/tray (aim 4), <= 1.1 module runs/tray, <= 2.0x floor (aim 1.5x)" in text
    assert "Four racks' no-change ratio to their floor / one rack's: 1.25x." in text
    assert "Four racks' no-change ratio" not in run.render_table([_scenario("site_nochange", 1, 2.0)])


def test_the_trays_cpu_is_read_from_simracks_cgroup_v1_or_v2(tmp_path):
    v1 = tmp_path / "cpuacct.usage"
    v1.write_text("2500000000\n")
    v2 = tmp_path / "cpu.stat"
    v2.write_text("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
    assert run.trays_cpu_s((str(v1), str(v2))) == 2.5
    assert run.trays_cpu_s((str(tmp_path / "absent"), str(v2))) == 1.5
    assert run.trays_cpu_s((str(tmp_path / "absent"),)) is None


def test_the_table_gives_the_trays_cpu_per_tray_where_it_was_measured():
    measured = dict(_scenario("floor", 1, 1.0), trays_cpu_s_per_tray=0.123)
    text = run.render_table([measured, _scenario("site_nochange", 1, 2.0)])
    rows = [line for line in text.splitlines() if line.startswith("| floor") or line.startswith("| site_nochange")]
    assert rows[0].endswith("| 0.123 |") and rows[1].endswith("| - |"), rows
