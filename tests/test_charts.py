"""Chart builders and the words beside them, on hand-made results: right traces, units, n/a with its reason."""
import math

import pandas as pd
import plotly.graph_objects as go
import pytest

from tcore.spec import Experiment
from tcore.store import RunRecord
from ui import charts, summary

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
    assert bar.text[0] == "3993.6<br>samples/s"


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
    assert [fig_axis.title.text for fig_axis in (energy.layout.yaxis, energy.layout.yaxis2)] == [
        "Mean power (W)", "Energy per step (J)"]
    assert list(energy.data[1].y) == [4.67, 4.14]


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
    assert names[:4] == ["Dynamo tracing and guards", "AOT autograd", "Inductor lowering and passes",
                         "Code generation and C++/Triton compile"]
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
    compile_fig = charts.compare_bars(frame, "compile_s", "Compile time", "s")
    assert list(compile_fig.data[0].y) == list(charts.run_names(frame, wrap=True))
    assert compile_fig.data[0].y[1] == "captioner/tiny bs8 fp32 inference<br>regional default · bbbbbb"
    assert compile_fig.layout.xaxis.title.text == "Compile time (s)"
    throughput = charts.compare_variants(frame, "samples_per_s", better="higher")
    assert [t.name for t in throughput.data] == ["Eager", "Compiled"]
    assert math.isnan(throughput.data[1].x[2])  # the eager-only run has no compiled bar
    assert "empty row" not in throughput.layout.title.subtitle.text  # it has its eager bar
    energy = charts.compare_variants(frame, "energy_j_per_step", better="lower", reason=NO_RAPL)
    assert not energy.data and "RAPL" in annotation_text(energy)
    frame.loc[0, "compiled_energy_j_per_step"] = 2.0  # one run had a meter, the other two did not
    energy = charts.compare_variants(frame, "energy_j_per_step", better="lower")
    assert "an empty row: not measured in that run" in energy.layout.title.subtitle.text


def test_tradeoff_scatter_skips_runs_without_speedup_and_hovers_label():
    fig = charts.tradeoff_scatter(runs_frame())
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
    matrix = summary.sweep_matrix(exps, [done, "running", "waiting"])
    fig = charts.sweep_heatmap(matrix)
    pending, heat = fig.data
    assert list(heat.y) == ["whole · default", "regional · default", "whole · lite"]
    assert heat.z[0][0] == 1.5 and math.isnan(heat.z[1][0])
    assert heat.text[0][0] == "1.50x<br>20.0 s" and heat.text[1][0] == "running"
    assert heat.zmid == 1.0
    # cells without a speedup yet are grey and say why, rather than left blank
    assert math.isnan(pending.z[0][0]) and pending.z[1][0] == 0.0 and pending.z[2][0] == 0.0


def test_graph_words_name_breaks_and_recompiles(gpu_result):
    words = "\n".join(summary.graph_words(gpu_result))
    assert "captured 3 graphs and hit 4 graph breaks" in words
    assert "- graph break: Unsupported Tensor.item() call with capture_scalar_outputs=False (x4)" in words
    assert "Explanation" not in words  # only the headline line of torch's message
    assert "recompile 0/1 of `forward`: tensor 'x' size mismatch at index 1. expected 32, actual 128" in words


def test_graph_words_say_where_a_break_is_and_count_kernels():
    words = summary.graph_words({
        "graph_count": 2, "graph_break_count": 1, "eager_kernels_per_step": 67, "compiled_kernels_per_step": 12,
        "graph_breaks": [{"reason": "Unsupported Tensor.item() call", "count": 1, "line": 74,
                          "file": "/repo/sample_models/captioner.py", "source": "if x.abs().mean().item() > 1e4:"}]})
    assert ("- graph break at `captioner.py:74` (`if x.abs().mean().item() > 1e4:`): Unsupported Tensor.item() "
            "call (x1)") in words
    assert "Kernels launched per step: 67 eager, 12 compiled (fusion merged them)." in words


def test_graph_words_for_a_clean_compile():
    words = summary.graph_words({"graph_count": 1, "graph_break_count": 0, "graph_breaks": [],
                                 "recompile_count": 0, "recompiles": []})
    assert words == ["Dynamo captured 1 graph with no graph breaks.", "No recompilations."]


def test_correctness_and_payback_words(gpu_result):
    ok, text = summary.correctness_words(gpu_result, "float32")
    assert ok and "within the float32 tolerance of 0.001" in text
    bad = {**gpu_result, "correctness_ok": False, "correctness_rel_diff": 0.2}
    assert summary.correctness_words(bad, "float32")[1].startswith("Compiled output DIFFERS")
    assert summary.correctness_words({}, "float32")[0] is None
    assert "11,121 steps" in summary.payback_words(gpu_result)
    assert summary.payback_words({"breakeven_steps": None}) is None


def test_headline_gives_units_or_the_reason(gpu_result, cpu_eager_only):
    assert summary.headline(gpu_result)["speedup"] == ("1.14 x", None)
    assert summary.headline(gpu_result)["compile_s"] == ("11.2 s", None)
    assert summary.headline(cpu_eager_only)["speedup"] == ("n/a", "nothing is compiled in this run (compile=off)")


def test_best_setting_names_fastest_and_soonest_payback():
    matrix = pd.DataFrame([
        {"setting": "whole · max-autotune", "speedup": 1.6, "compile_s": 90.0, "breakeven_steps": 5000.0},
        {"setting": "regional · default", "speedup": 1.3, "compile_s": 9.0, "breakeven_steps": 700.0},
        {"setting": "off (eager)", "speedup": None, "compile_s": None, "breakeven_steps": None},
    ])
    text = summary.best_setting(matrix)
    assert text.startswith("Fastest: **whole · max-autotune**, 1.60x eager after 90.0 s")
    assert "Pays back soonest: **regional · default**" in text
    assert summary.best_setting(matrix.iloc[2:]) is None
