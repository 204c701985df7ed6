"""What to try next after a run: up to three suggestions, each drawn from the run's own evidence and quoting it.

Each suggestion names the settings of a counterpart run (the same experiment with one thing
changed) so the page can queue it with one click and then show the two side by side. A rule fires
only on its evidence: a share of the profiled step (tcore.breakdown), a count from the compiler, or
the settings themselves. Pure functions of a stored spec and result, tested on the CPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcore.spec import Experiment, SpecError

# Thresholds, as shares of a profiled step: below these the evidence is too thin to act on.
IDLE_SHARE = 0.20        # the GPU waits on Python and launches for this much of a compiled step
BUSY_PCT = 70.0          # ... or NVML saw the GPU busy for less than this share of the timed time
COPY_SHARE = 0.10        # copies and dtype or layout conversions
OPTIMIZER_SHARE = 0.15   # the optimizer step, in training
MATMUL_SHARE = 0.30      # matmuls and convolutions, for the precision rule
BREAKEVEN_STEPS = 1000   # compiling pays back only after this many steps
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


@dataclass(frozen=True)
class Suggestion:
    rule: str                  # a short name for the rule that fired ("idle", "channels_last", ...)
    title: str                 # what to try, as a button would say it
    evidence: str              # the run's own figures that led to it, in a sentence
    changes: dict[str, Any] = field(default_factory=dict)  # the counterpart's settings; {} when none to queue
    weight: float = 0.0        # how much of the step it speaks to: suggestions are ranked by it


def _share(result: dict, variant: str, category: str) -> tuple[float, float, float] | None:
    """(ms of `category` per step, the step in ms, their ratio), or None without a breakdown. The step is what
    the breakdown's categories and idle add up to: on a GPU the timed step (tcore.breakdown.against_timed)."""
    from tcore.breakdown import CATEGORIES

    parts = [result.get(f"{variant}_{k}_ms") for k in CATEGORIES]
    part = result.get(f"{variant}_{category}_ms")
    step = sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None
    if not step or part is None:
        return None
    return part, step, part / step


def suggest(spec: dict[str, Any], result: dict[str, Any], device: str | None, *, most: int = 3) -> list[Suggestion]:
    """Up to `most` suggestions for a finished run, strongest evidence first; a counterpart that could not run
    (or would repeat this run) is left out."""
    import sample_models

    exp = Experiment.from_dict(spec)
    compiled = "compiled" in result.get("variants", ())
    timed = "compiled" if compiled else "eager"
    gpu = device == "cuda"
    found: list[Suggestion] = []

    speedup = result.get("speedup")
    if compiled and speedup is not None and speedup < 1.0:
        found.append(_slower(exp, result, speedup))

    idle = _share(result, timed, "idle")
    bound = launch_bound(result, device)
    if gpu and (bound or idle and idle[2] >= IDLE_SHARE) and exp.mode not in CUDAGRAPH_MODES \
            and exp.backend == "inductor":
        changes = {"mode": "reduce-overhead"} if exp.compiles else {"compile": "whole", "mode": "reduce-overhead"}
        found.append(Suggestion(
            "idle", "Try mode=reduce-overhead (CUDA graphs)",
            f"{bound or ''}{' ' if bound else ''}A CUDA graph replays the whole step with one launch, which "
            "removes exactly this wait: the step no longer follows the host CPU.", changes,
            max(idle[2] if idle else 0.0, 0.6 if bound else 0.0)))

    entry = sample_models.get(exp.model)
    copies = _share(result, "eager", "copy")
    if gpu and entry.supports_channels_last and not exp.channels_last:
        words = (f" Copies and layout conversions took {copies[0]:.2f} ms of each eager step ({copies[2]:.0%})."
                 if copies and copies[2] >= 0.01 else "")
        found.append(Suggestion(
            "channels_last", "Try channels_last",
            f"{entry.title} ran in NCHW. GPU convolutions prefer channels_last, and Inductor switches its own "
            f"convolutions to it, so part of this speedup is a layout change eager can have too.{words}",
            {"channels_last": True}, max(copies[2] if copies else 0.0, 0.25)))
    elif copies and copies[2] >= COPY_SHARE and exp.precision.startswith("amp-") and exp.task == "inference":
        weights = exp.precision.removeprefix("amp-")
        found.append(Suggestion(
            "cast_weights", f"Try {weights} weights",
            f"Copies and conversions took {copies[0]:.2f} of {copies[1]:.2f} ms of each eager step ({copies[2]:.0%}): "
            f"autocast casts the float32 weights to {weights} every step; casting the model once, as inference "
            "code does, skips that and halves the weight memory.", {"precision": weights}, copies[2]))

    if result.get("recompile_count"):
        first = (result.get("recompiles") or [{}])[0].get("reason") or "a guard failed"
        if exp.dynamic is False:
            changes, title = {"dynamic": None}, "Try dynamic=None (automatic)"
        elif exp.shape_count and exp.shape_remedy == "none":
            changes, title = {"shape_remedy": "mark_dynamic"}, "Try mark_dynamic (or buckets)"
        else:
            changes, title = {}, "Find what changes between calls"
        found.append(Suggestion(
            "recompiles", title,
            f"{result['recompile_count']} recompilation(s); the first because: {first}. Automatic dynamic shapes, "
            "marking the varying dimension dynamic, or padding to a few bucket sizes each stop a recompile per "
            "shape.", changes, 0.5))

    # Breaks inside torch itself (the compiled optimizer's bookkeeping) are torch's choice: fullgraph=True would
    # only turn them into errors, so only breaks in the user's code are advice.
    breaks = [b for b in result.get("graph_breaks") or [] if not inside_torch(b.get("file"))]
    if result.get("graph_break_count") and breaks:
        b = breaks[0]
        where = f" at {b['file']}:{b['line']}" if b.get("file") else ""
        source = f" (`{b['source']}`)" if b.get("source") else ""
        if exp.graph_break:
            changes, title = {"graph_break": False}, "Try without the deliberate graph break"
        else:
            changes, title = {"fullgraph": True}, "Try fullgraph=True to list every break"
        found.append(Suggestion(
            "graph_breaks", title,
            f"{sum(b.get('count', 1) for b in breaks)} graph break(s) in the model's code; the first{where}{source}: {b['reason']}. Each break "
            "splits the model into graphs that cannot fuse across it; fullgraph=True turns a break into an error "
            "that names it.", changes, 0.4))

    breakeven, compile_s = result.get("breakeven_steps"), result.get("compile_s")
    # A compiled variant that is not faster never pays back, whatever the compile costs: the "slower" rule speaks.
    if compiled and compile_s and breakeven is not None and breakeven > BREAKEVEN_STEPS:
        pays = f"pays back only after {breakeven:,.0f} steps"
        if exp.compile == "whole" and entry.repeats_blocks:
            found.append(Suggestion(
                "compile_time", "Try regional compilation",
                f"Compiling took {compile_s:.1f} s and {pays}. {entry.title} repeats its blocks: compiling one "
                "block and reusing it cuts compile time, usually at nearly the same speed.", {"compile": "regional"},
                0.3))
        elif exp.cache == "cold":
            found.append(Suggestion(
                "compile_time", "Try a warm compile cache",
                f"Compiling took {compile_s:.1f} s and {pays}. A restart with a warm cache (or shipped compile "
                "artifacts) reuses the compiled kernels.", {"cache": "warm"}, 0.3))

    optimizer = _share(result, "eager", "optimizer")
    if exp.task == "training" and not exp.compile_optimizer and optimizer and optimizer[2] >= OPTIMIZER_SHARE:
        found.append(Suggestion(
            "optimizer", "Try compiling the optimizer step",
            f"The AdamW step took {optimizer[0]:.2f} of {optimizer[1]:.2f} ms of each eager step ({optimizer[2]:.0%}): "
            "compiled, its many small per-weight kernels fuse into a few.", {"compile_optimizer": True}, optimizer[2]))

    matmul = _share(result, timed, "matmul")
    if gpu and exp.precision == "fp32":
        share = f" Matmuls and convolutions took {matmul[0]:.2f} of {matmul[1]:.2f} ms of each {timed} step " \
                f"({matmul[2]:.0%})." if matmul else ""
        if not matmul or matmul[2] >= MATMUL_SHARE:
            found.append(Suggestion(
                "precision", "Try TF32 (or bf16)",
                f"This run computes in full fp32 on a GPU, where tensor cores run TF32 several times faster and "
                f"bf16 faster still.{share}", {"precision": "tf32"}, matmul[2] if matmul else 0.3))

    return _runnable(exp, found)[:most]


def launch_bound(result: dict, device: str | None) -> str | None:
    """When a GPU run is launch-bound, by its own evidence (the profiled step's idle share, NVML's busy share while
    timing), the sentence that says so and what follows from it; None otherwise."""
    if device != "cuda":
        return None
    variant = "compiled" if "compiled" in result.get("variants", ()) else "eager"
    idle, busy = _share(result, variant, "idle"), result.get(f"{variant}_gpu_busy_pct")
    evidence = []
    if idle and idle[2] >= IDLE_SHARE:
        evidence.append(f"the GPU sat idle {idle[0]:.2f} of {idle[1]:.2f} ms of each {variant} step ({idle[2]:.0%})")
    if busy is not None and busy < BUSY_PCT:
        evidence.append(f"NVML saw it busy {busy:.0f}% of the timed time")
    if not evidence:
        return None
    moved = result.get(f"{variant}_spread_pct")
    rounds = f" (its {variant} rounds moved by {moved:.0f}%)" if moved is not None else ""
    return (f"**Launch-bound**: {' and '.join(evidence)}, waiting for Python and kernel launches. So its speed "
            f"follows the host CPU, whose clock drifts over seconds: that is why its rounds move{rounds}, eager and "
            "compiled alike; the paired speedup cancels it round by round.")


def _slower(exp: Experiment, result: dict, speedup: float) -> Suggestion:
    """Compiled is slower than eager: say where from the breakdown, and suggest what answers that."""
    from tcore.breakdown import CATEGORIES

    grew = [(result.get(f"compiled_{k}_ms", 0.0) - result.get(f"eager_{k}_ms", 0.0), k) for k in CATEGORIES
            if result.get(f"compiled_{k}_ms") is not None and result.get(f"eager_{k}_ms") is not None]
    if not grew:
        return Suggestion("slower", "Compiled is slower than eager",
                          f"Compiled ran at {speedup:.2f}x eager; no profile of the steps says where.", {}, 1.0)
    delta, worst = max(grew)
    where = (f"{CATEGORIES[worst][0].lower()} went from {result[f'eager_{worst}_ms']:.2f} to "
             f"{result[f'compiled_{worst}_ms']:.2f} ms per step")
    changes: dict[str, Any] = {}
    if worst == "idle" and exp.mode not in CUDAGRAPH_MODES and exp.backend == "inductor":
        changes = {"mode": "reduce-overhead"}
    elif worst == "matmul" and exp.backend == "inductor" and "autotune" not in exp.mode:
        changes = {"mode": "max-autotune-no-cudagraphs"}
    return Suggestion("slower", "Find out why compiled is slower",
                      f"Compiled ran at {speedup:.2f}x eager: {where}, the largest change.", changes, 1.0)


def _runnable(exp: Experiment, found: list[Suggestion]) -> list[Suggestion]:
    """Strongest first; a counterpart that cannot run loses its button, and one that repeats an earlier is dropped."""
    out, seen = [], set()
    for s in sorted(found, key=lambda s: -s.weight):
        if s.changes:
            try:
                counterpart = exp.replace(**s.changes)
            except SpecError:
                s = Suggestion(s.rule, s.title, s.evidence, {}, s.weight)
            else:
                key = counterpart.to_json()
                if counterpart == exp or key in seen:
                    continue
                seen.add(key)
        out.append(s)
    return out


def counterpart(spec: dict[str, Any], s: Suggestion) -> Experiment:
    """The run a suggestion proposes: this run's experiment with the suggestion's changes."""
    return Experiment.from_dict(spec).replace(**s.changes)


def inside_torch(path: str | None) -> str | None:
    """'torch/optim/optimizer.py' when a break's file is PyTorch's own code (installed as a package), else None."""
    if not path:
        return None
    parts = Path(path).parts
    for i in range(len(parts) - 1):
        if parts[i] in ("site-packages", "dist-packages") and parts[i + 1] == "torch":
            return "/".join(parts[i + 1:])
    return None
