"""Registry of the models Compile Lab can build, batch, and measure: the three built-ins by plain name, and
real models of torchvision, timm, transformers, diffusers or a file of your own as SOURCE:NAME (sources/, one
module per source)."""
from dataclasses import dataclass

import torch
import torch.nn as nn

from . import captioner, flux, interface, resnet50, sources
from .interface import Batch  # noqa: F401 (the type the rest of the lab names as sample_models.Batch)

# name -> (model file, top-level module class)
_ARCH = {
    "captioner": (captioner, captioner.Captioner),
    "resnet50": (resnet50, resnet50.ResNet),
    "flux": (flux, flux.Flux),
}


@dataclass(frozen=True)
class SampleModel:
    name: str
    title: str
    description: str
    presets: dict[str, dict]          # preset name -> config overrides, small -> large
    default_preset: dict[str, str]    # device type -> preset
    default_batch: dict[str, int]     # device type -> batch size
    block_classes: tuple[type, ...]   # the repeated blocks, for regional compilation
    varying_dim: str                  # what seq_len varies, in words; "" when the model has no sequence
    seq_field: str                    # the config field that holds the default seq_len; "" with no sequence
    supports_channels_last: bool

    builtin = True
    repeated_call = ""  # built-ins compile their blocks one by one (RealModel names a model's own method)

    def abstract(self):
        """A context in which building and running allocates nothing; yields the device to build on."""
        return interface.on("meta")

    def build_code(self, preset: str) -> list[str]:
        return []  # the snippet builds a built-in through this registry

    def config(self, preset: str, **overrides):
        if preset not in self.presets:
            raise ValueError(f"unknown preset '{preset}' for {self.name}; choose one of: {', '.join(self.presets)}")
        file, _ = _ARCH[self.name]
        return file.Config(**{**self.presets[preset], **overrides})

    def build(self, preset: str, *, device="cpu", dtype=torch.float32, graph_break=False) -> nn.Module:
        _, cls = _ARCH[self.name]
        cfg = self.config(preset, graph_break=graph_break)
        # built straight on the device: on "meta" even the 11.9B-parameter Flux allocates nothing
        with torch.device(device):
            model = cls(cfg)
        return model.to(dtype)

    def make_batch(self, preset: str, batch_size: int, *, device="cpu", seq_len: int | None = None,
                   generator: torch.Generator | None = None) -> Batch:
        file, _ = _ARCH[self.name]
        inputs, target = file.make_batch(self.config(preset), batch_size, device=device, seq_len=seq_len,
                                         generator=generator)
        return Batch(inputs, target)

    def loss(self, output, batch: Batch) -> torch.Tensor:
        file, _ = _ARCH[self.name]
        return file.loss(output, batch.target)

    def default_seq_len(self, preset: str) -> int | None:
        return getattr(self.config(preset), self.seq_field) if self.seq_field else None

    def repeated_blocks(self, model: nn.Module) -> list[nn.Module]:
        return [m for m in model.modules() if isinstance(m, self.block_classes)]

    @property
    def repeats_blocks(self) -> bool:
        """Whether regional compilation has blocks to compile (the advisor asks before suggesting it)."""
        return bool(self.block_classes)

    def param_count(self, preset: str) -> int:
        return interface.param_count(self, preset)

    def flops_per_sample(self, preset: str, *, training: bool = False) -> int:
        return interface.flops_per_sample(self, preset, training)


MODELS: dict[str, SampleModel] = {
    "captioner": SampleModel(
        name="captioner",
        title="Toy image captioner",
        description=(
            "A small vision-language model: a ViT encoder turns an image into patch tokens and a transformer "
            "decoder writes a caption one token at a time while looking at them. It shows compile fusing "
            "attention, LayerNorm and MLP code, regional compilation of the repeated encoder and decoder blocks, "
            "and what happens when the caption length changes from call to call (recompiles vs dynamic shapes)."
        ),
        presets=captioner.presets,
        default_preset={"cuda": "small", "cpu": "tiny"},
        default_batch={"cuda": 256, "cpu": 8},  # GPU: busy enough that the figure holds still run to run
        block_classes=(captioner.EncoderBlock, captioner.DecoderBlock),
        varying_dim="caption length (tokens)",
        seq_field="max_caption_len",
        supports_channels_last=False,
    ),
    "resnet50": SampleModel(
        name="resnet50",
        title="ResNet-50",
        description=(
            "The classic 25.6M-parameter convolutional image classifier. Built from many small conv, BatchNorm "
            "and ReLU kernels, it shows compile fusing the pointwise work around convolutions, the channels-last "
            "memory format, and CUDA graphs cutting the launch overhead of many small kernels."
        ),
        presets=resnet50.presets,
        default_preset={"cuda": "full", "cpu": "tiny"},
        default_batch={"cuda": 64, "cpu": 8},
        block_classes=(resnet50.Bottleneck,),
        varying_dim="",
        seq_field="",
        supports_channels_last=True,
    ),
    "flux": SampleModel(
        name="flux",
        title="Flux-like block stack",
        description=(
            "The transformer inside the Flux.1 text-to-image model: 19 double-stream blocks (separate image and "
            "text weights, joint attention) then 38 single-stream blocks, all steered by the diffusion timestep. "
            "At 11.9B parameters it shows compile on a large attention- and matmul-bound model, and how "
            "compiling one repeated block instead of the whole stack keeps compile time short."
        ),
        presets=flux.presets,
        default_preset={"cuda": "medium", "cpu": "tiny"},
        default_batch={"cuda": 4, "cpu": 2},
        block_classes=(flux.DoubleStreamBlock, flux.SingleStreamBlock),
        varying_dim="image tokens",
        seq_field="img_tokens",
        supports_channels_last=False,
    ),
}


def get(name: str) -> SampleModel | sources.RealModel:
    """A built-in by its plain name, or a real model as SOURCE:NAME (built once on "meta" to read its sizes)."""
    if name in MODELS:
        return MODELS[name]
    if ":" not in name:
        raise ValueError(f"unknown model '{name}'; choose one of: {', '.join(MODELS)}, or SOURCE:NAME with SOURCE one "
                         f"of {', '.join(sources.SOURCES)} (python -m tcore models lists them)")
    return sources.entry(name)


def is_builtin(name: str) -> bool:
    return name in MODELS


SOURCES = ("builtin", *sources.SOURCES)


def catalog(source: str, pattern: str = "") -> list[str]:
    """Model names of one source ("builtin" for the three built-ins), filtered by a substring or a *glob*."""
    if source == "builtin":
        return [n for n in MODELS if pattern.lower() in n]
    return sources.catalog(source, pattern)
