"""What fits a laptop's screen: every chart's title, legend, axes and the Run page's metric tiles at the
narrowest width they are drawn."""
import pandas as pd
import plotly.graph_objects as go

from tests.helpers import gpu_like_result, power_trace, recorded_run
from ui.charts import compare_charts, diagnose_charts, style
from ui.charts import run_charts as charts
from ui.words import run_words


def lab_results() -> dict[str, dict]:
    """Results with a workshop's spread of magnitudes: Flux at ~92 samples/s, the captioner at ~4,700, a real CPU
    run, one where a small compile phase sits beside a large one, and a shape schedule inside one decade of ms."""
    flux = gpu_like_result(samples_per_s=92.0, speedup=2.29, compile_s=68.0, batch=2, power_w=583.0)
    flux["compile_phases_s"] = {"dynamo_tracing_s": 5.2, "aot_autograd_s": 2.1, "inductor_lowering_s": 0.73,
                                "codegen_and_compile_s": 59.9}  # 2.10 and 0.73 s would print over each other
    steady = [{"step": i, "size": n, "padded_to": n, "eager_ms": 1.2 + 0.05 * i, "compiled_ms": 1.1 + 0.04 * i,
               "compiles": [], "hit_limit": False} for i, n in enumerate([3, 5, 8, 11])]
    return {"flux": flux, "captioner": gpu_like_result(samples_per_s=4700.0, speedup=1.41, compile_s=9.8, batch=64),
            "cpu": recorded_run()["result"],
            "steady_schedule": {"schedule": steady, "schedule_dim": "caption length (tokens)"}}


def lab_frame() -> pd.DataFrame:
    results = lab_results()
    rows = []
    for i, (model, name) in enumerate([("flux", "flux"), ("captioner", "captioner"), ("resnet50", "cpu")]):
        r = results[name]
        rows.append({"id": f"20260101-00000{i}-{name[:6]:a<6}", "model": model,
                     "label": f"{model}/x bs2 bf16 inference, whole default", "cache": "cold", "cache_artifacts": None,
                     **{k: v for k, v in r.items() if not isinstance(v, (list, dict))}})
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
        "runs_breakdown": compare_charts.runs_breakdown_chart([("flux/x bs2, whole", "run-0a1b2c", results["cpu"])]),
        "break_pair": diagnose_charts.side_by_side(items, ["compiled_samples_per_s", "speedup", "graph_count",
                                                           "compile_s", "compiled_kernels_per_step"],
                                                   title="What the break costs",
                                                   subtitle="each panel: one figure, both runs"),
        "schedule": diagnose_charts.schedule_chart(results["steady_schedule"]),
        "timeline": diagnose_charts.compile_timeline(results["cpu"]),
        "four_way": diagnose_charts.four_way_chart({("whole", "cold"): 20.0, ("regional", "cold"): 8.0}),
        "cold_warm": diagnose_charts.cold_warm_chart(frame),
        "kernels": diagnose_charts.kernels_chart(results["cpu"]),
        "ops": diagnose_charts.graph_ops_chart(results["cpu"]),
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
            assert len(title) <= style.TITLE_CHARS, (name, title)
        elif name in HALF_PAGE:
            assert len(title) <= 2 * style.TITLE_CHARS, (name, title)
        lines = text.split("<br>") if text else []
        assert all(len(line) <= style.SUBTITLE_CHARS for line in lines), (name, lines)
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
    assert [t["value"] for t in top] == ["1.41 x", "1,234.5 s", "59,391"]  # grouped as the sentences group them
