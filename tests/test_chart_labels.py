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
