"""Sweeps: cross a few settings, then run the experiments one at a time in a background thread.
One at a time: two runs at once disturb each other's timings. A process-wide registry (as in tcore.runs)
lets a sweep outlive page switches and browser refreshes."""
from __future__ import annotations

import itertools
import threading
import time
import uuid
from typing import Any

from tcore.lab import runs
from tcore.spec import Experiment, SpecError
from tcore.store import RunStore


def cross(base: Experiment, axes: dict[str, list[Any]]) -> tuple[list[Experiment], list[str]]:
    """Every combination of `axes` (field -> values) applied to `base`; invalid ones skipped with the reason.
    A compile=off run is the eager baseline: the base's backend and fullgraph do not apply to it."""
    experiments, skipped = [], []
    for values in itertools.product(*axes.values()):
        changes = dict(zip(axes, values))
        if changes.get("compile", base.compile) == "off":
            changes.update(backend="inductor", fullgraph=False)
        try:
            exp = base.replace(**changes)
            runs.preflight(exp)
        except SpecError as e:
            skipped.append(", ".join(f"{k}={v}" for k, v in zip(axes, values)) + f": {e}")
        else:
            experiments.append(exp)
    return experiments, skipped


class Sweep:
    """Runs `experiments` in order; `run_ids[i]` is set when experiment i starts."""

    def __init__(self, experiments: list[Experiment], store: RunStore, *, timeout_s: float | None = None):
        self.started_at, self.id = time.time(), time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:4]
        self.experiments, self.store, self.timeout_s = list(experiments), store, timeout_s
        self.run_ids: list[str | None] = [None] * len(self.experiments)
        self.cancelled, self.error = False, None  # error: why the sweep stopped early, other than a cancel
        self._current: runs.LiveRun | None = None
        self._lock = threading.Lock()  # a cancel never slips in between starting a run and recording it
        self._thread = threading.Thread(target=self._run_all, name=f"sweep-{self.id}", daemon=True)
        self._thread.start()

    def _run_all(self) -> None:
        for i, exp in enumerate(self.experiments):
            with self._lock:
                if self.cancelled:
                    return
                try:
                    self._current = runs.start(exp, self.store, timeout_s=self.timeout_s)
                except (SpecError, OSError) as e:  # kept on the sweep for the page to show, not swallowed
                    self.error = f"{exp.label}: {e}"
                    return
                self.run_ids[i] = self._current.run_id
            self._current.wait()

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def current(self) -> runs.LiveRun | None:  # the run in progress, if any
        return self._current if self._current and not self._current.done else None

    def progress(self) -> tuple[int, int]:  # (runs finished, runs in the sweep)
        return sum(1 for i in self.run_ids if i and (r := runs.live(i)) and r.done), len(self.experiments)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            if self._current is not None:
                self._current.cancel()


_SWEEPS: dict[str, Sweep] = {}  # single dict operations are atomic under the GIL; readers copy the values


def start(experiments: list[Experiment], store: RunStore, *, timeout_s: float | None = None) -> Sweep:
    sweep = Sweep(experiments, store, timeout_s=timeout_s)
    _SWEEPS[sweep.id] = sweep
    return sweep


def get(sweep_id: str) -> Sweep | None:
    return _SWEEPS.get(sweep_id)


def latest() -> Sweep | None:
    """The most recently started sweep in this process, running or not."""
    return max(list(_SWEEPS.values()), key=lambda s: s.started_at, default=None)


def active() -> list[Sweep]:
    return [s for s in list(_SWEEPS.values()) if not s.done]
