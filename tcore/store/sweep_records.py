"""Sweeps in the run store: a sweep is a batch of queued runs that the store knows by a sweep id.

Its runs are queued together, each with its place in the sweep; all but the first are "held": they
wait for the sweep's previous run to end and then join the back of the queue (run_ends.py,
wherever a run ends), so a long sweep takes turns with everyone else's runs instead of holding the room.
Everything lives in the store, so a sweep and its matrix outlive an app restart: the queue adopts
its runs like any others, and the matrix is rebuilt from them.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

from tcore.store.connection import Part
from tcore.store.records import RunRecord
from tcore.store.run_queue import cancel_if_queued


@dataclass
class SweepRecord:
    id: str
    created_at: float
    owner: str | None
    label: str
    size: int
    skipped: list[str]
    cancelled: bool
    runs: list[RunRecord] = field(default_factory=list)  # in the sweep's order

    @property
    def ended_count(self) -> int:
        """Its runs that have ended, finished or failed."""
        return sum(1 for r in self.runs if r.status in ("finished", "failed"))

    @property
    def done(self) -> bool:
        """No run of it is queued or running any more."""
        return self.ended_count == len(self.runs)

    @property
    def finished_count(self) -> int:
        return sum(1 for r in self.runs if r.status == "finished")


class Sweeps(Part):
    """Sweeps: made, read back, cancelled; and a sweep's next run released when one of it ends."""

    def create_sweep(self, *, owner: str | None, label: str, size: int, skipped: list[str]) -> str:
        sweep_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:4]
        with self._write() as db:
            db.execute("INSERT INTO sweeps (id, created_at, owner, label, size, skipped) VALUES (?,?,?,?,?,?)",
                       (sweep_id, time.time(), owner, label, size, json.dumps(skipped)))
        return sweep_id

    def sweep(self, sweep_id: str) -> SweepRecord:
        with self._connect() as db:
            row = db.execute("SELECT * FROM sweeps WHERE id=?", (sweep_id,)).fetchone()
            if row is None:
                raise KeyError(f"no sweep {sweep_id!r} in {self.path}")
            runs = [RunRecord.from_row(r) for r in db.execute(
                "SELECT * FROM runs WHERE sweep_id=? ORDER BY sweep_index", (sweep_id,))]
        return SweepRecord(id=row["id"], created_at=row["created_at"], owner=row["owner"], label=row["label"],
                           size=row["size"], skipped=json.loads(row["skipped"]), cancelled=bool(row["cancelled"]),
                           runs=runs)

    def latest_sweep(self, owner: str | None = None) -> str | None:
        """The newest sweep's id (of `owner`, when given), or None."""
        where, args = ("WHERE owner=?", (owner,)) if owner is not None else ("", ())
        with self._connect() as db:
            row = db.execute(f"SELECT id FROM sweeps {where} ORDER BY created_at DESC, rowid DESC LIMIT 1",
                             args).fetchone()
        return row[0] if row else None

    def active_sweep_count(self) -> int:
        """Sweeps with a run still queued or running."""
        with self._connect() as db:
            return db.execute("SELECT COUNT(DISTINCT sweep_id) FROM runs WHERE sweep_id IS NOT NULL"
                              " AND status IN ('queued', 'running')").fetchone()[0]

    def cancel_sweep(self, sweep_id: str) -> list[str]:
        """Cancel a sweep: its waiting runs never start. Returns the ids of its running runs, for the caller to stop."""
        with self._write() as db:
            db.execute("UPDATE sweeps SET cancelled=1 WHERE id=?", (sweep_id,))
            for (run_id,) in db.execute("SELECT id FROM runs WHERE sweep_id=? AND status='queued'",
                                        (sweep_id,)).fetchall():
                cancel_if_queued(db, run_id, "its sweep was cancelled before it started")
            return [r[0] for r in db.execute("SELECT id FROM runs WHERE sweep_id=? AND status='running'",
                                             (sweep_id,))]
