"""Where compiled costs more than eager, from the kernels (tcore.analysis.slower), over recorded breakdowns."""
import copy

from tcore.analysis import slower
from tests.kernel_profiles import COMPILED_LAYER, EAGER_LAYER, bert_result, profile

BERT = {"model": "hf:bert", "precision": "bf16"}


def test_the_bert_case_names_attention_the_lost_fused_kernel_the_fp32_gemm_and_the_knob():
    found = slower.grown(bert_result(), BERT)
    assert [g.category for g in found] == ["attention"]
    attention = found[0]
    assert attention.attention_left_fused
    assert [c.split("**")[1] for c in attention.causes] == ["fused kernel lost", "precision raised", "more launches"]
    assert attention.compiled_kernels[0]["name"] == "triton_per_fused__safe_softmax_add_1"
    text = "\n".join(slower.words(bert_result(), BERT))
    assert "Why compiled is slower (0.78x)" in text
    assert "cuDNN's fused attention" in text and "sm80_xmma_gemm_f32f32_f32f32" in text
    assert "The encoder case" in text and slower.KNOB in text


def test_with_the_knob_on_the_run_says_transformers_was_not_the_cause():
    text = "\n".join(slower.words(bert_result(), {**BERT, slower.KNOB: True}))
    assert "The encoder case" not in text and f"{slower.KNOB} was on" in text


def test_fp32_gemms_raise_no_flag_in_an_fp32_run_and_a_vision_model_gets_no_encoder_words():
    found = slower.grown(bert_result(), {"model": "resnet50", "precision": "fp32"})
    assert not any("precision raised" in c for c in found[0].causes)
    assert "encoder case" not in "\n".join(slower.words(bert_result(), {"model": "resnet50", "precision": "fp32"}))


def test_a_class_that_grew_for_no_reason_the_names_give_says_so_and_lists_its_kernels():
    result = bert_result()
    grown_layer = [(n, op, d * 5 if "layer_norm" in n else d) for n, op, d in EAGER_LAYER]
    result["breakdown"]["compiled"] = profile(grown_layer).to_dict()
    result["compiled_latency_ms_p50"] = sum(result["breakdown"]["compiled"]["ms"].values())
    found = slower.grown(result, BERT)
    assert [g.category for g in found] == ["pointwise"] and found[0].causes == ()
    text = "\n".join(slower.words(result, BERT))
    assert "Nothing in its kernel names explains it" in text
    assert "vectorized_layer_norm_kernel" in text  # its kernels, both sides


def test_a_slower_run_whose_classes_did_not_grow_is_not_silent():
    result = bert_result(speedup=0.9)
    result["breakdown"]["compiled"] = copy.deepcopy(result["breakdown"]["eager"])
    result["compiled_latency_ms_p50"] = result["eager_latency_ms_p50"]
    assert slower.grown(result, BERT) == []
    assert "no class of kernels costs it more" in slower.words(result, BERT)[0]
    unprofiled = {"speedup": 0.9, "variants": ["eager", "compiled"]}
    assert slower.grown(unprofiled, BERT) is None
    assert "no eager and compiled profile" in slower.words(unprofiled, BERT)[0]


def test_a_faster_run_where_nothing_grew_says_nothing():
    result = bert_result(speedup=1.5)
    result["breakdown"]["eager"], result["breakdown"]["compiled"] = (result["breakdown"]["compiled"],
                                                                    result["breakdown"]["eager"])
    result["eager_latency_ms_p50"], result["compiled_latency_ms_p50"] = (result["compiled_latency_ms_p50"],
                                                                        result["eager_latency_ms_p50"])
    assert slower.words(result, BERT) == []


def test_records_stored_before_the_kernel_classes_still_compare_by_class():
    result = bert_result()
    for b in result["breakdown"].values():
        for key in ("attention_forms", "fp32_gemm_ms", "launches", "by_class"):
            b.pop(key)
    found = slower.grown(result, BERT)
    assert found[0].category == "attention" and found[0].causes == ()


def test_the_compiled_layer_really_is_slower():  # the recorded layers, as the H100 showed: about twice the GPU time
    assert sum(d for *_, d in COMPILED_LAYER) > 1.8 * sum(d for *_, d in EAGER_LAYER)


def test_the_command_line_report_says_the_same():
    from tcore.analysis import report

    text = report.text_table(bert_result(), {**BERT, "task": "inference"}, "cuda")
    assert "why: Attention: 0.04 → 0.26 ms per step. fused kernel lost" in text


def test_a_class_is_not_blamed_for_a_slowdown_that_only_the_timed_steps_show_and_its_kernels_are_in_its_unit():
    """A loaded CPU's run read 0.35x: its compiled profile ran faster than eager's (378 against 406 ms), but scaled to
    the much slower timed step, compiled's matmuls read 226.49 -> 839.80 ms "per step", listed beside kernels in the
    profiler's own ms (about 277 ms in all), and "Nothing in its kernel names explains it" blamed the matmuls."""
    result = bert_result(speedup=0.35)
    faster = [(n, op, d * 0.93) for n, op, d in EAGER_LAYER]
    result["breakdown"]["compiled"] = profile(faster).to_dict()
    result["breakdown"]["eager"] = profile(EAGER_LAYER).to_dict()
    eager_ms = sum(result["breakdown"]["eager"]["ms"].values())
    compiled_ms = sum(result["breakdown"]["compiled"]["ms"].values())
    result["eager_latency_ms_p50"], result["compiled_latency_ms_p50"] = eager_ms, 1.8 * compiled_ms  # scaled, 0.35x
    assert slower.grown(result, BERT) == []
    (said,) = slower.words(result, BERT)
    assert "in the profile it ran faster" in said and f"{compiled_ms:.2f} against {eager_ms:.2f} ms" in said
    assert "Nothing in its kernel names explains it" not in said
    # a class that grew in the profile itself is named, and its kernels are scaled as its bar is
    grown_layer = [(n, op, d * 5 if "layer_norm" in n else d) for n, op, d in EAGER_LAYER]
    result["breakdown"]["compiled"] = profile(grown_layer).to_dict()
    raw = sum(result["breakdown"]["compiled"]["ms"].values())
    result["compiled_latency_ms_p50"] = 1.5 * raw
    (grew,) = slower.grown(result, BERT)
    listed = {k["name"]: k["ms"] for k in result["breakdown"]["compiled"]["by_class"]["pointwise"]}
    assert all(abs(k["ms"] - 1.5 * listed[k["name"]]) < 1e-9 for k in grew.compiled_kernels)
    text = "\n".join(slower.words(result, BERT))
    assert "Milliseconds per timed step: each variant's profiled kernels scaled to its timed step" in text
