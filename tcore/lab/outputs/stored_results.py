"""Results stored before today's figures, rewritten once in their store as today's figures read them.

A result stored before paired rounds had the ratio of median throughputs as its speedup, one stored before break-even
followed the headline had the medians' break-even (tcore.figures.upgrade_result), and one of a backend that runs
eager's own kernels (eager, aot_eager) had a break-even, which it has none of: its speedup is not a compiled one. The
store returns results as it keeps them and knows nothing of the figures, so the lab rewrites a store's old results
when it opens the store to serve or to answer a command (tcore.lab.api.serve, tcore.cli); results written since are
written upgraded (tcore.lab.run.recording.with_history).
"""
from __future__ import annotations

from tcore import figures
from tcore.experiment.spec import EAGER_KERNEL_BACKENDS
from tcore.store import RunStore

# What the store records once its results are rewritten: a new upgrade of stored results is a new version.
VERSION = "paired speedup, break-even from the headline, none for eager kernels"


def upgrade_one(result: dict, spec: dict) -> dict:
    """One stored result in today's figures (its spec says which backend ran it)."""
    if spec.get("backend") in EAGER_KERNEL_BACKENDS and result.get("speedup") is not None:
        result = {**result, "eager_kernels_only": True}  # as the worker marks such a run today
    return figures.upgrade_result(result)


def upgrade(store: RunStore, *, wait: bool = True) -> int:
    """Rewrite `store`'s results stored before today's figures, once (how many changed). A store that can only be
    read is left as it lies. wait=False (a command that reads): "database is locked" at once where another process
    holds the write lock, and the next command rewrites them."""
    if store.read_only:
        return 0
    return store.rewrite_results(upgrade_one, VERSION, wait=wait)
