"""Honest timing: synchronize around timed regions, time each step of a block, read peak memory.

The figures derived from the blocks (medians, spread, percentiles, energy per step) are tcore.figures.summarize."""
from __future__ import annotations

import time
from typing import Callable

import torch

from tcore.figures import Block
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
