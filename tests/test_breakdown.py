"""Where a step's time goes (tcore.figures.breakdown) over synthetic profiler traces, and GPU peaks (tcore.host.peaks).
"""
import pytest

from tcore.figures.breakdown import (
    CATEGORIES,
    OPTIMIZER_MARK,
    STEP_MARK,
    analyze,
    categorize,
    differences,
    launchers,
    short_name,
)
from tcore.host.peaks import lookup


def cpu_op(name, ts, dur, tid=1, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid, "pid": 1}


def kernel(name, ts, dur, correlation, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": 7, "pid": 0,
            "args": {"correlation": correlation, "stream": 7}}


def launch(ts, correlation, tid=1):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 2, "tid": tid, "pid": 1,
            "args": {"correlation": correlation}}


@pytest.mark.parametrize("name, op, expected", [
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "aten::mm", "matmul"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "aten::addmm", "matmul"),
    ("void cudnn::cnn::conv2d_grouped_direct_kernel<float>", "aten::cudnn_convolution", "matmul"),
    ("triton_tem_fused_convolution_0", "", "matmul"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>", "aten::_flash_attention_forward",
     "attention"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "", "attention"),
    ("triton_poi_fused_add_native_layer_norm_relu_3", "", "pointwise"),
    ("triton_red_fused_native_batch_norm_legit_no_training_5", "", "pointwise"),
    # coordinate descent's batch-1 matrix-vector products, written as reductions fused with the norm (Llama decode)
    ("triton_red_fused__to_copy_add_mean_mm_mul_pow_rsqrt_t_view_15", "", "matmul"),
    ("triton_red_fused_mm_t_view_9", "## Call CompiledFxGraph abc ##", "matmul"),
    ("triton_poi_fused_mul_silu_3", "", "pointwise"),  # "silu" holds no "mm" of its own
    # the bias of a cuBLAS addmm, split off into the layer norm after it (Flux on an H100): a norm, not a product
    ("triton_red_fused_add_addmm_mul_native_layer_norm_split_unsqueeze_view_28", "", "pointwise"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", "aten::add", "pointwise"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>", "aten::copy_", "copy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda>", "aten::_to_copy",
     "copy"),
    ("triton_poi_fused__to_copy_clone_2", "", "copy"),
    ("Memcpy HtoD (Pageable -> Device)", "", "copy"),
    ("void nchwToNhwcKernel<float>", "aten::cudnn_convolution", "copy"),
    ("void at::native::multi_tensor_apply_kernel<TensorListMetadata<4>>", "aten::_foreach_mul_", "optimizer"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", "aten::add_",
     "pointwise"),
    ("some_vendor_kernel", "", "other"),
    ("cudnn::bn_fw_inf_1C11_kernel_NHWC<float>", "aten::cudnn_batch_norm", "pointwise"),
    ("at::native::batch_norm_transform_input_channels_last_kernel", "aten::native_batch_norm", "pointwise"),
    # the CPU: the op is the kernel
    ("aten::addmm", "", "matmul"),
    ("aten::mkldnn_convolution", "", "matmul"),
    ("graph_0_cpp_fused_gelu_native_layer_norm_0", "", "pointwise"),
    ("aten::native_layer_norm", "", "pointwise"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "", "attention"),
    ("aten::copy_", "", "copy"),
])
def test_kernels_and_ops_fall_into_their_category(name, op, expected):
    assert categorize(name, op) == expected


def test_anything_inside_the_optimizer_mark_is_the_optimizer():
    assert categorize("triton_for_fused_0", "", in_optimizer=True) == "optimizer"


def test_gpu_trace_categories_plus_idle_make_up_the_step():
    """Two steps of three kernels each; the GPU waits 20 us between some of them."""
    events = [cpu_op(STEP_MARK, 0, 300, cat="user_annotation"), cpu_op(STEP_MARK, 300, 300, cat="user_annotation"),
              cpu_op("aten::mm", 10, 20), launch(12, 1), cpu_op("aten::add", 40, 10), launch(42, 2),
              cpu_op(OPTIMIZER_MARK, 60, 50, cat="user_annotation"), cpu_op("aten::_foreach_add_", 65, 20),
              launch(70, 3),
              cpu_op("aten::mm", 310, 20), launch(312, 4), cpu_op("aten::add", 340, 10), launch(342, 5),
              cpu_op("aten::copy_", 360, 10), launch(362, 6)]
    events += [kernel("sm90_xmma_gemm_bf16", 100, 100, 1), kernel("vectorized_elementwise_kernel", 220, 30, 2),
               kernel("multi_tensor_apply_kernel", 250, 20, 3),
               kernel("sm90_xmma_gemm_bf16", 400, 100, 4), kernel("vectorized_elementwise_kernel", 500, 30, 5),
               kernel("Memcpy DtoD", 530, 10, 6, cat="gpu_memcpy")]
    b = analyze(events, steps=2)
    assert b.source == "gpu kernels"
    assert b.step_ms == pytest.approx((540 - 100) / 1e3 / 2)
    assert b.ms["matmul"] == pytest.approx(0.1) and b.ms["pointwise"] == pytest.approx(0.03)
    assert b.ms["optimizer"] == pytest.approx(0.01) and b.ms["copy"] == pytest.approx(0.005)
    # idle: 200..220 and 270..400 between kernels
    assert b.ms["idle"] == pytest.approx((20 + 130) / 1e3 / 2)
    assert b.accounted_ms == pytest.approx(b.step_ms)
    assert b.top[0]["name"] == "sm90_xmma_gemm_bf16" and b.top[0]["op"] == "aten::mm"
    assert b.top[0]["share_pct"] == pytest.approx(200 / 290 * 100, abs=0.1)


def test_a_timing_trace_without_host_ops_takes_its_launchers_from_a_detailed_trace():
    """On a GPU the timing pass records kernels only (host recording slows launches); a detailed pass of the
    same steps says which op launched each kernel, so a generic kernel still lands in the right category."""
    detail = [cpu_op(STEP_MARK, 0, 100, cat="user_annotation"), cpu_op("aten::_to_copy", 10, 10), launch(12, 1),
              cpu_op(OPTIMIZER_MARK, 30, 30, cat="user_annotation"), cpu_op("aten::add_", 35, 5), launch(36, 2),
              kernel("vectorized_elementwise_kernel<copy>", 40, 5, 1),
              kernel("vectorized_elementwise_kernel<add>", 50, 5, 2)]
    timing = [kernel("vectorized_elementwise_kernel<copy>", 1000, 4, 91), kernel("vectorized_elementwise_kernel<add>",
                                                                                   1006, 4, 92)]
    b = analyze(timing, steps=1, launched_by=launchers(detail))
    assert b.ms["copy"] == pytest.approx(0.004) and b.ms["optimizer"] == pytest.approx(0.004)
    assert b.ms["idle"] == pytest.approx(0.002) and b.step_ms == pytest.approx(0.010)


def test_overlapping_streams_are_counted_once_for_the_idle_and_reported():
    events = [cpu_op(STEP_MARK, 0, 200, cat="user_annotation"), cpu_op("aten::mm", 1, 5), launch(2, 1),
              cpu_op("aten::add", 10, 5), launch(11, 2)]
    events += [kernel("gemm", 20, 100, 1), kernel("elementwise", 60, 100, 2)]
    b = analyze(events, steps=1)
    assert b.ms["idle"] == pytest.approx(0.0)
    assert b.overlap_ms == pytest.approx(0.06)


def test_cpu_trace_uses_self_time_and_counts_time_outside_ops_as_idle():
    """aten::linear wraps addmm, which wraps a copy_: each op's own time goes to its own category."""
    events = [cpu_op(STEP_MARK, 0, 1000, cat="user_annotation"),
              cpu_op("aten::linear", 100, 500), cpu_op("aten::t", 105, 5), cpu_op("aten::addmm", 120, 470),
              cpu_op("aten::copy_", 130, 50),
              cpu_op("graph_0_cpp_fused_gelu_native_layer_norm_0", 650, 200)]
    b = analyze(events, steps=1)
    assert b.source == "cpu ops"
    assert b.ms["matmul"] == pytest.approx((470 - 50 + 500 - 5 - 470) / 1e3)  # addmm's and linear's own time
    assert b.ms["copy"] == pytest.approx(0.05) and b.ms["pointwise"] == pytest.approx(0.2)
    assert b.accounted_ms == pytest.approx(b.step_ms) == pytest.approx(1.0)
    assert b.ms["idle"] == pytest.approx(1.0 - 0.445 - 0.05 - 0.2)


def test_a_trace_without_step_marks_has_no_breakdown():
    assert analyze([cpu_op("aten::mm", 0, 10)], steps=1) is None


def test_the_sentence_names_the_biggest_changes_and_why():
    eager = {"step_ms": 10.0, "ms": {"matmul": 3.0, "pointwise": 4.1, "idle": 2.3, "copy": 0.6}}
    compiled = {"step_ms": 4.5, "ms": {"matmul": 3.0, "pointwise": 0.9, "idle": 0.2, "copy": 0.4}}
    words = differences(eager, compiled)
    assert words.startswith("pointwise, norms and reductions 4.10 → 0.90 ms (fusion)")
    assert "idle 2.30 → 0.20 ms (fewer launches, or CUDA graphs)" in words
    assert "copies" not in words  # 0.2 ms is under 5% of the eager step
    assert set(CATEGORIES) >= {"matmul", "attention", "pointwise", "copy", "optimizer", "other", "idle"}


def test_kernel_names_lose_their_template_arguments():
    assert short_name("void at::native::vectorized_elementwise_kernel<4, at::native::X<float>>(int, Y)") == \
        "at::native::vectorized_elementwise_kernel"
    assert short_name("triton_poi_fused_add_0") == "triton_poi_fused_add_0"


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"), ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
    ("NVIDIA L40S", "L40S"), ("NVIDIA L4", "L4"), ("NVIDIA GeForce RTX 4090", None), (None, None),
])
def test_known_gpus_have_peaks_and_others_say_so(name, expected):
    peak = lookup(name)
    assert (peak.name if peak else None) == expected


def test_the_peak_follows_what_the_matmuls_compute_in():
    h100 = lookup("NVIDIA H100 80GB HBM3")
    assert h100.tflops("fp32") == 67 and h100.tflops("tf32") == 495
    assert h100.tflops("bf16") == h100.tflops("amp-bf16") == h100.tflops("amp-fp16") == 989


def test_peak_shares_from_a_runs_figures():
    from tcore.figures import VariantFigures, peak_shares

    v = VariantFigures(tflops=494.5, steps_per_s=100.0)
    shares, missing = peak_shares(v, lookup("NVIDIA H200"), "bf16", weight_bytes=24 * 10**9, inference=True)
    assert shares["peak_pct"] == pytest.approx(50.0)
    assert shares["weights_bw_pct"] == pytest.approx(24e9 * 100 / 4.8e12 * 100)
    assert not missing
    shares, missing = peak_shares(v, None, "bf16", weight_bytes=1, inference=True)
    assert not shares and "no peak figures for this device" in missing["peak_pct"]
    _, missing = peak_shares(v, lookup("NVIDIA H200"), "amp-bf16", weight_bytes=1, inference=False)
    assert "training" in missing["weights_bw_pct"]


def test_gpu_idle_is_re_based_on_the_timed_step_when_profiling_slowed_the_launches():
    from tcore.figures.breakdown import Breakdown, against_timed

    profiled = Breakdown(step_ms=9.5, ms={"matmul": 0.4, "pointwise": 0.6, "idle": 8.5}, steps=10, source="gpu kernels")
    b = against_timed(profiled, timed_ms=6.0)
    assert b.ms["idle"] == pytest.approx(5.0) and b.profiled_idle_ms == 8.5
    assert sum(b.ms.values()) == pytest.approx(6.0)
    assert against_timed(profiled, timed_ms=0.5).ms["idle"] == 0.0  # never negative
