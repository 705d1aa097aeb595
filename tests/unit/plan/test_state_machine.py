# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Seeded random sequences on the simulated domain of the recorded reads, and on two racks of it rolled one
wave after the other: trays stopped, busy, written behind the daemon's back or unreachable; runs with
out-of-service lists, --limit slices, --check, mode and option changes, and a second run started during a first
one's pre-restart tasks. After each run the invariants below are checked, domain by domain; each is also shown
failing on a plan altered on purpose, so that none is trusted without having been seen to fail."""
from __future__ import annotations

import copy
import random
import re

import pytest

from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.tests.unit.plan.scenario import Bed, Run

SEEDS = (1, 2)
STEPS = 1000
# One rack, and two: each its own domain and wave, so that what one domain's trays do meets the other's.
RACKS = (1, 2)
PORTS = (50000, 50010, 50020)
MODES = (("static", True), ("dra_host_managed", True))
WORK = [{"pid": 4242, "name": "python3"}]

INVARIANTS = (
    "a busy or partial domain is never restarted",
    "a restart takes every tray in service of the domain together",
    "a tray out of service never blocks its peers, and joins when back",
    "two runs of one domain exclude each other",
    "a refusal says exactly what was written",
    "--check predicts exactly what the real run does",
    "every refusal names its tray or domain",
    "the running peers of a tray started reconnect to it",
)
BUSY, TOGETHER, AWAY, LOCKS, WRITTEN, CHECK, NAMED, RECONNECT = INVARIANTS
WRITTEN_SENTENCE = re.compile(r"(Nothing was written\.|Written before this refusal: (?P<list>[^.]*)\.)")


def files_changed(before, after):
    return sorted(tray for tray in after if after[tray] != before[tray])


def told_written(problems):
    """The trays the refusal says were written, or None when it says nothing of what was written."""
    found = None
    for problem in problems:
        for match in WRITTEN_SENTENCE.finditer(problem):
            found = found or set()
            if match.group("list"):
                found.update(part.rsplit(" on ", 1)[1] for part in match.group("list").split("; "))
    return found


class Explorer:
    """One seeded random sequence; ``violations`` holds (step, invariant, detail)."""

    def __init__(self, seed, racks=1):
        self.random = random.Random(seed)
        self.bed = Bed("healthy", racks=racks)
        self.trays = list(self.bed.trays_in_order)
        # With more trays more of them are dark at a time: each further rack makes a dark tray come back more
        # often, so that runs still get past their locks and reads to the restarts.
        self.kinds = ("stop", "work", "idle", "idle", "edit", "unreachable", "reachable", "reachable", "options",
                      "options", "nothing") + ("reachable",) * 3 * (racks - 1)
        self.options = {"imex_server_port": PORTS[0]}
        self.violations = []
        self.step = 0
        # How the runs ended: a stage that refused, else what they did.
        self.seen = set()

    def fail(self, invariant, detail):
        self.violations.append((self.step, invariant, detail))

    # -- what happens to the trays between runs ----------------------------------------------------

    def disturb(self):
        tray = self.bed.trays[self.random.choice(self.trays)]
        kind = self.random.choice(self.kinds)
        if kind == "stop":
            tray.stop()
        elif kind == "work":
            tray.work = list(WORK)
        elif kind == "idle":
            tray.work = []
        elif kind == "edit":
            # A file written behind the daemon's back: a hand edit, or the same content rewritten.
            path = self.random.choice(sorted(tray.files))
            content = tray.files[path].get("content") or ""
            if self.random.random() < 0.5:
                tray.write(path, content + "# edited by hand\n")
            else:
                tray.files[path] = dict(tray.files[path], ctime=self.bed.clock.now())
        elif kind == "unreachable":
            tray.reachable = False
        elif kind == "reachable":
            tray.reachable = True
        elif kind == "options":
            mode, channel0 = self.random.choice(MODES)
            self.options = {"imex_server_port": self.random.choice(PORTS), "imex_mode": mode,
                            "imex_channel0": channel0}

    def run_arguments(self):
        away = [tray for tray in self.trays if self.random.random() < 0.2]
        if len(away) == len(self.trays):
            away = away[:1]
        limit = None
        if self.random.random() < 0.2:
            limit = sorted(self.random.sample(self.trays, self.random.randint(1, len(self.trays))))
        return {"every": dict(self.options), "out_of_service": away, "limit": limit}

    # -- one step ----------------------------------------------------------------------------------

    def one(self):
        self.step += 1
        self.disturb()
        arguments = self.run_arguments()
        chance = self.random.random()
        if chance < 0.15:
            self.concurrent(arguments)
            return
        if chance < 0.25:
            # Work starts on a tray between the read and the restart (a job scheduled in between, or the
            # operator's pre-restart tasks): only the guard can see it, after the writes.
            tray = self.random.choice(self.trays)

            def work_starts(_run, _wave):
                self.bed.trays[tray].work = list(WORK)
            arguments["pre_restart"] = work_starts
        checked = None
        if "pre_restart" not in arguments:
            checked = Run(copy.deepcopy(self.bed), run_id="check-%d" % self.step, check=True, **arguments).run()
        before = self.bed.snapshot()
        outcome = Run(self.bed, run_id="run-%d" % self.step, **arguments).run()
        self.judge(outcome, arguments, before)
        if checked and checked.decisions() != outcome.decisions() and outcome.stopped_at != "prove":
            self.fail(CHECK, "check %s, real %s" % (checked.decisions(), outcome.decisions()))

    def concurrent(self, arguments):
        """A second run starts while the first one runs its pre-restart tasks (under its lock). The first
        brings a change, so that it restarts; the second often has another tray out of service."""
        port = self.random.choice([port for port in PORTS if port != self.options.get("imex_server_port")])
        self.options = dict(self.options, imex_server_port=port)
        arguments["every"] = dict(self.options)
        second = self.run_arguments()
        if self.random.random() < 0.5:
            second["out_of_service"] = [self.random.choice(self.trays)]
        seen = {}

        def during_pre_restart(first, wave):
            seen["before"] = self.bed.snapshot()
            seen["run"] = Run(self.bed, run_id="run-%d-b" % self.step, **second)
            stages = list(seen["run"])
            # What the second run left, before the first goes on to its later waves.
            seen["after"] = self.bed.snapshot()
            if "lock" in stages:
                self.fail(LOCKS, "run %s got past the locks while %s held them (%s, %s)"
                          % (seen["run"].outcome.run_id, first.outcome.run_id, arguments, second))

        before = self.bed.snapshot()
        outcome = Run(self.bed, run_id="run-%d" % self.step, pre_restart=during_pre_restart, **arguments).run()
        if "run" in seen:
            self.judge(seen["run"].outcome, second, seen["before"], concurrent=True, after=seen["after"])
        self.judge(outcome, arguments, before, concurrent="run" in seen)

    # -- the invariants ----------------------------------------------------------------------------

    def domain_of(self, tray):
        return next(name for name, trays in self.bed.domains.items() if tray in trays)

    def judge(self, outcome, arguments, before, concurrent=False, after=None):
        """``after``: the trays' files when the run ended (now by default)."""
        bed = self.bed
        self.seen.add(outcome.stopped_at or ("restart" if outcome.restarted else "start" if outcome.started
                                             else "none"))
        away = set(arguments["out_of_service"])
        in_service = [tray for tray in self.trays if tray not in away]
        play = arguments["limit"] or self.trays
        for what, run_id, domain, trays in bed.events:
            if what != "restart" or run_id != outcome.run_id:
                continue
            domain_in_service = [tray for tray in bed.domains[domain] if tray not in away]
            busy = [tray for tray in trays if bed.trays[tray].work]
            if busy or not set(domain_in_service) <= set(play):
                self.fail(BUSY, "%s restarted %s with work on %s, play %s" % (run_id, trays, busy, play))
            if sorted(trays) != sorted(domain_in_service):
                self.fail(TOGETHER, "%s restarted %s of %s in service" % (run_id, trays, domain_in_service))
        bed.events = [event for event in bed.events if event[1] != outcome.run_id]
        said = "\n".join(outcome.problems)
        if outcome.stopped_at in ("restart", "guard") and any(
                re.search(r"leaves out [^.]*\b%s\b" % re.escape(tray), said) for tray in away):
            self.fail(AWAY, "%s counted a tray out of service as left out: %s" % (outcome.run_id, said))
        # A refusal speaks of its own wave: the domains of the waves before it were written, restarted and proven
        # (judged), and their reports say so.
        changed = [tray for tray in files_changed(before, after or bed.snapshot())
                   if self.domain_of(tray) not in outcome.verdicts]
        if outcome.refused and outcome.stopped_at != "prove":
            told = told_written(outcome.problems)
            if outcome.stopped_at in ("preflight", "lock", "read"):
                if changed:
                    self.fail(WRITTEN, "%s wrote %s before refusing at %s" % (outcome.run_id, changed, outcome.stopped_at))
            elif told is None or sorted(told) != changed:
                self.fail(WRITTEN, "%s wrote %s and said %r" % (outcome.run_id, changed, said))
            for problem in outcome.problems:
                if not any(name in problem for name in self.trays + ["domain " + name for name in bed.domains]):
                    self.fail(NAMED, "%s: %r" % (outcome.run_id, problem))
        starting = {self.domain_of(tray) for tray in outcome.started}
        peers = [tray for tray in in_service if tray in play and tray not in outcome.started + outcome.restarted
                 and self.domain_of(tray) in starting and bed.trays[tray].running and bed.trays[tray].reachable]
        if outcome.started and not set(peers) <= set(outcome.reconnected):
            self.fail(RECONNECT, "%s started %s; its running peers %s reconnected only %s"
                      % (outcome.run_id, outcome.started, peers, outcome.reconnected))
        quiet = not away and arguments["limit"] is None and not concurrent and all(
            bed.trays[tray].reachable and not bed.trays[tray].work for tray in self.trays)
        if quiet and not outcome.refused:
            # Nothing held the run back: every tray, the ones back from repair too, runs what is on disk, and
            # every tray holds the same node list (config.cfg keeps a hand's comments, tray by tray).
            running = {tray: bed.trays[tray].runs for tray in self.trays}
            on_disk = {tray: bed.snapshot()[tray] for tray in self.trays}
            node_lists = {checksum for files in on_disk.values() for path, checksum in files.items()
                          if path.endswith("nodes_config.cfg")}
            if running != on_disk or len(node_lists) != len(bed.domains):
                self.fail(AWAY, "%s left the domain unconverged: running %s, on disk %s" % (outcome.run_id, running, on_disk))


def explore(seed, steps=STEPS, until=None, racks=1):
    """The explorer after ``steps`` steps, or after the first that breaks the invariant ``until``."""
    explorer = Explorer(seed, racks)
    for _step in range(steps):
        explorer.one()
        if until and any(found == until for _step, found, _detail in explorer.violations):
            break
    return explorer


@pytest.mark.parametrize("racks", RACKS)
def test_random_sequences_keep_every_invariant(racks):
    seen = set()
    for seed in SEEDS:
        explorer = explore(seed, racks=racks)
        assert explorer.violations == [], seed
        seen |= explorer.seen
    # Sequences that never refused, restarted or met a lock would have proven nothing of those.
    assert {"preflight", "lock", "read", "restart", "guard", "none", "start"} <= seen, seen


# --- each invariant seen failing on a plan altered on purpose ---------------------------------------

def _wrap(monkeypatch, module, name, after):
    real = getattr(module, name)

    def altered(*args, **kwargs):
        return after(real, *args, **kwargs)
    monkeypatch.setattr(module, name, altered)


def busy_ignored(monkeypatch):
    monkeypatch.setattr(run_plan.daemon, "busy_guard", lambda *args, **kwargs: [])


def one_tray_left_running(monkeypatch):
    def after(real, plan, wave, *args):
        plan = real(plan, wave, *args)
        for name in plan["restarting"]:
            plan["trays"][plan["domains"][name]["trays_in_run"][-1]]["restart"] = False
        return plan
    _wrap(monkeypatch, run_plan.restart, "restart", after)


def away_counted_as_left_out(monkeypatch):
    def after(real, model, options, play, *args, **kwargs):
        plan = real(model, options, play, *args, **kwargs)
        for domain in plan["domains"].values():
            domain["left_out"] = [tray for tray in domain["trays"] if tray not in domain["trays_in_run"]]
        return plan
    _wrap(monkeypatch, run_plan.preflight, "preflight", after)


def lock_on_first_tray_in_service(monkeypatch):
    def after(real, model, options, play, *args, **kwargs):
        plan = real(model, options, play, *args, **kwargs)
        plan["locks"] = [{"domain": name, "holder": [tray for tray in domain["trays"]
                                                     if tray not in domain["out_of_service"]][0]}
                         for name, domain in plan["domains"].items()]
        return plan
    _wrap(monkeypatch, run_plan.preflight, "preflight", after)


def says_nothing_was_written(monkeypatch):
    monkeypatch.setattr(run_plan.writes, "written_sentence", lambda written: "Nothing was written.")


def check_mode_blind_to_pending(monkeypatch):
    def after(real, plan, *args, **kwargs):
        plan = real(plan, *args, **kwargs)
        if plan["check_mode"]:
            for domain in plan["domains"].values():
                domain["pending"] = {}
        return plan
    _wrap(monkeypatch, run_plan.read, "after_read", after)


def refusals_without_names(monkeypatch):
    def after(real, plan, wave, *args):
        try:
            return real(plan, wave, *args)
        except run_plan.PlanError as error:
            raise run_plan.PlanError([re.sub(r"rack1-tray0\d|domain rack1", "a tray", problem)
                                      for problem in error.problems]) from None
    _wrap(monkeypatch, run_plan.restart, "restart", after)


def reconnect_forgotten(monkeypatch):
    def nobody(run, wave):
        for name in wave:
            for tray in run.domains[name].trays_in_run:
                run.trays[tray].reconnect = ""
        run.reconnects = []
        return run
    monkeypatch.setattr(run_plan.restart, "plan_reconnects", nobody)


ALTERATIONS = [
    (busy_ignored, BUSY),
    (one_tray_left_running, TOGETHER),
    (away_counted_as_left_out, AWAY),
    (lock_on_first_tray_in_service, LOCKS),
    (says_nothing_was_written, WRITTEN),
    (check_mode_blind_to_pending, CHECK),
    (refusals_without_names, NAMED),
    (reconnect_forgotten, RECONNECT),
]


@pytest.mark.parametrize("racks", RACKS)
@pytest.mark.parametrize(("alter", "invariant"), ALTERATIONS,
                         ids=lambda value: value if isinstance(value, str) else value.__name__)
def test_each_invariant_fails_on_a_plan_altered_on_purpose(monkeypatch, alter, invariant, racks):
    alter(monkeypatch)
    found = {found_invariant for _step, found_invariant, _detail
             in explore(SEEDS[0], until=invariant, racks=racks).violations}
    assert invariant in found, found


def test_no_invariant_goes_without_an_alteration_that_breaks_it():
    assert sorted(invariant for _alter, invariant in ALTERATIONS) == sorted(INVARIANTS)
