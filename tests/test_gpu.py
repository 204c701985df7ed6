"""On a CUDA GPU (pytest -m gpu): every model and compile knob runs, and power readings are plausible."""
import pytest

from tcore.lab import runs
from tcore.spec import Experiment

pytestmark = pytest.mark.gpu


def _gpu_exp(**changes) -> Experiment:
    base = dict(preset="tiny", batch_size=8, device="cuda", dtype="bfloat16", warmup_steps=3, timed_steps=20,
                rounds=2, cache="warm")
    return Experiment(**{**base, **changes})


def _check_finished(record):
    assert record.status == "finished", record.error
    result = record.result
    assert result["device"] == "cuda"
    for key in ("compile_s", "eager_steps_per_s", "compiled_steps_per_s", "compiled_latency_ms_p95",
                "compiled_peak_mem_gib", "speedup"):
        assert result[key] is not None and result[key] > 0, key
    assert result["correctness_ok"], result["correctness_rel_diff"]
    return result


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
@pytest.mark.parametrize("scope", ["whole", "regional"])
@pytest.mark.parametrize("model", ["captioner", "resnet50", "flux"])
def test_every_model_compiles_whole_and_regionally(model, scope, mode, store):
    result = _check_finished(runs.execute(_gpu_exp(model=model, compile=scope, mode=mode), store, timeout_s=480))
    if mode == "reduce-overhead" and scope == "whole":
        assert result["cudagraph_skip_count"] == 0, result["cudagraph_skip_reasons"]


def test_training_with_compiled_optimizer(store):
    exp = _gpu_exp(model="captioner", task="training", compile_optimizer=True)
    result = _check_finished(runs.execute(exp, store, timeout_s=480))
    assert result["graph_count"] >= 2  # the model's graph(s) and the optimizer step's


def test_power_and_energy_are_plausible(store):
    exp = _gpu_exp(model="resnet50", preset="full", batch_size=64, timed_steps=None, timed_s=10)
    record = runs.execute(exp, store, timeout_s=480)
    result = _check_finished(record)
    limit_w = record.env["power_limit_w"]
    for variant in ("eager", "compiled"):
        watts = result[f"{variant}_power_w"]
        assert 50 < watts < 1.05 * limit_w, (variant, watts, limit_w)  # above an idle H100/H200, below the cap
        assert result[f"{variant}_energy_j_per_step"] > 0
    phases = {sample[2] for sample in store.trace(record.id)}
    assert {"eager", "compiling", "measuring"} <= phases


def test_dynamic_settings_on_varying_shapes(store):
    """False compiles once per new size; None goes symbolic after the first change; True starts symbolic."""
    counts = {}
    for dynamic in (False, None, True):
        exp = _gpu_exp(model="captioner", dynamic=dynamic, shape_count=6, timed_steps=12)
        result = _check_finished(runs.execute(exp, store, timeout_s=480))
        events = [(e["kind"], e["frame"], e["reason"]) for e in result["compile_events"]]
        counts[dynamic] = sum(kind in ("compile", "recompile") for kind, *_ in events)
        assert len(result["schedule"]) == 6, events
        print(f"dynamic={dynamic}: {counts[dynamic]} compilations: {events}")
    assert counts[False] > counts[None] >= counts[True] >= 1, counts


def test_warm_start_from_artifacts_compiles_faster(store):
    cold = _check_finished(runs.execute(_gpu_exp(model="flux", cache="cold"), store, timeout_s=480))
    warm = _check_finished(runs.execute(_gpu_exp(model="flux", cache="artifacts"), store, timeout_s=480))
    assert warm["cache_artifacts"] == "loaded"
    assert warm["compile_s"] < cold["compile_s"]
