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

    def build(self, ref, sizes):
        import torchvision
        return torchvision.models.get_model(ref, weights=None)

    def build_code(self, ref, sizes):
        return ["import torchvision", "",
                "with torch.device(device):  # random weights: nothing is downloaded",
                f"    model = torchvision.models.get_model({ref!r}, weights=None)  # <-- your model"]
