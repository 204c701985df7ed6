"""How a LiveRun leaves the queue: its worker started (a spare, a fresh process, a Ray task), the store told who runs
it before the worker is handed the run, and what happens when the store cannot be told (tcore.lab.run.liverun puts
the parts together).
"""
from __future__ import annotations

import shutil
import sqlite3
import threading
import time

from tcore.experiment import protocol
from tcore.experiment.protocol import error as error_event
from tcore.lab.launch import cluster
from tcore.lab.launch.handles import RunHandle, timeout_message
from tcore.lab.launch.launcher import Worker, run_folder
from tcore.lab.outputs import artifacts
from tcore.lab.queue import scheduler
from tcore.lab.queue.spares import SPARES
from tcore.lab.run.recording import store_failure
from tcore.lab.run.runclock import RunClock
from tcore.store import StoreError


def _lease_env(device: str, slot: str) -> dict[str, str]:
    """What a worker in `slot` is told of the room (tcore.lab.queue.room): that other runs share its device, so it asks
    for it (tcore.worker.lease), and the cores kept for the run that holds it."""
    plan = scheduler.room_plan(device)
    env = {}
    if plan.measure_cpus.get(slot):
        env[protocol.MEASURE_CPUS] = ",".join(str(c) for c in plan.measure_cpus[slot])
    if plan.shares:
        env[protocol.DEVICE_LEASE] = "1"
    return env

class Launching:
    """The part of a LiveRun that starts its worker, in the thread of its own that launch() starts."""

    def launch(self, slot: str, env: dict[str, str]) -> None:
        """Start the worker in `slot`; the store already says this run is running there. Returns at once: the
        worker starts in the run's own thread, which may wait there for the fork server's imports
        (tcore.lab.launch.forkserver) without holding up the queue."""
        with self._launch_lock:
            self._launched = True
            self.launched_at = time.time()  # the time limit counts from here: the worker's start is inside it
            self.clock.launch()
            with self._lock:
                self.phase, self.device_slot, self.queue_position, self.queue_wait = None, slot, None, None
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
            kept = self.store.set_worker(self.run_id, worker.proc.pid, scheduler.process_start(worker.proc.pid),
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
                extra = artifacts.launch_env(self.exp.to_dict(), self.device, self.store, self.workdir)
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
            self.phase, self.device_slot = "queued", None
            self.notes.append(words)
        if self._on_event:
            self._on_event({"type": "note", "text": words})
        threading.Thread(target=self._requeue_when_writable, name=f"requeue-{self.run_id}", daemon=True).start()

    def _requeue_when_writable(self, every_s: float = 2.0) -> None:
        while not self._cancelled:
            try:
                requeued = self.store.requeue(self.run_id, scheduler.this_process())
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
            extra = artifacts.launch_env(self.exp.to_dict(), self.device, self.store, self.workdir)
            self.handle = cluster.RayRunHandle(self.exp, slot, self.workdir, timeout_s=self.timeout_s,
                                               extra_env=extra)
        except Exception as e:  # Ray refused it, or the slot's node has left: that is this run's outcome
            self._end(error_event("crashed", f"the run could not be started on the cluster ({slot}): "
                                             f"{type(e).__name__}: {e}"))
            shutil.rmtree(self.workdir, ignore_errors=True)
            return
        threading.Thread(target=self._follow, name=f"run-{self.run_id}", daemon=True).start()
