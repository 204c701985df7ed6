"""Calibrating this machine: reruns of reference settings, one per kind of run that the headline's interval tells
apart, so that the spread between fresh processes the machine shows replaces the documented default
(tcore.figures.rerun: its prior is tcore.analysis.history.machine_spread over the store's reruns).

    python -m tcore calibrate            # 5 fresh runs of each reference (7 of a kind's only one) on this device
    python -m tcore calibrate --runs 8   # more runs: a tighter bound on the spread

The references are ordinary runs, queued under the owner "calibration" and kept like any other: every later run on
this machine learns from them, as it learns from a room's reruns of the same settings. Host-bound GPU runs range from a
tiny model at batch 1 (launches alone: σ 2.7% over five fresh processes on an H100) to ResNet-50 at its GPU default
(the GPU busy 78-93%: σ under 1%), so both are references of that kind and the prior is their pooled spread, not the
extreme's alone; the Run page's GPU default keeps the GPU busy; on the CPU, the CPU default.
"""
from __future__ import annotations

import math
from typing import Callable

from tcore.analysis import history
from tcore.experiment.device import practical_defaults
from tcore.experiment.spec import Experiment
from tcore.figures import rerun
from tcore.lab.rerun_outlook import machine_env
from tcore.lab.run import runs
from tcore.store import RunRecord, RunStore

OWNER = "calibration"


def references(device: str) -> dict[str, list[Experiment]]:
    """kind (tcore.figures.rerun.kind) -> the settings whose reruns teach it, on `device`."""
    if device == "cuda":
        gpu = practical_defaults("captioner", "cuda", "inference")
        return {"cuda-host-bound": [Experiment(**{**gpu, "model": "captioner", "device": "cuda", "preset": "tiny",
                                                   "batch_size": 1}),
                                    Experiment(**{**practical_defaults("resnet50", "cuda", "inference"),
                                                  "model": "resnet50", "device": "cuda"})],
                "cuda": [Experiment(**{**gpu, "model": "captioner", "device": "cuda"})]}
    return {"cpu": [Experiment(**{**practical_defaults("captioner", "cpu", "inference"), "model": "captioner",
                                  "device": "cpu"})]}


def runs_for(kind_refs: int, runs_each: int) -> int:
    """Runs of each of a kind's `kind_refs` references: `runs_each`, or more where that many would leave the kind
    short of the degrees of freedom that replace its default (a kind with one reference needs 7, since 5 give 4)."""
    return max(runs_each, 1 + math.ceil(rerun.MIN_MACHINE_DOF / max(kind_refs, 1)))


def calibrate(store: RunStore, device: str, runs_each: int = 5,
              on_end: Callable[[RunRecord], None] | None = None) -> dict[str, history.Spread | None]:
    """Queue the runs of each reference at once (runs_for: `runs_each`, or enough to replace the default; they share
    the device as a room's runs do), wait for them, and return what the machine now shows for each kind (None where
    too few finished)."""
    queued = [runs.start(exp, store, owner=OWNER, for_the_lab=True) for exps in references(device).values()
              for exp in exps for _ in range(runs_for(len(exps), runs_each))]
    for run in queued:
        record = run.wait()
        if on_end is not None and record is not None:
            on_end(record)
    rows = store.headlines(device)
    env = machine_env(device)
    return {kind: history.machine_spread(rows, env, device, kind) for kind in references(device)}


def words(kind: str, spread: history.Spread | None, gpu: str | None = None) -> str:
    """One line per kind: the σ learned, from how many runs, and whether it now replaces the starting value."""
    what = rerun.KIND_WORDS.get(kind, kind)
    if spread is None:
        return f"{what}: no setting of this kind has run twice here yet"
    start, where = rerun.starting_between(kind, gpu)
    used = ("replaces the starting value" if spread.dof >= rerun.MIN_MACHINE_DOF else
            f"pooled with the starting value until it holds {rerun.MIN_MACHINE_DOF} degrees of freedom (it holds "
            f"{spread.dof})")
    return (f"{what}: σ {spread.sigma_pct:.2f}% between fresh processes, from {spread.runs} reruns of "
            f"{spread.settings} setting(s); {used} (starting σ {start:g}%, {where}); the part of "
            "their scatter that each run's own rounds do not explain")
