"""Plotly figures across runs: the Compare page's bars per run, compile time against speedup, where the time
of a step goes in several runs, and a sweep's speedup per setting. Pure functions, like ui.charts.run_charts."""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tcore import figures
from tcore.figures import VARIANT_FIGURES
from tcore.figures.breakdown import as_timed
from ui.charts.run_charts import breakdown_chart, metric_info, profiler_withheld
from ui.charts.style import (
    COMPILED_COLOR,
    VARIANTS,
    bars_height,
    chart_text,
    legend_below,
    not_available,
    number_label,
    style,
)


def run_names(frame: pd.DataFrame, *, wrap: bool = False) -> pd.Series:
    """A readable, unique name per run: its label plus the end of its id (labels repeat across runs).

    wrap: break after the model part ('captioner/tiny bs8 fp32 inference'), for chart axes.
    """
    return pd.Series([run_name(label, run_id, wrap=wrap) for label, run_id in zip(frame["label"], frame["id"])],
                     index=frame.index, dtype=object)


def run_name(label: str, run_id: str, *, wrap: bool = False) -> str:
    """One run's name as run_names gives it: 'captioner/tiny bs8 fp32 inference, whole · 3f9a1c'. Wrapped (for a
    chart, whose text plotly reads as markup), the label is written as typed (chart_text)."""
    return (chart_text(label).replace(", ", "<br>", 1) if wrap else label) + " · " + run_id[-6:]


def compare_bars(frame: pd.DataFrame, column: str, title: str, unit: str, *,
                 reason: str | None = None) -> go.Figure:
    """One horizontal bar per run of a run-level figure (e.g. compile_s)."""
    values = pd.to_numeric(frame.get(column), errors="coerce") if column in frame else pd.Series(dtype=float)
    if values.isna().all():
        return not_available(f"{title} ({unit})", reason)
    names = run_names(frame, wrap=True)
    fig = go.Figure(go.Bar(y=names, x=values, orientation="h", marker_color=COMPILED_COLOR,
                           text=[number_label(v) for v in values],
                           textposition="auto"))
    fig.update_xaxes(title_text=f"{title} ({unit})", rangemode="tozero")
    fig.update_yaxes(autorange="reversed")
    return style(fig, f"{title} ({unit})", "lower is better", height=bars_height(len(frame)))


def compare_variants(frame: pd.DataFrame, suffix: str, *, reason: str | None = None) -> go.Figure:
    """Eager vs compiled of one per-variant figure (e.g. 'samples_per_s'), one pair of bars per run.

    One panel per model, each on its own scale: a sample (or a step) of Flux and one of the captioner are
    different work, and on one axis the ~200 samples/s of the one would be a sliver beside ~4,700 of the other.
    """
    title, unit, pattern = metric_info(suffix)
    names = run_names(frame, wrap=True)
    models = (frame["model"] if "model" in frame else frame["label"].str.split("/").str[0]).map(chart_text)
    order = list(dict.fromkeys(models))
    values = {v: pd.to_numeric(frame[f"{v}_{suffix}"], errors="coerce") if f"{v}_{suffix}" in frame
              else pd.Series([math.nan] * len(frame), index=frame.index) for v, _, _ in VARIANTS}
    shown = [(v, name, color) for v, name, color in VARIANTS if values[v].notna().any()]
    if not shown:
        return not_available(f"{title} ({unit})", reason)
    sizes = [int((models == m).sum()) for m in order]
    height = bars_height(len(frame), 2) + 60 * (len(order) - 1)
    fig = make_subplots(rows=len(order), cols=1, row_heights=sizes, subplot_titles=order if len(order) > 1 else None,
                        vertical_spacing=min(70 / (height - 130), 0.3) if len(order) > 1 else 0)  # ~70 px: ticks, title
    for row, model in enumerate(order, start=1):
        mine = (models == model).to_numpy()
        for v, name, color in shown:
            xs = values[v][mine]
            fig.add_bar(name=name, y=names[mine], x=xs, orientation="h", marker_color=color, legendgroup=name,
                        showlegend=row == 1, text=[pattern % x if not math.isnan(x) else "n/a" for x in xs],
                        textposition="auto", row=row, col=1)
        fig.update_xaxes(rangemode="tozero", row=row, col=1)
        fig.update_yaxes(autorange="reversed", row=row, col=1)
    fig.update_xaxes(title_text=f"{title} ({unit})", row=len(order), col=1)
    fig.update_annotations(font_size=13, xanchor="left", x=0, yshift=2)
    # Plotly draws nothing, not even a label, for a missing bar: say what an empty row means.
    blank = any(all(pd.isna(values[v].iloc[i]) for v, _, _ in shown) for i in range(len(frame)))
    subtitle = f"{VARIANT_FIGURES[suffix].better} is better" + (
        " · a panel per model, each on its own scale" if len(order) > 1 else "") + (
        " · an empty row: not measured in that run (see its details)" if blank else "")
    style(fig, f"{title} ({unit})", subtitle, height=height)
    fig.update_layout(barmode="group")
    return legend_below(fig)


LABEL_POSITIONS = ("top center", "bottom center", "middle right", "middle left", "top right", "bottom left")


def label_positions(xs: list[float], ys: list[float], span_x: float, span_y: float, *, near: float = 0.08
                    ) -> list[str]:
    """Where each point's label goes so that labels of points close together (within `near` of the axes' spans
    shown) do not print over each other: each takes the first place none of its close neighbours has taken."""
    out: list[str] = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        taken = {out[j] for j in range(i) if abs(xs[j] - x) < near * span_x and abs(ys[j] - y) < near * span_y}
        out.append(next((p for p in LABEL_POSITIONS if p not in taken), LABEL_POSITIONS[i % len(LABEL_POSITIONS)]))
    return out


def tradeoff_scatter(frame: pd.DataFrame) -> go.Figure:
    """Compile time (x) against speedup (y), one point per run: up and to the left is best."""
    needed = {"compile_s", "speedup"}
    points = frame.dropna(subset=list(needed)) if needed <= set(frame.columns) else frame.iloc[0:0]
    title = "Compile time vs speedup"
    if points.empty:
        return not_available(title, "none of these runs compiled anything, so none has a speedup")
    breakeven = points.get("breakeven_steps", pd.Series([None] * len(points), index=points.index))
    hover = [f"<b>{chart_text(label)}</b><br>compile {c:.1f} s, speedup {s:.2f}x (interval in the error bar)<br>"
             "break-even " + (f"{b:,.0f} steps" if pd.notna(b) else "never (not faster)")
             for label, c, s, b in zip(points.label, points.compile_s, points.speedup, breakeven)]
    # Each point's paired interval as its error bar (runs stored without one have none).
    ends = [points.get(c, pd.Series([math.nan] * len(points), index=points.index)).astype(float)
            for c in ("speedup_low", "speedup_high")]
    # Room around the points for their id labels, and the 1x line always in view.
    low = min(points.speedup.min(), ends[0].min() if ends[0].notna().any() else 1.0, 1.0)
    high = max(points.speedup.max(), ends[1].max() if ends[1].notna().any() else 1.0, 1.0)
    pad = max(high - low, 0.1) * 0.15
    right = points.compile_s.max() * 1.12 or 1.0
    fig = go.Figure(go.Scatter(
        x=points.compile_s, y=points.speedup, mode="markers+text", text=points.id.str[-6:],
        textposition=label_positions(list(points.compile_s), list(points.speedup), 1.06 * right, high - low + 2 * pad),
        hovertext=hover, hoverinfo="text", cliponaxis=False,
        error_y=dict(type="data", array=(ends[1] - points.speedup).fillna(0),
                     arrayminus=(points.speedup - ends[0]).fillna(0), color="#999", thickness=1.2, width=4),
        marker=dict(size=13, color=COMPILED_COLOR, line=dict(color="white", width=1))))
    fig.add_hline(y=1.0, line_dash="dash", line_color="#888", annotation_text="as fast as eager",
                  annotation_position="bottom right")
    fig.update_xaxes(title_text="Compile time (s)", range=[-0.06 * right, right])
    fig.update_yaxes(title_text="Speedup over eager (x)", range=[low - pad, high + pad])
    return style(fig, title, "up and to the left is best · bars: each speedup's interval · hover a point for its run",
                  height=380)


def sweep_heatmap(matrix: pd.DataFrame) -> go.Figure:
    """Speedup of each crossed setting: rows are compile scope and mode, columns dynamic and optimizer.

    `matrix` has columns row, col, speedup, compile_s (NaN until a run finishes).
    """
    title = "Speedup over eager (x) per setting"
    if matrix.empty:
        return not_available(title, "no settings in this sweep")
    matrix = matrix.assign(row=matrix["row"].map(chart_text), col=matrix["col"].map(chart_text))  # settings, as typed
    rows = list(dict.fromkeys(matrix["row"]))
    cols = list(dict.fromkeys(matrix["col"]))
    z = [[math.nan] * len(cols) for _ in rows]
    text = [[""] * len(cols) for _ in rows]
    unfinished = [[math.nan] * len(cols) for _ in rows]  # grey cells that say why there is no number yet
    for r in matrix.itertuples():
        i, j = rows.index(r.row), cols.index(r.col)
        if pd.notna(r.speedup):
            z[i][j] = r.speedup
            reach = figures.interval_reach({"speedup": r.speedup, "speedup_low": getattr(r, "speedup_low", None),
                                            "speedup_high": getattr(r, "speedup_high", None)})
            pm = f" {reach}" if reach and pd.notna(getattr(r, "speedup_low", None)) else ""
            text[i][j] = f"{r.speedup:.2f}x{pm}" + (f"<br>{r.compile_s:.1f} s" if pd.notna(r.compile_s) else "")
        else:
            unfinished[i][j] = 0.0
            text[i][j] = getattr(r, "status", "n/a")
    # Colour by log2 of the speedup, centred on 1x: 2x faster and 2x slower are equally strong, and the scale reads
    # in speedups (0.5x, 1x, 2x), never below zero as a linear scale centred on 1 would run.
    logs = [[math.log2(v) if v > 0 else math.nan for v in row] for row in z]
    reach = max([1.0] + [abs(v) for row in logs for v in row if not math.isnan(v)])
    ticks = list(range(-math.ceil(reach), math.ceil(reach) + 1))
    fig = go.Figure([
        go.Heatmap(z=unfinished, x=cols, y=rows, text=text, texttemplate="%{text}", showscale=False,
                   colorscale=[[0, "#eeeeee"], [1, "#eeeeee"]], hovertemplate="%{y} / %{x}: %{text}<extra></extra>"),
        go.Heatmap(z=logs, customdata=z, x=cols, y=rows, text=text, texttemplate="%{text}", colorscale="RdBu",
                   zmid=0.0, zmin=-reach, zmax=reach,
                   colorbar=dict(title="speedup (x)", tickvals=ticks, ticktext=[f"{2.0 ** k:g}x" for k in ticks]),
                   hovertemplate="%{y} / %{x}: %{customdata:.2f}x<extra></extra>"),
    ])
    fig.update_yaxes(autorange="reversed")
    return style(fig, title, "each cell: speedup (x) ± its interval, then compile time (s); blue is faster than eager",
                  height=max(260, 110 + 60 * len(rows)))


def runs_breakdown_chart(runs: list[tuple[str, str, dict]]) -> go.Figure:
    """Where the time goes, eager and compiled, for several runs: (label, run id, result) each; runs without one are
    left out. Each run's bars are named by its label and id, as run_names names runs: plotly stacks the bars of one
    name into one, so two runs of one label would draw as a single bar of both their times."""
    shown = [(run_name(label, run_id, wrap=True), as_timed(result)) for label, run_id, result in runs]
    rows = [(f"{name} · {v}", bars[v]["ms"]) for name, bars in shown
            if not profiler_withheld(bars) for v, _, _ in VARIANTS if v in bars]
    if not rows:
        return not_available("Where the time of a step goes", "none of these runs has a profile that agrees with "
                                                              "its timed steps (or none was profiled)")
    left_out = sum(1 for _, bars in shown if profiler_withheld(bars))
    scaled = any(s["shown"] == "scaled" for _, bars in shown for s in bars.values())
    return breakdown_chart(rows, subtitle="ms per step, eager and compiled of each run"
                           + ("; scaled to the timed steps where the profiler slowed them" if scaled else "")
                           + (f"; {left_out} run(s) left out, profiled far off their timed steps" if left_out else ""))
