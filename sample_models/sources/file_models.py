"""file:PATH.py: a model file of your own (FILE_INTERFACE says what it defines; examples/my_model.py)."""
from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from sample_models.sources.common import LAB, RealModel, Source, UnknownModel, offline_build, repeated_classes


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
