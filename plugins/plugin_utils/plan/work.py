# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Part of stage read: which trays take part in each wave, so that a tray with nothing to do pays one skipped
include for the whole run, not one per gate; and the locks the run takes, those of the domains with something to
do (take_locks), whose trays it reads again under them.

A wave is included on its workers: the trays that may do something in it, as the read shows them before the
wave's status read. The channels of every tray are ensured in the first wave (before any wave writes; the first
that any tray ssh reached runs: a wave none of whose trays is left in the play runs nowhere, as before). In a
domain whose host daemon runs all the time, any write, pending restart or pending reload can restart or reload
the whole domain: then every tray of it works; else the trays whose daemon the read did not find running, which
the status read may show not READY and which are then started. A running daemon that the status read does not
show READY in a domain with nothing else to do is not started (a start of a running unit changes nothing): its
running peers are made to reconnect to it, as before (restart stage). A wave without a worker is included on one
tray of its domains, its runner, for the wave's run_once tasks (the locks' refresh, the status read, the restart
plan, the reconnects and the proof): its gates are skipped there. A tray whose channels the first wave ensured in a later
wave's domain includes that wave too: its handlers run there. When no wave has a worker and no tray a channel to
ensure, the run's domains make one wave (one_wave).

The order in which the waves run is Ansible's, not the loop's: it runs a looped include's files in the order in
which the trays' results of the loop came back, a wave placed by the first result that names it. With several
waves the include is throttled to one tray at a time, so the results come back in the play's order; each wave is
also included on its runner, and the waves are ordered by their runners' places in the play: the runner names
its wave first, so the loop's order is the order they run in.
"""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.locks import wave_locks
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import TrayRead


def wave_workers(run, name, reads):
    """The trays of domain ``name`` that may do something in its wave (channels aside), in node order."""
    domain = run.domains[name]
    reached = [tray for tray in domain.trays_in_run if tray not in (run.unreachable or [])]
    writers = [tray for tray in reached if run.trays[tray].write]
    if not modes.of(domain.mode).runs_host_daemon:
        return writers
    if writers or domain.pending or domain.pending_reload:
        return reached
    return [tray for tray in reached if TrayRead.of(reads.get(tray)).service(domain.service) != "active"]


def plan_waves(run, reads, converge=True, locked=False):
    """Set the run's wave_workers, wave_channels and wave_trays ([...] per wave, by its index), the waves in
    the order they run, the locks the run takes and those each wave refreshes, and the trays read again under
    the locks. locked: the plan of the second read, under the locks (their domains stay those taken)."""
    unreachable = set(run.unreachable or [])
    order_waves(run, unreachable)
    channels = [tray for tray in run.trays if tray not in unreachable and run.trays[tray].channels_role]
    workers_of = [[tray for name in wave for tray in wave_workers(run, name, reads)] for wave in run.waves]
    if not locked:
        take_locks(run, workers_of, channels, converge, unreachable)
    if len(run.waves) > 1 and not channels and not any(workers_of):
        one_wave(run)
        workers_of = [[]]
    run.wave_locks = wave_locks(run.locks, run.waves)
    # A wave none of whose trays ssh reached is included nowhere (nothing of it runs, as no tray of it is
    # left in the play); the channels go to the first wave that runs.
    runners = [[tray] if tray else [] for tray in (runner(run, wave, unreachable) for wave in run.waves)]
    first = next((index for index, found in enumerate(runners) if found), None)
    run.wave_workers, run.wave_channels, run.wave_trays = [], [], []
    for index, wave in enumerate(run.waves):
        workers = workers_of[index]
        in_wave = list(channels) if index == first else []
        # A tray whose channels the first wave ensured flushes their handlers (a reboot for the channel option,
        # which clears the run's lock under /run) in its own domain's wave, under that wave's lock refresh and
        # in its turn, as when the channels ran before the waves: it includes that wave too (wave.yml flushes
        # the handlers of the wave's own domains only).
        own = [tray for tray in channels if run.trays[tray].domain in wave] if index != first else []
        run.wave_workers.append(workers)
        run.wave_channels.append(in_wave)
        trays = workers + [tray for tray in in_wave + own if tray not in workers]
        # With several waves, each is also included on its runner, which places it in the loop's order.
        extra = [tray for tray in runners[index] if tray not in trays] if len(run.waves) > 1 or not trays else []
        run.wave_trays.append(trays + extra)
    run.wave_include_throttle = 1 if len(run.waves) > 1 else 0
    return run


def take_locks(run, workers_of, channels, converge, unreachable):
    """The locks the run takes, after its first read: those of the domains it has something to do on (a worker,
    or a tray whose channels it ensures), none for a read-only run. The trays of those domains that the read
    reached are read again under the locks, and the plan is made again from that read (stage reread): another
    run may have changed them between the first read and the take. A domain with nothing to do is proven from
    the first read, as validate.yml proves it, without a lock: two runs that write still exclude each other."""
    working = set()
    if converge:
        working = {run.trays[tray].domain for tray in channels + [tray for workers in workers_of for tray in workers]}
    run.locks = [lock for lock in run.locks if lock["domain"] in working]
    run.read_again = [tray for tray, entry in run.trays.items() if entry.domain in working
                      and tray in run.domains[entry.domain].trays_in_run and tray not in unreachable]
    # The trays that include lock.yml: those leaving the play (out of service or not reached, so never among those
    # read again), and those read again.
    run.lock_include_trays = list(run.leaving or []) + run.read_again


def one_wave(run):
    """Every domain in one wave, in the waves' order: the waves pace writes, restarts and starts domain by domain,
    and the read found none of them to make on any tray. A wave without a worker restarts and starts nothing,
    so its domains are proven at once, as validate.yml proves them (each wave would pay its lock refresh and
    its run_once tasks again, and the include of several waves runs one tray at a time)."""
    run.waves = [[name for wave in run.waves for name in wave]]


def runner(run, wave, unreachable):
    """The first tray of the wave's domains in the play's order (run.trays is in that order) that ssh reached,
    or None."""
    return next((tray for tray, entry in run.trays.items() if entry.domain in wave and tray not in unreachable), None)


def order_waves(run, unreachable):
    """Order the waves by their runners' places in the play (a wave without one, none of its trays reached,
    last): preflight ordered them by the first tray in the play, which a dark tray can move."""
    play = list(run.trays)

    def place(wave):
        tray = runner(run, wave, unreachable)
        return play.index(tray) if tray else len(play)

    run.waves = sorted(run.waves, key=place)
