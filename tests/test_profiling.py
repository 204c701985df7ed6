"""The CPU's kernels per step (tcore.worker.profiling.count_cpu_kernels), read from the profiler's Chrome trace: the
same count torch's own events give, without building them (seconds of a tiny run's few)."""
import json

import torch
from torch.profiler import ProfilerActivity, profile

from tcore.worker import profiling


def op(name, ts, dur, tid=1, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 7, "tid": tid}


def test_only_leaf_ops_that_compute_count_and_each_of_inductor_s_kernels_does():
    events = [
        op("aten::linear", 0, 100), op("aten::t", 1, 5), op("aten::transpose", 2, 2),  # a view inside a view
        op("aten::addmm", 10, 80),  # a leaf that computes: 1
        op("aten::relu", 100, 10),  # starts as linear ends: its sibling, a leaf: 2
        op("aten::empty", 111, 1),  # an allocation: not a kernel
        op("cpp_fused_add_mul_0", 120, 30), op("aten::add", 125, 5),  # Inductor's kernel counts even around an op: 4
        op("aten::mm", 200, 20), op("step", 205, 1, cat="user_annotation"),  # an annotation inside: not a leaf
        op("aten::mul", 200, 20, tid=2),  # the same times on another thread (autograd's): a leaf of its own: 5
        {"ph": "i", "cat": "cpu_op", "name": "aten::sub", "ts": 300, "pid": 7, "tid": 1},  # no duration: not an op
    ]
    assert profiling.count_cpu_kernels(events) == 5


def test_the_count_is_torch_s_own_for_a_training_step(tmp_path):
    """Forward and backward (the backward's ops on autograd's thread), against the leaf count over torch's own
    events with their cpu_children, as the profiling pass counted before it read the trace."""
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 4))
    x = torch.randn(8, 16)

    def step():
        model(x).square().mean().backward()

    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step()
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    theirs = sum(1 for e in prof.events() if "cpp_fused" in e.name or (
        e.name.startswith("aten::") and not e.cpu_children and e.name not in profiling._CPU_METADATA_OPS))
    assert theirs > 30  # the step's ops are there, forward and backward
    assert profiling.count_cpu_kernels(events) == theirs
