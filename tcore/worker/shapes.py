"""The remedies for recompilation over a shape schedule (tcore.experiment.schedule): mark the varying dimension dynamic
before the first call, or pad every input up to one of a few bucket sizes compiled in advance."""
from __future__ import annotations

import torch

import sample_models


def pad(batch: sample_models.Batch, dims: list[tuple[int, int]], size: int) -> sample_models.Batch:
    """Pad every varying dimension with zeros up to `size` (zero tokens, zero pixels, label 0).

    Every varying tensor comes out contiguous, padded or not: a caption's input tokens are a slice of a
    longer tensor (the caption less its last token), and one whose length is already a bucket's would
    keep that slice's stride. Dynamo guards on strides as well as sizes, so that batch would recompile
    a bucket it had already compiled ("stride mismatch at index 0. expected 5, actual 6").
    """
    tensors = [*batch.inputs, batch.target]
    for i, d in dims:
        t = tensors[i]
        missing = size - t.shape[d]
        if missing > 0:
            filler = torch.zeros((*t.shape[:d], missing, *t.shape[d + 1:]), dtype=t.dtype, device=t.device)
            t = torch.cat([t, filler], dim=d)
        tensors[i] = t.contiguous()
    return sample_models.Batch(tuple(tensors[:-1]), tensors[-1])


def mark_dynamic(batch: sample_models.Batch, dims: list[tuple[int, int]]) -> None:
    tensors = [*batch.inputs, batch.target]
    for i, d in dims:
        if tensors[i] is not None:  # an all-true attention mask skip_full_mask dropped
            torch._dynamo.mark_dynamic(tensors[i], d)
