"""The run store: one SQLite file that every process shares, holding runs, the queue, sweeps, power traces,
generated code and compile artifacts."""
from tcore.store.queue import QueueFull
from tcore.store.records import RunRecord
from tcore.store.runs import NoSuchRun, RunStore, StoreError, default_path

__all__ = ["NoSuchRun", "QueueFull", "RunRecord", "RunStore", "StoreError", "default_path"]
