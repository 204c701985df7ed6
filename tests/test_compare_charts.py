"""Charts across runs (ui.charts.compare_charts): the Compare page's bars and scatter, the sweep's heatmap."""
import math

import pandas as pd

from tcore.experiment.spec import Experiment
from tcore.store import RunRecord
from tests.chart_data import NO_RAPL, annotation_text, subtitle
from ui.charts import compare_charts
from ui.words import sweep_matrix


def runs_frame():
    return pd.DataFrame([
        {"id": "20260101-000000-aaaaaa", "label": "captioner/tiny bs8 fp32 inference, whole default",
         "compile_s": 30.0, "speedup": 1.3, "breakeven_steps": 900.0, "eager_samples_per_s": 20.0,
         "compiled_samples_per_s": 26.0, "eager_energy_j_per_step": None, "compiled_energy_j_per_step": None},
        {"id": "20260101-000100-bbbbbb", "label": "captioner/tiny bs8 fp32 inference, regional default",
         "compile_s": 8.0, "speedup": 1.2, "breakeven_steps": 300.0, "eager_samples_per_s": 20.0,
         "compiled_samples_per_s": 24.0, "eager_energy_j_per_step": None, "compiled_energy_j_per_step": None},
        {"id": "20260101-000200-cccccc", "label": "captioner/tiny bs8 fp32 inference, eager only",
         "compile_s": None, "speedup": None, "breakeven_steps": None, "eager_samples_per_s": 20.0,
         "compiled_samples_per_s": None, "eager_energy_j_per_step": None, "compiled_energy_j_per_step": None},
    ])


def test_compare_charts_one_entry_per_run_and_units():
    frame = runs_frame()
    compile_fig = compare_charts.compare_bars(frame, "compile_s", "Compile time", "s")
    assert list(compile_fig.data[0].y) == list(compare_charts.run_names(frame, wrap=True))
    assert compile_fig.data[0].y[1] == "captioner/tiny bs8 fp32 inference<br>regional default · bbbbbb"
    assert compile_fig.layout.xaxis.title.text == "Compile time (s)"
    throughput = compare_charts.compare_variants(frame, "samples_per_s")
    assert [t.name for t in throughput.data] == ["Eager", "Compiled"]
    assert math.isnan(throughput.data[1].x[2])  # the eager-only run has no compiled bar
    assert "empty row" not in subtitle(throughput)  # it has its eager bar
    energy = compare_charts.compare_variants(frame, "energy_j_per_step", reason=NO_RAPL)
    assert not energy.data and "RAPL" in annotation_text(energy)
    frame.loc[0, "compiled_energy_j_per_step"] = 2.0  # one run had a meter, the other two did not
    energy = compare_charts.compare_variants(frame, "energy_j_per_step")
    assert "an empty row: not measured in that run" in subtitle(energy)


def test_tradeoff_scatter_skips_runs_without_speedup_and_hovers_label():
    fig = compare_charts.tradeoff_scatter(runs_frame())
    (points,) = fig.data
    assert list(points.x) == [30.0, 8.0] and list(points.y) == [1.3, 1.2]
    assert "regional default" in points.hovertext[1] and "300 steps" in points.hovertext[1]
    assert fig.layout.xaxis.title.text == "Compile time (s)"
    assert fig.layout.yaxis.title.text == "Speedup over eager (x)"


def test_sweep_heatmap_places_settings_and_centres_on_one():
    tiny = Experiment(model="captioner", device="cpu")
    exps = [tiny.replace(compile="whole"), tiny.replace(compile="regional"), tiny.replace(compile="whole", mode="lite")]
    done = RunRecord(id="r1", status="finished", created_at=0, label="", spec={},
                     result={"speedup": 1.5, "compile_s": 20.0})
    matrix = sweep_matrix.sweep_matrix(exps, [done, "running", "waiting"])
    fig = compare_charts.sweep_heatmap(matrix)
    pending, heat = fig.data
    assert list(heat.y) == ["whole · default", "regional · default", "whole · lite"]
    assert heat.customdata[0][0] == 1.5 and math.isnan(heat.customdata[1][0])
    assert heat.text[0][0] == "1.50x<br>20.0 s" and heat.text[1][0] == "running"
    # The colour scale is the speedup's, centred on 1x and never below zero: log2 of it, labelled in x.
    assert heat.z[0][0] == math.log2(1.5) and heat.zmid == 0.0 and (heat.zmin, heat.zmax) == (-1.0, 1.0)
    assert list(heat.colorbar.ticktext) == ["0.5x", "1x", "2x"]
    slow = sweep_matrix.sweep_matrix(exps[:2], [done, RunRecord(id="r2", status="finished", created_at=0, label="",
                                                                spec={}, result={"speedup": 0.3, "compile_s": 5.0})])
    assert list(compare_charts.sweep_heatmap(slow).data[1].colorbar.ticktext) == ["0.25x", "0.5x", "1x", "2x", "4x"]
    # cells without a speedup yet are grey and say why, rather than left blank
    assert math.isnan(pending.z[0][0]) and pending.z[1][0] == 0.0 and pending.z[2][0] == 0.0
