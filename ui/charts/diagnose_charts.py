"""Plotly figures for the Diagnose page and the cache charts: compile timelines, shape schedules,
runs side by side, kernels and ops, cold against warm. Pure functions, like ui.charts.run_charts."""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tcore import figures
from ui.charts.style import (
    COMPILED_COLOR,
    EAGER_COLOR,
    bar_label,
    bars_height,
    chart_text,
    legend_below,
    not_available,
    style,
    wrap,
)

# --- Compile events, shape schedules, graphs and kernels --------------------------

# kind of a compile event (tcore.worker.diagnostics.compile_events) -> (legend name, marker symbol, colour)
EVENT_KINDS = {
    "compile": ("First compile of a frame", "circle", "#4c78a8"),
    "recompile": ("Recompile (a guard failed)", "diamond", "#f58518"),
    "limit": ("Recompile limit hit: eager from here", "x", "#d62728"),
    "runtime": ("Kernels compiled on first run", "triangle-up", "#72b7b2"),
}
FALLBACK_COLOR = "rgba(214, 39, 40, 0.08)"  # the stretch a frame runs eagerly, past the recompile limit


def _headline(text: str | None, width: int = 70) -> str:
    """The first line of a torch message, without its '0/1: ' id and runs of spaces, wrapped for a hover (as typed:
    a guard names the model's own code)."""
    line = next((s.strip() for s in (text or "").splitlines() if s.strip()), "")
    head, sep, rest = line.partition(": ")
    if sep and "/" in head and " " not in head:
        line = rest
    return wrap(chart_text(" ".join(line.split())), width) if line else "(no reason given)"


def _schedule_steps(result: dict) -> dict[str, dict]:
    """compile id -> the schedule row (step, size) whose call triggered it."""
    return {cid: row for row in result.get("schedule") or [] for cid in row.get("compiles", [])}


def compile_timeline(result: dict, *, title: str = "Every compilation, over the run") -> go.Figure:
    """One marker per compilation event: x = when (s since the run started), y = how long it took.

    The marker says what kind (first compile, recompile, recompile limit, kernel compile); the hover
    says which guard failed. Past a recompile limit the frame runs eagerly: that stretch is shaded.
    """
    events = result.get("compile_events") or []
    if not events:
        return not_available(title, result.get("unavailable", {}).get("compile_s")
                             or "no compilation events were recorded in this run")
    steps = _schedule_steps(result)
    dim = result.get("schedule_dim", "size")
    fig = go.Figure()
    for kind, (name, symbol, color) in EVENT_KINDS.items():
        chosen = [e for e in events if e.get("kind") == kind]
        if not chosen:
            continue
        hover = []
        for e in chosen:
            row = steps.get(e.get("compile_id"))
            where = f"<br>schedule step {row['step']} ({dim} {row['size']})" if row else ""
            reason = f"<br>why: {_headline(e.get('reason'))}" if e.get("reason") else ""
            hover.append(f"<b>{e.get('compile_id')}</b> {chart_text(e.get('frame') or '')}<br>{name}: "
                         f"{e.get('duration_s') or 0:.2f} s, at {e.get('t_s') or 0:.1f} s{where}{reason}")
        fig.add_scatter(x=[e.get("t_s") for e in chosen], y=[e.get("duration_s") or 0 for e in chosen],
                        mode="markers", name=name, hovertext=hover, hoverinfo="text",
                        marker=dict(symbol=symbol, size=13, color=color, line=dict(color="white", width=1)))
    end = max((e.get("t_s") or 0) + (e.get("duration_s") or 0) for e in events) * 1.08 + 0.1
    for e in events:
        if e.get("kind") == "limit":
            fig.add_vrect(x0=e["t_s"], x1=end, fillcolor=FALLBACK_COLOR, line_width=0,
                          annotation_text="past the limit: new shapes run eagerly", annotation_position="top right",
                          annotation_font_color="#d62728")
    # An explicit range: the shaded fallback ends where the events do, and the axis with it.
    fig.update_xaxes(title_text="Time since the run started (s)", range=[-0.03 * end, end])
    # Headroom over the longest event: the shaded stretch's label sits there, not on a marker.
    longest = max((e.get("duration_s") or 0) for e in events)
    fig.update_yaxes(title_text="Compile time of the event (s)", range=[0, longest * 1.3 or 1.0])
    style(fig, title, "each marker is one compilation · hover for the guard that failed", height=360)
    return legend_below(fig)


def schedule_chart(result: dict) -> go.Figure:
    """Step time at each step of the shape schedule, compiled vs eager, on a log scale.

    A compiled step that compiled a new graph is a big spike; past the recompile limit the compiled
    line falls back to eager speed (shaded).
    """
    title = "Step time over the shape schedule"
    rows = result.get("schedule") or []
    if not rows:
        return not_available(title, "this run fed one fixed shape: set a number of distinct shapes to see a schedule")
    dim = result.get("schedule_dim", "size")
    steps = [r["step"] for r in rows]
    ticks = [f"{r['size']}" + (f"→{r['padded_to']}" if r.get("padded_to") not in (None, r["size"]) else "")
             for r in rows]
    symbols = ["x" if r.get("hit_limit") else "diamond" if r.get("compiles") else "circle" for r in rows]
    sizes = [13 if s != "circle" else 7 for s in symbols]
    hover = []
    for r, tick in zip(rows, ticks):
        did = ("compiled " + ", ".join(r["compiles"]) if r.get("compiles") else
               "hit the recompile limit: ran eagerly" if r.get("hit_limit") else "no compile")
        hover.append(f"step {r['step']}: {dim} {tick}<br>compiled {r['compiled_ms']:.1f} ms ({did})"
                     f"<br>eager {r['eager_ms']:.1f} ms")
    fig = go.Figure()
    fig.add_scatter(x=steps, y=[r["eager_ms"] for r in rows], mode="lines+markers", name="Eager",
                    line=dict(color=EAGER_COLOR, width=2), marker=dict(size=6), hovertext=hover, hoverinfo="text")
    fig.add_scatter(x=steps, y=[r["compiled_ms"] for r in rows], mode="lines+markers", name="Compiled",
                    line=dict(color=COMPILED_COLOR, width=2), hovertext=hover, hoverinfo="text",
                    marker=dict(symbol=symbols, size=sizes, color=COMPILED_COLOR, line=dict(color="white", width=1)))
    limit = next((r["step"] for r in rows if r.get("hit_limit")), None)
    if limit is not None:
        fig.add_vrect(x0=limit - 0.5, x1=steps[-1] + 0.5, fillcolor=FALLBACK_COLOR, line_width=0,
                      annotation_text="recompile limit hit:<br>new shapes run eagerly", annotation_position="top right",
                      annotation_align="right", annotation_font_color="#d62728")
    padded = any(r.get("padded_to") not in (None, r["size"]) for r in rows)
    # Short enough for half a page: "Caption length (tokens) at each step", the padding on a line of its own.
    fig.update_xaxes(title_text=(f"{dim[:1].upper()}{dim[1:]} at each step"
                                 + ("<br>(size → padded to)" if padded else "")),
                     tickvals=steps, ticktext=ticks,
                     # fixed: autorange would widen the axis to hold the shaded stretch's label, squeezing the steps
                     range=[steps[0] - 0.5, steps[-1] + 0.5])
    times = [r[k] for r in rows for k in ("eager_ms", "compiled_ms") if r.get(k) and r[k] > 0]
    y_ticks = log_ticks(min(times), max(times)) if times else [1.0, 10.0]
    fig.update_yaxes(title_text="Step time (ms, log scale)", type="log", tickvals=y_ticks,
                     range=[math.log10(y_ticks[0] / 1.1), math.log10(y_ticks[-1] * 1.1)])  # log axes take log10 ends
    style(fig, title, "one pass over the sizes · ◆ compiled a new graph · ✕ hit the recompile limit", height=360)
    return legend_below(fig)


def log_ticks(low: float, high: float) -> list[float]:
    """Ticks for a log axis over `low`..`high`: 1, 2 and 5 per decade (only powers of ten past two decades),
    from the last one at or below `low` to the first one at or above `high`, so at least two are in view.

    Plotly's own log ticks fall on powers of ten, and a range inside one decade, such as 1.1 to 1.6 ms,
    would show no number on the axis at all."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1, 2, 5) if last - first <= 2 else (1,)
    ticks = sorted(float(f"{m}e{e}") for e in range(first, last + 1) for m in steps)
    below = max(t for t in ticks if t <= low)
    above = min(t for t in ticks if t >= high)
    return [t for t in ticks if below <= t <= above]


# Colours for runs side by side (not eager/compiled): one per run, in order.
PANEL_TITLE_CHARS = 20  # a panel of five across the Diagnose page is about 170 px wide at a 1280-px window
RUN_COLORS = ("#4c78a8", "#ee4c2c", "#54a24b", "#b279a2", "#f2a900", "#72b7b2")


def side_by_side(items: list[tuple[str, dict]], panels: list[str], *, title: str, subtitle: str = "") -> go.Figure:
    """A few figures of a few runs: one panel per figure, one bar per run, each run its colour (the legend).

    items: (name, stored record) per run; panels: the stored columns to show (tcore.figures). The
    traces go panel by panel, a run after another within each. A missing figure is a bar labelled
    n/a (no bar), never a zero.
    """
    if not items:
        return not_available(title, "no runs to compare yet")
    # Wrapped: five panels share the page's width, and a centred one-line title wider than its panel
    # runs off the figure's left edge ("ompiled throughput").
    titles = [wrap(figures.column_label(key), PANEL_TITLE_CHARS) for key in panels]
    fig = make_subplots(rows=1, cols=len(panels), horizontal_spacing=0.05, subplot_titles=titles)
    for col, key in enumerate(panels, start=1):
        fig_def, _ = figures.lookup(key)
        panel, unit = figures.column_label(key), fig_def.unit
        for i, (name, record) in enumerate(items):
            value = record.get(key)
            text = fig_def.text(value, unit=False)
            fig.add_bar(x=[name], y=[value if value is not None else math.nan], name=name, legendgroup=name,
                        showlegend=col == 1, marker_color=RUN_COLORS[i % len(RUN_COLORS)], text=[text],
                        textposition="auto", row=1, col=col,
                        hovertemplate=f"{name}<br>{panel}: {text} {unit}<extra></extra>")
        fig.update_yaxes(rangemode="tozero", showticklabels=False, row=1, col=col)
        fig.update_xaxes(showticklabels=False, row=1, col=col)  # the legend names the runs
    fig.update_annotations(font_size=13, yshift=4, yanchor="bottom")
    style(fig, title, subtitle, height=360)
    if len(items) > 3:  # bars too narrow for a number across them: along them, as the bars stand
        fig.update_traces(textangle=-90)
    lines = max(t.count("<br>") + 1 for t in titles)
    fig.update_layout(barmode="relative", margin_t=fig.layout.margin.t + 18 * lines + 8)
    return legend_below(fig)


def kernels_chart(result: dict) -> go.Figure:
    """Kernels one step launches, eager vs compiled: fusion shows up as fewer kernels."""
    title = "Kernels per step"
    eager, compiled = result.get("eager_kernels_per_step"), result.get("compiled_kernels_per_step")
    if eager is None or compiled is None:
        return not_available(title, result.get("unavailable", {}).get("compile_s")
                             or "kernels are counted only in runs that compile something")
    fig = go.Figure(go.Bar(x=["Eager", "Compiled"], y=[eager, compiled], marker_color=[EAGER_COLOR, COMPILED_COLOR],
                           text=[bar_label(str(eager), "kernels"), bar_label(str(compiled), "kernels")],
                           textposition="auto"))
    fig.update_yaxes(title_text="Kernels launched per step", rangemode="tozero")
    fewer = f"{eager / compiled:.1f}x fewer launches compiled" if compiled and compiled < eager else "no fewer launches"
    return style(fig, title, f"lower is better · {fewer}")


def graph_ops_chart(result: dict) -> go.Figure:
    """Operations in the graph of each Dynamo compilation: one big graph fuses best; many small ones mean breaks.

    One bar per compilation, recompiles included, so it can show more bars than "Dynamo captured N graphs"
    counts distinct graphs."""
    title = "Operations per compilation"
    graphs = result.get("graphs") or []
    if not graphs:
        return not_available(title, "no graphs were recorded in this run")
    names = [f"{g.get('compile_id')} {g.get('frame') or ''}".strip() for g in graphs]
    fig = go.Figure(go.Bar(
        x=names, y=[g.get("ops") for g in graphs], marker_color=COMPILED_COLOR,
        text=[str(g.get("ops")) for g in graphs], textposition="auto",
        hovertext=[f"<b>{n}</b><br>{g.get('ops')} ops, compiled in {g.get('compile_s') or 0:.2f} s"
                   for n, g in zip(names, graphs)], hoverinfo="text"))
    fig.update_xaxes(title_text="Compilation (compile id, function)", tickangle=-30 if len(graphs) > 4 else 0)
    fig.update_yaxes(title_text="Operations in its graph", rangemode="tozero")
    return style(fig, title, f"{len(graphs)} compilation{'s' if len(graphs) != 1 else ''}, recompiles included "
                              "· hover for its compile time")


# --- Compile caches: cold vs warm ------------------------------------------------------------------

SCOPES = (("whole", "Whole model"), ("regional", "Regional (blocks)"))
# "warm" here is a run that loaded compile artifacts (the Mega-Cache): named so, as the Run page's cache=warm is the
# local cache folder, another warm start
TEMPERATURES = (("cold", "Cold: fresh caches", "#4c78a8"), ("warm", "Artifacts loaded (Mega-Cache)", "#f2a900"))


def four_way_chart(compile_s: dict[tuple[str, str], float | None]) -> go.Figure:
    """Compile time of whole-model and regional compiles, cold and with compile artifacts loaded, as a 2x2 of bars.

    compile_s: (scope, "cold" | "warm") -> seconds, or None where that run does not exist yet ("warm": artifacts
    loaded).
    Each label gives the speedup over the whole-model cold compile, the slowest way to start.
    """
    title = "Compile time: whole model vs regional, cold vs artifacts loaded"
    if all(v is None for v in compile_s.values()):
        return not_available(title, "none of the four runs has finished yet")
    base = compile_s.get(("whole", "cold"))
    fig = go.Figure()
    for temp, name, color in TEMPERATURES:
        values = [compile_s.get((scope, temp)) for scope, _ in SCOPES]
        text = []
        for (scope, _), v in zip(SCOPES, values):
            if v is None:
                text.append("not run yet")
            elif (scope, temp) == ("whole", "cold") or not base:
                text.append(f"{v:.1f} s")
            else:
                text.append(f"{v:.1f} s<br>{base / v:.1f}x faster" if v > 0 else f"{v:.1f} s")
        fig.add_bar(name=name, x=[n for _, n in SCOPES], y=[v if v is not None else math.nan for v in values],
                    marker_color=color, text=text, textposition="auto",
                    hovertemplate="%{x}, " + name + ": %{text}<extra></extra>")
    fig.update_yaxes(title_text="Compile time (s)", rangemode="tozero")
    style(fig, title, "lower is better · speedups are against the whole-model cold compile", height=380)
    fig.update_layout(barmode="group")
    return legend_below(fig)


CACHE_NAMES = {"cold": "cold", "warm": "warm (local cache)", "artifacts": "artifacts loaded",
               "artifacts-cold": "artifacts not loaded (compiled cold)"}
CACHE_COLORS = {"cold": "#4c78a8", "warm": "#54a24b", "artifacts": "#f2a900", "artifacts-cold": "#9ecae9"}


def cache_kind(cache: str | None, artifacts: str | None) -> str:
    """The cache a run really compiled with: an artifacts run that loaded nothing compiled cold."""
    if cache == "artifacts" and artifacts != "loaded":
        return "artifacts-cold"
    return cache or "cold"


def cold_warm_chart(frame: pd.DataFrame, *, height: int | None = None, every_run: bool = False) -> go.Figure:
    """Compile time of runs grouped by their settings, one bar per cache mode, cache hits in the hover.

    `frame` has columns id, label, cache, cache_artifacts, compile_s and the cache hit counts, and
    optionally settings (what was compiled, e.g. tcore.experiment.comparable.compile_key; else the label groups).
    Several runs of one settings and cache mode show the newest (the frame is newest first); with `every_run` (the
    runs a person chose to compare) each gets its bar, the repeats on rows of their own named by run id.
    """
    title = "Compile time: cold vs warm"
    rows = frame.dropna(subset=["compile_s"]) if "compile_s" in frame else frame.iloc[0:0]
    if rows.empty:
        return not_available(title, "none of these runs compiled anything")
    rows = rows.assign(kind=[cache_kind(c, a) for c, a in zip(rows["cache"], rows["cache_artifacts"])],
                       group=rows["settings"] if "settings" in rows else rows["label"])
    if every_run:  # the second run of one settings and cache mode starts a row of its own, and so on
        nth = rows.groupby(["group", "kind"]).cumcount()
        rows = rows.assign(group=[f"{g}#{n}" for g, n in zip(rows.group, nth)])
    else:
        rows = rows.drop_duplicates(subset=["group", "kind"])  # newest first: keep the latest of each
    groups = list(dict.fromkeys(rows.group))
    names = {g: chart_text(rows[rows.group == g].label.iloc[0]).replace(", ", "<br>", 1) for g in groups}
    if every_run and len(set(names.values())) < len(names):
        names = {g: f"{n} · {'/'.join(i[-6:] for i in rows[rows.group == g].id)}" for g, n in names.items()}
    if len(set(names.values())) < len(names):  # two settings with one label (e.g. another backend): tell apart
        names = {g: f"{n} · {g[:4]}" for g, n in names.items()}
    fig = go.Figure()
    for kind, name in CACHE_NAMES.items():
        part = rows[rows.kind == kind]
        if part.empty:
            continue
        by_group = {r.group: r for r in part.itertuples()}
        xs, text, hover = [], [], []
        for g in groups:
            r = by_group.get(g)
            xs.append(r.compile_s if r is not None else math.nan)
            text.append(f"{r.compile_s:.1f} s" if r is not None else "")
            hover.append("" if r is None else
                         f"<b>{chart_text(r.label)}</b> · {r.id[-6:]}<br>{name}: {r.compile_s:.2f} s<br>"
                         f"FX graph cache: {_count(r, 'fx_graph_cache_hits')} hits, "
                         f"{_count(r, 'fx_graph_cache_misses')} misses<br>"
                         f"AOT autograd cache: {_count(r, 'aot_autograd_cache_hits')} hits")
        fig.add_bar(name=name, y=[names[g] for g in groups], x=xs, orientation="h", marker_color=CACHE_COLORS[kind],
                    text=text, textposition="auto", hovertext=hover, hoverinfo="text")
    shared = rows.groupby("group").kind.nunique().max() > 1
    fig.update_xaxes(title_text="Compile time (s)", rangemode="tozero")
    fig.update_yaxes(autorange="reversed")
    subtitle = ("lower is better · hover a bar for its cache hits" if shared else
                "each of these settings ran with one cache mode only: run it again with cache=warm or artifacts")
    style(fig, title, subtitle, height=height or bars_height(len(groups), 2))
    fig.update_layout(barmode="group")
    return legend_below(fig)


def _count(row, column: str) -> str:
    value = getattr(row, column, None)
    return "?" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{int(value)}"
