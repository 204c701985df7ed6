"""What every source shares: never the network, RealModel (a SOURCE:NAME with a SampleModel's interface),
the Source adapter it wraps, building on "meta", quiet dropout and finding the repeated blocks."""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import torch
import torch.nn as nn

from sample_models import interface
from sample_models.interface import Batch, on

LAB = Path(__file__).resolve().parents[2]  # the lab's folder, where workers run
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def go_offline() -> None:
    """Forbid hub access in this process: huggingface_hub reads these when it is first imported."""
    for key, value in OFFLINE.items():
        os.environ[key] = value


go_offline()  # before anything imports huggingface_hub (timm, transformers and diffusers all do)


class NeedsDownload(ValueError):
    """A model whose construction reached for the network, which the lab never uses (a ValueError: the name, as
    given, cannot be built here, and the spec says so before anything runs)."""


@contextmanager
def offline_build(name: str) -> Iterator[None]:
    """Building `name`: a file or download it wanted (OSError, as transformers and huggingface_hub raise) says why."""
    try:
        yield
    except OSError as e:
        raise NeedsDownload(f"{name} wanted a file or a download to be built ({type(e).__name__}: {e}). The lab never "
                            "downloads (HF_HUB_OFFLINE=1, random weights): build it from a config, or put the "
                            "file on this machine") from e


class UnknownModel(ValueError):
    """A name no source knows; the message says how to find the right one."""


class CannotBuild(ValueError):
    """A model its library raised on while the lab built it to read its sizes (a ValueError: the name, as given,
    cannot run here, and the spec says so, with the library's words, before anything runs)."""


@dataclass(frozen=True)
class RealModel:
    """One model of one source, with the interface of a built-in SampleModel (sample_models.SampleModel)."""

    name: str                         # "timm:resnet18"
    title: str
    description: str
    presets: dict[str, dict]          # preset -> the adapter's sizes (config overrides, image size, sequence)
    default_preset: dict[str, str]    # device type -> preset
    default_batch: dict[str, int]     # device type -> batch size
    varying_dim: str                  # what seq_len varies, in words; "" when the batch size varies
    seq_field: str                    # the preset key holding the default seq_len; "" without one
    supports_channels_last: bool
    source: "Source" = field(repr=False)
    ref: str = ""                     # the name within its source ("resnet18")
    repeated_call: str = ""           # a method of the model that compiles its own repeated blocks

    builtin = False

    def build(self, preset: str, *, device="cpu", dtype=torch.float32, graph_break=False) -> nn.Module:
        if graph_break:
            raise ValueError(f"{self.name} is a real model: it shows its own graph breaks; the deliberate one is "
                             "a built-in model's teaching switch")
        with offline_build(self.name):
            model = _build_on(device, lambda: self.source.build(self.ref, self.sizes(preset)))
        quiet_dropout(model)
        return model if dtype == torch.float32 else model.to(dtype)  # fake tensors (abstract()) cannot be swapped

    def make_batch(self, preset: str, batch_size: int, *, device="cpu", seq_len: int | None = None,
                   generator: torch.Generator | None = None):
        sizes = self.sizes(preset)
        if seq_len is not None:
            sizes = {**sizes, self.seq_field: seq_len}
        inputs, target = self.source.make_batch(self.ref, sizes, batch_size, device, generator)
        return Batch(tuple(inputs), target)

    def loss(self, output, batch) -> torch.Tensor:
        return self.source.loss(self.ref, output, batch.target)

    def sizes(self, preset: str) -> dict:
        if preset not in self.presets:
            raise ValueError(f"unknown preset '{preset}' for {self.name}; choose one of: {', '.join(self.presets)}")
        return self.presets[preset]

    def default_seq_len(self, preset: str) -> int | None:
        return self.sizes(preset)[self.seq_field] if self.seq_field else None

    def repeated_blocks(self, model: nn.Module) -> list[nn.Module]:
        names = self.source.block_names(model)
        return [m for m in model.modules() if type(m).__name__ in names]

    @property
    def repeats_blocks(self) -> bool:
        """Whether regional compilation has blocks to compile, asked without building the model: a library model's
        blocks are declared or found by repetition, and every model these sources build repeats one; a regional run
        says which blocks it compiled (or that it found none)."""
        return True

    def abstract(self):
        """A context in which building and running allocates nothing; yields the device to build on."""
        return self.source.abstract()

    def build_code(self, preset: str) -> list[str]:
        """Lines that build `model` on `device` the way build() does (copy-as-code)."""
        return self.source.build_code(self.ref, self.sizes(preset))

    def param_count(self, preset: str) -> int:
        return interface.param_count(self, preset)

    def flops_per_sample(self, preset: str, *, training: bool = False) -> int:
        return interface.flops_per_sample(self, preset, training)


class Source:
    """An adapter: how one library names, builds and feeds its models. Subclasses fill these in."""

    key = ""
    title = ""

    def names(self) -> list[str]:
        raise NotImplementedError

    def entry(self, ref: str) -> RealModel:
        raise NotImplementedError

    def build(self, ref: str, sizes: dict) -> nn.Module:
        raise NotImplementedError

    def make_batch(self, ref: str, sizes: dict, batch_size: int, device, generator):
        raise NotImplementedError

    def loss(self, ref: str, output, target) -> torch.Tensor:
        raise NotImplementedError

    def block_names(self, model: nn.Module) -> set[str]:
        return repeated_classes(model)

    def abstract(self):
        return on("meta")

    def build_code(self, ref: str, sizes: dict) -> list[str]:
        raise NotImplementedError


def _build_on(device, build: Callable[[], nn.Module]) -> nn.Module:
    """build() with its tensors on `device`. On "meta" a constructor that reads a tensor it made (RegNet computes
    its widths with .tolist(); timm before 1.0.30 with torch.unique, which has no meta kernel) cannot run; it then
    runs on the CPU with each weight and buffer moved to "meta" as it is registered, as accelerate's
    init_empty_weights does: one layer's memory at a time. Whatever that CPU build raises is the model's own error."""
    try:
        with torch.device(device):
            return build()
    except Exception:  # noqa: BLE001 (no meta kernel, no data to copy out, .item(), a check of the device: retried)
        if str(device) != "meta":
            raise
    with _registered_on_meta():
        return build()


@contextmanager
def _registered_on_meta() -> Iterator[None]:
    register_parameter, register_buffer = nn.Module.register_parameter, nn.Module.register_buffer

    def parameter(module, name, param):
        register_parameter(module, name, param)
        if param is not None:
            module._parameters[name] = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)

    def buffer(module, name, tensor, persistent=True):
        register_buffer(module, name, tensor if tensor is None else tensor.to("meta"), persistent)

    nn.Module.register_parameter, nn.Module.register_buffer = parameter, buffer
    try:
        yield
    finally:
        nn.Module.register_parameter, nn.Module.register_buffer = register_parameter, register_buffer


QUIET = 1e-30  # a dropout probability that keeps the op (and its cost) but drops nothing


def quiet_dropout(model: nn.Module) -> None:
    """Dropout and stochastic depth at probability 1e-30, as PyTorch's dynamo harness sets them for training: the
    random ops stay in the graph, but eager and compiled (whose random numbers differ) give the same output."""
    for m in model.modules():
        if (isinstance(m, nn.modules.dropout._DropoutNd) or "Drop" in type(m).__name__
                or "Stochastic" in type(m).__name__):
            for attr in ("p", "drop_prob"):
                if isinstance(getattr(m, attr, None), float) and getattr(m, attr) > 0:
                    setattr(m, attr, QUIET)


# Generic layers (a conv-norm-activation, a squeeze-excite) are parts of blocks, not blocks.
LAYER_LIBRARIES = ("torch.", "torchvision.ops", "timm.layers")


def repeated_classes(model: nn.Module, *, share: float = 0.1) -> set[str]:
    """The class names of a model's repeated blocks, when it declares none: the submodule classes (generic layers
    aside) that repeat and whose copies hold at least `share` of the weights, finest first.

    A stage that holds several blocks gives way to its blocks (timm's ConvNeXtStage to ConvNeXtBlock: more copies,
    so more sharing); a layer inside a block as often as the block itself is compiled as part of it (ViT's
    Attention inside Block); a small layer that happens to appear twice (a stem's and a head's norm) is no block.
    """
    copies: dict[type, int] = {}
    params: dict[type, int] = {}
    inside: dict[type, set[type]] = {}  # class -> the classes its copies sit inside

    def walk(module: nn.Module, ancestors: tuple[type, ...]) -> None:
        for child in module.children():
            cls = type(child)
            if cls not in ancestors:  # a class nested in itself counts once, at its outermost copy
                copies[cls] = copies.get(cls, 0) + 1
                params[cls] = params.get(cls, 0) + sum(p.numel() for p in child.parameters())
            inside.setdefault(cls, set()).update(ancestors)
            walk(child, ancestors + (cls,))

    walk(model, ())
    total = sum(p.numel() for p in model.parameters()) or 1
    found = {cls for cls, n in copies.items()
             if n >= 2 and not cls.__module__.startswith(LAYER_LIBRARIES) and params[cls] >= share * total}
    # a container of several copies of a finer block gives way to it (a stage to its blocks)
    found = {a for a in found if not any(copies[b] >= 2 * copies[a] and a in inside[b] for b in found)}
    # a part of a block, repeated as often as the block, is compiled inside it
    found = {b for b in found if not (inside[b] & found)}
    return {cls.__name__ for cls in found}


def _count(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n / 1e3:.0f} K"
