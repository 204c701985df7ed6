"""The Compare page's HTML export keeps each chart's explanation under its chart, and flags noisy runs,
so the file read offline says what the page said."""
import re

import pandas as pd
import plotly.graph_objects as go

from ui import exports


def test_each_explanation_sits_under_its_own_chart_and_noisy_notes_stand_out():
    scatter = go.Figure(go.Scatter(x=[1], y=[2])).update_layout(title="Compile time vs speedup")
    bars = go.Figure(go.Bar(x=["a"], y=[1])).update_layout(title="Throughput")
    page = exports.html_report("Two runs", pd.DataFrame({"Run": ["x"], "Noisy": ["the eager rounds disagree"]}),
                               [bars, (scatter, "Each point is a run: up and to the left is best.")],
                               notes=["Noisy: x · 123456: read its figures as rough, not solid: the eager rounds "
                                      "disagree."])
    charts = page.split("<div class='chart'>")[1:]
    assert "Each point is a run" not in charts[0]  # not under the throughput chart, nor gathered at the top
    assert re.search(r"Compile time vs speedup.*<p class='about'>Each point is a run", charts[1], re.S)
    assert "<p class='noisy'>Noisy: x · 123456" in page.split("<div class='chart'>")[0]
    assert "<th>Noisy</th>" in page
