"""A run's timeline (tcore.figures.timeline) as one thin stacked bar in seconds: the compile's phases in warm
colours, the measurement in blues, waiting for its turn (the queue, the GPU) in purples, the lab's own overhead in
greys; the one-line caption that goes under it, and the phases as a table."""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from tcore.figures import timeline
from tcore.figures.timeline import COMPILE, LAB, MEASURE, WAIT
from ui.charts.style import style
from ui.panels import exports

# Cycled within each kind, so neighbouring phases of one kind stay apart and the kinds stay apart from each other.
KIND_COLORS = {COMPILE: ("#ee4c2c", "#f58518", "#f2a900", "#e45756", "#b8481f"),
               MEASURE: ("#4c78a8", "#72b7b2", "#2f5d8a", "#9ecae9"),
               LAB: ("#9d9d9d", "#c7c7c7", "#7f7f7f", "#b5b5b5"),
               WAIT: ("#b279a2", "#d6a5c9", "#8c5a85")}
SUBTITLE = "compile red-orange, measurement blue, waiting purple, the lab grey"  # "compile warm" read as a cache
LABEL_MIN_SHARE = 0.08  # a phase narrower than this share of the bar is named in the legend and on hover only


def timeline_chart(result: dict) -> go.Figure | None:
    """The bar, or None for a run stored before the lab kept a timeline."""
    phases = result.get("timeline")
    if not phases:
        return None
    wall = sum(p["s"] for p in phases) or 1.0
    fig, seen = go.Figure(), {kind: 0 for kind in KIND_COLORS}
    for p in phases:
        colors = KIND_COLORS.get(p["kind"], KIND_COLORS[LAB])
        color = colors[seen.get(p["kind"], 0) % len(colors)]
        seen[p["kind"]] = seen.get(p["kind"], 0) + 1
        fig.add_bar(name=f"{p['name']}: {p['s']:.2f} s", y=["run"], x=[p["s"]], orientation="h", marker_color=color,
                    text=f"{p['s']:.1f} s" if p["s"] >= LABEL_MIN_SHARE * wall else "", textposition="inside",
                    hovertemplate=f"{p['name']} ({timeline.KIND_WORDS.get(p['kind'], p['kind'])}): "
                                  f"%{{x:.2f}} s, from {p['start_s']:.2f} s<extra></extra>")
    fig.update_xaxes(title_text="Seconds since the run was submitted", rangemode="tozero")
    fig.update_yaxes(visible=False)
    # Every phase is named on hover and in the table below the bar: a legend of 15-20 phases would dwarf it.
    style(fig, f"The run's timeline: {wall:.1f} s", SUBTITLE, height=150)
    # A space ends each wrapped line: plotly draws a line per <br>, and the page's text (copied, searched, read
    # aloud) joined them with none, "blue,waiting".
    fig.layout.title.subtitle.text = fig.layout.title.subtitle.text.replace("<br>", " <br>")
    return fig.update_layout(barmode="stack", bargap=0.15, showlegend=False)


def show(result: dict, *, key: str, run_id: str) -> None:
    """The bar, its caption, and its phases as a table one click away; for an older run, the words that say there
    is none."""
    fig = timeline_chart(result)
    if fig is not None:
        exports.show(st, fig, key=f"{key}_timeline", run_id=run_id)
    st.caption(timeline.caption(result))
    if fig is not None:
        with st.expander("The timeline, phase by phase", key=f"{key}_timeline_open", on_change="rerun") as box:
            if box.open:  # lazy, as the other expanders of a result
                st.dataframe(phase_rows(result["timeline"]), hide_index=True, width="stretch",
                             column_config=PHASE_COLUMNS, key=f"{key}_timeline_table")


# The numbers first and narrow, the words after them: with the long words first, the seconds column lay past the
# right edge of the Run page's result column (the table scrolled sideways to show it).
PHASE_COLUMNS = {"phase": st.column_config.TextColumn("phase", width="medium"),
                 "seconds": st.column_config.NumberColumn("seconds", format="%.2f", width="small"),
                 "from (s)": st.column_config.NumberColumn("from (s)", format="%.2f", width="small"),
                 "is": st.column_config.TextColumn("is", width="medium")}


def phase_rows(phases: list[dict]) -> list[dict]:
    """The table's rows, one per phase, in PHASE_COLUMNS' order."""
    return [{"phase": p["name"], "seconds": p["s"], "from (s)": p["start_s"],
             "is": timeline.KIND_WORDS.get(p["kind"], p["kind"])} for p in phases]
