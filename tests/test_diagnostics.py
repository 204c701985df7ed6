"""Why is it slow: graph breaks with their source lines, recompilations over a shape schedule, kernels per step.

Dynamo's break and recompile decisions are the same whatever the backend, so most runs here use
backend="eager" (Dynamo without Inductor) to stay fast. The kernel count needs real Inductor: it is read off the
cold Inductor run that tests/test_caches.py makes anyway (a second one here was most of a minute of the suite's cores).
"""
import pytest

import sample_models
from tcore.experiment.schedule import make_schedule, varying_dims
from tcore.experiment.spec import Experiment, SpecError
from tcore.lab.run import runs
from tcore.worker.shapes import pad


def _exp(**changes):
    base = dict(model="captioner", preset="tiny", batch_size=2, device="cpu", warmup_steps=1, timed_steps=4,
                rounds=2, backend="eager", cache="warm")
    return Experiment(**{**base, **changes})


def test_a_deliberate_break_is_reported_with_its_reason_and_source_line(store):
    record = runs.execute(_exp(model="flux", graph_break=True), store)
    result = record.result
    assert record.status == "finished", record.error
    assert result["graph_break_count"] >= 1 and result["graph_count"] >= 2
    first = result["graph_breaks"][0]
    assert "item()" in first["reason"]
    assert first["file"].endswith("sample_models/flux.py") and first["line"] > 0
    assert ".item()" in first["source"]  # the user's own line of code


def test_fullgraph_turns_the_break_into_a_readable_compile_error(store):
    record = runs.execute(_exp(graph_break=True, fullgraph=True), store)
    assert record.error_kind == "compile_error"
    message = record.error["message"]
    assert "sample_models/captioner.py:" in message and ".item()" in message
    assert len(message.splitlines()) <= 4  # the summary; Dynamo's full text stays in the traceback
    assert "from user code" in record.error["traceback"] or "Traceback" in record.error["traceback"]


def test_static_shapes_recompile_until_the_limit_then_fall_back_to_eager(store):
    record = runs.execute(_exp(dynamic=False, shape_count=10, recompile_limit=4), store)
    result = record.result
    kinds = [e["kind"] for e in result["compile_events"]]
    assert kinds == ["compile", "recompile", "recompile", "recompile", "limit"]
    assert result["recompile_limit_hit"] and any("recompile limit (4)" in n for n in result["notes"])
    assert all("size mismatch" in r["reason"] for r in result["recompiles"])
    # Steps after the limit compiled nothing: they ran eagerly.
    schedule = result["schedule"]
    assert [row["size"] for row in schedule] == sorted(row["size"] for row in schedule) and len(schedule) == 10
    limit_step = next(i for i, row in enumerate(schedule) if row["hit_limit"])
    assert all(not row["compiles"] for row in schedule[limit_step + 1:])


def test_marking_the_dimension_dynamic_compiles_once(store):
    result = runs.execute(_exp(dynamic=False, shape_count=10, shape_remedy="mark_dynamic"),
                          store).result
    assert [e["kind"] for e in result["compile_events"]] == ["compile"]
    assert result["recompile_count"] == 0 and not result["recompile_limit_hit"]


def test_buckets_compile_each_bucket_before_the_schedule(store):
    result = runs.execute(_exp(model="resnet50", batch_size=4, dynamic=False, shape_count=6, shape_remedy="buckets",
                               buckets=2, shape_order="shuffled"), store).result
    assert len(result["schedule_buckets"]) == 2
    assert result["recompile_count"] == 1  # the second bucket, compiled during warm-up
    assert all(not row["compiles"] for row in result["schedule"])  # nothing compiles once the schedule runs
    assert all(row["padded_to"] >= row["size"] for row in result["schedule"])


def test_schedule_sizes_buckets_and_padding():
    entry = sample_models.get("captioner")
    sched = make_schedule(_exp(shape_count=4, shape_remedy="buckets", buckets=2, dynamic=False), entry)
    assert sched.sizes == [4, 8, 12, 16] and sched.buckets == [8, 16]
    assert [sched.padded(s) for s in sched.sizes] == [8, 8, 16, 16]
    exp = _exp(shape_count=4)
    dims = varying_dims(exp, entry)
    assert dims == [(1, 1), (2, 1)]  # the caption tokens and the target, along the length
    batch = entry.make_batch("tiny", 2, seq_len=5)
    padded = pad(batch, dims, 8)
    assert padded.inputs[1].shape == (2, 8) and padded.target.shape == (2, 8)
    assert padded.inputs[0].shape == batch.inputs[0].shape  # the image does not vary
    # Models without a sequence vary the batch size instead.
    assert make_schedule(_exp(model="resnet50", batch_size=4, shape_count=4), sample_models.get("resnet50")).sizes \
        == [2, 4, 6, 8]


@pytest.mark.parametrize("changes, message", [
    (dict(shape_count=1), "at least 2 distinct shapes"),
    (dict(shape_remedy="buckets"), "needs a shape schedule"),
    (dict(shape_count=4, shape_remedy="buckets", buckets=4), "buckets must be between 1 and shape_count - 1"),
    (dict(shape_count=4, compile="off", backend="inductor"), "needs compile=whole or regional"),
])
def test_shape_settings_are_validated(changes, message):
    with pytest.raises(SpecError, match=message):
        _exp(**changes)
