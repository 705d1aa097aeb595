"""The soak's series, drawn from one seed: what each step injects and does. Pure: the same
(seed, steps, racks, trays) always gives the same series, so that a seed replays it exactly, and a
subset of its faults (kept) gives the same series with the others left out (for shrinking)."""
from __future__ import annotations

import random

# A converged 2 x 4 site.yml takes about 9 s here: a during-run fault lands 0.5-8 s into its run,
# a kill comes 1-10 s after the start.
# Every lasting fault of the simulated rack the soak draws, with the argument shapes it takes.
# (driver-version and slurm are left out: the first is the version skew's twin, the second needs a
# bed with Slurm.)
LASTING = ["daemon-stop", "daemon-kill-no-restart", "fail-start", "link-cut", "isolate", "cmd-port-block",
           "version", "nodelist-edit", "ssh-block", "fabric", "busy", "ctl-hang", "etc-readonly", "disk-full"]
EVENTS = ["daemon-kill", "reboot"]
KINDS = LASTING + EVENTS
# A mount fault of /etc/nvidia-imex: one at a time per tray.
MOUNT_FAULTS = {"etc-readonly", "disk-full"}
# Faults that leave a domain unhealthy while they last: a run proving it must fail naming them.
HEALTH = {"fail-start", "link-cut", "isolate", "cmd-port-block", "version", "fabric", "ctl-hang", "ssh-block"}
# ...and these as well for validate.yml, which starts nothing.
HEALTH_VALIDATE = HEALTH | {"daemon-stop", "daemon-kill-no-restart"}
SKEW_VERSION = "580.105.08"
FABRIC_EDITS = [["state=In Progress"], ["clique_id=0"], ["health=Unhealthy"]]

# The share of a series run with the daemons' TLS on (one stretch of steps): the TLS keys are then
# in play, and a leak of them can be seen.
TLS_SHARE = 1 / 3

ACTIONS = ["site", "site_change", "check_then_run", "validate", "concurrent", "kill", "heal_some", "heal_all"]
ACTION_WEIGHTS = [20, 8, 14, 12, 10, 10, 10, 16]


def tray_name(rack, index):
    return "rack%d-tray%02d" % (rack, index)


def fault_key(fault):
    """What identifies a lasting fault among the active ones (kind and trays)."""
    return (fault["kind"], tuple(fault["trays"]))


def simrack_args(fault, heal=False):
    """The `simrack fault` arguments that inject (or heal) it."""
    kind, trays, extra = fault["kind"], fault["trays"], fault.get("extra", [])
    if kind == "daemon-kill-no-restart":
        return ["heal", "daemon-kill", trays[0]] if heal else ["daemon-kill", trays[0], "--no-restart"]
    if heal:
        keep = [arg for arg in extra if arg == "--restart"]
        return ["heal", kind, *trays, *keep]
    return [kind, *trays, *extra]


def draw_fault(rng, racks, trays, active):
    """One fault on a random tray (or pair of one rack), never one already active, never a second
    mount fault on a tray; None when the draw hits such a clash (the step then has fewer faults)."""
    kind = rng.choice(KINDS)
    rack = rng.randint(1, racks)
    first = rng.randint(1, trays)
    extra = []
    if kind == "link-cut":
        second = rng.choice([i for i in range(1, trays + 1) if i != first])
        picked = sorted([tray_name(rack, first), tray_name(rack, second)])
    else:
        picked = [tray_name(rack, first)]
    if kind == "version":
        extra = [SKEW_VERSION] + (["--restart"] if rng.random() < 0.5 else [])
    elif kind == "nodelist-edit":
        extra = ["--restart"] if rng.random() < 0.5 else []
    elif kind == "fabric":
        extra = list(rng.choice(FABRIC_EDITS))
    fault = {"kind": kind, "trays": picked, "extra": extra}
    if kind in LASTING:
        if fault_key(fault) in active:
            return None
        if kind in MOUNT_FAULTS and any(k in MOUNT_FAULTS and t == tuple(picked) for k, t in active):
            return None
        if any(k == "link-cut" and t == tuple(picked) for k, t in active):
            return None
    return fault


def draw_series(seed, steps, racks, trays):
    """[{step, faults: [{id, kind, trays, extra, during, at_s}], action: {...}}] for the seed.
    The draw keeps a model of the lasting faults active after each step, so a heal names only
    faults that are (in the full series) active."""
    rng = random.Random(seed)
    active = {}
    series = []
    for step in range(steps):
        count = rng.choices([0, 1, 2], weights=[3, 5, 2])[0]
        faults = []
        for n in range(count):
            fault = draw_fault(rng, racks, trays, active)
            if fault is None:
                continue
            fault["id"] = "%d.%d" % (step, n)
            fault["during"] = rng.random() < 1 / 3
            fault["at_s"] = round(rng.uniform(0.5, 8.0), 1)
            if fault["kind"] in LASTING:
                active[fault_key(fault)] = fault
            faults.append(fault)
        kind = rng.choices(ACTIONS, weights=ACTION_WEIGHTS)[0]
        action = {"kind": kind}
        if kind == "site_change":
            if rng.random() < 0.5:
                action["change"] = {"imex_settings": {"LOG_LEVEL": str(rng.randint(1, 4))}}
            else:
                action["change"] = {"imex_channels": [{"channel": rng.randint(1, 9), "owner": "root",
                                                       "group": "root", "mode": "0660"}]}
        elif kind == "concurrent":
            action["domain"] = "rack%d" % rng.randint(1, racks)
            action["stagger_s"] = round(rng.uniform(0.0, 3.0), 1)
        elif kind == "kill":
            action["after_s"] = round(rng.uniform(1.0, 10.0), 1)
        elif kind == "heal_some":
            keys = sorted(active)
            chosen = rng.sample(keys, k=rng.randint(1, len(keys))) if keys else []
            action["heal"] = [active.pop(key)["id"] for key in sorted(chosen)]
        elif kind == "heal_all":
            action["heal"] = [active.pop(key)["id"] for key in sorted(active)]
        series.append({"step": step, "faults": faults, "action": action})
    for step in tls_steps(seed, steps):
        series[step]["tls"] = True
    return series


def tls_steps(seed, steps):
    """The steps run with TLS on: one stretch of about TLS_SHARE of the series, drawn from a
    generator of its own, so that the faults and actions of a seed stay what they were."""
    if steps < 1:
        return range(0)
    rng = random.Random("tls-%d" % seed)
    length = max(1, round(steps * TLS_SHARE))
    first = rng.randrange(0, steps - length + 1)
    return range(first, first + length)


def keep_faults(series, kept):
    """The series with only the faults whose id is in `kept` (their heals follow them)."""
    kept = set(kept)
    out = []
    for entry in series:
        action = dict(entry["action"])
        if "heal" in action:
            action["heal"] = [fid for fid in action["heal"] if fid in kept]
        out.append(dict(entry, faults=[f for f in entry["faults"] if f["id"] in kept], action=action))
    return out


def all_fault_ids(series):
    return [f["id"] for entry in series for f in entry["faults"]]


def ddmin(items, fails, budget=None):
    """Zeller's delta debugging: a 1-minimal subset of `items` for which fails(subset) is True
    (fails(items) is assumed True). `budget` caps the number of fails() calls; the smallest failing
    subset found so far is returned when it runs out. Returns (subset, calls, minimal): minimal is
    False when the budget ran out before the subset was shown 1-minimal."""
    items = list(items)
    calls = 0
    n = 2
    while len(items) >= 2:
        chunk = max(1, len(items) // n)
        subsets = [items[i:i + chunk] for i in range(0, len(items), chunk)]
        reduced = False
        for subset in subsets + [[x for x in items if x not in s] for s in subsets]:
            if not subset or len(subset) == len(items):
                continue
            if budget is not None and calls >= budget:
                return items, calls, False
            calls += 1
            if fails(subset):
                items = subset
                n = max(n - 1, 2) if len(subset) > chunk else 2
                reduced = True
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), n * 2)
    if len(items) == 1:
        if budget is not None and calls >= budget:
            return items, calls, False
        calls += 1
        if fails([]):
            items = []
    return items, calls, True
