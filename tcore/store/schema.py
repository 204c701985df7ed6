"""Every table of the run store, in one place, and the one function that creates or upgrades them.

create() runs once per store file per process, when the store is opened (tcore.store.connection); reads and
writes never run DDL. A store that can only be read is not changed: missing() says what it lacks, and it must lack
nothing. Tables are created IF NOT EXISTS and the queue's columns are added to `runs` with
ALTER TABLE, so a store written by an older version keeps its runs and gains what it lacks.
"""
from __future__ import annotations

import json
import re
import sqlite3
import time
import uuid

TABLES = """
-- Runs (tcore.store.run_outcomes): every run, queued, running, finished or failed.
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL,          -- queued | running | finished | failed
    error_kind TEXT,               -- tcore.experiment.protocol.ERROR_KINDS, when failed
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
CREATE TABLE IF NOT EXISTS traces (  -- a run's power samples (Runs.power_samples); renaming it needs a migration
    run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    samples TEXT NOT NULL          -- JSON [[t_s, watts, phase, util_pct], ...]
);
CREATE TABLE IF NOT EXISTS generated_code (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    graph INTEGER NOT NULL,        -- the order Inductor generated the graphs in
    source BLOB NOT NULL,          -- zlib-compressed source: Python wrapper with Triton or C++ kernels
    PRIMARY KEY (run_id, graph)
);
CREATE TABLE IF NOT EXISTS meta (  -- facts about the store itself: store_id, results_version (Runs.rewrite_results)
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- The queue (tcore.store.run_queue): the processes that own runs say they are alive.
CREATE TABLE IF NOT EXISTS owners (  -- each process that owns runs says it is alive (Owners.heartbeat)
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started TEXT NOT NULL,           -- the process's start time ('' where there is no /proc)
    seen_at REAL NOT NULL,
    PRIMARY KEY (host, pid, started)
);

-- The device lease (tcore.store.devices): runs that share a device hold it alone, in turn, for what needs it alone.
CREATE TABLE IF NOT EXISTS device_holds (  -- who holds each device slot now
    host TEXT NOT NULL,
    slot TEXT NOT NULL,              -- cuda:0, cuda:1, ... (tcore.lab.queue.scheduler.device_slots)
    run_id TEXT NOT NULL,
    purpose TEXT NOT NULL,           -- what for: tcore.lab.queue.lease.PURPOSES
    since REAL NOT NULL,
    PRIMARY KEY (host, slot)
);
CREATE TABLE IF NOT EXISTS device_asks (  -- runs waiting for their slot, one ask each
    run_id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    slot TEXT NOT NULL,
    purpose TEXT NOT NULL,
    rank INTEGER NOT NULL,           -- lower goes first; then the run queued first
    asked_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS device_use (  -- every hold, once taken: the evidence that no two overlapped
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    slot TEXT NOT NULL,
    purpose TEXT NOT NULL,
    asked_at REAL NOT NULL,
    taken_at REAL NOT NULL,
    released_at REAL                 -- NULL while held
);
CREATE INDEX IF NOT EXISTS device_use_run ON device_use(run_id);

CREATE TABLE IF NOT EXISTS quiet_holds (  -- a run timed now: every lab process on its host holds its slot still
    run_id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    slot TEXT NOT NULL,
    pid INTEGER NOT NULL,            -- the lab process whose run it is, with its start time: a dead one holds no one
    started TEXT,
    until REAL NOT NULL              -- epoch seconds: past it, no one holds still for it, whatever happened to it
);

-- The lab's state (tcore.store.lab_state).
CREATE TABLE IF NOT EXISTS lab_state (  -- what the instructor set: the queue paused, limits changed
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,             -- JSON
    set_at REAL NOT NULL
);

-- Sweeps (tcore.store.sweep_records): a batch of queued runs known by one id.
CREATE TABLE IF NOT EXISTS sweeps (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    owner TEXT,                    -- the browser session or process that started it
    label TEXT NOT NULL,           -- what it crosses, in words
    size INTEGER NOT NULL,         -- how many runs it has
    skipped TEXT NOT NULL,         -- JSON list: the combinations that could not run, each with why
    cancelled INTEGER NOT NULL DEFAULT 0
);

-- People (tcore.store.participants): what a participant typed and left set, under their owner id (ui.panels.people).
CREATE TABLE IF NOT EXISTS people (
    owner TEXT PRIMARY KEY,        -- as runs.owner holds it: the name's lower-case slug, tag and secret
    name TEXT,                     -- the name as they typed it ("Ada L"), shown where the slug ("ada-l") would be
    settings TEXT,                 -- JSON: the Run and Sweep pages' knobs as they last left them, for a reload
    set_at REAL NOT NULL
);

-- What a run's compile left behind (tcore.store.artifacts).
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
CREATE TABLE IF NOT EXISTS model_cards (  -- a model file as a worker read it (tcore.store.model_cards)
    model TEXT PRIMARY KEY,        -- file:PATH.py
    card TEXT NOT NULL,            -- JSON: title, description, presets, default batch, parameter counts, mtime_ns
    described_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS torch_traces (
    run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    data BLOB NOT NULL            -- the compile's TORCH_TRACE log, gzipped: what tlparse reads
                                  -- (tcore.lab.outputs.tlparse)
);
"""
# A run that a version of the lab without the queue left under way (its app stopped mid-run): no process records how
# it ended, and no recovery finds it (it names no owner process), so the store's upgrade ends it.
LEFT_BY_AN_OLDER_VERSION = ("an older version of the lab, from before its queue, left this run under way when it "
                            "stopped; it never recorded how the run ended")

# The queue's columns of `runs`: added with ALTER TABLE, so a store written before the queue keeps its runs.
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
    "sweep_id": "TEXT",            # the sweep it belongs to (tcore.store.sweep_records) ...
    "sweep_index": "INTEGER",      # ... and its place in that sweep
    "held": "INTEGER NOT NULL DEFAULT 0",  # 1: queued behind its sweep's previous run, not yet taking its turn
    # its device memory estimate (tcore.lab.policy.memory); NULL: unknown, so it runs alone
    "memory_gib": "REAL",
}


def missing(db: sqlite3.Connection) -> list[str]:
    """What create() would add to this store, in words; [] for a store it has set up. A store that can only be read is
    used as it is, so it must lack nothing."""
    have = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    lacking = [f"table {name}" for name in re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", TABLES) if name not in have]
    if "runs" in have:
        columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
        lacking += [f"column runs.{name}" for name in QUEUE_COLUMNS if name not in columns]
    if "meta" in have and db.execute("SELECT 1 FROM meta WHERE key='store_id'").fetchone() is None:
        lacking.append("its store id")
    return lacking


def create(db: sqlite3.Connection) -> bool:
    """Create the tables a store lacks and add the columns its `runs` lacks, on an autocommit connection; whether it
    changed anything. A store set up already is only read: one that another process holds write-locked opens all the
    same."""
    indexed = db.execute("SELECT 1 FROM sqlite_master WHERE type='index' AND name='runs_queue'").fetchone()
    if indexed and not missing(db):
        return False
    db.executescript(TABLES)
    db.execute("BEGIN IMMEDIATE")  # one process adds the columns; another opening the store at once waits
    try:
        have = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
        for name, decl in QUEUE_COLUMNS.items():
            if name not in have:
                db.execute(f"ALTER TABLE runs ADD COLUMN {name} {decl}")
        if "owner_pid" not in have:  # a store from before the queue: what it says is under way, nothing will end
            db.execute("UPDATE runs SET status='failed', error_kind='crashed', finished_at=?, error=? WHERE status IN"
                       " ('queued', 'running')", (time.time(), json.dumps({"type": "error", "kind": "crashed",
                                                                          "message": LEFT_BY_AN_OLDER_VERSION})))
        db.execute("CREATE INDEX IF NOT EXISTS runs_queue ON runs(status, host, device)")
        db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)", (uuid.uuid4().hex,))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return True
