"""Runs end to end: check the experiment, queue it, start its worker in its turn, follow it live, record the outcome.

The app and the command line both go through start(), so they produce the same records. A run waits
in the queue kept in the store (tcore.scheduler) until its device slot is free: two runs timed at once on
one device would measure each other. A LiveRun follows its run in a thread and lives in a process-wide
registry, so a run outlives the Streamlit script rerun, a page switch or a browser refresh; the store
outlives the process, and recover() picks up, after a restart, the runs a dead process left queued.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from tcore.lab import artifacts
from tcore.lab import cluster
from tcore.lab import limits
from tcore.lab import scheduler
from tcore.lab import tlparse
from tcore.protocol import TERMINAL
from tcore.protocol import error as error_event
from tcore.lab.launcher import RunHandle, SparePool, Worker
from tcore.spec import Experiment, SpecError, check_on_device, resolve_device
from tcore.store import QueueFull, RunRecord, RunStore
from tcore.store.queue import PAUSED


def preflight(exp: Experiment) -> tuple[str, list[str]]:
    """Refuse, before anything runs, what this machine cannot run; return (device, notes)."""
    import torch

    # on a Ray cluster, "auto" and "cuda" mean the cluster's GPUs, whatever the app's machine has
    device = resolve_device(exp.device, torch.cuda.is_available() or (cluster.configured() and cluster.has_gpus()))
    return device, check_on_device(exp, device)


class LiveRun:
    """One run, queued or in progress: its phase, progress, power trace, queue place and, at the end, its record.

    phase is "queued" while it waits, None while its worker starts, then the worker's phases.
    """

    def __init__(self, exp: Experiment, store: RunStore, *, run_id: str, device: str, notes: list[str],
                 owner: str, timeout_s: float | None, queued_at: float | None = None,
                 on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.exp = exp
        self.store = store
        self.run_id = run_id
        self.device = device
        self.notes = list(notes)
        self.owner = owner
        self.timeout_s = timeout_s
        self.queued_at = queued_at or time.time()
        self.phase: str | None = "queued"
        self.progress: dict[str, tuple[int, int]] = {}  # phase -> (done, total)
        self.trace: list[list] = []
        self.code: list[str] = []  # Inductor's generated source, one per graph
        self.figures_so_far: dict[str, dict] = {}  # name -> {value, ...}: figures known before the result
        self.phase_started_at: dict[str, float] = {}  # phase -> wall-clock time it began
        self.final: dict[str, Any] | None = None
        self.record: RunRecord | None = None
        self.handle: RunHandle | None = None  # the worker, once the run has left the queue
        self.from_spare: str | None = None  # its worker was a spare: "ready" (imports done) or "importing"
        self.device_slot: str | None = None
        self.queue_position: int | None = None  # 1: next to start
        self.queue_wait: scheduler.Wait | None = None  # when it should start (an estimate, and the latest it can)
        self._on_event = on_event
        self._lock = threading.Lock()  # guards what snapshot() reads
        self._launch_lock = threading.Lock()  # a cancel never slips between claiming the run and starting its worker
        self._launched = False
        self._cancelled = False
        self._done = threading.Event()
        self.adopted = False  # queued by a process that ended; this one took it over (_adopt)
        self.elsewhere = False  # another process took it over while this one was stopped: followed in the store

    # --- called by the scheduler (tcore.scheduler) ---------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether the run has left the queue (claimed for a slot)."""
        return self._launched

    def set_queue_place(self, position: int | None, wait: scheduler.Wait | None) -> None:
        with self._lock:
            self.queue_position, self.queue_wait = position, wait

    def launch(self, slot: str, env: dict[str, str]) -> None:
        """Start the worker in `slot`; the store already says this run is running there."""
        with self._launch_lock:
            self._launched = True
            with self._lock:
                self.phase, self.device_slot, self.queue_position, self.queue_wait = None, slot, None, None
            if self._cancelled:  # cancelled after the scheduler claimed it: it never starts
                self._end(error_event("cancelled", "cancelled by the user before its worker started"))
                return
            if cluster.is_ray_slot(slot):
                self._launch_on_cluster(slot)
                return
            try:
                # spares record a TORCH_TRACE, which torch reads at import: a run without one starts afresh
                worker = SPARES.take(slot, env) if self.exp.torch_trace else None
                self.from_spare = "ready" if worker and worker.ready else "importing" if worker else None
                worker = worker or Worker(env, torch_trace=self.exp.torch_trace)
                self.workdir = worker.workdir
                extra = artifacts.launch_env(self.exp.to_dict(), self.device, self.store.path, self.workdir)
                self.handle = RunHandle(self.exp, worker, timeout_s=self.timeout_s, extra_env=extra)
            except OSError as e:  # the worker could not even start: that is this run's outcome
                self._end(error_event("crashed", f"the worker process could not start: {e}"))
                return
        if not self.store.set_worker(self.run_id, self.handle.pid, scheduler.process_start(self.handle.pid),
                                     scheduler.this_process()):
            # this process was stopped between claiming the run and starting its worker, and another took the
            # run over meanwhile: the worker goes before it measures anything; the run is followed where it is
            self.handle.cancel()
        threading.Thread(target=self._follow, name=f"run-{self.run_id}", daemon=True).start()

    def _launch_on_cluster(self, slot: str) -> None:
        """Within launch(): the run as a Ray task on `slot`'s node (tcore.lab.cluster); no local pid to keep."""
        self.workdir = Path(tempfile.mkdtemp(prefix="tcore-ray-"))  # what the remote worker saved comes back here
        try:
            extra = artifacts.launch_env(self.exp.to_dict(), self.device, self.store.path, self.workdir)
            self.handle = cluster.RayRunHandle(self.exp, slot, self.workdir, timeout_s=self.timeout_s,
                                               extra_env=extra)
        except Exception as e:  # Ray refused it, or the slot's node has left: that is this run's outcome
            self._end(error_event("crashed", f"the run could not be started on the cluster ({slot}): "
                                             f"{type(e).__name__}: {e}"))
            shutil.rmtree(self.workdir, ignore_errors=True)
            return
        threading.Thread(target=self._follow, name=f"run-{self.run_id}", daemon=True).start()

    def ended_in_queue(self) -> None:
        """The store says this run ended before it started (cancelled from another process, or deleted)."""
        with self._launch_lock:
            if not self._launched:
                self._launched = True
                self._collect_record()

    # --- following the worker --------------------------------------------------------------------

    def _follow(self) -> None:
        """Follow the worker's events; at its end, record the outcome, whatever goes wrong while recording it."""
        try:
            self._read_events()
            final = self.handle.final
            self._keep_torch_trace()
            if final["type"] == "result":
                # Artifacts first: finishing frees the slot, and a warm twin queued behind must find them.
                artifacts.keep(self.run_id, self.exp.to_dict(), final["result"], final["env"], self.store.path,
                               self.workdir)
                self.store.finish(self.run_id, result=final["result"], env=final["env"], trace=self.trace,
                                  code=self.code, owner=scheduler.this_process())
                self._collect_record()
            else:
                self._end(final)
        except Exception as e:  # the record must not stay "running", holding its device slot, under a live owner
            traceback.print_exc()
            self._end(error_event("crashed", f"the run ended, but recording its outcome failed: "
                                             f"{type(e).__name__}: {e}"))
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)  # the log tail is in the record by now

    def _keep_torch_trace(self) -> None:
        """The compile's TORCH_TRACE into the store; a trace that cannot be kept never costs the run its result."""
        try:
            artifacts.keep_torch_trace(self.run_id, self.store.path, self.workdir)
        except Exception:  # noqa: BLE001 (the run's outcome matters more; the page then says no trace was kept)
            traceback.print_exc()

    def _read_events(self) -> None:
        for event in self.handle:
            with self._lock:
                kind = event["type"]
                if kind == "phase":
                    self.phase = event["phase"]
                    self.phase_started_at[self.phase] = time.time()
                    if self.phase == "profiling":
                        _spare_for_next(self.device, self.device_slot)
                elif kind == "progress":
                    self.progress[event["phase"]] = (event["done"], event["total"])
                elif kind == "power":
                    self.trace.extend(event["samples"])
                elif kind == "note":
                    self.notes.append(event["text"])
                elif kind == "code":
                    self.code = event["sources"]
                elif kind == "figure":
                    self.figures_so_far[event["name"]] = {k: v for k, v in event.items() if k not in ("type", "name")}
                elif kind in TERMINAL:
                    self.final = event
            if self._on_event:
                self._on_event(event)

    def _end(self, error: dict[str, Any]) -> None:
        try:
            self.store.finish(self.run_id, error=error, trace=self.trace, owner=scheduler.this_process())
        finally:  # even if the store cannot be written, waiters are released
            self._collect_record()

    def _collect_record(self) -> None:
        try:
            self.record = self.store.get(self.run_id)
        except KeyError:  # deleted from the store while it waited
            self.record = None
        except BaseException:
            self._release()
            raise
        if (self.record is not None and self.record.status in ("queued", "running")
                and self.store.taken_over(scheduler.this_process(), [self.run_id])):
            # not ended: another process took it over while this one was stopped (Ctrl-Z); it runs there
            self._follow_elsewhere()
            return
        self._release()

    def _release(self) -> None:
        """The run has ended (or cannot be followed any further): waiters go on."""
        with self._lock:
            if self.final is None and self.record is not None and self.record.error:
                self.final = self.record.error
            self.queue_position = self.queue_wait = None
        self._done.set()

    def _follow_elsewhere(self) -> None:
        """Follow, in the store, a run that another process now owns, until it ends there."""
        with self._lock:
            if self.elsewhere:
                return
            self.elsewhere = True
            self.phase = None if self.record.status == "running" else "queued"
            self.queue_position = self.queue_wait = None
            self.notes.append("another process took this run over while this one was stopped (e.g. Ctrl-Z) and "
                              "runs it; this one follows it in the store")
        if self._on_event:
            self._on_event({"type": "note", "text": self.notes[-1]})
        threading.Thread(target=self._poll_elsewhere, name=f"elsewhere-{self.run_id}", daemon=True).start()

    def _poll_elsewhere(self, every_s: float = 1.0) -> None:
        while True:
            time.sleep(every_s)
            try:
                record = self.store.get(self.run_id)
            except KeyError:
                record = None
            except Exception:  # noqa: BLE001 (a store busy or briefly unreadable: ask again, say so in the log)
                traceback.print_exc()
                continue
            if record is None or record.status not in ("queued", "running"):
                break
            with self._lock:
                self.record = record
        with self._lock:
            self.record = record
        self._release()

    # --- for pages and the command line ----------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def status(self) -> str:
        """queued | running | finished | failed."""
        if self.done:
            return self.record.status if self.record is not None else "failed"
        if self.elsewhere:
            return self.record.status
        return "running" if self._launched else "queued"

    def snapshot(self) -> dict[str, Any]:
        """A consistent copy of the live state, for a page to draw.

        status: queued | running | finished | failed; queue_position: 1 = next to start, None once it
        has left the queue; wait: when it should start (tcore.lab.scheduler.Wait: an estimate from what
        runs like the ones ahead took, and the latest their time limits allow), None once started; eta_s:
        the estimate alone; waited_s: time
        in the queue; elapsed_s: time since its worker started (0 while queued).
        """
        with self._lock:
            now = time.time()
            handle = self.handle
            left_queue_at = handle.started_at if handle else (self.record.finished_at if self.record else None)
            return {"run_id": self.run_id, "status": self.status, "phase": self.phase,
                    "progress": dict(self.progress), "trace": list(self.trace), "notes": list(self.notes),
                    "done": self.done, "elapsed_s": (handle.finished_at or now) - handle.started_at if handle else 0.0,
                    "queue_position": self.queue_position, "wait": self.queue_wait,
                    "eta_s": self.queue_wait.eta_s if self.queue_wait else None,
                    "waited_s": (left_queue_at or now) - self.queued_at,
                    "device_slot": self.device_slot, "owner": self.owner,
                    "figures_so_far": {k: dict(v) for k, v in self.figures_so_far.items()},
                    "phase_started_at": dict(self.phase_started_at)}

    def cancel(self) -> None:
        """Cancel: a queued run never starts; a running one has its worker (and compile workers) stopped."""
        if self.elsewhere:  # its owner now is another process: ask it, as any process may
            self.store.request_cancel(self.run_id)
            return
        with self._launch_lock:
            self._cancelled = True
            if self.handle is None:
                if not self._launched and self.store.cancel_queued(self.run_id):
                    self._launched = True
                    self._collect_record()
                return  # else claimed a moment ago: launch() sees _cancelled and records it
        self.handle.cancel()

    def wait(self, timeout: float | None = None) -> RunRecord | None:
        self._done.wait(timeout)
        return self.record


# Spare workers (tcore.lab.launcher.SparePool) for the device kinds keep_spares() named: the app's.
SPARES = SparePool()
SPARES_OFF_ENV = "COMPILE_LAB_SPARE_WORKERS"  # "0": start each worker when its run starts
_SPARE_DEVICES: set[str] = set()
atexit.register(SPARES.clear)


def keep_spares(device: str) -> bool:
    """Keep a spare worker waiting in each free `device` slot from now on (the app calls this); False if
    $COMPILE_LAB_SPARE_WORKERS=0 turns them off."""
    if os.environ.get(SPARES_OFF_ENV, "").strip() in ("0", "off", "false", "no"):
        return False
    _SPARE_DEVICES.add(device)
    return True


def _spare_for_next(device: str, slot: str | None) -> None:
    """A GPU run has reached its profiling pass: start the next run's spare now, so a busy queue gains too.

    Not on the CPU, where the imports would share the cores the profiled run is being measured on. On a
    GPU the profiler times kernels on the device, and idle is re-based on the timed step
    (tcore.breakdown.against_timed), so a process importing beside it does not change the figures.
    """
    if device != "cpu" and device in _SPARE_DEVICES and slot is not None and not cluster.is_ray_slot(slot):
        threading.Thread(target=SPARES.fill, args=(slot, scheduler.slot_env(slot)), daemon=True).start()


_LIVE: dict[str, LiveRun] = {}
_LIVE_LOCK = threading.Lock()
_SCHEDULERS: dict[tuple[int, str], scheduler.Scheduler] = {}
_SCHEDULERS_LOCK = threading.Lock()


def _scheduler(store: RunStore) -> tuple[scheduler.Scheduler, list[LiveRun]]:
    """This process's scheduler for `store`; on first use it is started and adopts (returned) dead processes' runs."""
    key = (os.getpid(), str(store.path.resolve()))  # a forked child inherits the dict, not the parent's thread
    with _SCHEDULERS_LOCK:
        if key in _SCHEDULERS:
            return _SCHEDULERS[key], []
        sched = _SCHEDULERS[key] = scheduler.Scheduler(store, lambda record: _adopt(record, store),
                                                       spares=SPARES, spare_devices=_SPARE_DEVICES)
        return sched, sched.start()


def _register(run: LiveRun) -> None:
    with _LIVE_LOCK:
        _LIVE[run.run_id] = run


def _adopt(record: RunRecord, store: RunStore) -> LiveRun | None:
    """A LiveRun here for a queued run whose owning process died."""
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
    _register(run)
    return run


def start(exp: Experiment, store: RunStore, *, owner: str | None = None, timeout_s: float | None = None,
          on_event: Callable[[dict[str, Any]], None] | None = None, sweep: tuple[str, int] | None = None) -> LiveRun:
    """Check `exp` against this machine and the lab's limits, then queue it; returns at once, phase "queued".

    owner: the submitting session (the app passes its browser session id); it bounds how many runs
    one session may queue. None (the command line, a sweep) means this process, with no such bound.
    sweep: (sweep id, place in it) for a run of a sweep (tcore.lab.sweeps).
    Raises SpecError, with what to change, before anything is queued.
    """
    device, notes = preflight(exp)
    lab = limits.load(store=store)
    limits.check(exp, device, owner, store, lab)
    timeout_s, lowered = lab.run_time(timeout_s)
    limits.check_duration(exp, device, timeout_s, store, lab)
    sched, _ = _scheduler(store)
    try:
        run_id = store.enqueue(exp, device=device, owner=owner or sched.proc.name, proc=sched.proc,
                               timeout_s=timeout_s, max_queued=lab.max_queued_per_session if owner else None,
                               sweep=sweep, sweep_width=_sweep_width(device))
    except QueueFull as e:  # a race with another tab of the same session, which check() could not see
        raise SpecError(limits.queue_full_message(e.count, lab)) from None
    run = LiveRun(exp, store, run_id=run_id, device=device, notes=notes + ([lowered] if lowered else []),
                  owner=owner or sched.proc.name, timeout_s=timeout_s, on_event=on_event)
    _register(run)
    sched.submit(run)
    return run


def _sweep_width(device: str) -> int:
    """How many runs of one sweep may be in the queue at once: one per slot on a Ray cluster, so a sweep spreads
    over its GPUs; one on this machine alone, as before."""
    return len(scheduler.device_slots(device)) if cluster.configured() else 1


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
    return recover(store)


def adopted_left() -> list[LiveRun]:
    """Runs this process took over from a process that ended, not yet ended here."""
    with _LIVE_LOCK:
        return [r for r in _LIVE.values() if r.adopted and not r.done]


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


def notice_dead_owners(store: RunStore) -> set[str]:
    """For a process that reads the store without running a queue (`tcore list`, `show`): end the runs of owners
    that died or went silent, as any queue would, but adopt none; returns the queued runs left without a live
    owner (the next process that runs a queue on this host takes them)."""
    proc = scheduler.this_process()
    store.recover(proc, scheduler.is_alive, scheduler.stop_worker, adopt=False)
    return store.orphaned(proc.host, scheduler.is_alive)


def cancel(run_id: str, store: RunStore, *, owner: str | None = None, instructor: bool = False) -> None:
    """Cancel a run from any process: queued, it never starts; running, its owning process stops it.

    With `owner`, only that session's runs may be cancelled (PermissionError otherwise), unless
    `instructor` (the session unlocked the instructor's actions).
    """
    record = store.get(run_id)
    _may_touch(record, owner, instructor, "cancel")
    by_instructor = instructor and owner is not None and record.owner != owner  # its owner is told who did it
    if (run := live(run_id)) is not None and not run.done:
        if by_instructor:
            store.mark_cancel_by_instructor(run_id)
        run.cancel()
    else:
        store.request_cancel(run_id, by_instructor=by_instructor)


def delete(run_id: str, store: RunStore, *, owner: str | None = None, instructor: bool = False) -> None:
    """Delete an ended run and its trace, code and artifacts; only its owner or the instructor may."""
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
    store.set_lab_state(PAUSED, {"at": time.time()} if paused else None)


def paused_since(store: RunStore) -> float | None:
    """When the instructor paused the queue, or None while it runs."""
    state = store.lab_state(PAUSED)
    return state["at"] if state else None


def queue_view(store: RunStore) -> list[dict[str, Any]]:
    """The room's queue on this host: running runs, then queued ones in turn, with position and ETA (an estimate)."""
    host = scheduler.this_process().host
    pending = store.pending(host)
    places = scheduler.places(store, host, {rec.device for rec in pending if rec.status == "queued"})
    return [{"run_id": rec.id, "label": rec.label, "owner": rec.owner, "status": rec.status,
             "device_slot": rec.device_slot, "queued_at": rec.queued_at, "started_at": rec.started_at,
             "queue_position": places.get(rec.id, (None, None))[0], "wait": places.get(rec.id, (None, None))[1]}
            for rec in pending]


def queue_problem(store: RunStore) -> str | None:
    """Why this process's queue for `store` is failing to tick (it retries), or None while it works."""
    with _SCHEDULERS_LOCK:
        sched = _SCHEDULERS.get((os.getpid(), str(store.path.resolve())))
    return sched.error if sched else None


def live(run_id: str) -> LiveRun | None:
    with _LIVE_LOCK:
        return _LIVE.get(run_id)


def active() -> list[LiveRun]:
    """Runs in this process that have not ended: queued and running."""
    with _LIVE_LOCK:
        return [r for r in _LIVE.values() if not r.done]


def execute(exp: Experiment, store: RunStore, *, owner: str | None = None, timeout_s: float | None = None,
            on_event: Callable[[dict[str, Any]], None] | None = None) -> RunRecord:
    """Queue, run to the end and return the stored record (what the command line does)."""
    return start(exp, store, owner=owner, timeout_s=timeout_s, on_event=on_event).wait()
