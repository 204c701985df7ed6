"""What both measurements share (tcore.worker.measurement for a model's steps, tcore.worker.generate_measurement for
generation): the run's result, its phases and progress said to the lab, the device lease, the bookkeeping of the
paired rounds (the speedup so far, the load beside them, the paired figures) and the compile totals.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any, Callable

from tcore import figures
from tcore.experiment import protocol
from tcore.experiment.spec import EAGER_KERNEL_BACKENDS, Experiment
from tcore.figures import Result, RunFigures, VariantFigures, paired
from tcore.host.power import PowerMeter, PowerSampler
from tcore.worker import diagnostics, failures, hostspeed
from tcore.worker.device_lease import DeviceLease
from tcore.worker.pacing import most_rounds
from tcore.worker.timing import CpuLoad, core_times_reader

Emit = Callable[[dict[str, Any]], None]


def _ends(times: list[float]) -> tuple[float, float]:
    """The first and the last of a variant's settling blocks, as medians of SETTLE_BLOCKS where there are twice as
    many (a trend, not one block's noise), else the first and the last block."""
    n = paired.SETTLE_BLOCKS
    first, last = (times[0], times[-1]) if len(times) < 2 * n else \
        (statistics.median(times[:n]), statistics.median(times[-n:]))
    return max(first, 1e-12), last


class Phases:
    """A run's phases say themselves to the lab and fill `self.result`; the subclass says what they are (measure())."""

    def __init__(self, exp: Experiment, device: str, meter: PowerMeter, emit: Emit, sampler: PowerSampler | None,
                 env: dict[str, Any], lease: DeviceLease | None, *, compiles: bool) -> None:
        self.exp, self.device, self.meter, self.emit, self.sampler, self.env = exp, device, meter, emit, sampler, env
        self.lease = lease or DeviceLease(emit)  # the device alone for what needs it alone (tcore.worker.device_lease)
        variants = ["eager", "compiled"] if compiles else ["eager"]
        self.result = Result(device=device, variants=variants, run=RunFigures(),
                             compiled=VariantFigures() if compiles else None)
        self.t_start = time.time()
        self.blocks: dict[str, list[figures.Block]] = {}  # variant -> its timed blocks
        self.peak_gib: dict[str, float] = {}  # variant -> peak memory over its timed blocks
        self.weight_bytes: int | None = None  # the weights and buffers, as the run holds them
        self.busy_pct: dict[str, float] = {}  # variant -> NVML's utilization over its timed blocks (median)
        self.host = hostspeed.HostSpeed()  # the launch thread's single-thread speed, read at each phase and round

    def phase(self, name: str) -> None:
        self.host.note()
        self.emit({"type": "phase", "phase": name, "at": time.time()})  # when it began, not when the lab reads it
        # The log too: a run stopped at its time limit, or killed, keeps where it was in what the page shows of it
        # (its log's last lines); the events said it only to whoever followed them.
        print(f"phase: {protocol.PHASE_TITLES.get(name, name)} (+{time.time() - self.t_start:.1f} s)",
              file=sys.stderr, flush=True)
        if self.sampler:
            self.sampler.phase = name
        failures.entered(name)  # a failure from here on names this phase

    def progress(self, phase: str, done: int, total: int) -> None:
        self.emit({"type": "progress", "phase": phase, "done": done, "total": total})

    def _record(self, collected: dict[str, Any]) -> None:
        """What diagnostics.collect() found: its figures (graphs, breaks, cache hits) and the details behind them."""
        for key in [k for k in collected if k in figures.RUN_FIGURES]:
            setattr(self.result.run, key, collected.pop(key))
        self.result.details.update(collected)

    def compile_totals(self) -> None:
        """Every compile of the run (the first call, warm-up, any during timing or profiling) and their totals."""
        events = self.result.details["compile_events"] = diagnostics.compile_events(
            diagnostics.metrics(), self.t_start, self.lease.compile_waits_s)
        for key, value in figures.compile_totals(events).items():
            setattr(self.result.run, key, value)

    def load_beside(self) -> CpuLoad:
        """Other load while timing: on a device shared with compiling runs, on the launch thread's own core (the
        compiles beside it run on the other cores, where they moved nothing measurable; tcore.lab.queue.room); else
        on the whole machine."""
        return CpuLoad(core_times_reader(self.lease.measure_cpus[:1])) if self.lease.measure_cpus else CpuLoad()

    def settle(self, block: Callable[[str], tuple[float, float]], seen: dict[str, list[float]],
               spent: dict[str, float], most_s: float) -> None:
        """Untimed blocks before the timed rounds, the order alternating: `block(name)` runs one of that variant and
        gives (its step time, its seconds), until each variant runs steady (paired.steady) or has spent `most_s`;
        then settled() keeps what they did. `seen` and `spent` may start with blocks already run."""
        done = 0
        while moving := [name for name in seen if not (paired.steady(seen[name]) or spent[name] >= most_s)]:
            for name in moving if done % 2 == 0 else moving[::-1]:
                step_s, wall_s = block(name)
                seen[name].append(step_s)
                spent[name] += wall_s
            done += 1
        self.settled(seen, spent)

    def settled(self, seen: dict[str, list[float]], spent: dict[str, float]) -> None:
        """What the untimed blocks before the timed rounds did (each variant's step times, block by block, and its
        seconds), kept in details["settle"]; a note where a variant was still moving when timing began."""
        settle = {}
        for name, times in seen.items():
            first, last = _ends(times)
            settle[name] = {"blocks": len(times), "s": round(spent[name], 3), "steady": paired.steady(times),
                            "change_pct": round(100 * (last / first - 1), 2)}
        self.result.details["settle"] = settle
        moving = [f"{name} {v['change_pct']:+.1f}% over {v['s']:.1f} s" for name, v in settle.items()
                  if not v["steady"] and abs(v["change_pct"]) >= 2 * paired.SETTLE_PCT]  # a trend, not a noisy machine
        if moving:
            self.result.notes.append(
                f"The steps had not settled when timing began ({', '.join(moving)} of untimed blocks, their last "
                f"{paired.SETTLE_BLOCKS} still more than {paired.SETTLE_PCT:g}% apart): the machine was still speeding "
                "up or slowing down, which the rounds' drift shows.")

    def host_at_rest(self) -> None:
        """Before the timed rounds (GPU runs): wait, a bounded time, for the host to read at rest again
        (tcore.worker.hostspeed). On the CPU the run's own steps are the host's speed, and they settle no better."""
        if self.device == "cpu":
            return
        pinned = self.result.details.get("pinned_cpu")
        if pinned is None:  # not pinned: the scheduler moves the thread as it likes, and nothing is chosen for it
            self.host.wait_for_rest()
            return
        # The thread's own affinity is its one core now: every core is tried, and one it may not use says so.
        self.host.wait_for_rest(cores=range(os.cpu_count() or 1), move=lambda core: os.sched_setaffinity(0, {core}))
        if self.host.core is not None:
            self.result.details["pinned_cpu"] = self.host.core

    def host_during_rounds(self) -> None:
        """How fast the host ran while the rounds were timed, against its fastest in this run; a note where slower."""
        details = self.host.details()
        if details:
            self.result.details["host_speed"] = details
        if note := hostspeed.words(details):
            self.result.notes.append(note)

    def round_done(self, ratios: list[float], done: int) -> None:
        """A timed round's paired ratio (compiled over eager, its last blocks), and the speedup so far for the live
        view; derive() makes the real one."""
        ratios.append(figures.round_speedups(self.blocks["eager"][-1:], self.blocks["compiled"][-1:])[0])
        so_far = paired.estimate(ratios)
        self.emit({"type": "figure", "name": "speedup_so_far", "rounds": done, "of": most_rounds(self.exp),
                   "value": so_far.speedup, "low": so_far.low, "high": so_far.high, "pm_pct": so_far.half_width_pct})

    def rounds_beside(self, load: CpuLoad, sharing: list[int | None], busy: dict[str, list[float | None]]) -> None:
        """What ran beside the timed rounds: busy cores, the GPU's compute processes, this lab's compiling runs, and
        each variant's median GPU utilization."""
        self.result.run.busy_cores = load.other_cores()
        seen = [n for n in sharing if n is not None]
        self.result.run.gpu_processes = max(seen) if seen else None
        self.result.details["gpu_lab_processes"] = self.lease.lab_processes  # others of this lab, compiling
        self.busy_pct = {name: statistics.median(read) for name, values in busy.items()
                         if (read := [u for u in values if u is not None])}

    def headline_rounds(self) -> paired.Rounds:
        """The rounds the headline is made of, those the host disturbed left out (paired.undisturbed)."""
        return paired.undisturbed([(b.steps, b.wall_s) for b in self.blocks["eager"]],
                                  [(b.steps, b.wall_s) for b in self.blocks["compiled"]])

    def paired_speedup(self, never_pays: str) -> None:
        """The run's speedup from its paired rounds (tcore.figures.paired), beside the ratio of medians, the rounds'
        range and the steps that pay the compile back (never, said as `never_pays`, when the headline says compiled
        is not faster)."""
        result, run = self.result, self.result.run
        per_round = figures.round_speedups(self.blocks["eager"], self.blocks["compiled"])
        rounds = self.headline_rounds()
        for key, value in figures.paired_figures(paired.estimate(rounds.ratios)).items():
            setattr(run, key, value)
        if rounds.left_out:
            result.notes.append(
                f"{rounds.left_out} of {len(per_round)} timed rounds were left out of the speedup: a block ran more "
                f"than {paired.DISTURBED_PCT:g}% slower than its variant's fastest, which only the host's other work "
                f"does to a steady loop. The speedup is of the {len(rounds.ratios)} undisturbed rounds, what a rerun "
                "finds again.")
        run.speedup_of_medians = figures.speedup(result.eager, result.compiled)
        run.speedup_min, run.speedup_max = min(per_round), max(per_round)
        # From the headline, so the two never disagree: a compiled step is the eager one over the paired speedup.
        run.breakeven_steps = figures.breakeven_steps(run.compile_s, 1 / result.eager.steps_per_s, run.speedup)
        if self.exp.backend in EAGER_KERNEL_BACKENDS:  # eager's kernels on both sides: nothing compiled to pay back
            result.details["eager_kernels_only"] = True
            run.breakeven_steps = None
            result.unavailable["breakeven_steps"] = figures.EAGER_KERNELS_NO_PAYBACK
        elif run.breakeven_steps is None:
            result.unavailable["breakeven_steps"] = never_pays
