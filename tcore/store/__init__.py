"""The run store: one SQLite file that every process shares, holding runs, the queue, sweeps, power traces,
generated code and compile artifacts."""
from tcore.store.runs import QueueFull, RunRecord, RunStore, default_path

__all__ = ["QueueFull", "RunRecord", "RunStore", "default_path"]
