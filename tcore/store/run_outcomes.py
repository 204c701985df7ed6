"""Runs in the store: how a run ended (its outcome, power samples and generated code), and reading runs back.

Spec, environment, result and error are JSON columns, so a new result field needs no migration; the columns
the pages filter on are plain columns. Queueing, claiming and cancelling a run are the queue's (run_queue.py).
"""
from __future__ import annotations

import json
import sqlite3
import time
import zlib
from typing import Callable

from tcore.experiment import comparable
from tcore.store.connection import StoreFile
from tcore.store.lab_state import SPREAD_RESET
from tcore.store.records import RunRecord, Unreadable, json_field, json_object, to_json
from tcore.store.run_ends import ended
from tcore.store.run_queue import Proc, cancel_words


def _results_version(db: sqlite3.Connection) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key='results_version'").fetchone()
    return row[0] if row else None


class NoSuchRun(KeyError):
    """No run with that id in this store."""

    def __str__(self) -> str:  # KeyError's own would quote the message
        return str(self.args[0])


class Runs(StoreFile):
    """The store's file and its runs as records: how each ended, and reading them back."""

    def finish(self, run_id: str, *, result: dict | None = None, env: dict | None = None,
               error: dict | None = None, power_samples: list | None = None, code: list[str] | None = None,
               owner: Proc | None = None) -> bool:
        """Record how a run ended: a result (finished) or an error event (failed), its power samples
        ([[t_s, watts, phase, util_pct], ...]) and the code Inductor generated for it. False if it had ended
        already, or, with `owner`, if another process owns it now: it took the run over
        (tcore.store.owners.Owners.recover) and its word stands."""
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
            ended(db, run_id)  # a sweep's next run takes its turn, its device is freed
            if power_samples:  # table `traces` is the power samples' (its old name: renaming it needs a migration)
                db.execute("INSERT OR REPLACE INTO traces (run_id, samples) VALUES (?, ?)",
                           (run_id, json.dumps(power_samples)))
            db.executemany("INSERT OR REPLACE INTO generated_code (run_id, graph, source) VALUES (?, ?, ?)",
                           [(run_id, i, zlib.compress(src.encode())) for i, src in enumerate(code or [])])
        return True

    def rewrite_results(self, upgrade: Callable[[dict, dict], dict], version: str, *, wait: bool = True) -> int:
        """Rewrite every stored result through `upgrade(result, spec)`, once per `version`: the lab hands the store the
        figures' upgrade (tcore.lab.outputs.stored_results), so the store returns results as it keeps them and leans on
        nothing that reads them. Returns how many results changed; 0 once this version is written. wait=False:
        "database is locked" at once where another process holds the write lock."""
        with self._connect() as db:  # a read first: the write lock only where there is something to write
            if _results_version(db) == version:
                return 0
        changed = 0
        with self._write(wait=wait) as db:
            if _results_version(db) == version:  # another process wrote it meanwhile
                return 0
            for run_id, text, spec in db.execute(
                    "SELECT id, result, spec FROM runs WHERE result IS NOT NULL").fetchall():
                try:
                    stored, spec = json_object(text, "result"), json_object(spec, "spec")
                except Unreadable:  # left as it is: it reads as unreadable (RunRecord.from_row), and can be deleted
                    continue
                upgraded = upgrade(stored, spec)
                if upgraded != stored:
                    db.execute("UPDATE runs SET result=? WHERE id=?", (to_json(upgraded), run_id))
                    changed += 1
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('results_version', ?)", (version,))
        return changed

    def write_again(self, record: RunRecord, *, proc: Proc) -> bool:
        """Write anew, running under `proc`, a run whose row the store lost while proc ran it (its -wal file deleted
        under the connections that held it: the rows written since the last checkpoint go with it, though the store
        itself is intact), so that its outcome can be recorded as any run's. False, writing nothing, where the row
        exists."""
        spec = record.spec or {}
        with self._write() as db:
            return db.execute(
                "INSERT OR IGNORE INTO runs (id, created_at, status, label, model, preset, device, spec, owner,"
                " queued_at, started_at, host, owner_pid, owner_started)"
                " VALUES (?,?,'running',?,?,?,?,?,?,?,?,?,?,?)",
                (record.id, record.created_at, record.label, spec.get("model"), spec.get("preset"),
                 record.device or spec.get("device"), json.dumps(spec), record.owner, record.created_at, time.time(),
                 proc.host, proc.pid, proc.started)).rowcount == 1

    def get(self, run_id: str) -> RunRecord:
        with self._connect() as db:
            row = db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise NoSuchRun(f"no run {run_id!r} in {self.path}")
        return RunRecord.from_row(row)

    def list(self, *, limit: int | None = None, unreadable: bool = False) -> list[RunRecord]:
        """Runs, newest first (of the `limit` newest rows). A run whose row cannot be read (RunRecord.unreadable) is
        left out, unless `unreadable`: then it is listed where it stands, marked, for a listing to show and a person
        to delete; what reads runs for their figures never sees one."""
        sql = "SELECT * FROM runs ORDER BY created_at DESC" + (" LIMIT ?" if limit else "")
        with self._connect() as db:
            records = [RunRecord.from_row(r) for r in db.execute(sql, (limit,) if limit else ())]
        return records if unreadable else [r for r in records if not r.unreadable]

    def same_setting(self, spec: dict, device: str | None, env: dict, *, before: float | None = None,
                     exclude: str | None = None, limit: int = 200,
                     ignoring: frozenset[str] = frozenset()) -> list[RunRecord]:
        """Finished runs of the same setting on the same machine (tcore.experiment.comparable), newest `limit` of them,
        oldest first; with `before`, only those created earlier; `exclude` leaves one run out (the run itself);
        `ignoring` names fields that may differ (the batch size, for the runs of a setting at other batches)."""
        # The model and batch narrow the rows in SQL; the whole setting and the machine are compared below.
        any_batch = "batch_size" in ignoring
        sql = (f"SELECT * FROM runs WHERE status='finished' AND device IS ? AND {json_field('spec', '$.model')} IS ?"
               + ("" if any_batch else f" AND {json_field('spec', '$.batch_size')} IS ?")
               + (" AND created_at < ?" if before else ""))
        args = (device, spec.get("model"), *(() if any_batch else (spec.get("batch_size"),)),
                *((before,) if before else ()))
        with self._connect() as db:
            rows = db.execute(sql + " ORDER BY created_at DESC", args).fetchall()
        here = comparable.machine(env, device)
        found = []
        for row in rows:
            rec = RunRecord.from_row(row)
            if rec.unreadable or rec.id == exclude:
                continue
            if comparable.machine(rec.env, rec.device) == here and comparable.same_setting(rec.spec, spec, ignoring):
                found.append(rec)
                if len(found) >= limit:
                    break
        return found[::-1]

    def headlines(self, device: str | None, *,
                  limit: int = 500) -> list[tuple[dict, dict, float, str | None, float | None, float]]:
        """The latest `limit` finished runs on `device` with a headline, newest first, as (spec, env, speedup, the
        kind of run its interval was made for: tcore.figures.rerun.kind, the run's own spread in %:
        speedup_within_pct, when it was created): what the machine's spread between processes is learned from
        (tcore.analysis.history.machine_spread). A run with no interval of its own (too few rounds) is left out: its
        headline is one or two rounds' ratio, which says nothing of where a process settles. Runs created before
        the instructor's last reset of that spread (lab_state SPREAD_RESET) are left out. Reads only those columns'
        parts, not whole results."""
        speedup = json_field("result", "$.speedup")
        with self._connect() as db:
            rows = db.execute(
                f"SELECT spec, env, {speedup}, {json_field('result', '$.speedup_kind')},"
                f" {json_field('result', '$.speedup_within_pct')}, created_at"
                f" FROM runs WHERE status='finished' AND device IS ? AND {speedup} IS NOT NULL"
                f" AND {json_field('result', '$.speedup_low')} IS NOT NULL"
                " AND created_at >= COALESCE((SELECT json_extract(value, '$.at') FROM lab_state WHERE key=?), 0)"
                " ORDER BY created_at DESC LIMIT ?", (device, SPREAD_RESET, limit)).fetchall()
        found = []
        for r in rows:
            try:
                found.append((json_object(r[0], "spec"), json_object(r[1], "env"), r[2], r[3], r[4], r[5]))
            except Unreadable:  # an unreadable run says nothing of the spread
                pass
        return found

    def power_samples(self, run_id: str) -> list[list]:
        """The run's power samples, [[t_s, watts, phase, util_pct], ...], or [] if it kept none."""
        with self._connect() as db:  # table `traces`: the power samples' old name, kept (renaming needs a migration)
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
        """One row per run: id, status, label, times, every spec field and every scalar result field. A cancelled
        run's status reads "cancelled" (the store keeps it as a failure of kind "cancelled"): nothing went wrong. A
        run whose row cannot be read is a row of its plain columns, its status "unreadable": listed, so that it can be
        found and deleted, and among no status a page charts."""
        import pandas as pd

        rows = []
        for rec in self.list(unreadable=True):
            status = ("unreadable" if rec.unreadable else
                      "cancelled" if rec.status == "failed" and rec.error_kind == "cancelled" else rec.status)
            row = {"id": rec.id, "status": status, "label": rec.label, "created_at": rec.created_at,
                   "error_kind": rec.error_kind, "gpu": rec.env.get("gpu"), **rec.spec,
                   "device": rec.device or rec.spec.get("device")}  # where it ran, not the spec's "auto"
            row.update({k: v for k, v in rec.result.items() if not isinstance(v, (list, dict))})
            rows.append(row)
        frame = pd.DataFrame(rows)
        if not frame.empty:
            frame["created_at"] = pd.to_datetime(frame["created_at"], unit="s")
        return frame
