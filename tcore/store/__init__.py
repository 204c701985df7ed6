"""The run store: one SQLite file that every process shares, holding runs, the queue, sweeps, the lab's state,
power samples, generated code and compile artifacts.

One way in: a RunStore and its methods. Each concern is a part, a class in its own module of this folder
that holds that concern's methods; RunStore is all of them over one file:

    connection.py  StoreFile   the file: its path, its checks, its connections (_connect, _write)
    schema.py                  every table, created or upgraded once per file per process, when opened
    run_outcomes.py Runs       how a run ended, and reading runs back
    run_queue.py   Queue       queue, claim a device slot, cancel
    owners.py      Owners      each lab process's heartbeat; the runs of one that died or went silent taken over
    devices.py     Devices     the device lease: who holds each device alone, who waits, when each held it;
                               the runs timed now, which every lab process on their host holds still for
    sweep_records.py Sweeps    a batch of queued runs known by one id; its next run released as one ends
    lab_state.py   LabState    what the instructor set: the queue paused, the limits
    participants.py People     whose runs are whose (a participant renamed), their name as typed, their knobs
    artifacts.py   Artifacts   what a compile left: artifacts, profiler traces, TORCH_TRACE logs
    model_cards.py ModelCards  what a worker wrote down about a model file, for processes that never import one
    changes.py                 reads answered once per change of the file for every session (reads(store))

A new concern is a new part: a `Part` subclass reading through self._connect() and writing through
self._write(), added to RunStore's bases. Parts call each other through self (a run's end releases its
sweep's next run: self._release_next). Nothing outside tcore/store touches _connect or _write, the
tests' hand-made rows aside (tests/test_store_seams.py checks it).
"""
from tcore.store.artifacts import Artifacts
from tcore.store.connection import StoreError, StoreFile, StoreReadOnly, default_path
from tcore.store.devices import Ask, Devices, Hold, QuietHold, Span
from tcore.store.lab_state import LabState
from tcore.store.model_cards import ModelCards
from tcore.store.owners import Owners
from tcore.store.participants import People
from tcore.store.records import RunRecord
from tcore.store.run_outcomes import NoSuchRun, Runs
from tcore.store.run_queue import Queue, QueueFull, SlotRoom
from tcore.store.sweep_records import Sweeps


class RunStore(StoreFile, Runs, Queue, Owners, Devices, Sweeps, LabState, People, Artifacts, ModelCards):
    """The run store at `path` (default: default_path()), its tables made or upgraded on opening."""


__all__ = ["Ask", "Hold", "NoSuchRun", "QueueFull", "QuietHold", "RunRecord", "RunStore", "SlotRoom", "Span",
           "StoreError", "StoreReadOnly", "default_path"]
