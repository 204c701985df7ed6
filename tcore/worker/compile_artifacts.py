"""Compile artifacts inside the worker: load the ones the lab side handed over, save this run's.

See tcore.lab.outputs.artifact_handover for the three cache settings and how artifacts are kept between runs.
The mega-cache bundles compiled Triton kernels but not the C++ kernels Inductor builds for the CPU
(they stay as .so files in the cache directory), so on the CPU the artifacts also carry those files;
without them a "warm" CPU start still runs g++ for every kernel.
"""
from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

from tcore.experiment.protocol import (
    ARTIFACTS_MADE_ON,
    COLD_BECAUSE,
    LOAD_ARTIFACTS_FROM,
    SAVE_ARTIFACTS_TO,
    made_on,
)


def _inductor_dir() -> Path:
    return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


def load(env: dict[str, Any]) -> tuple[str, str | None]:
    """Before the first compile: load artifacts if given and valid here. Returns (what happened, note)."""
    if os.environ.get(COLD_BECAUSE):
        return "cold", os.environ[COLD_BECAUSE]
    if not os.environ.get(LOAD_ARTIFACTS_FROM):
        return "none", None
    source = json.loads(os.environ[ARTIFACTS_MADE_ON])
    here = made_on(env)
    mismatched = [f"{k} {source.get(k)} (here {here[k]})" for k in here if source.get(k) != here[k]]
    if mismatched:
        return "cold", ("the saved compile artifacts were made with " + ", ".join(mismatched) +
                        ": they would not match, so this run compiles cold")
    load_bundle(Path(os.environ[LOAD_ARTIFACTS_FROM]))
    return "loaded", f"loaded compile artifacts saved by run {source['run_id']}"


def load_bundle(path: Path) -> int:
    """Seed this process's caches from a bundle that save_bundle wrote: its C++ kernels back where Inductor looks for
    them, then the Mega-Cache. Returns how many C++ kernel files it put back (0 on a GPU). The start-up ladder's
    artifact rung loads the same bundle, so it measures what the Run page's cache=artifacts does."""
    import torch

    restored = 0
    with zipfile.ZipFile(path) as bundle:
        for name in bundle.namelist():
            if name.startswith("cpp/"):  # compiled C++ kernels go back where Inductor looks for them
                target = _inductor_dir() / name.removeprefix("cpp/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(bundle.read(name))
                restored += target.suffix == ".so"
        torch.compiler.load_cache_artifacts(bundle.read("mega-cache.bin"))
    return restored


def save() -> int:
    """After compiling: write this process's compile artifacts for later runs; returns their size in bytes."""
    if not os.environ.get(SAVE_ARTIFACTS_TO):
        return 0
    return save_bundle(Path(os.environ[SAVE_ARTIFACTS_TO])) or 0


def save_bundle(path: Path) -> int | None:
    """This process's compile artifacts as one file at `path`: the Mega-Cache (torch.compiler.save_cache_artifacts)
    and, on the CPU, the C++ kernels it leaves out. Returns its size in bytes; None where nothing was compiled
    through a cache that can be saved (e.g. backend="eager"), and then no file is written."""
    import torch

    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return None
    data, _info = saved
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("mega-cache.bin", data)
        for built_so in cpp_kernels():  # C++ kernels (CPU); GPU kernels are in the mega-cache
            for built in (built_so, built_so.with_suffix(".cpp")):
                if built.exists():
                    bundle.write(built, "cpp/" + str(built.relative_to(_inductor_dir())))
    return path.stat().st_size


def cpp_kernels() -> list[Path]:
    """The C++ kernels Inductor has built into this process's cache folder (the CPU's; none on a GPU)."""
    return sorted(_inductor_dir().glob("*/*.so"))
