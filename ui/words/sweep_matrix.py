"""A sweep's results matrix: one row per setting, named by what varies across the sweep, and the best setting in a
sentence. The Sweep page draws it live (ui.panels.live) and the Run and Sweep pages' knobs name dynamic shapes alike.
"""
from __future__ import annotations

import pandas as pd

from tcore.experiment.spec import Experiment
from tcore.figures import LEVEL_PCT, interval_name
from ui.words.compare_verdicts import compiled_nothing
from ui.words.graph_words import first_line

# The figures in a sweep's matrix, as stored columns (tcore.figures).
SWEEP_FIGURES = ["speedup", "speedup_low", "speedup_high", "compile_s", "eager_samples_per_s", "compiled_samples_per_s",
                 "breakeven_steps", "compiled_tokens_per_s", "compiled_ttft_ms"]  # the last two: generation runs only

# The "Dynamic shapes" choices as the Run and Sweep pages name them, and the sweep matrix too.
DYNAMIC_NAMES = {None: "auto", True: "always dynamic", False: "always static"}

# How a sweep's column names each setting that can vary across it besides the scope and mode.
_AXIS_WORDS = {
    "precision": str,
    "channels_last": lambda v: "channels_last" if v else "NCHW",
    "dynamic": {**DYNAMIC_NAMES, None: "dynamic auto"}.get,  # as the knob names them; "auto" alone says too little
    "compile_optimizer": lambda v: f"optimizer {'compiled' if v else 'eager'}",
    "kv_cache": lambda v: f"{v} KV cache",
    "batch_size": lambda v: f"bs{v}",
    "prompt_len": lambda v: f"{v}-token prompt" if v else "default prompt",
    "new_tokens": lambda v: f"{v} new tokens" if v else "default new tokens",
}


def setting_name(exp: Experiment, varying: set[str] | frozenset[str] = frozenset({"dynamic", "compile_optimizer"})
                 ) -> tuple[str, str]:
    """(row, column) of a sweep setting: 'scope · mode', and the other settings that vary across the sweep
    ('bf16 · NCHW · dynamic auto', 'always static')."""
    row = "off (eager)" if exp.compile == "off" else f"{exp.compile} · {exp.mode}"
    col = " · ".join(words(getattr(exp, name)) for name, words in _AXIS_WORDS.items() if name in varying)
    return row, col or "as set"


def sweep_matrix(experiments: list[Experiment], records: list) -> pd.DataFrame:
    """One row per setting: status, speedup, compile time, throughputs; NaN until its run finishes.

    `records` holds, per experiment, its RunRecord, or the string 'waiting', 'queued' or 'running'. A run
    that was cancelled reads "cancelled", not "failed"; text cells of unfinished runs are empty, not None.
    """
    rows = []
    varying = {name for name in _AXIS_WORDS if len({getattr(e, name) for e in experiments}) > 1}
    for exp, rec in zip(experiments, records):
        row, col = setting_name(exp, varying or {"dynamic"})
        status = rec if isinstance(rec, str) else "cancelled" if rec.error_kind == "cancelled" else rec.status
        result = rec.result if not isinstance(rec, str) else {}
        rows.append({"row": row, "col": col, "setting": f"{row} · {col}", "status": status,
                     **{c: result.get(c) for c in SWEEP_FIGURES},
                     "interval_name": interval_name(result) if result.get("speedup_low") is not None else "",
                     "error": first_line(rec.error.get("message")) if status in ("failed", "cancelled") else "",
                     "compiled_nothing": compiled_nothing(exp.to_dict()) or "",
                     "run_id": "" if isinstance(rec, str) else rec.id})
    frame = pd.DataFrame(rows)
    for col in SWEEP_FIGURES:
        frame[col] = pd.to_numeric(frame[col], errors="coerce") if not frame.empty else frame.get(col)
    return frame


def interval_cells(matrix: pd.DataFrame) -> list[str]:
    """Each row's speedup interval in words: its reach, or why it has none (a run of too few rounds), or nothing yet."""
    return [f"{r.speedup_low:.2f}–{r.speedup_high:.2f}x" if pd.notna(r.speedup_low) and pd.notna(r.speedup_high)
            else "none: too few rounds" if pd.notna(r.speedup) else "" for r in matrix.itertuples()]


def best_setting(matrix: pd.DataFrame, *, final: bool = True) -> str | None:
    """The fastest setting, and the one that pays back soonest when that is another, in a sentence."""
    done = matrix.dropna(subset=["speedup"]) if not matrix.empty else matrix
    if done.empty:
        return None
    if "compiled_nothing" in done.columns:  # eager kernels through a captured graph: no setting's speedup to crown
        idle = done[done.compiled_nothing.fillna("") != ""]
        done = done[done.compiled_nothing.fillna("") == ""]
        if done.empty:
            why = ", ".join(sorted(set(idle.compiled_nothing)))
            return (f"None of these settings compiled code ({why}: the captured graph runs eager kernels), so none "
                    "is named the fastest: their speedups say what tracing costs, not what compiling gains. Pick "
                    "backend inductor to compare compiled code.")
    best = done.loc[done.speedup.idxmax()]
    # The paired interval where the runs have one; older matrices and records without it, the rounds' range.
    paired = pd.notna(best.get("speedup_low")) and pd.notna(best.get("speedup_high"))
    low, high, what = (("speedup_low", "speedup_high", best.get("interval_name") or f"{LEVEL_PCT}% interval")
                       if paired else ("speedup_min", "speedup_max", "rounds"))
    # where the matrix keeps paired intervals, a best without one (too few rounds) is not ranged by its rounds' own
    # range: one round's 37.9x beside 0.6x reruns has a range of a single point
    keeps_intervals = "speedup_low" in done.columns and "speedup_high" in done.columns
    ranged = pd.notna(best.get(low)) and pd.notna(best.get(high)) and (paired or not keeps_intervals)
    spread = f" ({what} {best[low]:.2f}–{best[high]:.2f}x)" if ranged else ""
    # Another setting whose interval reaches this one's is not told apart by these runs: then none is crowned.
    # A setting with no interval of its own (too few rounds) cannot be told from it either, nor can the best be told
    # from the rest when it has none (where the matrix keeps intervals at all).
    others = done[done.setting != best.setting]
    if ranged:
        rivals = others[(others[high] >= best[low]) | others[high].isna()] if high in others else others[:0]
    else:
        # the sweep's own matrix keeps paired intervals, not the rounds' range: its best without an interval reached
        # "Fastest" for want of the range's columns (a 1-round 2.97x beside reruns of 12.2x, 0.07x and 0.75x)
        rivals = others if keeps_intervals or (low in done.columns and high in done.columns) else done[:0]
    if rivals.empty:
        text = (f"Fastest: **{best.setting}**, {best.speedup:.2f}x eager{spread} after {best.compile_s:.1f} s of "
                "compiling.")
    else:
        tied = [best, *(r for _, r in rivals.iterrows())]
        names = ", ".join(f"**{r.setting}** ({r.speedup:.2f}x" + (f", {r[low]:.2f}–{r[high]:.2f}x"
                                                                    if pd.notna(r.get(low)) and pd.notna(r.get(high))
                                                                    else "") + ")" for r in tied)
        unknown = not ranged or high not in rivals or rivals[high].isna().any()
        text = (f"These runs **cannot tell apart** {names}: their {'intervals' if paired else 'rounds'} overlap"
                + (" or a run has none of its own" if unknown else "")
                + ", so none of them is named the fastest. Time them for longer before picking one.")
    paying = done.dropna(subset=["breakeven_steps"])
    if not paying.empty:
        soon = paying.loc[paying.breakeven_steps.idxmin()]
        if soon.setting != best.setting:
            text += (f" Pays back soonest: **{soon.setting}** ({soon.speedup:.2f}x, {soon.compile_s:.1f} s compile, "
                     f"break-even after {soon.breakeven_steps:,.0f} steps).")
    if final and best.speedup <= 1:
        text += " No setting beat eager here: on a small model or a CPU, compile overhead can outweigh fusion."
    return text
