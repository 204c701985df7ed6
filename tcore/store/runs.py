"""The run store: every run, queued, running, finished or failed, in one SQLite file shared by every process.

WAL mode and short transactions make concurrent writers from several processes safe; readers
never block writers. Spec, environment, result and error are JSON columns, so a new result field
needs no migration; the columns the pages filter on are plain columns.

The store is also the run queue (its operations are in queue.py, its scheduling in tcore.lab.scheduler)
and knows sweeps (sweeps.py). RunStore opens the file, creates or migrates the schema, and keeps runs:
their outcome, power trace and generated code.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tcore.store import sweeps
from tcore.store.queue import QUEUE_COLUMNS, QUEUE_SCHEMA, Queue, cancel_words, release_next
from tcore.store.records import RunRecord, to_json
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL,          -- queued | running | finished | failed
    error_kind TEXT,               -- tcore.events.ERROR_KINDS, when failed
    label TEXT NOT NULL,
    model TEXT NOT NULL,
    preset TEXT NOT NULL,
    device TEXT,                   -- the device kind it runs on, cpu or cuda (spec.device may say 'auto')
    spec TEXT NOT NULL,
    env TEXT,
    result TEXT,
    error TEXT,
    pid INTEGER                    -- the worker process, once started
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at);
CREATE TABLE IF NOT EXISTS traces (
    run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    samples TEXT NOT NULL          -- JSON [[t_s, watts, phase, util_pct], ...]
);
CREATE TABLE IF NOT EXISTS generated_code (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    graph INTEGER NOT NULL,        -- the order Inductor generated the graphs in
    source BLOB NOT NULL,          -- zlib-compressed source: Python wrapper with Triton or C++ kernels
    PRIMARY KEY (run_id, graph)
);
"""
# The queue's columns: added with ALTER TABLE, so a store written before the queue keeps its runs.


def default_path() -> Path:
    """$COMPILE_LAB_DB, else a per-user file under $XDG_DATA_HOME (~/.local/share)."""
    if os.environ.get("COMPILE_LAB_DB"):
        return Path(os.environ["COMPILE_LAB_DB"])
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data_home / "compile-lab" / "runs.sqlite"


def _use_wal(db: sqlite3.Connection, wait_s: float = 30.0) -> None:
    """Switch the store to WAL, waiting for any other process that is creating it at the same moment.

    Switching the journal mode needs the file to itself, and SQLite answers "database is locked" at once
    there rather than through the busy timeout, so two processes opening a new store together would
    otherwise see one of them fail. The mode is kept in the file: once one process has set it, it is done.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if db.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal":
                return
            reason = "SQLite kept another journal mode"
        except sqlite3.OperationalError as e:
            if "locked" not in str(e):
                raise
            reason = str(e)
        if time.monotonic() > deadline:
            raise sqlite3.OperationalError(f"could not switch the run store to WAL within {wait_s:.0f} s: {reason}")
        time.sleep(0.02)


_SCHEMA_READY: set[Path] = set()  # store files this process has created or migrated

class RunStore(Queue):
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_path()
        if self.path.resolve() in _SCHEMA_READY and self.path.exists():
            return  # pages open the store on every rerun: set up the schema once, not under the write lock each time
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            _use_wal(db)
            db.executescript(SCHEMA + QUEUE_SCHEMA + sweeps.SCHEMA)
        with self._write() as db:  # one process adds the columns; another opening the store at once waits
            have = {r["name"] for r in db.execute("PRAGMA table_info(runs)")}
            for name, decl in QUEUE_COLUMNS.items():
                if name not in have:
                    db.execute(f"ALTER TABLE runs ADD COLUMN {name} {decl}")
            db.execute("CREATE INDEX IF NOT EXISTS runs_queue ON runs(status, host, device)")
        _SCHEMA_READY.add(self.path.resolve())

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
    # --- ended runs ------------------------------------------------------------------------------

    def finish(self, run_id: str, *, result: dict | None = None, env: dict | None = None,
               error: dict | None = None, trace: list | None = None, code: list[str] | None = None) -> bool:
        """Record how a run ended: a result (finished) or an error event (failed), its power trace
        and the code Inductor generated for it. False if it had ended already: another process took it
        over (tcore.store.queue.Queue.recover) and its reason stands."""
        status = "failed" if error else "finished"
        device = (result or {}).get("device") or (env or {}).get("device")
        with self._write() as db:
            if (error or {}).get("kind") == "cancelled":  # by its owner, or by the instructor: say which
                requested = db.execute("SELECT cancel_requested FROM runs WHERE id=?", (run_id,)).fetchone()
                error = {**error, "message": cancel_words(error.get("message", "cancelled"),
                                                          requested[0] if requested else None)}
            if db.execute(  # a failed run keeps the device kind it was queued for
                    "UPDATE runs SET status=?, finished_at=?, device=COALESCE(?, device), error_kind=?, env=?,"
                    " result=?, error=? WHERE id=? AND status IN ('queued', 'running')",
                    (status, time.time(), device, (error or {}).get("kind"), to_json(env), to_json(result),
                     to_json(error), run_id)).rowcount == 0:
                return False
            release_next(db, run_id)
            if trace:
                db.execute("INSERT OR REPLACE INTO traces (run_id, samples) VALUES (?, ?)",
                           (run_id, json.dumps(trace)))
            db.executemany("INSERT OR REPLACE INTO generated_code (run_id, graph, source) VALUES (?, ?, ?)",
                           [(run_id, i, zlib.compress(src.encode())) for i, src in enumerate(code or [])])
        return True

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

    def code(self, run_id: str) -> list[str]:
        """The source of each graph Inductor generated for the run, in order."""
        with self._connect() as db:
            rows = db.execute("SELECT source FROM generated_code WHERE run_id=? ORDER BY graph", (run_id,))
            return [zlib.decompress(row["source"]).decode() for row in rows]

    def delete(self, run_id: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM runs WHERE id=?", (run_id,))

    def dataframe(self):
        """One row per run: id, status, label, times, every spec field and every scalar result field."""
        import pandas as pd

        rows = []
        for rec in self.list():
            row = {"id": rec.id, "status": rec.status, "label": rec.label, "created_at": rec.created_at,
                   "error_kind": rec.error_kind, "gpu": rec.env.get("gpu"), **rec.spec,
                   "device": rec.device or rec.spec.get("device")}  # where it ran, not the spec's "auto"
            row.update({k: v for k, v in rec.result.items() if not isinstance(v, (list, dict))})
            rows.append(row)
        frame = pd.DataFrame(rows)
        if not frame.empty:
            frame["created_at"] = pd.to_datetime(frame["created_at"], unit="s")
        return frame
