"""The run store: every run, finished or failed, in one SQLite file shared by the app and the command line.

WAL mode and short transactions make concurrent writers from several processes safe; readers
never block writers. Spec, environment, result and error are JSON columns, so a new result field
needs no migration; the columns the pages filter on are plain columns.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL,          -- running | finished | failed
    error_kind TEXT,               -- tcore.events.ERROR_KINDS, when failed
    label TEXT NOT NULL,
    model TEXT NOT NULL,
    preset TEXT NOT NULL,
    device TEXT,                   -- the device it ran on (spec.device may say 'auto')
    spec TEXT NOT NULL,
    env TEXT,
    result TEXT,
    error TEXT,
    pid INTEGER
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at);
CREATE TABLE IF NOT EXISTS traces (
    run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    samples TEXT NOT NULL          -- JSON [[t_s, watts, phase, util_pct], ...]
);
"""


def default_path() -> Path:
    """$COMPILE_LAB_DB, else a per-user file under $XDG_DATA_HOME (~/.local/share)."""
    if os.environ.get("COMPILE_LAB_DB"):
        return Path(os.environ["COMPILE_LAB_DB"])
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data_home / "compile-lab" / "runs.sqlite"


@dataclass
class RunRecord:
    id: str
    status: str
    created_at: float
    label: str
    spec: dict[str, Any]
    finished_at: float | None = None
    device: str | None = None
    error_kind: str | None = None
    env: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> RunRecord:
        return cls(id=row["id"], status=row["status"], created_at=row["created_at"], label=row["label"],
                   spec=json.loads(row["spec"]), finished_at=row["finished_at"], device=row["device"],
                   error_kind=row["error_kind"], env=json.loads(row["env"] or "{}"),
                   result=json.loads(row["result"] or "{}"), error=json.loads(row["error"] or "{}"))


class RunStore:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA foreign_keys=ON")
        try:
            yield db
        finally:
            db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One short write transaction; BEGIN IMMEDIATE takes the write lock up front, so no deadlock."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def create(self, exp, *, status: str = "running", pid: int | None = None) -> str:
        run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        with self._write() as db:
            db.execute(
                "INSERT INTO runs (id, created_at, status, label, model, preset, spec, pid) VALUES (?,?,?,?,?,?,?,?)",
                (run_id, time.time(), status, exp.label, exp.model, exp.preset, exp.to_json(), pid))
        return run_id

    def finish(self, run_id: str, *, result: dict | None = None, env: dict | None = None,
               error: dict | None = None, trace: list | None = None) -> None:
        """Record how a run ended: a result (finished) or an error event (failed), and its power trace."""
        status = "failed" if error else "finished"
        device = (result or {}).get("device") or (env or {}).get("device")
        with self._write() as db:
            db.execute(
                "UPDATE runs SET status=?, finished_at=?, device=?, error_kind=?, env=?, result=?, error=? WHERE id=?",
                (status, time.time(), device, (error or {}).get("kind"), _json(env), _json(result),
                 _json(error), run_id))
            if trace:
                db.execute("INSERT OR REPLACE INTO traces (run_id, samples) VALUES (?, ?)",
                           (run_id, json.dumps(trace)))

    def get(self, run_id: str) -> RunRecord:
        with self._connect() as db:
            row = db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise KeyError(f"no run {run_id!r} in {self.path}")
        return RunRecord.from_row(row)

    def list(self, *, limit: int | None = None) -> list[RunRecord]:
        """Runs, newest first."""
        sql = "SELECT * FROM runs ORDER BY created_at DESC" + (" LIMIT ?" if limit else "")
        with self._connect() as db:
            return [RunRecord.from_row(r) for r in db.execute(sql, (limit,) if limit else ())]

    def trace(self, run_id: str) -> list[list]:
        with self._connect() as db:
            row = db.execute("SELECT samples FROM traces WHERE run_id=?", (run_id,)).fetchone()
        return json.loads(row["samples"]) if row else []

    def delete(self, run_id: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM runs WHERE id=?", (run_id,))

    def dataframe(self):
        """One row per run: id, status, label, times, every spec field and every scalar result field."""
        import pandas as pd

        rows = []
        for rec in self.list():
            row = {"id": rec.id, "status": rec.status, "label": rec.label, "created_at": rec.created_at,
                   "error_kind": rec.error_kind, "gpu": rec.env.get("gpu"), **rec.spec}
            row.update({k: v for k, v in rec.result.items() if not isinstance(v, (list, dict))})
            rows.append(row)
        frame = pd.DataFrame(rows)
        if not frame.empty:
            frame["created_at"] = pd.to_datetime(frame["created_at"], unit="s")
        return frame


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)
