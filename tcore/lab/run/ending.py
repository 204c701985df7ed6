"""How a LiveRun's end is recorded: the outcome written in the store (or kept, and written once the store can be),
the record read back, waiters let go, and a run that another process took over followed in the store.
"""
from __future__ import annotations

import dataclasses
import sqlite3
import sys
import threading
import time
import traceback
from typing import Any

from tcore.experiment.protocol import error as error_event
from tcore.lab.queue import disk, scheduler
from tcore.lab.run.recording import store_failure
from tcore.store import RunRecord, StoreError


class Ending:
    """The part of a LiveRun that records how it ended and lets its waiters go. It owns the record, when the run ended,
    how it ended where the store could not be told, and whether another process runs it now."""

    def _init_ending(self) -> None:
        self.record: RunRecord | None = None
        self.ended_at: float | None = None  # when this process saw it end (tcore.lab.run.registry keeps it a while)
        self.elsewhere = False  # another process took it over while this one was stopped: followed in the store
        self._unrecorded: dict[str, Any] | None = None  # how it ended, when the store could not be written
        self._store_trouble_said = False
        self._done = threading.Event()

    def _end_unrecorded(self, error: dict[str, Any]) -> None:
        """The run ended with `error`, which its owner is told from here whatever the store keeps."""
        self._unrecorded = error
        self._end(error)

    def _end(self, error: dict[str, Any]) -> None:
        try:
            self.store.finish(self.run_id, error=error, power_samples=self.power_samples,
                              owner=scheduler.this_process())
        except (sqlite3.Error, StoreError) as e:
            # a full disk, or the store deleted or damaged: this process still says how the run ended, and writes
            # it as soon as the store can be written (while it lives; a process that follows marks a run whose owner
            # ended mid-run as crashed, never runs it again), and its waiters go on
            self._say_store_trouble(e)
            if store_failure(e, self.store).startswith("the disk that holds the run store is full"):
                disk.was_full(self.store.path)  # the queue starts no run it could not record either
            self._unrecorded = error
            threading.Thread(target=self._record_when_writable, args=(error,), name=f"record-{self.run_id}",
                             daemon=True).start()
        self._collect_record()

    def _record_when_writable(self, error: dict[str, Any], every_s: float = 2.0, for_s: float = 86400.0) -> None:
        """How the run ended, written once the store can be written again (a disk with room, a store put back)."""
        deadline = time.monotonic() + for_s
        while time.monotonic() < deadline:
            time.sleep(every_s)
            try:
                self.store.finish(self.run_id, error=error, owner=scheduler.this_process())
                return
            except (sqlite3.Error, StoreError):
                continue

    def _say_store_trouble(self, e: Exception) -> None:
        """Once per run, in the lab process's log: the store cannot be written (how the run ended is said anyway)."""
        if not self._store_trouble_said:
            self._store_trouble_said = True
            print(f"compile-lab: run {self.run_id}: the run store cannot be written: {store_failure(e, self.store)}",
                  file=sys.stderr, flush=True)

    def _collect_record(self) -> None:
        try:
            self.record = self.store.get(self.run_id)
        except KeyError:  # deleted from the store while it waited
            self.record = None
        except (sqlite3.Error, StoreError) as e:
            self._unrecorded = self._unrecorded or error_event("crashed", f"the run store could not be read: "
                                                                          f"{store_failure(e, self.store)}")
            self.record = None
        except BaseException:
            self._release()
            raise
        if self._unrecorded is not None and (self.record is None or self.record.status in ("queued", "running")):
            # what this process knows, when the store could not be told
            self.record = dataclasses.replace(
                self.record or RunRecord(id=self.run_id, status="running", created_at=self.queued_at,
                                         label=self.exp.label, spec=self.exp.to_dict(), owner=self.owner),
                status="failed", error=self._unrecorded, error_kind=self._unrecorded.get("kind"))
            self._release()
            return
        if (self.record is not None and self.record.status in ("queued", "running")
                and self.store.queue.taken_over(scheduler.this_process(), [self.run_id])):
            # not ended: another process took it over while this one was stopped (Ctrl-Z); it runs there
            self._follow_elsewhere()
            return
        self._release()

    def _release(self) -> None:
        """The run has ended (or cannot be followed any further): waiters go on.

        Once the store's record says the run ended, the store holds its power samples and generated code, and
        the pages read them there: this run's copies go.
        """
        with self._lock:
            self.set_queue_place(None, None)
            self._let_go(recorded=self.record is not None and self.record.status in ("finished", "failed"))
            self.ended_at = time.time()
        self._done.set()
        scheduler.wake()  # its slot is free: the next run queued for it starts now, not at the queue's next tick

    def _follow_elsewhere(self) -> None:
        """Follow, in the store, a run that another process now owns, until it ends there."""
        with self._lock:
            if self.elsewhere:
                return
            self.elsewhere = True
            self._set_phase(None if self.record.status == "running" else "queued")
            self.set_queue_place(None, None)
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
