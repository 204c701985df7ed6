"""Test helpers: runs written straight into a store, as if a worker had run them, without the queue."""
from __future__ import annotations

import time

from tcore.spec import Experiment
from tcore.store import RunStore
from tcore.store.records import new_id


def insert_run(store: RunStore, exp: Experiment, *, status: str = "running") -> str:
    """A run row outside the queue (no owner, no host, so no queue adopts it), for a test to finish by hand."""
    run_id = new_id()
    with store._write() as db:
        db.execute("INSERT INTO runs (id, created_at, status, label, model, preset, spec) VALUES (?,?,?,?,?,?,?)",
                   (run_id, time.time(), status, exp.label, exp.model, exp.preset, exp.to_json()))
    return run_id
