"""Runs end to end: check the experiment, start its worker, follow it live, record the outcome.

The app and the command line both go through start(), so they produce the same records.
A LiveRun follows its worker in a thread and lives in a process-wide registry, so a run
outlives the Streamlit script rerun, a page switch or a browser refresh.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from tcore.events import TERMINAL
from tcore.launcher import RunHandle
from tcore.spec import Experiment, check_on_device, resolve_device
from tcore.store import RunRecord, RunStore


def preflight(exp: Experiment) -> tuple[str, list[str]]:
    """Refuse, before anything runs, what this machine cannot run; return (device, notes)."""
    import torch

    device = resolve_device(exp.device, torch.cuda.is_available())
    return device, check_on_device(exp, device)


class LiveRun:
    """One run in progress: its phase, progress, power trace and, at the end, its stored record."""

    def __init__(self, exp: Experiment, store: RunStore, *, timeout_s: float | None = None,
                 on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.exp = exp
        self.store = store
        self.device, self.notes = preflight(exp)
        self.phase: str | None = None
        self.progress: dict[str, tuple[int, int]] = {}  # phase -> (done, total)
        self.trace: list[list] = []
        self.final: dict[str, Any] | None = None
        self.record: RunRecord | None = None
        self._on_event = on_event
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.run_id = store.create(exp)
        try:
            self.handle = RunHandle(exp, timeout_s=timeout_s)
        except OSError as e:  # the worker could not even start: record that, then tell the caller
            store.finish(self.run_id, error={"type": "error", "kind": "crashed", "message": str(e)})
            raise
        self._thread = threading.Thread(target=self._follow, name=f"run-{self.run_id}", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        for event in self.handle:
            with self._lock:
                kind = event["type"]
                if kind == "phase":
                    self.phase = event["phase"]
                elif kind == "progress":
                    self.progress[event["phase"]] = (event["done"], event["total"])
                elif kind == "power":
                    self.trace.extend(event["samples"])
                elif kind == "note":
                    self.notes.append(event["text"])
                elif kind in TERMINAL:
                    self.final = event
            if self._on_event:
                self._on_event(event)
        final = self.handle.final
        if final["type"] == "result":
            self.store.finish(self.run_id, result=final["result"], env=final["env"], trace=self.trace)
        else:
            self.store.finish(self.run_id, error=final, trace=self.trace)
        self.record = self.store.get(self.run_id)
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def snapshot(self) -> dict[str, Any]:
        """A consistent copy of the live state, for a page to draw."""
        with self._lock:
            return {"run_id": self.run_id, "phase": self.phase, "progress": dict(self.progress),
                    "trace": list(self.trace), "notes": list(self.notes), "done": self.done,
                    "elapsed_s": _elapsed(self.handle)}

    def cancel(self) -> None:
        self.handle.cancel()

    def wait(self) -> RunRecord:
        self._done.wait()
        return self.record


def _elapsed(handle: RunHandle) -> float:
    return (handle.finished_at or time.time()) - handle.started_at


_LIVE: dict[str, LiveRun] = {}
_LIVE_LOCK = threading.Lock()


def start(exp: Experiment, store: RunStore, *, timeout_s: float | None = None,
          on_event: Callable[[dict[str, Any]], None] | None = None) -> LiveRun:
    """Start a run and register it so any page, in any browser session, can find it by id."""
    run = LiveRun(exp, store, timeout_s=timeout_s, on_event=on_event)
    with _LIVE_LOCK:
        _LIVE[run.run_id] = run
    return run


def live(run_id: str) -> LiveRun | None:
    with _LIVE_LOCK:
        return _LIVE.get(run_id)


def active() -> list[LiveRun]:
    with _LIVE_LOCK:
        return [r for r in _LIVE.values() if not r.done]


def execute(exp: Experiment, store: RunStore, *, timeout_s: float | None = None,
            on_event: Callable[[dict[str, Any]], None] | None = None) -> RunRecord:
    """Run to the end and return the stored record (what the command line does)."""
    return start(exp, store, timeout_s=timeout_s, on_event=on_event).wait()
