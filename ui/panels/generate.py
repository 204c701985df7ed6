"""The generate task on the pages: its knobs (KV cache, prompt and output lengths), its headline in tokens per second
and time to first token, and whether eager and compiled wrote the same tokens."""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import streamlit as st

import sample_models
from sample_models import decoding
from tcore import figures
from tcore.experiment import comparable
from tcore.experiment.device import practical_defaults
from tcore.experiment.spec import CHOICES, describe
from ui.words import run_words


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
    top.append({"label": "Time to first token (ms)", "value": _ms(result.get("compiled_ttft_ms")),
                "delta": (f"eager {_ms(result['eager_ttft_ms'])}" if result.get("eager_ttft_ms") is not None else None),
                "delta_color": "off", "delta_arrow": "off", "help": ttft.means})
    split = (f"prefill {result['compile_prefill_s']:.1f} + decode {result['compile_decode_s']:.1f} s"
             if result.get("compile_prefill_s") is not None else None)
    top.append({"label": "Compile time", "value": figures.text(result, "compile_s", reason=False), "delta": split,
                "delta_color": "off", "delta_arrow": "off", "help": compile_help(result)})
    fig = figures.VARIANT_FIGURES["tokens_per_s"]
    delta, why = run_words.vs_eager(result, "tokens_per_s")  # from the two figures on these tiles
    batch = batch_words(result)
    bottom = [{"label": f"{variant.capitalize()} tokens/s",
               "value": figures.text(result, f"{variant}_tokens_per_s", unit=False, reason=False),
               "delta": delta if variant == "compiled" else batch,
               "delta_color": "normal" if variant == "compiled" else "off",
               "delta_arrow": "auto" if variant == "compiled" else "off",
               "help": fig.means + (why if variant == "compiled" else "")} for variant in ("eager", "compiled")]
    if result.get("device") != "cpu":  # the CPU has no bandwidth yardstick: the sentence under the tiles says so once
        bottom.append(bandwidth_tile(result))
    return [top, bottom]


def batch_words(result: dict) -> str | None:
    """'all 8 sequences': what the tokens/s tiles count, the whole batch (tokens/s over tokens/s per sequence)."""
    whole, each = result.get("eager_tokens_per_s"), result.get("eager_decode_tokens_per_s")
    if not whole or not each:
        return None
    batch = round(whole / each)
    return f"all {batch} sequences" if batch != 1 else "1 sequence"


def compile_help(result: dict) -> str:
    """What the compile-time tile counts, and why the timeline's compile phase is longer."""
    words = (f"{figures.RUN_FIGURES['compile_s'].means} Prefill: {figures.RUN_FIGURES['compile_prefill_s'].means} "
             f"Decode: {figures.RUN_FIGURES['compile_decode_s'].means}")
    if result.get("timeline_compile_s") is not None:
        words += (f" The timeline's compile phase ({result['timeline_compile_s']:.1f} s) is longer: "
                  f"{figures.RUN_FIGURES['timeline_compile_s'].means}")
    return words


def bandwidth_tile(result: dict) -> dict[str, Any]:
    """Compiled decode's share of the GPU's memory bandwidth: of the measured copy bandwidth where there is one, with
    the datasheet's share beside it, each yardstick named with its TB/s."""
    unavailable = result.get("unavailable") or {}
    shares, why = [], []
    for name, pct_key, tb_key in (("measured", "compiled_decode_bw_measured_pct", "mem_bw_measured_tb_s"),
                                  ("datasheet", "compiled_decode_bw_pct", "mem_bw_datasheet_tb_s")):
        if result.get(pct_key) is not None:  # a record from before the TB/s were kept has the share alone
            pct, tb = result[pct_key], result.get(tb_key)
            rate = f"{_bandwidth(tb)} " if tb is not None else "the "
            shares.append((f"{pct:.1f}% {name}", f"{pct:.1f}% of {rate}{name}"))
        elif pct_key in unavailable:
            why.append(f"{name}: n/a, {unavailable[pct_key]}")
    rate = result.get("compiled_decode_tb_s")
    reads = f"reads {_bandwidth(rate)}" if rate is not None else None
    means = (f"{figures.VARIANT_FIGURES['decode_tb_s'].means} Measured: "
             f"{figures.RUN_FIGURES['mem_bw_measured_tb_s'].means} Datasheet: "
             f"{figures.RUN_FIGURES['mem_bw_datasheet_tb_s'].means}")
    if not shares:  # no yardstick (a CPU): the rate read is the figure, not "n/a" above it
        return {"label": "Decode memory bandwidth", "value": reads or "n/a",
                "delta": "share of the peak: n/a" if reads else None, "delta_color": "off", "delta_arrow": "off",
                "help": " ".join([means, *(f"{w}." for w in why)])}
    return {"label": "Decode memory bandwidth", "value": shares[0][0],
            "delta": "; ".join(([reads] if reads else []) + [long for _, long in shares]) or None,
            "delta_color": "off", "delta_arrow": "off", "help": " ".join([means, *(f"{w}." for w in why)])}


def _bandwidth(tb_s: float) -> str:
    """'1.42 TB/s', '139 GB/s', '1.26 MB/s': the unit that keeps the figure between 1 and 1000, three significant
    digits, so a CPU's rate is not '0.00126 GB/s'."""
    for unit, scale in (("TB/s", 1.0), ("GB/s", 1e-3), ("MB/s", 1e-6), ("KB/s", 1e-9)):
        if tb_s >= scale:
            return f"{_digits(tb_s / scale)} {unit}"
    return f"{_digits(tb_s / 1e-9)} KB/s"


def _digits(x: float) -> str:
    """Three significant digits without an exponent: '1.26', '42.0', '422', '1,234'."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _ms(ms: float | None) -> str:
    """A time in ms at three significant digits: '422', '600', '8.42' (not '422.01' or '600.00')."""
    return "n/a" if ms is None else _digits(ms)


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
    if words := bandwidth_words(result):
        out.append(words)
    return out


def bandwidth_words(result: dict) -> str | None:
    """One sentence: what compiled decode reads per second against both yardsticks, or why neither is there.

    A record saved before the lab measured the copy bandwidth has the datasheet share alone, without the TB/s
    figures: it says the share it has."""
    rate, unavailable = result.get("compiled_decode_tb_s"), result.get("unavailable") or {}
    measured, datasheet = result.get("mem_bw_measured_tb_s"), result.get("mem_bw_datasheet_tb_s")
    parts = []
    if result.get("compiled_decode_bw_measured_pct") is not None:
        parts.append(f"{result['compiled_decode_bw_measured_pct']:.1f}% of "
                     + (f"the {measured:.2f} TB/s " if measured else "what ")
                     + "a device-to-device copy reached on this GPU (measured)")
    if result.get("compiled_decode_bw_pct") is not None:
        parts.append(f"{result['compiled_decode_bw_pct']:.1f}% of "
                     + (f"the {datasheet:.3g} TB/s of its datasheet" if datasheet else "its datasheet bandwidth"))
    if not parts:
        why = unavailable.get("compiled_decode_bw_measured_pct") or unavailable.get("compiled_decode_bw_pct")
        if rate is not None and result.get("device") == "cpu":  # a rate with no yardstick: said once, as such
            return (f"Compiled decode reads {_bandwidth(rate)} of weights and cache, a rate with no share of a peak "
                    f"beside it: on the CPU "
                    f"{(why or 'the lab measures a GPU memory bandwidth only').removeprefix('on the CPU: ')}.")
        return f"Memory bandwidth share: n/a, {why}." if why else None
    said = f"Compiled decode reads {_bandwidth(rate)}: " if rate is not None else "Compiled decode reaches "
    return said + ", and ".join(parts) + "."


# --- on Diagnose: what a new prompt length costs ---------------------------------------------------

PROMPT_WORDS = (
    "A generate run compiles two functions, the prefill over the prompt and the decode step, and after the timing "
    "generates once more with a prompt one token shorter. The prompt is the prefill's input, so a new length fails "
    "its size guard and Dynamo compiles the prefill again (with dynamic=None that recompilation marks the length "
    "dynamic, so later lengths reuse it). The decode step sees the prompt only through the KV cache: a **static** "
    "cache is allocated at its full length, so the decode step's shapes never change and it does not recompile; the "
    "**dynamic** cache grows by a token each step, so the decode step recompiles as it grows (with dynamic=None, "
    "once: that recompilation marks the cache length dynamic). Padding prompts to a few lengths (buckets) or "
    "dynamic=True keeps the prefill from recompiling.")


def prompt_frames(result: dict) -> list[str] | None:
    """The function each new-prompt recompilation compiled: the latest recompile event on the compile timeline with
    its reason (the shorter prompt runs after the timed generations). None for a run that stored no timeline."""
    events = [e for e in result.get("compile_events") or [] if e.get("kind") == "recompile"]
    if not events:
        return None
    frames = []
    for reason in result.get("prompt_recompile_reasons") or []:
        match = [e for e in events if e.get("reason") == reason]
        frames.append(max(match, key=lambda e: e.get("t_s") or 0)["frame"] if match else "?")
    return frames


def prompt_rows(rec, records: list) -> list[dict[str, Any]]:
    """This generate run's recompilations for a new prompt length and as the cache grew, beside the newest stored
    run of the same setting with each other KV cache."""
    ignoring = comparable.PROVENANCE_FIELDS | {"kv_cache"}
    same = comparable.settings(rec.spec, ignoring=ignoring)
    shown, runs = {rec.spec.get("kv_cache")}, [rec]
    for other in records:  # newest first
        kv = other.spec.get("kv_cache")
        if (other.status == "finished" and other.spec.get("task") == "generate" and kv not in shown
                and comparable.settings(other.spec, ignoring=ignoring) == same):
            shown.add(kv)
            runs.append(other)
    rows = []
    for r in runs:
        res, frames = r.result, prompt_frames(r.result)
        rows.append({"KV cache": r.spec.get("kv_cache"), "Run": r.id[-6:],
                     "Recompilations as the cache grew": res.get("decode_recompiles"),
                     "Recompilations for a prompt 1 token shorter": res.get("prompt_recompiles"),
                     "In which function": ", ".join(f"{n} × {f}" for f, n in Counter(frames).items()) if frames
                     else ("none" if res.get("prompt_recompiles") == 0 else "not recorded"),
                     "Why (Dynamo's guard)": (res.get("prompt_recompile_reasons") or ["—"])[0]})
    return rows


def prompt_length_section(rec, records: list, queue_other: Callable[[Any], None]) -> None:
    """Diagnose, one generate run: the recompilations a new prompt length caused, static cache against dynamic."""
    st.markdown("#### A new prompt length: static against dynamic KV cache")
    st.caption(PROMPT_WORDS)
    rows = prompt_rows(rec, records)
    st.dataframe(rows, hide_index=True, key="diag_prompt_rows")
    other = next(kv for kv in CHOICES["kv_cache"] if kv != rec.spec.get("kv_cache"))
    if len(rows) == 1 and st.button(f"Run this setting with the {other} KV cache to compare",
                                    key="diag_prompt_other", icon=":material/play_arrow:"):
        queue_other(other)


# --- on Sweep: the generation knobs as axes ---------------------------------------------------------

LENGTHS = (0, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # 0: the model's default; too long for it: skipped, said why


def sweep_axes(model: dict, device: str) -> dict[str, list]:
    """The Sweep page's generation axes, mode x cache x batch x lengths as gpt-fast's and transformers' recipes
    turn them: KV cache, batch size, prompt tokens and new tokens. The lengths start where the Run page's do on
    `device` (cuda or cpu): on the CPU a few dozen tokens (tcore.experiment.device.practical_defaults), since the
    model's own 128 + 256 can run past a run's time limit in its first compiled call there."""
    entry = sample_models.get(model["model"])
    p, n = decoding.lengths(entry, model["preset"], 0, 0) if decoding.cannot_generate(entry) is None else (0, 0)
    first = sweep_lengths(model, device)
    # Set before the boxes exist (a new model, preset or device starts from its own lengths), not through default=:
    # the page keeps every axis in the session (ui.panels.knobs.keep_settings), and a widget given both logs a warning.
    if st.session_state.get(LENGTHS_FOR) != (shown_for := f"{model['model']}/{model['preset']}/{device}"):
        st.session_state[LENGTHS_FOR] = shown_for
        st.session_state["sweep_prompt_lens"], st.session_state["sweep_new_tokens"] = [first[0]], [first[1]]
    axes = {"kv_cache": st.multiselect("KV cache", CHOICES["kv_cache"], default=["static"], key="sweep_kv_cache"),
            "batch_size": st.multiselect("Batch sizes", sorted({1, 2, 4, 8, 16, 32, 64, model["batch_size"]}),
                                         default=[model["batch_size"]], key="sweep_batches")}
    left, right = st.columns(2)
    axes["prompt_len"] = left.multiselect("Prompt tokens", sorted({*LENGTHS, first[0]}), key="sweep_prompt_lens",
                                          format_func=lambda v: f"default ({p})" if v == 0 else str(v))
    axes["new_tokens"] = right.multiselect("New tokens", sorted({*LENGTHS, first[1]}), key="sweep_new_tokens",
                                           format_func=lambda v: f"default ({n})" if v == 0 else str(v))
    return axes


LENGTHS_FOR = "sweep_lengths_for"  # session_state: the model/preset/device whose first lengths the axes were given


def sweep_lengths(model: dict, device: str) -> tuple[int, int]:
    """(prompt tokens, new tokens) a generate sweep of `model` (the page's model knobs) starts from on `device`: the
    Run page's practical lengths there, each 0 (the model's default, named as such) where it is that default."""
    entry = sample_models.get(model["model"])
    if decoding.cannot_generate(entry) is not None:
        return 0, 0
    practical = practical_defaults(model["model"], device, "generate")
    own = decoding.lengths(entry, model["preset"], 0, 0)
    picked = decoding.lengths(entry, model["preset"], practical["prompt_len"], practical["new_tokens"])
    return tuple(0 if mine == theirs else mine for mine, theirs in zip(picked, own))
