"""What each compile knob does to the sample models (ResNet-50, the captioner training, the Flux-size stack), measured
by the engine's command line; also the row runner that bench/real_models.py shares.

    python bench/run_benchmarks.py run --out /tmp/bench          # on the GPU machine; resumable
    python bench/run_benchmarks.py render /tmp/bench/results.jsonl  # the tables, as Markdown

Each row is one `python -m tcore run --json` (a fresh process, so cold compiles are cold). `run`
appends one JSON line per finished experiment and skips those already in the file, so a long
sitting can be continued after an interruption.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# (name, group, CLI options). Rows use bf16 autocast (as the table was first measured); timed_s=10 gives 2 s blocks,
# long enough for NVML's ~0.1 s energy counter.
COMMON = ["--device", "cuda", "--precision", "amp-bf16", "--no-channels-last", "--timed-s", "10", "--rounds", "5"]
RESNET = ["--model", "resnet50", "--preset", "full", "--batch-size", "128"]
CAPTIONER = ["--model", "captioner", "--preset", "full", "--batch-size", "64", "--task", "training"]
FLUX = ["--model", "flux", "--preset", "full", "--batch-size", "1"]
EXPERIMENTS = [
    ("resnet50 default", "ResNet-50 inference", RESNET + ["--mode", "default"]),
    ("resnet50 reduce-overhead", "ResNet-50 inference", RESNET + ["--mode", "reduce-overhead"]),
    ("resnet50 max-autotune-no-cudagraphs", "ResNet-50 inference", RESNET + ["--mode", "max-autotune-no-cudagraphs"]),
    ("resnet50 regional", "ResNet-50 inference", RESNET + ["--compile", "regional"]),
    ("captioner train default", "Captioner training", CAPTIONER),
    ("captioner train +optimizer", "Captioner training", CAPTIONER + ["--compile-optimizer"]),
    ("captioner train optimizer only", "Captioner training", CAPTIONER + ["--compile", "off", "--compile-optimizer"]),
    ("captioner train regional", "Captioner training", CAPTIONER + ["--compile", "regional"]),
    ("flux whole cold", "Flux.1-size stack inference", FLUX + ["--compile", "whole"]),
    ("flux regional cold", "Flux.1-size stack inference", FLUX + ["--compile", "regional"]),
    ("flux whole warm", "Flux.1-size stack inference", FLUX + ["--compile", "whole", "--cache", "artifacts"]),
    ("flux regional warm", "Flux.1-size stack inference", FLUX + ["--compile", "regional", "--cache", "artifacts"]),
    ("flux regional reduce-overhead", "Flux.1-size stack inference",
     FLUX + ["--compile", "regional", "--mode", "reduce-overhead"]),
]

# Datasheet dense bf16 matrix rates (TFLOP/s) of the GPUs this was run on; the fraction of peak
# is the engine's measured FLOP rate over this. (H200 and H100 SXM share the Hopper chip.)
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0}


def run(out: Path, only: list[str], timeout_s: float, experiments: list = EXPERIMENTS, common: list = COMMON) -> int:
    """Run each (name, group, options) not yet in out/results.jsonl, appending its record there."""
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    done = {json.loads(line)["name"] for line in results.read_text().splitlines()} if results.exists() else set()
    failures = 0
    for name, group, options in experiments:
        if name in done or (only and not any(o in name for o in only)):
            continue
        cmd = [sys.executable, "-m", "tcore", "run", "--db", str(out / "runs.sqlite"), "--json", "--quiet",
               "--timeout", str(timeout_s), *common, *options]
        t0 = time.time()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        record = json.loads(proc.stdout) if proc.stdout.strip() else {"status": "failed", "error": proc.stderr[-2000:]}
        failures += record["status"] != "finished"
        with results.open("a") as f:
            f.write(json.dumps({"name": name, "group": group, "options": options, "wall_s": time.time() - t0,
                                **record}, default=str) + "\n")
        r = record.get("result") or {}
        print(f"{name:40} {record['status']:9} {time.time() - t0:6.0f} s  speedup {r.get('speedup')}  "
              f"compile {r.get('compile_s')}  {(record.get('error') or {}).get('message', '')[:200]}", flush=True)
    return 1 if failures else 0


def sitting_cli(doc: str, experiments, common: list[str], render) -> int:
    """The command line a GPU sitting script shares: `run --out DIR [--only ...]` its rows, `render RESULTS`."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--only", nargs="*", default=[])
    r.add_argument("--timeout", type=float, default=900)
    s = sub.add_parser("render")
    s.add_argument("results", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        return run(args.out, args.only, args.timeout, experiments, common)
    print(render(args.results))
    return 0


def _num(value, pattern: str) -> str:
    return "n/a" if value is None else pattern.format(value)


def render(results_path: Path) -> str:
    rows = [json.loads(line) for line in results_path.read_text().splitlines()]
    env = next(r["env"] for r in rows if r.get("env"))
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in (env.get("gpu") or "")), None)
    lines = [f"Measured on {env.get('gpu')} ({env.get('gpu_memory_gib')} GiB, power limit "
             f"{env.get('power_limit_w')} W), driver {env.get('driver')}, torch {env.get('torch')}, "
             f"triton {env.get('triton')}, CUDA {env.get('cuda')}, "
             f"Python {env.get('python')}; bf16 autocast, 5 alternating 2 s blocks per variant, medians.", ""]
    group = None
    header = ("| setting | compile s | eager steps/s | compiled steps/s | speedup | eager W | compiled W "
              "| eager J/step | compiled J/step | peak mem GiB (compiled) | % of bf16 peak (compiled) |")
    for row in rows:
        if row["group"] != group:
            group = row["group"]
            spec = row.get("spec", {})
            lines += ["", f"### {group}: {spec.get('model')}/{spec.get('preset')}, batch {spec.get('batch_size')}", "",
                      header, "|" + "---|" * 11]
        r = row.get("result") or {}
        if row["status"] != "finished":
            message = ((row.get("error") or {}).get("message", "") if isinstance(row.get("error"), dict)
                       else row.get("error"))
            lines.append(f"| {row['name']} | failed: "
                         f"{str(message).splitlines()[0][:120] if message else ''} |" + " |" * 9)
            continue
        fraction = (100 * r["compiled_tflops"] / peak) if peak and r.get("compiled_tflops") else None
        lines.append(
            f"| {row['name']} | {_num(r.get('compile_s'), '{:.1f}')} | {_num(r.get('eager_steps_per_s'), '{:.2f}')} "
            f"| {_num(r.get('compiled_steps_per_s'), '{:.2f}')} | {_num(r.get('speedup'), '{:.2f}x')} "
            f"| {_num(r.get('eager_power_w'), '{:.0f}')} | {_num(r.get('compiled_power_w'), '{:.0f}')} "
            f"| {_num(r.get('eager_energy_j_per_step'), '{:.3g}')} "
            f"| {_num(r.get('compiled_energy_j_per_step'), '{:.3g}')} "
            f"| {_num(r.get('compiled_peak_mem_gib'), '{:.1f}')} | {_num(fraction, '{:.1f}')} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--only", nargs="*", default=[], help="run only experiments whose name contains one of these")
    r.add_argument("--timeout", type=float, default=900, help="seconds per experiment")
    s = sub.add_parser("render")
    s.add_argument("results", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        return run(args.out, args.only, args.timeout)
    print(render(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
