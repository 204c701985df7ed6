"""Plain words and tables from results, runs and sweeps: what compile did, said so a workshop can read it.

No Streamlit here, so the wording is unit-tested like the charts.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from tcore import figures
from tcore.advice import inside_torch
from tcore.lab.artifacts import compile_key
from tcore.lab.scheduler import duration_words
from tcore.lab.scheduler import wait_words as _wait_words
from tcore.spec import Experiment, same_compile, settings

# The figures in the Compare page's run table and in a sweep's matrix, as stored columns (tcore.figures).
RUN_TABLE_FIGURES = ["speedup", "speedup_low", "speedup_high", "compile_s", "eager_samples_per_s", "compiled_samples_per_s", "breakeven_steps",
                     "eager_energy_j_per_step", "compiled_energy_j_per_step", "compiled_peak_pct", "compiled_idle_ms"]
SWEEP_FIGURES = ["speedup", "speedup_low", "speedup_high", "compile_s", "eager_samples_per_s", "compiled_samples_per_s", "breakeven_steps"]
# The run table: (column of RunStore.dataframe(), title with unit).
RUN_COLUMNS = [("created_at", "Started"), ("label", "Run"), ("status", "Status"), ("device", "Device"),
               *[(c, figures.column_label(c)) for c in RUN_TABLE_FIGURES], ("error_kind", "Error"), ("id", "Run id")]


def number_formats(columns: list[str]) -> dict[str, tuple[str, str]]:
    """column -> (its title with unit, its printf format), for st.column_config.NumberColumn."""
    return {c: (figures.column_label(c), figures.lookup(c)[0].fmt) for c in columns}


def first_line(text: str | None) -> str:
    """The headline of a multi-line torch message (graph-break reasons run to ten lines)."""
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "(no reason given)"


def graph_words(result: dict) -> list[str]:
    """Graphs, graph breaks and recompilations in sentences, each number saying what it counts, and the list under
    a count as long as the count: breaks are counted by place in the code (Dynamo meets one place once per frame it
    traces through it, so its own counter and log can say 2 and 3 for the same two lines)."""
    lines = []
    graphs, breaks = result.get("graph_count"), group_breaks(result.get("graph_breaks") or [])
    recompiles = result.get("recompiles") or []
    compiled_again = sum(1 for r in recompiles if r.get("frame"))  # the attempt that hit the limit compiled nothing
    if graphs is not None:
        if not breaks and not result.get("graph_break_count"):
            lines.append(f"Dynamo captured {graphs} graph{'s' if graphs != 1 else ''} with no graph breaks.")
        else:
            pieces = graphs - compiled_again
            lines.append(f"Dynamo compiled **{graphs} graph{'s' if graphs != 1 else ''}**"
                         + (f": {pieces} piece{'s' if pieces != 1 else ''} of the model between its graph breaks, "
                            f"plus {compiled_again} recompilation{'s' if compiled_again != 1 else ''} of them (below)."
                            if compiled_again and pieces > 0 else ", the pieces of the model between its graph breaks."))
    if breaks:
        lines.append(f"**{len(breaks)} graph break{'s' if len(breaks) != 1 else ''}**, counted by place in the code "
                     "(where Dynamo stopped tracing, ran that line in Python and started a new graph after it):")
    for b in breaks:
        where = f" at `{Path(b['file']).name}:{b['line']}`" if b.get("file") and b.get("line") else ""
        source = f" (`{b['source'].strip()}`)" if b.get("source") else ""
        times = f"; Dynamo met it {b['count']} times, once per frame it traced through it" if b["count"] > 1 else ""
        loop = (" (once inside a loop of the calling function, where it could not resume: it ran that function "
                "eagerly and compiled the function holding the break on its own)" if b.get("skipped_frame") else "")
        lines.append(f"- graph break{where}{source}: {first_line(b['reason'])}{times}{loop}")
    if result.get("recompile_count") is not None:
        lines.append("No recompilations." if not recompiles else
                     f"{len(recompiles)} recompilation{'s' if len(recompiles) != 1 else ''} "
                     "(a guard failed, so the frame compiled again):")
    guarded = []  # the value guards among the recompiles, explained once below the list
    for r in recompiles:
        # The attempt that hits the recompile limit is listed too; it has no frame, since nothing was compiled.
        frame = resume_words(r["frame"]) if r.get("frame") else ""
        what = f"recompile {r['compile_id']} of {frame}" if r.get("frame") else \
            f"{r['compile_id']}: the recompile limit was hit, no compile"
        if guard := value_guard(r.get("reason") or ""):
            guarded.append(guard)
            lines.append(f"- {what}: the guard `{guard['guard']}` failed (a new value, see below)")
        else:
            lines.append(f"- {what}: {_after_id(first_line(r['reason']))}")
    if guarded:
        lines.append(value_guard_words(guarded[0]))
    eager_k, compiled_k = result.get("eager_kernels_per_step"), result.get("compiled_kernels_per_step")
    if eager_k is not None and compiled_k is not None:
        lines.append(f"Kernels launched per step: {eager_k} eager, {compiled_k} compiled"
                     + (" (fusion merged them)." if compiled_k < eager_k else "."))
    if skips := result.get("cudagraph_skip_count"):
        reasons = "; ".join(first_line(r) for r in result.get("cudagraph_skip_reasons") or [])
        if result.get("device") == "cpu":  # Inductor counts a skip for each graph it would have captured
            reasons = "there are no CUDA graphs on the CPU, so reduce-overhead and max-autotune run without them here"
        lines.append(f"CUDA graphs were skipped {skips} time(s): {reasons or 'torch gave no reason'}.")
    return lines


_RESUME = re.compile(r"^torch_dynamo_resume_in_(\w+?)_at_(\d+)$")
# A guard on a Python number: "___stack0 == 0.46689173579216003   # if x.abs().mean().item() > 1e4:  # path:74 in ..."
_VALUE_GUARD = re.compile(r"^(?:\d+/\d+: )?(?P<name>___stack\d+|[\w.\[\]'\"]+) == (?P<value>-?\d+\.\d*(?:e[-+]?\d+)?)\s*"
                          r"(?:#\s*(?P<source>.*?)\s*#\s*(?P<file>\S+):(?P<line>\d+))?")


def resume_words(frame: str) -> str:
    """`forward`, or for Dynamo's resume function the code it stands for: 'the code after the break at line 74
    of `forward`'."""
    if m := _RESUME.match(frame):
        return f"the rest of `{m.group(1)}` after the break at line {m.group(2)} (Dynamo's resume function)"
    return f"`{frame}`"


def value_guard(reason: str) -> dict | None:
    """{guard, value, source, place} when a recompile's guard compared a Python number (a float Dynamo baked into
    the graph, such as what .item() returned), else None."""
    m = _VALUE_GUARD.match(first_line(reason))
    if m is None:
        return None
    place = f"{Path(m['file']).name}:{m['line']}" if m["file"] else None
    return {"guard": f"{m['name']} == {float(m['value']):.4g}", "value": m["value"], "source": (m["source"] or "").strip(),
            "place": place, "item": ".item()" in (m["source"] or "") or m["name"].startswith("___stack")}


def value_guard_words(guard: dict) -> str:
    """Why a guard on a number recompiles, and the two fixes: the .item() trap in words."""
    where = f" at `{guard['place']}`" if guard["place"] else ""
    source = f" (`{guard['source']}`)" if guard["source"] else ""
    origin = (f"the number that `.item()`{where}{source} took out of a tensor" if guard["item"] else
              f"a Python number{where}{source}")
    return (f"**Recompiled on a value nobody chose.** The guard `{guard['guard']}` checks {origin}: Dynamo compiled "
            "the code that uses it for that exact number, so each new value fails the guard and compiles again, up to "
            "the recompile limit (8 by default), after which that code runs eagerly. The value moves with the data, "
            "so in a real job this never settles. Fix: keep the value a tensor (compute with `torch.where(...)` "
            "instead of an `if` on `.item()`), or set `torch._dynamo.config.capture_scalar_outputs = True` so "
            "`.item()` stays in the graph as a symbolic value instead of a constant.")


def _after_id(reason: str) -> str:
    """'0/0: tensor 'x' size mismatch ...' -> "tensor 'x' size mismatch ..." (the id is shown already)."""
    head, sep, rest = reason.partition(": ")
    return rest if sep and "/" in head and " " not in head else reason


def baseline_words(spec: dict, device: str | None) -> str:
    """What the eager baseline is, in a sentence: its precision and, for a convolutional model, its layout.

    The layout decides what a CNN's speedup teaches: Inductor converts convolutions to channels_last on
    its own, so against NCHW eager much of the "compile speedup" is a layout change eager can have too.
    """
    import sample_models

    from tcore.spec import describe

    precision = spec.get("precision", "fp32")
    words = f"Eager baseline and compiled model both run in **{precision}**: {describe('precision', precision)}"
    if device == "cpu" and precision == "tf32":
        words += " (on this CPU it runs as fp32)"
    try:
        convolutional = sample_models.get(spec.get("model", "")).supports_channels_last
    except ValueError:
        return words
    if convolutional and spec.get("channels_last"):
        words += (" Eager runs in **channels_last**, as people tune a CNN: the speedup is what compiling adds "
                  "beyond that. Against NCHW eager it would look larger, because Inductor picks channels_last "
                  "for its convolutions on its own.")
    elif convolutional:
        words += (" Eager runs in **NCHW**: part of this speedup is the channels_last layout Inductor picks for "
                  "its convolutions on its own, which eager can have too; turn channels_last on to see what "
                  "compiling adds beyond it.")
    return words


def breakdown_words(result: dict) -> list[str]:
    """Sentences under the time-breakdown chart: the biggest changes, and how the profiled step compares with
    the timed one (the profiler adds overhead of its own, most to launch-bound steps)."""
    from tcore.breakdown import as_timed, differences

    found = result.get("breakdown") or {}
    shown = as_timed(result)
    words = []
    off = ", ".join(f"{v} {s['off_pct']:+.0f}%" for v, s in shown.items() if s["shown"] != "profiled")
    if any(s["shown"] == "withheld" for s in shown.values()):  # said first: the bars are missing because of it
        words.append(f"**No bars: the profiled steps ran far off the timed ones** ({off}). The profiler's own overhead "
                     "(largest on the CPU, where it records every op) changed the steps it measured, so their split "
                     "would contradict the speedup above; the timed figures stand.")
    elif off:
        words.append(f"**The bars are scaled to the timed steps.** The profiled steps ran off the timed ones ({off}: "
                     "the profiler's own overhead), so each bar keeps the profiler's shares but takes the length of the "
                     "timed median step, which the speedup above uses.")
    if ("eager" in found and "compiled" in found and all(shown[v]["ms"] for v in ("eager", "compiled"))
            and (changed := differences({**found["eager"], "ms": shown["eager"]["ms"]},
                                        {**found["compiled"], "ms": shown["compiled"]["ms"]}))):
        words.append(f"Biggest changes, eager → compiled: {changed}.")
    for variant, b in found.items():
        timed = result.get(f"{variant}_latency_ms_p50")
        if b.get("profiled_idle_ms") is not None:
            busy = sum(v for k, v in b["ms"].items() if k != "idle")
            words.append(f"{variant.capitalize()}: {busy:.2f} ms of kernels per step, measured by the profiler; idle "
                         f"is the rest of the {timed:.2f} ms timed step. Recording kernels slows their launches, "
                         f"so the profiled steps ({b['step_ms']:.2f} ms) showed {b['profiled_idle_ms']:.2f} ms of "
                         "gaps: the timed step is the truth.")
        elif timed:
            off = (b["step_ms"] - timed) / timed * 100
            words.append(f"{variant.capitalize()}: {b['steps']} profiled steps of {b['step_ms']:.2f} ms on average "
                         f"against {timed:.2f} ms timed ({off:+.0f}%).")
        if b.get("overlap_ms", 0) > 0.02 * b["step_ms"]:
            words.append(f"{variant.capitalize()}: kernels overlapped on several streams for {b['overlap_ms']:.2f} ms "
                         "per step, so the categories add up to more than the busy time.")
    return words


def peak_words(result: dict, gpu: str | None) -> str:
    """How much of the GPU a step uses: achieved compute against its peak, and the weight-read floor on bandwidth."""
    from tcore.peaks import lookup

    peak = lookup(gpu)
    if peak is None:
        return f"Share of peak: n/a, {result.get('unavailable', {}).get('eager_peak_pct') or 'unknown device'}."
    parts = []
    for variant in result.get("variants", ("eager",)):
        pct, tflops = result.get(f"{variant}_peak_pct"), result.get(f"{variant}_tflops")
        if pct is not None and tflops is not None:
            bw = result.get(f"{variant}_weights_bw_pct")
            parts.append(f"{variant} {tflops:.3g} TFLOP/s = **{pct:.1f}%**" +
                         (f", weight reads alone {bw:.1f}% of bandwidth" if bw is not None else ""))
    return (f"Against the {peak.name}'s dense peak: " + "; ".join(parts) + ". A step far below peak is "
            "bound by memory traffic or overhead, which fusion and CUDA graphs address.") if parts else ""


def correctness_words(result: dict, precision: str) -> tuple[bool | None, str]:
    """(ok, sentence) about the compiled output matching eager; ok is None when nothing was compared."""
    ok = result.get("correctness_ok")
    if ok is None:
        return None, "No correctness check: nothing was compiled, so there is nothing to compare with eager."
    rel, tol = result["correctness_rel_diff"], result["correctness_tolerance"]
    diff = f"largest difference {rel:.2g} of the output's scale, {'within' if ok else 'above'} the {precision} " \
           f"tolerance of {tol:g}"
    return ok, ("Compiled output matches eager: " if ok else "Compiled output DIFFERS from eager: ") + diff + "."


def headline(result: dict) -> dict[str, tuple[str, str | None]]:
    """Figure -> (value with unit, why n/a) for the run-level figures of a summary (tcore.figures.SUMMARY_RUN)."""
    return {key: (figures.text(result, key, reason=False),
                  (result.get("unavailable") or {}).get(key) if result.get(key) is None else None)
            for key in figures.SUMMARY_RUN}


# What fits a metric tile a third of the Run page's result column wide (about 145 px at a 1280-px window,
# measured in Chromium): a value in Streamlit's 36-px figures, a label in 14-px text beside its help icon.
TILE_VALUE_CHARS = 9
TILE_LABEL_CHARS = 19


def headline_tiles(result: dict) -> list[list[dict[str, Any]]]:
    """The Run page's metric tiles, two rows: speedup, compile time, break-even; then eager and compiled throughput.

    Each tile is st.metric's arguments. A unit longer than a letter goes in the label ("Break-even (steps)"),
    so a value like 59391 is not clipped; the speedup's interval is its delta, orange when noisy, and its help
    says how the figure is made.
    """
    speedup, spread = result.get("speedup"), speedup_range(result)
    top = [{"label": "Speedup", "value": figures.text(result, "speedup", reason=False), "delta": spread,
            "delta_color": "orange" if figures.noise_reasons(result) else "off", "delta_arrow": "off",
            "help": figures.speedup_words(result) or figures.RUN_FIGURES["speedup"].means}]
    for name in ("compile_s", "breakeven_steps"):
        fig = figures.RUN_FIGURES[name]
        short = len(fig.unit) <= 1
        top.append({"label": fig.title if short else fig.label, "value": figures.text(result, name, unit=short,
                                                                                     reason=False), "help": fig.means})
    bottom = [{"label": f"{variant.capitalize()} {figures.VARIANT_FIGURES['samples_per_s'].unit}",
               "value": figures.text(result, f"{variant}_samples_per_s", unit=False, reason=False),
               "delta": f"{(speedup - 1) * 100:+.0f}% vs eager" if speedup and variant == "compiled" else None,
               "help": figures.VARIANT_FIGURES["samples_per_s"].means} for variant in ("eager", "compiled")]
    return [top, bottom]


def speedup_range(result: dict) -> str | None:
    """'97%: 1.33–1.44 x': the paired speedup's interval, shown under the headline; a run without one (a single
    round) shows its rounds' range."""
    lo, hi, cover = result.get("speedup_low"), result.get("speedup_high"), result.get("speedup_confidence_pct")
    if lo is not None and hi is not None and cover is not None:
        return f"{cover:.0f}%: {lo:.2f}–{hi:.2f} x"
    lo, hi = result.get("speedup_min"), result.get("speedup_max")
    return None if lo is None or hi is None else f"rounds: {lo:.2f}–{hi:.2f} x"


def noise_words(result: dict) -> str | None:
    """Why the headline is not solid, in a sentence a page shows beside it; None for a steady run."""
    reasons = figures.noise_reasons(result)
    if not reasons:
        return None
    said = "; ".join(reasons)
    return ("**Noisy: read these figures as rough, not solid.** " + said[0].upper() + said[1:] + ". Run it again with "
            "nothing else running on this machine, or time it for longer (Advanced › timed seconds).")


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


# The "Dynamic shapes" choices as the Run and Sweep pages name them, and the sweep matrix too.
DYNAMIC_NAMES = {None: "auto", True: "always dynamic", False: "always static"}

# How a sweep's column names each setting that can vary across it besides the scope and mode.
_AXIS_WORDS = {
    "precision": str,
    "channels_last": lambda v: "channels_last" if v else "NCHW",
    "dynamic": {**DYNAMIC_NAMES, None: "dynamic auto"}.get,  # as the knob names them; "auto" alone says too little
    "compile_optimizer": lambda v: f"optimizer {'compiled' if v else 'eager'}",
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
                     "error": first_line(rec.error.get("message")) if status in ("failed", "cancelled") else "",
                     "run_id": "" if isinstance(rec, str) else rec.id})
    frame = pd.DataFrame(rows)
    for col in SWEEP_FIGURES:
        frame[col] = pd.to_numeric(frame[col], errors="coerce") if not frame.empty else frame.get(col)
    return frame


def best_setting(matrix: pd.DataFrame, *, final: bool = True) -> str | None:
    """The fastest setting, and the one that pays back soonest when that is another, in a sentence."""
    done = matrix.dropna(subset=["speedup"]) if not matrix.empty else matrix
    if done.empty:
        return None
    best = done.loc[done.speedup.idxmax()]
    # The paired interval where the runs have one; older matrices and records without it, the rounds' range.
    paired = pd.notna(best.get("speedup_low")) and pd.notna(best.get("speedup_high"))
    low, high, what = ("speedup_low", "speedup_high", "interval") if paired else ("speedup_min", "speedup_max", "rounds")
    ranged = pd.notna(best.get(low)) and pd.notna(best.get(high))
    spread = f" ({what} {best[low]:.2f}–{best[high]:.2f}x)" if ranged else ""
    text = f"Fastest: **{best.setting}**, {best.speedup:.2f}x eager{spread} after {best.compile_s:.1f} s of compiling."
    # Another setting whose interval reaches this one's is not told apart by these runs.
    rivals = done[(done.setting != best.setting) & (done[high] >= best[low])] if ranged else done[:0]
    if not rivals.empty:
        names = ", ".join(f"**{s}**" for s in rivals.setting)
        text += (f" These runs **cannot tell it apart** from {names}: their {'intervals' if paired else 'rounds'} "
                 "overlap. Time them for longer before picking one.")
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
        which = f"GPU {env['gpu_index']}: " if env.get("gpu_index") is not None else ""
        rows += [("GPU", f"{which}{env['gpu']}"), ("GPU UUID", env.get("gpu_uuid")), ("CUDA", env.get("cuda")), ("driver", env.get("driver")),
                 ("GPU memory", f"{env['gpu_memory_gib']} GiB" if env.get("gpu_memory_gib") else None),
                 ("power limit", f"{env['power_limit_w']:.0f} W" if env.get("power_limit_w") else None),
                 ("compute capability", env.get("compute_capability"))]
    rows += [("CPU", env.get("cpu")), ("CPU cores", env.get("cpu_count")), ("torch threads", env.get("torch_threads")),
             ("host", env.get("hostname"))]
    return [(k, str(v)) for k, v in rows if v is not None]


def duration(seconds: float | None) -> str:
    """'45 s', '3 min 05 s', '1 h 02 min': a wait or an elapsed time, for people."""
    return duration_words(seconds)


def queue_words(position: int | None, wait, waited_s: float | None) -> str:
    """'#2 in the queue · starts in about 40 s · waited 12 s': when it starts first; wait_reason(wait) says why."""
    place = f"#{position} in the queue" if position else "about to start"
    return f"{place} · {wait_words(wait)} · waited {duration(waited_s)}"


def wait_words(wait) -> str:
    """When a queued run should start (tcore.lab.scheduler.Wait), in a few words, never 'now' behind a long run."""
    return _wait_words(wait)[0]


def wait_reason(wait) -> str:
    """Where wait_words' figure comes from, and the latest the run can start: for a tooltip."""
    return _wait_words(wait)[1]


# --- Why is it slow ------------------------------------------------------------------------------

def group_breaks(breaks: list[dict]) -> list[dict]:
    """One entry per place and reason: Dynamo reports a break once per frame it hit it in."""
    grouped: dict[tuple, dict] = {}
    for b in breaks:
        key = (first_line(b.get("reason")), b.get("file"), b.get("line"))
        if key not in grouped:
            grouped[key] = {**b, "reason": key[0], "count": 0, "skipped_frame": False}
        grouped[key]["count"] += b.get("count") or 0
        grouped[key]["skipped_frame"] |= bool(b.get("skipped_frame"))
    return list(grouped.values())


def break_title(b: dict) -> str:
    """'`captioner.py:74`: Unsupported Tensor.item() call ... (hit 2 times)'."""
    where = f"`{Path(b['file']).name}:{b['line']}`: " if b.get("file") and b.get("line") else ""
    times = f"hit {b['count']} time{'s' if b['count'] != 1 else ''}" if b.get("count") else ""
    return f"{where}{b['reason']}" + (f" ({times})" if times else "")


def break_pair_words(clean: dict, broken: dict) -> str:
    """What the break changed, in a sentence: graphs, share of the throughput, compile time."""
    graphs = f"Dynamo captured **{broken.get('graph_count')} graphs** instead of {clean.get('graph_count')}"
    speed = broken.get("compiled_samples_per_s"), clean.get("compiled_samples_per_s")
    share = f"; the model runs at **{speed[0] / speed[1]:.0%}** of the throughput" if all(speed) else ""
    times = broken.get("compile_s"), clean.get("compile_s")
    took = f"; compiling took {times[0]:.1f} s instead of {times[1]:.1f} s" if None not in times else ""
    return f"With the break, {graphs}{share}{took}."


# Breaks PyTorch makes on purpose, by the file they are in, and what they mean for the user.
TORCH_BREAKS = {
    "torch/optim/optimizer.py": (
        "PyTorch breaks the graph here on purpose, before every optimizer step, so that the update compiles as "
        "its own no-grad graph that Inductor can do in place instead of allocating a copy of every parameter "
        "(pytorch/pytorch#104053). Nothing to change in your code: the update itself is still compiled."),
}


def torch_break_words(b: dict) -> str | None:
    """For a break inside PyTorch itself: that it is not in the user's code, and what (if anything) to do."""
    where = inside_torch(b.get("file"))
    if where is None:
        return None
    return TORCH_BREAKS.get(where) or (
        f"This break is inside PyTorch itself ({where}), not in your code: torch's hint about removing or "
        "rewriting the line is meant for code you own. Usually there is nothing to change; a newer PyTorch may "
        "trace through it, or you can compile a smaller region that leaves that call outside.")


SKIPPED_FRAME_WORDS = ("Dynamo could not resume after this break (it sits inside a loop), so it ran the **whole "
                       "enclosing function eagerly**: nothing in it was compiled.")

# The ways a varying shape can be compiled, run side by side on the Diagnose page.
# name -> (title, the Experiment fields that make it, what it costs)
STRATEGIES = {
    "static": ("dynamic=False", dict(dynamic=False, shape_remedy="none"),
               "Always static: every new size compiles again, until the recompile limit; past it the function "
               "runs eagerly. Costs one compile per shape, then the speedup for new shapes."),
    "automatic": ("dynamic=None (default)", dict(dynamic=None, shape_remedy="none"),
                  "Static first; on the first size change it recompiles once with that size symbolic. Costs "
                  "two compiles, and the symbolic graph may be a little slower."),
    "dynamic": ("dynamic=True", dict(dynamic=True, shape_remedy="none"),
                "Symbolic sizes from the first compile: one compile for every size. Costs some static "
                "optimisations (and, on a GPU, CUDA graphs per size)."),
    "mark_dynamic": ("mark_dynamic", dict(dynamic=False, shape_remedy="mark_dynamic"),
                     "The varying dimension is marked dynamic before the first call, everything else stays "
                     "static: one compile. Costs a line of code where the inputs are made."),
    "buckets": ("buckets", dict(dynamic=False, shape_remedy="buckets"),
                "Inputs are padded up to a few fixed sizes, each compiled during warm-up: one compile per "
                "bucket, none later. Costs the work spent on padding."),
}


def strategy_of(spec: dict) -> str | None:
    """Which of STRATEGIES a run with a shape schedule used; None for a run with one fixed shape."""
    if not spec.get("shape_count"):
        return None
    remedy = spec.get("shape_remedy", "none")
    if remedy != "none":
        return remedy
    return {False: "static", None: "automatic", True: "dynamic"}[spec.get("dynamic")]


def four_way(records: list, base: dict) -> dict[tuple[str, str], Any]:
    """(scope, "cold" | "warm") -> the newest finished run of each, from `records` (newest first).

    Cold is a run with fresh caches (or artifacts that could not be loaded); warm is one that loaded
    compile artifacts. Only runs that compile what `base` (the four-way's own experiment) compiles, but
    for the scope, count (tcore.spec.same_compile): an aot_eager run, a shape schedule or another batch
    is another compile and would compare unlike with like.
    """
    def temperature(rec) -> str | None:
        cache, loaded = rec.spec.get("cache", "cold"), rec.result.get("cache_artifacts")
        if cache == "cold" or (cache == "artifacts" and loaded != "loaded"):
            return "cold"
        return "warm" if cache == "artifacts" else None  # the local "warm" cache is not a portable warm start

    cells: dict[tuple[str, str], Any] = {}
    for rec in records:
        if (rec.status == "finished" and rec.spec.get("compile") in ("whole", "regional")
                and rec.result.get("compile_s") is not None and same_compile(rec.spec, base, varying={"compile"})):
            key = (rec.spec["compile"], temperature(rec))
            if key[1] and key not in cells:
                cells[key] = rec
    return cells


def cache_words(result: dict, spec: dict) -> str | None:
    """What the compile caches did in a run, in a sentence; None when nothing was compiled."""
    if result.get("compile_s") is None:
        return None
    cache = spec.get("cache", "cold")
    kind = {"cold": "cold (fresh caches)", "warm": "warm (the local cache of earlier warm runs)",
            "artifacts": {"loaded": "warm: compile artifacts from an earlier run were loaded",
                          "cold": "artifacts asked for but not loaded, so it compiled cold"}.get(
                              result.get("cache_artifacts"), "artifacts")}[cache]
    hits = (f"FX graph cache {result.get('fx_graph_cache_hits', 0)} hits / "
            f"{result.get('fx_graph_cache_misses', 0)} misses, AOT autograd cache "
            f"{result.get('aot_autograd_cache_hits', 0)} hits")
    saved = result.get("cache_artifacts_bytes")
    keep = (f" It saved {saved / 1e6:.1f} MB of compile artifacts: a run of these settings with cache=artifacts "
            "starts warm from them." if saved else "")
    return f"Compile cache: {kind}; {hits}.{keep}"


def settings_key(rec) -> str:
    """What a run compiled, whatever its cache mode and timing (tcore.caches.compile_key)."""
    return compile_key(rec.spec, rec.device or rec.result.get("device") or "cpu")


def same_settings(rec, records: list) -> list:
    """The finished compiled runs among `records` (newest first) that compiled what `rec` did, `rec` included."""
    key = settings_key(rec)
    return [r for r in records if r.status == "finished" and r.result.get("compile_s") is not None
            and settings_key(r) == key]


CACHE_COLUMNS = ["id", "label", "settings", "cache", "cache_artifacts", "compile_s", "fx_graph_cache_hits",
                 "fx_graph_cache_misses", "aot_autograd_cache_hits"]


def cache_frame(records: list) -> pd.DataFrame:
    """One row per run for diagnose_charts.cold_warm_chart: its settings (a key and the label) and cache figures."""
    return pd.DataFrame([{"id": r.id, "label": r.label, "settings": settings_key(r), "cache": r.spec.get("cache"),
                          **{c: r.result.get(c) for c in CACHE_COLUMNS[4:]}} for r in records], columns=CACHE_COLUMNS)


# What makes two runs of a schedule comparable, whatever strategy each used.
_SCHEDULE_FIELDS = ("model", "preset", "batch_size", "precision", "task", "compile", "backend", "shape_count",
                    "shape_order", "recompile_limit")


def strategy_runs(records: list) -> dict[str, Any]:
    """strategy -> its newest finished run, among runs (newest first) with the newest schedule run's settings."""
    done = [r for r in records if r.status == "finished" and strategy_of(r.spec)]
    out: dict[str, Any] = {}
    for rec in done:
        if all(rec.spec.get(k) == done[0].spec.get(k) for k in _SCHEDULE_FIELDS):
            out.setdefault(strategy_of(rec.spec), rec)
    return {name: out[name] for name in STRATEGIES if name in out}


def counterpart(rec, records: list, **changes):
    """The newest finished run among `records` whose settings (cache included) are `rec`'s with `changes`."""
    want = settings({**rec.spec, **changes})
    return next((r for r in records if r.status == "finished" and r.id != rec.id and settings(r.spec) == want), None)
