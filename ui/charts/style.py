"""How every chart of the lab looks: its colours, its title and subtitle, its legend, its bar labels, and the chart that
says "n/a" and why. ui.charts.run_charts, compare_charts, diagnose_charts and timeline_bar draw with these, so a page's
charts read alike; no Streamlit here.
"""
from __future__ import annotations

import html

import plotly.graph_objects as go

EAGER_COLOR = "#8896ab"  # muted grey-blue: the baseline
COMPILED_COLOR = "#ee4c2c"  # PyTorch orange: what compile produced
VARIANTS = (("eager", "Eager", EAGER_COLOR), ("compiled", "Compiled", COMPILED_COLOR))
PHASE_COLORS = {"idle": "#b0b0b0", "building": "#9467bd", "eager": EAGER_COLOR, "compiling": "#f2a900",
                "warmup": "#17becf", "measuring": COMPILED_COLOR}
COMPILE_PHASE_COLORS = ("#4c78a8", "#72b7b2", "#f58518", "#e45756")
PHASE_LABEL_MIN_SHARE = 0.12  # a compile phase narrower than this share of the bar is named in the legend only
OTHER_PHASE_COLOR = "#cfcfcf"
# The time-breakdown categories (tcore.figures.breakdown): compute in blues, memory-bound work in warm colours, idle
# grey.
CATEGORY_COLORS = {"matmul": "#4c78a8", "attention": "#72b7b2", "pointwise": "#f58518", "copy": "#e45756",
                   "optimizer": "#b279a2", "other": "#bab0ac", "idle": "#d9d9d9"}
HEIGHT = 330
# What fits the narrowest place a chart is drawn: half of the Run page's result column, about 220 px wide in a
# 1280-px window (Chromium, wide layout). A title is one line of 15-px text, so it is kept this short; a longer
# subtitle (12 px) wraps onto more lines, and the top margin grows to hold them.
TITLE_CHARS = 30
SUBTITLE_CHARS = 36


def chart_text(text: object) -> str:
    """Anyone's words (a run's label, a model file's path or preset, a sweep's settings) as a chart shows them: plotly
    reads a chart's text as HTML-like markup (<a href>, <span style>, <b>, <br>), so '<', '>' and '&' are written as
    the entities it draws as typed."""
    return html.escape(str(text), quote=False)


def style(fig: go.Figure, title: str, subtitle: str = "", *, height: int = HEIGHT) -> go.Figure:
    subtitle = wrap(subtitle, SUBTITLE_CHARS) if subtitle else ""
    lines = subtitle.count("<br>") + 1 if subtitle else 0
    fig.update_layout(title=dict(text=title, x=0, xanchor="left", yref="container", y=1, yanchor="top",
                                 pad=dict(t=10), font=dict(size=15),
                                 subtitle=dict(text=subtitle, font=dict(size=12, color="#777"))),
                      height=height + 16 * max(lines - 1, 0),
                      margin=dict(l=10, r=10, t=54 + 16 * lines if lines else 50, b=10), bargap=0.35,
                      showlegend=False)
    # Upright, readable labels rather than plotly's sideways or shrunken text in narrow bars.
    fig.update_traces(textangle=0, insidetextanchor="middle", textfont_size=13, selector=dict(type="bar"))
    fig.update_layout(uniformtext=dict(minsize=11, mode="show"))
    return fig


def legend_below(fig: go.Figure) -> go.Figure:
    """The legend in rows under the plot and its axis title; plotly grows the bottom margin to fit it.

    Placed against the figure's container, not the plot, so it never meets the x-axis title or the
    subtitle, however many rows it wraps onto."""
    return fig.update_layout(showlegend=True, legend=dict(orientation="h", yref="container", y=0, yanchor="bottom",
                                                          xref="container", xanchor="left", x=0, traceorder="normal"))


def not_available(title: str, reason: str | None) -> go.Figure:
    """An empty chart that says what is missing and why, so a gap is never mistaken for zero."""
    fig = go.Figure()
    fig.add_annotation(text=f"n/a<br><sup>{wrap(reason or 'not measured in this run')}</sup>",
                       x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font=dict(size=18, color="#888"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return style(fig, title)


def wrap(text: str, width: int = 60) -> str:
    words, lines, line = text.split(), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = ""
        line = f"{line} {w}".strip()
    return "<br>".join(lines + [line])


def bar_label(value: str, unit: str) -> str:
    """A bar's label: the number over its unit, narrow enough for a bar in half a page."""
    return f"{value}<br>{unit}"


def number_label(x: float | None) -> str:
    """A value on a bar, three significant figures and never in exponent form: '1,110', '141', '14.1', '0.141'."""
    if x is None or x != x:
        return "n/a"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}" if abs(x) >= 0.001 or x == 0 else f"{x:.1e}"


def bars_height(n: int, per_run: int = 1) -> int:
    return max(HEIGHT, 130 + 40 * n * per_run)
