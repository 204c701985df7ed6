"""One run followed live in this process (LiveRun), and how it leaves the queue (Launching); the spare workers that
start runs sooner are tcore.lab.queue.spares.

A LiveRun is queued by tcore.lab.run.runs.start(), started in its turn by the scheduler (tcore.lab.queue.scheduler):
launch() starts its worker (a spare, a fresh process, a Ray task), tells the store who runs it before the worker is
handed the experiment (tcore.lab.launch.handles.RunHandle writes it on the worker's stdin), and puts it back in the
queue when the store cannot be told. It then follows its worker's events in a thread (tcore.lab.run.following) and, at
the end, records the outcome in the store (tcore.lab.run.ending). Once the store holds the run's power samples and
generated code, the LiveRun lets go of its own copies: the pages read an ended run from the store, and a server keeps
hundreds of them (tcore.lab.run.registry).
"""
from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from typing import Any, Callable

from tcore.experiment import protocol
from tcore.experiment.protocol import error as error_event
from tcore.experiment.spec import Experiment
from tcore.lab.launch import cluster
from tcore.lab.launch.handles import RunHandle, timeout_message
from tcore.lab.launch.launcher import Worker, run_folder
from tcore.lab.outputs import artifact_handover
from tcore.lab.queue import lease, scheduler, waiting
from tcore.lab.queue.spares import SPARES
from tcore.lab.run.ending import Ending
from tcore.lab.run.following import Following
from tcore.lab.run.recording import store_failure
from tcore.lab.run.runclock import RunClock
from tcore.store import RunRecord, RunStore, StoreError


def _lease_env(device: str, slot: str) -> dict[str, str]:
    """What a worker in `slot` is told of the room (tcore.lab.queue.room): that other runs share its device, so it asks
    for it (tcore.worker.device_lease), and the cores kept for the run that holds it."""
    plan = scheduler.room_plan(device)
    env = {}
    if plan.measure_cpus.get(slot):
        env[protocol.MEASURE_CPUS] = ",".join(str(c) for c in plan.measure_cpus[slot])
    if plan.shares:
        env[protocol.DEVICE_LEASE] = "1"
    return env


class Launching:
    """The part of a LiveRun that takes it out of the queue: starts its worker, in the thread of its own that launch()
    starts, or ends it there (cancelled, or ended by another process). It owns what it sets: the worker (handle,
    workdir, from_spare, lease_env), the slot, whether and when the run left the queue, whether it was cancelled, and
    the run's clock."""

    def _init_launching(self, queued_at: float | None) -> None:
        self.clock = RunClock(queued_at)  # the timeline stored with the result (tcore.figures.timeline)
        self.handle: RunHandle | None = None  # the worker, once the run has left the queue
        self.workdir = None  # the worker's folder
        self.from_spare: str | None = None  # its worker was a spare: "ready" (imports done) or "importing"
        self.device_slot: str | None = None
        self.lease_env: dict[str, str] = {}  # what the worker is told of the lease and the cores kept for it
        self._launched = False
        self.launched_at: float | None = None
        self._cancelled = False
        self._start_timer: threading.Timer | None = None  # the time limit while its worker starts (launch)

    def launch(self, slot: str, env: dict[str, str]) -> None:
        """Start the worker in `slot`; the store already says this run is running there. Returns at once: the
        worker starts in the run's own thread, which may wait there for the fork server's imports
        (tcore.lab.launch.fork_server_client) without holding up the queue."""
        with self._launch_lock:
            self._launched = True
            self.launched_at = time.time()  # the time limit counts from here: the worker's start is inside it
            self.clock.launch()
            with self._lock:
                self.device_slot = slot
                self._set_phase(None)
                self.set_queue_place(None, None)
            if self._cancelled:  # cancelled after the scheduler claimed it: it never starts
                self._end(error_event("cancelled", "cancelled by the user before its worker started"))
                return
            if cluster.is_ray_slot(slot):
                self._launch_on_cluster(slot)
                return
            self.lease_env = _lease_env(self.device, slot)
        if self.timeout_s is not None:  # a worker still starting at the limit is not left to start
            self._start_timer = threading.Timer(self.timeout_s, self._time_out_starting)
            self._start_timer.daemon = True
            self._start_timer.start()
        threading.Thread(target=self._start_and_follow, args=(slot, env), name=f"run-{self.run_id}",
                         daemon=True).start()

    def _time_out_starting(self) -> None:
        """The time limit came while the worker was still starting (waiting for the fork server's imports): the
        run ends now, and the worker, once it exists, is let go (_start_and_follow). Once it has a handle, the
        handle's own timer ends it."""
        with self._launch_lock:
            if self.handle is not None or self._cancelled or self.done:
                return
            self._cancelled = True
            self._end(error_event("timeout", timeout_message(self.timeout_s, None), phase=None))

    def _start_and_follow(self, slot: str, env: dict[str, str]) -> None:
        try:
            # spares record a TORCH_TRACE, which torch reads at import: a run without one starts afresh
            worker = SPARES.take(slot, env) if self.exp.torch_trace else None
            from_spare = "ready" if worker and worker.ready else "importing" if worker else None
            worker = worker or Worker(env, torch_trace=self.exp.torch_trace)
        except OSError as e:  # the worker could not even start: that is this run's outcome
            with self._launch_lock:
                self._not_started(e)
            return
        with self._launch_lock:
            if self._cancelled:  # cancelled (or timed out) while its worker was starting
                worker.dismiss()
                if not self.done:
                    self._end(error_event("cancelled", "cancelled by the user before its worker started"))
                return
        # The store is told who runs it before the worker is handed the run: a run the store cannot say is under way
        # would be put back in the queue by the next process, and measured twice.
        try:
            kept = self.store.queue.set_worker(self.run_id, worker.proc.pid, scheduler.process_start(worker.proc.pid),
                                               scheduler.this_process())
        except (sqlite3.Error, StoreError) as e:
            worker.dismiss()
            self._back_to_queue(e)
            return
        if not kept:
            # this process was stopped between claiming the run and starting its worker, and another took the run
            # over meanwhile: the worker goes before it is handed anything; the run is followed where it is
            worker.dismiss()
            self._collect_record()
            return
        with self._launch_lock:
            if self._cancelled:  # cancelled while the store was told who runs it: the worker is handed nothing
                worker.dismiss()
                if not self.done:
                    self._end(error_event("cancelled", "cancelled by the user before its worker started"))
                return
            try:
                self.from_spare, self.workdir = from_spare, worker.workdir
                self.clock.worker(worker.forked, from_spare)
                extra = artifact_handover.launch_env(self.exp.to_dict(), self.device, self.store, self.workdir)
                self.handle = RunHandle(self.exp, worker, timeout_s=self.timeout_s,
                                        extra_env={**extra, **self.lease_env}, launched_at=self.launched_at)
            except OSError as e:
                self._not_started(e)
                return
        self._follow()

    def _back_to_queue(self, e: Exception) -> None:
        """The store could not be told who runs this run, so it was not started (nothing measured): it keeps its place
        in the queue, and this process puts it back there in the store as soon as the store can be written (a process
        that follows, if this one ends first, does the same for a claimed run whose worker never started)."""
        self._say_store_trouble(e)
        if self._start_timer is not None:
            self._start_timer.cancel()
        words = (f"The run store could not be written ({store_failure(e, self.store)}), so the run was not started and "
                 "nothing was measured: it keeps its place in the queue and starts once the store can be written.")
        with self._lock:
            self.device_slot = None
            self._set_phase("queued")
            self.notes.append(words)
        if self._on_event:
            self._on_event({"type": "note", "text": words})
        threading.Thread(target=self._requeue_when_writable, name=f"requeue-{self.run_id}", daemon=True).start()

    def _requeue_when_writable(self, every_s: float = 2.0) -> None:
        while not self._cancelled:
            try:
                requeued = self.store.queue.requeue(self.run_id, scheduler.this_process())
            except (sqlite3.Error, StoreError):
                time.sleep(every_s)
                continue
            if requeued:
                with self._launch_lock:
                    self._launched, self.launched_at = False, None
                self.clock = RunClock(self.queued_at)
                scheduler.wake()
            else:  # ended, deleted or taken over meanwhile: say what the store says
                self._collect_record()
            return

    def _not_started(self, e: OSError) -> None:
        if not self.done:  # else it reached its time limit while starting, and that is its outcome
            self._end(error_event("crashed", f"the worker process could not start: {e}"))

    def _launch_on_cluster(self, slot: str) -> None:
        """Within launch(): the run as a Ray task on `slot`'s node (tcore.lab.launch.cluster); no local pid to keep."""
        self.workdir = run_folder("tcore-ray-")  # what the remote worker saved comes back here
        try:
            extra = artifact_handover.launch_env(self.exp.to_dict(), self.device, self.store, self.workdir)
            self.handle = cluster.RayRunHandle(self.exp, slot, self.workdir, timeout_s=self.timeout_s,
                                               extra_env=extra)
        except Exception as e:  # Ray refused it, or the slot's node has left: that is this run's outcome
            self._end(error_event("crashed", f"the run could not be started on the cluster ({slot}): "
                                             f"{type(e).__name__}: {e}"))
            shutil.rmtree(self.workdir, ignore_errors=True)
            return
        threading.Thread(target=self._follow, name=f"run-{self.run_id}", daemon=True).start()

    @property
    def launched(self) -> bool:
        """Claimed here for a device slot: its worker is this process's to start or stop."""
        return self._launched

    def cancel(self) -> bool:
        """Cancel: a queued run never starts; a running one has its worker (and compile workers) stopped. False where
        it had ended, or its worker had said its last word: the run ends as it would have."""
        if self.elsewhere:  # its owner now is another process: ask it, as any process may
            return self.store.queue.request_cancel(self.run_id) in ("queued", "running")
        with self._launch_lock:
            self._cancelled = True
            if self.handle is None:
                if not self._launched and self.store.queue.cancel_queued(self.run_id):
                    self._launched = True
                    self._collect_record()
                return True  # else claimed a moment ago: launch() sees _cancelled and records it
        return self.handle.cancel()

    def ended_in_queue(self) -> None:
        """The store says this run ended before it started (cancelled from another process, or deleted)."""
        with self._launch_lock:
            if not self._launched:
                self._launched = True
                self._collect_record()


class LiveRun(Launching, Following, Ending):
    """One run, queued or in progress: its phase, progress, power samples, queue place and, at the end, its record.

    phase is "queued" while it waits, None while its worker starts, then the worker's phases.

    Each part owns the state it writes and the others ask it (Following._set_phase, LiveRun.set_queue_place): what
    the run is and its place in the queue here, leaving the queue in Launching, what the worker says in Following, how
    it ended in Ending.
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
        self.queue_position: int | None = None  # 1: next to start
        self.queue_wait: waiting.Wait | None = None  # when it should start (an estimate, and the latest it can)
        self.adopted = False  # queued by a process that ended; this one took it over (_adopt)
        self._on_event = on_event
        # guards what snapshot() reads; re-entered where a part that holds it asks another part to change its state
        self._lock = threading.RLock()
        self._launch_lock = threading.Lock()  # a cancel never slips between claiming the run and starting its worker
        self._init_launching(queued_at)
        self._init_following()
        self._init_ending()

    @property
    def started(self) -> bool:
        """Whether the run has left the queue (claimed for a slot)."""
        return self._launched

    def set_queue_place(self, position: int | None, wait: waiting.Wait | None) -> None:
        with self._lock:
            self.queue_position, self.queue_wait = position, wait

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
        has left the queue; wait: when it should start (tcore.lab.queue.waiting.Wait: an estimate from what
        runs like the ones ahead took, and the latest their time limits allow), None once started; eta_s:
        the estimate alone; waited_s: time in the queue; elapsed_s: time since its worker started (0 while queued);
        headline: the timed figures' record once the worker has sent them (before its profiling pass), else None.
        """
        with self._lock:
            now = time.time()
            handle = self.handle
            left_queue_at = handle.started_at if handle else (self.record.finished_at if self.record else None)
            return {"run_id": self.run_id, "status": self.status, "phase": self.phase,
                    "progress": dict(self.progress), "power_samples": list(self.power_samples),
                    "notes": list(self.notes),
                    "done": self.done, "elapsed_s": (handle.finished_at or now) - handle.started_at if handle else 0.0,
                    "queue_position": self.queue_position, "wait": self.queue_wait,
                    "eta_s": self.queue_wait.eta_s if self.queue_wait else None,
                    "waited_s": (left_queue_at or now) - self.queued_at,
                    "device_slot": self.device_slot, "owner": self.owner,
                    "figures_so_far": {k: dict(v) for k, v in self.figures_so_far.items()},
                    "headline": self.headline,
                    "phase_started_at": dict(self.phase_started_at),
                    "shares_device": bool(self.lease_env.get(protocol.DEVICE_LEASE)),
                    "device_asked": self.device_asked, "device_held": self.device_held}

    def device_words(self) -> str | None:
        """Where a run that shares its GPU is now (holding it, waiting for it, on the CPU beside its holder), for the
        live panel; None for a run that holds its device whole, or has not started or has ended."""
        if not self.lease_env.get(protocol.DEVICE_LEASE) or self.done or self.device_slot is None:
            return None
        try:
            holder = self.store.devices.device_holder(scheduler.this_process().host, self.device_slot)
        except (sqlite3.Error, StoreError):
            holder = None
        with self._lock:
            asked, held = self.device_asked, self.device_held
        other = holder if holder is not None and holder.run_id != self.run_id else None
        return lease.device_words(asked, held, other, time.time())

    def wait_for_news(self, timeout: float) -> None:
        """Block (no polling) until what the page draws next arrives, at most `timeout`: during the timed rounds the
        headline, after it the run's end; at once in any other phase, and for a generation run, which sends no
        headline before its record."""
        if self.exp.task == "generate":
            return
        if self.phase == "measuring" and self.headline is None:
            self._headline_in.wait(timeout)
        elif self.headline is not None:
            self._done.wait(timeout)

    def wait(self, timeout: float | None = None) -> RunRecord | None:
        self._done.wait(timeout)
        return self.record
