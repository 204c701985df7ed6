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
import stat
import sys
import time
import uuid
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tcore.store import sweeps
from tcore.store.queue import QUEUE_COLUMNS, QUEUE_SCHEMA, Proc, Queue, cancel_words, release_next
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
CREATE TABLE IF NOT EXISTS meta (  -- facts about the store itself: store_id
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
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


SQLITE_MAGIC = b"SQLite format 3\x00"


class NoSuchRun(KeyError):
    """No run with that id in this store."""

    def __str__(self) -> str:  # KeyError's own would quote the message
        return str(self.args[0])


class StoreError(Exception):
    """The run store's file cannot be used; the message says why in one sentence, and nothing was changed."""


def check_path(path: Path) -> None:
    """Refuse, before anything is created or written, a path that cannot hold a run store (StoreError).

    A folder, a device such as /dev/null, a file that is not SQLite or is cut short, a parent that is a file.
    A missing or empty file is fine: the store is made there.
    """
    where = f"cannot use {path} as the run store"
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise StoreError(f"{where}: {parent} is a file, not a folder")
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    except OSError as e:
        raise StoreError(f"{where}: {e.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{where}: it is a folder; name a file in it, e.g. {path / 'runs.sqlite'}")
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"{where}: it is not a regular file (a device, a pipe or a socket)")
    for attempt in range(3):  # a checkpoint by another process may be growing the file this moment: look again
        try:
            with open(path, "rb") as f:
                header = f.read(100)
                size = os.fstat(f.fileno()).st_size
        except OSError as e:
            raise StoreError(f"{where}: {e.strerror}") from None
        if size == 0:
            return
        if not header.startswith(SQLITE_MAGIC):
            raise StoreError(f"{where}: it is not a SQLite database (it does not start as one)")
        expected = 0
        if len(header) == 100 and header[24:28] == header[92:96]:  # the page count in the header is current
            page_size = int.from_bytes(header[16:18], "big")
            expected = int.from_bytes(header[28:32], "big") * (65536 if page_size == 1 else page_size)
        if size >= expected:
            break
        time.sleep(0.1)
    else:
        raise StoreError(f"{where}: it is cut short ({size} bytes; its header says {expected})")
    try:
        # immutable: read the file as it lies, making no -wal or -shm beside it (nothing touched if it is bad)
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, timeout=30)
        try:
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{where}: SQLite cannot read it: {e}") from None


# Store files this process has set up: resolved path -> the file's inode then. A store deleted while in use
# (its file recreated empty by the next connection) is set up again rather than left without tables.
_SCHEMA_READY: dict[Path, int] = {}


class RunStore(Queue):
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_path()
        self._ensure_schema()

    def _ensure_schema(self) -> None:
        """Set up the schema the first time this process opens the file, and again if it was deleted meanwhile.

        Cheap when nothing changed (one stat): pages open the store on every rerun.
        """
        resolved = self.path.resolve()
        try:
            info = resolved.stat()
        except OSError:
            info = None
        ready = _SCHEMA_READY.get(resolved)
        if ready is not None and info is not None and info.st_size > 0 and info.st_ino == ready:
            return
        check_path(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._open() as db:
                _use_wal(db)
                db.executescript(SCHEMA + QUEUE_SCHEMA + sweeps.SCHEMA)
            with self._open() as db:  # one process adds the columns; another opening the store at once waits
                db.execute("BEGIN IMMEDIATE")
                have = {r["name"] for r in db.execute("PRAGMA table_info(runs)")}
                for name, decl in QUEUE_COLUMNS.items():
                    if name not in have:
                        db.execute(f"ALTER TABLE runs ADD COLUMN {name} {decl}")
                db.execute("CREATE INDEX IF NOT EXISTS runs_queue ON runs(status, host, device)")
                db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)", (uuid.uuid4().hex,))
                db.execute("COMMIT")
        except OSError as e:
            raise StoreError(f"cannot use {self.path} as the run store: {e.strerror or e}") from None
        except sqlite3.Error as e:
            raise StoreError(f"cannot use {self.path} as the run store: {e}") from None
        if ready is not None:
            print(f"compile-lab: the run store {self.path} was deleted while in use; a new, empty one was made "
                  "in its place (the runs it held are gone)", file=sys.stderr)
        _SCHEMA_READY[resolved] = resolved.stat().st_ino

    @property
    def store_id(self) -> str:
        """A random id made with the store: a store deleted and made again at the same path has another."""
        with self._connect() as db:
            return db.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()[0]

    @contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA foreign_keys=ON")
        try:
            yield db
        finally:
            db.close()

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self._ensure_schema()
        with self._open() as db:
            yield db

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
               error: dict | None = None, trace: list | None = None, code: list[str] | None = None,
               owner: Proc | None = None) -> bool:
        """Record how a run ended: a result (finished) or an error event (failed), its power trace
        and the code Inductor generated for it. False if it had ended already, or, with `owner`, if another
        process owns it now: it took the run over (tcore.store.queue.Queue.recover) and its word stands."""
        status = "failed" if error else "finished"
        device = (result or {}).get("device") or (env or {}).get("device")
        mine = " AND owner_pid=? AND owner_started IS ?" if owner else ""
        with self._write() as db:
            if (error or {}).get("kind") == "cancelled":  # by its owner, or by the instructor: say which
                requested = db.execute("SELECT cancel_requested FROM runs WHERE id=?", (run_id,)).fetchone()
                error = {**error, "message": cancel_words(error.get("message", "cancelled"),
                                                          requested[0] if requested else None)}
            if db.execute(  # a failed run keeps the device kind it was queued for
                    "UPDATE runs SET status=?, finished_at=?, device=COALESCE(?, device), error_kind=?, env=?,"
                    f" result=?, error=? WHERE id=? AND status IN ('queued', 'running'){mine}",
                    (status, time.time(), device, (error or {}).get("kind"), to_json(env), to_json(result),
                     to_json(error), run_id, *((owner.pid, owner.started) if owner else ()))).rowcount == 0:
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
            raise NoSuchRun(f"no run {run_id!r} in {self.path}")
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
