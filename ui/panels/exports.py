"""Figures out of the app: every chart with a download button for PNG or SVG, and a selection of runs as one
HTML report that opens anywhere, offline.

Charts download in the browser (Plotly's camera button in each chart's toolbar), so nothing is rendered
on the server and no image library is needed; the sidebar's "Charts download as" picks the format for
every chart. The HTML report carries plotly.js inside itself, once, so it needs no network to open.
"""
from __future__ import annotations

import datetime
import functools
import re
from pathlib import Path

import jinja2
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from markupsafe import Markup

FORMATS = {"PNG": "png", "SVG": "svg"}
FORMAT_KEY = "chart_format"  # session_state: the format every chart's download button writes


def download_config(name: str) -> dict:
    """Plotly's config for a chart: its toolbar's camera button saves `name`.png or .svg at twice the size shown."""
    fmt = FORMATS.get(st.session_state.get(FORMAT_KEY, "PNG"), "png")
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": fmt, "filename": _slug(name), "scale": 2 if fmt == "png" else 1}}


def show(where, fig: go.Figure, *, key: str, run_id: str | None = None) -> None:
    """Draw `fig` in `where` (st or a column), full width, with its download button set to the chosen format;
    the file is named after the run (`run_id`) where the chart is one run's, so two runs' images stay apart."""
    name = f"compile-lab-{run_id}-{key.rsplit('_', 1)[-1]}" if run_id else f"compile-lab-{key}"
    where.plotly_chart(fig, width="stretch", key=key, config=download_config(name))


def format_picker() -> None:
    """The sidebar's choice of what the charts' download buttons write; kept across pages."""
    st.session_state[FORMAT_KEY] = st.session_state.get(FORMAT_KEY, "PNG")  # survive page changes
    st.sidebar.segmented_control("Charts download as", list(FORMATS), key=FORMAT_KEY,
                                 help="Each chart's toolbar (hover the chart) has a camera button: it saves the chart "
                                      "as a PNG image or an SVG drawing, in the browser, offline.")


# Streamlit's frontend components that a page loads when its first chart or table arrives: Plotly (4.7 MB of
# JavaScript) and the data grid (0.5 MB).
WARMED_COMPONENTS = ("PlotlyChart", "DataFrame")


@functools.cache
def _component_files() -> tuple[str, ...]:
    """The files of WARMED_COMPONENTS in this Streamlit's frontend build (static/js/<name>.<hash>.js); a component
    this build names otherwise is left out."""
    folder = Path(st.__file__).parent / "static" / "static" / "js"
    found = [sorted(folder.glob(f"{name}.*.js")) for name in WARMED_COMPONENTS]
    return tuple(files[0].name for files in found if len(files) == 1)


def warm_charts() -> None:
    """Have the browser load Streamlit's chart and table components while it is idle, once per session, before a
    page needs them.

    Streamlit loads each when a page's first chart (or table) arrives: Plotly's takes most of a second of a small
    machine's browser (bench/page_loads.py), paid by the first chart a person opens (a page from the sidebar,
    a run's result as it lands). Imported here once the page is idle, they are already in the page's module map
    when that chart comes; Streamlit's own import of the same address then costs nothing. Nothing is drawn and
    nothing leaves the machine (the files are the app's own, served by its server).
    """
    files = _component_files()
    if not files or st.session_state.get("_charts_warmed"):
        return
    st.session_state["_charts_warmed"] = True
    imports = "; ".join(f"import('./static/js/{name}').catch(() => {{}})" for name in files)
    st.sidebar.html(f"<script>(window.requestIdleCallback || window.setTimeout)(() => {{ {imports}; }});</script>",
                    unsafe_allow_javascript=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "chart"


def html_report(title: str, table: pd.DataFrame, figures: list[go.Figure | tuple[go.Figure, str]],
                notes: list[str] = ()) -> str:
    """One self-contained HTML page (ui/templates/html_report.html): a title, notes, the charts (interactive,
    plotly.js embedded once), each with its explanation under it where given as (figure, words), and the table."""
    charts = []
    for i, item in enumerate(figures):
        fig, words = item if isinstance(item, tuple) else (item, None)
        # Streamlit's chart theme grows the margins to fit tick labels and axis titles; a page of its own must ask
        fig = go.Figure(fig).update_xaxes(automargin=True).update_yaxes(automargin=True)
        # the first chart carries plotly.js (about 4.6 MB) for them all; none of them fetch anything
        charts.append((Markup(fig.to_html(full_html=False, include_plotlyjs=i == 0, config={"displaylogo": False})),
                       words))
    shown = table.copy()
    for column in shown.columns:
        if pd.api.types.is_datetime64_any_dtype(shown[column]):
            shown[column] = shown[column].dt.strftime("%Y-%m-%d %H:%M:%S")
    shown = shown.astype(object).where(shown.notna(), "n/a")  # a figure that was not measured reads n/a
    return _templates().get_template("html_report.html").render(
        title=title, when=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), notes=notes, charts=charts,
        table=Markup(shown.to_html(index=False, float_format=lambda v: f"{v:,.4g}", border=0, escape=True)))


@functools.cache
def _templates() -> jinja2.Environment:
    """The templates the exports are written from; every value put in them is escaped unless marked Markup."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).resolve().parent.parent / "templates"),
                              autoescape=True, trim_blocks=True, lstrip_blocks=True)
