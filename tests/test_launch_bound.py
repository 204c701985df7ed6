"""A launch-bound GPU run says so from its own evidence (idle share of the profiled step, NVML busy share while
timed), says why its rounds move, and puts CUDA graphs (reduce-overhead) one click away."""
from tcore.analysis import report
from tcore.analysis.advice import launch_bound, suggest
from tests.test_advice import result, spec


def test_a_launch_bound_run_says_its_speed_follows_the_cpu_and_suggests_cuda_graphs():
    r = result(compiled_idle_ms=3.0, compiled_matmul_ms=3.0, compiled_gpu_busy_pct=52.0, compiled_spread_pct=41.0,
               compiled_steps_per_s_min=120.0, compiled_steps_per_s_max=180.0)
    words = launch_bound(r, "cuda")
    assert words.startswith("**Launch-bound**: the GPU sat idle 3.00 of 6.00 ms of each compiled step (50%) and "
                            "NVML saw it busy 52% of the timed time")
    assert "follows the host CPU" in words and "its compiled rounds moved by 41%" in words
    (s,) = suggest(spec(), r, "cuda")
    assert s.rule == "idle" and s.changes == {"mode": "reduce-overhead"} and "removes exactly this wait" in s.evidence
    assert ("host-bound: Compiled is host-bound: the GPU sat idle 50% of each compiled step"
            in report.text_table(r, spec(), "cuda"))


def test_the_busy_share_alone_is_evidence_and_a_busy_gpu_or_a_cpu_is_not_launch_bound():
    # The profile saw little idle, but NVML saw the GPU busy only 45% of the timed time.
    assert "busy 45%" in launch_bound(result(compiled_gpu_busy_pct=45.0), "cuda")
    assert launch_bound(result(compiled_gpu_busy_pct=97.0), "cuda") is None
    assert launch_bound(result(compiled_idle_ms=3.0, compiled_matmul_ms=3.0), "cpu") is None
    # Already on CUDA graphs: said, but nothing to suggest.
    assert suggest(spec(mode="reduce-overhead"), result(compiled_gpu_busy_pct=45.0), "cuda") == []
    # Launch-bound ranks the CUDA-graph suggestion among the three shown, ahead of weaker evidence.
    r = result(compiled_gpu_busy_pct=45.0, recompile_count=2, recompiles=[{"reason": "x"}], graph_break_count=1,
               graph_breaks=[{"reason": "y", "file": "m.py", "line": 3}])
    assert suggest(spec(), r, "cuda")[0].rule == "idle"
