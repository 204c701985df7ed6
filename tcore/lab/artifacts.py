"""Compile artifacts and traces on the lab side: which stored artifacts a run would load, handing them to its
worker, and keeping what a run saved (its artifacts, its profiled steps' traces and its compile's TORCH_TRACE).

Three cache settings (Experiment.cache):
  cold       fresh Inductor and Triton cache directories: the compile time a first-time user pays
  warm       the persistent local cache directory that earlier warm runs filled
  artifacts  fresh directories, seeded before the first call with torch.compiler.load_cache_artifacts()
             from the artifacts a previous run with the same settings saved (the "mega-cache")
Artifacts are valid only for the same torch, triton and device; elsewhere the run compiles cold and
says why. Every compiled run saves its artifacts (tcore.worker.artifacts), stored beside its record.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from tcore.protocol import (ARTIFACTS_MADE_ON, COLD_BECAUSE, LOAD_ARTIFACTS_FROM, SAVE_ARTIFACTS_TO, SAVE_TRACES_TO,
                            made_on)
from tcore.lab.launcher import TORCH_TRACE_DIR
from tcore.spec import PROVENANCE_FIELDS, settings

SCHEMA = """
CREATE TABLE IF NOT EXISTS compile_artifacts (
    run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    compile_key TEXT NOT NULL,
    made_on TEXT NOT NULL,        -- JSON {torch, triton, device_name}
    created_at REAL NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS compile_artifacts_key ON compile_artifacts(compile_key, created_at);
CREATE TABLE IF NOT EXISTS profiler_traces (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    variant TEXT NOT NULL,        -- eager or compiled
    data BLOB NOT NULL,           -- the Chrome trace JSON, gzipped: opens in Perfetto or chrome://tracing
    PRIMARY KEY (run_id, variant)
);
CREATE TABLE IF NOT EXISTS torch_traces (
    run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    data BLOB NOT NULL            -- the compile's TORCH_TRACE log, gzipped: what tlparse reads (tcore.lab.tlparse)
);
"""


def compile_key(spec: dict[str, Any], device: str) -> str:
    """The settings that determine what gets compiled, on which kind of device, as a short hash."""
    compiled = settings(spec, ignoring=PROVENANCE_FIELDS)
    return hashlib.sha256(json.dumps([compiled, device], sort_keys=True).encode()).hexdigest()[:16]


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
    env = {SAVE_ARTIFACTS_TO: str(workdir / "artifacts.bin"), SAVE_TRACES_TO: str(workdir / "traces")}
    if spec["cache"] != "artifacts":
        return env
    row = _newest(spec, device, db_path, with_data=True)
    if row is None:
        env[COLD_BECAUSE] = "no run with these settings has saved compile artifacts yet: run it once cold first"
        return env
    run_id, made_on, data = row
    (workdir / "load.bin").write_bytes(data)
    env[LOAD_ARTIFACTS_FROM] = str(workdir / "load.bin")
    env[ARTIFACTS_MADE_ON] = json.dumps({**json.loads(made_on), "run_id": run_id})
    return env


def keep(run_id: str, spec: dict[str, Any], result: dict[str, Any], env: dict[str, Any],
         db_path: Path, workdir: Path) -> None:
    """Store what a finished run saved: its compile artifacts, keyed by its compile settings, and its traces."""
    path = workdir / "artifacts.bin"
    traces = sorted((workdir / "traces").glob("trace-*.json.gz"))
    with _connect(db_path) as db:
        if path.exists():
            db.execute("INSERT OR REPLACE INTO compile_artifacts VALUES (?,?,?,?,?)",
                       (run_id, compile_key(spec, result["device"]), json.dumps(made_on(env)), time.time(),
                        path.read_bytes()))
        db.executemany("INSERT OR REPLACE INTO profiler_traces VALUES (?,?,?)",
                       [(run_id, t.name.removeprefix("trace-").removesuffix(".json.gz"), t.read_bytes())
                        for t in traces])


def keep_torch_trace(run_id: str, db_path: Path, workdir: Path | None) -> bool:
    """Store the TORCH_TRACE log a run's worker wrote (finished or failed: a failed compile's trace says most).

    The worker process writes one log; Inductor's compile workers inherit TORCH_TRACE but write nothing
    unless they log, so the largest file is the run's. Returns whether there was one.
    """
    logs = sorted((workdir / TORCH_TRACE_DIR).glob("*.log"), key=lambda p: p.stat().st_size) if workdir else []
    if not logs or not logs[-1].stat().st_size:
        return False
    with _connect(db_path) as db:
        db.execute("INSERT OR REPLACE INTO torch_traces VALUES (?,?)",
                   (run_id, gzip.compress(logs[-1].read_bytes(), compresslevel=6)))
    return True


def saved_artifacts(run_id: str, db_path: Path, *, size_only: bool = False) -> bytes | int | None:
    """The compile artifacts a run saved (torch.compiler.save_cache_artifacts()), or None; with size_only, their
    size in bytes, without reading them (Flux's run to hundreds of MB)."""
    column = "length(data)" if size_only else "data"
    with _connect(db_path) as db:
        row = db.execute(f"SELECT {column} FROM compile_artifacts WHERE run_id=?", (run_id,)).fetchone()
    return row[0] if row else None


def torch_trace(run_id: str, db_path: Path, *, size_only: bool = False) -> bytes | int | None:
    """The gzipped TORCH_TRACE log of a run's compile, or None if it kept none; with size_only, its size in bytes."""
    column = "length(data)" if size_only else "data"
    with _connect(db_path) as db:
        row = db.execute(f"SELECT {column} FROM torch_traces WHERE run_id=?", (run_id,)).fetchone()
    return row[0] if row else None


def profiler_trace(run_id: str, variant: str, db_path: Path) -> bytes | None:
    """The gzipped Chrome trace of a run's profiled steps of one variant, or None if it kept none."""
    with _connect(db_path) as db:
        row = db.execute("SELECT data FROM profiler_traces WHERE run_id=? AND variant=?", (run_id, variant)).fetchone()
    return row[0] if row else None

