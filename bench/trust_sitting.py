"""BENCHMARKS.md's second edition (issues 14, 15 and 19): precisions, the eager layout, where the time goes,
training with and without the compiled optimizer, Flux full, and what recording a TORCH_TRACE costs.

    python bench/trust_sitting.py run --out /tmp/trust [--only NAME ...]  # on the GPU machine; resumable
    python bench/trust_sitting.py render /tmp/trust/results.jsonl         # the tables for BENCHMARKS.md

Every row is one `python -m tcore run` in a fresh process (cold compile caches unless it says
otherwise, a TORCH_TRACE recorded as the app does unless it says "no trace"), through
bench/run_benchmarks.py's runner. The rows:
  - ResNet-50 (full, batch 64, channels_last) and Flux medium (batch 4) under fp32, TF32, AMP bf16 and
    bf16 weights;
  - ResNet-50 bf16 in NCHW, against the channels_last row above;
  - ResNet-50 at batch 8 in default and reduce-overhead mode (the device idle should fall);
  - what a newcomer gets by pressing Run on a GPU (the captioner at its GPU defaults, the app's timing);
  - the captioner (full, batch 64, AMP bf16) training, with and without the compiled AdamW step;
  - Flux full (11.9B parameters) in bf16 weights, whole against regional, cold and warm (artifacts), and
    regional in reduce-overhead mode;
  - three rows again without a TORCH_TRACE, for what recording one adds to the compile.
A device sitting is capped in time, so a sitting runs a subset (--only flux, --only resnet50 captioner
"first run"); rows compared with each other (one model's) run in the same sitting.
`render` also lists each run's breakdown, its suggestions (tcore.advice) and the counterpart's figures
when the sitting measured one.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.run_benchmarks import sitting_cli  # noqa: E402

COMMON = ["--device", "cuda", "--timed-s", "5", "--rounds", "5"]
RESNET = ["--model", "resnet50", "--preset", "full", "--batch-size", "64", "--channels-last"]
FLUX = ["--model", "flux", "--preset", "medium", "--batch-size", "4"]
FLUX_FULL = ["--model", "flux", "--preset", "full", "--batch-size", "1", "--precision", "bf16"]
CAPTIONER_TRAIN = ["--model", "captioner", "--preset", "full", "--batch-size", "64", "--task", "training",
                   "--precision", "amp-bf16"]
NO_TRACE = ["--no-torch-trace"]
EXPERIMENTS = [
    *[(f"resnet50 {p}", "ResNet-50 precision", RESNET + ["--precision", p]) for p in ("fp32", "tf32", "amp-bf16", "bf16")],
    ("resnet50 bf16 NCHW", "ResNet-50 layout", RESNET[:-1] + ["--no-channels-last", "--precision", "bf16"]),
    *[(f"flux-medium {p}", "Flux medium precision", FLUX + ["--precision", p]) for p in ("fp32", "tf32", "amp-bf16", "bf16")],
    ("resnet50 bs8 default", "ResNet-50 small batch", RESNET[:-2] + ["8", "--channels-last", "--precision", "bf16"]),
    ("resnet50 bs8 reduce-overhead", "ResNet-50 small batch",
     RESNET[:-2] + ["8", "--channels-last", "--precision", "bf16", "--mode", "reduce-overhead"]),
    ("first run (app defaults)", "Default first run", ["--model", "captioner", "--timed-s", "4"]),
    ("captioner train", "Captioner training", CAPTIONER_TRAIN),
    ("captioner train +optimizer", "Captioner training", CAPTIONER_TRAIN + ["--compile-optimizer"]),
    ("resnet50 bf16 no trace", "TORCH_TRACE cost", RESNET + ["--precision", "bf16"] + NO_TRACE),
    ("first run (app defaults) no trace", "TORCH_TRACE cost", ["--model", "captioner", "--timed-s", "4"] + NO_TRACE),
    ("flux-medium bf16 no trace", "TORCH_TRACE cost", FLUX + ["--precision", "bf16"] + NO_TRACE),
    ("flux-full whole cold", "Flux full bf16", FLUX_FULL + ["--compile", "whole"]),
    ("flux-full regional cold", "Flux full bf16", FLUX_FULL + ["--compile", "regional"]),
    ("flux-full whole warm", "Flux full bf16", FLUX_FULL + ["--compile", "whole", "--cache", "artifacts"]),
    ("flux-full regional warm", "Flux full bf16", FLUX_FULL + ["--compile", "regional", "--cache", "artifacts"]),
    ("flux-full regional reduce-overhead", "Flux full bf16",
     FLUX_FULL + ["--compile", "regional", "--mode", "reduce-overhead"]),
]


def _f(value, pattern: str) -> str:
    return "n/a" if value is None else pattern.format(value)


def _layout(spec: dict) -> str:
    if spec.get("model") != "resnet50":
        return "-"
    return "channels_last" if spec.get("channels_last") else "NCHW"


def _rebased(row: dict) -> dict:
    """A row recorded before the worker re-based GPU idle on the timed step gets the same arithmetic here
    (tcore.breakdown.against_timed: a pure function of the stored kernel times and the timed step)."""
    from tcore.breakdown import Breakdown, against_timed

    result = row.get("result") or {}
    for variant, b in (result.get("breakdown") or {}).items():
        timed = result.get(f"{variant}_latency_ms_p50")
        if b["source"] == "gpu kernels" and b.get("profiled_idle_ms") is None and timed:
            fixed = against_timed(Breakdown(**b), timed).to_dict()
            result["breakdown"][variant] = fixed
            result[f"{variant}_idle_ms"] = fixed["ms"]["idle"]
    return row


def render(path: Path) -> str:
    from tcore import advice
    from tcore.breakdown import CATEGORIES, differences

    rows = [_rebased(json.loads(line)) for line in path.read_text().splitlines()]
    env = next(r["env"] for r in rows if r.get("env"))
    out = [f"{env.get('gpu')} ({env.get('gpu_memory_gib')} GiB, power limit {env.get('power_limit_w')} W), driver "
           f"{env.get('driver')}, torch {env.get('torch')}, triton {env.get('triton')}; one sitting; 5 alternating "
           "blocks per variant, medians; cold compile caches unless the row says warm.", "",
           "| run | precision | layout | compile s | eager steps/s | compiled steps/s | speedup (rounds) | eager J/step "
           "| compiled J/step | eager / compiled peak GiB | compiled % of peak | wall s |", "|" + "---|" * 12]
    for row in rows:
        r, spec = row.get("result") or {}, row.get("spec") or {}
        if row["status"] != "finished":
            message = (row.get("error") or {}).get("message", "") if isinstance(row.get("error"), dict) else row.get("error")
            out.append(f"| {row['name']} | failed: {str(message).splitlines()[0][:150] if message else ''} |" + " |" * 10)
            continue
        out.append(
            f"| {row['name']} | {spec.get('precision')} | {_layout(spec)} "
            f"| {_f(r.get('compile_s'), '{:.1f}')} | {_f(r.get('eager_steps_per_s'), '{:.2f}')} "
            f"| {_f(r.get('compiled_steps_per_s'), '{:.2f}')} "
            f"| {_f(r.get('speedup'), '{:.2f}x')} ({_f(r.get('speedup_min'), '{:.2f}')}–{_f(r.get('speedup_max'), '{:.2f}')}) "
            f"| {_f(r.get('eager_energy_j_per_step'), '{:.3g}')} | {_f(r.get('compiled_energy_j_per_step'), '{:.3g}')} "
            f"| {_f(r.get('eager_peak_mem_gib'), '{:.1f}')} / {_f(r.get('compiled_peak_mem_gib'), '{:.1f}')} "
            f"| {_f(r.get('compiled_peak_pct'), '{:.1f}')} | {row['wall_s']:.0f} |")
    out += ["", "Where the time of a step goes (ms per profiled step; timed median step for comparison):", "",
            "| run | variant | " + " | ".join(t for t, _ in CATEGORIES.values()) + " | profiled step | timed step |",
            "|" + "---|" * (len(CATEGORIES) + 4)]
    for row in rows:
        for variant, b in ((row.get("result") or {}).get("breakdown") or {}).items():
            timed = row["result"].get(f"{variant}_latency_ms_p50")
            out.append(f"| {row['name']} | {variant} | " + " | ".join(f"{b['ms'].get(k, 0):.2f}" for k in CATEGORIES)
                       + f" | {b['step_ms']:.2f} | {_f(timed, '{:.2f}')} |")
    out += ["", "What each run suggested, and what the sitting measured for the counterpart where it ran one:", ""]
    by_spec = {json.dumps(_key(row["spec"]), sort_keys=True): row
               for row in rows if row.get("spec") and row["spec"].get("torch_trace", True)}
    for row in rows:
        if row["status"] != "finished":
            continue
        found = (row["result"].get("breakdown") or {})
        changed = differences(found["eager"], found["compiled"]) if {"eager", "compiled"} <= set(found) else ""
        out.append(f"- **{row['name']}**" + (f": {changed}." if changed else "."))
        for s in advice.suggest(row["spec"], row["result"], row.get("device")):
            line = f"  - {s.title}: {s.evidence}"
            if s.changes:
                other = by_spec.get(json.dumps(_key({**row["spec"], **s.changes}), sort_keys=True))
                if other and other["status"] == "finished":
                    o = other["result"]
                    line += (f" Measured as **{other['name']}**: compiled {o['compiled_steps_per_s']:.2f} steps/s "
                             f"against {row['result']['compiled_steps_per_s']:.2f}, speedup {o['speedup']:.2f}x.")
            out.append(line)
    out += trace_cost(rows, by_spec)
    return "\n".join(out)


def _key(spec: dict) -> dict:
    """What makes two rows the same experiment here: the spec less timing and the TORCH_TRACE switch."""
    return {k: v for k, v in spec.items() if k not in ("timed_s", "rounds", "torch_trace")}


def trace_cost(rows: list[dict], by_spec: dict) -> list[str]:
    """Each "no trace" row beside its traced twin: what recording a TORCH_TRACE added to the compile."""
    pairs = [(by_spec.get(json.dumps(_key(row["spec"]), sort_keys=True)), row) for row in rows
             if row.get("spec") and row["spec"].get("torch_trace") is False and row["status"] == "finished"]
    pairs = [(on, off) for on, off in pairs if on and on["status"] == "finished"]
    if not pairs:
        return []
    out = ["", "What recording a TORCH_TRACE adds to the compile (one run each way, so compile-time noise of a "
               "few percent applies):", "", "| run | compile s, traced | compile s, no trace | added | speedup traced "
               "/ no trace |", "|---|---|---|---|---|"]
    for on, off in pairs:
        a, b = on["result"]["compile_s"], off["result"]["compile_s"]
        out.append(f"| {on['name']} | {a:.1f} | {b:.1f} | {a - b:+.1f} s ({100 * (a - b) / b:+.0f}%) "
                   f"| {on['result']['speedup']:.2f}x / {off['result']['speedup']:.2f}x |")
    return out


def main() -> int:
    return sitting_cli(__doc__, EXPERIMENTS, COMMON, render)


if __name__ == "__main__":
    sys.exit(main())
