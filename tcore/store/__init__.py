"""The run store: one SQLite file that every process shares, holding runs, the queue, sweeps, power traces,
generated code and compile artifacts."""
from tcore.store.queue import QueueFull
from tcore.store.records import RunRecord
from tcore.store.runs import RunStore, default_path

__all__ = ["QueueFull", "RunRecord", "RunStore", "default_path"]
