"""A run's figures as plain text, for the command line: titles, units and formats come from tcore.figures."""
from __future__ import annotations

from typing import Any

from tcore.analysis import advice, slower
from tcore.analysis.history import History, dots
from tcore.experiment.spec import newer_fields_words, unknown_fields
from tcore.figures import (
    RUN_FIGURES,
    VARIANT_FIGURES,
    breakdown,
    disagreement,
    host_bound,
    noise_reasons,
    speedup_words,
    summary_keys,
    text,
    unpaired_gap,
)

WITHHELD = "withheld"  # a figure of the profiled step's split where the page withholds its bars


def variant_rows(result: dict[str, Any], task: str | None = None) -> list[tuple[str, str, str]]:
    """(title with unit, eager, compiled) for each per-variant figure of the summary of a run of `task`; the split
    of the profiled step reads "withheld" where "Where the time goes" withholds its bars (breakdown.withheld_words)."""
    hidden = breakdown.SPLIT_FIGURES if breakdown.withheld_words(breakdown.as_timed(result)) else ()

    def cell(variant: str, k: str) -> str:
        if k in hidden and result.get(f"{variant}_{k}") is not None:
            return WITHHELD
        return text(result, f"{variant}_{k}", unit=False, reason=False)

    return [(VARIANT_FIGURES[k].label, cell("eager", k), cell("compiled", k)) for k in summary_keys(task)[1]]


def run_rows(result: dict[str, Any], task: str | None = None) -> list[tuple[str, str]]:
    """(title, value with unit or 'n/a (why)') for each run figure of the summary of a run of `task`."""
    return [(RUN_FIGURES[k].title, text(result, k)) for k in summary_keys(task)[0]]


def text_table(result: dict[str, Any], spec: dict[str, Any] | None = None, device: str | None = None) -> str:
    task = (spec or {}).get("task")
    rows = [("", "eager", "compiled")] + variant_rows(result, task)
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    width = max(len(t) for t, _ in run_rows(result, task))
    lines += [""] + [f"{title.ljust(width)}  {value}" for title, value in run_rows(result, task)]
    if result.get("tokens_match") is not None:
        lines.append(f"{'Same tokens as eager'.ljust(width)}  {'yes' if result['tokens_match'] else 'NO'} "
                     f"({result.get('prompt_tokens')}-token prompt, {result.get('new_tokens')} new tokens, greedy)")
    if result.get("launch_bound_words"):
        lines.append(result["launch_bound_words"])
    if result.get("correctness_ok") is not None:
        lines.append(f"{'Correct within tolerance'.ljust(width)}  "
                     f"{'yes' if result['correctness_ok'] else 'NO'} (tolerance {result['correctness_tolerance']:g})")
    for b in result.get("graph_breaks", []):
        lines.append(f"graph break x{b['count']}: {b['reason']}")
    for r in result.get("recompiles", []):
        lines.append(f"recompile {r['compile_id']} ({r['frame']}): {r['reason']}")
    if how := speedup_words(result):
        lines.append(f"speedup: {how}")
    if gap := unpaired_gap(result):
        lines.append(f"speedup: {gap.replace('**', '')}")
    for _, words in host_bound(result, device, (spec or {}).get("mode")):
        lines.append(f"host-bound: {words.replace('**', '')}")
    if result.get("timed_stop_words"):
        lines.append(f"timing: {result['timed_stop_words']}")
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    for reason in noise_reasons(result):
        lines.append(f"noisy: {reason}")
    if why := disagreement(result):
        lines.append(f"note: {why}")
    variant_keys = {f"{v}_{k}" for v in ("eager", "compiled") for k in summary_keys(task)[1]}
    for why in sorted({w for k, w in result.get("unavailable", {}).items() if k in variant_keys}):
        lines.append(f"n/a: {why}")
    if why := breakdown.withheld_words(breakdown.as_timed(result)):
        lines.append(f"where the time went: {why}")
    # the bars as the page draws them (scaled to the timed steps where the profiler slowed its steps), none withheld
    found, shown = result.get("breakdown") or {}, breakdown.shown_ms(result)
    if "eager" in shown and "compiled" in shown and (changed := breakdown.differences(
            {**found["eager"], "ms": shown["eager"]}, {**found["compiled"], "ms": shown["compiled"]})):
        lines.append(f"where the time went, eager -> compiled: {changed}")
    if spec is not None:
        for line in slower.words(result, spec):  # the same words the Run page shows beside the headline
            lines.append("why: " + line.replace("**", "").removeprefix("- "))
        if unknown := unknown_fields(spec):  # the advice reads the run as an experiment: a newer version's is not one
            lines.append(f"try next: n/a, {newer_fields_words(unknown)}")
        else:
            for s in advice.suggest(spec, result, device):
                lines.append(f"try next: {s.title}. {s.evidence}")
    return "\n".join(lines)


def history_lines(earlier: History, current: float | None, cache: str | None = None) -> list[str]:
    """The earlier runs of this setting on this machine, beside the headline: a sentence and the speedups as dots
    (`cache`: this run's, which the sentence sets the others' beside)."""
    lines = [f"history: {earlier.words(current, cache)}"]
    if earlier.points:
        lines.append(f"         {dots(earlier, current)}  (· earlier runs, • this run)")
    return lines
