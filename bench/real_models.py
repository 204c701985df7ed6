"""What compile does to real models at their published sizes on a GPU: six models across torchvision, timm, transformers
and diffusers, each through the command line on one store, and Flux.1 [dev]'s transformer whole against diffusers'
compile_repeated_blocks, cold and warm.

    python bench/real_models.py run --out /tmp/real [--only flux llama ...]   # on the GPU machine; resumable
    python bench/real_models.py render /tmp/real/results.jsonl                # the tables for BENCHMARKS.md

Every row is one `python -m tcore run` in a fresh process (bench/run_benchmarks.py's runner): cold compile caches
unless the row says warm (cache=artifacts: a fresh cache seeded with what the cold row of the same settings saved).
Inference in bf16 weights, channels_last for the convolutional ones (the app's GPU defaults). `render` prints,
per row: parameters, compile time, speedup with its range over the rounds, graphs, graph breaks with the first
reason, recompilations, where the step's time went (eager -> compiled), and the advisor's first suggestion.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.run_benchmarks import sitting_cli  # noqa: E402

COMMON = ["--device", "cuda", "--timed-s", "5", "--precision", "bf16"]  # rounds: the adaptive default
FLUX = ["--model", "diffusers:flux", "--preset", "full", "--batch-size", "1"]  # 11.9 B parameters, 1024 px
EXPERIMENTS = [
    ("torchvision:vit_b_16", "vision", ["--model", "torchvision:vit_b_16", "--preset", "full", "--batch-size", "64"]),
    ("torchvision:convnext_base", "vision", ["--model", "torchvision:convnext_base", "--preset", "full",
                                             "--batch-size", "64", "--channels-last"]),
    ("timm:efficientnet_b0", "vision", ["--model", "timm:efficientnet_b0", "--preset", "full", "--batch-size", "64",
                                        "--channels-last"]),
    ("hf:llama 3.2-1b", "text", ["--model", "hf:llama", "--preset", "3.2-1b", "--batch-size", "8"]),  # 1024 tokens
    ("hf:bert base", "text", ["--model", "hf:bert", "--preset", "full", "--batch-size", "32"]),       # 512 tokens
    ("hf:llama 3.2-1b regional", "text", ["--model", "hf:llama", "--preset", "3.2-1b", "--batch-size", "8",
                                          "--compile", "regional"]),
    ("flux whole cold", "Flux.1 [dev] transformer", FLUX + ["--compile", "whole"]),
    ("flux regional cold", "Flux.1 [dev] transformer", FLUX + ["--compile", "regional"]),
    ("flux whole warm", "Flux.1 [dev] transformer", FLUX + ["--compile", "whole", "--cache", "artifacts"]),
    ("flux regional warm", "Flux.1 [dev] transformer", FLUX + ["--compile", "regional", "--cache", "artifacts"]),
]


def _f(value, pattern: str) -> str:
    return "n/a" if value is None else pattern.format(value)


def render(path: Path) -> str:
    import sample_models
    from sample_models.sources import _count
    from tcore.analysis import advice
    from tcore.figures.breakdown import differences

    rows = [json.loads(line) for line in path.read_text().splitlines()]
    env = next((r["env"] for r in rows if r.get("env")), {})
    out = [f"{env.get('gpu')}, torch {env.get('torch')}, triton {env.get('triton')}; one sitting, one store; "
           "bf16 weights, inference; paired rounds (adaptive, at most 5 s per variant), the median ratio with its "
           "interval; cold compile caches unless warm.", "",
           "| run | parameters | compile s | speedup (interval) | eager / compiled samples/s | compiled % of peak "
           "| graphs | breaks | recompiles | regional blocks | wall s |", "|" + "---|" * 11]
    notes = []
    for row in rows:
        r, spec = row.get("result") or {}, row.get("spec") or {}
        if row["status"] != "finished":
            error = row.get("error")
            message = error.get("message", "") if isinstance(error, dict) else error
            out.append(f"| {row['name']} | failed: "
                       f"{str(message).splitlines()[0][:150] if message else ''} |" + " |" * 9)
            continue
        params = sample_models.get(spec["model"]).param_count(spec["preset"])
        blocks = ", ".join(f"{k} x{v}" for k, v in (r.get("regional_blocks") or {}).items()) or "-"
        out.append(
            f"| {row['name']} | {_count(params)} | {_f(r.get('compile_s'), '{:.1f}')} "
            f"| {_f(r.get('speedup'), '{:.2f}x')} "
            f"({_f(r.get('speedup_low'), '{:.2f}')}-{_f(r.get('speedup_high'), '{:.2f}')}) "
            f"| {_f(r.get('eager_samples_per_s'), '{:.1f}')} / {_f(r.get('compiled_samples_per_s'), '{:.1f}')} "
            f"| {_f(r.get('compiled_peak_pct'), '{:.1f}%')} | {r.get('graph_count', 'n/a')} "
            f"| {r.get('graph_break_count', 'n/a')} | {r.get('recompile_count', 'n/a')} "
            f"| {blocks} | {row['wall_s']:.0f} |")
        found = r.get("breakdown") or {}
        changed = differences(found["eager"], found["compiled"]) if {"eager", "compiled"} <= set(found) else ""
        breaks = r.get("graph_breaks") or []
        first_break = (f" First graph break: {breaks[0].get('reason')} "
                       f"({breaks[0].get('file')}:{breaks[0].get('line')})." if breaks else "")
        tips = advice.suggest(spec, r, row.get("device"))
        tip = f" Advisor: **{tips[0].title}**: {tips[0].evidence}" if tips else " Advisor: nothing to suggest."
        notes.append(f"- **{row['name']}**: {changed or 'no breakdown'}.{first_break}{tip}")
    return "\n".join(out + ["", "Where the time went (eager -> compiled), breaks and the first suggestion:", ""]
                     + notes)


def main() -> int:
    return sitting_cli(__doc__, EXPERIMENTS, COMMON, render)


if __name__ == "__main__":
    sys.exit(main())
