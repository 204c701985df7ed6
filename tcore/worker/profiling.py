"""Profile a few steady-state steps of one variant: kernels per step, where the time goes, and the trace itself.

The steps run back to back, as in the timed blocks, and the GPU is synchronized only at the end,
so the gaps between kernels are the ones the timed steps have. On a GPU that takes two passes:
recording every host op costs microseconds per op, which on a ResNet-50 step of 350 launches more
than doubled the step, so the timing pass records the GPU's kernels alone, and a second, detailed
pass (host ops, launches, the step and optimizer marks) says which op launched each kernel. On the
CPU the host ops are the work, so one pass records them. tcore.figures.breakdown analyses the Chrome traces;
the detailed one is kept gzipped for download when the lab side asked (SAVE_TRACES_TO): it opens in
Perfetto or chrome://tracing.
"""
from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from tcore.experiment.protocol import SAVE_TRACES_TO, WORKER_DIR
from tcore.figures import breakdown

# Profile at least this long and this many steps, and never more than MAX_STEPS: a profiled ResNet-50
# eager step holds a few hundred kernels and a few thousand host ops, so the trace stays a few MB.
PROFILE_S = 0.1
MIN_STEPS, MAX_STEPS = 3, 20


def steps_to_profile(step_s: float | None) -> int:
    """Enough steps of `step_s` to fill PROFILE_S, within MIN_STEPS..MAX_STEPS."""
    if not step_s or step_s <= 0:
        return MIN_STEPS
    return max(MIN_STEPS, min(MAX_STEPS, math.ceil(PROFILE_S / step_s)))


def profile_steps(step: Callable[[], object], device: str, steps: int, variant: str
                  ) -> tuple[int, breakdown.Breakdown | None]:
    """(kernels per step, where the time of a step goes) over `steps` profiled steps of one variant.

    Saves the detailed trace as trace-<variant>.json.gz under $SAVE_TRACES_TO when set.
    """
    step()  # one unprofiled call, so lazy initialisation is not counted
    # inside the run's folder, which the lab process removes however the worker ends (a SIGKILL left these behind)
    scratch = Path(tempfile.mkdtemp(prefix="tcore-trace-", dir=os.environ.get(WORKER_DIR) or None))
    try:
        if device == "cuda":
            timing = _record(step, steps, [ProfilerActivity.CUDA], scratch / "timing.json", marks=False)
            detail = _record(step, steps, [ProfilerActivity.CPU, ProfilerActivity.CUDA], scratch / "trace.json")
            found = breakdown.analyze(timing, steps, launched_by=breakdown.launchers(detail))
            kernels = sum(1 for e in timing if e.get("cat") == "kernel") // steps
        else:
            detail = _record(step, steps, [ProfilerActivity.CPU], scratch / "trace.json")
            found = breakdown.analyze(detail, steps)
            kernels = count_cpu_kernels(detail) // steps
        if os.environ.get(SAVE_TRACES_TO):
            target = Path(os.environ[SAVE_TRACES_TO])
            target.mkdir(parents=True, exist_ok=True)
            with open(scratch / "trace.json", "rb") as src, \
                    gzip.open(target / f"trace-{variant}.json.gz", "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return kernels, found


def _record(step: Callable[[], object], steps: int, activities: list, path: Path, *, marks: bool = True):
    """Run `steps` steps under the profiler, synchronizing the GPU only at both ends; the trace's events."""
    cuda = ProfilerActivity.CUDA in activities
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            with record_function(breakdown.STEP_MARK) if marks else nullcontext():
                step()
        if cuda:
            torch.cuda.synchronize()
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        return json.load(f).get("traceEvents", [])


def count_cpu_kernels(events: list[dict]) -> int:
    """The CPU's count of kernels in a trace's events, where there are no launches as such: the leaf operators
    that compute (views and allocations left out) plus Inductor's generated C++ kernels, which the profiler sees
    when cpp.enable_kernel_profile is on. (On a GPU: its kernels, memory copies left out.)

    A leaf is an op with no op or annotation inside it on its thread, nested as torch's own FunctionEvents nest
    them (cpu_children). Read from the Chrome trace, not from the profiler's events(): building those took 1.2-1.7
    s of a tiny model's 4 s run on this 2-core machine, for the same count (tests/test_profiling.py)."""
    threads: dict[tuple, list[dict]] = {}
    for e in breakdown.complete(events):
        if e.get("cat") in ("cpu_op", "user_annotation"):
            threads.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    count = 0
    for ops in threads.values():
        ops.sort(key=lambda e: (e["ts"], -(e["ts"] + e["dur"])))  # a parent before the ops inside it
        parents: set[int] = set()
        stack: list[dict] = []
        for e in ops:
            end = e["ts"] + e["dur"]
            while stack and (e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] or end > stack[-1]["ts"] + stack[-1]["dur"]):
                stack.pop()
            if stack:
                parents.add(id(stack[-1]))
            stack.append(e)
        count += sum(1 for e in ops if "cpp_fused" in e["name"] or (
            e["name"].startswith("aten::") and id(e) not in parents and e["name"] not in _CPU_METADATA_OPS))
    return count


# Left out of the CPU's kernel count: the ops that compute nothing, and contiguous and to, whose copy (when
# there is one) is a leaf op of its own.
_CPU_METADATA_OPS = {f"aten::{op}" for op in breakdown.METADATA_OPS | {"contiguous", "to", "_to_copy_meta"}}
