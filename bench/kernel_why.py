"""Eager against compiled, class by class of kernels, with skip_full_mask off and on: for each model, two runs of the
lab's own command line (`python -m tcore run --json`), and one JSON line per run with the GPU ms per step of each class
(matmul, attention, pointwise...), the attention's forms (flash, cuDNN, memory-efficient, math), the GEMMs named fp32,
the headline, and the lab's own words on why compiled is slower.

    python bench/kernel_why.py --models hf:bert hf:roberta hf:electra --out bench/results/kernel-why-encoders-h100.jsonl

The question it answers: does compiling an encoder leave SDPA's fused attention for the math path (knob off), and does
skip_full_mask bring it back, with the compiled step's GPU time no more than eager's (knob on)?
Settings left out are the lab's practical defaults for the model on the device (GPU: batch 8, the full preset, bf16).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def run(model: str, knob: bool, args: argparse.Namespace, db: str) -> dict:
    cmd = [sys.executable, "-m", "tcore", "run", "--db", db, "--model", model, "--device", args.device,
           "--compile", "whole", "--mode", args.mode, "--timeout", str(args.timeout),
           "--skip-full-mask" if knob else "--no-skip-full-mask", "--json", "--quiet", *args.extra]
    for flag, value in (("--preset", args.preset), ("--batch-size", args.batch_size), ("--precision", args.precision)):
        if value is not None:
            cmd += [flag, str(value)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        return {"model": model, "skip_full_mask": knob, "error": (done.stderr or done.stdout)[-2000:]}
    return summary(json.loads(done.stdout), model, knob)


def summary(record: dict, model: str, knob: bool) -> dict:
    """The figures the question needs, from a stored record."""
    from tcore.analysis import slower
    from tcore.figures.breakdown import shown_ms

    result, spec = record["result"], record.get("spec") or {}
    found, bars = result.get("breakdown") or {}, shown_ms(result)
    classes = {v: {k: round(ms, 4) for k, ms in bars.get(v, {}).items()} for v in ("eager", "compiled")}
    return {"model": model, "skip_full_mask": knob, "label": record.get("label"),
            "gpu": (record.get("env") or {}).get("gpu"), "speedup": result.get("speedup"),
            "speedup_low": result.get("speedup_low"), "speedup_high": result.get("speedup_high"),
            # the kernels' time per step (GPU), as "Where the time goes" draws it; {} where the page withholds it
            "kernel_ms_per_step": {v: round(sum(ms for k, ms in c.items() if k != "idle"), 4)
                                   for v, c in classes.items() if c},
            "class_ms": classes,
            "profiled_class_ms": {v: b.get("ms") for v, b in found.items()},  # as profiled, never withheld
            "attention_forms": {v: b.get("attention_forms") for v, b in found.items()},
            "fp32_gemm_ms": {v: b.get("fp32_gemm_ms") for v, b in found.items()},
            "launches": {v: b.get("launches") for v, b in found.items()},
            "why": [line.replace("**", "") for line in slower.words(result, spec)]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["hf:bert"], help="transformers models (hf:NAME)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--preset", default=None, help="default: the lab's for the device (GPU: full)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the lab's for the device (GPU: 8)")
    parser.add_argument("--precision", default=None, help="default: the lab's for the device (GPU: bf16)")
    parser.add_argument("--mode", default="default")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a run may take")
    parser.add_argument("--db", default=None, help="the store the runs go to (default: a fresh temporary one)")
    parser.add_argument("--out", default=None, help="also write the JSON lines here")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[],
                        help="more `tcore run` flags for every run, e.g. --extra --backend aot_eager --timed-steps 4")
    args = parser.parse_args()
    db = args.db or str(Path(tempfile.mkdtemp(prefix="kernel-why-")) / "runs.sqlite")
    lines = []
    for model in args.models:
        for knob in (False, True):
            line = json.dumps(run(model, knob, args, db))
            print(line, flush=True)
            lines.append(line)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
