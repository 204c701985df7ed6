"""Recorded kernel lists for the kernel-class tests: hf:bert's eager and compiled layers as an H100 profiled them, and
the stored run record a page draws from them."""
from tcore.figures.breakdown import analyze


def kernel(name, ts, dur=10.0):
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "tid": 7, "pid": 0, "args": {}}


# hf:bert, bs8 x 512, bf16, one layer of each step as an H100 profiled them (NOTES, 2026-11-27): eager runs cuDNN's
# fused SDPA; compiled a mask, a softmax between two batched products, and an fp32 FFMA GEMM.
EAGER_LAYER = [
    ("nvjet_tst_192x192_64x3_2x1_v_bz_coopB_TNT", "aten::addmm", 60),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64_4x1x1_kernel0_0",
     "aten::_scaled_dot_product_cudnn_attention", 20),
    ("nvjet_tst_192x192_64x3_2x1_v_bz_coopB_TNT", "aten::addmm", 20),
    ("void at::native::vectorized_layer_norm_kernel<c10::BFloat16, float>", "aten::native_layer_norm", 8),
]
COMPILED_LAYER = [
    ("nvjet_tst_192x192_64x3_2x1_v_bz_coopB_TNT", "aten::addmm", 60),
    ("triton_poi_fused_expand_where_0", "", 4),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel"
     "_trt", "aten::bmm", 45),
    ("triton_per_fused__safe_softmax_add_1", "", 70),
    ("nvjet_tst_128x128_64x4_1x2_h_bz_coopA_NNT", "aten::bmm", 15),
    ("nvjet_tst_192x192_64x3_2x1_v_bz_coopB_TNT", "aten::addmm", 20),
    ("triton_per_fused_add_native_layer_norm_2", "", 6),
]


def profile(layer, layers=2, steps=2):
    ts, events, ops = 0.0, [], {}
    for _ in range(steps * layers):
        for name, op, dur in layer:
            events.append(kernel(name, ts, dur))
            ops[name] = (op, False)
            ts += dur + 1
    return analyze(events, steps, launched_by=ops)


def bert_result(speedup: float = 0.78) -> dict:
    """A stored result whose breakdowns show the bert case: the profiled steps are the timed ones."""
    eager, compiled = profile(EAGER_LAYER).to_dict(), profile(COMPILED_LAYER).to_dict()
    return {"variants": ["eager", "compiled"], "speedup": speedup, "breakdown": {"eager": eager, "compiled": compiled},
            "eager_latency_ms_p50": sum(eager["ms"].values()), "compiled_latency_ms_p50": sum(compiled["ms"].values())}
