"""Check the engine's throughput against a bare loop timed with CUDA events around the same model.

    python bench/bare_loop.py --model resnet50 --preset full --batch-size 64 --precision amp-bf16 --out RESULT.json
    python bench/bare_loop.py --device cpu --model captioner --preset tiny --batch-size 8 --precision fp32  # a CPU

Runs `python -m tcore run` (eager vs compiled, default mode), then times the same model, batch
and precision (autocast or cast weights) in a plain loop here: N steps between two CUDA events (on the CPU, two
clock readings), after a warm-up. Prints both throughputs and their difference; exits 1 if either differs by more
than --tolerance. On a shared 2-core CPU the two measurements are minutes apart and the machine's speed moves
between them, so the CPU case checks that the comparison runs, not the engine's accuracy.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import sample_models  # noqa: E402
from tcore.worker.measurement import set_tf32  # noqa: E402


def bare_steps_per_s(fn, steps: int, warmup: int, device: str = "cuda") -> float:
    for _ in range(warmup):
        fn()
    if device == "cpu":
        start_s = time.perf_counter()
        for _ in range(steps):
            fn()
        return steps / (time.perf_counter() - start_s)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return steps / (start.elapsed_time(end) / 1e3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--preset", default="full")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--precision", default="amp-bf16", choices=["fp32", "amp-bf16", "amp-fp16", "bf16", "fp16"])
    parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--db", default=os.environ.get("COMPILE_LAB_DB", "/tmp/bare-loop.sqlite"))
    parser.add_argument("--out", default=None, help="write the comparison as JSON here")
    args = parser.parse_args()

    cmd = [sys.executable, "-m", "tcore", "run", "--db", args.db, "--model", args.model, "--preset", args.preset,
           "--batch-size", str(args.batch_size), "--precision", args.precision, "--device", args.device,
           "--channels-last" if args.channels_last else "--no-channels-last",
           "--compile", "whole", "--mode", "default", "--timed-s", "10", "--json", "--quiet"]
    record = json.loads(subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True).stdout)
    engine = record["result"]

    entry = sample_models.get(args.model)
    torch.manual_seed(0)
    model = entry.build(args.preset, device=args.device).eval()
    batch = entry.make_batch(args.preset, args.batch_size, device=args.device)
    # fp32 is TF32-off in the engine; cast weights (bf16, fp16) cast the model and its float inputs, as inference does
    set_tf32(False)
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    inputs = batch.inputs
    if half is not None:
        model = model.to(half)
        inputs = tuple(t.to(half) if t.is_floating_point() else t for t in inputs)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        inputs = (inputs[0].contiguous(memory_format=torch.channels_last), *inputs[1:])
    amp = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(args.precision)
    autocast = torch.autocast(args.device, dtype=amp) if amp else nullcontext()
    compiled = torch.compile(model)

    def step(m):
        with torch.no_grad(), autocast:
            return m(*inputs)

    bare = {"eager": bare_steps_per_s(lambda: step(model), args.steps, warmup=10, device=args.device),
            "compiled": bare_steps_per_s(lambda: step(compiled), args.steps, warmup=10, device=args.device)}
    rows, ok = [], True
    for variant in ("eager", "compiled"):
        ours = engine[f"{variant}_steps_per_s"]
        diff = ours / bare[variant] - 1
        ok &= abs(diff) <= args.tolerance
        rows.append({"variant": variant, "engine_steps_per_s": ours, "bare_steps_per_s": bare[variant],
                     "diff_pct": 100 * diff, "engine_energy_j_per_step": engine.get(f"{variant}_energy_j_per_step"),
                     "engine_power_w": engine.get(f"{variant}_power_w")})
    summary = {"device": args.device, "gpu": record["env"].get("gpu"), "torch": torch.__version__,
               "driver": record["env"].get("driver"),
               "model": args.model, "preset": args.preset, "batch_size": args.batch_size, "precision": args.precision,
               "channels_last": args.channels_last,
               "speedup": engine["speedup"], "compile_s": engine["compile_s"], "rows": rows, "within_tolerance": ok}
    for r in rows:
        print(f"{r['variant']:9} engine {r['engine_steps_per_s']:8.2f} steps/s   bare loop {r['bare_steps_per_s']:8.2f}"
              f" steps/s   diff {r['diff_pct']:+.2f}%   energy {r['engine_energy_j_per_step']} J/step"
              f"   power {r['engine_power_w']} W")
    print(f"{summary['gpu'] or args.device}, torch {summary['torch']}: speedup {engine['speedup']:.2f}x, "
          f"compile {engine['compile_s']:.1f} s, within {args.tolerance:.0%}: {ok}")
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
