"""Results stored before today's figures, rewritten once in their store as today's figures read them.

A result stored before paired rounds had the ratio of median throughputs as its speedup, and one stored before
break-even followed the headline had the medians' break-even (tcore.figures.upgrade_result). The store returns results
as it keeps them and knows nothing of the figures, so the lab rewrites a store's old results when it opens the store
to serve or to answer a command (tcore.lab.api.serve, tcore.cli); results written since are written upgraded
(tcore.lab.run.recording.with_history).
"""
from __future__ import annotations

from tcore import figures
from tcore.store import RunStore

# What the store records once its results are rewritten: a new upgrade of stored results is a new version.
VERSION = "paired speedup, break-even from the headline"


def upgrade(store: RunStore, *, wait: bool = True) -> int:
    """Rewrite `store`'s results stored before today's figures, once (how many changed). A store that can only be
    read is left as it lies. wait=False (a command that reads): "database is locked" at once where another process
    holds the write lock, and the next command rewrites them."""
    if store.read_only:
        return 0
    return store.rewrite_results(figures.upgrade_result, VERSION, wait=wait)
