"""A shape schedule: which sizes of the varying dimension a run feeds, in what order, padded to which buckets,
and which tensor dimensions follow that size.

It describes the experiment, so both sides read it: the worker builds its batches from it
(tcore.worker.shapes), and the copy-as-code snippet (tcore.export.snippet) writes the same sizes and buckets.
The varying dimension is the model's sequence (caption length, image tokens) or, for models without
one, the batch size.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from tcore.experiment.spec import Experiment

if TYPE_CHECKING:  # the model registry is the caller's: the worker and the snippet pass its entry in
    import sample_models


@dataclass(frozen=True)
class Schedule:
    sizes: list[int]          # the varying size fed at each step, in order
    dim_name: str             # what varies, in words
    buckets: list[int]        # padded sizes, when the remedy is buckets; else empty

    def padded(self, size: int) -> int:
        return next(b for b in self.buckets if b >= size) if self.buckets else size


def make_schedule(exp: Experiment, entry: sample_models.SampleModel) -> Schedule:
    """`exp.shape_count` distinct sizes spread up to the preset's length (or twice the batch size)."""
    n = exp.shape_count
    top = entry.default_seq_len(exp.preset) or 2 * exp.batch_size
    sizes = sorted({max(1, round(top * (i + 1) / n)) for i in range(n)})
    if len(sizes) < n:  # too few distinct values below `top`: count up instead
        sizes = list(range(1, n + 1)) if entry.seq_field else [exp.batch_size + i for i in range(n)]
    if entry.seq_field and sizes[-1] > top:
        raise ValueError(f"{n} distinct {entry.varying_dim} do not fit in this preset's maximum of {top}")
    if exp.shape_order == "shuffled":
        random.Random(exp.seed).shuffle(sizes)
    buckets = []
    if exp.shape_remedy == "buckets":
        ordered = sorted(sizes)
        # Each bucket is the largest size of an equal share of the sizes, so padding stays modest.
        buckets = sorted({ordered[min(len(ordered) - 1, round(len(ordered) * (i + 1) / exp.buckets) - 1)]
                          for i in range(exp.buckets)})
    return Schedule(sizes, entry.varying_dim or "batch size", buckets)


def make_batch(exp: Experiment, entry: sample_models.SampleModel, size: int, device: str,
               generator: torch.Generator) -> sample_models.Batch:
    if entry.seq_field:
        return entry.make_batch(exp.preset, exp.batch_size, device=device, seq_len=size, generator=generator)
    return entry.make_batch(exp.preset, size, device=device, generator=generator)


def varying_dims(exp: Experiment, entry: sample_models.SampleModel) -> list[tuple[int, int]]:
    """(tensor index, dim) of every tensor dimension that follows the varying size; the target is last.

    Found by building two batches of different sizes on the meta device and comparing shapes; on the CPU (two small
    batches) where a model's make_batch cannot run on meta (it reads a value it made).
    """
    gen = torch.Generator("cpu")
    try:
        a, b = (make_batch(exp, entry, size, "meta", gen) for size in (2, 3))
    except RuntimeError:  # NotImplementedError too: no meta kernel, .item() or .tolist() on meta
        a, b = (make_batch(exp, entry, size, "cpu", gen.manual_seed(exp.seed)) for size in (2, 3))
    dims = []
    for i, (x, y) in enumerate(zip((*a.inputs, a.target), (*b.inputs, b.target))):
        dims += [(i, d) for d in range(x.dim()) if x.shape[d] != y.shape[d]]
    return dims
