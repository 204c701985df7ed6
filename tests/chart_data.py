"""Hand-made results for the chart and words tests: a GPU run shaped like a real H200 run, an eager-only CPU run."""
import plotly.graph_objects as go
import pytest

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


def bar_totals(fig: go.Figure) -> dict[str, float]:
    """Each row of a stacked horizontal bar chart, by name, and the length its segments add up to, in order."""
    totals: dict[str, float] = {}
    for trace in fig.data:
        if trace.type == "bar":
            for name, x in zip(trace.y, trace.x):
                totals[name] = totals.get(name, 0.0) + (x or 0.0)
    return totals
