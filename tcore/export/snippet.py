"""Copy as code: a short runnable Python program that sets up and compiles a model the way a run did.

It is what a person pastes into their own code: the exact torch.compile or module.compile calls (whole
model or each repeated block), the compiled optimizer step, the precision and memory-format lines,
the compiler settings, dynamic marks or padding buckets, and the cache loading; the comments say which lines to
keep for another model. A real model (torchvision, timm, transformers, diffusers, a file) is built the way its
library builds it, with its batches and loss written out (tcore.export.snippet_sources): the program runs wherever
it is pasted, needing torch and that library, which its first lines name. The lab's built-in sample models live in
the lab's folder: their program puts that folder on its import path, so it runs from anywhere on the lab's machine,
and says where the lab should be if it is not there.
tests/test_snippet.py runs it on the CPU and checks that Dynamo hands Inductor the same graphs, with the same
inputs and options, as the run's own code path (tcore.worker).

It ends by timing eager against compiled the way the lab does (_timing_lines): synchronized, warmed up,
paired rounds of an eager and a compiled block back to back in alternating order, until the speedup's
interval is within ±3% or a few seconds are spent; it prints the speedup with that interval, so the run's
figure can be reproduced on the reader's machine.
"""
from __future__ import annotations

from typing import Any

import torch

import sample_models
from tcore.experiment import schedule as schedules
from tcore.experiment.precision import TORCH_DTYPES
from tcore.experiment.spec import (
    DEFAULTS,
    INDUCTOR_OPTIONS,
    LR,
    PRECISIONS,
    Experiment,
    call_args,
    escaped_label,
    optimizer_compile_kwargs,
)
from tcore.export import snippet_generate, snippet_sources

# A run's shape schedule as the snippet writes it: sizes, buckets, varying (tensor, dim), inputs per batch (_schedule)
_Shapes = tuple[list[int], list[int], list[tuple[int, int]], int]


def code_for(spec: dict[str, Any], device: str, *, run_id: str = "") -> str:
    """The program for a run's spec on `device` (the device it ran on: "cuda" or "cpu"), section by section."""
    exp = Experiment.from_dict(spec)
    entry = sample_models.get(exp.model)
    if exp.task == "generate":  # a program of its own, opening as the others do
        return snippet_generate.code_for(exp, device, _header(exp, entry, run_id) + _model(exp, entry, device))
    shapes = _schedule(exp, entry)
    sections = [_header(exp, entry, run_id), _model(exp, entry, device), _batch_code(exp, entry),
                _inputs(exp, entry, shapes),
                _precision(exp, device, _batch_type(entry)), _full_mask(exp, entry), _settings(exp),
                _compile(exp, entry),
                _optimizer(exp, device), _step(exp, device, entry), _first_calls(exp, shapes),
                _timing_lines(device, exp)]
    return "\n".join(line for section in sections for line in section) + "\n"


def comment_text(text: str) -> str:
    """`text` (a preset's or a file's name: anyone's words) made safe inside a # comment (escaped_label): a line break
    of any kind would end the comment and make the rest code, and a right-to-left override would show the code's
    words reordered."""
    return escaped_label(text)


def _header(exp: Experiment, entry: sample_models.SampleModel, run_id: str) -> list[str]:
    lines = [f"# Compile Lab{' run ' + comment_text(run_id) if run_id else ''}: {comment_text(exp.label)}"]
    if entry.builtin:
        lab = comment_text(str(sample_models.sources.LAB))
        lines += ["# It builds one of Compile Lab's sample models, which live in the lab's folder; it puts that folder",
                  f"# ({lab}) on its import path itself, so `python this.py` runs it from anywhere on this machine.",
                  "# For your own model, keep the lines marked <-- and put your model, batch and loss where "
                  "sample_models' are."]
    else:
        needs = comment_text(snippet_sources.requirement(entry))
        lines += [f"# Runs wherever it is pasted: it needs torch and {needs}.",
                  "# For your own model, keep the lines marked <-- and put your model, batch and loss where these are."]
    if exp.cache == "warm":
        lines += ["# This run reused the compile caches of earlier runs: give your process a lasting cache folder, "
                  "e.g.",
                  "#   TORCHINDUCTOR_CACHE_DIR=~/.cache/my-inductor python this.py"]
    return lines


def _model(exp: Experiment, entry: sample_models.SampleModel, device: str) -> list[str]:
    """The imports, the seed and the model, built as the lab builds it."""
    if not entry.builtin:
        return _real_model(exp, entry, device)
    lab = str(sample_models.sources.LAB)
    moved = (f"This program builds a Compile Lab sample model, from the lab's folder ({lab}); it is not there: "
             "set PYTHONPATH to where the lab is")
    lines = ["import sys", "", "import torch", "",
             f"sys.path.insert(0, {lab!r})  # the lab's folder: Python looks in the script's folder, not the lab's",
             "try:",
             "    import sample_models",
             "except ModuleNotFoundError:  # the lab's folder moved, or this runs on another machine",
             f"    raise SystemExit({moved!r}) from None",
             "", f"device = {device!r}", f"torch.manual_seed({exp.seed})"]
    build_args = f"{exp.preset!r}, device=device" + (", graph_break=True" if exp.graph_break else "")
    return lines + [f"entry = sample_models.get({exp.model!r})",
                    f"model = entry.build({build_args})" + ("  # with a deliberate graph break in each block"
                                                            if exp.graph_break else "")]


def _real_model(exp: Experiment, entry: sample_models.SampleModel, device: str) -> list[str]:
    """A real model, built as its library builds it, in the lines a person keeps; nothing of the lab's."""
    lines = ["import torch", "", f"device = {device!r}", f"torch.manual_seed({exp.seed})", "",
             *entry.build_code(exp.preset)]
    if exp.task == "training":
        lines += ["# as the run: dropout at p=1e-30 (PyTorch's harness does the same), so eager and compiled agree",
                  "for m in model.modules():",
                  "    if isinstance(m, torch.nn.modules.dropout._DropoutNd) or any(w in type(m).__name__ for w in "
                  "('Drop', 'Stochastic')):",
                  "        for attr in ('p', 'drop_prob'):",
                  "            if isinstance(getattr(m, attr, None), float) and getattr(m, attr) > 0:",
                  f"                setattr(m, attr, {sample_models.sources.QUIET!r})"]
    return lines


def _batch_code(exp: Experiment, entry: sample_models.SampleModel) -> list[str]:
    """A real model's batches and loss, written out (a built-in's come from the lab's sample_models)."""
    return [] if entry.builtin else snippet_sources.batch_lines(entry, exp.preset)


def _batch_type(entry: sample_models.SampleModel) -> str:
    return "sample_models.Batch" if entry.builtin else "Batch"


def _make_batch(exp: Experiment, entry: sample_models.SampleModel, size: str | None = None) -> str:
    """The call that makes one batch (of the schedule's `size`, where there is a schedule)."""
    if entry.builtin:
        if size is None:
            return f"entry.make_batch({exp.preset!r}, {exp.batch_size}, device=device)"
        return (f"entry.make_batch({exp.preset!r}, {exp.batch_size}, device=device, seq_len={size})"
                if entry.seq_field else f"entry.make_batch({exp.preset!r}, {size}, device=device)")
    if size is None:
        return f"make_batch({exp.batch_size})"
    return f"make_batch({exp.batch_size}, seq_len={size})" if entry.seq_field else f"make_batch({size})"


def _inputs(exp: Experiment, entry: sample_models.SampleModel, shapes: _Shapes) -> list[str]:
    """The batches: one, or the run's shape schedule, padded up to buckets where the run padded."""
    sizes, buckets, dims, _ = shapes
    batch = _batch_type(entry)
    if not sizes:
        return ["", f"batches = [{_make_batch(exp, entry)}]"]
    batch_call = _make_batch(exp, entry, "size")
    lines = ["", f"# The run fed {len(sizes)} distinct sizes of the {entry.varying_dim or 'batch size'}, in this "
                 "order:", f"sizes = {sizes}", f"batches = [{batch_call} for size in sizes]"]
    if not buckets:
        return lines + [
            "# each size as fresh contiguous tensors: a caption sliced from a longer one keeps the longer one's",
            "# stride, and Dynamo guards on strides as well as sizes",
            f"batches = [{batch}(tuple(t.contiguous() for t in b.inputs), b.target.contiguous()) for b in batches]"]
    return lines + [
        f"# shape_remedy=buckets: pad every input up to one of {len(buckets)} sizes, each compiled once",
        f"buckets = {buckets}",
        f"varying = {dims}  # (tensor, dimension) that follow the size; the last tensor is the target",
        "",
        "def pad(batch, size):  # zeros up to the bucket; contiguous, as Dynamo guards on strides as well",
        "    tensors = [*batch.inputs, batch.target]",
        "    for i, d in varying:",
        "        t = tensors[i]",
        "        missing = size - t.shape[d]",
        "        if missing > 0:",
        "            t = torch.cat([t, t.new_zeros(*t.shape[:d], missing, *t.shape[d + 1:])], dim=d)",
        "        tensors[i] = t.contiguous()",
        f"    return {batch}(tuple(tensors[:-1]), tensors[-1])",
        "",
        "padded = [next(bucket for bucket in buckets if bucket >= size) for size in sizes]",
        "batches = [pad(b, size) for b, size in zip(batches, padded)]"]


def _precision(exp: Experiment, device: str, batch: str = "sample_models.Batch") -> list[str]:
    """The weights' dtype, channels_last, the float32 matmul precision, and train or eval; `batch`: the Batch type."""
    precision = PRECISIONS[exp.precision]
    weights = precision.weights
    lines = [""] if weights != "float32" or exp.channels_last else []
    if weights != "float32":
        dtype = TORCH_DTYPES[weights]
        lines += [f"# precision={exp.precision}: the model and its floating-point inputs in {weights}",
                  f"model = model.to({dtype})  # <--",
                  "",
                  "def cast(t):  # token ids and class labels stay integers",
                  f"    return t.to({dtype}) if t.is_floating_point() else t",
                  "",
                  f"batches = [{batch}(tuple(map(cast, b.inputs)), cast(b.target)) for b in batches]"]
    if exp.channels_last:
        lines += ["# channels_last: the model's weights and its images in NHWC",
                  "model = model.to(memory_format=torch.channels_last)  # <--",
                  f"batches = [{batch}((b.inputs[0].contiguous(memory_format=torch.channels_last), "
                  "*b.inputs[1:]), b.target) for b in batches]"]
    if not precision.tf32 and weights == "float32" and device == "cuda":
        lines += [f"# precision={exp.precision}: float32 matmuls and convolutions in full precision (cuDNN's default "
                  "is TF32)",
                  'torch.backends.cuda.matmul.fp32_precision = "ieee"  # <-- (torch < 2.9: ...allow_tf32 = False)',
                  'torch.backends.cudnn.conv.fp32_precision = "ieee"  # <--']
    if precision.tf32 and device == "cuda":
        lines += ["# precision=tf32: float32 matmuls and convolutions on tensor cores",
                  'torch.backends.cuda.matmul.fp32_precision = "tf32"  # <-- (torch < 2.9: torch.backends.cuda.matmul.'
                  'allow_tf32 = True)',
                  'torch.backends.cudnn.conv.fp32_precision = "tf32"  # <--']
    return lines + [f"model.train({exp.task == 'training'})"]


def _full_mask(exp: Experiment, entry: sample_models.SampleModel) -> list[str]:
    """skip_full_mask: the worker's own hook (sample_models.sources.hf_masks), its source written out, and for a model
    whose batches carry an attention mask, an all-true one dropped as the worker drops it."""
    if not exp.skip_full_mask:
        return []
    import inspect

    from sample_models.sources import hf_masks

    position = entry.source.mask_position(entry.ref)
    hooks = [hf_masks.nothing_to_mask, hf_masks.skip_when_unpadded, hf_masks.install]
    if position is not None:
        hooks.append(hf_masks.without_full_mask)
    lines = ["", "# skip_full_mask: transformers skips an all-true attention mask in eager but builds it while",
             "# tracing, so SDPA under torch.compile leaves its fused flash kernel for a math path. These make it skip",
             "# the mask while compiling too, wherever eager would (transformers' upstream fix); a padded batch keeps",
             "# its mask.",
             "import functools", ""]
    for hook in hooks:
        lines += [*inspect.getsource(hook).rstrip().splitlines(), "", ""]
    lines.append("install()  # <--")
    if position is not None:
        lines.append(f"batches = [{_batch_type(entry)}(without_full_mask(b.inputs, {position}), b.target) "
                     "for b in batches]  # <-- an all-true mask passed as None, as eager's skip amounts to")
    return lines


def _settings(exp: Experiment) -> list[str]:
    """The compiler settings the run changed, and the cache artifacts it loaded."""
    settings = []
    if exp.recompile_limit != DEFAULTS["recompile_limit"]:
        settings.append(f"torch._dynamo.config.recompile_limit = {exp.recompile_limit}  # <--")
    for name, option in INDUCTOR_OPTIONS.items():
        if getattr(exp, name) != DEFAULTS[name]:
            settings.append(f"torch._inductor.config.{option} = {getattr(exp, name)!r}  # <--")
    lines = ["", "# Compiler settings the run changed", *settings] if settings else []
    if exp.cache == "artifacts":
        lines += ["",
                  "# Load the compile artifacts an earlier run saved (the run's page has them as a download);",
                  "# they were made by torch.compiler.save_cache_artifacts() after that run's compile.",
                  'with open("compile-artifacts.bin", "rb") as f:',
                  "    torch.compiler.load_cache_artifacts(f.read())  # <--"]
    return lines


def _compile(exp: Experiment, entry: sample_models.SampleModel) -> list[str]:
    """The compile calls, then, where the run made graph breaks errors, the calls wrapped in that setting."""
    lines = _compile_calls(exp, entry)
    if exp.error_on_graph_break:
        lines += ["# error_on_graph_break: Dynamo reads it while tracing, so the calls go inside it (torch 2.9+)",
                  "compiled = torch._dynamo.error_on_graph_break(True)(compiled)  # <--"]
    return lines


def _compile_calls(exp: Experiment, entry: sample_models.SampleModel) -> list[str]:
    """The torch.compile or block.compile calls, with the arguments the worker passes
    (tcore.experiment.spec.compile_kwargs).
    """
    args = call_args(exp)
    if exp.compile == "whole":
        return ["", "# compile=whole: the whole model, into as few graphs as Dynamo can",
                f"compiled = torch.compile(model{', ' + args if args else ''})  # <--"]
    if exp.compile == "hierarchical":
        lines = ["", "# compile=hierarchical: each repeated block is a nested compile region, compiled once inside",
                 "# one whole-model compile and reused for its copies"]
        if entry.builtin:
            lines.append("for block in entry.repeated_blocks(model):")
        else:
            names = sorted({type(m).__name__ for m in entry.repeated_blocks(entry.build(exp.preset, device="meta"))})
            lines += [f"blocks = {set(names)!r}  # <-- your model's repeated block classes",
                      "for block in [m for m in model.modules() if type(m).__name__ in blocks]:"]
        return lines + ["    cls = type(block)  # a subclass with the forward decorated, as the model's source would",
                        '    block.__class__ = type(cls.__name__, (cls,), {"forward": '
                        'torch.compiler.nested_compile_region(cls.forward)})  # <--',
                        f"compiled = torch.compile(model{', ' + args if args else ''})  # <--"]
    if exp.compile == "regional" and entry.repeated_call:
        return ["", f"# compile=regional: the model compiles each of its _repeated_blocks in place "
                    f"({entry.repeated_call})",
                f"model.{entry.repeated_call}({args})  # <--", "compiled = model"]
    if exp.compile != "regional":
        return ["", "compiled = model  # compile=off: the model runs eagerly"]
    lines = ["", "# compile=regional: each repeated block compiled in place; identical blocks share one compiled graph"]
    if entry.builtin:
        lines.append("for block in entry.repeated_blocks(model):")
    else:  # the classes the lab found (the model's own _no_split_modules, or the submodules that repeat)
        names = sorted({type(m).__name__ for m in entry.repeated_blocks(entry.build(exp.preset, device="meta"))})
        lines += [f"blocks = {set(names)!r}  # <-- your model's repeated block classes",
                  "for block in [m for m in model.modules() if type(m).__name__ in blocks]:"]
    return lines + [f"    block.compile({args})  # <--", "compiled = model"]


def _optimizer(exp: Experiment, device: str) -> list[str]:
    """For training: AdamW, its step compiled where the run compiled it."""
    if exp.task != "training":
        return []
    if not exp.compile_optimizer:
        return ["", f"optimizer = torch.optim.AdamW(model.parameters(), lr={LR})", "optimizer_step = optimizer.step"]
    capturable = ", capturable=True" if device == "cuda" else ""
    return ["",
            "# The optimizer step compiled into a few fused kernels. A tensor learning rate keeps LR changes from",
            "# recompiling; eager foreach AdamW accepts one only when capturable.",
            f"optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor({LR}, device=device){capturable})",
            "",
            f"@torch.compile({', '.join(f'{k}={v!r}' for k, v in optimizer_compile_kwargs(exp).items())})  # <--",
            "def optimizer_step():",
            "    optimizer.step()"]


def _step(exp: Experiment, device: str, entry: sample_models.SampleModel) -> list[str]:
    """step(batch): one inference call, or forward, backward and the optimizer step, under autocast if the run was."""
    precision = PRECISIONS[exp.precision]
    autocast = f"torch.autocast(device, dtype={TORCH_DTYPES[precision.autocast]})" if precision.autocast else None
    cuda_graphs = device == "cuda" and exp.compiles and (exp.backend == "cudagraphs" or (
        exp.backend == "inductor" and exp.mode in ("reduce-overhead", "max-autotune")))
    lines = ["", "@torch.no_grad()"] if exp.task == "inference" else [""]
    lines.append("def step(batch):")
    if cuda_graphs:
        lines.append("    torch.compiler.cudagraph_mark_step_begin()  # <-- CUDA graphs reuse output memory: a new "
                     "step begins")
    inner = "    "
    if autocast:
        lines.append(f"    with {autocast}:  # <-- precision={exp.precision}")
        inner = "        "
    if exp.task == "inference":
        return lines + [f"{inner}return compiled(*batch.inputs)"]
    loss = "entry.loss(out, batch)" if entry.builtin else "loss(out, batch)"
    return lines + [f"{inner}out = compiled(*batch.inputs)", f"{inner}step_loss = {loss}",
                    "    step_loss.backward()", "    optimizer_step()", "    optimizer.zero_grad(set_to_none=True)",
                    "    return out"]


def _first_calls(exp: Experiment, shapes: _Shapes) -> list[str]:
    """The first call, which compiles, then the run's other buckets and sizes (mark_dynamic before them)."""
    sizes, buckets, dims, inputs = shapes
    lines = [""]
    if exp.shape_remedy == "mark_dynamic":
        lines.append("# shape_remedy=mark_dynamic: the varying dimension is symbolic from the first compile")
        for i, d in dims:
            tensor = f"batches[0].inputs[{i}]" if i < inputs else "batches[0].target"
            lines.append(f"torch._dynamo.mark_dynamic({tensor}, {d})  # <--")
    lines.append("out = step(batches[0])  # the first call compiles")
    if buckets:
        lines += ["for bucket in buckets:  # then every other bucket, before the real inputs arrive, as in the run",
                  "    step(batches[padded.index(bucket)])"]
    if sizes:
        lines += ["for batch in batches[1:]:  # each new size may recompile; the run's page says which did",
                  "    out = step(batch)"]
    return lines


def _timing_lines(device: str, exp: Experiment) -> list[str]:
    """The snippet's last section: eager against compiled as the lab times them
    (tcore.worker.rounds.StepRounds.time_blocks), with the paired speedup and its order-statistics interval
    (tcore.figures.paired), printed. The rule is the run's own (its seconds per round, its target, its seconds per
    variant at most, its fewest rounds), so the program and the run it copies time alike; a run timed by a fixed number
    of steps is copied as its seconds rule."""
    from tcore.figures import paired, rerun
    sync = "torch.cuda.synchronize()" if device == "cuda" else "pass  # the CPU runs each op before returning"
    round_s, timed_s, target = exp.round_s, exp.timed_s, exp.target_pct
    # GPU runs settle first, as the run (a run of fixed steps is copied as its seconds rule); the CPU's do not
    settle_s = min(paired.SETTLE_S, exp.timed_s / 2)
    settle_lines = [
        f"settle = {{True: [], False: []}}  # untimed blocks first, as the run: until each variant's last "
        f"{paired.SETTLE_BLOCKS} agree",
        f"# within {paired.SETTLE_PCT:g}% or it has run {settle_s:g} s (a host-bound loop speeds up over its first "
        "seconds)",
        f"steady = lambda t: len(t) >= {paired.SETTLE_BLOCKS} and (max(t[-{paired.SETTLE_BLOCKS}:]) - "
        f"min(t[-{paired.SETTLE_BLOCKS}:])) / sorted(t[-{paired.SETTLE_BLOCKS}:])[{paired.SETTLE_BLOCKS // 2}] "
        f"<= {paired.SETTLE_PCT / 100:g}",
        "n = 0",
        f"while moving := [e for e, t in settle.items() if not (steady(t) or sum(t) * steps[e] >= {settle_s:g})]:",
        "    for eager in moving if n % 2 == 0 else moving[::-1]:",
        "        settle[eager].append(seconds_per_step(steps[eager], eager))",
        "    n += 1",
        f"steps = {{eager: max(1, round({round_s:g} / t[-1])) for eager, t in settle.items()}}  "
        "# sized from the settled steps",
    ] if device == "cuda" else []
    within = paired.rounds_target(target)
    fewest = max(exp.rounds, paired.MIN_ROUNDS)
    return ["", "",
            "# --- The effect: eager against compiled, timed as the lab times them ---------------------------------",
            "# Synchronized, warmed up, then paired rounds: an eager block and a compiled block back to back, the",
            "# order alternating, so the machine's drift hits both alike; eager is the same callables run with",
            "# torch.compiler.set_stance('force_eager'). The speedup is the median of the rounds' ratios, with a",
            "# distribution-free interval from their order statistics; as the run did, rounds are added until it is",
            f"# within ± {within:g}% (from {fewest} rounds on; the run's ± {target:g}% target "
            "less room for the",
            f"# spread between processes) or until another round would pass {timed_s:g} s per variant, which may "
            "stop it",
            "# with fewer rounds and a wider interval.",
            "import math",
            "import time",
            "",
            "",
            "def sync():",
            f"    {sync}",
            "",
            "",
            "def seconds_per_step(n, eager):",
            "    with torch.compiler.set_stance('force_eager' if eager else 'default'):",
            "        sync()",
            "        t0 = time.perf_counter()",
            "        for i in range(n):",
            "            step(batches[i % len(batches)])",
            "        sync()",
            "    return (time.perf_counter() - t0) / n",
            "",
            "",
            "def median_and_interval(ratios):  # ~95% for 6 rounds or more, whatever the ratios' distribution",
            "    r, n, k = sorted(ratios), len(ratios), 1",
            "    while k < n // 2 and 1 - 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n >= 0.95:",
            "        k += 1",
            "    return math.sqrt(r[(n - 1) // 2] * r[n // 2]), r[k - 1], r[n - k]",
            "",
            "",
            "per_step = {eager: min(seconds_per_step(len(batches), eager) for _ in range(3)) "
            "for eager in (True, False)}",
            f"steps = {{eager: max(1, round({round_s:g} / s)) for eager, s in per_step.items()}}  "
            f"# ~{round_s:g} s blocks",
            *settle_lines,
            "rounds, spent = [], 0.0  # each round: {eager: seconds per step}",
            "while True:",
            "    order = (True, False) if len(rounds) % 2 == 0 else (False, True)",
            "    rounds.append({eager: seconds_per_step(steps[eager], eager) for eager in order})",
            "    block = max(rounds[-1][e] * steps[e] for e in order)",
            "    spent += block",
            "    speedup, low, high = median_and_interval([r[True] / r[False] for r in rounds])",
            f"    if spent + block > {timed_s * 1.05:g}:  # another round would pass the timed seconds (5% slack)",
            "        break",
            f"    if len(rounds) >= {fewest} and max(high / speedup - 1, 1 - low / speedup) <= {within / 100:g}:",
            "        break",
            f"# A round whose eager or compiled block ran over {paired.DISTURBED_PCT:g}% slower a step than that "
            "variant's fastest was disturbed",
            f"# by the host; with {paired.MIN_ROUNDS} clean rounds or more the speedup is theirs, as the lab's is.",
            "floor = {e: min(r[e] for r in rounds) for e in (True, False)}",
            f"clean = [r for r in rounds if all(r[e] <= floor[e] * {1 + paired.DISTURBED_PCT / 100:g} "
            "for e in (True, False))]",
            f"if {paired.MIN_ROUNDS} <= len(clean) < len(rounds):",
            "    speedup, low, high = median_and_interval([r[True] / r[False] for r in clean])",
            "    print(f'{len(rounds) - len(clean)} disturbed rounds left out')",
            "eager_ms, compiled_ms = (sorted(r[e] for r in rounds)[len(rounds) // 2] * 1e3 for e in (True, False))",
            f"said = (f'interval {{low:.2f}}-{{high:.2f}}x, {{len(rounds)}} paired rounds' if len(rounds) >= "
            f"{rerun.MIN_INTERVAL_ROUNDS} else",
            f"        f'no interval: {{len(rounds)}} paired round(s), and an interval takes "
            f"{rerun.MIN_INTERVAL_ROUNDS}')",
            "print(f'speedup {speedup:.2f}x ({said}; eager '",
            "      f'{eager_ms:.2f} ms/step, compiled {compiled_ms:.2f} ms/step, medians of the rounds)')"]


def _schedule(exp: Experiment, entry: sample_models.SampleModel) -> _Shapes:
    """The run's sizes, buckets, varying (tensor, dim) pairs (the target counts as the tensor after the
    inputs) and how many inputs a batch has; empty without a shape schedule."""
    if not exp.shape_count:
        return [], [], [], 0
    schedule = schedules.make_schedule(exp, entry)
    inputs = len(schedules.make_batch(exp, entry, 2, "meta", torch.Generator("cpu")).inputs)
    return schedule.sizes, schedule.buckets, schedules.varying_dims(exp, entry), inputs
