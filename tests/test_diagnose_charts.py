"""The Diagnose page's charts and queries (ui.charts.diagnose_charts, ui.words.diagnose_queries): compile timelines,
shape schedules, runs side by side, kernels, the four-way and cold-against-warm cache charts."""
import math

import pandas as pd
import pytest

from tcore.experiment.spec import Experiment
from tcore.store import RunRecord
from tests.chart_data import annotation_text, subtitle
from ui.charts import diagnose_charts
from ui.words import diagnose_queries


@pytest.fixture
def static_schedule():
    """dynamic=False over 6 caption lengths with recompile_limit=4, shaped like a real CPU run."""
    sizes = [3, 5, 8, 11, 13, 16]
    events = [{"compile_id": "0/0", "frame": "forward", "kind": "compile", "t_s": 0.08, "duration_s": 0.52,
               "reason": "", "graph_ops": 115}]
    events += [{"compile_id": f"0/{i}", "frame": "forward", "kind": "recompile", "t_s": 0.1 + 0.5 * i,
                "duration_s": 0.4, "graph_ops": 115,
                "reason": f"0/{i - 1}: tensor 'tokens' size mismatch at index 1. expected {sizes[i - 1]}, "
                          f"actual {sizes[i]}"} for i in (1, 2, 3)]
    events.append({"compile_id": "0/4", "frame": None, "kind": "limit", "t_s": 1.95, "duration_s": 0.002,
                   "reason": "0/3: tensor 'tokens' size mismatch at index 1. expected 11, actual 13",
                   "graph_ops": None})
    schedule = [{"step": i, "size": s, "padded_to": s, "eager_ms": 1.2, "compiled_ms": 400.0 if 1 <= i <= 3 else 1.0,
                 "compiles": [f"0/{i}"] if 1 <= i <= 3 else [], "hit_limit": i == 4} for i, s in enumerate(sizes)]
    return {"compile_events": events, "schedule": schedule, "schedule_sizes": sizes,
            "schedule_dim": "caption length (tokens)", "schedule_buckets": [], "recompile_limit_hit": True,
            "speedup": 0.9, "compiled_samples_per_s": 1580.0, "unavailable": {}}


def test_timeline_one_trace_per_event_kind_with_markers_and_the_guard_in_the_hover(static_schedule):
    fig = diagnose_charts.compile_timeline(static_schedule)
    by_name = {t.name: t for t in fig.data}
    assert list(by_name) == ["First compile of a frame", "Recompile (a guard failed)",
                             "Recompile limit hit: eager from here"]
    recompiles = by_name["Recompile (a guard failed)"]
    assert recompiles.marker.symbol == "diamond" and list(recompiles.x) == [0.6, 1.1, 1.6]
    assert list(recompiles.y) == [0.4, 0.4, 0.4]  # y: how long each compilation took
    assert by_name["Recompile limit hit: eager from here"].marker.symbol == "x"
    hover = recompiles.hovertext[0]
    assert "tensor 'tokens' size mismatch at index 1. expected 3, actual 5" in hover
    assert "0/0:" not in hover  # the id prefix of torch's reason is dropped: the id is in the title
    assert "schedule step 1 (caption length (tokens) 5)" in hover
    (shade,) = fig.layout.shapes  # the eager fallback after the limit, from the limit event on
    assert shade.x0 == 1.95 and "eagerly" in annotation_text(fig)
    assert fig.layout.xaxis.title.text == "Time since the run started (s)"


def test_timeline_without_events_says_why():
    fig = diagnose_charts.compile_timeline(
        {"unavailable": {"compile_s": "nothing is compiled in this run (compile=off)"}})
    assert not fig.data and "compile=off" in annotation_text(fig)


def test_schedule_lines_compiled_and_eager_with_compile_steps_and_the_limit(static_schedule):
    fig = diagnose_charts.schedule_chart(static_schedule)
    eager, compiled = fig.data
    assert (eager.name, compiled.name) == ("Eager", "Compiled")
    assert list(compiled.y) == [1.0, 400.0, 400.0, 400.0, 1.0, 1.0]
    assert list(compiled.marker.symbol) == ["circle", "diamond", "diamond", "diamond", "x", "circle"]
    assert list(fig.layout.xaxis.ticktext) == ["3", "5", "8", "11", "13", "16"]
    assert fig.layout.yaxis.type == "log"  # compile steps are hundreds of times a normal step
    (shade,) = fig.layout.shapes
    assert shade.x0 == 3.5 and "recompile limit hit" in annotation_text(fig)
    assert "compiled 0/2" in compiled.hovertext[2]


def test_schedule_shows_padding_to_buckets_and_na_without_a_schedule():
    rows = [{"step": 0, "size": 5, "padded_to": 8, "eager_ms": 1.0, "compiled_ms": 0.8, "compiles": [],
             "hit_limit": False}, {"step": 1, "size": 8, "padded_to": 8, "eager_ms": 1.1, "compiled_ms": 0.8,
                                   "compiles": [], "hit_limit": False}]
    fig = diagnose_charts.schedule_chart({"schedule": rows, "schedule_dim": "batch size"})
    assert list(fig.layout.xaxis.ticktext) == ["5→8", "8"] and not fig.layout.shapes
    empty = diagnose_charts.schedule_chart({"schedule": []})
    assert not empty.data and "one fixed shape" in annotation_text(empty)


def test_side_by_side_one_panel_per_figure_and_na_for_a_missing_one():
    items = [("without the break", {"graph_count": 1, "compile_s": 18.8, "compiled_kernels_per_step": 43}),
             ("with the break", {"graph_count": 6, "compile_s": 41.0, "compiled_kernels_per_step": None})]
    panels = ["graph_count", "compile_s", "compiled_kernels_per_step"]
    fig = diagnose_charts.side_by_side(items, panels, title="What the break costs")
    assert [a.text for a in fig.layout.annotations] == ["Graphs", "Compile time (s)",
                                                        "Compiled kernels per<br>step"]
    assert [t.name for t in fig.data] == ["without the break", "with the break"] * 3  # panel by panel
    assert [t.y[0] for t in fig.data[:2]] == [1, 6]
    assert [t.text[0] for t in fig.data[2:4]] == ["18.8", "41.0"]
    assert fig.data[5].text[0] == "n/a" and math.isnan(fig.data[5].y[0])  # no bar, never a zero
    # One colour per run across the panels, named once in the legend.
    assert fig.data[0].marker.color == fig.data[2].marker.color != fig.data[1].marker.color
    assert [t.showlegend for t in fig.data] == [True, True, False, False, False, False]


def test_kernels_and_graph_ops_charts():
    result = {"eager_kernels_per_step": 51, "compiled_kernels_per_step": 17,
              "graphs": [{"compile_id": "0/0", "frame": "forward", "ops": 115, "compile_s": 18.8},
                         {"compile_id": "1/0", "frame": "torch_dynamo_resume_in_forward_at_74", "ops": 19,
                          "compile_s": 2.0}]}
    kernels = diagnose_charts.kernels_chart(result)
    assert list(kernels.data[0].y) == [51, 17] and "3.0x fewer launches" in subtitle(kernels)
    ops = diagnose_charts.graph_ops_chart(result)
    assert list(ops.data[0].x) == ["0/0 forward", "1/0 torch_dynamo_resume_in_forward_at_74"]
    assert list(ops.data[0].y) == [115, 19] and "2.00 s" in ops.data[0].hovertext[1]
    assert not diagnose_charts.kernels_chart({}).data


def test_four_way_bars_with_speedups_over_the_whole_model_cold_compile():
    # The H200 figures for Flux (full preset): only a sanity check of the labels here.
    fig = diagnose_charts.four_way_chart({("whole", "cold"): 75.3, ("whole", "warm"): 10.5, ("regional", "cold"): 9.5,
                                 ("regional", "warm"): 2.5})
    cold, warm = fig.data
    assert list(cold.x) == ["Whole model", "Regional (blocks)"] and list(cold.y) == [75.3, 9.5]
    assert list(cold.text) == ["75.3 s", "9.5 s<br>7.9x faster"]
    assert list(warm.text) == ["10.5 s<br>7.2x faster", "2.5 s<br>30.1x faster"]
    assert fig.layout.barmode == "group"
    partial = diagnose_charts.four_way_chart({("whole", "cold"): 20.0, ("regional", "cold"): None})
    assert list(partial.data[0].text) == ["20.0 s", "not run yet"]
    assert not diagnose_charts.four_way_chart({}).data


def test_cold_warm_groups_runs_by_settings_with_cache_hits_in_the_hover():
    frame = pd.DataFrame([
        {"id": "r4-dddddd", "label": "captioner/tiny bs8 fp32 inference, whole default", "settings": "k1",
         "cache": "artifacts", "cache_artifacts": "loaded", "compile_s": 3.1, "fx_graph_cache_hits": 1,
         "fx_graph_cache_misses": 0, "aot_autograd_cache_hits": 1},
        {"id": "r3-cccccc", "label": "captioner/tiny bs8 fp32 inference, whole default", "settings": "k1",
         "cache": "cold", "cache_artifacts": "none", "compile_s": 19.0, "fx_graph_cache_hits": 0,
         "fx_graph_cache_misses": 1, "aot_autograd_cache_hits": 0},
        {"id": "r2-bbbbbb", "label": "captioner/tiny bs8 fp32 inference, whole default", "settings": "k1",
         "cache": "cold", "cache_artifacts": "none", "compile_s": 25.0, "fx_graph_cache_hits": 0,
         "fx_graph_cache_misses": 1, "aot_autograd_cache_hits": 0},  # an older cold run: the newest one shows
        {"id": "r1-aaaaaa", "label": "captioner/tiny bs8 fp32 inference, regional default", "settings": "k2",
         "cache": "artifacts", "cache_artifacts": "cold", "compile_s": 9.0, "fx_graph_cache_hits": 0,
         "fx_graph_cache_misses": 2, "aot_autograd_cache_hits": 0},
    ])
    fig = diagnose_charts.cold_warm_chart(frame)
    by_name = {t.name: t for t in fig.data}
    assert list(by_name) == ["cold", "artifacts loaded", "artifacts not loaded (compiled cold)"]
    assert list(by_name["cold"].x)[0] == 19.0 and math.isnan(by_name["cold"].x[1])
    assert by_name["artifacts loaded"].y[0] == "captioner/tiny bs8 fp32 inference<br>whole default"
    assert "FX graph cache: 1 hits, 0 misses" in by_name["artifacts loaded"].hovertext[0]
    assert "AOT autograd cache: 1 hits" in by_name["artifacts loaded"].hovertext[0]
    assert "hover a bar for its cache hits" in subtitle(fig)
    assert not diagnose_charts.cold_warm_chart(frame.assign(compile_s=None)).data


def record(run_id, spec, result=None, status="finished"):
    return RunRecord(id=run_id, status=status, created_at=0, label="", spec=spec, result=result or {}, device="cpu")


def test_four_way_picks_the_newest_run_of_each_cell_with_the_same_settings():
    base = Experiment(model="captioner", device="cpu").to_dict()
    records = [  # newest first
        record("regional-warm", {**base, "compile": "regional", "cache": "artifacts"},
               {"compile_s": 1.0, "cache_artifacts": "loaded"}),
        record("whole-fell-back", {**base, "cache": "artifacts"}, {"compile_s": 18.0, "cache_artifacts": "cold"}),
        record("regional-cold", {**base, "compile": "regional"}, {"compile_s": 8.0}),
        record("whole-cold-bigger", {**base, "batch_size": 64}, {"compile_s": 30.0}),  # other settings: left out
        # An aot_eager shape-schedule run showed as "whole model cold 1.5 s"
        record("schedule-aot-eager", {**base, "backend": "aot_eager", "shape_count": 6}, {"compile_s": 1.5}),
        record("whole-cold", base, {"compile_s": 20.0}),
    ]
    cells = diagnose_queries.four_way(records, base)
    # An artifacts run that loaded nothing compiled cold, so it counts as cold.
    assert {k: r.id for k, r in cells.items()} == {("regional", "warm"): "regional-warm",
                                                    ("whole", "cold"): "whole-fell-back",
                                                    ("regional", "cold"): "regional-cold"}


def test_the_compilations_chart_says_it_counts_compilations_not_graphs():
    """'Dynamo captured 2 graphs' beside a chart of '4 graphs'."""
    from ui.charts import diagnose_charts

    fig = diagnose_charts.graph_ops_chart({"graphs": [{"compile_id": f"0/{i}", "frame": "forward", "ops": 10}
                                                      for i in range(4)]})
    assert fig.layout.title.text.startswith("Operations per compilation")
    assert "4 compilations, recompiles included" in subtitle(fig)
