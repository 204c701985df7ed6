"""The runs this process follows, by id: the LiveRuns that pages, sweeps and the command line look up.

A run stays here while it is queued or running, and for a while after it ends, so a page that was drawing its
progress finds it once more and then reads the record from the store. Ended runs beyond KEEP_ENDED, or ended
more than KEEP_ENDED_S ago, are dropped as new runs come: a server that runs hundreds of them in a workshop day
does not keep them all.
"""
from __future__ import annotations

import threading
import time

from tcore.lab.run.liverun import LiveRun

KEEP_ENDED = 50  # the latest ended runs kept, whatever their age
KEEP_ENDED_S = 600.0  # an ended run older than this is dropped even below KEEP_ENDED

_LIVE: dict[str, LiveRun] = {}
_LIVE_LOCK = threading.Lock()


def register(run: LiveRun) -> None:
    """Follow `run` here from now on; drops the ended runs that are past keeping."""
    with _LIVE_LOCK:
        _LIVE[run.run_id] = run
        _prune(time.time())


def _prune(now: float) -> None:
    """Within _LIVE_LOCK: drop ended runs beyond the latest KEEP_ENDED, and those ended over KEEP_ENDED_S ago."""
    ended = sorted((r for r in _LIVE.values() if r.done), key=lambda r: r.ended_at or 0.0, reverse=True)
    for i, run in enumerate(ended):
        if i >= KEEP_ENDED or now - (run.ended_at or now) > KEEP_ENDED_S:
            del _LIVE[run.run_id]


def live(run_id: str) -> LiveRun | None:
    """The run with this id if this process follows it (None once it has ended and been dropped: read the store)."""
    with _LIVE_LOCK:
        return _LIVE.get(run_id)


def active() -> list[LiveRun]:
    """Runs in this process that have not ended: queued and running."""
    with _LIVE_LOCK:
        return [r for r in _LIVE.values() if not r.done]


def adopted_left() -> list[LiveRun]:
    """Runs this process took over from a process that ended, not yet ended here."""
    with _LIVE_LOCK:
        return [r for r in _LIVE.values() if r.adopted and not r.done]


def count() -> int:
    """How many runs this process holds, ended ones included (the load test reports it)."""
    with _LIVE_LOCK:
        return len(_LIVE)
