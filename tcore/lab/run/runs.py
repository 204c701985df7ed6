"""Runs end to end: check the experiment, queue it, cancel or delete it, pause the queue.

The app (through tcore.lab.api) and the command line both go through start(), so they make the same records. A run waits
in the queue kept in the store (tcore.lab.queue.scheduler) until its device slot is free: two runs timed at once on
one device would measure each other. A LiveRun (tcore.lab.run.liverun) follows its run in a thread and lives in a
process-wide registry (tcore.lab.run.registry), so a run outlives the Streamlit script rerun, a page switch or a
browser refresh; the store outlives the process, and recover() picks up, after a restart, the runs a dead process
left queued.
"""
from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from tcore.experiment.device import check_on_device, resolve_device
from tcore.experiment.protocol import error as error_event
from tcore.experiment.spec import Experiment, SpecError
from tcore.lab.launch import cluster
from tcore.lab.outputs import model_files, tlparse
from tcore.lab.policy import limits, memory
from tcore.lab.queue import lease, quiet, room, scheduler
from tcore.lab.queue.spares import _SPARE_DEVICES, SPARES, keep_spares
from tcore.lab.run.liverun import LiveRun
from tcore.lab.run.recording import is_locked
from tcore.lab.run.registry import adopted_left, live, register
from tcore.store import QueueFull, RunRecord, RunStore, StoreReadOnly
from tcore.store.run_queue import PAUSED

Checked = tuple[str, list[str]]  # preflight's answer: the device, its notes


def preflight(exp: Experiment) -> Checked:
    """Refuse, before anything runs, what this machine cannot run; return (device, notes)."""
    import torch

    # on a Ray cluster, "auto" and "cuda" mean the cluster's GPUs, whatever the app's machine has
    device = resolve_device(exp.device, torch.cuda.is_available() or (cluster.configured() and cluster.has_gpus()))
    return device, check_on_device(exp, device)


_SCHEDULERS: dict[tuple[int, str], scheduler.Scheduler] = {}
_SCHEDULERS_LOCK = threading.Lock()


def _scheduler(store: RunStore) -> tuple[scheduler.Scheduler, list[LiveRun]]:
    """This process's scheduler for `store`; on first use it is started and adopts (returned) dead processes' runs."""
    if store.read_only is not None:  # no queue can run in it: said before a scheduler is made and kept for it
        raise StoreReadOnly(store.path, store.read_only)
    key = (os.getpid(), str(store.path.resolve()))  # a forked child inherits the dict, not the parent's thread
    with _SCHEDULERS_LOCK:
        if key in _SCHEDULERS:
            return _SCHEDULERS[key], []
        sched = _SCHEDULERS[key] = scheduler.Scheduler(store, lambda record: _adopt(record, store),
                                                       spares=SPARES, spare_devices=_SPARE_DEVICES)
        me = scheduler.this_process()
        quiet.watch(store, (me.host, me.pid, me.started), scheduler.is_alive)  # holds of other lab processes here
        return sched, sched.start()


def close_queues(under: Path | None = None) -> list[str]:
    """Close this process's queues (tcore.lab.queue.scheduler.Scheduler.close) and its watch of other lab processes'
    holds on their stores (tcore.lab.queue.quiet.unwatch), those of stores in the folder `under` where given; the
    paths of the stores they were for. A later run on one of them starts its queue again. Each queue ticks several
    times a second for as long as it is kept: a process that used many stores and is done with them (a test worker,
    after each test's and each test file's own) stops paying for them."""
    inside = None if under is None else under.resolve()
    with _SCHEDULERS_LOCK:
        mine = [(key, sched) for key, sched in _SCHEDULERS.items() if key[0] == os.getpid()
                and (inside is None or Path(key[1]).is_relative_to(inside))]
        for key, _ in mine:
            del _SCHEDULERS[key]
    for _, sched in mine:
        sched.close()
        quiet.unwatch(sched.store)
    return [key[1] for key, _ in mine]


def _adopt(record: RunRecord, store: RunStore) -> LiveRun | None:
    """A LiveRun here for a queued run whose owning process died."""
    if record.unreadable:  # its settings are not there to run: an empty spec would run the defaults
        store.finish(record.id, error=error_event("invalid_spec", f"queued by a process that has ended, and its "
                                                                  f"row cannot be read: {record.unreadable}"))
        return None
    if record.spec.get("model", "").startswith("file:") and not model_files.files_allowed_here():
        # queued by a command line (which allows model files) that ended: its code runs only where files are allowed
        store.finish(record.id, error=error_event("invalid_spec", f"queued by a process that has ended; this one "
                                                                  f"does not run model files. {limits.FILES_OFF}"))
        return None
    try:
        exp = Experiment.from_dict(record.spec)
    except SpecError as e:  # written by another version of Compile Lab: it cannot run, say why
        store.finish(record.id, error=error_event("invalid_spec", f"queued by a process that has ended, and "
                                                                  f"this version cannot run it: {e}"))
        return None
    run = LiveRun(exp, store, run_id=record.id, device=record.device, owner=record.owner,
                  timeout_s=record.timeout_s, queued_at=record.queued_at,
                  notes=["queued by a process that has since ended (e.g. the app restarted); this one runs it"])
    run.adopted = True
    register(run)
    return run


def start(exp: Experiment, store: RunStore, *, owner: str | None = None, timeout_s: float | None = None,
          on_event: Callable[[dict[str, Any]], None] | None = None, sweep: tuple[str, int] | None = None,
          for_the_lab: bool = False, from_app: bool = False,
          checked: Checked | None = None) -> LiveRun:
    """Check `exp` against this machine and the lab's limits, then queue it; returns at once, phase "queued".

    owner: the submitting session (the app passes its browser session id); it bounds how many runs
    one session may queue. None (the command line, a sweep) means this process, with no such bound.
    for_the_lab: a run queued with others at once under `owner`'s name (a calibration's references, a sweep's runs):
    no per-session bound either.
    from_app: queued by a page of the app, where a `file:` model runs only if the lab allows files.
    sweep: (sweep id, place in it) for a run of a sweep (tcore.lab.sweeps).
    checked: preflight's answer for `exp`, where the caller made it moments ago in this process (the Run page, as it
    drew): the device check runs once on a submit's path. The lab's limits are checked here whatever the caller.
    Raises SpecError, with what to change, before anything is queued.
    """
    device, notes = checked if checked is not None else preflight(exp)
    lab = limits.load(store=store)
    bounded = None if for_the_lab else owner  # whose queue the per-session bound counts
    timeout_s, lowered = lab.run_time(timeout_s)
    need_gib = limits.check(exp, device, bounded, store, lab, time_limit_s=timeout_s, from_app=from_app)
    plan = scheduler.room_plan(device)  # a [room] setting written wrongly is said now, before anything is queued
    if need_gib is None:  # queued with an unknown memory (tcore.store.run_queue.SlotRoom): shares its GPU with no one
        notes = [*notes, memory.unknown_note(exp, shares_gpu=plan.shares)]
    sched, _ = _scheduler(store)
    try:
        run_id = store.queue.enqueue(exp, device=device, owner=owner or sched.proc.name, proc=sched.proc,
                                     timeout_s=timeout_s, max_queued=lab.max_queued_per_session if bounded else None,
                                     sweep=sweep, sweep_width=_sweep_width(device),
                                     memory_gib=room.counted_gib(need_gib))
    except QueueFull as e:  # a race with another tab of the same session, which check() could not see
        raise SpecError(limits.queue_full_message(e.count, lab)) from None
    run = LiveRun(exp, store, run_id=run_id, device=device, notes=notes + ([lowered] if lowered else []),
                  owner=owner or sched.proc.name, timeout_s=timeout_s, on_event=on_event)
    register(run)
    sched.submit(run)
    return run


def places_left(owner: str, store: RunStore) -> tuple[int, int]:
    """(how many more runs `owner` may queue now, the lab's max_queued_per_session): a page that queues several runs
    at once queues what fits and the rest as the person's waiting runs start."""
    bound = limits.load(store=store).max_queued_per_session
    return max(0, bound - store.queue.queued_count(owner)), bound


def _sweep_width(device: str) -> int:
    """How many runs of one sweep may be in the queue at once: one per run the device slots take at once (one per slot
    on a Ray cluster; runs_per_gpu per GPU here, tcore.lab.queue.room), so a sweep spreads over its GPUs and compiles
    its next runs while one measures; one on a CPU."""
    return len(scheduler.device_slots(device)) * scheduler.room_plan(device).runs_per_slot


def recover(store: RunStore) -> list[LiveRun]:
    """Start this process's queue for `store` and repair what dead processes left: call once at start-up.

    Runs a dead process was running are marked crashed; its queued runs are adopted here (returned)
    and run in their turn. The scheduler repeats this every few seconds while the process lives.
    """
    sched, adopted = _scheduler(store)
    return adopted + sched.recover()


def serve(store: RunStore) -> list[LiveRun]:
    """What an app server does once, when it starts: keep spare workers for this machine's device kind, start the
    queue for `store` and take over the runs a previous server left (returned). serve.py calls it at start-up."""
    import torch

    keep_spares("cuda" if torch.cuda.is_available() else "cpu")
    adopted = recover(store)  # a dead server's workers stopped first: then no one writes in their folders
    if removed := scheduler.remove_stale_folders():
        print(f"compile-lab: removed {len(removed)} run folder(s) that ended lab processes left in "
              f"{removed[0].parent}", file=sys.stderr, flush=True)
    return adopted


def on_idle(store: RunStore, hook: Callable[[], None]) -> None:
    """Call `hook` with each recovery of this process's queue for `store` (every few seconds): the app's idle-time
    calibration (tcore.lab.calibrate.keep_calibrated), which looks at the queue itself before doing anything."""
    _scheduler(store)[0].idle_hooks.append(hook)


def run_adopted(on_adopted: Callable[[LiveRun], None] | None = None) -> list[LiveRun]:
    """Before this process exits: run to their end the runs it took over (it owns them now; leaving would strand
    them, queued under a dead owner or running with no one to record them). Runs adopted meanwhile count too.

    on_adopted: called once per run as it is first seen here (the command line says what it waits for).
    Returns the runs, ended.
    """
    seen: dict[str, LiveRun] = {}
    while left := adopted_left():
        for run in left:
            if run.run_id not in seen:
                seen[run.run_id] = run
                if on_adopted:
                    on_adopted(run)
        left[0].wait(1.0)
    return list(seen.values())


def notice_dead_owners(store: RunStore) -> tuple[set[str], bool]:
    """For a process that reads the store without running a queue (`tcore list`, `show`): end the runs of owners
    that died or went silent, as any queue would, but adopt none; returns the queued runs left without a live
    owner (the next process that runs a queue on this host takes them), and whether that write was skipped for a
    write lock another process holds: a reader does not wait for one to read, so the runs are shown as they are."""
    proc = scheduler.this_process()
    skipped = False
    if store.read_only is None:  # a store that can only be read is shown as it lies: no one can end a run in it
        try:
            store.owners.recover(proc, scheduler.is_alive, scheduler.stop_worker, adopt=False, wait=False)
        except sqlite3.OperationalError as e:
            if not is_locked(e):
                raise
            skipped = True
    return store.queue.orphaned(proc.host, scheduler.is_alive), skipped


def cancel(run_id: str, store: RunStore, *, owner: str | None = None, instructor: bool = False) -> bool:
    """Cancel a run from any process: queued, it never starts; running, its owning process stops it. False when the
    store says it had already ended (a click on a queue row drawn before its end): nothing was cancelled.

    With `owner`, only that session's runs may be cancelled (PermissionError otherwise), unless
    `instructor` (the session unlocked the instructor's actions).
    """
    record = store.get(run_id)
    _may_touch(record, owner, instructor, "cancel")
    if record.status not in ("queued", "running"):
        return False
    by_instructor = instructor and owner is not None and record.owner != owner  # its owner is told who did it
    if (run := live(run_id)) is not None and not run.done:
        if by_instructor:
            store.queue.mark_cancel_by_instructor(run_id)
        return run.cancel()  # False: its worker had said its last word; the run ends as it would have
    # the store's status under its write lock: a run that ended since the read above was not cancelled
    return store.queue.request_cancel(run_id, by_instructor=by_instructor) in ("queued", "running")


def delete(run_id: str, store: RunStore, *, owner: str | None = None, instructor: bool = False) -> None:
    """Delete an ended run and its power samples, code, profiler traces, TORCH_TRACE and artifacts; only its owner or
    the instructor may."""
    record = store.get(run_id)
    _may_touch(record, owner, instructor, "delete")
    if record.status in ("queued", "running"):
        raise PermissionError(f"run {run_id} is {record.status}: cancel it first, then delete it")
    store.delete(run_id)
    tlparse.forget(run_id)


def _may_touch(record: RunRecord, owner: str | None, instructor: bool, action: str) -> None:
    if owner is not None and not instructor and record.owner != owner:
        raise PermissionError(f"run {record.id} belongs to someone else; only its owner or the instructor "
                              f"can {action} it")


def pause(store: RunStore, paused: bool) -> None:
    """The instructor holds the queue (runs under way go on, nothing new starts) or lets it go."""
    store.lab.set_lab_state(PAUSED, {"at": time.time()} if paused else None)


def paused_since(store: RunStore) -> float | None:
    """When the instructor paused the queue, or None while it runs."""
    state = store.lab.lab_state(PAUSED)
    return state["at"] if state else None


def under_way(store: RunStore) -> list[dict[str, Any]]:
    """The room's runs under way on this host, as rows: running runs, then queued ones in turn, with position and ETA
    (an estimate), and for a run that shares its GPU where it is (tcore.lab.queue.lease.device_words: holding the GPU,
    waiting for it, on the CPU beside the run that holds it). The data behind the pages' queue views (records:
    store.queue.running_and_queued)."""
    host = scheduler.this_process().host
    records = store.queue.running_and_queued(host)
    places = scheduler.places(store, host, {rec.device for rec in records if rec.status == "queued"})
    sharing = _device_states(store, host, records)
    return [{"run_id": rec.id, "label": rec.label, "owner": rec.owner, "status": rec.status, "device": rec.device,
             "device_slot": rec.device_slot, "queued_at": rec.queued_at, "started_at": rec.started_at,
             "queue_position": places.get(rec.id, (None, None))[0], "wait": places.get(rec.id, (None, None))[1],
             **sharing.get(rec.id, {"device_state": None, "device_state_short": None})}
            for rec in records]


def _device_states(store: RunStore, host: str, records: list[RunRecord]) -> dict[str, dict[str, str]]:
    """run id -> where each running run on a shared slot is, long and short ("holds the GPU", "waits for the GPU",
    "on the CPU"), from the store's holds and asks; nothing for a slot that one run holds whole."""
    by_slot: dict[str, list[RunRecord]] = {}
    for rec in records:
        if rec.status == "running" and rec.device_slot:
            by_slot.setdefault(rec.device_slot, []).append(rec)
    out, now = {}, time.time()
    for slot, here in by_slot.items():
        holder = store.devices.device_holder(host, slot)
        asks = {a.run_id: a for a in store.devices.device_asks(host, slot)}
        if holder is None and not asks and len(here) < 2:
            continue
        for rec in here:
            held = (holder.purpose, holder.since) if holder is not None and holder.run_id == rec.id else None
            asked = (asks[rec.id].purpose, asks[rec.id].asked_at) if rec.id in asks else None
            other = holder if holder is not None and holder.run_id != rec.id else None
            out[rec.id] = {"device_state": lease.device_words(asked, held, other, now),
                           "device_state_short": ("holds the GPU" if held else "waits for the GPU" if asked
                                                  else "on the CPU")}
    return out


def queue_problem(store: RunStore) -> str | None:
    """Why this process's queue for `store` is failing to tick (it retries) or starts no run (a disk nearly full), or
    None while it works."""
    with _SCHEDULERS_LOCK:
        sched = _SCHEDULERS.get((os.getpid(), str(store.path.resolve())))
    return (sched.error or sched.held) if sched else None


def execute(exp: Experiment, store: RunStore, *, owner: str | None = None, timeout_s: float | None = None,
            on_event: Callable[[dict[str, Any]], None] | None = None) -> RunRecord:
    """Queue, run to the end and return the stored record (tests and scripts; the command line calls start() so
    that it can show the wait)."""
    return start(exp, store, owner=owner, timeout_s=timeout_s, on_event=on_event).wait()
