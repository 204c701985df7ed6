"""Honest timing: synchronize around timed regions, time each step of a block, read peak memory.

The figures derived from the blocks (medians, spread, percentiles, energy per step) are tcore.figures.summarize."""
from __future__ import annotations

import contextlib
import gc
import os
import statistics
import time
from typing import Callable, Iterator

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


def time_block(step: Callable[[], object], n_steps: int, device: str, meter: PowerMeter,
               deadline_s: float | None = None) -> Block:
    """Run `n_steps` steps back to back; time each with CUDA events (GPU) or the host clock (CPU).

    The block is bracketed by synchronizations so that the energy counter and the clock see
    exactly the block's work. With `deadline_s`, no step starts once the host has spent that long
    launching (a machine that slowed twenty-fold mid-block would otherwise hold it for minutes); the
    block then counts the steps it ran.
    """
    sync(device)
    e0 = meter.energy_j()
    start = time.perf_counter()
    if device == "cuda":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(n_steps + 1)]
        events[0].record()
        done = 0
        while done < n_steps and (deadline_s is None or done == 0 or time.perf_counter() - start < deadline_s):
            step()
            done += 1
            events[done].record()
        torch.cuda.synchronize()
        step_s = [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(done)]
        wall = events[0].elapsed_time(events[done]) / 1e3
    else:
        stamps = [start]
        while len(stamps) <= n_steps and (deadline_s is None or len(stamps) == 1 or stamps[-1] - start < deadline_s):
            step()
            stamps.append(time.perf_counter())
        step_s = [b - a for a, b in zip(stamps, stamps[1:])]
        wall = stamps[-1] - stamps[0]
    e1 = meter.energy_j()
    return Block(len(step_s), wall, step_s, None if e0 is None or e1 is None else e1 - e0)


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


def calibrate(step: Callable[[], object], device: str, *, at_least_s: float = 0.05, budget_s: float = 2.0) -> float:
    """Seconds per step in the steady state: single synchronized steps are timed until their later half
    lasts `at_least_s` (and 6 steps at least), within `budget_s`; the median of that later half.

    Warm-up steps can run many times slower than the steady state (allocation, autotuning, a cold cache)
    and a busy machine stalls a step now and then, so blocks are sized from this, not from the warm-up:
    the earlier half absorbs the stragglers, the median the stalls.
    """
    times: list[float] = []
    while (sum(times[len(times) // 2:]) < at_least_s or len(times) < 6) and sum(times) < budget_s:
        times.append(timed_call(step, device)[1])
    return statistics.median(times[len(times) // 2:])


class CpuLoad:
    """How many CPU cores other processes kept busy over a stretch of time, from /proc/stat (Linux).

    Busy time of the whole machine minus this process's own CPU time, over the wall time: 1.0 means
    another process kept one core busy all along. None where /proc/stat cannot be read.
    """

    def __init__(self) -> None:
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        busy_s = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
        own = os.times()
        return time.perf_counter(), busy_s, own.user + own.system

    def other_cores(self) -> float | None:
        end = self._read()
        if self._start is None or end is None or end[0] <= self._start[0]:
            return None
        wall = end[0] - self._start[0]
        return max((end[1] - self._start[1]) - (end[2] - self._start[2]), 0.0) / wall


PIN_ENV = "COMPILE_LAB_PIN_CPU"  # "0" leaves the launch thread where the scheduler puts it
MIN_CORES_TO_PIN = 4             # with fewer, the one core taken from the others costs more than it steadies


def _current_cpu() -> int | None:
    """The core this thread last ran on (field 39 of /proc/thread-self/stat, Linux); None where unreadable."""
    try:
        with open("/proc/thread-self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def pinned_launch_thread(device: str) -> Iterator[tuple[int | None, str | None]]:
    """Pin the calling (launch) thread to one core for the block, then give it back its cores: yields (the core,
    None), or (None, why not). GPU runs only: on the CPU the intra-op threads, which inherit a thread's cores,
    need all of them. The core is the one the thread runs on now, unless that is the first allowed core (where
    the kernel tends to put interrupts). Linux's sched_setaffinity(0, ...) applies to the calling thread only."""
    if device != "cuda":
        yield None, "not pinned on the CPU: the intra-op threads need every core"
        return
    if os.environ.get(PIN_ENV) == "0":
        yield None, f"not pinned: {PIN_ENV}=0"
        return
    if not (hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")):
        yield None, "not pinned: this system has no sched_setaffinity"
        return
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < MIN_CORES_TO_PIN:
        yield None, f"not pinned: only {len(allowed)} cores allowed"
        return
    now = _current_cpu()
    cpu = now if now in allowed[1:] else allowed[1]
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError as e:
        yield None, f"not pinned: {e}"
        return
    try:
        yield cpu, None
    finally:
        os.sched_setaffinity(0, allowed)


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector off for the block, after one collection; back as it was after it."""
    was_on = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
