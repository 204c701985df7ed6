"""torchvision:NAME: the classifiers of torchvision.models.list_models(), built with weights=None."""
from __future__ import annotations

from sample_models.sources.common import RealModel, UnknownModel
from sample_models.sources.vision import _Vision


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

    def shrink(self, ref, model, num_classes):
        import torchvision
        if not isinstance(model, torchvision.models.VisionTransformer):
            return None  # maxvit_t: its window partitions need its own 224 px
        patch, t = model.patch_size, self.TINY_VIT
        side = patch * max(1, self.small_side // patch)  # whole patches: vit_h_14 at 56 px
        return {"image_size": side, "build": dict(image_size=side, patch_size=patch, num_layers=t["depth"],
                                                  num_heads=t["heads"], hidden_dim=t["width"], mlp_dim=t["mlp"],
                                                  num_classes=num_classes)}

    def build(self, ref, sizes):
        import torchvision
        if "build" in sizes:  # a ViT made tiny: its class, since get_model's builders fix the layers and widths
            return torchvision.models.VisionTransformer(**sizes["build"])
        return torchvision.models.get_model(ref, weights=None)

    def build_code(self, ref, sizes):
        model = (f"torchvision.models.VisionTransformer({', '.join(f'{k}={v!r}' for k, v in sizes['build'].items())})"
                 f"  # <-- your model ({ref}, made tiny)" if "build" in sizes else
                 f"torchvision.models.get_model({ref!r}, weights=None)  # <-- your model")
        return ["import torchvision", "",
                "with torch.device(device):  # random weights: nothing is downloaded", f"    model = {model}"]
