"""file:PATH.py: a model file of your own (FILE_INTERFACE says what it defines; examples/my_model.py).

Only worker processes import a model file (tcore.worker calls allow_imports(); tcore.worker.describe reads one
for the lab): its code runs with the rights of whoever imports it, and the app's and the command line's
processes hold what it must not reach (the instructor's passcode, every session). There, a file model is its
card, what a worker wrote down when it read the file (name, title, presets, parameter counts, ...), which the
lab process finds through card_finder (tcore.lab.outputs.model_files: the run store, or a worker-like child)."""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable

import torch.nn as nn
import torch.nn.functional as F

from sample_models.sources.common import (
    LAB,
    RealModel,
    Source,
    UnknownModel,
    _build_on,
    offline_build,
    repeated_classes,
)

FILE_INTERFACE = """\
A file for `file:PATH.py` defines (examples/my_model.py is one):

    PRESETS = {"tiny": {...}, "full": {...}}     # optional; preset name -> whatever your build needs
    def build(preset: str) -> nn.Module          # builds on the current device (the lab wraps it in one)
    def make_batch(preset: str, batch_size: int, device, generator) -> (inputs: tuple, target)
    def loss(output, target) -> scalar tensor    # optional; default: mean squared error against target
    REPEATED_BLOCKS = (MyBlock,)                 # optional; default: the submodule classes that repeat
    DEFAULT_BATCH = {"cpu": 2, "cuda": 32}       # optional

The model is called as model(*inputs). The batch size is what varies for dynamic shapes."""


_IMPORTS_ALLOWED = False
# name -> the card, or None where none can be had: set by the lab process (tcore.lab.outputs.model_files.install)
card_finder: Callable[[str], dict | None] | None = None


def allow_imports() -> None:
    """This process is a worker: it may import model files."""
    global _IMPORTS_ALLOWED
    _IMPORTS_ALLOWED = True


def imports_allowed() -> bool:
    return _IMPORTS_ALLOWED


class FileImportRefused(UnknownModel):
    """A model file asked of a process that never imports one (the app, the command line)."""


@dataclasses.dataclass(frozen=True)
class FileCard(RealModel):
    """A file model as a worker described it: what pages, estimates and checks need, without its code."""

    param_counts: dict = dataclasses.field(default_factory=dict)  # preset -> parameters (None: not counted)
    mtime_ns: int | None = None  # the file's version the worker read

    def param_count(self, preset: str) -> int:
        count = self.param_counts.get(preset)
        if count is None:
            raise FileImportRefused(f"{self.name}: its {preset} preset's parameters were not counted")
        return count

    def flops_per_sample(self, preset: str, *, training: bool = False) -> int:
        raise FileImportRefused(f"{self.name}: FLOPs are counted in a worker")


def card(entry: RealModel, mtime_ns: int | None) -> dict:
    """What a process that never imports the file needs of it (JSON)."""
    counts = {}
    for preset in entry.presets:
        try:
            counts[preset] = sum(p.numel() for p in entry.build(preset, device="meta").parameters())
        except Exception:  # noqa: BLE001 (a preset that does not build on meta: counted nowhere, said where asked)
            counts[preset] = None
    return {"name": entry.name, "ref": entry.ref, "title": entry.title, "description": entry.description,
            "presets": list(entry.presets), "default_preset": entry.default_preset,
            "default_batch": entry.default_batch, "supports_channels_last": entry.supports_channels_last,
            "param_counts": counts, "mtime_ns": mtime_ns}


def from_card(data: dict) -> FileCard:
    return FileCard(name=data["name"], ref=data["ref"], source=SOURCES_FILE, title=str(data["title"]),
                    description=str(data["description"]), presets={p: {"preset": p} for p in data["presets"]},
                    default_preset=dict(data["default_preset"]), default_batch=dict(data["default_batch"]),
                    varying_dim="", seq_field="", supports_channels_last=bool(data["supports_channels_last"]),
                    param_counts=dict(data.get("param_counts") or {}), mtime_ns=data.get("mtime_ns"))


class FileSource(Source):
    """A model file of your own: it runs your code, so the app allows it only where compile-lab.toml says so."""

    key, title = "file", "your own file"

    def names(self) -> list[str]:
        return sorted(str(p.relative_to(LAB)) for p in (LAB / "examples").glob("*.py"))

    def path(self, ref: str) -> Path:
        return (LAB / Path(ref).expanduser()).resolve()  # a relative path is the lab folder's (file_model)

    def module(self, ref: str):
        if not _IMPORTS_ALLOWED:
            raise FileImportRefused(f"file:{ref} runs your code: only a worker process imports it, not this one")
        path = self.path(ref)
        if path.suffix != ".py" or not path.is_file():
            raise UnknownModel(f"file:{ref}: no Python file there (file:PATH.py names a file; {FILE_INTERFACE})")
        return _load_file(str(path), path.stat().st_mtime_ns)

    def entry(self, ref: str) -> RealModel:
        if not _IMPORTS_ALLOWED:
            found = card_finder(f"file:{ref}") if card_finder else None
            if found is None:
                raise FileImportRefused(
                    f"file:{ref}: this process never imports a model file, and no worker has described this one "
                    "for the run store yet (a run of it, or picking it on the Run page where the lab allows files, "
                    "does)")
            return from_card(found)
        path = self.path(ref)
        return _imported_entry(ref, path.stat().st_mtime_ns if path.is_file() else None)

    def describe(self, ref: str) -> dict:
        """The card of file:REF, read by importing it (a worker's work)."""
        path = self.path(ref)
        return card(self.entry(ref), path.stat().st_mtime_ns if path.is_file() else None)

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
                f"spec = importlib.util.spec_from_file_location('my_model', {str(self.path(ref))!r})  # <-- your file",
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


SOURCES_FILE = FileSource()


@functools.lru_cache(maxsize=32)
def _imported_entry(ref: str, mtime_ns: int | None) -> RealModel:
    """A worker's entry for file:REF, once per version of the file."""
    mod = SOURCES_FILE.module(ref)
    missing = [name for name in ("build", "make_batch") if not callable(getattr(mod, name, None))]
    if missing:
        raise UnknownModel(f"file:{ref} defines no {' or '.join(n + '()' for n in missing)}. {FILE_INTERFACE}")
    presets = dict(getattr(mod, "PRESETS", None) or {"default": {}})
    batch = {"cpu": 2, "cuda": 32, **(getattr(mod, "DEFAULT_BATCH", None) or {})}
    with offline_build(f"file:{ref}"):  # on the CPU, weights moved to "meta", where its build needs real values
        model = _build_on("meta", lambda: mod.build(next(iter(presets))))
    convolutional = any(isinstance(m, (nn.Conv2d, nn.Conv3d)) for m in model.modules())
    first = ((mod.__doc__ or "").strip().splitlines() or [f"A model of your own ({ref})."])[0]
    return RealModel(
        name=f"file:{ref}", ref=ref, source=SOURCES_FILE, title=f"{Path(ref).name} (your file)",
        description=first,
        presets={name: {"preset": name} for name in presets},
        default_preset={"cpu": next(iter(presets)), "cuda": list(presets)[-1]},
        default_batch=batch, varying_dim="", seq_field="", supports_channels_last=convolutional)
