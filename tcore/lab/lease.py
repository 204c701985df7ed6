"""The device lease, lab side: a worker asks for its device, and this process takes it for the run in the store when
it is that run's turn, then tells the worker.

Runs that share a device slot (tcore.lab.room) hold it alone, one at a time, for the phases that need it alone; the
worker's side (tcore.worker.lease) says when. A hold is a row of the store (tcore.store.devices), so every process
that runs a queue on this host sees the same holder, a crash frees it (the run's end drops its hold in the same
transaction), and the pages can say who holds the device and since when. Of the runs waiting, the lowest rank goes
first, then the run queued first:
    eager     0  the eager warm-up before a compile: a second or two that lets a compile start
    compiled  1  the compiled code's first runs, its warm-up and the timed rounds, up to the headline
    profile   2  the profiling pass after the headline: a person already has their figure, the next one does not
"""
from __future__ import annotations

import sqlite3
import sys
import threading
import time
from typing import Callable

from tcore.store import RunStore, StoreError

PURPOSES = {"eager": 0, "compiled": 1, "profile": 2}
POLL_S = 0.05  # how often a waiting ask looks at the store: a release in another process is seen this late at most


class Broker:
    """Grants the device slots of one store to this process's workers, in the order the store says."""

    def __init__(self, store: RunStore, host: str) -> None:
        self.store, self.host = store, host
        self._changed = threading.Condition()
        self._asking: dict[str, threading.Event] = {}  # run id -> set to stop asking (the run ended)

    def ask(self, run_id: str, slot: str, purpose: str, grant: Callable[[], None]) -> None:
        """`run_id`'s worker wants `slot` for `purpose`: call grant() once it holds it (from a thread of its own).
        A run whose ask is still open has it replaced."""
        if purpose not in PURPOSES:
            raise ValueError(f"unknown device purpose {purpose!r}; known: {', '.join(PURPOSES)}")
        self.store.ask_device(self.host, slot, run_id, purpose, PURPOSES[purpose])
        stop = threading.Event()
        with self._changed:
            if (old := self._asking.get(run_id)) is not None:
                old.set()
            self._asking[run_id] = stop
        threading.Thread(target=self._wait, args=(run_id, slot, grant, stop), name=f"device-{run_id}",
                         daemon=True).start()

    def _wait(self, run_id: str, slot: str, grant: Callable[[], None], stop: threading.Event) -> None:
        said = False
        while not stop.is_set():
            try:
                if self.store.take_device(self.host, slot, run_id):
                    break
            except (sqlite3.Error, StoreError) as e:  # a busy or full store: ask again, say so once
                if not said:
                    said = True
                    print(f"compile-lab: run {run_id} waits for {slot}, but the store cannot be asked: {e}",
                          file=sys.stderr, flush=True)
            with self._changed:
                self._changed.wait(POLL_S)
        else:
            return
        with self._changed:
            if self._asking.get(run_id) is stop:
                del self._asking[run_id]
        if not stop.is_set():
            grant()

    def release(self, run_id: str) -> None:
        """`run_id` lets its device go: the next run waiting here hears of it at once."""
        self._stop_asking(run_id)
        self.store.release_device(run_id)
        with self._changed:
            self._changed.notify_all()

    def forget(self, run_id: str) -> None:
        """The run has ended: it asks for nothing more (its hold went with the record of its end)."""
        self._stop_asking(run_id)
        try:
            self.store.release_device(run_id)
        except (sqlite3.Error, StoreError):
            pass  # the store's own recovery drops it once the run's end is written
        with self._changed:
            self._changed.notify_all()

    def _stop_asking(self, run_id: str) -> None:
        with self._changed:
            if (stop := self._asking.pop(run_id, None)) is not None:
                stop.set()


_BROKERS: dict[tuple[str, str], Broker] = {}
_LOCK = threading.Lock()


def broker(store: RunStore, host: str) -> Broker:
    """This process's broker for `store` (one per store file, shared by its runs)."""
    key = (str(store.path.resolve()), host)
    with _LOCK:
        if key not in _BROKERS:
            _BROKERS[key] = Broker(store, host)
        return _BROKERS[key]


def wait_words(purpose: str | None, holder_label: str | None, held_for: str | None) -> str:
    """What a run waiting for its device is waiting for, in words: 'waiting for the GPU to measure (run 3f2a…
    holds it for its timed rounds)'."""
    doing = {"eager": "for its eager warm-up", "compiled": "to run its compiled code and measure",
             "profile": "for its profiling pass"}.get(purpose or "", "")
    who = f" ({holder_label} holds it{' ' + held_for if held_for else ''})" if holder_label else ""
    return f"waiting for the GPU {doing}{who}".replace("  ", " ").strip()


HELD_FOR = {"eager": "for its eager warm-up", "compiled": "for its compiled runs and timed rounds",
            "profile": "for its profiling pass"}


def now() -> float:
    return time.time()
