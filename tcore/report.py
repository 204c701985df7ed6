"""Names, units and formatting of result figures, shared by the command line and the app."""
from __future__ import annotations

from typing import Any

# Per-variant figures: result keys are f"{variant}_{suffix}" for variant in ("eager", "compiled").
VARIANT_METRICS = [
    # suffix, title, unit, format
    ("steps_per_s", "Throughput", "steps/s", "{:.2f}"),
    ("samples_per_s", "Throughput", "samples/s", "{:.1f}"),
    ("latency_ms_p50", "Step latency p50", "ms", "{:.2f}"),
    ("latency_ms_p95", "Step latency p95", "ms", "{:.2f}"),
    ("peak_mem_gib", "Peak memory", "GiB", "{:.3f}"),
    ("power_w", "Mean power", "W", "{:.0f}"),
    ("energy_j_per_step", "Energy per step", "J", "{:.3g}"),
    ("energy_j_per_sample", "Energy per sample", "J", "{:.3g}"),
    ("tflops", "Achieved compute", "TFLOP/s", "{:.3g}"),
]

# Figures of the run as a whole.
RUN_METRICS = [
    ("speedup", "Speedup (compiled / eager throughput)", "x", "{:.2f}"),
    ("compile_s", "Compile time (cold first call minus one eager step)", "s", "{:.1f}"),
    ("breakeven_steps", "Steps until compiling pays back", "steps", "{:.0f}"),
    ("graph_count", "Graphs", "", "{:d}"),
    ("graph_break_count", "Graph breaks", "", "{:d}"),
    ("recompile_count", "Recompilations", "", "{:d}"),
    ("correctness_rel_diff", "Largest compiled-vs-eager difference (relative)", "", "{:.2g}"),
]

COMPILE_PHASES = {
    "dynamo_tracing_s": "Dynamo tracing and guards",
    "aot_autograd_s": "AOT autograd",
    "inductor_lowering_s": "Inductor lowering and passes",
    "codegen_and_compile_s": "Code generation and C++/Triton compile",
}


def fmt(result: dict[str, Any], key: str, unit: str, pattern: str, *, reason: bool = True) -> str:
    """A figure with its unit, or 'n/a' with (if `reason`) why it could not be measured."""
    value = result.get(key)
    if value is None:
        why = result.get("unavailable", {}).get(key)
        return f"n/a ({why})" if why and reason else "n/a"
    text = pattern.format(value)
    return f"{text} {unit}".rstrip()


def variant_rows(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(title, eager, compiled) for each per-variant figure."""
    return [(f"{title} ({unit})", fmt(result, f"eager_{suffix}", "", pattern, reason=False),
             fmt(result, f"compiled_{suffix}", "", pattern, reason=False))
            for suffix, title, unit, pattern in VARIANT_METRICS]


def run_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(title, fmt(result, key, unit, pattern)) for key, title, unit, pattern in RUN_METRICS]


def text_table(result: dict[str, Any]) -> str:
    rows = [("", "eager", "compiled")] + variant_rows(result)
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    width = max(len(t) for t, _ in run_rows(result))
    lines += [""] + [f"{title.ljust(width)}  {value}" for title, value in run_rows(result)]
    if result.get("correctness_ok") is not None:
        lines.append(f"{'Correct within tolerance'.ljust(width)}  "
                     f"{'yes' if result['correctness_ok'] else 'NO'} (tolerance {result['correctness_tolerance']:g})")
    for b in result.get("graph_breaks", []):
        lines.append(f"graph break x{b['count']}: {b['reason']}")
    for r in result.get("recompiles", []):
        lines.append(f"recompile {r['compile_id']} ({r['frame']}): {r['reason']}")
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    variant_keys = {f"{v}_{suffix}" for v in ("eager", "compiled") for suffix, *_ in VARIANT_METRICS}
    for why in sorted({w for k, w in result.get("unavailable", {}).items() if k in variant_keys}):
        lines.append(f"n/a: {why}")
    return "\n".join(lines)
