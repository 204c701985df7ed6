"""What to try next after a run: up to three suggestions, each drawn from the run's own evidence and quoting it.

Each suggestion names the settings of a counterpart run (the same experiment with one thing
changed) so the page can queue it with one click and then show the two side by side. A rule fires
only on its evidence: a share of the profiled step (tcore.figures.breakdown), a count from the compiler, or
the settings themselves. Pure functions of a stored spec and result, tested on the CPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcore import figures
from tcore.experiment.spec import CUDAGRAPH_MODES, Experiment, SpecError

# Thresholds, as shares of a profiled step: below these the evidence is too thin to act on.
IDLE_SHARE = 0.20        # the GPU waits on Python and launches for this much of a compiled step
BUSY_PCT = 70.0          # ... or NVML saw the GPU busy for less than this share of the timed time
COPY_SHARE = 0.10        # copies and dtype or layout conversions
OPTIMIZER_SHARE = 0.15   # the optimizer step, in training
MATMUL_SHARE = 0.30      # matmuls and convolutions, for the precision rule
BREAKEVEN_STEPS = 1000   # compiling pays back only after this many steps
LARGE_BATCH = 128        # a GPU run at this batch or more is offered the launch-bound case at SMALL_BATCH
SMALL_BATCH = 32


@dataclass(frozen=True)
class Suggestion:
    rule: str                  # a short name for the rule that fired ("idle", "channels_last", ...)
    title: str                 # what to try, as a button would say it
    evidence: str              # the run's own figures that led to it, in a sentence
    changes: dict[str, Any] = field(default_factory=dict)  # the counterpart's settings; {} when none to queue
    weight: float = 0.0        # how much of the step it speaks to: suggestions are ranked by it


def _share(result: dict, variant: str, category: str) -> tuple[float, float, float] | None:
    """(ms of `category` per step, the step in ms, their ratio), or None without bars to quote. The figures are
    the bars "Where the time goes" draws (tcore.figures.breakdown.shown_ms: scaled to the timed step where the profiler
    slowed its steps), so a suggestion quotes what the chart shows; where the page withholds the bars, nothing."""
    from tcore.figures.breakdown import shown_ms

    ms = shown_ms(result).get(variant)
    part = ms.get(category) if ms else None
    step = sum(ms.values()) if ms else None
    if not step or part is None:
        return None
    return part, step, part / step


@dataclass(frozen=True)
class _Run:
    """What every rule reads: the stored spec as an Experiment, its result, and where it ran."""
    exp: Experiment
    result: dict[str, Any]
    device: str | None

    @property
    def gpu(self) -> bool:
        return self.device == "cuda"

    @property
    def compiled(self) -> bool:
        return "compiled" in self.result.get("variants", ())

    @property
    def timed(self) -> str:
        """The variant whose step the rules speak of: compiled when there is one."""
        return "compiled" if self.compiled else "eager"

    @property
    def entry(self):
        import sample_models

        return sample_models.get(self.exp.model)


def suggest(spec: dict[str, Any], result: dict[str, Any], device: str | None, *, most: int = 3) -> list[Suggestion]:
    """Up to `most` suggestions for a finished run, strongest evidence first; a counterpart that could not run
    (or would repeat this run) is left out."""
    run = _Run(Experiment.from_dict(spec), result, device)
    found = [s for rule in RULES if (s := rule(run)) is not None]
    return _runnable(run.exp, found)[:most]


# Backends that trace but keep eager's own kernels: nothing is fused or generated, so they bring no speedup.
EAGER_KERNEL_BACKENDS = {
    "aot_eager": "traces the forward (and backward) with Dynamo and AOT autograd, then runs the traced graphs with "
                 "eager's own kernels",
    "eager": "captures graphs with Dynamo, then runs them with eager's own kernels",
}


def _slower_rule(run: _Run) -> Suggestion | None:
    speedup = run.result.get("speedup")
    if run.exp.backend in EAGER_KERNEL_BACKENDS or not run.compiled or speedup is None or speedup >= 1.0:
        return None  # eager's kernels on both sides are not a puzzle to investigate: the backend rule says why
    if figures.slower_than_eager(run.result) is None:  # the interval takes in 1x, or there is none
        lo, hi = run.result.get("speedup_low"), run.result.get("speedup_high")
        why = (f"its {figures.interval_name(run.result)} {lo:.2f}–{hi:.2f}x takes in 1x" if hi is not None else
               "it has too few rounds for an interval of its own")
        return Suggestion(
            "slower", "Cannot tell whether compiled is slower",
            f"Compiled read {speedup:.2f}x eager, but {why}: this run cannot tell compiled from eager. Time it longer "
            "(more rounds) on a quieter machine, or rerun the setting, before looking for a cause.", {}, 0.6)
    return _slower(run.exp, run.result, speedup)


def _backend_rule(run: _Run) -> Suggestion | None:
    """A backend that keeps eager's kernels checks tracing; the speedup comes from Inductor's generated kernels."""
    exp = run.exp
    if not (run.compiled and exp.backend in EAGER_KERNEL_BACKENDS):
        return None
    # Its speedup is not quoted: eager kernels on both sides, so a figure away from 1x is how far the machine moved
    # between the eager and the compiled rounds (or what tracing costs), not something compiling did.
    return Suggestion(
        "backend", "Try backend=inductor",
        f"backend={exp.backend} {EAGER_KERNEL_BACKENDS[exp.backend]}. It compiles no code: nothing is fused or "
        "generated, so this run's speedup is not a compiled speedup (eager kernels on both sides; a figure away from "
        "1x is the machine's drift between rounds, or what tracing costs). It shows that tracing works. Inductor is "
        "the backend that generates fused kernels, where compiled speedups come from.", {"backend": "inductor"}, 1.0)


def _idle_rule(run: _Run) -> Suggestion | None:
    """The GPU waits on Python and launches: CUDA graphs remove exactly that."""
    exp = run.exp
    idle = _share(run.result, run.timed, "idle")
    bound = launch_bound(run.result, run.device)
    if not (run.gpu and (bound or idle and idle[2] >= IDLE_SHARE) and exp.mode not in CUDAGRAPH_MODES
            and exp.backend == "inductor"):
        return None
    changes = {"mode": "reduce-overhead"} if exp.compiles else {"compile": "whole", "mode": "reduce-overhead"}
    return Suggestion(
        "idle", "Try mode=reduce-overhead (CUDA graphs)",
        f"{bound or ''}{' ' if bound else ''}A CUDA graph replays the whole step with one launch, which "
        "removes exactly this wait: the step no longer follows the host CPU.", changes,
        max(idle[2] if idle else 0.0, 0.6 if bound else 0.0))


def _small_batch_rule(run: _Run) -> Suggestion | None:
    """A large batch keeps the GPU busy, so its figure holds still (the GPU default is one, so a
    paired headline does not wobble from run to run); the
    launch-bound case, where CUDA graphs matter, is one click away at a small batch."""
    exp, result = run.exp, run.result
    idle = _share(result, run.timed, "idle")
    if not (run.gpu and run.compiled and exp.batch_size >= LARGE_BATCH and exp.backend == "inductor"
            and exp.mode not in CUDAGRAPH_MODES and launch_bound(result, run.device) is None):
        return None
    busy = f"the GPU is busy for {1 - idle[2]:.0%} of each compiled step, so" if idle else "the GPU is kept busy, so"
    return Suggestion(
        "small_batch", f"See the launch-bound case: batch {SMALL_BATCH}",
        f"At batch {exp.batch_size} {busy} this figure follows the GPU and holds still from run to run. At batch "
        f"{SMALL_BATCH} a step is short enough that the GPU waits on Python and kernel launches: the speed then "
        "follows the host CPU and moves between runs, and mode=reduce-overhead (CUDA graphs) is the cure, which "
        "that run's suggestions offer.", {"batch_size": SMALL_BATCH}, 0.1)


def _layout_rule(run: _Run) -> Suggestion | None:
    """channels_last for convolutional models on a GPU; else weights cast once when autocast's casts show."""
    exp, entry = run.exp, run.entry
    copies = _share(run.result, "eager", "copy")
    if run.gpu and entry.supports_channels_last and not exp.channels_last:
        words = (f" Copies and layout conversions took {copies[0]:.2f} ms of each eager step ({copies[2]:.0%})."
                 if copies and copies[2] >= 0.01 else "")
        inductor = (" and Inductor switches its own convolutions to it, so part of this speedup is a layout change "
                    "eager can have too" if exp.compiles and exp.backend == "inductor" else "")
        return Suggestion(
            "channels_last", "Try channels_last",
            f"{entry.title} ran in NCHW. GPU convolutions prefer channels_last{inductor}.{words}",
            {"channels_last": True}, max(copies[2] if copies else 0.0, 0.25))
    if copies and copies[2] >= COPY_SHARE and exp.precision.startswith("amp-") and exp.task == "inference":
        weights = exp.precision.removeprefix("amp-")
        return Suggestion(
            "cast_weights", f"Try {weights} weights",
            f"Copies and conversions took {copies[0]:.2f} of {copies[1]:.2f} ms of each eager step ({copies[2]:.0%}): "
            f"autocast casts the float32 weights to {weights} every step; casting the model once, as inference "
            "code does, skips that and halves the weight memory.", {"precision": weights}, copies[2])
    return None


RECOMPILE_LIMIT = 8  # torch._dynamo.config.recompile_limit's default on the versions the lab runs (2.11, 2.13)


def unlike_blocks(result: dict) -> list[tuple[str, int, int]]:
    """(class, copies, distinct shapes) of the repeated block classes whose copies differ in parameter or buffer
    shapes (tcore.worker.compile.block_shapes, stored with each compiled run): a compiled copy serves none of the
    others of another shape. [] where they are alike, or where the run did not record them."""
    found = result.get("repeated_block_shapes") or {}
    return [(name, g["copies"], g["shapes"]) for name, g in found.items() if g.get("shapes", 1) > 1]


def _blocks_words(unlike: list[tuple[str, int, int]]) -> str:
    """'its 15 InvertedResidual blocks come in 8 shapes (their parameters' shapes differ: ...)'."""
    parts = [f"{copies} {name} blocks come in {shapes} shapes" for name, copies, shapes in unlike]
    return "its " + " and ".join(parts) + " (their parameters' shapes differ: the widths change along the model)"


def _recompiles_rule(run: _Run) -> Suggestion | None:
    exp, result = run.exp, run.result
    if not result.get("recompile_count"):
        return None
    first = (result.get("recompiles") or [{}])[0].get("reason") or "a guard failed"
    unlike = unlike_blocks(result)
    if exp.compile in ("regional", "hierarchical") and unlike:
        # not a shape that changes between calls: each block of another width fails the compiled block's guards
        sizes = sum(shapes for _, _, shapes in unlike)
        graphs = (f"{sizes} sizes, one graph each" if all(s <= RECOMPILE_LIMIT for *_, s in unlike) else
                  f"{sizes} sizes, and torch compiles at most {RECOMPILE_LIMIT} graphs of one function, its recompile "
                  "limit: the other sizes run eagerly")
        return Suggestion(
            "recompiles", "Compile the whole model instead",
            f"{result['recompile_count']} recompilation(s); the first because: {first}. They come from the blocks, "
            f"not from the inputs: {_blocks_words(unlike)}, and a compiled block is reused only by copies of the same "
            f"shapes, so each new size recompiles it ({graphs}). Dynamic shapes or buckets would "
            "not help: nothing changes between calls. Compiling the whole model compiles it once.",
            {"compile": "whole"}, 0.5)
    if exp.dynamic is False:
        changes, title = {"dynamic": None}, "Try dynamic=None (automatic)"
    elif exp.shape_count and exp.shape_remedy == "none":
        changes, title = {"shape_remedy": "mark_dynamic"}, "Try mark_dynamic (or buckets)"
    else:
        changes, title = {}, "Find what changes between calls"
    return Suggestion(
        "recompiles", title,
        f"{result['recompile_count']} recompilation(s); the first because: {first}. Automatic dynamic shapes, "
        "marking the varying dimension dynamic, or padding to a few bucket sizes each stop a recompile per "
        "shape.", changes, 0.5)


def _graph_breaks_rule(run: _Run) -> Suggestion | None:
    # Breaks inside torch itself (the compiled optimizer's bookkeeping) are torch's choice: fullgraph=True would
    # only turn them into errors, so only breaks in the user's code are advice.
    breaks = [b for b in run.result.get("graph_breaks") or [] if not inside_torch(b.get("file"))]
    if not (run.result.get("graph_break_count") and breaks):
        return None
    b = breaks[0]
    where = f" at {b['file']}:{b['line']}" if b.get("file") else ""
    source = f" (`{b['source']}`)" if b.get("source") else ""
    if run.exp.graph_break:
        changes, title = {"graph_break": False}, "Try without the deliberate graph break"
    else:
        changes, title = {"fullgraph": True}, "Try fullgraph=True to list every break"
    return Suggestion(
        "graph_breaks", title,
        f"{sum(b.get('count', 1) for b in breaks)} graph break(s) in the model's code; the first{where}{source}: "
        f"{b['reason']}. Each break splits the model into graphs that cannot fuse across it; fullgraph=True turns "
        "a break into an error that names it.", changes, 0.4)


def _compile_time_rule(run: _Run) -> Suggestion | None:
    # A compiled variant that is not faster never pays back, whatever the compile costs: the "slower" rule speaks.
    breakeven, compile_s = figures.headline_breakeven(run.result), run.result.get("compile_s")
    if not (run.compiled and compile_s and breakeven is not None and breakeven > BREAKEVEN_STEPS):
        return None
    pays = f"pays back only after {breakeven:,.0f} steps"
    unlike = unlike_blocks(run.result)
    regional = run.exp.compile == "whole" and run.entry.repeats_blocks
    # blocks of a few sizes, each shared by several copies, still reuse their graphs; one size per copy or two, or
    # more sizes than torch compiles one function for, do not
    reused = all(copies >= 2 * shapes and shapes <= RECOMPILE_LIMIT for _, copies, shapes in unlike)
    if regional and reused:
        alike = run.result.get("repeated_block_shapes") or {}
        if not alike:  # a run stored before the lab recorded its blocks' shapes
            how = "compiling one block and reusing it"
        elif not unlike:
            how = (" and ".join(f"its {g['copies']} {name} blocks share one shape" for name, g in alike.items())
                   + ", so one compiled block serves every copy of its kind")
        else:
            how = (f"{_blocks_words(unlike)}: regional compilation compiles one graph per shape "
                   f"({sum(s for *_, s in unlike)} in all, each a recompile of the block after the first), each "
                   "reused by the copies of its shape")
        return Suggestion(
            "compile_time", "Try regional compilation",
            f"Compiling took {compile_s:.1f} s and {pays}. {run.entry.title} repeats its blocks: {how}; that "
            "cuts compile time, usually at nearly the same speed.", {"compile": "regional"}, 0.3)
    # blocks that differ in size would each be compiled again regionally: say so rather than offer it
    not_regional = (f" Regional compilation would not cut it: {_blocks_words(unlike)}, and a compiled block is reused "
                    f"only by copies of the same shapes, so it would compile one graph per size, each a recompile"
                    + (f" (past torch's recompile limit of {RECOMPILE_LIMIT} the other sizes would run eagerly)"
                       if any(shapes > RECOMPILE_LIMIT for *_, shapes in unlike) else "") + "."
                    if regional else "")
    if run.exp.cache == "cold":
        return Suggestion(
            "compile_time", "Try a warm compile cache",
            f"Compiling took {compile_s:.1f} s and {pays}. A restart with a warm cache (or shipped compile "
            f"artifacts) reuses the compiled kernels.{not_regional}", {"cache": "warm"}, 0.3)
    if not_regional:
        return Suggestion("compile_time", "Regional compilation would not shorten this compile",
                          f"Compiling took {compile_s:.1f} s and {pays}.{not_regional}", {}, 0.2)
    return None


def _optimizer_rule(run: _Run) -> Suggestion | None:
    optimizer = _share(run.result, "eager", "optimizer")
    if not (run.exp.task == "training" and not run.exp.compile_optimizer and optimizer
            and optimizer[2] >= OPTIMIZER_SHARE):
        return None
    return Suggestion(
        "optimizer", "Try compiling the optimizer step",
        f"The AdamW step took {optimizer[0]:.2f} of {optimizer[1]:.2f} ms of each eager step ({optimizer[2]:.0%}): "
        "compiled, its many small per-weight kernels fuse into a few.", {"compile_optimizer": True}, optimizer[2])


def _precision_rule(run: _Run) -> Suggestion | None:
    matmul = _share(run.result, run.timed, "matmul")
    if not (run.gpu and run.exp.precision == "fp32") or matmul and matmul[2] < MATMUL_SHARE:
        return None
    share = (f" Matmuls and convolutions took {matmul[0]:.2f} of {matmul[1]:.2f} ms of each {run.timed} step "
             f"({matmul[2]:.0%})." if matmul else "")
    return Suggestion(
        "precision", "Try TF32 (or bf16)",
        f"This run computes in full fp32 on a GPU, where tensor cores run TF32 several times faster and "
        f"bf16 faster still.{share}", {"precision": "tf32"}, matmul[2] if matmul else 0.3)


# Every rule, each a function of one run that returns its suggestion or None; suggest() ranks what they return.
RULES = (_slower_rule, _backend_rule, _idle_rule, _layout_rule, _recompiles_rule, _graph_breaks_rule,
         _compile_time_rule, _optimizer_rule, _precision_rule, _small_batch_rule)


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
    from tcore.figures.breakdown import CATEGORIES, shown_ms

    bars = shown_ms(result)
    eager, compiled = bars.get("eager") or {}, bars.get("compiled") or {}
    grew = [(compiled[k] - eager[k], k) for k in CATEGORIES if k in compiled and k in eager]
    if not grew:
        why = ("the profiled steps ran too far off the timed ones to say where (Where the time goes)"
               if result.get("breakdown") else "no profile of the steps says where")
        return Suggestion("slower", "Compiled is slower than eager",
                          f"Compiled ran at {speedup:.2f}x eager; {why}.", {}, 1.0)
    delta, worst = max(grew)
    if delta <= 0:  # nothing grew: naming the "largest change" would quote a part that shrank or stood still
        return Suggestion(
            "slower", "Find out why compiled is slower",
            f"Compiled ran at {speedup:.2f}x eager, yet no part of its profiled step took longer than eager's (Where "
            "the time goes): the slowdown is outside the profiled kernels, in launch overhead or waits between steps "
            "that the profile does not show.", {}, 1.0)
    where = (f"{CATEGORIES[worst][0].lower()} went from {eager[worst]:.2f} to {compiled[worst]:.2f} ms per step "
             "(Where the time goes)")
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
                if exp.task == "generate":  # e.g. regional: a generation run's prefill and decode compile whole
                    continue
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
