"""timm:NAME: any of timm.list_models(), built with pretrained=False, its input size from its data config."""
from __future__ import annotations

import torch

from sample_models.sources.common import RealModel, UnknownModel, _build_on
from sample_models.sources.vision import _Vision


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

    def shrink(self, ref, model, num_classes):
        """timm's own keyword arguments: a ViT-like model (vit, deit, beit, eva) takes depth, width and heads with
        the resolution; other fixed-size ones (swin, mixer, levit, maxvit) the resolution alone."""
        import timm
        side, t = self.small_side, self.TINY_VIT
        for kwargs in (dict(img_size=side, depth=t["depth"], embed_dim=t["width"], num_heads=t["heads"]),
                       dict(img_size=side)):
            try:
                small = _build_on("meta", lambda: timm.create_model(ref, pretrained=False, **kwargs))
                with torch.device("meta"), torch.no_grad():
                    small.eval()(torch.empty(1, 3, side, side))
            except (TypeError, AssertionError, RuntimeError, ValueError):  # arguments or a size it refuses
                continue
            return {"image_size": side, "build": kwargs}
        return None

    def build(self, ref, sizes):
        import timm
        return timm.create_model(ref, pretrained=False, **sizes.get("build", {}))

    def build_code(self, ref, sizes):
        extra = "".join(f", {k}={v!r}" for k, v in sizes.get("build", {}).items())
        return ["import timm", "",
                "with torch.device(device):  # pretrained=False: random weights, nothing is downloaded",
                f"    model = timm.create_model({ref!r}, pretrained=False{extra})  # <-- your model"]


# Shrunk sizes for the CPU, set on a config only where its class has the attribute (gpt2's n_embd answers to
# hidden_size through its attribute_map).
