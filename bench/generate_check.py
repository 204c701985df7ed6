"""The independent check of the generate task: the same greedy generation timed three ways, side by side.

    python bench/generate_check.py                       # tiny hf:gpt2 on the CPU (a few Inductor compiles)
    python bench/generate_check.py --model hf:llama --preset 3.2-1b --precision bf16 --batch-size 1 \\
        --prompt-len 128 --new-tokens 256 --mode reduce-overhead          # the GPU check: Llama-3.2-1B's shape

1. transformers' own generate(): cache_implementation="static", model.forward compiled with the mode and
   fullgraph=True (transformers' documented recipe); greedy, exactly --new-tokens tokens (min_new_tokens). Its decode
   speed is (new tokens - 1) / (time of a full generate - time of a one-token generate), each the median of --repeats.
2. A plain loop written here: transformers' StaticCache, a compiled one-token step (the same mode, fullgraph), and the
   same loop eager; decode speed is the decode steps over their time, synchronized at both ends only.
3. The lab: `python -m tcore run --task generate` with the same settings, in a fresh process; its decode tokens/s,
   eager and compiled, and how far compiled decode is from the memory-bound limit: the bytes a step reads per second
   (TB/s) and their share of the bandwidth the lab's worker measured on this GPU (a device-to-device copy of a buffer
   far larger than L2, read + write bytes) and of the datasheet's.

Prints one line per figure and writes bench/results/generate-check-<model>-<preset>-<machine>.json. The three should
agree within a few percent on a quiet machine; the lab's eager/compiled ratio is its headline. --coordinate-descent
turns on Inductor's coordinate-descent tuning (gpt-fast's setting) in the loop and the lab: a much longer compile.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def machine() -> str:
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    name = torch.cuda.get_device_name().lower()
    return next((tag for tag in ("h200", "h100", "a100", "l40s", "l4") if tag in name), "gpu")


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


def hf_generate(args, device: str) -> dict:
    """transformers' generate with a static cache and a compiled forward (its recipe)."""
    import torch

    model, prompt, _ = build(args, device)
    model.forward = torch.compile(model.forward, mode=args.mode, fullgraph=True)

    def generate(n):
        with torch.no_grad():
            return model.generate(prompt, do_sample=False, max_new_tokens=n, min_new_tokens=n, use_cache=True,
                                  cache_implementation="static")

    t0 = time.perf_counter()
    first = generate(args.new_tokens)
    sync(device)
    first_s = time.perf_counter() - t0
    generate(1)
    full = statistics.median(timed(lambda: generate(args.new_tokens), device) for _ in range(args.repeats))
    one = statistics.median(timed(lambda: generate(1), device) for _ in range(args.repeats))
    return {"decode_tokens_per_s": (args.new_tokens - 1) / (full - one), "ttft_ms": one * 1e3,
            "first_generate_s": first_s, "tokens": first[0, args.prompt_len:].tolist()}


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
    step = torch.compile(forward, mode=args.mode, fullgraph=True) if compiled else forward
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


def lab(args) -> dict:
    db = Path(tempfile.mkdtemp(prefix="generate-check-")) / "runs.sqlite"
    command = [sys.executable, "-m", "tcore", "run", "--task", "generate", "--model", args.model, "--preset",
               args.preset, "--batch-size", str(args.batch_size), "--precision", args.precision, "--prompt-len",
               str(args.prompt_len), "--new-tokens", str(args.new_tokens), "--mode", args.mode, "--kv-cache", "static",
               "--db", str(db), "--json", "--quiet"] + (["--coordinate-descent"] if args.coordinate_descent else [])
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the lab's run failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout)["result"]
    return {key: r.get(key) for key in ("eager_decode_tokens_per_s", "compiled_decode_tokens_per_s", "speedup",
                                        "speedup_low", "speedup_high", "eager_ttft_ms", "compiled_ttft_ms",
                                        "compile_s", "compile_prefill_s", "compile_decode_s", "tokens_match",
                                        "compiled_decode_ms_per_token", "compiled_decode_tb_s",
                                        "mem_bw_measured_tb_s", "mem_bw_datasheet_tb_s", "mem_bw_method",
                                        "compiled_decode_bw_measured_pct", "compiled_decode_bw_pct",
                                        "eager_decode_idle_pct", "compiled_decode_idle_pct", "kv_cache_gib",
                                        "compiled_tokens", "unavailable")}


def share(pct: float | None, tb_s: float | None, what: str, unavailable: dict, key: str) -> str:
    if pct is None or tb_s is None:
        return f"{what}: n/a ({unavailable.get(key, 'not recorded')})"
    return f"{pct:.1f}% of {tb_s:.3g} TB/s {what}"


def lab_lines(lab_figs: dict) -> list[str]:
    """The lab's figures, a line each: decode tokens/s eager and compiled, the memory bandwidth measured on the GPU
    and the datasheet's, and compiled decode's read rate with its share of each."""
    unavailable = lab_figs.get("unavailable") or {}
    rate, step_ms = lab_figs.get("compiled_decode_tb_s"), lab_figs.get("compiled_decode_ms_per_token")
    measured, datasheet = lab_figs.get("mem_bw_measured_tb_s"), lab_figs.get("mem_bw_datasheet_tb_s")
    shares = [share(lab_figs.get(key), lab_figs.get(yardstick), what, unavailable, key)
              for what, key, yardstick in (("measured", "compiled_decode_bw_measured_pct", "mem_bw_measured_tb_s"),
                                           ("datasheet", "compiled_decode_bw_pct", "mem_bw_datasheet_tb_s"))]
    idles = {v: lab_figs.get(f"{v}_decode_idle_pct") for v in ("eager", "compiled")}
    idle = ", ".join(f"{v} {'n/a' if pct is None else f'{pct:.0f}%'}" for v, pct in idles.items())
    return [f"  {'lab eager':22} {lab_figs['eager_decode_tokens_per_s']:9.1f} tokens/s per sequence",
            f"  {'lab compiled':22} {lab_figs['compiled_decode_tokens_per_s']:9.1f} tokens/s per sequence "
            f"(speedup {lab_figs['speedup']:.2f}x, compile {lab_figs['compile_s']:.1f} s = prefill "
            f"{lab_figs['compile_prefill_s']:.1f} + decode {lab_figs['compile_decode_s']:.1f}, same tokens: "
            f"{lab_figs['tokens_match']})",
            f"  {'memory bandwidth':22} measured {f'{measured:.3f} TB/s' if measured else 'n/a'} "
            f"({lab_figs.get('mem_bw_method') or unavailable.get('mem_bw_measured_tb_s')}), datasheet "
            f"{f'{datasheet:.3g} TB/s' if datasheet else 'n/a'}",
            f"  {'lab compiled decode':22} reads {rate:.3g} TB/s ({step_ms:.3f} ms a step): {', '.join(shares)}; "
            f"device idle {idle}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="hf:gpt2", help="a transformers causal LM as hf:TYPE (default hf:gpt2)")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default=None,
                        help="weights' dtype (default: bf16 on a GPU, fp32 on the CPU)")
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--mode", default=None, help="torch.compile mode (default: reduce-overhead on a GPU, "
                                                     "default on the CPU)")
    parser.add_argument("--repeats", type=int, default=5, help="timed generations per way, after two warm-ups")
    parser.add_argument("--skip", nargs="*", default=[], choices=["generate", "loop", "lab"],
                        help="ways not to time")
    parser.add_argument("--coordinate-descent", action="store_true",
                        help="Inductor's coordinate-descent tuning in the compiled loop and the lab (gpt-fast turns "
                             "it on; on an H100 the lab's compile of a 1B decoder with it ran past 240 s)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    args.precision = args.precision or ("bf16" if device == "cuda" else "fp32")
    args.mode = args.mode or ("reduce-overhead" if device == "cuda" else "default")
    found: dict = {"machine": machine(), "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                   "torch": torch.__version__, "settings": {k: str(v) for k, v in vars(args).items()}}
    import transformers

    found["transformers"] = transformers.__version__
    if "loop" not in args.skip:
        found["loop_eager"] = plain_loop(args, device, compiled=False)
        found["loop_compiled"] = plain_loop(args, device, compiled=True)
    if "generate" not in args.skip:
        found["hf_generate_compiled"] = hf_generate(args, device)
    if "lab" not in args.skip:
        found["lab"] = lab(args)
    print(f"{args.model}/{args.preset} bs{args.batch_size} {args.precision} {args.prompt_len}+{args.new_tokens} "
          f"tokens, mode={args.mode}, on {found['device']}")
    for way in ("loop_eager", "loop_compiled", "hf_generate_compiled"):
        if way in found:
            print(f"  {way:22} {found[way]['decode_tokens_per_s']:9.1f} tokens/s per sequence")
    if "lab" in found:
        lab_figs = found["lab"]
        print("\n".join(lab_lines(lab_figs)))
        for way in ("loop_compiled", "hf_generate_compiled"):
            if way in found:
                gap = 100 * (lab_figs["compiled_decode_tokens_per_s"] / found[way]["decode_tokens_per_s"] - 1)
                print(f"  lab compiled vs {way}: {gap:+.1f}%")
    if "loop_compiled" in found and "hf_generate_compiled" in found:
        found["loop_and_generate_same_tokens"] = (found["loop_compiled"]["tokens"]
                                                  == found["hf_generate_compiled"]["tokens"])
    tuned = "-coordinate-descent" if args.coordinate_descent else ""
    name = f"generate-check-{args.model.replace(':', '-')}-{args.preset}{tuned}-{found['machine']}"
    out = args.out or REPO / "bench" / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(found, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
