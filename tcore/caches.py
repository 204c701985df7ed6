"""Compile caches across runs: warm starts from the local on-disk cache or from portable artifacts.

Three cache settings (Experiment.cache):
  cold       fresh Inductor and Triton cache directories: the compile time a first-time user pays
  warm       the persistent local cache directory that earlier warm runs filled
  artifacts  fresh directories, seeded before the first call with torch.compiler.load_cache_artifacts()
             from the artifacts a previous run with the same settings saved (the "mega-cache")
Artifacts are valid only for the same torch, triton and device; elsewhere the run compiles cold and
says why. Every compiled run saves its artifacts, stored beside its record.

The mega-cache bundles compiled Triton kernels but not the C++ kernels Inductor builds for the CPU
(they stay as .so files in the cache directory), so on the CPU the artifacts also carry those files;
without them a "warm" CPU start still runs g++ for every kernel.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
import zipfile
from pathlib import Path
from typing import Any

# Environment variables between the launcher and the worker.
SAVE_TO = "TCORE_SAVE_ARTIFACTS"      # where the worker writes the artifacts of this run
LOAD_FROM = "TCORE_LOAD_ARTIFACTS"    # artifacts to load before the first compile
MADE_ON = "TCORE_ARTIFACTS_MADE_ON"   # JSON: the torch/triton/device (and run) the artifacts came from
COLD_BECAUSE = "TCORE_COLD_BECAUSE"   # why an artifacts run has nothing to load

# Spec fields that do not change the compiled code; everything else is part of the cache key.
_NOT_IN_KEY = {"warmup_steps", "timed_s", "timed_steps", "rounds", "seed", "cache", "device"}

SCHEMA = """
CREATE TABLE IF NOT EXISTS compile_artifacts (
    run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    compile_key TEXT NOT NULL,
    made_on TEXT NOT NULL,        -- JSON {torch, triton, device_name}
    created_at REAL NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS compile_artifacts_key ON compile_artifacts(compile_key, created_at);
"""


def compile_key(spec: dict[str, Any], device: str) -> str:
    """The settings that determine what gets compiled, on which kind of device, as a short hash."""
    settings = {k: v for k, v in spec.items() if k not in _NOT_IN_KEY}
    return hashlib.sha256(json.dumps([settings, device], sort_keys=True).encode()).hexdigest()[:16]


def _connect(db_path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(db_path, timeout=30)
    db.executescript(SCHEMA)
    return db


def _newest(spec: dict[str, Any], device: str, db_path: Path, *, with_data: bool) -> tuple | None:
    columns = "run_id, made_on" + (", data" if with_data else "")
    with _connect(db_path) as db:
        return db.execute(f"SELECT {columns} FROM compile_artifacts WHERE compile_key=? "
                          "ORDER BY created_at DESC LIMIT 1", (compile_key(spec, device),)).fetchone()


def artifacts_for(spec: dict[str, Any], device: str, db_path: Path) -> dict[str, Any] | None:
    """The stored artifacts a cache=artifacts run of `spec` would load: {run_id, torch, triton, device_name}."""
    row = _newest(spec, device, db_path, with_data=False)
    return None if row is None else {"run_id": row[0], **json.loads(row[1])}


def launch_env(spec: dict[str, Any], device: str, db_path: Path, workdir: Path) -> dict[str, str]:
    """Environment for a run's worker: where to save its artifacts and, for cache=artifacts, what to load."""
    env = {SAVE_TO: str(workdir / "artifacts.bin")}
    if spec["cache"] != "artifacts":
        return env
    row = _newest(spec, device, db_path, with_data=True)
    if row is None:
        env[COLD_BECAUSE] = "no run with these settings has saved compile artifacts yet: run it once cold first"
        return env
    run_id, made_on, data = row
    (workdir / "load.bin").write_bytes(data)
    env[LOAD_FROM] = str(workdir / "load.bin")
    env[MADE_ON] = json.dumps({**json.loads(made_on), "run_id": run_id})
    return env


def keep(run_id: str, spec: dict[str, Any], result: dict[str, Any], env: dict[str, Any],
         db_path: Path, workdir: Path) -> None:
    """Store the artifacts a finished run saved, keyed by its compile settings."""
    path = workdir / "artifacts.bin"
    if not path.exists():
        return
    with _connect(db_path) as db:
        db.execute("INSERT OR REPLACE INTO compile_artifacts VALUES (?,?,?,?,?)",
                   (run_id, compile_key(spec, result["device"]), json.dumps(made_on(env)), time.time(),
                    path.read_bytes()))


def made_on(env: dict[str, Any]) -> dict[str, Any]:
    """What artifacts depend on: the torch and triton versions and the device they were compiled for."""
    return {"torch": env.get("torch"), "triton": env.get("triton"), "device_name": env.get("gpu") or env.get("cpu")}


# --- in the worker ---------------------------------------------------------------------------------

def _inductor_dir() -> Path:
    return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


def load_in_worker(env: dict[str, Any]) -> tuple[str, str | None]:
    """Before the first compile: load artifacts if given and valid here. Returns (what happened, note)."""
    if os.environ.get(COLD_BECAUSE):
        return "cold", os.environ[COLD_BECAUSE]
    if not os.environ.get(LOAD_FROM):
        return "none", None
    import torch

    source = json.loads(os.environ[MADE_ON])
    here = made_on(env)
    mismatched = [f"{k} {source.get(k)} (here {here[k]})" for k in here if source.get(k) != here[k]]
    if mismatched:
        return "cold", ("the saved compile artifacts were made with " + ", ".join(mismatched) +
                        ": they would not match, so this run compiles cold")
    with zipfile.ZipFile(os.environ[LOAD_FROM]) as bundle:
        for name in bundle.namelist():
            if name.startswith("cpp/"):  # compiled C++ kernels go back where Inductor looks for them
                target = _inductor_dir() / name.removeprefix("cpp/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(bundle.read(name))
        torch.compiler.load_cache_artifacts(bundle.read("mega-cache.bin"))
    return "loaded", f"loaded compile artifacts saved by run {source['run_id']}"


def save_in_worker() -> int:
    """After compiling: write this process's compile artifacts for later runs; returns their size in bytes."""
    import torch

    if not os.environ.get(SAVE_TO):
        return 0
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:  # nothing was compiled through a cache that can be saved (e.g. backend="eager")
        return 0
    data, _info = saved
    with zipfile.ZipFile(os.environ[SAVE_TO], "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("mega-cache.bin", data)
        for path in _inductor_dir().glob("*/*.so"):  # C++ kernels (CPU); GPU kernels are in the mega-cache
            for built in (path, path.with_suffix(".cpp")):
                if built.exists():
                    bundle.write(built, "cpp/" + str(built.relative_to(_inductor_dir())))
    return Path(os.environ[SAVE_TO]).stat().st_size
