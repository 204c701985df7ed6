"""Kernel classes that hold under compilation (tcore.figures.breakdown): attention in each of its forms, the batched
matmuls of a decomposed attention, and GEMMs that run in fp32, over recorded kernel names."""
import pytest

from tcore.figures.breakdown import (
    analyze,
    attention_form,
    categorize,
    fp32_gemm,
    math_attention_gemms,
)
from tests.kernel_profiles import COMPILED_LAYER, EAGER_LAYER, profile


@pytest.mark.parametrize("name, op, form", [
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t>"
     ", false, false, false, false, true, true, false, false>(Flash_fwd_params)", "aten::_flash_attention_forward",
     "flash"),
    ("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128>>", "", "flash"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "aten::_efficient_attention_forward", "mem_eff"),
    ("void attention_kernel_batched_impl<AttentionKernel<cutlass::bfloat16_t, cutlass::arch::Sm80>>",
     "aten::_scaled_dot_product_efficient_attention", "mem_eff"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64_4x1x1_kernel0_0",
     "aten::_scaled_dot_product_cudnn_attention", "cudnn"),
    ("sm90_flash_fprop_wgmma_f16_knob_7_64x128x64", "", "cudnn"),
    # the decomposed (math) path: Inductor's softmax kernels and eager's
    ("triton_per_fused__safe_softmax_add_1", "", "math"),
    ("triton_red_fused__softmax_add_mul_2", "", "math"),
    ("void at::native::(anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 9, false>",
     "aten::_softmax", "math"),
    ("triton_per_fused__softmax_backward_data_3", "", "math"),
    ("cpp_fused__softmax_add_4", "", "math"),
    ("aten::_scaled_dot_product_attention_math", "", "math"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "", "flash"),
    # a loss's log-softmax is not attention, nor is a GEMM
    ("triton_red_fused__log_softmax_nll_loss_forward_5", "", None),
    ("void at::native::cunn_SoftMaxForward<4, float, float, float, at::native::LogSoftMaxForwardEpilogue>",
     "aten::_log_softmax", None),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "aten::mm", None),
])
def test_attention_is_recognised_in_every_form(name, op, form):
    assert attention_form(name, op) == form
    assert (categorize(name, op) == "attention") == (form is not None)


@pytest.mark.parametrize("name, fp32", [
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel"
     "_trt", True),
    ("ampere_sgemm_128x64_tn", True),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(cutlass_80_simt_sgemm_128x128_8x4_nn_align1::"
     "Params)", True),
    ("cutlass_80_tensorop_s1688gemm_128x128_16x3_tn_align4", True),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>", True),
    # low precision, or names that say nothing of their types
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel",
     False),
    ("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8", False),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn", False),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", False),
    ("nvjet_hsh_192x128_64x4_2x1_v_bz_coopB_NTN", False),
    ("triton_tem_fused_addmm_gelu_4", False),
])
def test_gemms_named_fp32_are_flagged(name, fp32):
    assert fp32_gemm(name) is fp32


def test_the_bert_case_files_the_decomposed_attention_and_the_fp32_gemm():
    eager, compiled = profile(EAGER_LAYER), profile(COMPILED_LAYER)
    assert eager.attention_forms == {"cudnn": pytest.approx(0.04)}  # 20 us x 2 layers per step
    assert set(compiled.attention_forms) == {"math"}
    # the softmax and both batched products are attention now, not pointwise and matmul
    assert compiled.attention_forms["math"] == pytest.approx(2 * (45 + 70 + 15) / 1e3)
    assert compiled.ms["attention"] == pytest.approx(compiled.attention_forms["math"])
    assert compiled.fp32_gemm_ms == {"attention": pytest.approx(0.09)}
    assert eager.fp32_gemm_ms == {}
    assert compiled.launches["attention"] == 6 and eager.launches["attention"] == 2
    top = compiled.by_class["attention"][0]
    assert top["name"] == "triton_per_fused__safe_softmax_add_1" and top["form"] == "math"
    assert any(k["fp32"] for k in compiled.by_class["attention"])
    assert all(k["category"] == "matmul" for k in compiled.by_class["matmul"])  # the addmms stay products


def test_a_bmm_far_from_any_softmax_stays_a_matmul():
    ordered = [("aten::bmm", "", "matmul"), *[("triton_poi_fused_add_0", "", "pointwise")] * 5,
               ("triton_per_fused__softmax_1", "", "attention"), ("aten::bmm", "", "matmul"),
               ("aten::mm", "", "matmul")]
    assert math_attention_gemms(ordered) == {7}
    assert math_attention_gemms([("aten::bmm", "", "matmul")] * 3) == set()


def test_a_cpu_profile_files_the_math_path_by_its_ops():
    def op(name, ts, dur):
        return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "tid": 1, "pid": 1}
    step = {"ph": "X", "cat": "user_annotation", "name": "compile_lab.step", "ts": 0, "dur": 100, "tid": 1, "pid": 1}
    events = [step, op("aten::addmm", 0, 10), op("aten::bmm", 12, 10), op("cpp_fused__softmax_0", 24, 10),
              op("aten::bmm", 36, 10), op("aten::addmm", 50, 10)]
    b = analyze(events, 1)
    assert b.attention_forms == {"math": pytest.approx(0.03)}
    assert b.ms["matmul"] == pytest.approx(0.02)
