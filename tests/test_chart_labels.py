"""Value labels clear of what else a chart draws: throughput values above the whiskers, and the
Compare scatter's point labels apart where points sit close together."""
import pandas as pd

from ui.charts import compare_charts
from ui.charts import run_charts as charts


def test_throughput_values_sit_above_the_whiskers_not_on_the_bar():
    r = {"variants": ["eager", "compiled"], "eager_steps_per_s": 10.0, "eager_samples_per_s": 80.0,
         "eager_steps_per_s_min": 1.0, "eager_steps_per_s_max": 12.0,  # a noisy round: the whisker reaches the foot
         "compiled_steps_per_s": 12.0, "compiled_samples_per_s": 96.0}
    fig = charts.throughput_chart(r)
    (bar,) = fig.data
    assert bar.textposition == "none"  # nothing printed where the whisker runs
    labels = {a.text: a.y for a in fig.layout.annotations if a.text in ("80.0", "96.0")}
    assert labels == {"80.0": 96.0, "96.0": 96.0}  # at each whisker's top (eager: 12 steps/s x 8 samples)
    assert fig.layout.yaxis.range[1] > 96.0  # with room above for them


def test_close_points_on_the_scatter_get_labels_on_different_sides():
    frame = pd.DataFrame({"id": ["r-aaaaaa", "r-bbbbbb", "r-cccccc", "r-dddddd"], "label": ["a", "b", "c", "d"],
                          "compile_s": [3.0, 3.1, 3.05, 30.0], "speedup": [1.20, 1.21, 1.19, 2.0],
                          "breakeven_steps": [None] * 4})
    positions = list(compare_charts.tradeoff_scatter(frame).data[0].textposition)
    assert len(set(positions[:3])) == 3  # three points within a few pixels: three different places
    assert positions[3] == "top center"  # one far away keeps the usual place


EVIL = '<a href="http://evil.example/unlock">Unlock instructor</a><span style="font-size:60px">BIG</span> & co'


def _markup_in(fig) -> list[str]:
    """Every string of a figure that plotly would read as a link or a styled span."""
    import json
    found = []

    def walk(value):
        if isinstance(value, str):
            if "<a " in value or "<span" in value:
                found.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
    walk(json.loads(fig.to_json()))
    return found


def test_a_label_with_markup_is_drawn_as_typed_on_every_chart_that_names_runs():
    """Plotly reads a chart's text as HTML-like markup: a model file's preset such as '<a href=...>Unlock
    instructor</a>' was a link in Compare's charts (and the HTML export), '<span style=font-size:60px>' text
    across them. A run's label, its model and a sweep's settings are anyone's words: shown as typed."""
    from ui.charts import diagnose_charts

    frame = pd.DataFrame({"id": ["20260101-000000-aaaaaa", "20260101-000000-bbbbbb"],
                          "label": [f"file:/m.py/{EVIL} bs2, whole", "captioner/tiny bs2, whole"],
                          "model": [f"file:/{EVIL}.py", "captioner"], "compile_s": [1.0, 2.0], "speedup": [1.2, 0.9],
                          "speedup_low": [1.1, 0.8], "speedup_high": [1.3, 1.0], "eager_samples_per_s": [1.0, 2.0],
                          "compiled_samples_per_s": [1.5, 2.5], "cache": ["cold", "warm"],
                          "cache_artifacts": [None, None]})
    figs = [compare_charts.tradeoff_scatter(frame), compare_charts.compare_bars(frame, "speedup", "Speedup", "x"),
            compare_charts.compare_variants(frame, "samples_per_s"),
            diagnose_charts.cold_warm_chart(frame), diagnose_charts.cold_warm_chart(frame, every_run=True),
            compare_charts.sweep_heatmap(pd.DataFrame({"row": [EVIL], "col": [EVIL], "speedup": [1.1],
                                                       "compile_s": [1.0]}))]
    for fig in figs:
        assert not _markup_in(fig), _markup_in(fig)
    tick = [t for t in figs[1].data[0].y if "aaaaaa" in t][0]
    assert "&lt;a href" in tick and "&amp; co" in tick  # shown as typed: plotly writes the entities back
