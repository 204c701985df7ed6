"""One run's chart builders (ui.charts.run_charts), on hand-made results: right traces, units, n/a with its reason."""
import pytest

from tests.chart_data import (  # noqa: F401
    annotation_text,
    bar_totals,
    cpu_eager_only,
    gpu_result,
    subtitle,
)
from ui.charts import run_charts as charts


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


def test_breakdown_charts_stack_the_categories_and_say_why_when_absent():
    from ui.charts.compare_charts import runs_breakdown_chart
    from ui.charts.run_charts import variant_breakdown_chart

    bd = {"step_ms": 6.0, "steps": 3, "source": "gpu kernels", "overlap_ms": 0.0, "top": [],
          "ms": {"matmul": 3.0, "pointwise": 1.5, "copy": 0.0, "idle": 1.5}}
    result = {"variants": ["eager", "compiled"], "breakdown": {"eager": bd, "compiled": bd}}
    fig = variant_breakdown_chart(result)
    assert fig.layout.barmode == "stack"
    assert [t.name for t in fig.data] == ["Matmuls and convolutions", "Pointwise, norms and reductions", "Idle"]
    assert list(fig.data[0].y) == ["Eager", "Compiled"] and list(fig.data[0].x) == [3.0, 3.0]
    old = variant_breakdown_chart({"variants": ["eager", "compiled"]})
    assert "stored before Compile Lab profiled steps" in old.layout.annotations[0].text
    both = runs_breakdown_chart([("a", "run-111111", result), ("b", "run-222222", {"variants": ["eager"]})])
    assert list(both.data[0].y) == ["a · 111111 · eager", "a · 111111 · compiled"]


def test_a_generate_run_s_speed_chart_is_tokens_per_second_of_the_whole_batch():
    """The Speed chart called a generate run's tokens/s "samples/s"."""
    r = {"variants": ["eager", "compiled"], "eager_steps_per_s": 15.8, "compiled_steps_per_s": 7.0,
         "eager_tokens_per_s": 126.4, "compiled_tokens_per_s": 56.0, "eager_samples_per_s": 126.4,
         "compiled_samples_per_s": 56.0, "eager_steps_per_s_min": 15.0, "eager_steps_per_s_max": 16.0}
    fig = charts.throughput_chart(r, "tokens_per_s")
    assert fig.layout.title.text == fig.layout.yaxis.title.text == "Decode throughput (tokens/s)"
    assert "every sequence of the batch" in subtitle(fig)
    assert fig.data[0].y == pytest.approx([126.4, 56.0])
    assert fig.data[0].error_y.arrayminus[0] == pytest.approx(126.4 - 15.0 * 8)  # the batch's 8 sequences
    assert "samples" not in fig.layout.title.text


def test_two_runs_with_one_label_are_two_bars_each_named_by_its_run():
    """Compare drew two runs of one label, 721 and 1,059 ms per step, as one bar of about 1,780 ms."""
    from ui.charts.compare_charts import runs_breakdown_chart

    def run(ms: float) -> dict:
        bd = {"step_ms": ms, "steps": 3, "source": "cpu ops", "overlap_ms": 0.0, "top": [],
              "ms": {"matmul": ms * 0.5, "pointwise": ms * 0.3, "idle": ms * 0.2}}
        return {"variants": ["eager"], "eager_latency_ms_p50": ms, "breakdown": {"eager": bd}}

    label = "captioner/tiny bs8 fp32 inference, whole"
    fig = runs_breakdown_chart([(label, "run-0000a1", run(721.0)), (label, "run-0000b2", run(1059.0))])
    totals = bar_totals(fig)
    assert sorted(totals.values()) == pytest.approx([721.0, 1059.0])  # not one bar of 1,780 ms
    assert [name.split(" · ")[-2] for name in totals] == ["0000a1", "0000b2"]  # each names its run's id
