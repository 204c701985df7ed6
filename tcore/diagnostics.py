"""What torch reports about a compile: graphs, breaks, recompilations, CUDA-graph skips, time per phase."""
from __future__ import annotations

from typing import Any

import torch._dynamo.utils as dynamo_utils

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


def _metric(entry: Any, name: str) -> Any:
    return getattr(entry, name, None)  # fields come and go between torch versions


def phase_split_s(entries: list[Any]) -> dict[str, float]:
    """Seconds per compile phase, summed over every compiled frame (forward and backward)."""
    totals = {name: 0.0 for name, _ in _NESTED_TIMERS_US}
    for entry in entries:
        timers = [(_metric(entry, field) or 0) / 1e6 for _, field in _NESTED_TIMERS_US]
        for i, (name, _) in enumerate(_NESTED_TIMERS_US):
            inner = timers[i + 1] if i + 1 < len(timers) else 0.0
            # A backward compile has no Dynamo timer of its own: its outer timer is 0 and inner ones are not.
            totals[name] += max(timers[i] - inner, 0.0) if timers[i] else 0.0
    return {name: round(s, 4) for name, s in totals.items()}


def collect() -> dict[str, Any]:
    """A flat summary of everything compiled since the last reset()."""
    entries = dynamo_utils.get_compilation_metrics()
    counters = dynamo_utils.counters
    breaks = sorted(counters["graph_break"].items(), key=lambda kv: -kv[1])
    recompiles = [
        {"compile_id": _metric(e, "compile_id"), "frame": _metric(e, "co_name"),
         "reason": _metric(e, "recompile_reason")}
        for e in entries if _metric(e, "recompile_reason")
    ]
    failures = [_metric(e, "fail_reason") for e in entries if _metric(e, "fail_reason")]
    skip_reasons = sorted({r for e in entries if (r := _metric(e, "cudagraph_skip_reason"))})
    cache = {
        "fx_graph_cache_hits": counters["inductor"]["fxgraph_cache_hit"],
        "fx_graph_cache_misses": counters["inductor"]["fxgraph_cache_miss"],
        "aot_autograd_cache_hits": sum(_metric(e, "aotautograd_local_cache_hit_count") or 0 for e in entries),
    }
    return {
        "graph_count": counters["stats"]["unique_graphs"],
        "graph_break_count": sum(n for _, n in breaks),
        "graph_breaks": [{"reason": reason, "count": n} for reason, n in breaks],
        "recompile_count": len(recompiles),
        "recompiles": recompiles,
        "compile_failures": failures,
        "cudagraph_skip_count": counters["inductor"]["cudagraph_skips"],
        "cudagraph_skip_reasons": skip_reasons,
        "compiled_frame_count": len(entries),
        "compile_phases_s": phase_split_s(entries),
        **cache,
    }
