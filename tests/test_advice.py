"""What to try next (tcore.analysis.advice): each rule fires on its evidence, quotes it, and stays quiet without it."""
import pytest

from tcore.analysis.advice import counterpart, suggest
from tcore.experiment.spec import Experiment
from tcore.figures.breakdown import CATEGORIES


def spec(**changes):
    return Experiment(**{"model": "captioner", "preset": "tiny", "precision": "bf16", **changes}).to_dict()


def result(**figures):
    """A finished run's record: compiled 1.5x faster, both variants profiled, with `figures` on top."""
    base = {"variants": ["eager", "compiled"], "speedup": 1.5, "compile_s": 10.0, "breakeven_steps": 200.0,
            "recompile_count": 0, "graph_break_count": 0,
            "eager_profiled_step_ms": 10.0, "compiled_profiled_step_ms": 6.0}
    for variant in ("eager", "compiled"):
        for k in ("matmul", "attention", "pointwise", "copy", "optimizer", "other", "idle"):
            base[f"{variant}_{k}_ms"] = 0.0
    base.update(eager_matmul_ms=9.0, eager_idle_ms=1.0, compiled_matmul_ms=5.5, compiled_idle_ms=0.5)  # 10 and 6 ms
    out = {**base, **figures}
    # The breakdown the page draws its bars from, as the worker stores it beside the columns.
    out.setdefault("breakdown", {v: {"ms": {k: out[f"{v}_{k}_ms"] for k in CATEGORIES},
                                     "step_ms": out[f"{v}_profiled_step_ms"], "steps": 3, "source": "trace", "top": []}
                                 for v in ("eager", "compiled")})
    return out


def rules(found):
    return [s.rule for s in found]


def test_a_run_with_nothing_to_fix_gets_no_suggestion():
    assert suggest(spec(), result(), "cuda") == []


def test_high_device_idle_suggests_cuda_graphs_quoting_the_idle():
    found = suggest(spec(), result(compiled_idle_ms=3.0, compiled_matmul_ms=3.0), "cuda")  # 3 of 6 ms
    assert rules(found) == ["idle"]
    assert "idle 3.00 of 6.00 ms of each compiled step (50%)" in found[0].evidence
    assert found[0].changes == {"mode": "reduce-overhead"}
    assert suggest(spec(mode="reduce-overhead"), result(compiled_idle_ms=3.0), "cuda") == []  # already has them
    assert suggest(spec(), result(compiled_idle_ms=0.5), "cuda") == []  # 8%: not enough to act on
    assert suggest(spec(), result(compiled_idle_ms=3.0), "cpu") == []  # no CUDA graphs on a CPU


def test_a_convolutional_model_in_nchw_on_a_gpu_suggests_channels_last():
    found = suggest(spec(model="resnet50"), result(eager_copy_ms=1.2, eager_matmul_ms=7.8), "cuda")
    assert "channels_last" in rules(found)
    s = found[rules(found).index("channels_last")]
    assert "ResNet-50 ran in NCHW" in s.evidence and "1.20 ms of each eager step (12%)" in s.evidence
    assert counterpart(spec(model="resnet50"), s).channels_last
    assert "channels_last" not in rules(suggest(spec(model="resnet50", channels_last=True), result(), "cuda"))
    assert "channels_last" not in rules(suggest(spec(model="captioner"), result(), "cuda"))


def test_the_channels_last_evidence_names_inductor_only_where_inductor_ran():
    """aot_eager keeps eager's kernels and layout: no part of its speedup is a layout Inductor picked."""
    inductor = next(s for s in suggest(spec(model="resnet50"), result(), "cuda") if s.rule == "channels_last")
    assert "Inductor switches its own convolutions" in inductor.evidence
    for other in (spec(model="resnet50", backend="aot_eager"), spec(model="resnet50", compile="off")):
        s = next(s for s in suggest(other, result(), "cuda", most=9) if s.rule == "channels_last")
        assert "Inductor" not in s.evidence and "GPU convolutions prefer channels_last." in s.evidence


def test_autocast_casts_suggest_cast_weights_for_inference():
    found = suggest(spec(precision="amp-bf16"), result(eager_copy_ms=2.0, eager_matmul_ms=7.0), "cuda")
    assert rules(found) == ["cast_weights"] and found[0].changes == {"precision": "bf16"}
    assert "2.00 of 10.00 ms" in found[0].evidence
    assert suggest(spec(precision="amp-bf16"), result(eager_copy_ms=0.5), "cuda") == []


def test_recompiles_suggest_automatic_dynamic_quoting_the_reason():
    r = result(recompile_count=3,
               recompiles=[{"compile_id": "0/1", "reason": "size mismatch at index 1. expected 8, actual 12"}])
    found = suggest(spec(dynamic=False, shape_count=4), r, "cpu")
    assert rules(found) == ["recompiles"] and found[0].changes == {"dynamic": None}
    assert "3 recompilation(s)" in found[0].evidence and "expected 8, actual 12" in found[0].evidence
    assert suggest(spec(shape_count=4), r, "cpu")[0].changes == {"shape_remedy": "mark_dynamic"}


def test_graph_breaks_name_the_file_and_line_and_suggest_fullgraph():
    r = result(graph_break_count=2, graph_breaks=[{"reason": "Unsupported Tensor.item() call", "file": "/m.py",
                                                   "line": 42, "source": "if x.sum().item() > 0:", "count": 2}])
    found = suggest(spec(), r, "cpu")
    assert rules(found) == ["graph_breaks"] and found[0].changes == {"fullgraph": True}
    assert "at /m.py:42 (`if x.sum().item() > 0:`)" in found[0].evidence
    assert suggest(spec(graph_break=True), r, "cpu")[0].changes == {"graph_break": False}


def test_a_break_inside_torch_is_not_advice():
    """The compiled optimizer breaks inside torch/optim/optimizer.py on purpose: fullgraph=True would only fail."""
    torch_break = {"reason": "Call to `torch._dynamo.graph_break()`", "line": 80, "count": 2,
                   "file": "/opt/venv/lib/python3.12/site-packages/torch/optim/optimizer.py"}
    r = result(graph_break_count=2, graph_breaks=[torch_break])
    assert "graph_breaks" not in rules(suggest(spec(task="training", compile_optimizer=True), r, "cpu"))


def test_compile_time_that_pays_back_late_suggests_regional_then_a_warm_cache():
    r = result(breakeven_steps=50_000.0, compile_s=40.0)
    found = suggest(spec(), r, "cuda")
    assert rules(found) == ["compile_time"] and found[0].changes == {"compile": "regional"}
    assert "40.0 s and pays back only after 50,000 steps" in found[0].evidence
    assert suggest(spec(compile="regional"), r, "cuda")[0].changes == {"cache": "warm"}
    assert suggest(spec(), result(breakeven_steps=300.0), "cuda") == []


def test_regional_compilation_is_offered_only_where_a_compiled_block_is_reused():
    """timm:efficientnet_b0 was offered regional compilation ("cuts compile time", with a button): its 15
    InvertedResidual blocks come in 11 widths, so the regional run compiled 8 graphs with 7 recompilations (216 s
    against 118 s whole), and then was told to look at dynamic shapes. The blocks' shapes are recorded with each run
    (tcore.worker.compile.block_shapes); regional is offered where copies share their shapes, and after a regional run
    the recompilations are put down to the blocks' sizes."""
    import sample_models
    from tcore.worker.compile import block_shapes

    entry = sample_models.get("timm:efficientnet_b0")
    shapes = block_shapes(entry.repeated_blocks(entry.build("tiny", device="cpu")))
    assert shapes == {"InvertedResidual": {"copies": 15, "shapes": 11}}
    effnet = spec(model="timm:efficientnet_b0", precision="fp32", cache="cold")
    late = result(breakeven_steps=50_000.0, compile_s=118.6, repeated_block_shapes=shapes)
    found = suggest(effnet, late, "cpu")
    assert "Try regional compilation" not in [s.title for s in found]
    (time_rule,) = [s for s in found if s.rule == "compile_time"]
    assert time_rule.changes == {"cache": "warm"}
    assert "Regional compilation would not cut it: its 15 InvertedResidual blocks come in 11 shapes" in \
        time_rule.evidence and "recompile limit of 8" in time_rule.evidence
    warm = suggest({**effnet, "cache": "warm"}, late, "cpu")
    assert [(s.title, s.changes) for s in warm if s.rule == "compile_time"] == [
        ("Regional compilation would not shorten this compile", {})]
    # alike blocks (the captioner's) are offered it, and the words say one compiled block serves its copies
    alike = block_shapes(sample_models.get("captioner").repeated_blocks(sample_models.get("captioner").build("tiny")))
    (offer,) = suggest(spec(), result(breakeven_steps=50_000.0, compile_s=40.0, repeated_block_shapes=alike), "cpu")
    assert offer.changes == {"compile": "regional"} and "its 2 EncoderBlock blocks share one shape" in offer.evidence
    # a few widths, each shared by several copies (ConvNeXt's 12 blocks in 4 stages): offered, saying what to expect
    few = {"ConvNeXtBlock": {"copies": 12, "shapes": 4}}
    (offer,) = suggest(spec(model="timm:convnext_atto", precision="fp32"),
                       result(breakeven_steps=50_000.0, compile_s=40.0, repeated_block_shapes=few), "cpu")
    assert offer.changes == {"compile": "regional"} and "one graph per shape (4 in all" in offer.evidence
    # after the regional run: the recompilations are the blocks' sizes, not shapes that change between calls
    regional = result(recompile_count=7, repeated_block_shapes=shapes, recompiles=[
        {"compile_id": "0/1", "reason": "0/0: tensor 'x' size mismatch at index 1. expected 16, actual 24"}])
    (why,) = [s for s in suggest({**effnet, "compile": "regional"}, regional, "cpu") if s.rule == "recompiles"]
    assert why.title == "Compile the whole model instead" and why.changes == {"compile": "whole"}
    assert "They come from the blocks, not from the inputs" in why.evidence
    assert "Dynamic shapes or buckets would not help" in why.evidence
    assert "11 sizes, and torch compiles at most 8 graphs" in why.evidence


def test_a_heavy_optimizer_in_training_suggests_compiling_it():
    r = result(eager_optimizer_ms=3.0, eager_matmul_ms=6.0)
    found = suggest(spec(task="training", precision="amp-bf16"), r, "cuda")
    assert rules(found) == ["optimizer"] and found[0].changes == {"compile_optimizer": True}
    assert suggest(spec(task="training", precision="amp-bf16", compile_optimizer=True), r, "cuda") == []
    assert suggest(spec(task="training", precision="amp-bf16"), result(eager_optimizer_ms=0.5), "cuda") == []


def test_fp32_on_a_gpu_suggests_tf32_when_matmuls_dominate():
    found = suggest(spec(precision="fp32"), result(), "cuda")
    assert rules(found) == ["precision"] and found[0].changes == {"precision": "tf32"}
    assert "5.50 of 6.00 ms of each compiled step (92%)" in found[0].evidence  # matmul 5.5 + idle 0.5
    assert suggest(spec(precision="fp32"), result(), "cpu") == []
    assert suggest(spec(precision="tf32"), result(), "cuda") == []


def test_compiled_slower_than_eager_says_where_from_the_breakdown_first():
    r = result(speedup=0.8, compiled_idle_ms=4.0, eager_idle_ms=1.0, compiled_matmul_ms=8.0)
    found = suggest(spec(), r, "cuda")
    assert found[0].rule == "slower"
    assert "0.80x eager: idle went from 1.00 to 4.00 ms per step (Where the time goes)" in found[0].evidence
    assert found[0].changes == {"mode": "reduce-overhead"}
    assert len(found) <= 3 and len({tuple(sorted(s.changes.items())) for s in found if s.changes}) == \
        len([s for s in found if s.changes])  # no counterpart twice


def test_a_headline_below_1x_whose_interval_takes_in_1x_cannot_tell_compiled_is_slower():
    """The built-in flux read "Compiled is slower than eager" at 0.98x with an interval of 0.01-104.61x."""
    from tcore.analysis import slower

    wide = result(speedup=0.98, speedup_low=0.01, speedup_high=104.61)
    (said,) = [s for s in suggest(spec(), wide, "cpu") if s.rule == "slower"]
    assert said.title == "Cannot tell whether compiled is slower" and not said.changes
    assert "its 95% interval 0.01–104.61x takes in 1x" in said.evidence
    assert slower.words(wide, spec()) == []  # no "Why compiled is slower" either
    two = result(speedup=0.9, speedup_no_interval="2 rounds cannot give an interval of the run's own")
    assert [s.title for s in suggest(spec(), two, "cpu") if s.rule == "slower"] == [
        "Cannot tell whether compiled is slower"]
    below = result(speedup=0.8, speedup_low=0.7, speedup_high=0.9)  # the interval lies below 1x: slower, said
    assert [s.title for s in suggest(spec(), below, "cpu") if s.rule == "slower"] == [
        "Find out why compiled is slower"]


def test_compiled_slower_with_nothing_grown_names_no_category():
    """A slowdown the profiled step does not show (every part shrank or stood still) quotes no "largest change"."""
    r = result(speedup=0.8)  # compiled 6 ms against eager 10 ms in the profile, 0.8x when timed
    found = suggest(spec(), r, "cuda")
    assert found[0].rule == "slower" and "went from" not in found[0].evidence
    assert "no part of its profiled step took longer than eager's" in found[0].evidence


def test_a_slower_headline_gets_no_compile_time_advice_whatever_break_even_was_stored():
    """Break-even follows the headline: at 0.74x compiling never pays back, so "pays back only after" is not said,
    even where an older record stored a break-even from the unpaired medians."""
    stale = result(speedup=0.74, breakeven_steps=50_000.0, compile_s=40.0, eager_steps_per_s=10.0)
    assert "compile_time" not in rules(suggest(spec(), stale, "cuda"))
    # And at 1.06x one that stored "never" pays back after 40 s / (0.1 s - 0.1 s / 1.06) = 7,067 steps.
    never = result(speedup=1.06, breakeven_steps=None, compile_s=40.0, eager_steps_per_s=10.0)
    found = [s for s in suggest(spec(), never, "cuda") if s.rule == "compile_time"]
    assert found and "pays back only after 7,067 steps" in found[0].evidence


def test_at_most_three_suggestions_strongest_first():
    r = result(compiled_idle_ms=3.0, breakeven_steps=50_000.0, recompile_count=1, recompiles=[{"reason": "x"}],
               graph_break_count=1, graph_breaks=[{"reason": "y", "count": 1}])
    found = suggest(spec(precision="fp32", dynamic=False, shape_count=3), r, "cuda")
    assert len(found) == 3
    assert [s.weight for s in found] == sorted((s.weight for s in found), reverse=True)


def test_a_counterpart_that_cannot_run_keeps_its_words_but_loses_its_button():
    r = result(graph_break_count=1, graph_breaks=[{"reason": "y", "count": 1}])
    found = suggest(spec(backend="aot_eager", compile="whole"), r, "cpu")
    breaks = next(s for s in found if s.rule == "graph_breaks")
    assert breaks.changes == {"fullgraph": True}
    off = suggest(spec(compile="off"), {**r, "variants": ["eager"]}, "cpu")
    assert off and off[0].changes == {}  # fullgraph needs something compiled


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_suggestions_read_runs_stored_before_breakdowns(device):
    old = {"variants": ["eager", "compiled"], "speedup": 1.2, "compile_s": 5.0, "breakeven_steps": 100.0}
    found = suggest({"model": "resnet50", "preset": "tiny", "dtype": "float32"}, old, device)
    assert all(s.evidence for s in found)


def test_a_busy_large_batch_on_a_gpu_offers_the_launch_bound_case_at_a_small_batch():
    """The GPU default runs at a batch that keeps the GPU busy; the wobbly launch-bound lesson stays one
    click away, and is not offered where the run is launch-bound already (the CUDA-graph rule speaks there)."""
    found = suggest(spec(batch_size=256), result(), "cuda")
    assert rules(found) == ["small_batch"] and found[0].changes == {"batch_size": 32}
    assert "busy for 92% of each compiled step" in found[0].evidence  # 0.5 ms idle of 6 ms
    assert suggest(spec(batch_size=256), result(), "cpu") == []  # no launches to wait on that CUDA graphs remove
    assert suggest(spec(batch_size=32), result(), "cuda") == []
    bound = suggest(spec(batch_size=256), result(compiled_idle_ms=3.0, compiled_matmul_ms=3.0), "cuda")
    assert rules(bound) == ["idle"]
    assert suggest(spec(batch_size=256, mode="reduce-overhead"), result(), "cuda") == []


def test_suggestions_quote_the_bars_the_page_draws_and_none_it_withholds():
    """"What to try next" quotes a category's ms as "Where the time goes" draws it: scaled to the timed step where the
    profiler slowed its steps, and not at all where the page withholds the bars."""
    from tcore.figures.breakdown import shown_ms

    r = result(speedup=0.6, compiled_matmul_ms=12.0, eager_latency_ms_p50=10.0, compiled_latency_ms_p50=10.0)
    bars = shown_ms(r)  # compiled profiled at 12.5 ms against 10 ms timed: each bar times 10 / 12.5
    assert bars["compiled"]["matmul"] == pytest.approx(9.6)
    found = suggest(spec(), r, "cpu")
    assert found[0].rule == "slower"
    assert "matmuls and convolutions went from 9.00 to 9.60 ms per step" in found[0].evidence  # not 12.00
    withheld = result(speedup=0.6, compiled_matmul_ms=12.0, eager_latency_ms_p50=10.0, compiled_latency_ms_p50=5.0)
    assert shown_ms(withheld) == {}  # +150%: the page draws no bars
    found = suggest(spec(), withheld, "cpu")
    assert found[0].rule == "slower" and " ms" not in found[0].evidence
    assert "too far off the timed ones" in found[0].evidence
    copies = {**withheld, "eager_copy_ms": 1.2}
    copies["breakdown"]["eager"]["ms"]["copy"] = 1.2
    assert not [s for s in suggest(spec(model="resnet50"), copies, "cuda") if " ms of each" in s.evidence]


@pytest.mark.parametrize("backend", ["aot_eager", "eager"])
def test_a_backend_that_keeps_eager_s_kernels_says_so_and_offers_inductor(backend):
    """The backend compiles no code, so the run's speedup (4.32x here, on a drifting machine) is not quoted as if
    compiling made it: the advice says it is not a compiled speedup and offers inductor."""
    found = suggest(spec(backend=backend), result(speedup=4.32), "cpu")
    assert found[0].rule == "backend" and found[0].changes == {"backend": "inductor"}
    assert found[0].title == "Try backend=inductor"
    assert found[0].evidence.startswith(f"backend={backend} ")
    assert "4.32" not in found[0].evidence and "Compiled ran at" not in found[0].evidence
    assert "eager's own kernels" in found[0].evidence and "compiles no code" in found[0].evidence
    assert "not a compiled speedup" in found[0].evidence
    found = suggest(spec(backend=backend), result(speedup=0.97), "cpu")
    assert "slower" not in rules(found)  # not a puzzle: the backend is why
    assert "backend" not in rules(suggest(spec(), result(speedup=0.97), "cpu"))  # inductor: the slower rule speaks
