"""What a run's compile left behind, in the store: its compile artifacts (the "mega-cache"), its profiled steps'
Chrome traces and its compile's TORCH_TRACE log, each kept beside the run and deleted with it.

Which artifacts a run should load, and reading what its worker saved from disk, is the lab's
(tcore.lab.outputs.artifact_handover).
"""
from __future__ import annotations

import json
import time
from typing import Any

from tcore.store.connection import Part


class Artifacts(Part):
    """Blobs a run kept: compile artifacts keyed by what was compiled, profiler traces and TORCH_TRACE logs."""

    def newest_artifacts(self, compile_key: str, *, with_data: bool) -> tuple | None:
        """(run_id, made_on JSON[, data]) of the newest artifacts saved for `compile_key`, or None."""
        columns = "run_id, made_on" + (", data" if with_data else "")
        with self._connect() as db:
            return db.execute(f"SELECT {columns} FROM compile_artifacts WHERE compile_key=? "
                              "ORDER BY created_at DESC LIMIT 1", (compile_key,)).fetchone()

    def keep_artifacts(self, run_id: str, artifacts: tuple[str, dict[str, Any], bytes] | None, *,
                       profiler_traces: dict[str, bytes]) -> None:
        """Keep what a finished run saved, in one transaction: its compile artifacts as (compile key, made on,
        data), None if it saved none, and its profiler traces, variant -> gzipped Chrome trace."""
        with self._write() as db:
            if artifacts is not None:
                key, made_on, data = artifacts
                db.execute("INSERT OR REPLACE INTO compile_artifacts VALUES (?,?,?,?,?)",
                           (run_id, key, json.dumps(made_on), time.time(), data))
            db.executemany("INSERT OR REPLACE INTO profiler_traces VALUES (?,?,?)",
                           [(run_id, variant, trace) for variant, trace in profiler_traces.items()])

    def keep_torch_trace(self, run_id: str, data: bytes) -> None:
        """Keep a run's gzipped TORCH_TRACE log."""
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO torch_traces VALUES (?,?)", (run_id, data))

    def saved_artifacts(self, run_id: str, *, size_only: bool = False) -> bytes | int | None:
        """The compile artifacts a run saved (torch.compiler.save_cache_artifacts()), or None; with size_only,
        their size in bytes, without reading them (Flux's run to hundreds of MB)."""
        column = "length(data)" if size_only else "data"
        with self._connect() as db:
            row = db.execute(f"SELECT {column} FROM compile_artifacts WHERE run_id=?", (run_id,)).fetchone()
        return row[0] if row else None

    def torch_trace(self, run_id: str, *, size_only: bool = False) -> bytes | int | None:
        """The gzipped TORCH_TRACE log of a run's compile, or None if it kept none; with size_only, its size in
        bytes."""
        column = "length(data)" if size_only else "data"
        with self._connect() as db:
            row = db.execute(f"SELECT {column} FROM torch_traces WHERE run_id=?", (run_id,)).fetchone()
        return row[0] if row else None

    def profiler_trace(self, run_id: str, variant: str) -> bytes | None:
        """The gzipped Chrome trace of a run's profiled steps of one variant, or None if it kept none."""
        with self._connect() as db:
            row = db.execute("SELECT data FROM profiler_traces WHERE run_id=? AND variant=?",
                             (run_id, variant)).fetchone()
        return row[0] if row else None
