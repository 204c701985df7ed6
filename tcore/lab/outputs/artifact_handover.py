"""Compile artifacts and traces on the lab side: which stored artifacts a run would load, handing them to its
worker, and keeping what a run saved (its artifacts, its profiled steps' traces and its compile's TORCH_TRACE).

Three cache settings (Experiment.cache):
  cold       fresh Inductor and Triton cache directories: the compile time a first-time user pays
  warm       the persistent local cache directory (tcore.lab.launch.launcher.warm_cache_dir) that earlier runs filled:
             a cold run's compile goes into it after the run, once its own figures are measured (share_compiled),
             so the first warm run after a cold one of the same settings finds that compile there
  artifacts  fresh directories, seeded before the first call with torch.compiler.load_cache_artifacts()
             from the artifacts a previous run with the same settings saved (the "mega-cache")
Artifacts are valid only for the same torch, triton and device; elsewhere the run compiles cold and
says why. Every compiled run saves its artifacts (tcore.worker.compile_artifacts), stored beside its record
(tcore.store.artifacts, which also serves them, and the traces, back to the pages).
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tcore.experiment.comparable import compile_key
from tcore.experiment.protocol import (
    ARTIFACTS_MADE_ON,
    COLD_BECAUSE,
    LOAD_ARTIFACTS_FROM,
    SAVE_ARTIFACTS_TO,
    SAVE_TRACES_TO,
    made_on,
)
from tcore.lab.settings.config import TORCH_TRACE_DIR
from tcore.store import RunStore


def artifacts_for(spec: dict[str, Any], device: str, store: RunStore) -> dict[str, Any] | None:
    """The stored artifacts a cache=artifacts run of `spec` would load: {run_id, torch, triton, device_name}."""
    row = store.artifacts.newest_artifacts(compile_key(spec, device), with_data=False)
    return None if row is None else {"run_id": row[0], **json.loads(row[1])}


def launch_env(spec: dict[str, Any], device: str, store: RunStore, workdir: Path) -> dict[str, str]:
    """Environment for a run's worker: where to save its artifacts and, for cache=artifacts, what to load."""
    env = {SAVE_ARTIFACTS_TO: str(workdir / "artifacts.bin"), SAVE_TRACES_TO: str(workdir / "traces")}
    if spec["cache"] != "artifacts":
        return env
    row = store.artifacts.newest_artifacts(compile_key(spec, device), with_data=True)
    if row is None:
        env[COLD_BECAUSE] = "no run with these settings has saved compile artifacts yet: run it once cold first"
        return env
    run_id, made_on, data = row
    (workdir / "load.bin").write_bytes(data)
    env[LOAD_ARTIFACTS_FROM] = str(workdir / "load.bin")
    env[ARTIFACTS_MADE_ON] = json.dumps({**json.loads(made_on), "run_id": run_id})
    return env


def keep(run_id: str, spec: dict[str, Any], result: dict[str, Any], env: dict[str, Any],
         store: RunStore, workdir: Path) -> None:
    """Store what a finished run saved: its compile artifacts, keyed by its compile settings, and its traces."""
    saved = workdir / "artifacts.bin"
    artifacts = (compile_key(spec, result["device"]), made_on(env), saved.read_bytes()) if saved.exists() else None
    traces = {t.name.removeprefix("trace-").removesuffix(".json.gz"): t.read_bytes()
              for t in sorted((workdir / "traces").glob("trace-*.json.gz"))}
    store.artifacts.keep_artifacts(run_id, artifacts, profiler_traces=traces)


def keep_torch_trace(run_id: str, store: RunStore, workdir: Path | None) -> bool:
    """Store the TORCH_TRACE log a run's worker wrote (finished or failed: a failed compile's trace says most).

    The worker process writes one log; Inductor's compile workers inherit TORCH_TRACE but write nothing
    unless they log, so the largest file is the run's. Returns whether there was one.
    """
    logs = sorted((workdir / TORCH_TRACE_DIR).glob("*.log"), key=lambda p: p.stat().st_size) if workdir else []
    if not logs or not logs[-1].stat().st_size:
        return False
    store.artifacts.keep_torch_trace(run_id, gzip.compress(logs[-1].read_bytes(), compresslevel=6))
    return True


# The cache folders a worker compiles into (tcore.lab.launch.launcher.Worker: TORCHINDUCTOR_CACHE_DIR,
# TRITON_CACHE_DIR).
CACHE_FOLDERS = ("inductor", "triton")


def share_compiled(workdir: Path, shared: Path) -> int:
    """Copy what a finished cold run compiled (its fresh Inductor and Triton cache folders under `workdir`) into the
    caches warm runs share (`shared`), after the run, so its own compile stayed cold and a later warm run of the same
    settings starts warm. Returns how many files were added.

    Both caches name their entries by a hash of what they hold (FX graphs, AOT autograd entries, C++ and Triton
    kernels), and Inductor finds them by their path under its cache folder, so a folder's files copied under another
    keep working; a file already in the shared cache is the same entry and stays as it is. Each new file is written
    under a temporary name and renamed into place, so a warm run reading the shared cache meanwhile sees a whole file
    or none. Lock files are left out: they belong to the process that made them.
    """
    added = 0
    for folder in CACHE_FOLDERS:
        source = workdir / folder
        if not source.is_dir():
            continue
        for path in sorted(source.rglob("*")):
            if not path.is_file() or path.is_symlink() or path.suffix == ".lock" or "locks" in path.parts:
                continue
            target = shared / folder / path.relative_to(source)
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
            try:
                with os.fdopen(fd, "wb") as out, open(path, "rb") as data:
                    shutil.copyfileobj(data, out)
                shutil.copymode(path, temporary)  # a kernel's .so keeps its execute bit
                os.replace(temporary, target)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
            added += 1
    return added
