"""The Compare page's HTML export keeps each chart's explanation under its chart, and flags noisy runs,
so the file read offline says what the page said."""
import re

import pandas as pd
import plotly.graph_objects as go

from ui.panels import exports


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


def test_the_export_draws_each_run_s_bars_apart_when_two_runs_share_a_label():
    """The HTML report drew two runs of one label as one bar of both their times, as the page did."""
    import json

    from ui.charts.compare_charts import runs_breakdown_chart

    def run(ms: float) -> dict:
        bd = {"step_ms": ms, "steps": 3, "source": "cpu ops", "overlap_ms": 0.0, "top": [], "ms": {"matmul": ms}}
        return {"variants": ["eager"], "eager_latency_ms_p50": ms, "breakdown": {"eager": bd}}

    label = "captioner/tiny bs8 fp32 inference, whole"
    fig = runs_breakdown_chart([(label, "run-0000a1", run(721.0)), (label, "run-0000b2", run(1059.0))])
    page = exports.html_report("Two runs", pd.DataFrame({"Run": ["a", "b"]}), [fig])
    data = json.loads(re.search(r"Plotly\.newPlot\(\s*\"[^\"]+\",\s*(\[.*?\]),\s*\{", page, re.S).group(1))
    (bars,) = [t for t in data if t["type"] == "bar"]
    assert dict(zip(bars["y"], bars["x"])) == {"captioner/tiny bs8 fp32 inference<br>whole · 0000a1 · eager": 721.0,
                                               "captioner/tiny bs8 fp32 inference<br>whole · 0000b2 · eager": 1059.0}
