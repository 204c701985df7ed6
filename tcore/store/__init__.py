"""The run store: one SQLite file that every process shares, holding runs, the queue, sweeps, the lab's state,
power samples, generated code and compile artifacts.

One way in: a RunStore. It reads and writes runs itself (store.get, store.list, store.finish); each other concern is a
part of it, reached by name, a class in its own module of this folder:

    connection.py  StoreFile   the file: its path, its checks, its connections (_connect, _write)
    schema.py                  every table, created or upgraded once per file per process, when opened
    run_outcomes.py Runs       how a run ended, and reading runs back: the file's own methods
    run_queue.py   .queue      queue, claim a device slot, cancel
    owners.py      .owners     each lab process's heartbeat; the runs of one that died or went silent taken over
    devices.py     .devices    the device lease: who holds each device alone, who waits, when each held it;
                               the runs timed now, which every lab process on their host holds still for
    sweep_records.py .sweeps   a batch of queued runs known by one id; its next run released as one ends
    lab_state.py   .lab        what the instructor set: the queue paused, the limits
    participants.py .people    whose runs are whose (a participant renamed), their name as typed, their knobs
    artifacts.py   .artifacts  what a compile left: artifacts, profiler traces, TORCH_TRACE logs
    model_cards.py .model_cards what a worker wrote down about a model file, for processes that never import one
    run_ends.py                what a run's end sets off, whichever part records it: its sweep's next run, its device
    changes.py                 reads answered once per change of the file for every session (reads(store))

A new concern is a new part: a `Part` subclass reading through self._connect() and writing through self._write(),
made in RunStore's __init__. Nothing outside tcore/store touches _connect or _write, the tests' hand-made rows aside
(tests/test_store_seams.py checks it).
"""
from pathlib import Path

from tcore.store.artifacts import Artifacts
from tcore.store.connection import StoreError, StoreReadOnly, default_path
from tcore.store.devices import Ask, Devices, Hold, QuietHold, Span
from tcore.store.lab_state import LabState
from tcore.store.model_cards import ModelCards
from tcore.store.owners import Owners
from tcore.store.participants import People
from tcore.store.records import RunRecord
from tcore.store.run_outcomes import NoSuchRun, Runs
from tcore.store.run_queue import Queue, QueueFull, SlotRoom
from tcore.store.sweep_records import Sweeps


class RunStore(Runs):
    """The run store at `path` (default: default_path()), its tables made or upgraded on opening, and its parts."""

    def __init__(self, path: str | Path | None = None) -> None:
        super().__init__(path)
        self.queue = Queue(self)
        self.owners = Owners(self)
        self.devices = Devices(self)
        self.sweeps = Sweeps(self)
        self.lab = LabState(self)
        self.people = People(self)
        self.artifacts = Artifacts(self)
        self.model_cards = ModelCards(self)


__all__ = ["Ask", "Hold", "NoSuchRun", "QueueFull", "QuietHold", "RunRecord", "RunStore", "SlotRoom", "Span",
           "StoreError", "StoreReadOnly", "default_path"]
