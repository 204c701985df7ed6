"""Calibrating this machine: reruns of reference settings, one per kind of run that the headline's interval tells
apart, so that the spread between fresh processes the machine shows replaces the measured starting value
(tcore.figures.rerun: its prior is tcore.analysis.history.machine_spread over the store's reruns). Every rerun a person
makes teaches it too; standing() is what the System page shows of it, reset() the instructor's fresh start.

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
import time
from dataclasses import dataclass
from typing import Callable

from tcore.analysis import history
from tcore.experiment.device import practical_defaults
from tcore.experiment.spec import Experiment
from tcore.figures import rerun
from tcore.lab.rerun_outlook import machine_env
from tcore.lab.run import runs
from tcore.store import RunRecord, RunStore
from tcore.store.lab_state import SPREAD_RESET

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
    return spreads(store, device)


def spreads(store: RunStore, device: str) -> dict[str, history.Spread | None]:
    """What this machine has shown for each kind of run on `device` (None: no setting of that kind ran twice here),
    from the runs finished since the instructor's last reset."""
    rows, env = store.headlines(device), machine_env(device)
    return {kind: history.machine_spread(rows, env, device, kind) for kind in references(device)}


def reset(store: RunStore) -> None:
    """The instructor's reset: the machine's spread is learned again from runs finished from now on (after a change of
    machine, driver or load that the earlier runs no longer describe); until then intervals start from the measured
    starting value. The runs themselves are kept."""
    store.set_lab_state(SPREAD_RESET, {"at": time.time()})


def reset_at(store: RunStore) -> float | None:
    """When the machine's spread was last reset, or None."""
    state = store.lab_state(SPREAD_RESET)
    return state["at"] if state else None


@dataclass(frozen=True)
class Standing:
    """One kind of run's spread between processes on this machine, as the System page shows it."""

    kind: str
    what: str                  # the kind in words
    sigma_pct: float | None    # what the machine's reruns show (None: none yet)
    used_pct: float            # what a run of a new setting of this kind is given now (the starting value pooled in)
    runs: int
    settings: int
    newest_at: float | None    # when the newest run it rests on was created
    oldest_at: float | None
    start_pct: float           # the measured starting value, and where it comes from
    start_where: str
    words: str


def standing(store: RunStore, device: str) -> list[Standing]:
    """Each kind of run's spread on this machine: learned, with what it rests on and its age, or the starting value."""
    gpu = machine_env(device).get("gpu")
    out = []
    for kind, spread in spreads(store, device).items():
        start, where = rerun.starting_between(kind, gpu)
        used = rerun.between_sigma((), device, kind == "cuda-host-bound", spread, (), gpu)[0]
        out.append(Standing(kind, rerun.KIND_WORDS.get(kind, kind), spread.sigma_pct if spread else None,
                            100 * math.expm1(used), spread.runs if spread else 0, spread.settings if spread else 0,
                            spread.newest_at if spread else None, spread.oldest_at if spread else None, start, where,
                            words(kind, spread, gpu)))
    return out


def words(kind: str, spread: history.Spread | None, gpu: str | None = None) -> str:
    """One line per kind: the σ learned, from how many runs, and whether it now replaces the starting value."""
    what = rerun.KIND_WORDS.get(kind, kind)
    if spread is None:
        start, where = rerun.starting_between(kind, gpu)
        return (f"{what}: no setting of this kind has run twice here yet; runs start from σ {start:g}% ({where}), "
                "which each setting run here again narrows")
    start, where = rerun.starting_between(kind, gpu)
    used = ("replaces the starting value" if spread.dof >= rerun.MIN_MACHINE_DOF else
            f"pooled with the starting value until it holds {rerun.MIN_MACHINE_DOF} degrees of freedom (it holds "
            f"{spread.dof})")
    return (f"{what}: σ {spread.sigma_pct:.2f}% between fresh processes, from {spread.runs} reruns of "
            f"{spread.settings} setting(s); {used} (starting σ {start:g}%, {where}); the part of "
            "their scatter that each run's own rounds do not explain")
