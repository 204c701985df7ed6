"""Copy as code for a generate run: a program that builds the decoder, compiles its prefill and its decode step the
way the run did (gpt-fast's recipe), and times greedy generation eager against compiled, in paired rounds.

It prints the figures the run's page headlines: decode tokens per second per sequence and for the batch, time to
first token, the compile time split into prefill and decode, and whether eager and compiled wrote the same tokens.
"""
from __future__ import annotations

import sample_models
from sample_models import decoding
from tcore.experiment.precision import TORCH_DTYPES
from tcore.experiment.spec import PRECISIONS, Experiment, generate_kwargs, kwargs_source
from tcore.export import snippet_sources

# The helpers every generate program defines, and the eager reference generation: the same for every run.
_GENERATE = [
    'mark_step = torch.compiler.cudagraph_mark_step_begin if device == "cuda" else (lambda: None)',
    "",
    "",
    "def sync():",
    '    if device == "cuda":',
    "        torch.cuda.synchronize()",
    "",
    "",
    "def cache_for(static_cache):",
    "    if STATIC:  # allocated once, emptied before each generation",
    "        decoder.reset(static_cache)",
    "        return static_cache",
    "    return decoder.new_cache(BATCH, PROMPT + NEW, False, CACHE_DTYPE, device)",
    "",
    "",
    "@torch.no_grad()",
    "def generate(prefill, decode, static_cache, each_step=False):",
    '    """Greedy: (tokens (BATCH, NEW), seconds to the first token, seconds of decode steps)."""',
    "    cache = cache_for(static_cache)",
    "    with autocast:",
    "        sync()",
    "        t0 = time.perf_counter()",
    "        mark_step()",
    "        tokens = [prefill(cache, *prompt).clone()]  # CUDA graphs reuse their outputs: keep copies",
    "        sync()",
    "        t1 = time.perf_counter()",
    "        for pos in torch.arange(PROMPT, PROMPT + NEW - 1, device=device).split(1):",
    "            mark_step()",
    "            tokens.append(decode(cache, tokens[-1][:, None], pos).clone())",
    "            if each_step:",
    "                sync()",
    "        sync()",
    "        return torch.stack(tokens, 1), t1 - t0, time.perf_counter() - t1",
    "",
    "",
    "eager_cache = decoder.new_cache(BATCH, PROMPT + NEW, STATIC, CACHE_DTYPE, device)",
    "generate(decoder.prefill, decoder.decode, eager_cache)  # warm-up",
    "eager_tokens, eager_ttft, eager_decode = generate(decoder.prefill, decoder.decode, eager_cache, True)",
]


def code_for(exp: Experiment, device: str, opening: list[str]) -> str:
    """The program for a generate run on `device`; `opening` is tcore.export.snippet's header and model lines."""
    entry = sample_models.get(exp.model)
    prompt, new = decoding.lengths(entry, exp.preset, exp.prompt_len, exp.new_tokens)
    precision = PRECISIONS[exp.precision]
    weights, compute = TORCH_DTYPES[precision.weights], precision.autocast
    prefill_args, decode_args = (kwargs_source(kwargs) for kwargs in generate_kwargs(exp))
    # a built-in's decoder is the lab's (sample_models/decoding.py); a transformers model's is written out
    decoder = ([f"decoder = decoding.decoder(entry, model, {exp.preset!r})"] if entry.builtin else
               ["decoder = HfDecoder(model)"])
    lines = [*opening,
        "import statistics",
        "import time",
        "",
        *(["from sample_models import decoding", ""] if entry.builtin else snippet_sources.decoder_lines()),
        "model = model.eval()",
        f"CACHE_DTYPE = {TORCH_DTYPES[compute] if compute else weights}  # what the keys and values are computed in",
        f"model = model.to({weights})  # <-- precision={exp.precision}" if weights != "torch.float32" else "",
        f"PROMPT, NEW, BATCH, STATIC = {prompt}, {new}, {exp.batch_size}, {exp.kv_cache == 'static'}",
        "# prefill(cache, *prompt) and decode(cache, token, pos) return the greedy next token",
        *decoder,
        f"prompt = tuple(t.to({weights}) if t.is_floating_point() else t for t in",
        "               decoder.prompt(BATCH, PROMPT, device, torch.Generator(device).manual_seed(0)))",
        f"autocast = torch.autocast(device, {TORCH_DTYPES[compute]})" if compute else
        "autocast = torch.autocast(device, enabled=False)",
        "",
    ]
    if exp.compiles:
        lines += [
            "# gpt-fast's recipe: the decode step compiled on its own, fullgraph where the cache is static, so its",
            "# shapes never change (CUDA graphs replay it); the prefill without CUDA graphs, its shape is the prompt's",
            f"compiled_prefill = torch.compile(decoder.prefill{', ' * bool(prefill_args)}{prefill_args})  # <--",
            f"compiled_decode = torch.compile(decoder.decode{', ' * bool(decode_args)}{decode_args})  # <--",
            "",
        ]
    lines += _GENERATE
    if not exp.compiles:
        lines += [
            'print(f"eager: {(NEW - 1) / eager_decode:.1f} tokens/s per sequence, '
            '{BATCH * (NEW - 1) / eager_decode:.1f} for the batch, first token {eager_ttft * 1e3:.2f} ms")']
        return "\n".join(lines) + "\n"
    lines += _compiled_and_paired_rounds(exp)
    return "\n".join(lines) + "\n"


def _compiled_and_paired_rounds(exp: Experiment) -> list[str]:
    """The compiled generation (its compile time, whether it writes eager's tokens), then the paired rounds."""
    return [
        "compiled_cache = decoder.new_cache(BATCH, PROMPT + NEW, STATIC, CACHE_DTYPE, device)",
        "tokens, first_ttft, first_decode = generate(compiled_prefill, compiled_decode, compiled_cache, True)",
        ('print(f"compile: prefill {max(first_ttft - eager_ttft, 0):.1f} s, '
         'decode {max(first_decode - eager_decode, 0):.1f} s")'),
        'print(f"same tokens as eager: {torch.equal(tokens, eager_tokens)}")',
        "generate(compiled_prefill, compiled_decode, compiled_cache)  # CUDA graphs recorded by now",
        "",
        "# --- The effect: paired rounds, an eager and a compiled generation back to back, the order alternating",
        "ratios, rates, ttfts = [], {'eager': [], 'compiled': []}, {'eager': [], 'compiled': []}",
        "variants = [('eager', decoder.prefill, decoder.decode, eager_cache),",
        "            ('compiled', compiled_prefill, compiled_decode, compiled_cache)]",
        f"for r in range({max(exp.rounds, 6)}):",
        "    for name, prefill, decode, cache in variants if r % 2 == 0 else variants[::-1]:",
        "        _, ttft, decode_s = generate(prefill, decode, cache)",
        "        rates[name].append((NEW - 1) / decode_s)",
        "        ttfts[name].append(ttft)",
        "    ratios.append(rates['compiled'][-1] / rates['eager'][-1])",
        "for name in rates:",
        "    tps = statistics.median(rates[name])",
        '    print(f"{name}: {tps:.1f} tokens/s per sequence, {tps * BATCH:.1f} for the batch, "',
        '          f"first token {statistics.median(ttfts[name]) * 1e3:.2f} ms")',
        'print(f"decode speedup {statistics.median(ratios):.2f}x (median of {len(ratios)} paired rounds)")',
    ]
