"""The ways bench/generate_check.py times, each in a process of its own (its --one WAY): transformers' generate()
three ways (GENERATE_WAYS) and a plain loop over its StaticCache, eager or compiled. The check's docstring says how
each is timed; this module holds only what runs inside a way's process, the driver and its report stay there."""
from __future__ import annotations

import inspect
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device: str) -> float:
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def build(args, device: str):
    import torch

    import sample_models

    entry = sample_models.get(args.model)
    torch.manual_seed(0)
    model = entry.build(args.preset, device=device).eval()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    model = model.to(dtype)
    model.generation_config.pad_token_id = model.config.eos_token_id or 0
    # the lab builds its transformers models with use_cache=False (its forward-pass tasks want none); generation does
    model.config.use_cache = model.generation_config.use_cache = True
    prompt = torch.randint(0, model.config.vocab_size, (args.batch_size, args.prompt_len), device=device,
                           generator=torch.Generator(device).manual_seed(0))
    return model, prompt, dtype


# transformers' own generate(), three ways (the result's keys): greedy, exactly --new-tokens tokens, a static cache
GENERATE_WAYS = {
    "generate_static": "generate(cache_implementation=\"static\"), nothing compiled (disable_compile=True)",
    "generate_auto_compile": "generate(cache_implementation=\"static\") with its automatic compile of the decode "
                             "steps (a CompileConfig on the CPU, where it compiles only when told to)",
    "generate_compiled_forward": "model.forward = torch.compile(model.forward, mode=MODE, fullgraph=True), the "
                                 "documented recipe, with generate(cache_implementation=\"static\", "
                                 "disable_compile=True) around it",
}


def generate_kwargs(model, args, way: str) -> tuple[dict, str | None]:
    """The generate() arguments of `way` on this transformers (feature-detected), or (None, why it cannot run)."""
    config = model.generation_config
    kwargs = dict(do_sample=False, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, use_cache=True,
                  cache_implementation="static")
    takes_disable = hasattr(config, "disable_compile")
    if way in ("generate_static", "generate_compiled_forward") and takes_disable:
        kwargs["disable_compile"] = True  # else, on a GPU, generate compiles the decode steps on top by itself
    if way == "generate_auto_compile":
        import transformers

        if not (takes_disable and hasattr(transformers, "CompileConfig")):
            return None, f"transformers {transformers.__version__} has no automatic compile in generate()"
        if args.device != "cuda" or args.backend != "inductor":  # its defaults: inductor, reduce-overhead, GPU only
            compile_config = transformers.CompileConfig(
                backend=args.backend, mode=args.mode if args.backend == "inductor" else None)
            if not hasattr(compile_config, "_compile_all_devices"):
                return None, (f"transformers {transformers.__version__} compiles generate() on a GPU only (no "
                              "CompileConfig._compile_all_devices)")
            compile_config._compile_all_devices = True  # what transformers' own tests set to compile on the CPU
            kwargs["compile_config"] = compile_config
    return kwargs, None


def hf_generate(args, device: str, way: str) -> dict:
    """transformers' generate() one way (GENERATE_WAYS): tokens/s of the whole generation and of its decode.

    Decode speed is (new tokens - 1) / (time of a full generate - time of a one-token generate), each the median of
    --repeats; transformers sizes the static cache for the longest generation so far, so both use one cache size."""
    import torch

    model, prompt, _ = build(args, device)
    kwargs, why_not = generate_kwargs(model, args, way)
    if kwargs is None:
        return {"unavailable": why_not, "how": GENERATE_WAYS[way]}
    if way == "generate_compiled_forward":
        mode = {"mode": args.mode} if args.backend == "inductor" else {}
        compiled_forward = torch.compile(model.forward, backend=args.backend, fullgraph=True, **mode)
        if args.backend == "inductor" and (args.mode or "").startswith(("reduce-overhead", "max-autotune")):
            # CUDA graphs reuse their outputs' memory, and transformers' StaticCache updates a counter in place
            # (cumulative_length.add_) between calls: without a new step per call the second call reads the first
            # call's overwritten output (transformers 5.17, torch 2.11, on an H100)
            def forward(*a, **kw):
                torch.compiler.cudagraph_mark_step_begin()
                return compiled_forward(*a, **kw)

            model.forward = forward
        else:
            model.forward = compiled_forward

    def generate(n):
        with torch.no_grad():
            return model.generate(prompt, **{**kwargs, "max_new_tokens": n, "min_new_tokens": n})

    t0 = time.perf_counter()
    first = generate(args.new_tokens)
    sync(device)
    first_s = time.perf_counter() - t0
    generate(1)
    full = statistics.median(timed(lambda: generate(args.new_tokens), device) for _ in range(args.repeats))
    one = statistics.median(timed(lambda: generate(1), device) for _ in range(args.repeats))
    compiled = hasattr(model, "_compiled_call") if way == "generate_auto_compile" else way != "generate_static"
    return {"decode_tokens_per_s": (args.new_tokens - 1) / (full - one), "tokens_per_s": args.new_tokens / full,
            "ttft_ms": one * 1e3, "first_generate_s": first_s, "compiled": compiled, "how": GENERATE_WAYS[way],
            "arguments": {k: repr(v) for k, v in kwargs.items()}, "tokens": first[0, args.prompt_len:].tolist()}


def plain_loop(args, device: str, compiled: bool) -> dict:
    """A loop over transformers' forward with its StaticCache, the one-token step compiled or eager."""
    import torch
    from transformers import StaticCache

    model, prompt, dtype = build(args, device)
    config, total = model.config, args.prompt_len + args.new_tokens
    params = inspect.signature(StaticCache.__init__).parameters
    if "max_batch_size" in params:
        cache = StaticCache(config=config, max_batch_size=args.batch_size, max_cache_len=total, device=device,
                            dtype=dtype)
    else:
        cache = StaticCache(config=config, max_cache_len=total)
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        cache.early_initialization(args.batch_size, heads, head_dim, dtype, torch.device(device))
    fwd = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in fwd else "past_key_values"

    def forward(tokens, pos):
        extra = {"cache_position": pos} if "cache_position" in fwd else {}
        return model(input_ids=tokens, position_ids=pos[None], use_cache=True, **{cache_kw: cache},
                     **extra).logits[:, -1].argmax(-1)

    if compiled and args.coordinate_descent:
        import torch._inductor.config

        torch._inductor.config.coordinate_descent_tuning = True
    mode = {"mode": args.mode} if args.backend == "inductor" else {}
    step = torch.compile(forward, backend=args.backend, fullgraph=True, **mode) if compiled else forward
    mark = torch.compiler.cudagraph_mark_step_begin if device == "cuda" else (lambda: None)

    @torch.no_grad()
    def generate():
        if hasattr(cache, "reset"):
            cache.reset()
        token = forward(prompt, torch.arange(args.prompt_len, device=device))  # the prefill, eager
        tokens = [token]
        sync(device)
        t0 = time.perf_counter()
        for pos in torch.arange(args.prompt_len, total - 1, device=device).split(1):
            mark()
            token = step(token[:, None], pos).clone()
            tokens.append(token)
        sync(device)
        return time.perf_counter() - t0, torch.stack(tokens, 1)

    t0 = time.perf_counter()
    _, tokens = generate()
    first_s = time.perf_counter() - t0
    generate()
    decode_s = statistics.median(generate()[0] for _ in range(args.repeats))
    return {"decode_tokens_per_s": (args.new_tokens - 1) / decode_s, "first_generate_s": first_s,
            "tokens": tokens[0].tolist()}


def one_way(args, device: str, way: str) -> dict:
    """One way's figures (in the process of its own that in_own_process starts); an exception is its reason."""
    try:
        if way in ("loop_eager", "loop_compiled"):
            return plain_loop(args, device, compiled=way == "loop_compiled")
        return hf_generate(args, device, way)
    except Exception as e:  # noqa: BLE001 (one way failing says why and leaves the other figures)
        text = str(e).strip().splitlines()
        return {"unavailable": f"{type(e).__name__}: {text[0][:300] if text else ''}",
                "how": GENERATE_WAYS.get(way, way)}
