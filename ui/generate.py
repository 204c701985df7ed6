"""The generate task on the pages: its knobs (KV cache, prompt and output lengths), its headline in tokens per second
and time to first token, and whether eager and compiled wrote the same tokens."""
from __future__ import annotations

from typing import Any

import streamlit as st

import sample_models
from sample_models import decoding
from tcore import figures
from tcore.experiment.spec import CHOICES, describe
from ui import run_words


def knobs(prefix: str, model: str, preset: str) -> dict:
    """The KV cache and the lengths; 0 means the model's default, which the caption names."""
    kv = st.radio("KV cache", CHOICES["kv_cache"], key=prefix + "kv_cache", horizontal=True)
    st.caption(describe("kv_cache", kv))
    left, right = st.columns(2)
    prompt = left.number_input("Prompt tokens (0: default)", min_value=0, step=16, key=prefix + "prompt_len")
    new = right.number_input("New tokens (0: default)", min_value=0, step=16, key=prefix + "new_tokens")
    entry = sample_models.get(model)
    if decoding.cannot_generate(entry) is None:
        p, n = decoding.lengths(entry, preset, int(prompt), int(new))
        st.caption(f"Reads a {p}-token prompt, then writes {n} tokens per sequence, greedily (the model has "
                   f"{decoding.max_positions(entry, preset):,} positions). Eager and compiled get the same prompt, "
                   "so they should write the same tokens.")
    return dict(kv_cache=kv, prompt_len=int(prompt), new_tokens=int(new))


def headline_tiles(result: dict) -> list[list[dict[str, Any]]]:
    """The metric tiles of a generate run: decode speedup, time to first token, compile time (prefill + decode);
    then each variant's decode throughput in tokens/s."""
    top = run_words.headline_tiles(result)[0][:1]  # the paired speedup, of decode tokens per second
    top[0]["label"] = "Decode speedup"
    ttft = figures.VARIANT_FIGURES["ttft_ms"]
    top.append({"label": "Time to first token (ms)",
                "value": figures.text(result, "compiled_ttft_ms", unit=False, reason=False),
                "delta": (f"eager {figures.text(result, 'eager_ttft_ms', unit=False, reason=False)}"
                          if result.get("eager_ttft_ms") is not None else None),
                "delta_color": "off", "delta_arrow": "off", "help": ttft.means})
    split = (f"prefill {result['compile_prefill_s']:.1f} + decode {result['compile_decode_s']:.1f} s"
             if result.get("compile_prefill_s") is not None else None)
    top.append({"label": "Compile time", "value": figures.text(result, "compile_s", reason=False), "delta": split,
                "delta_color": "off", "delta_arrow": "off", "help": figures.RUN_FIGURES["compile_decode_s"].means})
    speedup = result.get("speedup")
    fig = figures.VARIANT_FIGURES["tokens_per_s"]
    bottom = [{"label": f"{variant.capitalize()} tokens/s",
               "value": figures.text(result, f"{variant}_tokens_per_s", unit=False, reason=False),
               "delta": f"{(speedup - 1) * 100:+.0f}% vs eager" if speedup and variant == "compiled" else None,
               "help": fig.means} for variant in ("eager", "compiled")]
    bw = figures.VARIANT_FIGURES["decode_bw_pct"]
    bottom.append({"label": "Memory bandwidth", "value": figures.text(result, "compiled_decode_bw_pct", reason=False),
                   "help": bw.means + (f" n/a: {why}" if (why := (result.get("unavailable") or {}).get(
                       "compiled_decode_bw_pct")) else "")})
    return [top, bottom]


def tokens_words(result: dict) -> tuple[bool | None, str]:
    """(ok, sentence): did compiled write eager's tokens? ok is None when nothing was compiled."""
    same = result.get("tokens_match")
    lengths = f"a {result.get('prompt_tokens')}-token prompt, {result.get('new_tokens')} new tokens, greedy"
    if same is None:
        return None, f"Generated {lengths}; nothing was compiled, so there is nothing to compare with eager."
    if same:
        return True, f"Compiled wrote exactly eager's tokens ({lengths})."
    return False, (f"Compiled wrote other tokens than eager: {result['tokens_same_pct']:.1f}% equal ({lengths}). "
                   "Greedy decoding follows the largest logit, so a rounding difference between near-equal logits "
                   "changes the text from there on.")


def details_words(result: dict) -> list[str]:
    """Sentences on recompilations and launches, under the headline."""
    out = []
    if result.get("decode_recompiles") is not None:
        out.append(f"The decode step recompiled {result['decode_recompiles']} time(s) as the cache grew, and a "
                   f"prompt one token shorter caused {result.get('prompt_recompiles')} recompilation(s)"
                   + (f": {result['prompt_recompile_reasons'][0]}." if result.get("prompt_recompile_reasons") else "."))
    if result.get("launch_bound_words"):
        out.append(result["launch_bound_words"])
    return out
