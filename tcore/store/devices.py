"""Who holds each device, who waits for it, and when each run held it: the device lease, kept in the store.

Several runs may share a device slot (tcore.lab.queue.room decides how many): each compiles on the CPU while another
measures, and holds the device alone only for the phases that another run would disturb or be disturbed by (the
eager warm-up, the compiled code's first runs and warm-up, the timed rounds, the profiling pass). A hold is one row
per slot, written in one BEGIN IMMEDIATE transaction, so two processes never both hold a slot; a run that wants the
device writes an ask, and a free slot goes to the best ask: the lowest rank (tcore.lab.queue.lease names them), then the
run that was queued first. Every hold is logged as a span (asked, taken, released), the timeline's and the tests'
evidence that no two runs' exclusive phases overlapped.

A hold whose run is no longer running (it ended, crashed, or its process died and recovery ended it) is stale: the
next transaction that looks at the slot deletes it. A run's end (finish, a cancel in the queue, recovery) drops its
hold and its asks in the same transaction that records the end.
"""
from __future__ import annotations

import sqlite3
import time
from typing import NamedTuple

from tcore.store.connection import Part


class Hold(NamedTuple):
    """The run that holds a slot now, what for, and since when (epoch seconds)."""
    run_id: str
    purpose: str
    since: float


class QuietHold(NamedTuple):
    """A run timed now on `host`'s `slot` by the lab process (pid, started): the runs of that slot hold still for it
    in every lab process on the host, until it ends or `until` (epoch seconds) passes (tcore.lab.queue.quiet)."""
    run_id: str
    host: str
    slot: str
    pid: int
    started: str | None
    until: float


class Ask(NamedTuple):
    """A run waiting for a slot: what for, its rank (lower first), since when it asked."""
    run_id: str
    purpose: str
    rank: int
    asked_at: float


class Span(NamedTuple):
    """One time a run held its device: asked, taken and (once done) released, epoch seconds."""
    slot: str
    purpose: str
    asked_at: float
    taken_at: float
    released_at: float | None


class Devices(Part):
    """The device lease: ask, take when it is this run's turn, release; the holder and the waiters for the pages."""

    def ask_device(self, host: str, slot: str, run_id: str, purpose: str, rank: int) -> None:
        """`run_id` wants `slot` for `purpose` (one ask per run: a new one replaces its last)."""
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO device_asks (run_id, host, slot, purpose, rank, asked_at)"
                       " VALUES (?,?,?,?,?,?)", (run_id, host, slot, purpose, rank, time.time()))

    def take_device(self, host: str, slot: str, run_id: str) -> bool:
        """Take `slot` for `run_id` if it is free and this run's ask is the best one waiting; True once held."""
        with self._connect() as db:  # a read first: a slot held by a running run is answered without the write lock
            holder = db.execute("SELECT h.run_id FROM device_holds h JOIN runs r ON r.id = h.run_id WHERE h.host=? AND"
                                " h.slot=? AND r.status='running'", (host, slot)).fetchone()
        if holder is not None and holder[0] != run_id:
            return False
        with self._write() as db:
            _drop_stale(db, host, slot)
            holder = db.execute("SELECT run_id FROM device_holds WHERE host=? AND slot=?", (host, slot)).fetchone()
            if holder is not None:
                return holder[0] == run_id
            best = db.execute(
                "SELECT a.run_id, a.purpose, a.asked_at FROM device_asks a JOIN runs r ON r.id = a.run_id"
                " WHERE a.host=? AND a.slot=? AND r.status='running'"
                " ORDER BY a.rank, r.rowid LIMIT 1", (host, slot)).fetchone()
            if best is None or best["run_id"] != run_id:
                return False
            now = time.time()
            db.execute("INSERT INTO device_holds (host, slot, run_id, purpose, since) VALUES (?,?,?,?,?)",
                       (host, slot, run_id, best["purpose"], now))
            db.execute("DELETE FROM device_asks WHERE run_id=?", (run_id,))
            db.execute("INSERT INTO device_use (run_id, slot, purpose, asked_at, taken_at) VALUES (?,?,?,?,?)",
                       (run_id, slot, best["purpose"], best["asked_at"], now))
            return True

    def release_device(self, run_id: str) -> None:
        """`run_id` lets its device go (and stops asking for it)."""
        with self._write() as db:
            free_device(db, run_id)

    def device_holder(self, host: str, slot: str) -> Hold | None:
        """Who holds `slot` now (a stale hold reads as None)."""
        with self._connect() as db:
            row = db.execute("SELECT h.run_id, h.purpose, h.since FROM device_holds h JOIN runs r ON r.id = h.run_id"
                             " WHERE h.host=? AND h.slot=? AND r.status='running'", (host, slot)).fetchone()
        return Hold(*row) if row else None

    def device_asks(self, host: str, slot: str) -> list[Ask]:
        """Who waits for `slot`, in the order they will get it."""
        with self._connect() as db:
            return [Ask(*r) for r in db.execute(
                "SELECT a.run_id, a.purpose, a.rank, a.asked_at FROM device_asks a JOIN runs r ON r.id = a.run_id"
                " WHERE a.host=? AND a.slot=? AND r.status='running' ORDER BY a.rank, r.rowid",
                (host, slot))]

    def device_spans(self, run_id: str) -> list[Span]:
        """Every time `run_id` held its device, in order."""
        with self._connect() as db:
            return [Span(*r) for r in db.execute(
                "SELECT slot, purpose, asked_at, taken_at, released_at FROM device_use WHERE run_id=?"
                " ORDER BY taken_at", (run_id,))]

    def slot_spans(self, host: str, slot: str, since: float = 0.0) -> list[tuple[str, Span]]:
        """Every hold of `slot` on `host` taken since `since`, as (run id, span), in order (the overlap check)."""
        with self._connect() as db:
            return [(r[0], Span(*r[1:])) for r in db.execute(
                "SELECT u.run_id, u.slot, u.purpose, u.asked_at, u.taken_at, u.released_at FROM device_use u"
                " JOIN runs r ON r.id = u.run_id WHERE r.host=? AND u.slot=? AND u.taken_at>=? ORDER BY u.taken_at",
                (host, slot, since))]

    def hold_neighbours(self, hold: QuietHold) -> None:
        """Say that `hold.run_id` is timed now: the other lab processes on its host hold its slot's workers still."""
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO quiet_holds (run_id, host, slot, pid, started, until)"
                       " VALUES (?,?,?,?,?,?)", hold)

    def let_neighbours_go(self, run_id: str) -> None:
        """`run_id`'s timed rounds are over (or its process has gone): no one holds still for it any longer."""
        with self._write() as db:
            db.execute("DELETE FROM quiet_holds WHERE run_id=?", (run_id,))

    def neighbour_holds(self, host: str) -> list[QuietHold]:
        """The runs timed now on `host`, as their lab processes said."""
        with self._connect() as db:
            return [QuietHold(*row) for row in db.execute(
                "SELECT run_id, host, slot, pid, started, until FROM quiet_holds WHERE host=?", (host,))]


def free_device(db: sqlite3.Connection, run_id: str) -> None:
    """Within a write transaction: `run_id` holds nothing and asks for nothing; its open span is closed."""
    db.execute("DELETE FROM device_holds WHERE run_id=?", (run_id,))
    db.execute("DELETE FROM device_asks WHERE run_id=?", (run_id,))
    db.execute("UPDATE device_use SET released_at=? WHERE run_id=? AND released_at IS NULL", (time.time(), run_id))


def _drop_stale(db: sqlite3.Connection, host: str, slot: str) -> None:
    """Within a write transaction: a hold or asks on `slot` whose run is no longer running go."""
    for (run_id,) in db.execute(
            "SELECT run_id FROM device_holds WHERE host=? AND slot=? AND run_id NOT IN"
            " (SELECT id FROM runs WHERE status='running') UNION SELECT run_id FROM device_asks WHERE host=? AND"
            " slot=? AND run_id NOT IN (SELECT id FROM runs WHERE status='running')",
            (host, slot, host, slot)).fetchall():
        free_device(db, run_id)
