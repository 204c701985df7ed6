"""Calibrating this machine: reruns of reference settings, one per kind of run that the headline's interval tells
apart, so that the spread between fresh processes the machine shows replaces the measured starting value
(tcore.figures.rerun: its prior is tcore.analysis.history.machine_spread over the store's reruns). Every rerun a person
makes teaches it too; standing() is what the System page shows of it, reset() the instructor's fresh start.

    python -m tcore calibrate            # 5 fresh runs of each reference (7 of a kind's only one) on this device
    python -m tcore calibrate --runs 8   # more runs: a tighter bound on the spread

The references are ordinary runs, queued under the owner "calibration" and kept like any other: every later run on
this machine learns from them, as it learns from a room's reruns of the same settings. Host-bound GPU runs range from a
tiny model at batch 1 (launches alone: a spread of a few %) to ResNet-50 at its GPU default (the GPU mostly busy: σ
under 1%), so both are references of that kind and the prior is their pooled spread, not the
extreme's alone; the Run page's GPU default keeps the GPU busy; on the CPU, the CPU default.
"""
from __future__ import annotations

import math
import os
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
from tcore.store.run_queue import PAUSED

OWNER = "calibration"


def references(device: str) -> dict[str, list[Experiment]]:
    """kind (tcore.figures.rerun.kind) -> the settings whose reruns teach it, on `device`. Each compiles from this
    machine's warm cache: its reruns teach the spread of the speedup, which the cache leaves as it is (the cache is not
    part of a setting, tcore.experiment.comparable.PROVENANCE_FIELDS), and a warm compile takes a fraction of a cold
    one's time, so the idle time a lab needs to learn its spread is mostly timing."""
    def ref(model: str, **changes) -> Experiment:
        return Experiment(**{**practical_defaults(model, device, "inference"), "model": model, "device": device,
                             "cache": "warm", **changes})

    if device == "cuda":
        return {"cuda-host-bound": [ref("captioner", preset="tiny", batch_size=1), ref("resnet50")],
                "cuda": [ref("captioner")]}
    return {"cpu": [ref("captioner")]}


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
    store.lab.set_lab_state(SPREAD_RESET, {"at": time.time()})


def reset_at(store: RunStore) -> float | None:
    """When the machine's spread was last reset, or None."""
    return store.lab.spread_reset_at()


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


# The lab calibrates itself while idle: once the device has had nothing running or waiting for IDLE_S, the app's lab
# process queues one reference run (lowest priority in effect: it starts only into an empty queue), the next as soon
# as one ends while nothing else arrived, and, as soon as any other run is queued or running on this host, cancels
# the one under way, so a person never waits on it and no run is timed beside it. It stops once every kind holds
# rerun.MIN_MACHINE_DOF degrees of freedom, and starts again after a reset.
IDLE_S = 60.0
# "0": the app's lab process never runs references by itself; "1": on the CPU too, where it is off by default (a CPU
# reference shares the cores with everything on the machine, the pages' server included)
SELF_CALIBRATE_ENV = "COMPILE_LAB_SELF_CALIBRATE"
GIVE_UP_AFTER = 2  # failures of one reference in this process before it is left alone (e.g. it cannot fit here)


def next_reference(device: str, have: dict[str, history.Spread | None], counts: dict[str, int],
                   failed: frozenset[str] = frozenset(), read_as: dict[str, str] | None = None) -> Experiment | None:
    """The reference to run next: for the first kind still short of rerun.MIN_MACHINE_DOF (`have`: the machine's
    spread per kind), the first of the references that teach it with fewer runs than runs_for(how many teach it, 3)
    (`counts`: runs stored per reference label), so one fills before the next; None when every kind has enough or
    nothing left can teach a short one. A reference teaches the kind its runs here read as (`read_as`: label -> the
    setting's kind, rerun.setting_kind), whatever kind it was listed under: ResNet-50 can keep an H100 busy enough to
    read GPU-busy, and the host-bound kind then learns from the launch reference alone, which needs more runs."""
    read_as = read_as or {}
    listed = references(device)
    everyone = [exp for exps in listed.values() for exp in exps]
    for kind, exps in listed.items():
        spread = have.get(kind)
        if spread is not None and spread.dof >= rerun.MIN_MACHINE_DOF:
            continue
        teaching = [exp for exp in exps + [e for e in everyone if e not in exps]
                    if exp.label not in failed and read_as.get(exp.label, kind if exp in exps else None) == kind]
        for exp in teaching:
            if counts.get(exp.label, 0) < runs_for(len(teaching), 3):
                return exp
    return None


class SelfCalibration:
    """The app's lab process's idle-time calibration of one store: tick() now and then (the queue's scheduler does,
    tcore.lab.run.runs.on_idle). `submit` queues a reference and returns its run id; `cancel` cancels one."""

    def __init__(self, store: RunStore, device: str, host: str, submit: Callable[[Experiment], str],
                 cancel: Callable[[str], object], clock: Callable[[], float] = time.monotonic,
                 idle_s: float = IDLE_S) -> None:
        self.store, self.device, self.host, self.idle_s = store, device, host, idle_s
        self._submit, self._cancel, self._clock = submit, cancel, clock
        self.run_id: str | None = None       # the reference under way
        self.idle_since: float | None = None  # since when nothing else ran or waited here
        self.failures: dict[str, int] = {}

    def tick(self) -> None:
        others = [r for r in self.store.queue.running_and_queued(self.host)
                  if r.device == self.device and r.id != self.run_id]
        if self.run_id is not None:
            record = self.store.get(self.run_id)
            if record.status in ("queued", "running") and others:
                self._cancel(self.run_id)  # a person's run arrived: it goes first, and nothing is timed beside it
                self.run_id = None
            elif record.status not in ("queued", "running"):
                if record.status != "finished":
                    self.failures[record.label] = self.failures.get(record.label, 0) + 1
                self.run_id = None  # the queue stayed idle but for it: the next reference starts at the next tick
            return
        if others or self.store.lab.lab_state(PAUSED) is not None:
            self.idle_since = None
            return
        now = self._clock()
        if self.idle_since is None:
            self.idle_since = now
        if now - self.idle_since < self.idle_s:
            return
        exp = self._next()
        if exp is not None:
            self.run_id = self._submit(exp)

    def done(self) -> bool:
        """Whether no reference is under way and none is left to run (every kind holds enough, or the rest failed)."""
        return self.run_id is None and self._next() is None

    def _next(self) -> Experiment | None:
        """The reference to run next (next_reference), from what the store holds since the last reset: the runs of
        each reference (those the machine's spread may rest on) and the kind they read as."""
        env, since = machine_env(self.device), reset_at(self.store) or 0.0
        counts: dict[str, int] = {}
        read_as: dict[str, str] = {}
        for exps in references(self.device).values():
            for exp in exps:
                found = [r for r in self.store.same_setting(exp.to_dict(), self.device, env) if r.created_at >= since]
                counts[exp.label] = len(found)
                kinds = [r.result.get("speedup_kind") for r in found if (r.result or {}).get("speedup_kind")]
                if kinds:
                    read_as[exp.label] = rerun.setting_kind(self.device, [k == "cuda-host-bound" for k in kinds])
        return next_reference(self.device, spreads(self.store, self.device), counts,
                              frozenset(k for k, n in self.failures.items() if n >= GIVE_UP_AFTER), read_as)


def keep_calibrated(store: RunStore, device: str, idle_s: float = IDLE_S) -> SelfCalibration | None:
    """Start this process's idle-time calibration of `store` on `device` (the app's server does, at start), ticked by
    its queue; None where SELF_CALIBRATE_ENV is "0", or on the CPU unless it is "1"."""
    if os.environ.get(SELF_CALIBRATE_ENV, "1" if device == "cuda" else "0") == "0":
        return None
    from tcore.lab.queue.scheduler import this_process

    cal = SelfCalibration(store, device, this_process().host,
                          submit=lambda exp: runs.start(exp, store, owner=OWNER, for_the_lab=True).run_id,
                          cancel=lambda run_id: runs.cancel(run_id, store), idle_s=idle_s)
    runs.on_idle(store, cal.tick)
    return cal
