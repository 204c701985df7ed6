"""Honest timing: synchronize around timed regions, time each step, summarize blocks as medians with spread."""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from tcore.power import PowerMeter


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed_call(fn: Callable[[], object], device: str) -> tuple[object, float]:
    """One call, synchronized on both sides: (its result, wall seconds)."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - t0


@dataclass
class Block:
    """One timed block of consecutive steps of one variant."""

    steps: int
    wall_s: float
    step_s: list[float]
    energy_j: float | None


def time_block(step: Callable[[], object], n_steps: int, device: str, meter: PowerMeter) -> Block:
    """Run `n_steps` steps back to back; time each with CUDA events (GPU) or the host clock (CPU).

    The block is bracketed by synchronizations so that the energy counter and the clock see
    exactly the block's work.
    """
    sync(device)
    e0 = meter.energy_j()
    if device == "cuda":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(n_steps + 1)]
        events[0].record()
        for i in range(n_steps):
            step()
            events[i + 1].record()
        torch.cuda.synchronize()
        step_s = [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(n_steps)]
        wall = events[0].elapsed_time(events[-1]) / 1e3
    else:
        stamps = [time.perf_counter()]
        for _ in range(n_steps):
            step()
            stamps.append(time.perf_counter())
        step_s = [b - a for a, b in zip(stamps, stamps[1:])]
        wall = stamps[-1] - stamps[0]
    e1 = meter.energy_j()
    return Block(n_steps, wall, step_s, None if e0 is None or e1 is None else e1 - e0)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class VariantStats:
    """The timed blocks of one variant (eager or compiled) and their summary."""

    name: str
    blocks: list[Block] = field(default_factory=list)
    peak_mem_gib: float | None = None

    def summary(self, batch_size: int, power_reason: str | None) -> dict[str, float | None]:
        """Flat figures with units in their names; None where nothing could be measured."""
        rates = [b.steps / b.wall_s for b in self.blocks]
        all_steps = [s for b in self.blocks for s in b.step_s]
        total_steps = sum(b.steps for b in self.blocks)
        total_wall = sum(b.wall_s for b in self.blocks)
        energies = [b.energy_j for b in self.blocks]
        energy = None if power_reason or None in energies else sum(energies)
        # A counter that did not tick over a block (too short for its ~100 ms update) is no reading.
        if energy is not None and energy <= 0:
            energy = None
        p = self.name
        return {
            f"{p}_steps": total_steps,
            f"{p}_steps_per_s": statistics.median(rates),
            f"{p}_steps_per_s_min": min(rates),
            f"{p}_steps_per_s_max": max(rates),
            f"{p}_samples_per_s": statistics.median(rates) * batch_size,
            f"{p}_latency_ms_p50": percentile(all_steps, 50) * 1e3,
            f"{p}_latency_ms_p95": percentile(all_steps, 95) * 1e3,
            f"{p}_peak_mem_gib": self.peak_mem_gib,
            f"{p}_power_w": None if energy is None else energy / total_wall,
            f"{p}_energy_j_per_step": None if energy is None else energy / total_steps,
            f"{p}_energy_j_per_sample": None if energy is None else energy / (total_steps * batch_size),
        }


class PeakMemory:
    """Peak memory over a region: the CUDA allocator's peak on GPU, the process's peak RSS on CPU."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.what = "GPU allocator peak (max_memory_allocated)" if device == "cuda" else "process peak RSS (VmHWM)"

    def reset(self) -> None:
        if self.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        else:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # Linux: resets VmHWM to the current RSS

    def peak_gib(self) -> float:
        if self.device == "cuda":
            return torch.cuda.max_memory_allocated() / 2**30
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 2**30
        raise RuntimeError("/proc/self/status has no VmHWM line")
