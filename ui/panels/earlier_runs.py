"""Beside a run's headline: the earlier runs of the same setting on the same machine, their speedups as dots with
their spread, so a rerun that disagrees is seen at once (the store's query:
tcore.store.run_outcomes.Runs.same_setting)."""
from __future__ import annotations

import datetime

import plotly.graph_objects as go
import streamlit as st

from tcore.analysis import history
from tcore.store import RunRecord, RunStore
from ui.words import run_words


def earlier_runs(rec: RunRecord, store: RunStore) -> history.History:
    """The finished runs of `rec`'s setting on its machine that were started before it (those before the instructor's
    reset of the machine's spread among them: listed, but marked as teaching nothing)."""
    return history.history(store.same_setting(rec.spec, rec.device, rec.env, before=rec.created_at, exclude=rec.id),
                           store.lab.spread_reset_at())


def history_figure(earlier: history.History, rec: RunRecord) -> go.Figure:
    """Each earlier run's speedup as a dot with its interval, this run's beside them, and their median as a line."""
    def bars(points):
        return dict(type="data", symmetric=False, thickness=1,
                    array=[(p.high - p.speedup) if p.high else 0 for p in points],
                    arrayminus=[(p.speedup - p.low) if p.low else 0 for p in points])

    fig = go.Figure()
    gone = earlier.before_reset
    for name, points, symbol in (("before the spread's reset", gone, "circle-open"),
                                 ("earlier runs", [p for p in earlier.points if p not in gone], "circle")):
        if points:
            fig.add_trace(go.Scatter(
                x=[datetime.datetime.fromtimestamp(p.created_at) for p in points], y=[p.speedup for p in points],
                mode="markers", name=name, error_y=bars(points), marker=dict(size=9, color="#7f7f7f", symbol=symbol),
                customdata=[p.run_id for p in points], hovertemplate="%{y:.2f}x<br>run %{customdata}<extra></extra>"))
    r = run_words.as_shown(rec.result)  # a single round: no whisker
    mine = history.Point(rec.id, rec.created_at, r["speedup"], r.get("speedup_low"), r.get("speedup_high"))
    fig.add_trace(go.Scatter(x=[datetime.datetime.fromtimestamp(rec.created_at)], y=[mine.speedup], mode="markers",
                             name="this run", error_y=bars([mine]), marker=dict(size=13, color="#d62728"),
                             hovertemplate="this run: %{y:.2f}x<extra></extra>"))
    if earlier.median is not None:
        fig.add_hline(y=earlier.median, line_dash="dot", annotation_text=f"median {earlier.median:.2f}x")
    low, high, cut = axis_range([*earlier.points, mine])
    fig.update_yaxes(range=[low, high])
    if cut:
        fig.add_annotation(text="whiskers past the axis are cut", xref="paper", yref="paper", x=1, y=1.02,
                           showarrow=False, xanchor="right", font=dict(size=10, color="#888"))
    fig.update_layout(height=260, margin=dict(l=10, r=10, t=30, b=10), yaxis_title="Speedup (x)",
                      title=dict(text="This setting on this machine, run after run", font=dict(size=14)),
                      legend=dict(orientation="h", y=-0.25))
    return fig


# An interval this many times the points' own spread (or more) is cut at the axis: one run with a 0.01-121x
# interval drew every dot onto the axis's floor.
WHISKER_SPAN = 2.0


def axis_range(points: list[history.Point]) -> tuple[float, float, bool]:
    """(low, high, whether a whisker is cut) for the speedup axis: the points themselves with a margin, widened to
    take each interval unless that would reach past WHISKER_SPAN times the points' span."""
    values = [p.speedup for p in points]
    top, bottom = max(values), min(values)
    margin = max(0.1 * (top - bottom), 0.05 * top, 0.01)
    low, high = bottom - margin, top + margin
    span = high - low
    ends_low = [p.low for p in points if p.low is not None]
    ends_high = [p.high for p in points if p.high is not None]
    want_low, want_high = min(ends_low, default=low), max(ends_high, default=high)
    cut = want_low < low - WHISKER_SPAN * span or want_high > high + WHISKER_SPAN * span
    low = max(min(low, want_low), low - WHISKER_SPAN * span)
    high = min(max(high, want_high), high + WHISKER_SPAN * span)
    return max(low, 0.0), high, cut


def show(rec: RunRecord, store: RunStore, *, key: str) -> None:
    """The history panel: a sentence, and the dots once there is an earlier run."""
    if rec.result.get("speedup") is None:
        return
    earlier = earlier_runs(rec, store)
    with st.container(border=True, key=f"{key}_history"):
        st.markdown("**Earlier runs of this setting**")
        st.caption(earlier.words(rec.result["speedup"], rec.spec.get("cache")))
        if earlier.points:
            st.plotly_chart(history_figure(earlier, rec), width="stretch", key=f"{key}_history_chart")
