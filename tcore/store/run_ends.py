"""What a run's end sets off in the store, inside the write transaction that records it: the next run of its sweep
joins the back of the queue, and whatever device it held or asked for is freed.

Every part that ends a run calls ended(): the run's outcome (run_outcomes.py), a cancel in the queue (run_queue.py)
and the runs of a process that died (owners.py).
"""
from __future__ import annotations

import sqlite3
import time

from tcore.store.devices import free_device


def ended(db: sqlite3.Connection, run_id: str) -> None:
    """Within a write transaction: `run_id` has ended."""
    _release_next(db, run_id)
    free_device(db, run_id)


def _release_next(db: sqlite3.Connection, run_id: str) -> None:
    """If `run_id` belongs to a sweep that goes on, its next run joins the back of the queue (the queue's order is
    rowid's: the run takes the next one, as if inserted now)."""
    db.execute(
        "UPDATE runs SET held=0, queued_at=?, rowid=(SELECT max(rowid) + 1 FROM runs)"
        " WHERE id=(SELECT next.id FROM runs AS ended"
        " JOIN runs AS next ON next.sweep_id=ended.sweep_id JOIN sweeps ON sweeps.id=ended.sweep_id"
        " WHERE ended.id=? AND next.status='queued' AND next.held=1 AND sweeps.cancelled=0"
        " ORDER BY next.sweep_index LIMIT 1)", (time.time(), run_id))
