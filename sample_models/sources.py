"""Real models by name, `SOURCE:NAME`, each source a small adapter giving what a built-in SampleModel gives.

Plan. A built-in keeps its plain name (`captioner`, `resnet50`, `flux`); any other name is `SOURCE:NAME`:

    torchvision:NAME  torchvision.models.get_model(NAME, weights=None): the classifiers of list_models()
    timm:NAME         timm.create_model(NAME, pretrained=False); the input size from its own data config
    hf:MODEL_TYPE     transformers AutoConfig.for_model(MODEL_TYPE, **sizes) -> AutoModelFor{CausalLM,MaskedLM}
                      .from_config: token ids in, use_cache=False (as PyTorch's dynamo harness feeds them)
    diffusers:flux    FluxTransformer2DModel(**config) with Flux's real inputs (latents, text states, pooled
                      projections, timestep, ids, guidance)
    file:PATH.py      a file of your own (the interface is FILE_INTERFACE below; examples/my_model.py)

Each adapter (a `Source`) answers the same questions: which names exist (the catalog the Run page searches and
`python -m tcore models` lists), the presets (`tiny`, minutes-free on a CPU, then the published size, whose
parameter count the title states), default preset and batch per device, how to build the model on a device,
a batch and its loss, the varying dimension for dynamic shapes (sequence length for text, image tokens for
Flux, the batch size for image classifiers), whether it is convolutional (channels_last), the repeated block
classes for regional compilation (diffusers' `_repeated_blocks`, compiled with the model's own
`compile_repeated_blocks`; transformers' `_no_split_modules`; else the outermost submodule classes that repeat),
and the lines that build it for copy-as-code. A `RealModel` wraps one adapter and one name with the methods
the worker, the estimates and the snippet already call on a SampleModel, so nothing downstream branches on
the source.

Never the network: weights are random (weights=None, pretrained=False, from_config), and HF_HUB_OFFLINE /
TRANSFORMERS_OFFLINE / HF_DATASETS_OFFLINE are set before transformers or diffusers is imported, so a
construction that reaches for the hub fails; `NeedsDownload` then says why.

Memory-free builds (the memory estimate, FLOPs): torchvision, timm and diffusers build and run on the "meta"
device; transformers' decoders look at their position ids (`.item()`) unless the tensors are fake, so they run
under FakeTensorMode (`abstract()`).
"""
from __future__ import annotations

import functools
import importlib.util
import os
import sys
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

LAB = Path(__file__).resolve().parent.parent  # the lab's folder, where workers run
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
        from sample_models import Batch

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
        from sample_models import _param_count
        return _param_count(self.name, preset)

    def flops_per_sample(self, preset: str, *, training: bool = False) -> int:
        from sample_models import _flops_per_sample
        return _flops_per_sample(self.name, preset, training)


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
        return _on("meta")

    def build_code(self, ref: str, sizes: dict) -> list[str]:
        raise NotImplementedError


def _build_on(device, build: Callable[[], nn.Module]) -> nn.Module:
    """build() with its tensors on `device`. On "meta" a constructor that reads a tensor it made (RegNet computes
    its widths with .tolist()) cannot run; it then runs on the CPU with each weight and buffer moved to "meta"
    as it is registered, as accelerate's init_empty_weights does: one layer's memory at a time."""
    try:
        with torch.device(device):
            return build()
    except NotImplementedError as e:
        if str(device) != "meta" or "meta tensor" not in str(e):
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
        if isinstance(m, nn.modules.dropout._DropoutNd) or "Drop" in type(m).__name__ or "Stochastic" in type(m).__name__:
            for attr in ("p", "drop_prob"):
                if isinstance(getattr(m, attr, None), float) and getattr(m, attr) > 0:
                    setattr(m, attr, QUIET)


@contextmanager
def _on(device: str) -> Iterator[str]:
    yield device


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


def _classify_loss(output, target) -> torch.Tensor:
    return F.cross_entropy(output.float(), target)  # float(): under autocast the logits may be bf16


def _image_batch(sizes: dict, batch_size: int, device, generator):
    side = sizes["image_size"]
    images = torch.randn(batch_size, 3, side, side, device=device, generator=generator)
    labels = torch.randint(0, sizes["num_classes"], (batch_size,), device=device, generator=generator)
    return (images,), labels


class _Vision(Source):
    """Image classifiers: a `tiny` preset at a small resolution where the architecture takes one (same weights,
    so the parameter count is the real one), and `full` at the model's own resolution."""

    small_side = 64

    def _meta_model(self, ref: str) -> nn.Module:
        return _build_on("meta", lambda: self.build(ref, {}))

    def _vision_entry(self, ref: str, native: int, num_classes: int, model: nn.Module, fixed: bool,
                      where: str) -> RealModel:
        params = sum(p.numel() for p in model.parameters())
        # a real convolution, not a ViT's patchify (kernel = stride)
        convolutional = any(isinstance(m, nn.Conv2d) and m.stride != m.kernel_size for m in model.modules())
        small = native if fixed else min(native, self.small_side)
        presets = {"tiny": dict(image_size=small, num_classes=num_classes),
                   "full": dict(image_size=native, num_classes=num_classes)}
        blocks = sorted(repeated_classes(model))
        size_note = (f"It takes only its native {native} px, so the tiny preset is GPU-sized too."
                     if fixed else f"tiny runs it at {small} px on the CPU, full at its own {native} px.")
        return RealModel(
            name=f"{self.key}:{ref}", ref=ref, source=self,
            title=f"{ref} ({self.title}, {_count(params)} parameters)",
            description=(f"{where}, random weights. {_count(params)} parameters, {native} px input, "
                         f"{num_classes} classes. {size_note} Repeated blocks: {', '.join(blocks) or 'none found'}."),
            presets=presets, default_preset={"cpu": "tiny", "cuda": "full"},
            default_batch={"cpu": 2, "cuda": 64}, varying_dim="", seq_field="",
            supports_channels_last=convolutional)

    def _takes_small(self, model: nn.Module, num_classes: int) -> bool:
        """Whether a meta forward at the small resolution goes through (ViTs check their input size)."""
        try:
            with torch.device("meta"), torch.no_grad():
                model.eval()(torch.empty(1, 3, self.small_side, self.small_side))
        except (AssertionError, RuntimeError, ValueError):  # the architecture refused the size: use its own
            return False
        return True

    def make_batch(self, ref, sizes, batch_size, device, generator):
        return _image_batch(sizes, batch_size, device, generator)

    def loss(self, ref, output, target):
        return _classify_loss(output, target)


class TorchvisionSource(_Vision):
    key, title = "torchvision", "torchvision"

    def names(self) -> list[str]:
        import torchvision
        return sorted(torchvision.models.list_models(module=torchvision.models))

    def entry(self, ref: str) -> RealModel:
        import torchvision
        if ref not in self.names():
            raise UnknownModel(f"torchvision has no image classifier named {ref!r}; list them with "
                               f"`python -m tcore models torchvision {ref[:4]}`")
        native = 224
        crop = torchvision.models.get_model_weights(ref).DEFAULT.transforms.keywords.get("crop_size")
        if crop:  # the published weights' evaluation crop: the model's own resolution (metadata, no download)
            native = crop[0] if isinstance(crop, (list, tuple)) else int(crop)
        model = self._meta_model(ref)
        return self._vision_entry(ref, native, 1000, model, not self._takes_small(model, 1000),
                                  f"torchvision.models.get_model({ref!r}, weights=None)")

    def build(self, ref, sizes):
        import torchvision
        return torchvision.models.get_model(ref, weights=None)

    def build_code(self, ref, sizes):
        return ["import torchvision", "",
                "with torch.device(device):  # random weights: nothing is downloaded",
                f"    model = torchvision.models.get_model({ref!r}, weights=None)  # <-- your model"]


class TimmSource(_Vision):
    key, title = "timm", "timm"

    def names(self) -> list[str]:
        import timm
        return timm.list_models()

    def entry(self, ref: str) -> RealModel:
        import timm
        from timm.data import resolve_data_config
        if not timm.is_model(ref):
            raise UnknownModel(f"timm has no model named {ref!r}; search them with "
                               f"`python -m tcore models timm '*{ref[:6]}*'`")
        model = self._meta_model(ref)
        native = resolve_data_config({}, model=model)["input_size"][-1]
        fixed = bool(model.pretrained_cfg.get("fixed_input_size")) or not self._takes_small(model, model.num_classes)
        return self._vision_entry(ref, native, model.num_classes, model, fixed,
                                  f"timm.create_model({ref!r}, pretrained=False)")

    def build(self, ref, sizes):
        import timm
        return timm.create_model(ref, pretrained=False)

    def build_code(self, ref, sizes):
        return ["import timm", "",
                "with torch.device(device):  # pretrained=False: random weights, nothing is downloaded",
                f"    model = timm.create_model({ref!r}, pretrained=False)  # <-- your model"]


# Shrunk sizes for the CPU, set on a config only where its class has the attribute (gpt2's n_embd answers to
# hidden_size through its attribute_map).
HF_TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
               intermediate_size=128, vocab_size=1024, max_position_embeddings=512)
# Published sizes that a config class's defaults do not give. Llama-3.2-1B: 1.24 B parameters (meta-llama's
# config.json: 2048 wide, 16 layers, 32 heads, 8 KV heads, 8192 MLP, 128256 tokens, tied embeddings).
HF_PUBLISHED = {
    "llama": {"3.2-1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                             intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True,
                             rope_theta=500000.0, max_position_embeddings=131072, head_dim=64)},
}


class HfSource(Source):
    """transformers models from their config class: causal LMs and masked-LM encoders, token ids in."""

    key, title = "hf", "Hugging Face transformers"

    def _mappings(self):
        go_offline()
        from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                            MODEL_FOR_MASKED_LM_MAPPING_NAMES)
        return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

    def names(self) -> list[str]:
        causal, masked = self._mappings()
        return sorted(set(causal) | set(masked))

    def kind(self, ref: str) -> str:
        causal, masked = self._mappings()
        if ref in masked:  # an encoder (BERT also has a causal head, BertLMHeadModel, which is not how it is used)
            return "masked"
        if ref in causal:
            return "causal"
        raise UnknownModel(f"transformers has no causal LM or masked-LM encoder of model type {ref!r} (hf:NAME takes "
                           f"a model type, such as llama, gpt2 or bert); list them with `python -m tcore models hf`")

    def config_kwargs(self, ref: str, sizes: dict) -> dict:
        """What AutoConfig.for_model gets beside the model type: the sizes its class has, and consistent ids."""
        go_offline()
        from transformers import AutoConfig
        defaults = AutoConfig.for_model(ref)
        wanted = {k: v for k, v in sizes.items() if k != "seq_len"}
        keep = {k: v for k, v in wanted.items() if hasattr(defaults, k)}
        if "hidden_size" in keep and getattr(defaults, "head_dim", None) and "head_dim" not in keep:
            keep["head_dim"] = keep["hidden_size"] // keep.get("num_attention_heads", defaults.num_attention_heads)
        # dropout probabilities read at call time (attention dropout) too; see quiet_dropout
        keep.update({k: QUIET for k in dir(defaults) if "drop" in k and isinstance(getattr(defaults, k, None), float)
                     and getattr(defaults, k) > 0})
        if "vocab_size" in keep:  # special tokens must lie inside a shrunk vocabulary
            for token, inside in (("pad_token_id", 0), ("bos_token_id", 1), ("eos_token_id", 2)):
                if isinstance(getattr(defaults, token, None), int) and getattr(defaults, token) >= keep["vocab_size"]:
                    keep[token] = inside
        return {**keep, "use_cache": False}

    def config(self, ref: str, sizes: dict):
        from transformers import AutoConfig
        return AutoConfig.for_model(ref, **self.config_kwargs(ref, sizes))

    def entry(self, ref: str) -> RealModel:
        kind = self.kind(ref)
        seq = 1024 if kind == "causal" else 512  # the dynamo harness's lengths: GPT-2-like 1024, BERT-like 512
        published = HF_PUBLISHED.get(ref, {})
        presets = {"tiny": {**HF_TINY, "seq_len": 32}}
        presets.update({name: {**sizes, "seq_len": seq} for name, sizes in published.items()})
        presets["full"] = {"seq_len": seq}  # the config class's defaults, which transformers documents as a model
        with torch.device("meta"):
            counts = {name: sum(p.numel() for p in self.build(ref, sizes).parameters())
                      for name, sizes in presets.items()}
        model_class = self._auto(kind).__name__
        sizes = ", ".join(f"{name} {_count(n)}" for name, n in counts.items())
        return RealModel(
            name=f"hf:{ref}", ref=ref, source=self,
            title=f"{ref} ({'decoder' if kind == 'causal' else 'encoder'}, transformers)",
            description=(f"transformers {model_class}.from_config(AutoConfig.for_model({ref!r}, ...)): random "
                         f"weights, no download. Token ids in, use_cache=False; the varying dimension is the sequence "
                         f"length. Parameters by preset: {sizes}. 'full' is the config class's defaults"
                         + (f"; {', '.join(published)} the published size{'s' if len(published) > 1 else ''}."
                            if published else ".")),
            presets=presets, default_preset={"cpu": "tiny", "cuda": next(iter(published), "full")},
            default_batch={"cpu": 2, "cuda": 8}, varying_dim="sequence length (tokens)", seq_field="seq_len",
            supports_channels_last=False)

    def _auto(self, kind: str):
        go_offline()
        from transformers import AutoModelForCausalLM, AutoModelForMaskedLM
        return AutoModelForCausalLM if kind == "causal" else AutoModelForMaskedLM

    def build(self, ref, sizes):
        return self._auto(self.kind(ref)).from_config(self.config(ref, sizes))

    def make_batch(self, ref, sizes, batch_size, device, generator):
        vocab = sizes.get("vocab_size") or self.config(ref, sizes).vocab_size
        shape = (batch_size, sizes["seq_len"])
        tokens = torch.randint(0, vocab, shape, device=device, generator=generator)
        labels = torch.randint(0, vocab, shape, device=device, generator=generator)
        return (tokens,), labels

    def loss(self, ref, output, target):
        return F.cross_entropy(output.logits.float().flatten(0, 1), target.flatten())

    def block_names(self, model):
        declared = set(getattr(model, "_no_split_modules", None) or ())
        present = {type(m).__name__ for m in model.modules()}
        return (declared & present) or repeated_classes(model)

    def abstract(self):
        # A decoder checks its position ids for packed sequences with .item() unless its tensors are fake
        from torch._subclasses.fake_tensor import FakeTensorMode
        return _fake(FakeTensorMode)

    def build_code(self, ref, sizes):
        cls = self._auto(self.kind(ref)).__name__
        args = "".join(f", {k}={v!r}" for k, v in self.config_kwargs(ref, sizes).items())
        return [f"from transformers import AutoConfig, {cls}", "",
                f"config = AutoConfig.for_model({ref!r}{args})  # no file, no download",
                "with torch.device(device):",
                f"    model = {cls}.from_config(config)  # <-- your model (random weights)"]


@contextmanager
def _fake(mode_cls) -> Iterator[str]:
    with mode_cls():
        yield "cpu"


# Flux.1 [dev]'s transformer is FluxTransformer2DModel's defaults with guidance embedding (11.9 B parameters);
# the tiny config is diffusers' own test config, two blocks of each kind so that copies share a compile.
DIFFUSERS = {
    "flux": dict(
        cls="FluxTransformer2DModel",
        presets={
            "tiny": dict(config=dict(patch_size=1, in_channels=4, num_layers=2, num_single_layers=2,
                                     attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                     pooled_projection_dim=32, axes_dims_rope=[4, 4, 8], guidance_embeds=True),
                         img_tokens=64, txt_tokens=16),
            "full": dict(config=dict(guidance_embeds=True), img_tokens=4096, txt_tokens=512),  # 1024 px, T5's 512
        },
        about="Flux.1 [dev]'s transformer: 19 double-stream and 38 single-stream blocks",
    ),
}


class DiffusersSource(Source):
    key, title = "diffusers", "diffusers"

    def names(self) -> list[str]:
        return sorted(DIFFUSERS)

    def _cls(self, ref: str):
        go_offline()
        import diffusers
        return getattr(diffusers, DIFFUSERS[ref]["cls"])

    def entry(self, ref: str) -> RealModel:
        if ref not in DIFFUSERS:
            raise UnknownModel(f"diffusers:{ref} is not one of the diffusers models the lab builds: "
                               f"{', '.join(DIFFUSERS)}")
        spec = DIFFUSERS[ref]
        with torch.device("meta"):
            counts = {name: sum(p.numel() for p in self.build(ref, sizes).parameters())
                      for name, sizes in spec["presets"].items()}
        return RealModel(
            name=f"diffusers:{ref}", ref=ref, source=self, title=f"{ref} ({spec['cls']}, diffusers)",
            description=(f"diffusers {spec['cls']}(**config), random weights: {spec['about']}. Parameters by "
                         f"preset: {', '.join(f'{n} {_count(c)}' for n, c in counts.items())}. Regional compilation "
                         "calls the model's own compile_repeated_blocks(), which compiles its _repeated_blocks."),
            presets=spec["presets"], default_preset={"cpu": "tiny", "cuda": "full"},
            default_batch={"cpu": 2, "cuda": 1}, varying_dim="image tokens", seq_field="img_tokens",
            supports_channels_last=False, repeated_call="compile_repeated_blocks")

    def build(self, ref, sizes):
        return self._cls(ref)(**sizes["config"])

    def make_batch(self, ref, sizes, batch_size, device, generator):
        cfg = self._defaults(ref, sizes)
        n_img, n_txt = sizes["img_tokens"], sizes["txt_tokens"]
        x0 = torch.randn(batch_size, n_img, cfg["in_channels"], device=device, generator=generator)
        noise = torch.randn(batch_size, n_img, cfg["in_channels"], device=device, generator=generator)
        t = torch.rand(batch_size, device=device, generator=generator)
        latents = (1 - t[:, None, None]) * x0 + t[:, None, None] * noise  # rectified flow, as diffusers trains Flux
        text = torch.randn(batch_size, n_txt, cfg["joint_attention_dim"], device=device, generator=generator)
        pooled = torch.randn(batch_size, cfg["pooled_projection_dim"], device=device, generator=generator)
        img_ids = torch.zeros(n_img, 3, device=device)  # (row, column) of each latent patch; zeros suffice for timing
        txt_ids = torch.zeros(n_txt, 3, device=device)
        guidance = torch.full((batch_size,), 3.5, device=device)  # Flux.1 [dev]'s usual guidance scale
        return (latents, text, pooled, t, img_ids, txt_ids, guidance), noise - x0

    def _defaults(self, ref: str, sizes: dict) -> dict:
        import inspect
        params = inspect.signature(self._cls(ref).__init__).parameters
        return {**{k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty},
                **sizes["config"]}

    def loss(self, ref, output, target):
        return F.mse_loss(output.sample.float(), target)

    def block_names(self, model):
        return set(getattr(model, "_repeated_blocks", None) or ()) or repeated_classes(model)

    def build_code(self, ref, sizes):
        cls = DIFFUSERS[ref]["cls"]
        args = ", ".join(f"{k}={v!r}" for k, v in sizes["config"].items())
        return [f"from diffusers import {cls}", "",
                "with torch.device(device):  # a config, random weights: nothing is downloaded",
                f"    model = {cls}({args})  # <-- your model"]


FILE_INTERFACE = """\
A file for `file:PATH.py` defines (examples/my_model.py is one):

    PRESETS = {"tiny": {...}, "full": {...}}     # optional; preset name -> whatever your build needs
    def build(preset: str) -> nn.Module          # builds on the current device (the lab wraps it in one)
    def make_batch(preset: str, batch_size: int, device, generator) -> (inputs: tuple, target)
    def loss(output, target) -> scalar tensor    # optional; default: mean squared error against target
    REPEATED_BLOCKS = (MyBlock,)                 # optional; default: the submodule classes that repeat
    DEFAULT_BATCH = {"cpu": 2, "cuda": 32}       # optional

The model is called as model(*inputs). The batch size is what varies for dynamic shapes."""


class FileSource(Source):
    """A model file of your own: it runs your code, so the app allows it only where compile-lab.toml says so."""

    key, title = "file", "your own file"

    def names(self) -> list[str]:
        return sorted(str(p.relative_to(LAB)) for p in (LAB / "examples").glob("*.py"))

    def module(self, ref: str):
        path = (LAB / Path(ref).expanduser()).resolve()  # a relative path is the lab folder's (file_model)
        if path.suffix != ".py" or not path.is_file():
            raise UnknownModel(f"file:{ref}: no Python file there (file:PATH.py names a file; {FILE_INTERFACE})")
        return _load_file(str(path), path.stat().st_mtime_ns)

    def entry(self, ref: str) -> RealModel:
        mod = self.module(ref)
        missing = [name for name in ("build", "make_batch") if not callable(getattr(mod, name, None))]
        if missing:
            raise UnknownModel(f"file:{ref} defines no {' or '.join(n + '()' for n in missing)}. {FILE_INTERFACE}")
        presets = dict(getattr(mod, "PRESETS", None) or {"default": {}})
        batch = {"cpu": 2, "cuda": 32, **(getattr(mod, "DEFAULT_BATCH", None) or {})}
        with torch.device("meta"), offline_build(f"file:{ref}"):
            model = mod.build(next(iter(presets)))
        convolutional = any(isinstance(m, (nn.Conv2d, nn.Conv3d)) for m in model.modules())
        first = ((mod.__doc__ or "").strip().splitlines() or [f"A model of your own ({ref})."])[0]
        return RealModel(
            name=f"file:{ref}", ref=ref, source=self, title=f"{Path(ref).name} (your file)",
            description=first,
            presets={name: {"preset": name} for name in presets},
            default_preset={"cpu": next(iter(presets)), "cuda": list(presets)[-1]},
            default_batch=batch, varying_dim="", seq_field="", supports_channels_last=convolutional)

    def build(self, ref, sizes):
        return self.module(ref).build(sizes["preset"])

    def make_batch(self, ref, sizes, batch_size, device, generator):
        inputs, target = self.module(ref).make_batch(sizes["preset"], batch_size, device, generator)
        return tuple(inputs), target

    def loss(self, ref, output, target):
        own = getattr(self.module(ref), "loss", None)
        return own(output, target) if own else F.mse_loss(output.float(), target.float())

    def block_names(self, model):
        mod = sys.modules.get(type(model).__module__)
        declared = getattr(mod, "REPEATED_BLOCKS", None)
        return {cls.__name__ for cls in declared} if declared else repeated_classes(model)

    def build_code(self, ref, sizes):
        return ["import importlib.util", "",
                f"spec = importlib.util.spec_from_file_location('my_model', {ref!r})",
                "my_model = importlib.util.module_from_spec(spec)", "spec.loader.exec_module(my_model)",
                "with torch.device(device):",
                f"    model = my_model.build({sizes['preset']!r})  # <-- your model"]


def file_model(path: str, cwd: str | Path | None = None) -> str:
    """`file:PATH` as a worker finds it: workers run in the lab's folder, so a path relative to another folder is
    made absolute (one inside the lab's folder stays relative to it, as it reads better in labels)."""
    full = (Path(cwd or os.getcwd()) / Path(path.removeprefix("file:")).expanduser()).resolve()
    return f"file:{full.relative_to(LAB) if full.is_relative_to(LAB) else full}"


@functools.lru_cache(maxsize=32)
def _load_file(path: str, mtime_ns: int):
    """Import a model file once per version of it (the mtime keys the cache)."""
    name = "compile_lab_file_" + Path(path).stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    return module


SOURCES: dict[str, Source] = {s.key: s for s in (TorchvisionSource(), TimmSource(), HfSource(), DiffusersSource(),
                                                 FileSource())}


@functools.lru_cache(maxsize=None)
def entry(name: str) -> RealModel:
    source_key, sep, ref = name.partition(":")
    if not sep or source_key not in SOURCES or not ref:
        raise UnknownModel(f"unknown model {name!r}: name a built-in, or SOURCE:NAME with SOURCE one of "
                           f"{', '.join(SOURCES)} (python -m tcore models lists them)")
    return SOURCES[source_key].entry(ref)


def catalog(source: str, pattern: str = "") -> list[str]:
    """Names of one source, as `SOURCE:NAME`, filtered by a case-insensitive substring or a *glob*."""
    import fnmatch
    if source not in SOURCES:
        raise UnknownModel(f"unknown source {source!r}; choose one of: {', '.join(SOURCES)}")
    names = _names(source)
    if pattern:
        p = pattern.lower()
        names = [n for n in names if (fnmatch.fnmatch(n.lower(), p) if any(c in p for c in "*?[") else p in n.lower())]
    return [f"{source}:{n}" for n in names]


@functools.lru_cache(maxsize=None)
def _names(source: str) -> tuple[str, ...]:
    return tuple(SOURCES[source].names())


def _count(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n / 1e3:.0f} K"
