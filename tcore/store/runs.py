"""The run store: every run, queued, running, finished or failed, in one SQLite file shared by every process.

WAL mode and short transactions make concurrent writers from several processes safe; readers
never block writers. Spec, environment, result and error are JSON columns, so a new result field
needs no migration; the columns the pages filter on are plain columns.

The store is also the run queue that tcore.scheduler schedules: a run is inserted "queued" with its
owner (a session id), the process that owns it and its device kind; claiming it (status "running"
in a free device slot) is one BEGIN IMMEDIATE transaction, so two processes never both claim a slot.
The queue lives here and nowhere else, so it survives a restart of any process.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

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
QUEUE_COLUMNS = {
    "owner": "TEXT",               # who submitted it: a browser session id, or the command-line process
    "device_slot": "TEXT",         # cpu, cuda:0, cuda:1, ...: set when the run is claimed
    "queued_at": "REAL",
    "started_at": "REAL",          # when it was claimed, just before its worker started
    "timeout_s": "REAL",           # its time limit, kept so that a process adopting it applies the same one
    "host": "TEXT",                # the owning process's host: queues, slots and pids are per host
    "owner_pid": "INTEGER",        # the process that owns it (runs its scheduler) ...
    "owner_started": "TEXT",       # ... and that process's start time, which tells a live owner from a reused pid
    "worker_started": "TEXT",      # the worker's start time, to stop a worker that a dead owner left behind
    "cancel_requested": "INTEGER NOT NULL DEFAULT 0",  # set by another process; the owner stops the worker
}
CANCELLED_IN_QUEUE = "cancelled while waiting in the queue; it never started"


class Proc(Protocol):
    """A process that owns runs (tcore.scheduler.Proc)."""
    host: str
    pid: int
    started: str | None


class QueueFull(Exception):
    """The owner already has `count` runs waiting."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


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
    owner: str | None = None
    device_slot: str | None = None
    queued_at: float | None = None
    started_at: float | None = None
    timeout_s: float | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> RunRecord:
        return cls(id=row["id"], status=row["status"], created_at=row["created_at"], label=row["label"],
                   spec=json.loads(row["spec"]), finished_at=row["finished_at"], device=row["device"],
                   error_kind=row["error_kind"], env=json.loads(row["env"] or "{}"),
                   result=json.loads(row["result"] or "{}"), error=json.loads(row["error"] or "{}"),
                   owner=row["owner"], device_slot=row["device_slot"], queued_at=row["queued_at"],
                   started_at=row["started_at"], timeout_s=row["timeout_s"])


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


class RunStore:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_path()
        if self.path.resolve() in _SCHEMA_READY and self.path.exists():
            return  # pages open the store on every rerun: set up the schema once, not under the write lock each time
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            _use_wal(db)
            db.executescript(SCHEMA)
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

    def create(self, exp, *, status: str = "running", pid: int | None = None) -> str:
        """A run outside the queue (no owner, no slot): imports and tests. Runs go through enqueue()."""
        run_id = _new_id()
        with self._write() as db:
            db.execute(
                "INSERT INTO runs (id, created_at, status, label, model, preset, spec, pid) VALUES (?,?,?,?,?,?,?,?)",
                (run_id, time.time(), status, exp.label, exp.model, exp.preset, exp.to_json(), pid))
        return run_id

    # --- the queue -------------------------------------------------------------------------------

    def enqueue(self, exp, *, device: str, owner: str, proc: Proc, timeout_s: float | None,
                max_queued: int | None = None) -> str:
        """Queue a run on `device` (cpu or cuda) for `proc` to start; QueueFull if `owner` has `max_queued` waiting.

        The count and the insert share one transaction, so two tabs of one session cannot both slip under it.
        """
        run_id = _new_id()
        with self._write() as db:
            if max_queued is not None:
                (waiting,) = db.execute("SELECT COUNT(*) FROM runs WHERE status='queued' AND owner=?",
                                        (owner,)).fetchone()
                if waiting >= max_queued:
                    raise QueueFull(waiting)
            now = time.time()
            db.execute(
                "INSERT INTO runs (id, created_at, status, label, model, preset, device, spec, owner, queued_at,"
                " timeout_s, host, owner_pid, owner_started) VALUES (?,?,'queued',?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, now, exp.label, exp.model, exp.preset, device, exp.to_json(), owner, now, timeout_s,
                 proc.host, proc.pid, proc.started))
        return run_id

    def claim_next(self, proc: Proc, device: str, slots: list[str], run_ids: set[str]) -> tuple[str, str] | None:
        """Claim the oldest queued `device` run on proc's host if it is one of proc's `run_ids` and a slot is free.

        Returns (run_id, slot), the run now "running" in that slot, or None. Only the owner of the
        oldest run may claim, so the queue is first come, first served across processes.
        """
        with self._write() as db:
            oldest = db.execute(
                "SELECT id, owner_pid, owner_started FROM runs WHERE status='queued' AND host=? AND device=?"
                " ORDER BY queued_at, rowid LIMIT 1", (proc.host, device)).fetchone()
            if (oldest is None or oldest["id"] not in run_ids
                    or (oldest["owner_pid"], oldest["owner_started"]) != (proc.pid, proc.started)):
                return None
            busy = {r[0] for r in db.execute("SELECT device_slot FROM runs WHERE status='running' AND host=?"
                                              " AND device_slot IS NOT NULL", (proc.host,))}
            free = [slot for slot in slots if slot not in busy]
            if not free:
                return None
            db.execute("UPDATE runs SET status='running', device_slot=?, started_at=? WHERE id=?",
                       (free[0], time.time(), oldest["id"]))
            return oldest["id"], free[0]

    def set_worker(self, run_id: str, pid: int, started: str | None) -> None:
        with self._write() as db:
            db.execute("UPDATE runs SET pid=?, worker_started=? WHERE id=?", (pid, started, run_id))

    def cancel_queued(self, run_id: str) -> bool:
        """Cancel a run that is still waiting; False if it has been claimed (or has ended) since."""
        with self._write() as db:
            return _cancel_if_queued(db, run_id)

    def request_cancel(self, run_id: str) -> str:
        """Cancel from any process: a queued run at once, a running one by asking its owner; returns the old status."""
        with self._write() as db:
            row = db.execute("SELECT status FROM runs WHERE id=?", (run_id,)).fetchone()
            if row is None:
                raise KeyError(f"no run {run_id!r} in {self.path}")
            if row["status"] == "queued":
                _cancel_if_queued(db, run_id)
            elif row["status"] == "running":
                db.execute("UPDATE runs SET cancel_requested=1 WHERE id=?", (run_id,))
            return row["status"]

    def cancel_requests(self, proc: Proc) -> list[str]:
        """Running runs of `proc` that another process asked to cancel."""
        with self._connect() as db:
            return [r[0] for r in db.execute(
                "SELECT id FROM runs WHERE status='running' AND cancel_requested=1 AND host=? AND owner_pid=?"
                " AND owner_started IS ?", (proc.host, proc.pid, proc.started))]

    def statuses(self, run_ids: list[str]) -> dict[str, str]:
        """run id -> status, for the ids still in the store."""
        with self._connect() as db:
            marks = ",".join("?" * len(run_ids))
            return {r[0]: r[1] for r in db.execute(f"SELECT id, status FROM runs WHERE id IN ({marks})", run_ids)}

    def queued_count(self, owner: str) -> int:
        with self._connect() as db:
            return db.execute("SELECT COUNT(*) FROM runs WHERE status='queued' AND owner=?", (owner,)).fetchone()[0]

    def queue_state(self, host: str, device: str, *, recent: int = 10) -> tuple[list[str], list[float], list[float]]:
        """For one device kind on one host: (queued ids, oldest first; start times of running runs;
        durations in s of the `recent` latest runs that ran, newest first)."""
        with self._connect() as db:
            queued = [r[0] for r in db.execute(
                "SELECT id FROM runs WHERE status='queued' AND host=? AND device=? ORDER BY queued_at, rowid",
                (host, device))]
            running = [r[0] for r in db.execute(
                "SELECT started_at FROM runs WHERE status='running' AND host=? AND device=? AND started_at IS NOT NULL",
                (host, device))]
            durations = [r[0] for r in db.execute(
                "SELECT finished_at - started_at FROM runs WHERE status IN ('finished', 'failed') AND host=?"
                " AND device=? AND started_at IS NOT NULL ORDER BY finished_at DESC LIMIT ?", (host, device, recent))]
        return queued, running, durations

    def pending(self, host: str) -> list[RunRecord]:
        """Running, then queued runs on `host`, in queue order: the room's queue, for a page to show."""
        with self._connect() as db:
            return [RunRecord.from_row(r) for r in db.execute(
                "SELECT * FROM runs WHERE status IN ('queued', 'running') AND host=?"
                " ORDER BY status DESC, queued_at, rowid", (host,))]

    def recover(self, proc: Proc, is_alive: Callable[[int, str | None], bool],
                stop_worker: Callable[[int, str | None], bool]) -> tuple[list[str], list[str]]:
        """Fix the runs of owners on proc's host that have died; returns (ids marked crashed, ids adopted).

        A running run is marked failed, kind "crashed" (its worker, if still alive, is stopped first, so it
        cannot overlap the next run); a queued run is adopted by `proc`: it stays queued, in its place.
        """
        crashed, adopted = [], []
        with self._write() as db:
            rows = db.execute(
                "SELECT id, status, owner_pid, owner_started, pid, worker_started FROM runs"
                " WHERE status IN ('queued', 'running') AND host=? AND owner_pid IS NOT NULL", (proc.host,)).fetchall()
            verdicts: dict[tuple, bool] = {}
            for row in rows:
                owner = (row["owner_pid"], row["owner_started"])
                if owner == (proc.pid, proc.started):
                    continue
                if owner not in verdicts:
                    verdicts[owner] = is_alive(*owner)
                if verdicts[owner]:
                    continue
                if row["status"] == "queued":
                    db.execute("UPDATE runs SET owner_pid=?, owner_started=? WHERE id=?",
                               (proc.pid, proc.started, row["id"]))
                    adopted.append(row["id"])
                    continue
                stopped = row["pid"] is not None and stop_worker(row["pid"], row["worker_started"])
                message = (f"the process that ran it (pid {row['owner_pid']} on {proc.host}) ended mid-run, "
                           "e.g. the app was restarted or the command line was stopped"
                           + ("; its worker, left behind, was stopped" if stopped else ""))
                db.execute("UPDATE runs SET status='failed', finished_at=?, error_kind='crashed', error=? WHERE id=?",
                           (time.time(), _json({"type": "error", "kind": "crashed", "message": message}), row["id"]))
                crashed.append(row["id"])
        return crashed, adopted

    # --- ended runs ------------------------------------------------------------------------------

    def finish(self, run_id: str, *, result: dict | None = None, env: dict | None = None,
               error: dict | None = None, trace: list | None = None, code: list[str] | None = None) -> None:
        """Record how a run ended: a result (finished) or an error event (failed), its power trace
        and the code Inductor generated for it."""
        status = "failed" if error else "finished"
        device = (result or {}).get("device") or (env or {}).get("device")
        with self._write() as db:
            db.execute(  # a failed run keeps the device kind it was queued for
                "UPDATE runs SET status=?, finished_at=?, device=COALESCE(?, device), error_kind=?, env=?, result=?,"
                " error=? WHERE id=?",
                (status, time.time(), device, (error or {}).get("kind"), _json(env), _json(result),
                 _json(error), run_id))
            if trace:
                db.execute("INSERT OR REPLACE INTO traces (run_id, samples) VALUES (?, ?)",
                           (run_id, json.dumps(trace)))
            db.executemany("INSERT OR REPLACE INTO generated_code (run_id, graph, source) VALUES (?, ?, ?)",
                           [(run_id, i, zlib.compress(src.encode())) for i, src in enumerate(code or [])])

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


def _new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def _cancel_if_queued(db: sqlite3.Connection, run_id: str) -> bool:
    error = _json({"type": "error", "kind": "cancelled", "message": CANCELLED_IN_QUEUE})
    return db.execute("UPDATE runs SET status='failed', finished_at=?, error_kind='cancelled', error=?"
                      " WHERE id=? AND status='queued'", (time.time(), error, run_id)).rowcount == 1


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)
