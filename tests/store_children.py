"""What the store tests' child processes run, in a module of its own that imports the store alone.

A spawned child imports its target's module afresh. A test module imports tests.helpers, whose experiments import
the model registry and torch: 4-8 s of CPU in each child on a 2-core machine, where a store needs none."""
from __future__ import annotations

import time

from tcore.store import RunStore
from tcore.store.records import new_id


def insert_row(store: RunStore, *, label: str, model: str, preset: str, spec_json: str, status: str = "running") -> str:
    """A run row outside the queue (no owner, no host, so no queue adopts it), for a test to finish by hand."""
    run_id = new_id()
    with store._write() as db:
        db.execute("INSERT INTO runs (id, created_at, status, label, model, preset, spec) VALUES (?,?,?,?,?,?,?)",
                   (run_id, time.time(), status, label, model, preset, spec_json))
    return run_id


def write_runs(path: str, n: int, row: dict) -> None:
    """n runs inserted and finished, each with a result and 50 power samples."""
    store = RunStore(path)
    for i in range(n):
        run_id = insert_row(store, **row)
        store.finish(run_id, result={"device": "cpu", "i": i}, power_samples=[[i, 1.0, "eager", None]] * 50)


def open_when_released(path: str, barrier) -> None:
    barrier.wait()
    RunStore(path).list()
