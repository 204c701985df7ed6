"""Beside a run's headline: where compiled costs more than eager, from its kernels (tcore.analysis.slower), with a
chart of each class of kernels eager against compiled."""
from __future__ import annotations

import streamlit as st

from tcore.analysis import slower
from tcore.store import RunRecord
from ui.charts import run_charts
from ui.panels import exports


def show(rec: RunRecord, *, key: str) -> None:
    """Nothing for a run whose compiled step costs no class more and is not slower; else the words and the chart."""
    lines = slower.words(rec.result, rec.spec)
    if not lines:
        return
    with st.container(border=True):
        for line in lines:
            st.markdown(line)
        grown = slower.grown(rec.result, rec.spec)
        if grown:
            exports.show(st, run_charts.class_chart(rec.result, [g.category for g in grown]), key=f"{key}_classes",
                         run_id=rec.id)
