"""diffusers:NAME: Flux.1's transformer as diffusers ships it, fed its real inputs."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from sample_models.sources.common import (
    RealModel,
    Source,
    UnknownModel,
    _count,
    go_offline,
    repeated_classes,
)

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
