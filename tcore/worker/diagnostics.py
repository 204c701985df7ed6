"""What torch reports about a compile: graphs, breaks, recompilations, CUDA-graph skips, time per phase
and the code Inductor generated. (What a step costs once compiled is tcore.worker.profiling.)"""
from __future__ import annotations

import linecache
import logging
import re
import threading
import time
from collections import Counter
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

import torch
import torch._dynamo.utils as dynamo_utils

from tcore.worker import break_registry

# Cumulative timers on each compilation-metrics entry, outermost first (torch 2.11 and 2.13).
# Each phase is its timer minus the next one inside it.
_NESTED_TIMERS_US = (
    ("dynamo_tracing_s", "dynamo_cumulative_compile_time_us"),
    ("aot_autograd_s", "aot_autograd_cumulative_compile_time_us"),
    ("inductor_lowering_s", "inductor_cumulative_compile_time_us"),
    ("codegen_and_compile_s", "inductor_code_gen_cumulative_compile_time_us"),
)


def reset() -> None:
    """Forget what earlier compiles in this process reported."""
    dynamo_utils.counters.clear()
    dynamo_utils.clear_compilation_metrics()


def metrics() -> list[Any]:
    """Dynamo's per-frame compilation records since the last reset()."""
    return list(dynamo_utils.get_compilation_metrics())


def _metric(entry: Any, name: str) -> Any:
    return getattr(entry, name, None)  # fields come and go between torch versions


# Time a compile spent waiting for the device (tcore.worker.device_lease), by (compile id, the timer it waited inside):
# "dynamo" for a wait at a compile's end (inside Dynamo's timer only), "aot" for one before an Inductor benchmark in
# its joint-graph passes (matmul padding: inside AOT autograd's timer, and so Dynamo's). Left out of the timers below.
Waits = Mapping[tuple[str, str], float]
_WAIT_DEPTH = {"dynamo": 0, "aot": 1}  # how deep in _NESTED_TIMERS_US each kind of wait sits


def _timers_s(entry: Any, waits: Waits) -> list[float]:
    """An entry's nested timers in seconds, outermost first, less the time it waited for the device inside them."""
    timers = [(_metric(entry, field) or 0) / 1e6 for _, field in _NESTED_TIMERS_US]
    if not timers[0]:  # a backward compile (no Dynamo timer of its own): its waits are in no timer here
        return timers
    compile_id = str(_metric(entry, "compile_id"))
    for level, depth in _WAIT_DEPTH.items():
        waited = waits.get((compile_id, level), 0.0)
        for i in range(depth + 1):  # a wait is inside its own timer and every timer around it
            timers[i] = max(timers[i] - waited, 0.0)
    return timers


def waited_in(entry: Any, waits: Waits) -> float:
    """Seconds `entry`'s compile spent waiting for the device (0 for a backward compile's entry)."""
    if not _metric(entry, "dynamo_cumulative_compile_time_us"):
        return 0.0
    compile_id = str(_metric(entry, "compile_id"))
    return sum(waits.get((compile_id, level), 0.0) for level in _WAIT_DEPTH)


def phase_split_s(entries: list[Any], waits: Waits | None = None) -> dict[str, float]:
    """Seconds per compile phase, summed over every compiled frame (forward and backward), less device waits."""
    totals = {name: 0.0 for name, _ in _NESTED_TIMERS_US}
    for entry in entries:
        timers = _timers_s(entry, waits or {})
        for i, (name, _) in enumerate(_NESTED_TIMERS_US):
            inner = timers[i + 1] if i + 1 < len(timers) else 0.0
            # A backward compile has no Dynamo timer of its own: its outer timer is 0 and inner ones are not.
            totals[name] += max(timers[i] - inner, 0.0) if timers[i] else 0.0
    return {name: round(s, 4) for name, s in totals.items()}


def _hit_recompile_limit(entry: Any) -> bool:
    return bool(re.search(r"recompile.?limit|cache.?size.?limit", _metric(entry, "fail_reason") or "", re.I))


def compile_events(entries: list[Any], t0: float, waits: Waits | None = None) -> list[dict[str, Any]]:
    """Every compilation as a timeline event: when (s after t0, an epoch time), how long (less any wait for the
    device inside it), why.

    kind is "compile" (a frame's first), "recompile" (a guard failed: the reason says which),
    "limit" (the recompile limit was hit and the frame falls back to eager from then on) or
    "runtime" (Inductor compiling or autotuning kernels lazily on their first run, not a Dynamo compile).
    """
    out = []
    for e in entries:
        start = _metric(e, "start_time") or t0
        kind = ("runtime" if _metric(e, "is_runtime") else "limit" if _hit_recompile_limit(e)
                else "recompile" if _metric(e, "recompile_reason") else "compile")
        out.append({"compile_id": _metric(e, "compile_id"), "frame": _metric(e, "co_name"), "kind": kind,
                    "t_s": round(start - t0, 3),
                    "duration_s": round(max((_metric(e, "entire_frame_compile_time_s") or 0.0)
                                            - waited_in(e, waits or {}), 0.0), 3),
                    "reason": _metric(e, "recompile_reason") or (_metric(e, "fail_reason") or "").split("\n")[0],
                    "graph_ops": _metric(e, "graph_op_count")})
    return out


_CONTEXT_LINES = ("Encountered graph break when attempting", "Failed to handle graph break gracefully")


class BreakRecorder(logging.Handler):
    """Collects Dynamo's graph-break log records: reason and user source line of each break.

    Dynamo logs each break as "Graph break in user code at FILE:LINE" followed by "Graph Break
    Reason: ..."; the counters carry the reasons but not where they happened.
    """

    LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"
    _WHERE = re.compile(r"in user code at (.+):(\d+)")

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.breaks: Counter = Counter()
        self.registry: dict[tuple, dict[str, Any] | None] = {}  # key -> torch's registry entry for the break

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        where = self._WHERE.search(text.split("\n", 1)[0])
        reason = text.split("Graph Break Reason:", 1)[-1].split("User code traceback:", 1)[0]
        lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
        # Skip what Dynamo was doing ("Encountered graph break when attempting to trace CALL") to reach
        # what it could not do ("Unsupported Tensor.item() call ...").
        headline = next((line for line in lines if not line.startswith(_CONTEXT_LINES)), text.split("\n")[0])
        hint = next((line for line in lines if line.startswith("Hint:")), "")
        # Dynamo cannot resume after a break inside a loop: it runs the whole enclosing function eagerly.
        skipped = "falling back to eager" in reason
        key = (headline, where.group(1) if where else None, int(where.group(2)) if where else None, hint, skipped)
        self.breaks[key] += 1
        if key not in self.registry:
            entry = break_registry.parse(text)
            if entry and not entry["gb_id"]:  # no link line: look its type up in torch's registry
                entry = break_registry.parse(text, break_registry.lookup_ids())
            self.registry[key] = entry

    @contextmanager
    def attached(self) -> Iterator[BreakRecorder]:
        torch._logging.set_logs(graph_breaks=True, recompiles=True)  # also printed to the worker's log
        logger = logging.getLogger(self.LOGGER)
        logger.addHandler(self)
        try:
            yield self
        finally:
            logger.removeHandler(self)

    def summary(self) -> list[dict[str, Any]]:
        return [{"reason": reason, "file": path, "line": line, "count": n, "hint": hint, "skipped_frame": skipped,
                 "source": linecache.getline(path, line).strip() if path else "",
                 "registry": self.registry.get((reason, path, line, hint, skipped))}
                for (reason, path, line, hint, skipped), n in self.breaks.most_common()]


def explain_compile_error(exc: BaseException) -> str:
    """A readable account of a compile failure: what Dynamo could not do, and where in user code."""
    text = str(exc)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    where = re.findall(r'File "([^"]+)", line (\d+), in (\w+)\n\s+(.+)', text.split("from user code:")[-1])
    hint = next((line.strip() for line in text.splitlines() if line.strip().startswith("Hint:")), "")
    parts = [f"{type(exc).__name__}: {first}"]
    if where:
        path, line, func, code = where[-1]
        parts.append(f"at {path}:{line} in {func}: {code.strip()}")
    if hint:
        parts.append(hint)
    return "\n".join(parts)


@contextmanager
def generated_code() -> Iterator[list[str]]:
    """Collect the source Inductor writes for each graph (Python wrapper with Triton or C++ kernels)."""
    from torch._inductor.graph import GraphLowering

    sources: list[str] = []
    if not hasattr(GraphLowering, "save_output_code"):
        yield sources  # an Inductor without the hook: the code is simply not shown
        return
    previous = GraphLowering.save_output_code
    GraphLowering.save_output_code = staticmethod(sources.append)
    try:
        yield sources
    finally:
        GraphLowering.save_output_code = previous


def collect(breaks: BreakRecorder | None = None, waits: Waits | None = None) -> dict[str, Any]:
    """A flat summary of everything compiled since the last reset(); `waits`: what the compiles waited for the device
    (left out of their times)."""
    entries = dynamo_utils.get_compilation_metrics()
    counters = dynamo_utils.counters
    breaks_by_reason = sorted(counters["graph_break"].items(), key=lambda kv: -kv[1])
    recompiles = [
        {"compile_id": _metric(e, "compile_id"), "frame": _metric(e, "co_name"),
         "reason": _metric(e, "recompile_reason")}
        for e in entries if _metric(e, "recompile_reason") and not _hit_recompile_limit(e)
    ]
    failures = [_metric(e, "fail_reason") for e in entries if _metric(e, "fail_reason")]
    skip_reasons = sorted({r for e in entries if (r := _metric(e, "cudagraph_skip_reason"))})
    cache = {
        "fx_graph_cache_hits": counters["inductor"]["fxgraph_cache_hit"],
        "fx_graph_cache_misses": counters["inductor"]["fxgraph_cache_miss"],
        "aot_autograd_cache_hits": sum(_metric(e, "aotautograd_local_cache_hit_count") or 0 for e in entries),
    }
    located = breaks.summary() if breaks else []
    return {
        "graph_count": counters["stats"]["unique_graphs"],
        "graph_break_count": sum(n for _, n in breaks_by_reason),
        # Dynamo's log says where each break is; the counters, available always, only why.
        "graph_breaks": located or [{"reason": reason.split("\n")[0], "count": n} for reason, n in breaks_by_reason],
        "graphs": [{"compile_id": _metric(e, "compile_id"), "frame": _metric(e, "co_name"),
                    "ops": _metric(e, "graph_op_count"),
                    "compile_s": None if _metric(e, "entire_frame_compile_time_s") is None else
                    max(_metric(e, "entire_frame_compile_time_s") - waited_in(e, waits or {}), 0.0)}
                   for e in entries if _metric(e, "graph_op_count") is not None],
        "recompile_limit_hit": any(_hit_recompile_limit(e) for e in entries),
        "recompile_count": len(recompiles),
        "recompiles": recompiles,
        "compile_failures": failures,
        "cudagraph_skip_count": counters["inductor"]["cudagraph_skips"],
        "cudagraph_skip_reasons": skip_reasons,
        "compiled_frame_count": len(entries),
        "compile_phases_s": phase_split_s(entries, waits),
        **cache,
    }


def compile_progress() -> dict[str, int]:
    """What the compile under way has made so far, cheap enough to read from another thread every half second:
    graphs Dynamo captured and kernels Inductor generated (None-free: 0 where this torch keeps no count)."""
    import torch._inductor.metrics as inductor_metrics

    stats = dynamo_utils.counters.get("stats") or {}  # .get: a missing key is not created from this thread
    return {"graphs": int(stats.get("unique_graphs", 0)),
            "kernels": int(getattr(inductor_metrics, "generated_kernel_count", 0) or 0)}


@contextmanager
def progress_events(emit: Callable[[dict[str, Any]], None], every_s: float = 0.5) -> Iterator[None]:
    """While the block runs (the first compiled call), emit the compile's progress as a 'compile_progress' figure
    every `every_s`, for the live view; the emit is thread-safe (tcore.experiment.protocol.EventWriter)."""
    stop = threading.Event()
    begun = time.perf_counter()

    def tell() -> None:
        while not stop.wait(every_s):
            emit({"type": "figure", "name": "compile_progress", "elapsed_s": round(time.perf_counter() - begun, 1),
                  **compile_progress()})

    thread = threading.Thread(target=tell, name="compile-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
