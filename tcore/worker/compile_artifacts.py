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
    import torch

    source = json.loads(os.environ[ARTIFACTS_MADE_ON])
    here = made_on(env)
    mismatched = [f"{k} {source.get(k)} (here {here[k]})" for k in here if source.get(k) != here[k]]
    if mismatched:
        return "cold", ("the saved compile artifacts were made with " + ", ".join(mismatched) +
                        ": they would not match, so this run compiles cold")
    with zipfile.ZipFile(os.environ[LOAD_ARTIFACTS_FROM]) as bundle:
        for name in bundle.namelist():
            if name.startswith("cpp/"):  # compiled C++ kernels go back where Inductor looks for them
                target = _inductor_dir() / name.removeprefix("cpp/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(bundle.read(name))
        torch.compiler.load_cache_artifacts(bundle.read("mega-cache.bin"))
    return "loaded", f"loaded compile artifacts saved by run {source['run_id']}"


def save() -> int:
    """After compiling: write this process's compile artifacts for later runs; returns their size in bytes."""
    import torch

    if not os.environ.get(SAVE_ARTIFACTS_TO):
        return 0
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:  # nothing was compiled through a cache that can be saved (e.g. backend="eager")
        return 0
    data, _info = saved
    with zipfile.ZipFile(os.environ[SAVE_ARTIFACTS_TO], "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("mega-cache.bin", data)
        for path in _inductor_dir().glob("*/*.so"):  # C++ kernels (CPU); GPU kernels are in the mega-cache
            for built in (path, path.with_suffix(".cpp")):
                if built.exists():
                    bundle.write(built, "cpp/" + str(built.relative_to(_inductor_dir())))
    return Path(os.environ[SAVE_ARTIFACTS_TO]).stat().st_size
