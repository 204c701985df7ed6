"""What recording a run's outcome needs besides the store itself: a store error in words, and the result's
headline interval restated from the store's earlier runs of the same setting."""
from __future__ import annotations

import shutil
import sqlite3
import time
from typing import Any, Callable, TypeVar

from tcore import figures
from tcore.analysis import history
from tcore.figures import rerun
from tcore.store import RunStore
from tcore.store.connection import TABLES_GONE

T = TypeVar("T")
LOCKED_FOR_S = 3600.0  # how long a finished run waits for a store another process holds write-locked, retrying


def is_locked(e: BaseException) -> bool:
    """Whether SQLite refused for another connection's lock: the store is intact, and the write can be tried again."""
    return isinstance(e, sqlite3.OperationalError) and ("locked" in str(e) or "busy" in str(e))


def through_locks(write: Callable[[], T], on_wait: Callable[[Exception], None], *, for_s: float = LOCKED_FOR_S,
                  every_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> T:
    """write(), tried again while another process holds the store write-locked (each try waits SQLite's busy
    timeout first), for up to `for_s`; on_wait(error) before each new try. Any other error, or a lock that outlasts
    `for_s`, is raised: what to do then is the caller's."""
    deadline = clock() + for_s
    while True:
        try:
            return write()
        except sqlite3.OperationalError as e:
            if not is_locked(e) or clock() > deadline:
                raise
            on_wait(e)
            time.sleep(every_s)


def store_failure(e: Exception, store: RunStore | None = None) -> str:
    """A store error in words: what happened and what to do."""
    text = str(e)
    try:  # SQLite says "disk I/O error" when even its shared-memory file cannot grow
        full = store is not None and shutil.disk_usage(store.path.resolve().parent).free < 1 << 20
    except OSError:
        full = False
    if "full" in text or full:
        return ("the disk that holds the run store is full: free some space (the runs it already holds are kept, "
                "and it works again as soon as there is room)")
    if "no such table" in text:
        return TABLES_GONE
    if "FOREIGN KEY" in text:
        return "the run store was deleted or replaced while the run was under way, so its record is gone"
    return f"the run store could not be written ({text})"


def with_history(store: RunStore, run_id: str, spec: dict[str, Any], result: dict[str, Any],
                 env: dict[str, Any]) -> dict[str, Any]:
    """The worker's result with its headline interval restated from the store: the earlier runs of the same setting on
    the same machine (those with an interval of their own, created since the instructor's last reset of the spread),
    and what the machine's reruns of other settings of this kind of run have shown (the worker,
    which cannot see the store, used the starting spread between processes). The kind of run is the setting's
    history's (rerun.setting_kind: the majority of its runs' own readings here, this one's included), so its width does
    not flip with one process's reading; where this run read otherwise, a note says so."""
    device = result.get("device")
    since = store.lab.spread_reset_at() or 0.0  # the instructor's reset: earlier runs no longer describe the machine
    records = [r for r in store.same_setting(spec, device, env, exclude=run_id)
               if rerun.teaches_spread(r.result) and r.created_at >= since]
    earlier = history.history(records)
    own = figures.follows_host(result, device)
    readings = [figures.follows_host(r.result, r.device) for r in records] + [own]
    kind = rerun.setting_kind(device, readings)
    bound = kind == "cuda-host-bound"
    spread = history.machine_spread(store.headlines(device), env, device, kind, exclude=spec)
    restated = rerun.restate(result, earlier.speedups, bound, spread, earlier.withins, gpu=env.get("gpu"))
    if restated is not result and bound != own:
        restated["notes"] = [*result.get("notes", []), kind_note(own, sum(readings) if bound else
                                                                 len(readings) - sum(readings), len(readings))]
    return figures.upgrade_result(restated)  # its break-even follows the restated headline


def kind_note(own: bool, agree: int, runs: int) -> str:
    """Why a run's interval is made for another kind of run than its own reading: the setting's history says so."""
    this, most = (("host-bound", "kept the GPU busy") if own else ("GPU-busy", "were host-bound"))
    return (f"This run read as {this}, but {agree} of the {runs} runs of this setting on this machine {most}: its "
            "interval uses the spread between processes of the setting's kind, its history's majority, so its width "
            "does not flip with one process's reading.")
