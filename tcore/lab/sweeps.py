"""Sweeps: cross a few settings over one base experiment, and queue the combinations as one sweep.

A sweep is a batch of queued runs that the store knows by its id (tcore.store.sweep_records): the queue
runs them one at a time (on a Ray cluster, one per slot at a time: it spreads over the GPUs), each
taking its turn behind everyone else's runs, and because all of it is
in the store, a sweep and its matrix survive an app restart. There is one scheduling mechanism: the
queue (tcore.lab.queue.scheduler).
"""
from __future__ import annotations

import itertools
from typing import Any

from tcore.experiment.spec import Experiment, SpecError
from tcore.lab.run import runs
from tcore.store import RunStore
from tcore.store.sweep_records import SweepRecord

__all__ = ["cross", "start", "cancel", "get", "latest", "active_count", "SweepRecord"]


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


def start(experiments: list[Experiment], store: RunStore, *, owner: str | None = None,
          timeout_s: float | None = None, label: str = "", skipped: list[str] | None = None) -> str:
    """Queue `experiments` as one sweep; returns its id. SpecError (nothing left queued) if the lab refuses one.

    owner: the person who started it (a browser's owner id; None from the command line): the sweep and its runs are
    theirs, so their page finds it again and every queue view and their "Your runs" show the runs as theirs. The
    runs are queued at once, as the lab queues its own (for_the_lab): the per-session limit on waiting runs does not
    cut a sweep short, and a sweep's runs do not count against it (tcore.store.run_queue.Queue.queued_count).
    """
    if not experiments:
        raise SpecError("a sweep needs at least one experiment that can run")
    sweep_id = store.sweeps.create_sweep(owner=owner, label=label or experiments[0].label, size=len(experiments),
                                         skipped=list(skipped or []))
    try:
        for i, exp in enumerate(experiments):
            runs.start(exp, store, owner=owner, timeout_s=timeout_s, sweep=(sweep_id, i), for_the_lab=True)
    except SpecError:
        cancel(sweep_id, store)
        raise
    return sweep_id


def cancel(sweep_id: str, store: RunStore) -> None:
    """Its waiting runs never start; its running one is stopped."""
    for run_id in store.sweeps.cancel_sweep(sweep_id):
        runs.cancel(run_id, store)


def get(sweep_id: str, store: RunStore) -> SweepRecord:
    return store.sweeps.sweep(sweep_id)


def latest(store: RunStore, owner: str | None = None) -> SweepRecord | None:
    """The newest sweep of `owner`, else the newest of anyone's (a refreshed browser has a new session)."""
    sweep_id = (store.sweeps.latest_sweep(owner) if owner else None) or store.sweeps.latest_sweep()
    return store.sweeps.sweep(sweep_id) if sweep_id else None


def active_count(store: RunStore) -> int:
    return store.sweeps.active_sweep_count()
