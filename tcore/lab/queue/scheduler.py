"""The run queue: one run at a time per device slot, across every process that shares the run store.

The queue itself is rows of the store (tcore.store); this module schedules it. Each process that
submits runs has one Scheduler per store: a thread that every TICK_S claims this process's runs when
their turn comes (the oldest queued run of their device kind) and a slot is free, starts their
workers, forwards cancel requests from other processes, and keeps each queued run's position and
ETA fresh (tcore.lab.queue.waiting estimates it). Every RECOVER_EVERY_S it says this process is alive (a heartbeat in
the store) and repairs the runs of processes that have died or gone silent (stopped with Ctrl-Z): a running one
is ended with the reason, a queued one is adopted here and runs in its turn.

A process is known by (host, pid, start time): the start time (tcore.host.processes) tells the
owner that queued a run from a later process that happens to get the same pid.
"""
from __future__ import annotations

import functools
import os
import shutil
import socket
import sqlite3
import sys
import tempfile
import threading
import time
import traceback
import weakref
from pathlib import Path
from typing import Callable, NamedTuple, Protocol

from tcore.host import processes
from tcore.host.processes import is_alive, process_start  # the queue's names for them, read by its callers
from tcore.lab.launch import cluster, launcher
from tcore.lab.launch.launcher import SparePool
from tcore.lab.policy.limits import device_memory_gib
from tcore.lab.queue import disk, room
from tcore.lab.queue.waiting import (
    HISTORY_RUNS,
    Ahead,
    Wait,
    estimate_wait,
    expected_duration,
)
from tcore.lab.settings.config import LimitsError
from tcore.store import RunRecord, RunStore, StoreError
from tcore.store.connection import TABLES_GONE
from tcore.store.run_queue import PAUSED

TICK_S = 0.25
# Set when this process submits a run or one of its runs ends: its schedulers tick at once rather than at the end of
# their TICK_S sleep, which would start a run up to TICK_S late.
# One event per scheduler: with one shared event, a scheduler that cleared it could swallow another's wake-up.
_WAKES: "weakref.WeakSet[threading.Event]" = weakref.WeakSet()


def wake() -> None:
    """Tick now: a run was submitted here, or one of this process's runs ended and freed its slot."""
    for event in list(_WAKES):
        event.set()
RECOVER_EVERY_S = 2.0  # also how often this process says it is alive (store.owners.heartbeat)
_HELD: dict[str, str] = {}  # store path -> why its queue here starts no run now (the waiting words say it)


class Proc(NamedTuple):
    host: str
    pid: int
    started: str | None  # clock ticks since boot, from /proc/<pid>/stat; None where there is no /proc

    @property
    def name(self) -> str:
        return f"{self.host}:{self.pid}"


def this_process() -> Proc:
    return _proc(os.getpid())  # keyed by pid: a forked child is another process


@functools.cache
def _proc(pid: int) -> Proc:
    return Proc(socket.gethostname(), pid, process_start(pid))


def stop_worker(pid: int, started: str | None, wait_s: float = 5.0) -> bool:
    """SIGKILL the process group of a worker left behind by a dead owner; True if there was one."""
    if not is_alive(pid, started):
        return False
    if not processes.end_group(pid):  # a worker leads its own group (start_new_session), compile workers included
        return False
    deadline = time.monotonic() + wait_s
    while is_alive(pid, started) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def device_slots(device: str) -> tuple[str, ...]:
    """The slots runs of a device kind take turns in: one "cpu", or one per GPU, cuda:0, cuda:1, ...

    With a Ray cluster configured (tcore.lab.launch.cluster), the cluster's slots, whatever the device kind: one
    per GPU of each node (one per node without GPUs), so a CPU run never shares a node's slot with another.
    """
    if cluster.configured():
        return cluster.slots()
    return _local_slots(device)


@functools.cache
def _local_slots(device: str) -> tuple[str, ...]:
    if device == "cpu":
        return ("cpu",)
    import torch

    return tuple(f"cuda:{i}" for i in range(torch.cuda.device_count()))


_CPUS = tuple(room.usable_cpus())  # this process's cores before it kept itself off the measuring ones (keep_off)
_PLANS: dict[str, tuple[float, room.RoomPlan]] = {}
PLAN_FRESH_S = 2.0  # the room's configuration is read again at most this often: a change applies within seconds


def room_plan(device: str) -> room.RoomPlan:
    """How this machine shares its `device` slots among runs now (tcore.lab.queue.room): runs per slot, the cores kept
    for the run that holds a device. On a Ray cluster a run holds its node's GPU whole: the lease lives in
    this machine's store, which a node does not reach."""
    now = time.monotonic()
    if (cached := _PLANS.get(device)) is not None and now - cached[0] < PLAN_FRESH_S:
        return cached[1]
    slots = device_slots(device)
    if cluster.configured():
        made = room.RoomPlan(device, 1, {slot: () for slot in slots}, frozenset(),
                             "On the Ray cluster each run holds its GPU from start to end.")
    else:
        made = room.plan(device, slots, _CPUS, room.runs_per_gpu_setting())
    _PLANS[device] = (now, made)
    return made


def slot_room(device: str) -> dict:
    """What the queue may put in each of `device`'s slots (tcore.store.SlotRoom): runs and their memory."""
    made = room_plan(device)
    return made.room(device_memory_gib(device)[0] if made.shares else None)


def slot_env(slot: str) -> dict[str, str]:
    """The environment that pins a worker to its slot: CUDA_VISIBLE_DEVICES holds that GPU only."""
    if not slot.startswith("cuda:"):
        return {}
    index = int(slot.split(":")[1])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    # torch numbers the GPUs this process may see; a restricted list maps them back to the real ones
    physical = visible.split(",")[index].strip() if visible else str(index)
    return {"CUDA_VISIBLE_DEVICES": physical}


def keep_off_measuring_cores() -> str | None:
    """Move this process off the cores kept for the runs that hold a GPU (nothing on a machine without one, or where
    nothing is kept); a sentence if it cannot."""
    if not _gpus_here():
        return None
    try:
        made = room_plan("cuda")
    except Exception as e:  # noqa: BLE001 (a bad [room] setting: every submit says so; the queue still runs)
        return f"the room's plan could not be made ({e}); this process keeps its cores"
    return room.keep_off(made.other_cpus)


def _gpus_here() -> bool:
    """Whether this machine's own GPUs are the queue's (not a Ray cluster's)."""
    return not cluster.configured() and bool(_local_slots("cuda"))


class Job(Protocol):
    """A run this process owns (tcore.lab.run.liverun.LiveRun); the scheduler calls these."""
    run_id: str
    device: str

    @property
    def started(self) -> bool: ...
    @property
    def done(self) -> bool: ...
    def launch(self, slot: str, env: dict[str, str]) -> None: ...
    def ended_in_queue(self) -> None: ...
    def set_queue_place(self, position: int | None, wait: Wait | None) -> None: ...
    def cancel(self) -> None: ...


class Scheduler:
    """Starts this process's queued runs of one store when their turn comes; repairs dead owners' runs."""

    def __init__(self, store: RunStore, adopt: Callable[[RunRecord], Job | None], *,
                 spares: SparePool | None = None, spare_devices: set[str] | frozenset = frozenset()) -> None:
        """spares, spare_devices: keep a spare worker in each free slot of these device kinds (the app's)."""
        self.store = store
        self.spares = spares
        self.spare_devices = spare_devices
        self.proc = this_process()
        self.error: str | None = None  # why the last tick failed, while ticks keep failing: the queue view shows it
        self._adopt = adopt
        self._jobs: dict[str, Job] = {}  # runs this process owns that have not ended
        self._lock = threading.Lock()
        self._cancels_forwarded: set[str] = set()
        self._next_recovery = 0.0
        self._wake = threading.Event()
        self._closed = threading.Event()
        # work this process does only while it recovers, every RECOVER_EVERY_S (the app's idle-time calibration,
        # tcore.lab.calibrate.SelfCalibration.tick): each decides for itself whether the queue is idle enough
        self.idle_hooks: list[Callable[[], None]] = []
        _WAKES.add(self._wake)
        self._thread = threading.Thread(target=self._loop, name=f"queue-{store.path.name}", daemon=True)

    def start(self) -> list[Job]:
        """Recover the store (see recover()), then start ticking; returns the runs adopted.

        On a GPU machine whose slots keep cores for the measuring run (tcore.lab.queue.room), this process moves off
        them first, so that the workers it starts, and their compiles, begin on the other cores."""
        if (trouble := keep_off_measuring_cores()) is not None:
            print(f"compile-lab: {trouble}", file=sys.stderr, flush=True)
        adopted = self.recover()
        self._thread.start()
        return adopted

    def submit(self, job: Job) -> None:
        with self._lock:
            self._jobs[job.run_id] = job
        self._update_places({job.run_id: job})  # so the caller's first snapshot already has a position
        wake()

    def recover(self) -> list[Job]:
        """Mark dead owners' running runs crashed and adopt their queued ones; returns the adopted runs."""
        self._next_recovery = time.monotonic() + RECOVER_EVERY_S
        self.store.owners.heartbeat(self.proc)
        _, adopted_ids = self.store.owners.recover(self.proc, is_alive, stop_worker)
        adopted = []
        for run_id in adopted_ids:
            job = self._adopt(self.store.get(run_id))
            if job is not None:
                with self._lock:
                    self._jobs[run_id] = job
                adopted.append(job)
        return adopted

    def close(self) -> None:
        """Stop ticking: this process starts none of the store's queued runs from now on and no longer says it is
        alive there, so another lab process adopts what it queued. Runs under way end and are recorded as before, by
        their own threads. For a process done with a store it keeps on running after (a test file's own store)."""
        self._closed.set()
        self._wake.set()
        _WAKES.discard(self._wake)

    def _loop(self) -> None:
        while not self._closed.is_set():
            self._wake.clear()  # before the tick: a wake-up during it is kept, and the wait below returns at once
            try:
                self._tick()
                self.error = None
            except Exception as e:  # a locked or vanished store must not stop the queue for good: retry next tick
                said, self.error = self.error, TABLES_GONE if "no such table" in str(e) else f"{type(e).__name__}: {e}"
                if disk.full(e):
                    disk.was_full(self.store.path)
                if self.error != said:  # once per trouble, not every tick while a disk stays full
                    why = (f"{self.error}\n" if isinstance(e, (sqlite3.Error, StoreError, LimitsError))
                           else traceback.format_exc(limit=-3))
                    print(f"compile-lab queue ({self.store.path}): {why}(retried every tick; said again only if it "
                          "changes)", file=sys.stderr)
            self._wake.wait(TICK_S)  # the same tick when nothing happens; at once when a run is submitted or ends here

    def _tick(self) -> None:
        if time.monotonic() >= self._next_recovery:
            self.recover()
            self._fill_spares()
            self._hold()
            if self.held is None:
                for hook in list(self.idle_hooks):
                    hook()
        with self._lock:
            self._jobs = {run_id: job for run_id, job in self._jobs.items() if not job.done}
            jobs = dict(self._jobs)
        if not jobs:
            return
        self._forward_cancels(jobs)
        waiting = {run_id: job for run_id, job in jobs.items() if not job.started}
        if not waiting:
            return
        statuses = self.store.queue.statuses(list(waiting))
        taken = self.store.queue.taken_over(self.proc, list(waiting))
        for run_id, job in list(waiting.items()):
            # cancelled from another process, deleted, or taken over while this process was stopped
            if statuses.get(run_id) != "queued" or run_id in taken:
                job.ended_in_queue()
                del waiting[run_id]
        for device in {job.device for job in waiting.values()} if self.held is None else ():
            slots = list(device_slots(device))
            shared = slot_room(device)
            while (claim := self.store.queue.claim_next(self.proc, device, slots, set(waiting), shared)) is not None:
                run_id, slot = claim
                waiting.pop(run_id).launch(slot, slot_env(slot))
        self._update_places(waiting)

    @property
    def held(self) -> str | None:
        """Why this queue starts no run now (disk_hold), or None."""
        return _HELD.get(str(self.store.path.resolve()))

    def _hold(self) -> None:
        key, why = str(self.store.path.resolve()), disk.hold(self.store.path)
        if why is None:
            _HELD.pop(key, None)
        elif _HELD.get(key) != why:
            _HELD[key] = why
            print(f"compile-lab queue ({self.store.path}): no run starts: {why}", file=sys.stderr)

    def _fill_spares(self) -> None:
        """A spare worker in each slot with room for another run, so the next run there skips the imports.

        On the CPU only free slots: a spare importing beside a run that is being measured would share its cores. On a
        GPU whose slots keep cores for the measuring run, a spare imports on the others (tcore.lab.queue.room), where
        such work moved nothing measurable. (A GPU run also starts the next spare once it reaches its profiling pass:
        tcore.lab.run.liverun.)
        """
        if self.spares is None or not self.spare_devices:
            return
        residents = self.store.queue.residents(self.proc.host)
        for device in list(self.spare_devices):
            made = room_plan(device)
            for slot in device_slots(device):
                here = len(residents.get(slot, []))
                # a spare per free place where runs share the slot and import off the measuring cores, else one in a
                # free slot: a room's clicks come together, and each would otherwise start its worker from nothing
                want = made.runs_per_slot - here if made.shares and made.other_cpus else int(here == 0)
                if want > 0 and not cluster.is_ray_slot(slot):  # spares are local processes
                    self.spares.fill(slot, slot_env(slot), want=want)

    def _forward_cancels(self, jobs: dict[str, Job]) -> None:
        for run_id in self.store.queue.cancel_requests(self.proc):
            if run_id in jobs and run_id not in self._cancels_forwarded:
                self._cancels_forwarded.add(run_id)
                # cancel() waits for the worker to stop; the queue keeps ticking meanwhile
                threading.Thread(target=jobs[run_id].cancel, name=f"cancel-{run_id}", daemon=True).start()

    def _update_places(self, waiting: dict[str, Job]) -> None:
        devices = {job.device for job in waiting.values()}
        for run_id, (position, wait) in places(self.store, self.proc.host, devices).items():
            if (job := waiting.get(run_id)) is not None:
                job.set_queue_place(position, wait)


def places(store: RunStore, host: str, devices: set[str]) -> dict[str, tuple[int, Wait]]:
    """run id -> (position, 1 = next; when it should start) for every queued run of `devices` on `host`."""
    out = {}
    held = _HELD.get(str(store.path.resolve()))
    paused = store.lab.lab_state(PAUSED) is not None  # the instructor's pause: every queued run waits for the resume
    for device in devices:
        queued, running, history = store.queue.queue_state(host, device, recent=HISTORY_RUNS)
        now = time.time()
        running_ahead = [Ahead(expected_duration(spec, history), limit, now - started)
                         for spec, limit, started in running]
        queued_ahead = []
        # runs that share a slot each take one
        places_here = len(device_slots(device)) * room_plan(device).runs_per_slot
        for position, (run_id, spec, limit) in enumerate(queued, start=1):
            wait = estimate_wait(running_ahead, queued_ahead, places_here)
            out[run_id] = (position, wait._replace(held=held, paused=paused))
            queued_ahead.append(Ahead(expected_duration(spec, history), limit))
    return out


def remove_stale_folders(temp: str | Path | None = None) -> list[Path]:
    """Remove the run folders whose lab process has ended (returned); a folder whose owner still runs, or that
    says no owner (made by another program, or an older lab), is left alone."""
    removed = []
    for folder in Path(temp or tempfile.gettempdir()).iterdir():
        if not folder.name.startswith(launcher.RUN_FOLDER_PREFIXES) or not folder.is_dir():
            continue
        try:
            pid, _, started = (folder / launcher.FOLDER_OWNER).read_text().strip().partition(" ")
            alive = is_alive(int(pid), started or None)
        except (OSError, ValueError):
            continue
        if not alive:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed
