"""The GPU's achievable memory bandwidth, measured in the worker: the decode step's yardstick beside the datasheet.

What STREAM's Copy and nvbandwidth's device-local copy time: one buffer copied into another on the device, both far
larger than the L2 cache so every byte comes from and goes to HBM, timed with CUDA events after a warm-up; the bytes
read and the bytes written both count. A datasheet figure is a bus's peak, which no kernel reaches; this one is what
a plain copy reaches on this GPU, now. It takes a few tens of milliseconds, once per worker.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from tcore.figures import copy_bandwidth_tb_s

GIB = 2**30
BUFFER_BYTES = GIB          # each of the two buffers; 20x an H100's 50 MB L2
MIN_BUFFER_BYTES = GIB // 4
L2_TIMES = 8                # smaller than this many times the L2 cache, a copy could be served from it
WARMUP_COPIES, TIMINGS, COPIES_PER_TIMING = 2, 5, 4


@dataclass(frozen=True)
class Yardstick:
    """The measured bandwidth (None, with why, where it could not be measured) and how it was measured."""

    tb_s: float | None
    why_not: str | None = None
    method: str | None = None


def buffer_bytes(free_bytes: int, l2_bytes: int) -> int | None:
    """Each buffer's size: BUFFER_BYTES, halved until two of them leave half the free memory, and never under
    L2_TIMES the L2 cache or MIN_BUFFER_BYTES; None where no such size fits."""
    floor = max(MIN_BUFFER_BYTES, L2_TIMES * l2_bytes)
    size = max(BUFFER_BYTES, floor)
    while 2 * size > free_bytes // 2:
        size //= 2
        if size < floor:
            return None
    return size


@functools.cache
def measure(device: str) -> Yardstick:
    """The copy bandwidth of the current GPU in TB/s, the best of TIMINGS timings (STREAM reports the best)."""
    if device != "cuda":
        return Yardstick(None, "on the CPU: the lab measures a GPU's memory bandwidth only; a tiny model decodes "
                               "from the CPU's caches, and one process's copy rate on a shared host is not its "
                               "memory bandwidth")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    free, _ = torch.cuda.mem_get_info()
    size = buffer_bytes(free, getattr(props, "L2_cache_size", 0))
    if size is None:
        return Yardstick(None, f"too little free GPU memory ({free / GIB:.1f} GiB) for two buffers far larger than "
                               "the L2 cache")
    src = torch.empty(size, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    for _ in range(WARMUP_COPIES):
        dst.copy_(src)
    best_ms = float("inf")
    for _ in range(TIMINGS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(COPIES_PER_TIMING):
            dst.copy_(src)
        end.record()
        end.synchronize()
        best_ms = min(best_ms, start.elapsed_time(end))
    del src, dst
    torch.cuda.empty_cache()  # hand the buffers back before the model is built
    return Yardstick(copy_bandwidth_tb_s(size, COPIES_PER_TIMING, best_ms),
                     method=f"a {size / GIB:g} GiB device-to-device copy, read + write bytes counted, best of "
                            f"{TIMINGS} CUDA-event timings of {COPIES_PER_TIMING} copies after {WARMUP_COPIES} "
                            "warm-up copies")
