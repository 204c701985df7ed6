"""Chart builders and the words beside them, on hand-made results: right traces, units, n/a with its reason."""
import math

import pandas as pd
import plotly.graph_objects as go
import pytest

from tcore import figures
from tcore.advice import inside_torch
from tcore.spec import Experiment
from tcore.store import RunRecord
from tests.helpers import gpu_like_result, power_trace, recorded_run
from ui import charts, compare_charts, diagnose_charts, diagnose_queries, graph_words, run_state, run_words, sweep_matrix

NO_RAPL = "no RAPL energy counter on this CPU (/sys/class/powercap/intel-rapl:* is absent)"


def variant(prefix, steps, batch=32, power=None, energy=None, mem=1.5, p50=8.0, p95=9.0):
    return {f"{prefix}_steps_per_s": steps, f"{prefix}_steps_per_s_min": steps * 0.9,
            f"{prefix}_steps_per_s_max": steps * 1.05, f"{prefix}_samples_per_s": steps * batch,
            f"{prefix}_latency_ms_p50": p50, f"{prefix}_latency_ms_p95": p95, f"{prefix}_peak_mem_gib": mem,
            f"{prefix}_power_w": power, f"{prefix}_energy_j_per_step": energy,
            f"{prefix}_energy_j_per_sample": energy and energy / batch}


@pytest.fixture
def gpu_result():
    """Shaped like a real H200 run of captioner/small (figures rounded)."""
    return {
        **variant("eager", 124.8, power=582.0, energy=4.67, mem=3.1, p50=8.0, p95=8.2),
        **variant("compiled", 142.8, power=591.0, energy=4.14, mem=2.4, p50=7.0, p95=7.1),
        "speedup": 1.144, "compile_s": 11.24, "breakeven_steps": 11121.0, "device": "cuda",
        "variants": ["eager", "compiled"],
        "compile_phases_s": {"dynamo_tracing_s": 1.22, "aot_autograd_s": 2.52, "inductor_lowering_s": 2.37,
                             "codegen_and_compile_s": 4.34},
        "graph_count": 3, "graph_break_count": 4,
        "graph_breaks": [{"reason": "Unsupported Tensor.item() call with capture_scalar_outputs=False\n  Explanation: "
                                    "Dynamo does not support tracing", "count": 4}],
        "recompile_count": 1,
        "recompiles": [{"compile_id": "0/1", "frame": "forward",
                        "reason": "0/0: tensor 'x' size mismatch at index 1. expected 32, actual 128"}],
        "correctness_ok": True, "correctness_rel_diff": 9.3e-07, "correctness_tolerance": 1e-3,
        "peak_mem_source": "GPU allocator peak (max_memory_allocated)", "power_source": "nvml",
        "notes": [], "unavailable": {},
    }


@pytest.fixture
def cpu_eager_only():
    """compile=off on a CPU without RAPL: no compiled variant, no energy, no speedup."""
    return {
        **variant("eager", 2.7, batch=8),
        "device": "cpu", "speedup": None, "compile_s": None, "breakeven_steps": None, "notes": [],
        "unavailable": {"speedup": "nothing is compiled in this run (compile=off)",
                        "compile_s": "nothing is compiled in this run (compile=off)",
                        "eager_power_w": NO_RAPL, "eager_energy_j_per_step": NO_RAPL,
                        "eager_energy_j_per_sample": NO_RAPL},
    }


def subtitle(fig: go.Figure) -> str:
    """The subtitle as words: _style wraps it onto lines of a narrow chart's width."""
    return (fig.layout.title.subtitle.text or "").replace("<br>", " ")


def annotation_text(fig: go.Figure) -> str:
    return " ".join(a.text for a in fig.layout.annotations)


def test_throughput_bars_with_round_spread(gpu_result):
    fig = charts.throughput_chart(gpu_result)
    (bar,) = fig.data
    assert list(bar.x) == ["Eager", "Compiled"]
    assert bar.y == pytest.approx([124.8 * 32, 142.8 * 32])
    # whiskers reach the slowest and fastest round, in samples/s
    assert bar.error_y.arrayminus[1] == pytest.approx(142.8 * 32 * 0.1)
    assert bar.error_y.array[1] == pytest.approx(142.8 * 32 * 0.05)
    assert fig.layout.yaxis.title.text == "Throughput (samples/s)"
    assert bar.text[0] == "3993.6"  # the unit is in the title: a narrow bar holds the number alone


def test_latency_groups_p50_and_p95_per_variant(gpu_result):
    fig = charts.latency_chart(gpu_result)
    assert [t.name for t in fig.data] == ["Eager", "Compiled"]
    assert list(fig.data[1].y) == [7.0, 7.1]
    assert fig.layout.yaxis.title.text == "Step latency (ms)"
    assert fig.layout.barmode == "group"


def test_memory_and_energy_carry_units(gpu_result):
    memory = charts.variant_bar(gpu_result, "peak_mem_gib")
    assert memory.layout.yaxis.title.text == "Peak memory (GiB)"
    assert list(memory.data[0].text) == ["3.100<br>GiB", "2.400<br>GiB"]
    energy = charts.energy_chart(gpu_result)
    assert [a.text for a in energy.layout.annotations] == ["Mean power (W)", "Energy per<br>step (J)"]
    assert [t.y[0] for t in energy.data[2:]] == [4.67, 4.14]
    assert [t.name for t in energy.data if t.showlegend] == ["Eager", "Compiled"]


def test_energy_without_a_meter_says_na_and_why(cpu_eager_only):
    fig = charts.energy_chart(cpu_eager_only)
    assert not fig.data
    assert "n/a" in annotation_text(fig) and "RAPL" in annotation_text(fig)


def test_eager_only_run_draws_one_bar_and_no_compile_split(cpu_eager_only):
    assert list(charts.throughput_chart(cpu_eager_only).data[0].x) == ["Eager"]
    phases = charts.compile_phases_chart(cpu_eager_only)
    assert not phases.data and "compile=off" in annotation_text(phases)


def test_compile_phases_stack_to_the_compile_time(gpu_result):
    fig = charts.compile_phases_chart(gpu_result)
    names = [t.name for t in fig.data]
    assert names[:4] == ["Dynamo tracing and guards: 1.22 s", "AOT autograd: 2.52 s",
                         "Inductor lowering and passes: 2.37 s", "Code generation and C++/Triton compile: 4.34 s"]
    assert names[4].startswith("Not in a phase timer")  # 11.24 s minus the 10.45 s the timers saw
    assert sum(t.x[0] for t in fig.data) == pytest.approx(11.24)
    assert fig.layout.barmode == "stack"
    assert fig.layout.xaxis.title.text == "Compile time (s)"


def test_power_trace_one_line_per_phase_and_utilisation():
    trace = [[0.1, 80, "building", 0], [0.2, 120, "eager", 40], [0.3, 130, "eager", 50],
             [0.4, 300, "compiling", 10], [0.5, 580, "measuring", 95]]
    fig = charts.power_trace_chart(trace)
    names = [t.name for t in fig.data]
    assert names == ["Building the model", "Eager baseline (warm-up)", "Compiling (first call)",
                     "Measuring eager vs compiled", "Utilisation (%)"]
    assert list(fig.data[1].x) == [0.2, 0.3, 0.4]  # runs on into the next phase: no gap in the line
    assert fig.layout.yaxis.title.text == "Power (W)"
    assert fig.layout.yaxis2.title.text == "Utilisation (%)"


def test_power_trace_without_samples_is_na():
    fig = charts.power_trace_chart([])
    assert not fig.data and "n/a" in annotation_text(fig)


def test_power_trace_without_utilisation_has_no_second_axis():
    fig = charts.power_trace_chart([[0.1, 20.0, "idle", None], [1.1, 22.0, "idle", None]])
    assert [t.name for t in fig.data] == ["idle"]


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
    assert heat.z[0][0] == 1.5 and math.isnan(heat.z[1][0])
    assert heat.text[0][0] == "1.50x<br>20.0 s" and heat.text[1][0] == "running"
    assert heat.zmid == 1.0
    # cells without a speedup yet are grey and say why, rather than left blank
    assert math.isnan(pending.z[0][0]) and pending.z[1][0] == 0.0 and pending.z[2][0] == 0.0


def test_graph_words_name_breaks_and_recompiles(gpu_result):
    words = "\n".join(graph_words.graph_words(gpu_result))
    assert "Dynamo compiled **3 graphs**: 2 pieces of the model between its graph breaks, plus 1 recompilation" in words
    assert "**1 graph break**, counted by place in the code" in words
    assert ("- graph break: Unsupported Tensor.item() call with capture_scalar_outputs=False; Dynamo met it 4 times"
            in words)
    assert "Explanation" not in words  # only the headline line of torch's message
    assert "recompile 0/1 of `forward`: tensor 'x' size mismatch at index 1. expected 32, actual 128" in words


def test_graph_words_say_where_a_break_is_and_count_kernels():
    words = graph_words.graph_words({
        "graph_count": 2, "graph_break_count": 1, "eager_kernels_per_step": 67, "compiled_kernels_per_step": 12,
        "graph_breaks": [{"reason": "Unsupported Tensor.item() call", "count": 1, "line": 74,
                          "file": "/repo/sample_models/captioner.py", "source": "if x.abs().mean().item() > 1e4:"}]})
    assert ("- graph break at `captioner.py:74` (`if x.abs().mean().item() > 1e4:`): Unsupported Tensor.item() "
            "call") in words
    assert "Kernels launched per step: 67 eager, 12 compiled (fusion merged them)." in words


def test_graph_words_name_the_recompile_limit():
    words = graph_words.graph_words({"recompile_count": 2, "recompiles": [
        {"compile_id": "0/1", "frame": "forward", "reason": "0/0: tensor 'tokens' size mismatch at index 1"},
        {"compile_id": "0/2", "frame": None, "reason": "0/1: tensor 'tokens' size mismatch at index 1"}]})
    assert "- recompile 0/1 of `forward`: tensor 'tokens' size mismatch at index 1" in words
    assert "- 0/2: the recompile limit was hit, no compile: tensor 'tokens' size mismatch at index 1" in words


def test_cuda_graph_skips_on_the_cpu_say_why_and_on_a_gpu_give_torchs_reason():
    cpu = graph_words.graph_words({"device": "cpu", "cudagraph_skip_count": 2, "cudagraph_skip_reasons": []})
    assert cpu == ["CUDA graphs were skipped 2 time(s): there are no CUDA graphs on the CPU, so reduce-overhead and "
                   "max-autotune run without them here."]
    gpu = graph_words.graph_words({"device": "cuda", "cudagraph_skip_count": 1,
                               "cudagraph_skip_reasons": ["skipping cudagraphs due to mutated inputs (1 instances)"]})
    assert gpu == ["CUDA graphs were skipped 1 time(s): skipping cudagraphs due to mutated inputs (1 instances)."]
    assert "torch gave no reason" in graph_words.graph_words({"device": "cuda", "cudagraph_skip_count": 1})[0]


def test_graph_words_for_a_clean_compile():
    words = graph_words.graph_words({"graph_count": 1, "graph_break_count": 0, "graph_breaks": [],
                                 "recompile_count": 0, "recompiles": []})
    assert words == ["Dynamo captured 1 graph with no graph breaks.", "No recompilations."]


def test_correctness_and_payback_words(gpu_result):
    ok, text = run_words.correctness_words(gpu_result, "float32")
    assert ok and "within the float32 tolerance of 0.001" in text
    bad = {**gpu_result, "correctness_ok": False, "correctness_rel_diff": 0.2}
    assert run_words.correctness_words(bad, "float32")[1].startswith("Compiled output DIFFERS")
    assert run_words.correctness_words({}, "float32")[0] is None
    assert "11,121 steps" in run_words.payback_words(gpu_result)
    assert run_words.payback_words({"breakeven_steps": None}) is None


def test_headline_gives_units_or_the_reason(gpu_result, cpu_eager_only):
    assert run_words.headline(gpu_result)["speedup"] == ("1.14 x", None)
    assert run_words.headline(gpu_result)["compile_s"] == ("11.2 s", None)
    assert run_words.headline(cpu_eager_only)["speedup"] == ("n/a", "nothing is compiled in this run (compile=off)")


def test_best_setting_names_fastest_and_soonest_payback():
    matrix = pd.DataFrame([
        {"setting": "whole · max-autotune", "speedup": 1.6, "compile_s": 90.0, "breakeven_steps": 5000.0},
        {"setting": "regional · default", "speedup": 1.3, "compile_s": 9.0, "breakeven_steps": 700.0},
        {"setting": "off (eager)", "speedup": None, "compile_s": None, "breakeven_steps": None},
    ])
    text = sweep_matrix.best_setting(matrix)
    assert text.startswith("Fastest: **whole · max-autotune**, 1.60x eager after 90.0 s")
    assert "Pays back soonest: **regional · default**" in text
    assert sweep_matrix.best_setting(matrix.iloc[2:]) is None


def test_best_setting_gives_its_spread_and_names_the_settings_it_cannot_be_told_from():
    matrix = pd.DataFrame([
        {"setting": "whole · default", "speedup": 1.50, "speedup_min": 1.20, "speedup_max": 1.90, "compile_s": 20.0,
         "breakeven_steps": 900.0},
        {"setting": "regional · default", "speedup": 1.40, "speedup_min": 1.25, "speedup_max": 1.45, "compile_s": 8.0,
         "breakeven_steps": 400.0},
        {"setting": "whole · lite", "speedup": 1.05, "speedup_min": 1.00, "speedup_max": 1.10, "compile_s": 6.0,
         "breakeven_steps": None},
    ])
    text = sweep_matrix.best_setting(matrix)
    assert text.startswith("Fastest: **whole · default**, 1.50x eager (rounds 1.20–1.90x) after 20.0 s")
    assert "cannot tell it apart** from **regional · default**: their rounds overlap" in text
    assert "whole · lite**" not in text


# --- Why is it slow: compile events, schedules, strategies, caches ---------------------------------

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
    fig = diagnose_charts.compile_timeline({"unavailable": {"compile_s": "nothing is compiled in this run (compile=off)"}})
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


def test_break_grouping_strategies_and_queue_words():
    breaks = [{"reason": "Unsupported Tensor.item() call\n  Explanation: ...", "file": "/r/captioner.py", "line": 74,
               "count": 1, "skipped_frame": True, "source": "if x.abs().mean().item() > 1e4:", "hint": "Hint: x"},
              {"reason": "Unsupported Tensor.item() call", "file": "/r/captioner.py", "line": 74, "count": 1,
               "skipped_frame": False, "source": "if x.abs().mean().item() > 1e4:", "hint": "Hint: x"},
              {"reason": "Unsupported Tensor.item() call", "file": "/r/captioner.py", "line": 97, "count": 1,
               "skipped_frame": False, "source": "if x.abs().mean().item() > 1e4:", "hint": "Hint: x"}]
    grouped = graph_words.group_breaks(breaks)
    assert [(b["line"], b["count"], b["skipped_frame"]) for b in grouped] == [(74, 2, True), (97, 1, False)]
    assert graph_words.break_title(grouped[0]) == "`captioner.py:74`: Unsupported Tensor.item() call (hit 2 times)"

    assert [diagnose_queries.strategy_of({"shape_count": 6, **changes}) for _, changes, _ in diagnose_queries.STRATEGIES.values()] \
        == list(diagnose_queries.STRATEGIES)
    assert diagnose_queries.strategy_of({"shape_count": 0, "dynamic": False}) is None
    assert figures.compile_totals([{"kind": "compile", "duration_s": 0.5}, {"kind": "recompile", "duration_s": 0.25},
                                   {"kind": "limit", "duration_s": 0.01}]) == {"compilations": 2, "compiling_s": 0.75}

    from tcore.lab.scheduler import Wait, wait_words

    assert run_state.queue_words(2, Wait(95.0, 1200.0), 12.0) == "#2 in the queue · starts in about 1 min 35 s · waited 12 s"
    assert "no estimate yet" in run_state.queue_words(1, None, 0.0)
    assert wait_words(Wait(None, 180.0, "a run ahead has run 12 min, past the 40 s that runs like it took"))[0] \
        == "late: starts within 3 min 00 s at the latest"


def test_whose_run_it_is_reads_as_the_name_its_owner_chose():
    from ui import people, queue

    assert queue.whose("ada~3f9a", "ada~3f9a") == "yours"
    assert queue.whose("ada~3f9a", "guest-0badc0") == "ada"
    assert queue.whose("guest-0badc0", "ada~3f9a") == "guest 0bad"
    assert queue.whose("host:123", "abc") == "the command line or a sweep"
    assert queue.whose("9f1c0e", "abc") == "another session"  # a session id from before names
    assert people.owner_for("  Ada Lovelace! ", "guest-0badc0") == "ada-lovelace~0bad"
    assert people.owner_for("Ada", "ada-l~0bad") == "ada~0bad"  # a new name keeps the tag
    assert people.owner_for("!!", "guest-0badc0") is None


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
        # The walk-through's item 2: an aot_eager shape-schedule run showed as "whole model cold 1.5 s"
        record("schedule-aot-eager", {**base, "backend": "aot_eager", "shape_count": 6}, {"compile_s": 1.5}),
        record("whole-cold", base, {"compile_s": 20.0}),
    ]
    cells = diagnose_queries.four_way(records, base)
    # An artifacts run that loaded nothing compiled cold, so it counts as cold.
    assert {k: r.id for k, r in cells.items()} == {("regional", "warm"): "regional-warm",
                                                    ("whole", "cold"): "whole-fell-back",
                                                    ("regional", "cold"): "regional-cold"}


def test_break_pair_words_say_what_the_break_cost():
    clean = {"graph_count": 1, "compiled_samples_per_s": 5591.7, "compile_s": 18.2}
    broken = {"graph_count": 6, "compiled_samples_per_s": 4192.3, "compile_s": 17.7}
    assert graph_words.break_pair_words(clean, broken) == ("With the break, Dynamo captured **6 graphs** instead of 1; "
                                                       "the model runs at **75%** of the throughput; compiling took "
                                                       "17.7 s instead of 18.2 s.")
    assert graph_words.break_pair_words({"graph_count": 1}, {"graph_count": 3}) == \
        "With the break, Dynamo captured **3 graphs** instead of 1."


def test_the_baseline_sentence_says_which_precision_and_layout_eager_ran_in():
    from ui.run_words import baseline_words

    tuned = baseline_words({"model": "resnet50", "precision": "bf16", "channels_last": True}, "cuda")
    assert "**bf16**" in tuned and "channels_last**, as people tune a CNN" in tuned
    assert "Eager runs in **NCHW**" in baseline_words({"model": "resnet50", "channels_last": False}, "cuda")
    assert "NCHW" not in baseline_words({"model": "flux", "precision": "bf16"}, "cuda")
    assert "runs as fp32" in baseline_words({"model": "flux", "precision": "tf32"}, "cpu")


def test_breakdown_charts_stack_the_categories_and_say_why_when_absent():
    from ui.charts import runs_breakdown_chart, variant_breakdown_chart

    bd = {"step_ms": 6.0, "steps": 3, "source": "gpu kernels", "overlap_ms": 0.0, "top": [],
          "ms": {"matmul": 3.0, "pointwise": 1.5, "copy": 0.0, "idle": 1.5}}
    result = {"variants": ["eager", "compiled"], "breakdown": {"eager": bd, "compiled": bd}}
    fig = variant_breakdown_chart(result)
    assert fig.layout.barmode == "stack"
    assert [t.name for t in fig.data] == ["Matmuls and convolutions", "Pointwise, norms and reductions", "Idle"]
    assert list(fig.data[0].y) == ["Eager", "Compiled"] and list(fig.data[0].x) == [3.0, 3.0]
    old = variant_breakdown_chart({"variants": ["eager", "compiled"]})
    assert "stored before Compile Lab profiled steps" in old.layout.annotations[0].text
    both = runs_breakdown_chart([("a", result), ("b", {"variants": ["eager"]})])
    assert list(both.data[0].y) == ["a · eager", "a · compiled"]


def test_a_break_inside_pytorch_says_so_instead_of_torchs_hint():
    """The walk-through's item 6: a compiled optimizer's break at torch/optim/optimizer.py came with the hint
    "Remove the torch._dynamo.graph_break() call", which is PyTorch's own, on purpose."""
    optimizer = {"file": "/usr/lib/python3.12/site-packages/torch/optim/optimizer.py", "line": 79,
                 "hint": "Hint: Remove the torch._dynamo.graph_break() call."}
    assert inside_torch(optimizer["file"]) == "torch/optim/optimizer.py"
    assert "on purpose, before every optimizer step" in graph_words.torch_break_words(optimizer)
    other = {"file": "/opt/venv/lib/python3.11/dist-packages/torch/nn/modules/module.py", "line": 1}
    assert "inside PyTorch itself (torch/nn/modules/module.py), not in your code" in graph_words.torch_break_words(other)
    assert graph_words.torch_break_words({"file": "/work/main/sample_models/captioner.py", "line": 120}) is None


def test_the_compilations_chart_says_it_counts_compilations_not_graphs():
    """The walk-through's item 5: 'Dynamo captured 2 graphs' beside a chart of '4 graphs'."""
    from ui import diagnose_charts

    fig = diagnose_charts.graph_ops_chart({"graphs": [{"compile_id": f"0/{i}", "frame": "forward", "ops": 10}
                                                      for i in range(4)]})
    assert fig.layout.title.text.startswith("Operations per compilation")
    assert "4 compilations, recompiles included" in subtitle(fig)


# --- What fits a laptop's screen (the walk-through's item 13) ---------------------------------------------

def lab_results() -> dict[str, dict]:
    """Results with a workshop's spread of magnitudes: Flux at ~92 samples/s, the captioner at ~4,700, a real CPU
    run, one where a small compile phase sits beside a large one, and a shape schedule inside one decade of ms."""
    flux = gpu_like_result(samples_per_s=92.0, speedup=2.29, compile_s=68.0, batch=2, power_w=583.0)
    flux["compile_phases_s"] = {"dynamo_tracing_s": 5.2, "aot_autograd_s": 2.1, "inductor_lowering_s": 0.73,
                                "codegen_and_compile_s": 59.9}  # 2.10 and 0.73 s would print over each other
    steady = [{"step": i, "size": n, "padded_to": n, "eager_ms": 1.2 + 0.05 * i, "compiled_ms": 1.1 + 0.04 * i,
               "compiles": [], "hit_limit": False} for i, n in enumerate([3, 5, 8, 11])]
    return {"flux": flux, "captioner": gpu_like_result(samples_per_s=4700.0, speedup=1.41, compile_s=9.8, batch=64),
            "cpu": recorded_run()["result"], "steady_schedule": {"schedule": steady, "schedule_dim": "caption length (tokens)"}}


def lab_frame() -> pd.DataFrame:
    results = lab_results()
    rows = []
    for i, (model, name) in enumerate([("flux", "flux"), ("captioner", "captioner"), ("resnet50", "cpu")]):
        r = results[name]
        rows.append({"id": f"20260101-00000{i}-{name[:6]:a<6}", "model": model, "label": f"{model}/x bs2 bf16 inference, whole default",
                     "cache": "cold", "cache_artifacts": None, **{k: v for k, v in r.items() if not isinstance(v, (list, dict))}})
    return pd.DataFrame(rows)


def every_chart() -> dict[str, go.Figure]:
    results, frame = lab_results(), lab_frame()
    flux = results["flux"]
    items = [("without the break", flux), ("with the break", results["captioner"])]
    return {
        "throughput": charts.throughput_chart(flux), "latency": charts.latency_chart(flux),
        "memory": charts.variant_bar(flux, "peak_mem_gib"), "energy": charts.energy_chart(flux),
        "phases": charts.compile_phases_chart(flux), "trace": charts.power_trace_chart(power_trace()),
        "compare_compile": compare_charts.compare_bars(frame, "compile_s", "Compile time", "s"),
        "compare_throughput": compare_charts.compare_variants(frame, "samples_per_s"),
        "compare_energy": compare_charts.compare_variants(frame, "energy_j_per_step"),
        "scatter": compare_charts.tradeoff_scatter(frame), "breakdown": charts.variant_breakdown_chart(results["cpu"]),
        "runs_breakdown": compare_charts.runs_breakdown_chart([("flux/x bs2, whole", results["cpu"])]),
        "break_pair": diagnose_charts.side_by_side(items, ["compiled_samples_per_s", "speedup", "graph_count", "compile_s",
                                                           "compiled_kernels_per_step"], title="What the break costs",
                                                   subtitle="each panel: one figure, both runs"),
        "schedule": diagnose_charts.schedule_chart(results["steady_schedule"]),
        "timeline": diagnose_charts.compile_timeline(results["cpu"]),
        "four_way": diagnose_charts.four_way_chart({("whole", "cold"): 20.0, ("regional", "cold"): 8.0}),
        "cold_warm": diagnose_charts.cold_warm_chart(frame),
        "kernels": diagnose_charts.kernels_chart(results["cpu"]), "ops": diagnose_charts.graph_ops_chart(results["cpu"]),
    }


# The narrowest charts: two across the Run page's result column, about 220 px each in a 1280-px window. Those
# in half of the Compare or Diagnose page are about twice as wide.
RUN_PAGE_PAIRS = ["throughput", "latency", "memory", "energy"]
HALF_PAGE = ["compare_compile", "compare_throughput", "compare_energy", "scatter", "cold_warm", "schedule", "timeline",
             "kernels", "ops"]


def test_titles_fit_and_subtitles_wrap_with_room_above_the_plot():
    for name, fig in every_chart().items():
        title, text = fig.layout.title.text, fig.layout.title.subtitle.text
        assert "<br>" not in title, name  # plotly draws a second title line over the margin's top edge
        if name in RUN_PAGE_PAIRS:
            assert len(title) <= charts.TITLE_CHARS, (name, title)
        elif name in HALF_PAGE:
            assert len(title) <= 2 * charts.TITLE_CHARS, (name, title)
        lines = text.split("<br>") if text else []
        assert all(len(line) <= charts.SUBTITLE_CHARS for line in lines), (name, lines)
        assert fig.layout.margin.t >= 50 + 16 * len(lines), name  # the title, then each subtitle line


def test_legends_sit_below_the_plot_never_over_the_title():
    shown = 0
    for name, fig in every_chart().items():
        if not fig.layout.showlegend:
            continue
        shown += 1
        legend = fig.layout.legend
        assert (legend.yref, legend.y, legend.yanchor, legend.xref) == ("container", 0, "bottom", "container"), name
    assert shown >= 10


def test_log_axes_show_at_least_two_numbers_in_view():
    fig = every_chart()["schedule"]  # 1.1 to 1.4 ms: no power of ten in view, so plotly alone would print none
    axis = fig.layout.yaxis
    assert axis.type == "log"
    low, high = (10 ** end for end in axis.range)
    assert len([t for t in axis.tickvals if low <= t <= high]) >= 2
    assert diagnose_charts.log_ticks(1.1, 1.6) == [1.0, 2.0]
    assert diagnose_charts.log_ticks(1.0, 400.0) == [1.0, 10.0, 100.0, 1000.0]  # past two decades: powers of ten


def test_the_schedule_axis_spans_its_steps_whatever_the_recompile_limit_label_needs():
    rows = [{"step": i, "size": n, "padded_to": n, "eager_ms": 2.0, "compiled_ms": 300.0 if i < 8 else 2.5,
             "compiles": [f"0/{i}"] if i < 8 else [], "hit_limit": i == 8} for i, n in enumerate(range(2, 12))]
    fig = diagnose_charts.schedule_chart({"schedule": rows, "schedule_dim": "caption length (tokens)"})
    # Left to autorange, the axis widened to hold the shaded stretch's label and squeezed ten steps into a corner.
    assert list(fig.layout.xaxis.range) == [-0.5, 9.5]


def test_a_compile_phase_too_narrow_for_its_number_is_named_in_the_legend_only():
    fig = every_chart()["phases"]
    total = sum(t.x[0] for t in fig.data)
    labelled = {t.name: t.text for t in fig.data if t.text}
    assert all(t.x[0] >= charts.PHASE_LABEL_MIN_SHARE * total for t in fig.data if t.text)
    assert "AOT autograd: 2.10 s" not in labelled and "Inductor lowering and passes: 0.73 s" not in labelled
    assert [t.name for t in fig.data][2] == "Inductor lowering and passes: 0.73 s"  # still named, with its time


def test_compare_puts_each_model_on_its_own_axis():
    fig = every_chart()["compare_throughput"]
    axes = {t.xaxis for t in fig.data}
    assert len(axes) == 3  # flux, captioner, resnet50: ~92 samples/s is not a sliver beside ~4,700
    assert [a.text for a in fig.layout.annotations] == ["flux", "captioner", "resnet50"]
    assert [t.showlegend for t in fig.data].count(True) == 2  # Eager and Compiled, once


def test_panel_titles_wrap_to_their_panel():
    fig = every_chart()["break_pair"]
    for a in fig.layout.annotations:
        assert all(len(line) <= diagnose_charts.PANEL_TITLE_CHARS for line in a.text.split("<br>")), a.text


def test_metric_tiles_fit_a_third_of_the_run_column_at_any_magnitude():
    big = {**lab_results()["captioner"], "breakeven_steps": 59391.0, "compile_s": 1234.5, "speedup_min": 0.41,
           "speedup_max": 16.1, "eager_samples_per_s": 123456.7, "compiled_samples_per_s": 234567.8}
    for result in (*lab_results().values(), big):
        for tile in (t for row in run_words.headline_tiles(result) for t in row):
            assert len(tile["label"]) <= run_words.TILE_LABEL_CHARS, tile
            assert len(tile["value"]) <= run_words.TILE_VALUE_CHARS, tile
    top, bottom = run_words.headline_tiles(big)
    assert [t["label"] for t in top] == ["Speedup", "Compile time", "Break-even (steps)"]
    assert [t["value"] for t in top] == ["1.41 x", "1234.5 s", "59391"]
    assert [t["label"] for t in bottom] == ["Eager samples/s", "Compiled samples/s"]
