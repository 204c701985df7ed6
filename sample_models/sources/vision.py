"""Image classifiers, whatever their library: presets by resolution, random images and labels, cross entropy."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from sample_models.sources.common import (
    RealModel,
    Source,
    _build_on,
    _count,
    repeated_classes,
)


def _classify_loss(output, target) -> torch.Tensor:
    return F.cross_entropy(output.float(), target)  # float(): under autocast the logits may be bf16


def _image_batch(sizes: dict, batch_size: int, device, generator):
    side = sizes["image_size"]
    images = torch.randn(batch_size, 3, side, side, device=device, generator=generator)
    labels = torch.randint(0, sizes["num_classes"], (batch_size,), device=device, generator=generator)
    return (images,), labels


class _Vision(Source):
    """Image classifiers: a `tiny` preset at a small resolution where the architecture takes one (same weights,
    so the parameter count is the real one), and `full` at the model's own resolution. An architecture that takes
    only its own resolution (a ViT's position embeddings are sized to it) is made tiny through its library's own
    constructor arguments instead (`shrink`): fewer, narrower layers at a small resolution."""

    small_side = 64
    # A ViT made tiny, as the lab's other tiny presets shrink a transformer (tcore's hf tiny: 2 layers, 64 wide).
    TINY_VIT = dict(depth=2, width=64, heads=2, mlp=128)

    def _meta_model(self, ref: str) -> nn.Module:
        return _build_on("meta", lambda: self.build(ref, {}))

    def _vision_entry(self, ref: str, native: int, num_classes: int, model: nn.Module, fixed: bool,
                      where: str) -> RealModel:
        params = sum(p.numel() for p in model.parameters())
        # a real convolution, not a ViT's patchify (kernel = stride)
        convolutional = any(isinstance(m, nn.Conv2d) and m.stride != m.kernel_size for m in model.modules())
        small = native if fixed else min(native, self.small_side)
        tiny = dict(image_size=small, num_classes=num_classes)
        shrunk = self.shrink(ref, model, num_classes) if fixed else None
        if shrunk:  # {"image_size": side, "build": constructor arguments} that make it small
            tiny = dict(tiny, **shrunk)
        presets = {"tiny": tiny, "full": dict(image_size=native, num_classes=num_classes)}
        blocks = sorted(repeated_classes(model))
        if shrunk:
            tiny_params = sum(p.numel() for p in _build_on("meta", lambda: self.build(ref, tiny)).parameters())
            size_note = (f"It takes only its native {native} px at its own size, so tiny is the same architecture "
                         f"built small through its constructor: {_count(tiny_params)} parameters at "
                         f"{shrunk['image_size']} px.")
        else:
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

    def shrink(self, ref: str, model: nn.Module, num_classes: int) -> dict | None:
        """The tiny preset's {"image_size", "build": constructor arguments} for an architecture that takes only its
        own resolution, or None where its library's constructor cannot make it small."""
        return None

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
