"""What a run times: the model and its batches on the device, and one step of it, eager or compiled.

The same step function serves both variants: the compiled variant calls it on the compiled model (or
the model whose blocks were compiled in place), and the eager variant runs under `eager()`, which
tells Dynamo to stand aside so that in-place compiles (regional, optimizer) are off for it.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch.profiler import record_function
from torch.utils._pytree import tree_leaves, tree_map

import sample_models
from tcore.experiment import schedule as schedules
from tcore.experiment.spec import PRECISIONS, Experiment
from tcore.figures.breakdown import OPTIMIZER_MARK
from tcore.worker import shapes
from tcore.worker.compile import make_optimizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

Step = Callable[[sample_models.Batch], Any]


class CompilePhaseError(RuntimeError):
    """An exception raised while compiling or running compiled code for the first time."""


@contextmanager
def compile_errors() -> Iterator[None]:
    """Re-raise anything thrown while compiling or first running compiled code as CompilePhaseError."""
    try:
        yield
    except (torch.OutOfMemoryError, MemoryError):
        raise
    except Exception as e:
        raise CompilePhaseError(f"{type(e).__name__}: {e}") from e


def eager():
    """Run compiled callables eagerly (as the Inductor harness does for its eager baseline)."""
    return torch.compiler.set_stance("force_eager")


@dataclass
class Workload:
    """The model on the device and the batches each variant is fed, one per step of the shape schedule."""

    model: torch.nn.Module
    entry: sample_models.SampleModel
    batches: list[sample_models.Batch]           # what eager sees: each true size
    compiled_batches: list[sample_models.Batch]  # what compiled sees: with buckets, padded up to a bucket
    schedule: schedules.Schedule | None
    dims: list[tuple[int, int]]                  # the dimensions that vary with the schedule
    optimizer: torch.optim.Optimizer | None


def build(exp: Experiment, device: str) -> Workload:
    entry = sample_models.get(exp.model)
    torch.manual_seed(exp.seed)
    model = entry.build(exp.preset, device=device, graph_break=exp.graph_break)
    generator = torch.Generator(device).manual_seed(exp.seed)
    schedule = schedules.make_schedule(exp, entry) if exp.shape_count else None
    dims: list[tuple[int, int]] = []
    if schedule:
        dims = schedules.varying_dims(exp, entry)
        batches = [schedules.make_batch(exp, entry, size, device, generator) for size in schedule.sizes]
        compiled_batches = [shapes.pad(b, dims, schedule.padded(size)) for b, size in zip(batches, schedule.sizes)]
    else:
        batches = [entry.make_batch(exp.preset, exp.batch_size, device=device, generator=generator)]
        compiled_batches = list(batches)
    weights = DTYPES[PRECISIONS[exp.precision].weights]
    if weights != torch.float32:  # bf16 or fp16 weights: the model and its inputs cast, as for inference
        model = model.to(weights)
        batches = [_cast(b, weights) for b in batches]
        compiled_batches = [_cast(b, weights) for b in compiled_batches]
    if exp.channels_last:
        model = model.to(memory_format=torch.channels_last)
        batches = [_channels_last(b) for b in batches]
        compiled_batches = [_channels_last(b) for b in compiled_batches]
    if exp.skip_full_mask:  # last: a bucket's padding is part of its mask, which then stays
        from sample_models.sources import hf_masks

        hf_masks.install()
        position = entry.source.mask_position(entry.ref)
        batches = [_without_full_mask(b, position) for b in batches]
        compiled_batches = [_without_full_mask(b, position) for b in compiled_batches]
    model.train(exp.task == "training")
    optimizer = make_optimizer(model, exp, device) if exp.task == "training" else None
    return Workload(model, entry, batches, compiled_batches, schedule, dims, optimizer)


def step_fn(model: Callable, w: Workload, exp: Experiment, device: str, opt_step: Callable[[], None] | None) -> Step:
    """One step on a batch: a forward (inference) or forward, backward and optimizer step (training).

    Returns the model output, detached, so the correctness check can compare variants.
    """
    compute = PRECISIONS[exp.precision].autocast
    autocast = torch.autocast(device_type=device, dtype=DTYPES[compute]) if compute else nullcontext()
    mark_step = torch.compiler.cudagraph_mark_step_begin if device == "cuda" else (lambda: None)

    if exp.task == "inference":
        @torch.no_grad()
        def step(batch):
            mark_step()  # CUDA graphs (reduce-overhead) may reuse output memory; say a new step begins
            with autocast:
                return model(*batch.inputs)
        return step

    def train_step(batch):
        mark_step()
        with autocast:
            out = model(*batch.inputs)
            loss = w.entry.loss(out, batch)
        loss.backward()
        with record_function(OPTIMIZER_MARK):  # lets the time breakdown tell the optimizer's kernels apart
            opt_step()
        w.optimizer.zero_grad(set_to_none=True)
        return tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, out)  # a library's output class too
    return train_step


def compare(compiled_out, eager_out, precision: str) -> dict[str, Any]:
    """How far the compiled output is from eager's, against the precision's tolerance."""
    tolerance = PRECISIONS[precision].tolerance
    worst_abs, scale, finite = 0.0, 0.0, True
    for c, e in zip(tree_leaves(compiled_out), tree_leaves(eager_out)):
        if not isinstance(c, torch.Tensor):
            continue
        c, e = c.float(), e.float()
        finite &= bool(torch.isfinite(c).all())
        worst_abs = max(worst_abs, (c - e).abs().max().item())
        scale = max(scale, e.abs().max().item())
    rel = worst_abs / max(scale, 1e-12)
    return {"correctness_max_abs_diff": worst_abs, "correctness_rel_diff": rel,
            "correctness_tolerance": tolerance, "correctness_ok": finite and rel <= tolerance}


def clone(out) -> list[torch.Tensor]:
    return [t.detach().clone() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _cast(batch: sample_models.Batch, dtype: torch.dtype) -> sample_models.Batch:
    """The batch with its floating-point tensors in `dtype` (token ids and class labels stay integers)."""
    def cast(t):
        return t.to(dtype) if t.is_floating_point() else t
    return sample_models.Batch(tuple(cast(t) for t in batch.inputs), cast(batch.target))


def _without_full_mask(batch: sample_models.Batch, position: int | None) -> sample_models.Batch:
    from sample_models.sources import hf_masks

    return sample_models.Batch(hf_masks.without_full_mask(batch.inputs, position), batch.target)


def _channels_last(batch: sample_models.Batch) -> sample_models.Batch:  # the images come first
    images, *rest = batch.inputs
    return sample_models.Batch((images.contiguous(memory_format=torch.channels_last), *rest), batch.target)


def snapshot(model) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Copies of the weights and buffers, restored in place so compiled code keeps its tensors."""
    tensors = list(model.state_dict(keep_vars=True).values())
    return tensors, [t.detach().clone() for t in tensors]


@torch.no_grad()
def restore(saved) -> None:
    for tensor, copy in zip(*saved):
        tensor.copy_(copy)
