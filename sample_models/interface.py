"""What every model entry gives, a built-in (sample_models.SampleModel) or a real model of a library
(sample_models.sources.common.RealModel), and what both lean on: the batch a model is fed, the devices on which
building and running allocate nothing, and the counts of its parameters and FLOPs. The sources import this module,
never their parent package; sample_models/__init__.py, the registry, imports both.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Protocol

import torch
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode


@dataclass(frozen=True)
class Batch:
    inputs: tuple[torch.Tensor, ...]  # positional args: output = model(*batch.inputs)
    target: torch.Tensor              # what loss() compares the output with


class Entry(Protocol):
    """The methods the worker, the estimates and the snippet call on a model, whatever its source."""

    name: str

    def abstract(self): ...
    def build(self, preset: str, *, device="cpu", dtype=torch.float32, graph_break=False) -> nn.Module: ...
    def make_batch(self, preset: str, batch_size: int, *, device="cpu", seq_len: int | None = None,
                   generator: torch.Generator | None = None) -> Batch: ...
    def loss(self, output, batch: Batch) -> torch.Tensor: ...


@contextmanager
def on(device: str) -> Iterator[str]:
    """Build and run on `device` as it is ("meta": nothing is allocated); yields it."""
    yield device


@contextmanager
def symbolic_sizes() -> Iterator[str]:
    """The fallback where a model's own abstract() cannot run its forward: fake tensors on "meta" with a shape
    environment, as Dynamo traces, so an op whose output size depends on values (nonzero, unique, a boolean mask,
    .item()) gets a symbolic size instead of failing. Build the model on "meta" before entering: its weights are taken
    as they are (allow_non_fake_inputs). Yields the device to make batches on. A Python branch on a value still
    fails here (GuardOnDataDependentSymNode)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True):
        yield "meta"


# The counts, kept per model name and preset: an entry holds dicts, so it is not hashable itself.
_PARAMS: dict[tuple[str, str], int] = {}
_FLOPS: dict[tuple[str, str, bool], int] = {}


def clear_counts() -> None:
    """Forget the kept counts (a test that changes how they are counted)."""
    _PARAMS.clear()
    _FLOPS.clear()


def param_count(entry: Entry, preset: str) -> int:
    key = (entry.name, preset)
    if key not in _PARAMS:
        _PARAMS[key] = sum(p.numel() for p in entry.build(preset, device="meta").parameters())
    return _PARAMS[key]


# Where no abstract run can count a model's FLOPs, a model up to this size is run for real at batch 1 on the CPU: a
# second or two of the worker's time, and at most 0.4 GB of float32 weights.
FLOPS_ON_CPU_MAX_PARAMS = 100_000_000


def flops_per_sample(entry: Entry, preset: str, training: bool = False) -> int:
    """FLOPs of one sample, counted without memory on the model's abstract device; where its forward cannot run there
    (an op without a meta kernel, a size that depends on values), on fake tensors with symbolic sizes; where those
    cannot give a number either (a branch on a value, FLOPs that depend on values), by a real run at batch 1 on the
    CPU for a model of at most FLOPS_ON_CPU_MAX_PARAMS parameters. Raises NotImplementedError, saying why, where none
    can count them."""
    key = (entry.name, preset, training)
    if key not in _FLOPS:
        _FLOPS[key] = _count_flops(entry, preset, training)
    return _FLOPS[key]


def _count_flops(entry: Entry, preset: str, training: bool) -> int:
    failed = []
    for way in ("abstract", "symbolic", "cpu"):
        try:
            if way == "cpu" and (params := param_count(entry, preset)) > FLOPS_ON_CPU_MAX_PARAMS:
                failed.append(f"{params / 1e6:.0f} M parameters are too many to count on the CPU")
                break
            return _counted(entry, preset, training, way)
        except Exception as e:  # noqa: BLE001 (the next way counts them; all failing is said below)
            text = str(e).strip()
            failed.append(f"{way}: {type(e).__name__}" + (f": {text.splitlines()[0][:200]}" if text else ""))
    raise NotImplementedError(f"the FLOPs of {entry.name} could not be counted ({'; '.join(failed)})")


def _counted(entry: Entry, preset: str, training: bool, way: str) -> int:
    if way == "abstract":
        with entry.abstract() as device:
            return _flops_of(entry, entry.build(preset, device=device), preset, training, device)
    if way == "symbolic":
        model = entry.build(preset, device="meta")
        with symbolic_sizes() as device:
            return _flops_of(entry, model, preset, training, device)
    return _flops_of(entry, entry.build(preset, device="cpu"), preset, training, "cpu")


def _flops_of(entry: Entry, model: nn.Module, preset: str, training: bool, device) -> int:
    # eval(): BatchNorm refuses a batch of one in training mode; the counted matmuls and convs are the same
    model.eval()
    batch = entry.make_batch(preset, 1, device=device)
    with FlopCounterMode(display=False) as counter:
        output = model(*batch.inputs)
        if training:
            entry.loss(output, batch).backward()
    return int(counter.get_total_flops())  # int(): a total that depends on values cannot be one, and says so
