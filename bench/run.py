"""Benchmark of rackscale.imex on the simulated rack, against the `ansible -m ping` floor.

One run, scenarios interleaved rep by rep so that machine drift hits them alike. Every scenario of a
repetition runs on one fresh bed of two racks: the one-rack scenarios use an inventory of its first
rack, so both sides of the scaling ratio share the same simulated background (the second rack's
trays and daemons run on this machine's cores whether or not a run touches them; on real racks they
have their own CPUs). Writes bench/out/results.json (one object per scenario), bench/out/results.md
and bench/out/results.png.
Usage: .venv/bin/python bench/run.py [--reps 3] [--trays 18]
       .venv/bin/python bench/run.py --tuning [--reps 3]   (operator settings: forks, pipelining,
       SSH multiplexing, fact gathering; writes bench/out/tuning.json and tuning.md)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
SIMRACK = os.path.join(REPO, "tests", "rack", "simrack")
BIN = os.path.dirname(sys.executable)


class Bed:
    """A simulated rack of a given shape, rebuilt from scratch on demand."""

    def __init__(self, racks, trays):
        self.racks, self.trays = racks, trays
        self.env = dict(os.environ, SIMRACK_STATE=tempfile.mkdtemp(prefix="simrack-bench-", dir="/var/tmp"))
        self.inventory = None

    def fresh(self):
        self.down()
        out = subprocess.run([SIMRACK, "up", "--racks", str(self.racks), "--trays", str(self.trays)],
                             env=self.env, check=True, capture_output=True, text=True)
        self.inventory = out.stdout.strip().splitlines()[-1]

    def rack_inventory(self, *racks):
        """An inventory of some racks of the bed (the bed's inventory with the other domain groups left out)."""
        import yaml
        with open(self.inventory) as handle:
            inventory = yaml.safe_load(handle)
        domains = inventory["all"]["children"]["imex_domains"]["children"]
        kept = ["rack%d" % rack for rack in racks]
        inventory["all"]["children"]["imex_domains"]["children"] = {name: domains[name] for name in kept}
        path = os.path.join(os.path.dirname(self.inventory), "inventory-%s.yml" % "-".join(kept))
        with open(path, "w") as handle:
            yaml.safe_dump(inventory, handle, sort_keys=False)
        return path

    def down(self):
        return subprocess.run([SIMRACK, "down"], env=self.env, capture_output=True, text=True, check=False)

    def close(self):
        """Tear the bed down for good: its state dir goes too, unless the teardown failed (it holds the record)."""
        result = self.down()
        state = self.env["SIMRACK_STATE"]
        if result.returncode == 0:
            shutil.rmtree(state, ignore_errors=True)
        else:
            sys.stderr.write("simrack down failed; its record stays in %s:\n%s%s" % (state, result.stdout, result.stderr))


def timed(command, count_file, settings=None):
    """Run a command; return (wall seconds, controller CPU seconds, module runs per host).

    settings: extra environment (ANSIBLE_* overrides of ansible.cfg) for the tuning comparison.
    """
    return timed_together([command], [count_file], settings)


def timed_together(commands, count_files, settings=None):
    """Run commands at once (separate controllers); return (wall until the last ends, their CPU seconds
    together, their counts added up)."""
    processes = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    for command, count_file in zip(commands, count_files):
        env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], BENCH_COUNT_FILE=count_file,
                   ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
                   ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"),
                   ANSIBLE_CALLBACKS_ENABLED="module_counter", ANSIBLE_LOAD_CALLBACK_PLUGINS="1", **(settings or {}))
        if os.path.exists(count_file):
            os.unlink(count_file)
        processes.append(subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
    outputs = [process.communicate() for process in processes]
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for command, process, (stdout, stderr) in zip(commands, processes, outputs):
        if process.returncode != 0:
            raise SystemExit("benchmark command failed (%d): %s\n%s\n%s" % (
                process.returncode, " ".join(command), stdout[-4000:], stderr[-2000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    counts = {"per_host": {}, "total": 0, "task_results": 0, "profiles": []}
    for count_file in count_files:
        with open(count_file) as handle:
            found = json.load(handle)
        counts["per_host"].update(found["per_host"])
        counts["total"] += found["total"]
        counts["task_results"] += found["task_results"]
        counts["profiles"].append(found.get("tasks", []))
    return wall, cpu, counts


def playbook(name, inventory, *extra):
    return [os.path.join(BIN, "ansible-playbook"), "-i", inventory, name, *extra]


def ping(inventory):
    return [os.path.join(BIN, "ansible"), "-i", inventory, "imex_domains", "-m", "ansible.builtin.ping"]


def ad_hoc(inventory, module, *args):
    return [os.path.join(BIN, "ansible"), "-i", inventory, "imex_domains", "-m", module, *args]


# Each operator setting against this repository's ansible.cfg (forks 50, pipelining on) and the
# rack's SSH multiplexing (ControlMaster auto, ControlPersist 60s), one change at a time, on a
# no-change site.yml run. Fact gathering is measured as the pass it would add (site.yml gathers none).
TUNING = [
    ("site_nochange (forks 50, pipelining, multiplexing)", "site", {}),
    ("site_nochange, forks 5 (ansible default)", "site", {"ANSIBLE_FORKS": "5"}),
    ("site_nochange, pipelining off", "site", {"ANSIBLE_PIPELINING": "False"}),
    ("site_nochange, no SSH multiplexing", "site",
     {"ANSIBLE_SSH_ARGS": "-o ControlMaster=no -o ControlPath=none"}),
    ("ping pass (floor)", "ping", {}),
    ("fact gathering pass, gather_subset=min", "facts_min", {}),
    ("fact gathering pass, full", "facts_all", {}),
]


def tuning(reps, trays):
    """Measure the operator settings of the README's tuning section on one converged rack."""
    count_file = os.path.join(OUT, "counts.json")
    bed = Bed(1, trays)
    commands = {"ping": lambda inv: ping(inv),
                "site": lambda inv: playbook("playbooks/site.yml", inv),
                "facts_min": lambda inv: ad_hoc(inv, "ansible.builtin.setup", "-a", "gather_subset=min"),
                "facts_all": lambda inv: ad_hoc(inv, "ansible.builtin.setup")}
    samples = {name: [] for name, _, _ in TUNING}
    try:
        bed.fresh()
        timed(playbook("playbooks/site.yml", bed.inventory), count_file)
        for rep in range(reps):
            print("tuning rep %d/%d" % (rep + 1, reps), flush=True)
            for name, command, settings in TUNING:
                samples[name].append(timed(commands[command](bed.inventory), count_file, settings))
    finally:
        bed.close()
    baseline = statistics.median(s[0] for s in samples[TUNING[0][0]])
    results = []
    for name, _, settings in TUNING:
        walls = [s[0] for s in samples[name]]
        results.append({"name": name, "settings": settings, "trays": trays,
                        "wall_median_s": round(statistics.median(walls), 2),
                        "wall_min_s": round(min(walls), 2), "wall_max_s": round(max(walls), 2),
                        "ratio_to_baseline": round(statistics.median(walls) / baseline, 2),
                        "controller_cpu_s": round(statistics.median(s[1] for s in samples[name]), 2)})
    with open(os.path.join(OUT, "tuning.json"), "w") as handle:
        json.dump(results, handle, indent=1)
    lines = ["| setting | wall median s (min-max) | x baseline | controller CPU s |", "|---|---|---|---|"]
    lines += ["| %s | %.1f (%.1f-%.1f) | %.2f | %.1f |" % (
        r["name"], r["wall_median_s"], r["wall_min_s"], r["wall_max_s"], r["ratio_to_baseline"],
        r["controller_cpu_s"]) for r in results]
    table = "\n".join(lines) + "\n"
    with open(os.path.join(OUT, "tuning.md"), "w") as handle:
        handle.write(table)
    print(table)


def summarise(name, racks, trays, samples, floor_median=None):
    walls = [s[0] for s in samples]
    all_trays = float(racks * trays)
    median = statistics.median(walls)
    return {
        "name": name, "racks": racks, "trays": racks * trays,
        "wall_median_s": round(median, 2), "wall_min_s": round(min(walls), 2), "wall_max_s": round(max(walls), 2),
        "ratio_to_floor": round(median / floor_median, 2) if floor_median else 1.0,
        "module_runs_per_tray": round(statistics.median(s[2]["total"] / all_trays for s in samples), 2),
        "task_results_per_tray": round(statistics.median(s[2]["task_results"] / all_trays for s in samples), 2),
        "controller_cpu_s": round(statistics.median(s[1] for s in samples), 2),
        "controller_cpu_s_per_tray": round(statistics.median(s[1] / all_trays for s in samples), 3),
        # Where the wall time of the median run went (one controller's profile: the first).
        "profile": profile_of(sorted(samples, key=lambda s: s[0])[len(samples) // 2]),
    }


def profile_of(sample):
    """Where one run's wall time went: its tasks by wall seconds, grouped by name (a task met in
    several waves or loop passes adds up), largest first, and what lies outside every task (the
    interpreter's start, loading the inventory, the playbook and the plugins, the end)."""
    wall, tasks = sample[0], sample[2]["profiles"][0]
    by_task = {}
    for task in tasks:
        entry = by_task.setdefault(task["task"], {"task": task["task"], "seconds": 0.0, "results": 0, "passes": 0})
        entry["seconds"] = round(entry["seconds"] + task["seconds"], 3)
        entry["results"] += task["results"]
        entry["passes"] += 1
    return {"outside_tasks_s": round(wall - sum(task["seconds"] for task in tasks), 3),
            "tasks": sorted(by_task.values(), key=lambda t: -t["seconds"])}


PROFILED = ("site_nochange", "validate", "site_first", "site_nochange_4racks")


def render_profiles(results, top=12):
    """Markdown: for the profiled scenarios, the start-up and the tasks that took the most wall time."""
    lines = []
    for result in results:
        if result["name"] not in PROFILED:
            continue
        profile = result["profile"]
        total = result["wall_median_s"]
        lines += ["", "### Profile: %s (median run, %.1f s wall)" % (result["name"], total), "",
                  "| step | wall s | share | task results |", "|---|---|---|---|",
                  "| outside the tasks (start-up: python, inventory, playbook, plugins; the end) | %.2f | %d %% | |"
                  % (profile["outside_tasks_s"], round(100 * profile["outside_tasks_s"] / total))]
        for task in profile["tasks"][:top]:
            lines.append("| %s | %.2f | %d %% | %d |" % (task["task"].replace("|", "/"), task["seconds"],
                                                        round(100 * task["seconds"] / total), task["results"]))
        rest = profile["tasks"][top:]
        if rest:
            lines.append("| %d other tasks | %.2f | %d %% | %d |" % (
                len(rest), sum(t["seconds"] for t in rest), round(100 * sum(t["seconds"] for t in rest) / total),
                sum(t["results"] for t in rest)))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--trays", type=int, default=18)
    parser.add_argument("--reps-4racks", type=int, default=None,
                        help="repetitions on the 4-rack bed (default: --reps)")
    parser.add_argument("--tuning", action="store_true", help="measure the operator settings instead")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if args.tuning:
        tuning(args.reps, args.trays)
        return
    count_file = os.path.join(OUT, "counts.json")
    samples = {name: [] for name in ("floor", "site_first", "site_nochange", "validate", "naive_nochange",
                                     "floor_2racks", "site_nochange_2racks", "floor_4racks", "site_nochange_4racks",
                                     "site_nochange_4racks_batch2", "site_nochange_4racks_batch4",
                                     "one_controller_2domains", "parallel_2controllers")}
    bed = Bed(2, args.trays)
    try:
        for rep in range(args.reps):
            print("rep %d/%d: two racks of %d, one rack first" % (rep + 1, args.reps, args.trays), flush=True)
            bed.fresh()
            one, other = bed.rack_inventory(1), bed.rack_inventory(2)
            # The second rack runs converged through the one-rack scenarios, as in the two-rack ones.
            timed(playbook("playbooks/site.yml", other), count_file)
            samples["floor"].append(timed(ping(one), count_file))
            samples["site_first"].append(timed(playbook("playbooks/site.yml", one), count_file))
            samples["site_nochange"].append(timed(playbook("playbooks/site.yml", one), count_file))
            samples["validate"].append(timed(playbook("playbooks/validate.yml", one), count_file))
            samples["naive_nochange"].append(timed(playbook("bench/naive/site.yml", one), count_file))
            samples["floor_2racks"].append(timed(ping(bed.inventory), count_file))
            samples["site_nochange_2racks"].append(timed(playbook("playbooks/site.yml", bed.inventory), count_file))
    finally:
        bed.close()
    four_racks(args.reps if args.reps_4racks is None else args.reps_4racks, args.trays, samples, count_file)
    floors = {1: statistics.median(s[0] for s in samples["floor"]),
              2: statistics.median(s[0] for s in samples["floor_2racks"]),
              4: statistics.median(s[0] for s in samples["floor_4racks"])}
    results = [summarise(name, RACKS_OF.get(name, 1), args.trays, samples[name], floors[FLOOR_OF.get(name, 1)])
               for name in samples]
    with open(os.path.join(OUT, "results.json"), "w") as handle:
        json.dump(results, handle, indent=1)
    table = render_table(results) + render_profiles(results)
    with open(os.path.join(OUT, "results.md"), "w") as handle:
        handle.write(table)
    render_chart(results, os.path.join(OUT, "results.png"))
    print(table)


# Racks each scenario works on, and the floor it is divided by (the 2-domain runs on the 4-rack bed are
# divided by the 4-rack floor: the same background; their own point is the comparison with each other).
RACKS_OF = {"floor_2racks": 2, "site_nochange_2racks": 2, "floor_4racks": 4, "site_nochange_4racks": 4,
            "site_nochange_4racks_batch2": 4, "site_nochange_4racks_batch4": 4, "one_controller_2domains": 2,
            "parallel_2controllers": 2}
FLOOR_OF = {"floor_2racks": 2, "site_nochange_2racks": 2, "floor_4racks": 4, "site_nochange_4racks": 4,
            "site_nochange_4racks_batch2": 4, "site_nochange_4racks_batch4": 4, "one_controller_2domains": 4,
            "parallel_2controllers": 4}


def four_racks(reps, trays, samples, count_file):
    """One 4 x 18 bed, converged once, for every repetition (all its scenarios are no-change runs, so a
    fresh bed per repetition would only add its build and first converge to the bench's time): the
    four-rack no-change run (rolling, batch 1, 2 and 4), and two controllers each running one domain
    at once against one controller running both."""
    bed = Bed(4, trays)
    other_count = count_file + ".second"
    try:
        bed.fresh()
        timed(playbook("playbooks/site.yml", bed.inventory), count_file)
        first, second = bed.rack_inventory(1), bed.rack_inventory(2)
        both = bed.rack_inventory(1, 2)
        for rep in range(reps):
            print("rep %d/%d: four racks of %d" % (rep + 1, reps, trays), flush=True)
            samples["floor_4racks"].append(timed(ping(bed.inventory), count_file))
            samples["site_nochange_4racks"].append(timed(playbook("playbooks/site.yml", bed.inventory), count_file))
            samples["site_nochange_4racks_batch2"].append(timed(
                playbook("playbooks/site.yml", bed.inventory, "-e", "imex_rolling_batch=2"), count_file))
            samples["site_nochange_4racks_batch4"].append(timed(
                playbook("playbooks/site.yml", bed.inventory, "-e", "imex_rolling_batch=4"), count_file))
            samples["one_controller_2domains"].append(timed(playbook("playbooks/site.yml", both), count_file))
            samples["parallel_2controllers"].append(timed_together(
                [playbook("playbooks/site.yml", first), playbook("playbooks/site.yml", second)],
                [count_file, other_count]))
    finally:
        bed.close()


def render_table(results):
    by_name = {r["name"]: r for r in results}
    lines = ["| scenario | racks | trays | wall median s (min-max) | x floor | module runs/tray | task results/tray "
             "| controller CPU s | CPU s/tray |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append("| %s | %d | %d | %.1f (%.1f-%.1f) | %.2f | %.2f | %.2f | %.1f | %.3f |" % (
            r["name"], r["racks"], r["trays"], r["wall_median_s"], r["wall_min_s"], r["wall_max_s"],
            r["ratio_to_floor"], r["module_runs_per_tray"], r["task_results_per_tray"], r["controller_cpu_s"],
            r["controller_cpu_s_per_tray"]))

    def ratio(name, base, key="wall_median_s"):
        return by_name[name][key] / by_name[base][key]

    lines += ["", "Targets: no-change <= 1.2 module runs/tray, <= 10 task results/tray, <= 2.5x floor; validate <= 1.2x "
              "floor; first converge <= 5x floor; four racks <= 4.2x one rack; controller CPU <= 1.0 s/tray; two "
              "controllers: wall <= one controller running both domains, CPU together <= 1.1x its CPU.",
              "Naive no-change / site no-change: %.2fx. Two racks / one rack (no-change): %.2fx. Four racks / one rack: "
              "%.2fx (batch 2: %.2fx, batch 4: %.2fx)." % (ratio("naive_nochange", "site_nochange"),
                                                            ratio("site_nochange_2racks", "site_nochange"),
                                                            ratio("site_nochange_4racks", "site_nochange"),
                                                            ratio("site_nochange_4racks_batch2", "site_nochange"),
                                                            ratio("site_nochange_4racks_batch4", "site_nochange")),
              "Two controllers at once / one controller running both domains: wall %.2fx, CPU %.2fx." % (
                  ratio("parallel_2controllers", "one_controller_2domains"),
                  ratio("parallel_2controllers", "one_controller_2domains", "controller_cpu_s")),
              ""]
    return "\n".join(lines)


def render_chart(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["name"] for r in results]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    axes[0].bar(names, [r["wall_median_s"] for r in results],
                yerr=[[r["wall_median_s"] - r["wall_min_s"] for r in results],
                      [r["wall_max_s"] - r["wall_median_s"] for r in results]], capsize=3)
    axes[0].set_ylabel("wall time, median (s)")
    axes[1].bar(names, [r["module_runs_per_tray"] for r in results], color="tab:orange")
    axes[1].axhline(1.2, linestyle="--", color="grey")
    axes[1].set_ylabel("remote module runs per tray")
    for axis in axes:
        axis.tick_params(axis="x", rotation=45)
    fig.suptitle("rackscale.imex on the simulated rack")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
