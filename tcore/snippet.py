"""Copy as code: a short runnable Python program that sets up and compiles a model the way a run did.

It is what a person pastes into their own code: the exact torch.compile or module.compile calls (whole
model or each repeated block), the compiled optimizer step, the precision and memory-format lines,
the compiler settings, dynamic marks or padding buckets, and the cache loading. It builds the lab's
sample model, or a real model the way its library builds it (torchvision, timm, transformers, diffusers, a
file), so it runs as it is from the lab's folder; the comments say which lines to keep for another model. tests/test_snippet.py runs it on the CPU and checks that Dynamo hands Inductor the same
graphs, with the same inputs and options, as the run's own code path (tcore.worker).

It ends by timing eager against compiled the way the lab does (_timing_lines): synchronized, warmed up,
paired rounds of an eager and a compiled block back to back in alternating order, until the speedup's
interval is within ±3% or a few seconds are spent; it prints the speedup with that interval, so the run's
figure can be reproduced on the reader's machine.
"""
from __future__ import annotations

from typing import Any

import torch

import sample_models
from tcore import schedule as schedules
from tcore.spec import DEFAULTS, INDUCTOR_OPTIONS, LR, PRECISIONS, Experiment

TORCH_DTYPES = {"float32": "torch.float32", "bfloat16": "torch.bfloat16", "float16": "torch.float16"}


def _call_args(exp: Experiment) -> str:
    """torch.compile's keyword arguments where the run differs from torch's defaults (tcore.worker.compile_kwargs)."""
    args = []
    if exp.backend != "inductor":
        args.append(f"backend={exp.backend!r}")
    if exp.backend == "inductor" and exp.mode != "default":
        args.append(f"mode={exp.mode!r}")
    if exp.fullgraph:
        args.append("fullgraph=True")
    if exp.dynamic is not None:
        args.append(f"dynamic={exp.dynamic}")
    return ", ".join(args)


def code_for(spec: dict[str, Any], device: str, *, run_id: str = "") -> str:
    """The program for a run's spec on `device` (the device it ran on: "cuda" or "cpu")."""
    exp = Experiment.from_dict(spec)
    entry = sample_models.get(exp.model)
    precision = PRECISIONS[exp.precision]
    lines: list[str] = []
    add = lines.append

    add(f"# Compile Lab{' run ' + run_id if run_id else ''}: {exp.label}")
    add("# Runs as it is from the Compile Lab folder. For your own model, keep the lines marked <-- and put your")
    add("# model, batch and loss where sample_models' are.")
    if exp.cache == "warm":
        add("# This run reused the compile caches of earlier runs: give your process a lasting cache folder, e.g.")
        add("#   TORCHINDUCTOR_CACHE_DIR=~/.cache/my-inductor python this.py")
    add("import torch")
    add("")
    add("import sample_models")
    add("")
    add(f"device = {device!r}")
    add(f"torch.manual_seed({exp.seed})")
    if entry.builtin:
        add(f"entry = sample_models.get({exp.model!r})")
        build_args = f"{exp.preset!r}, device=device" + (", graph_break=True" if exp.graph_break else "")
        add(f"model = entry.build({build_args})" + ("  # with a deliberate graph break in each block"
                                                    if exp.graph_break else ""))
    else:  # a real model: built as its library builds it, in the lines a person keeps
        add(f"entry = sample_models.get({exp.model!r})  # the run's batches and loss")
        lines.extend(entry.build_code(exp.preset))
        if exp.task == "training":
            add("# as the run: dropout at p=1e-30 (PyTorch's harness does the same), so eager and compiled agree")
            add("sample_models.sources.quiet_dropout(model)")
    sizes, buckets, dims, inputs = _schedule(exp, entry)
    if sizes:
        add(f"# The run fed {len(sizes)} distinct sizes of the {entry.varying_dim or 'batch size'}, in this order:")
        add(f"sizes = {sizes}")
        batch_call = (f"entry.make_batch({exp.preset!r}, {exp.batch_size}, device=device, seq_len=size)"
                      if entry.seq_field else f"entry.make_batch({exp.preset!r}, size, device=device)")
        add(f"batches = [{batch_call} for size in sizes]")
    else:
        add(f"batches = [entry.make_batch({exp.preset!r}, {exp.batch_size}, device=device)]")
    if buckets:
        add(f"# shape_remedy=buckets: pad every input up to one of {len(buckets)} sizes, each compiled once")
        add(f"buckets = {buckets}")
        add(f"varying = {dims}  # (tensor, dimension) that follow the size; the last tensor is the target")
        add("")
        add("def pad(batch, size):  # zeros up to the bucket; contiguous, as Dynamo guards on strides as well")
        add("    tensors = [*batch.inputs, batch.target]")
        add("    for i, d in varying:")
        add("        t = tensors[i]")
        add("        missing = size - t.shape[d]")
        add("        if missing > 0:")
        add("            t = torch.cat([t, t.new_zeros(*t.shape[:d], missing, *t.shape[d + 1:])], dim=d)")
        add("        tensors[i] = t.contiguous()")
        add("    return sample_models.Batch(tuple(tensors[:-1]), tensors[-1])")
        add("")
        add("padded = [next(bucket for bucket in buckets if bucket >= size) for size in sizes]")
        add("batches = [pad(b, size) for b, size in zip(batches, padded)]")
    elif sizes:
        add("# each size as fresh contiguous tensors: a caption sliced from a longer one keeps the longer one's")
        add("# stride, and Dynamo guards on strides as well as sizes")
        add("batches = [sample_models.Batch(tuple(t.contiguous() for t in b.inputs), b.target.contiguous()) "
            "for b in batches]")

    weights = precision.weights
    if weights != "float32" or exp.channels_last:
        add("")
    if weights != "float32":
        dtype = TORCH_DTYPES[weights]
        add(f"# precision={exp.precision}: the model and its floating-point inputs in {weights}")
        add(f"model = model.to({dtype})  # <--")
        add("")
        add("def cast(t):  # token ids and class labels stay integers")
        add(f"    return t.to({dtype}) if t.is_floating_point() else t")
        add("")
        add("batches = [sample_models.Batch(tuple(map(cast, b.inputs)), cast(b.target)) for b in batches]")
    if exp.channels_last:
        add("# channels_last: the model's weights and its images in NHWC")
        add("model = model.to(memory_format=torch.channels_last)  # <--")
        add("batches = [sample_models.Batch((b.inputs[0].contiguous(memory_format=torch.channels_last), "
            "*b.inputs[1:]), b.target) for b in batches]")
    if not precision.tf32 and weights == "float32" and device == "cuda":
        add(f"# precision={exp.precision}: float32 matmuls and convolutions in full precision (cuDNN's default is TF32)")
        add('torch.backends.cuda.matmul.fp32_precision = "ieee"  # <-- (torch < 2.9: ...allow_tf32 = False)')
        add('torch.backends.cudnn.conv.fp32_precision = "ieee"  # <--')
    if precision.tf32 and device == "cuda":
        add("# precision=tf32: float32 matmuls and convolutions on tensor cores")
        add('torch.backends.cuda.matmul.fp32_precision = "tf32"  # <-- (torch < 2.9: torch.backends.cuda.matmul.'
            'allow_tf32 = True)')
        add('torch.backends.cudnn.conv.fp32_precision = "tf32"  # <--')
    add(f"model.train({exp.task == 'training'})")

    settings = []
    if exp.recompile_limit != DEFAULTS["recompile_limit"]:
        settings.append(f"torch._dynamo.config.recompile_limit = {exp.recompile_limit}  # <--")
    for name, option in INDUCTOR_OPTIONS.items():
        if getattr(exp, name) != DEFAULTS[name]:
            settings.append(f"torch._inductor.config.{option} = {getattr(exp, name)!r}  # <--")
    if settings:
        add("")
        add("# Compiler settings the run changed")
        lines.extend(settings)
    if exp.cache == "artifacts":
        add("")
        add("# Load the compile artifacts an earlier run saved (the run's page has them as a download);")
        add("# they were made by torch.compiler.save_cache_artifacts() after that run's compile.")
        add('with open("compile-artifacts.bin", "rb") as f:')
        add("    torch.compiler.load_cache_artifacts(f.read())  # <--")

    add("")
    args = _call_args(exp)
    if exp.compile == "whole":
        add("# compile=whole: the whole model, into as few graphs as Dynamo can")
        add(f"compiled = torch.compile(model{', ' + args if args else ''})  # <--")
    elif exp.compile == "regional" and entry.repeated_call:
        add(f"# compile=regional: the model compiles each of its _repeated_blocks in place ({entry.repeated_call})")
        add(f"model.{entry.repeated_call}({args})  # <--")
        add("compiled = model")
    elif exp.compile == "regional":
        add("# compile=regional: each repeated block compiled in place; identical blocks share one compiled graph")
        if entry.builtin:
            add("for block in entry.repeated_blocks(model):")
        else:  # the classes the lab found (the model's own _no_split_modules, or the submodules that repeat)
            names = sorted({type(m).__name__ for m in entry.repeated_blocks(entry.build(exp.preset, device="meta"))})
            add(f"blocks = {set(names)!r}  # <-- your model's repeated block classes")
            add("for block in [m for m in model.modules() if type(m).__name__ in blocks]:")
        add(f"    block.compile({args})  # <--")
        add("compiled = model")
    else:
        add("compiled = model  # compile=off: the model runs eagerly")

    if exp.task == "training":
        add("")
        if exp.compile_optimizer:
            add("# The optimizer step compiled into a few fused kernels. A tensor learning rate keeps LR changes from")
            add("# recompiling; eager foreach AdamW accepts one only when capturable.")
            capturable = ", capturable=True" if device == "cuda" else ""
            add(f"optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor({LR}, device=device){capturable})")
            add("")
            add("@torch.compile(fullgraph=False)  # <--")
            add("def optimizer_step():")
            add("    optimizer.step()")
        else:
            add(f"optimizer = torch.optim.AdamW(model.parameters(), lr={LR})")
            add("optimizer_step = optimizer.step")

    add("")
    autocast = f"torch.autocast(device, dtype={TORCH_DTYPES[precision.autocast]})" if precision.autocast else None
    cuda_graphs = device == "cuda" and exp.compiles and (exp.backend == "cudagraphs" or (
        exp.backend == "inductor" and exp.mode in ("reduce-overhead", "max-autotune")))
    if exp.task == "inference":
        add("@torch.no_grad()")
    add("def step(batch):")
    if cuda_graphs:
        add("    torch.compiler.cudagraph_mark_step_begin()  # <-- CUDA graphs reuse output memory: a new step begins")
    inner = "    "
    if autocast:
        add(f"    with {autocast}:  # <-- precision={exp.precision}")
        inner = "        "
    if exp.task == "inference":
        add(f"{inner}return compiled(*batch.inputs)")
    else:
        add(f"{inner}out = compiled(*batch.inputs)")
        add(f"{inner}loss = entry.loss(out, batch)")
        add("    loss.backward()")
        add("    optimizer_step()")
        add("    optimizer.zero_grad(set_to_none=True)")
        add("    return out")

    add("")
    if exp.shape_remedy == "mark_dynamic":
        add("# shape_remedy=mark_dynamic: the varying dimension is symbolic from the first compile")
        for i, d in dims:
            tensor = f"batches[0].inputs[{i}]" if i < inputs else "batches[0].target"
            add(f"torch._dynamo.mark_dynamic({tensor}, {d})  # <--")
    add("out = step(batches[0])  # the first call compiles")
    if buckets:
        add("for bucket in buckets:  # then every other bucket, before the real inputs arrive, as in the run")
        add("    step(batches[padded.index(bucket)])")
    if sizes:
        add("for batch in batches[1:]:  # each new size may recompile; the run's page says which did")
        add("    out = step(batch)")
    lines.extend(_timing_lines(device))
    return "\n".join(lines) + "\n"


# How long the snippet times each variant per round, and at most in all: short, as a pasted program should be.
SNIPPET_ROUND_S = 0.2
SNIPPET_TIMED_S = 3.0


def _timing_lines(device: str) -> list[str]:
    """The snippet's last section: eager against compiled as the lab times them (tcore.worker.run.time_blocks),
    with the paired speedup and its order-statistics interval (tcore.paired), printed."""
    sync = "torch.cuda.synchronize()" if device == "cuda" else "pass  # the CPU runs each op before returning"
    return ["", "",
            "# --- The effect: eager against compiled, timed as the lab times them ---------------------------------",
            "# Synchronized, warmed up, then paired rounds: an eager block and a compiled block back to back, the",
            "# order alternating, so the machine's drift hits both alike; eager is the same callables run with",
            "# torch.compiler.set_stance('force_eager'). The speedup is the median of the rounds' ratios, with a",
            "# distribution-free interval from their order statistics; rounds are added until it is within ±3% or",
            f"# {SNIPPET_TIMED_S:g} s per variant are spent.",
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
            "per_step = {eager: min(seconds_per_step(len(batches), eager) for _ in range(3)) for eager in (True, False)}",
            f"steps = {{eager: max(1, round({SNIPPET_ROUND_S} / s)) for eager, s in per_step.items()}}  # ~{SNIPPET_ROUND_S} s blocks",
            "rounds, spent = [], 0.0  # each round: {eager: seconds per step}",
            "while True:",
            "    order = (True, False) if len(rounds) % 2 == 0 else (False, True)",
            "    rounds.append({eager: seconds_per_step(steps[eager], eager) for eager in order})",
            "    spent += max(rounds[-1][e] * steps[e] for e in order)",
            "    speedup, low, high = median_and_interval([r[True] / r[False] for r in rounds])",
            f"    if len(rounds) >= 6 and (max(high / speedup - 1, 1 - low / speedup) <= 0.03 or spent >= {SNIPPET_TIMED_S}):",
            "        break",
            "eager_ms, compiled_ms = (sorted(r[e] for r in rounds)[len(rounds) // 2] * 1e3 for e in (True, False))",
            "print(f'speedup {speedup:.2f}x (interval {low:.2f}-{high:.2f}x, {len(rounds)} paired rounds; eager '",
            "      f'{eager_ms:.2f} ms/step, compiled {compiled_ms:.2f} ms/step, medians of the rounds)')"]


def _schedule(exp: Experiment,
              entry: sample_models.SampleModel) -> tuple[list[int], list[int], list[tuple[int, int]], int]:
    """The run's sizes, buckets, varying (tensor, dim) pairs (the target counts as the tensor after the
    inputs) and how many inputs a batch has; empty without a shape schedule."""
    if not exp.shape_count:
        return [], [], [], 0
    schedule = schedules.make_schedule(exp, entry)
    inputs = len(schedules.make_batch(exp, entry, 2, "meta", torch.Generator("cpu")).inputs)
    return schedule.sizes, schedule.buckets, schedules.varying_dims(exp, entry), inputs
