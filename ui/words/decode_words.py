"""What keeps a generate run's decode step from its bandwidth limit, and what to try next, from its record.

At batch 1 a decode step reads every weight once per token, so its floor is the time those bytes take at the
memory bandwidth the run measured on its GPU (a large device-to-device copy, tcore/worker/membw.py). The step's
profiled kernels, by class (tcore.figures.breakdown), say where the time above that floor goes: matrix-vector
products that do not reach the bandwidth, attention, the rest, and launch gaps (the GPU idle between kernels).
"""
from __future__ import annotations

from typing import Any

from tcore.experiment.spec import CUDAGRAPH_MODES

# A class of kernels this share of the step or more is the one to work on.
LARGE_SHARE = 0.4
# The GPU idle this share of the step or more: the host's launches hold the step back.
IDLE_SHARE = 0.15
# Attention this share of the step or more, and this many times its share of the bytes read, is said apart.
ATTENTION_SHARE = 0.08
ATTENTION_OVER_BYTES = 4
CLASS_WORDS = {"matmul": "matrix products", "attention": "attention", "pointwise": "pointwise, norms and reductions",
               "copy": "copies and casts", "other": "other kernels", "idle": "launch gaps (the GPU idle)"}


def limit(result: dict) -> tuple[float, float, str] | None:
    """(compiled ms per token, the share of the bandwidth it reaches in %, which bandwidth), or None where the run
    has no such figure (the CPU, an eager-only run, a record from before the lab measured the copy bandwidth)."""
    ms = result.get("compiled_decode_ms_per_token")
    for key, which in (("compiled_decode_bw_measured_pct", "the copy bandwidth measured on this GPU"),
                       ("compiled_decode_bw_pct", "its datasheet bandwidth")):
        if ms and result.get(key):
            return ms, result[key], which
    return None


def class_ms(result: dict, variant: str = "compiled") -> dict[str, float]:
    """The profiled decode step's ms by kernel class, largest first (empty where it was not profiled)."""
    found = ((result.get("breakdown") or {}).get(variant) or {}).get("ms") or {}
    return dict(sorted(((k, v) for k, v in found.items() if v and v > 0), key=lambda kv: -kv[1]))


def rows(result: dict) -> list[dict[str, Any]]:
    """The table: the floor, then each kernel class of the compiled step, in ms per token and as a share."""
    found = limit(result)
    if found is None:
        return []
    ms, pct, which = found
    out = [{"what": f"the bytes read, at {which}", "ms per token": round(ms * pct / 100, 4),
            "share of the step": f"{pct:.0f}%"}]
    classes = class_ms(result)
    total = sum(classes.values()) or ms
    for name, value in classes.items():
        out.append({"what": CLASS_WORDS.get(name, name), "ms per token": round(value, 4),
                    "share of the step": f"{100 * value / total:.0f}%"})
    return out


def words(result: dict, spec: dict) -> list[str]:
    """Where a compiled decode step's time goes against its floor, in a sentence, then what to try next."""
    found = limit(result)
    if found is None:
        return []
    ms, pct, which = found
    said = [f"A compiled decode step takes {ms:.3g} ms per token; the bytes it reads would take {ms * pct / 100:.3g} "
            f"ms at {which}: it reaches {pct:.0f}% of it."]
    classes = class_ms(result)
    if not classes:
        why = (result.get("unavailable") or {}).get("compiled_profiled_step_ms")
        said.append("Where the rest goes is not known: the decode step was not profiled"
                    + (f" ({why})." if why else "."))
        return said
    total = sum(classes.values())
    parts = [f"{CLASS_WORDS.get(k, k)} {v:.3g} ms" for k, v in classes.items()]
    said.append("Per token, profiled: " + ", ".join(parts) + ".")
    said += attention_words(result, classes, total)
    said += next_steps(classes, total, spec)
    return said


def attention_words(result: dict, classes: dict[str, float], total: float) -> list[str]:
    """Attention that takes a share of the step far above the share of the bytes it reads (the KV cache): its kernels
    cost a fixed time per layer (the attention kernel and the mask built for it each step), not the bytes, which no
    knob of the lab changes (a 1B decoder's attention: over a tenth of the step for under 1% of the bytes)."""
    ms, step_ms = classes.get("attention", 0.0), result.get("compiled_decode_ms_per_token")
    read_tb_s, kv_gib = result.get("compiled_decode_tb_s"), result.get("kv_cache_gib")
    if not (ms and step_ms and read_tb_s and kv_gib) or ms < ATTENTION_SHARE * total:
        return []
    kv_pct = 100 * kv_gib * 2**30 / (read_tb_s * 1e12 * step_ms / 1e3)
    if 100 * ms / total < ATTENTION_OVER_BYTES * kv_pct:
        return []
    return [f"Attention takes {100 * ms / total:.0f}% of the step for {kv_pct:.2g}% of the bytes it reads (the KV "
            "cache): its kernels cost a fixed time per layer, the attention kernel and the mask built for it, not "
            "the bytes. A decoding attention kernel (split over the cache, as FlashDecoding's) is the lever; no knob "
            "of the lab changes it."]


def next_steps(classes: dict[str, float], total: float, spec: dict) -> list[str]:
    """What to try next for a decode step with these kernel classes, given the run's settings."""
    out = []
    mode = spec.get("mode", "default")
    if classes.get("matmul", 0) >= LARGE_SHARE * total and not spec.get("coordinate_descent"):
        out.append("Try coordinate-descent tuning (Inductor options): at batch 1 the matrix products are "
                   "matrix-vector products that cuBLAS leaves short of the bandwidth; with it Inductor writes them as "
                   "reductions it can tune (gpt-fast's setting).")
    if classes.get("idle", 0) >= IDLE_SHARE * total and mode not in CUDAGRAPH_MODES:
        out.append("Try mode reduce-overhead: the step's launch gaps go when it is replayed as one CUDA graph.")
    if spec.get("kv_cache", "static") != "static":
        out.append("Try the static KV cache: its shapes never change, so the step compiles once and can be one CUDA "
                   "graph.")
    if not mode.startswith("max-autotune") and classes.get("matmul", 0) >= LARGE_SHARE * total:
        out.append("Or mode max-autotune: it benchmarks more kernel choices for the products (a longer compile).")
    return out
