"""The device lease, lab side: a worker asks for its device, and this process takes it for the run in the store when
it is that run's turn, then tells the worker.

Runs that share a device slot (tcore.lab.queue.room) hold it alone, one at a time, for the phases that need it alone;
the worker's side (tcore.worker.device_lease) says when. A hold is a row of the store (tcore.store.devices), so every
process
that runs a queue on this host sees the same holder, a crash frees it (the run's end drops its hold in the same
transaction), and the pages can say who holds the device and since when. Of the runs waiting, the lowest rank goes
first, then the run queued first:
    eager     0  the eager warm-up before a compile: a second or two that lets a compile start
    profile   0  the profiling pass after the headline: a second or two that ends a run and frees its place for the
                 next one to compile (deferred behind others' timed rounds, a full room would keep its places taken
                 by runs waiting only to profile)
    compiled  1  the compiled code's first runs, its warm-up and the timed rounds, up to the headline
"""
from __future__ import annotations

import sqlite3
import sys
import threading
from typing import Callable

from tcore.lab.queue.waiting import duration_words
from tcore.store import Hold, RunStore, StoreError

PURPOSES = {"eager": 0, "profile": 0, "compiled": 1}
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
        self.store.devices.ask_device(self.host, slot, run_id, purpose, PURPOSES[purpose])
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
                if self.store.devices.take_device(self.host, slot, run_id):
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
        self.store.devices.release_device(run_id)
        with self._changed:
            self._changed.notify_all()

    def forget(self, run_id: str) -> None:
        """The run has ended: it asks for nothing more (its hold went with the record of its end)."""
        self._stop_asking(run_id)
        try:
            self.store.devices.release_device(run_id)
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


# What a run holds or waits for the device for, in the words the pages use.
HELD_FOR = {"eager": "for its eager warm-up", "compiled": "to run its compiled code and measure",
            "profile": "for its profiling pass"}


def device_words(asked: tuple[str, float] | None, held: tuple[str, float] | None, holder: Hold | None,
                 now: float) -> str:
    """Where a run that shares its GPU is, in a clause: holding it, waiting for it (and who holds it), or on the
    CPU beside the run that holds it (compiling, building, starting)."""
    if held is not None:
        return f"holds the GPU alone {HELD_FOR.get(held[0], '')} ({duration_words(now - held[1])} so far)"
    if asked is not None:
        who = (f"; run {holder.run_id[-6:]} holds it {HELD_FOR.get(holder.purpose, '')}" if holder is not None
               else "")
        return f"waiting for the GPU {HELD_FOR.get(asked[0], '')} ({duration_words(now - asked[1])}){who}"
    if holder is not None:
        return f"on the CPU beside run {holder.run_id[-6:]}, which holds the GPU {HELD_FOR.get(holder.purpose, '')}"
    return "on the CPU; the GPU is free"
