"""Plotly figures of one run: pure functions from a result dict and its power trace to go.Figure.

No Streamlit here, so every figure can be unit-tested. A figure that could not be measured is drawn as an empty chart
that says "n/a" and why (the result's `unavailable` reason), never as a guess. Charts across runs are in
ui.charts.compare_charts, the Diagnose page's in ui.charts.diagnose_charts; they share ui.charts.style.
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tcore.experiment.protocol import PHASE_TITLES, PHASES
from tcore.figures import COMPILE_PHASES, VARIANT_FIGURES
from tcore.figures.breakdown import CATEGORIES, as_timed, shown_ms
from tcore.figures.breakdown import (
    withheld_words as profiler_withheld,  # the command line withholds the same
)
from ui.charts.style import (
    CATEGORY_COLORS,
    COMPILE_PHASE_COLORS,
    OTHER_PHASE_COLOR,
    PHASE_COLORS,
    PHASE_LABEL_MIN_SHARE,
    VARIANTS,
    bar_label,
    legend_below,
    not_available,
    number_label,
    style,
    wrap,
)


def metric_info(suffix: str) -> tuple[str, str, str]:
    """(title, unit, printf format) of a per-variant figure, from tcore.figures."""
    fig = VARIANT_FIGURES[suffix]
    return fig.title, fig.unit, fig.fmt


def _variants(result: dict) -> list[tuple[str, str, str]]:
    """The variants this run measured: eager always, compiled only when something was compiled."""
    return [v for v in VARIANTS if v[0] in result.get("variants", ("eager",))]


def _reason(result: dict, keys: list[str]) -> str | None:
    unavailable = result.get("unavailable", {})
    return next((unavailable[k] for k in keys if unavailable.get(k)), None)


def variant_bar(result: dict, suffix: str) -> go.Figure:
    """Eager vs compiled bars of one per-variant figure (e.g. 'peak_mem_gib'), labelled with units."""
    title, unit, pattern = metric_info(suffix)
    variants = _variants(result)
    values = [result.get(f"{v}_{suffix}") for v, _, _ in variants]
    chart_title = f"{title} ({unit})"
    if all(v is None for v in values):
        return not_available(chart_title, _reason(result, [f"{v}_{suffix}" for v, _, _ in variants]))
    fig = go.Figure(go.Bar(
        x=[name for _, name, _ in variants], y=values, marker_color=[c for _, _, c in variants],
        text=[bar_label(pattern % v, unit) if v is not None else "n/a" for v in values], textposition="auto"))
    fig.update_yaxes(title_text=f"{title} ({unit})", rangemode="tozero")
    return style(fig, chart_title, f"{VARIANT_FIGURES[suffix].better} is better")


def throughput_chart(result: dict, key: str = "samples_per_s") -> go.Figure:
    """Throughput per variant, `key` samples/s or (a generate run) tokens/s of the whole batch; whiskers span the
    slowest to the fastest timed round."""
    variants = _variants(result)
    title = VARIANT_FIGURES[key].label
    xs, ys, lo, hi, text = [], [], [], [], []
    for v, name, _ in variants:
        steps, samples = result.get(f"{v}_steps_per_s"), result.get(f"{v}_{key}")
        if steps is None or samples is None:
            return not_available(title, _reason(result, [f"{v}_{key}"]))
        per_step = samples / steps  # the batch size: samples/s min-max are the steps/s ones scaled by it
        xs.append(name)
        ys.append(samples)
        lo.append(samples - result.get(f"{v}_steps_per_s_min", steps) * per_step)
        hi.append(result.get(f"{v}_steps_per_s_max", steps) * per_step - samples)
        text.append(f"{samples:.1f}")  # the unit is in the title: "3184.6 samples/s" is wider than a narrow bar
    # The values sit above each whisker's top, not on the bar: a whisker runs up the bar's middle, through any
    # label inside it, and a noisy run's reaches the foot.
    fig = go.Figure(go.Bar(
        x=xs, y=ys, marker_color=[c for _, _, c in variants], text=text, textposition="none",
        error_y=dict(type="data", symmetric=False, array=hi, arrayminus=lo, color="#333", thickness=1.5)))
    for x, y, up, label in zip(xs, ys, hi, text):
        fig.add_annotation(x=x, y=y + up, text=label, showarrow=False, yanchor="bottom", yshift=3)
    fig.update_yaxes(title_text=title, range=[0, max(y + up for y, up in zip(ys, hi)) * 1.15])
    batch = "every sequence of the batch · " if key == "tokens_per_s" else ""  # not one sequence's speed
    return style(fig, title, f"{batch}higher is better · whiskers: slowest to fastest round")


def latency_chart(result: dict) -> go.Figure:
    """Step latency p50 and p95, eager vs compiled, in ms."""
    variants = _variants(result)
    if all(result.get(f"{v}_latency_ms_p50") is None for v, _, _ in variants):
        return not_available("Step latency (ms)", _reason(result, ["eager_latency_ms_p50"]))
    fig = go.Figure()
    for v, name, color in variants:
        values = [result.get(f"{v}_latency_ms_p50"), result.get(f"{v}_latency_ms_p95")]
        fig.add_bar(name=name, x=["p50 (median)", "p95"], y=values, marker_color=color,
                    text=[number_label(x) for x in values], textposition="auto", cliponaxis=False)
    fig.update_yaxes(title_text="Step latency (ms)", rangemode="tozero")
    style(fig, "Step latency (ms)", "lower is better · p95: 1 step in 20 is slower than this")
    fig.update_layout(barmode="group", bargap=0.2)  # four bars in half a column: as wide as their numbers
    return legend_below(fig)


def energy_chart(result: dict) -> go.Figure:
    """Mean power (W) beside energy per step (J): compiled code may draw more power yet spend less energy."""
    variants = _variants(result)
    keys = [f"{v}_{s}" for v, _, _ in variants for s in ("power_w", "energy_j_per_step")]
    if all(result.get(k) is None for k in keys):
        return not_available("Power and energy per step", _reason(result, keys))
    # Each panel titled above it, not along its y axis (in half a column the right panel's axis title lands on
    # the left panel's bars), and the variants named in a legend: two names under each narrow panel collide.
    panels = ("power_w", "energy_j_per_step")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=[wrap(f"{metric_info(s)[0]} ({metric_info(s)[1]})", 14) for s in panels])
    for col, suffix in enumerate(panels, start=1):
        _, unit, pattern = metric_info(suffix)
        for v, name, color in variants:
            x = result.get(f"{v}_{suffix}")
            fig.add_bar(x=[name], y=[x], name=name, legendgroup=name, showlegend=col == 1, marker_color=color,
                        text=[pattern % x if x is not None else "n/a"], textposition="auto", row=1, col=col)
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
    fig.update_xaxes(showticklabels=False)
    fig.update_annotations(font_size=13, yshift=4)
    style(fig, "Power and energy per step",
           "energy: lower is better · compiled code may draw more power yet spend less energy per step")
    fig.update_layout(margin_t=fig.layout.margin.t + 36, bargap=0.15)  # room for two-line panel titles
    return legend_below(fig)


def compile_phases_chart(result: dict) -> go.Figure:
    """Compile time as one stacked bar: each compiler phase, then what no phase timer covered."""
    total = result.get("compile_s")
    if total is None:
        return not_available("Compile time by phase (s)", _reason(result, ["compile_s"]))
    phases = result.get("compile_phases_s") or {}
    parts = [(title, phases.get(key), color)
             for (key, title), color in zip(COMPILE_PHASES.items(), COMPILE_PHASE_COLORS) if phases.get(key)]
    # The phase timers cover Dynamo and the compiler; the rest of the first call (running the step,
    # guards, Python) is compile_s minus their sum. Shown only when positive: timers can overlap.
    rest = total - sum(v for v in phases.values() if v)
    if rest > 0.005:
        parts.append(("Not in a phase timer (first step, guards, Python)", rest, OTHER_PHASE_COLOR))
    span = max(total, sum(seconds for _, seconds, _ in parts))
    fig = go.Figure()
    for title, seconds, color in parts:
        # A narrow segment's label would print over its neighbour's: the legend gives every phase's seconds.
        fig.add_bar(name=f"{title}: {seconds:.2f} s", y=["compile"], x=[seconds], orientation="h", marker_color=color,
                    text=f"{seconds:.2f} s" if seconds >= PHASE_LABEL_MIN_SHARE * span else "",
                    textposition="inside", insidetextanchor="middle",
                    hovertemplate=f"{title}: %{{x:.2f}} s<extra></extra>")
    fig.update_xaxes(title_text="Compile time (s)", rangemode="tozero")
    fig.update_yaxes(visible=False)
    style(fig, f"Compile time by phase: {total:.1f} s in all",
           "the first compiled call, minus one eager step; phases summed over every compiled graph", height=260)
    fig.update_layout(barmode="stack")
    return legend_below(fig)


def power_trace_chart(samples: list[list], *, title: str = "Power over the run, by phase",
                      x_title: str = "Time since the worker started (s)") -> go.Figure:
    """Watts over time, one coloured line per phase; utilisation (%) on a second axis when known.

    `samples` is [[t_s, watts, phase, util_pct], ...] as the worker samples it (the run's power trace).
    """
    if not samples:
        return not_available(title, "no power samples were recorded")
    frame = pd.DataFrame(samples, columns=["t_s", "watts", "phase", "util_pct"])
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    order = ["idle", *PHASES] + sorted(set(frame.phase) - {"idle", *PHASES})
    for phase in order:
        rows = frame.index[frame.phase == phase]
        if rows.empty:
            continue
        # Take in the next phase's first sample, so the line runs on without a gap.
        part = frame.loc[rows.min(): min(rows.max() + 1, len(frame) - 1)]
        fig.add_scatter(x=part.t_s, y=part.watts, mode="lines", name=PHASE_TITLES.get(phase, phase),
                        line=dict(color=PHASE_COLORS.get(phase, "#555"), width=2),
                        hovertemplate="%{x:.1f} s: %{y:.0f} W<extra>" + PHASE_TITLES.get(phase, phase) + "</extra>")
    has_util = frame.util_pct.notna().any()
    if has_util:
        fig.add_scatter(x=frame.t_s, y=frame.util_pct, mode="lines", name="Utilisation (%)", secondary_y=True,
                        line=dict(color="#999", width=1, dash="dot"), hovertemplate="%{y:.0f} %<extra></extra>")
        fig.update_yaxes(title_text="Utilisation (%)", range=[0, 105], tickvals=[0, 25, 50, 75, 100],
                         secondary_y=True, showgrid=False)
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text="Power (W)", rangemode="tozero", secondary_y=False)
    style(fig, title, height=420)  # taller: the legend below takes a row per phase (plotly aligns names in columns)
    return legend_below(fig)  # seven phase names do not fit beside the title


def breakdown_chart(rows: list[tuple[str, dict[str, float]]], *, title: str = "Where the time of a step goes",
                    subtitle: str = "") -> go.Figure:
    """Stacked horizontal bars, one per (name, {category: ms per step}): the categories plus the idle make a step."""
    fig = go.Figure()
    names = [name for name, _ in rows]
    for key, (label, what) in CATEGORIES.items():
        values = [ms.get(key) or 0.0 for _, ms in rows]
        if not any(values):
            continue
        fig.add_bar(y=names, x=values, name=label, orientation="h", marker_color=CATEGORY_COLORS[key],
                    text=[f"{v:.2f}" if v >= 0.1 * max(sum(m.values()) for _, m in rows) else "" for v in values],
                    textposition="inside", hovertemplate=f"{label}: %{{x:.3f}} ms<br><sup>{what}</sup><extra></extra>")
    fig.update_layout(barmode="stack")
    fig.update_xaxes(rangemode="tozero", ticksuffix=" ms")  # the unit on the ticks: the legend sits below the axis
    fig.update_yaxes(autorange="reversed")
    style(fig, title, subtitle, height=max(230, 150 + 55 * len(rows)))
    return legend_below(fig)


def variant_breakdown_chart(result: dict) -> go.Figure:
    """Eager against compiled, from one run's stored breakdown; 'n/a' with the reason when it was not profiled."""
    shown = as_timed(result)
    if withheld := profiler_withheld(shown):
        return not_available("Where the time of a step goes", withheld)
    rows = [(label, shown[v]["ms"]) for v, label, _ in _variants(result) if v in shown]
    if not rows:
        reason = (result.get("unavailable") or {}).get("eager_profiled_step_ms") or \
            "this run was stored before Compile Lab profiled steps"
        return not_available("Where the time of a step goes", reason)
    source = next(iter(result["breakdown"].values()))["source"]
    if any(s["shown"] == "scaled" for s in shown.values()):
        return breakdown_chart(rows, subtitle=f"ms per timed step; shares from the profiler's {source}, scaled "
                                              "(the profiler slowed its steps)")
    return breakdown_chart(rows, subtitle=f"ms per step, from the profiler's {source}; idle is time between them")



def class_chart(result: dict, grown: list[str] = ()) -> go.Figure:
    """Eager and compiled side by side per class of kernels (and the idle), in ms per step as "Where the time goes"
    draws them; the classes in `grown` (tcore.analysis.slower) are marked."""
    bars = shown_ms(result)
    title = "Each class, eager vs compiled"
    if "eager" not in bars or "compiled" not in bars:
        return not_available(title, profiler_withheld(as_timed(result)) or "this run has no eager and compiled profile")
    keys = [k for k in CATEGORIES if bars["eager"].get(k) or bars["compiled"].get(k)]
    labels = [CATEGORIES[k][0] + (" ▲" if k in grown else "") for k in keys]
    fig = go.Figure()
    for variant, name, color in VARIANTS:
        values = [bars[variant].get(k, 0.0) for k in keys]
        fig.add_bar(x=labels, y=values, name=name, marker_color=color, text=[f"{v:.2f}" for v in values],
                    textposition="outside", hovertemplate=f"{name}, %{{x}}: %{{y:.3f}} ms<extra></extra>")
    fig.update_layout(barmode="group")
    fig.update_yaxes(rangemode="tozero", ticksuffix=" ms")
    style(fig, title, "ms per step; ▲ costs compiled more" if grown else "ms per step")
    return legend_below(fig)
