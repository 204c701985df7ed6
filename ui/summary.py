"""Plain words and tables from results, runs and sweeps: what compile did, said so a workshop can read it.

No Streamlit here, so the wording is unit-tested like the charts.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tcore.report import RUN_METRICS, fmt
from tcore.spec import Experiment

DTYPE_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}

# Columns of the run table on the Compare page: (column of RunStore.dataframe(), title with unit).
RUN_COLUMNS = [
    ("created_at", "Started"), ("label", "Run"), ("status", "Status"), ("device", "Device"),
    ("speedup", "Speedup (x)"), ("compile_s", "Compile (s)"),
    ("eager_samples_per_s", "Eager (samples/s)"), ("compiled_samples_per_s", "Compiled (samples/s)"),
    ("breakeven_steps", "Break-even (steps)"), ("eager_energy_j_per_step", "Eager energy (J/step)"),
    ("compiled_energy_j_per_step", "Compiled energy (J/step)"), ("error_kind", "Error"), ("id", "Run id"),
]

# printf formats of the numeric columns above, for st.column_config.NumberColumn.
RUN_COLUMN_FORMATS = {"Speedup (x)": "%.2f", "Compile (s)": "%.1f", "Eager (samples/s)": "%.1f",
                      "Compiled (samples/s)": "%.1f", "Break-even (steps)": "%.0f", "Eager energy (J/step)": "%.3g",
                      "Compiled energy (J/step)": "%.3g"}


def first_line(text: str | None) -> str:
    """The headline of a multi-line torch message (graph-break reasons run to ten lines)."""
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "(no reason given)"


def graph_words(result: dict) -> list[str]:
    """Graph count, graph breaks and recompilations in sentences, e.g. '1 graph break: <reason> (x4)'."""
    lines = []
    graphs, breaks = result.get("graph_count"), result.get("graph_breaks") or []
    n_breaks = result.get("graph_break_count") or 0
    if graphs is not None:
        lines.append(f"Dynamo captured {graphs} graph{'s' if graphs != 1 else ''}"
                     + (" with no graph breaks." if not n_breaks else
                        f" and hit {n_breaks} graph break{'s' if n_breaks != 1 else ''}:"))
    for b in breaks:
        where = f" at `{Path(b['file']).name}:{b['line']}`" if b.get("file") and b.get("line") else ""
        source = f" (`{b['source'].strip()}`)" if b.get("source") else ""
        lines.append(f"- graph break{where}{source}: {first_line(b['reason'])} (x{b['count']})")
    recompiles = result.get("recompiles") or []
    if result.get("recompile_count") is not None:
        lines.append("No recompilations." if not recompiles else
                     f"{len(recompiles)} recompilation{'s' if len(recompiles) != 1 else ''} "
                     "(a guard failed, so the frame compiled again):")
    for r in recompiles:
        lines.append(f"- recompile {r['compile_id']} of `{r['frame']}`: {_after_id(first_line(r['reason']))}")
    eager_k, compiled_k = result.get("eager_kernels_per_step"), result.get("compiled_kernels_per_step")
    if eager_k is not None and compiled_k is not None:
        lines.append(f"Kernels launched per step: {eager_k} eager, {compiled_k} compiled"
                     + (" (fusion merged them)." if compiled_k < eager_k else "."))
    if result.get("cudagraph_skip_count"):
        reasons = "; ".join(first_line(r) for r in result.get("cudagraph_skip_reasons") or []) or "no reason given"
        lines.append(f"CUDA graphs were skipped {result['cudagraph_skip_count']} time(s): {reasons}.")
    return lines


def _after_id(reason: str) -> str:
    """'0/0: tensor 'x' size mismatch ...' -> "tensor 'x' size mismatch ..." (the id is shown already)."""
    head, sep, rest = reason.partition(": ")
    return rest if sep and "/" in head and " " not in head else reason


def correctness_words(result: dict, dtype: str) -> tuple[bool | None, str]:
    """(ok, sentence) about the compiled output matching eager; ok is None when nothing was compared."""
    ok = result.get("correctness_ok")
    if ok is None:
        return None, "No correctness check: nothing was compiled, so there is nothing to compare with eager."
    rel, tol = result["correctness_rel_diff"], result["correctness_tolerance"]
    diff = f"largest difference {rel:.2g} of the output's scale, {'within' if ok else 'above'} the {dtype} " \
           f"tolerance of {tol:g}"
    return ok, ("Compiled output matches eager: " if ok else "Compiled output DIFFERS from eager: ") + diff + "."


def headline(result: dict) -> dict[str, tuple[str, str | None]]:
    """Title -> (value with unit, why n/a) for the run-level figures (tcore.report.RUN_METRICS)."""
    out = {}
    for key, title, unit, pattern in RUN_METRICS:
        why = result.get("unavailable", {}).get(key) if result.get(key) is None else None
        out[key] = (fmt(result, key, unit, pattern, reason=False), why)
    return out


def payback_words(result: dict) -> str | None:
    """Break-even in steps and in seconds of compiled running, with the formula."""
    steps, sps = result.get("breakeven_steps"), result.get("compiled_steps_per_s")
    if steps is None or not sps:
        return None
    return (f"Compiling pays back after {steps:,.0f} steps, about {steps / sps:,.0f} s of compiled running "
            f"(break-even = compile time / (eager step time - compiled step time)).")


def run_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The Compare table: the columns above, titled with units, in this order (missing ones empty)."""
    columns = [c for c, _ in RUN_COLUMNS]
    return frame.reindex(columns=columns).rename(columns=dict(RUN_COLUMNS))


def setting_name(exp: Experiment) -> tuple[str, str]:
    """(row, column) of a sweep setting: 'scope · mode' and 'dynamic · optimizer'."""
    row = "off (eager)" if exp.compile == "off" else f"{exp.compile} · {exp.mode}"
    dyn = {None: "dynamic auto", True: "dynamic on", False: "dynamic off"}[exp.dynamic]
    return row, f"{dyn} · optimizer {'compiled' if exp.compile_optimizer else 'eager'}"


def sweep_matrix(experiments: list[Experiment], records: list) -> pd.DataFrame:
    """One row per setting: status, speedup, compile time, throughputs; NaN until its run finishes.

    `records` holds, per experiment, its RunRecord, the string 'waiting' or 'running'.
    """
    rows = []
    for exp, rec in zip(experiments, records):
        row, col = setting_name(exp)
        status = rec if isinstance(rec, str) else rec.status
        result = rec.result if not isinstance(rec, str) else {}
        rows.append({"row": row, "col": col, "setting": f"{row} · {col}", "status": status,
                     "speedup": result.get("speedup"), "compile_s": result.get("compile_s"),
                     "eager_samples_per_s": result.get("eager_samples_per_s"),
                     "compiled_samples_per_s": result.get("compiled_samples_per_s"),
                     "breakeven_steps": result.get("breakeven_steps"),
                     "error": first_line(rec.error.get("message")) if status == "failed" else None,
                     "run_id": None if isinstance(rec, str) else rec.id})
    frame = pd.DataFrame(rows)
    for col in ("speedup", "compile_s", "eager_samples_per_s", "compiled_samples_per_s", "breakeven_steps"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce") if not frame.empty else frame.get(col)
    return frame


def best_setting(matrix: pd.DataFrame, *, final: bool = True) -> str | None:
    """The fastest setting, and the one that pays back soonest when that is another, in a sentence."""
    done = matrix.dropna(subset=["speedup"]) if not matrix.empty else matrix
    if done.empty:
        return None
    best = done.loc[done.speedup.idxmax()]
    text = f"Fastest: **{best.setting}**, {best.speedup:.2f}x eager after {best.compile_s:.1f} s of compiling."
    paying = done.dropna(subset=["breakeven_steps"])
    if not paying.empty:
        soon = paying.loc[paying.breakeven_steps.idxmin()]
        if soon.setting != best.setting:
            text += (f" Pays back soonest: **{soon.setting}** ({soon.speedup:.2f}x, {soon.compile_s:.1f} s compile, "
                     f"break-even after {soon.breakeven_steps:,.0f} steps).")
    if final and best.speedup <= 1:
        text += " No setting beat eager here: on a small model or a CPU, compile overhead can outweigh fusion."
    return text


def env_rows(env: dict, device: str | None) -> list[tuple[str, str]]:
    """The environment a run measured on, as (what, value) rows."""
    rows = [("device", device or env.get("device") or "?"), ("torch", env.get("torch")),
            ("triton", env.get("triton") or "not installed"), ("python", env.get("python"))]
    if env.get("gpu"):
        rows += [("GPU", env["gpu"]), ("CUDA", env.get("cuda")), ("driver", env.get("driver")),
                 ("GPU memory", f"{env['gpu_memory_gib']} GiB" if env.get("gpu_memory_gib") else None),
                 ("power limit", f"{env['power_limit_w']:.0f} W" if env.get("power_limit_w") else None),
                 ("compute capability", env.get("compute_capability"))]
    rows += [("CPU", env.get("cpu")), ("CPU cores", env.get("cpu_count")), ("torch threads", env.get("torch_threads")),
             ("host", env.get("hostname"))]
    return [(k, str(v)) for k, v in rows if v is not None]
