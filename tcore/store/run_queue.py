"""The run queue, kept in the store: queue, claim a device slot, cancel, and repair what dead processes left.

A run is inserted "queued" with its owner (a session id), the process that owns it and its device
kind. Its place in the queue is its rowid, the order of insertion: queued_at is for display, since a clock set back
must not put a run ahead of those queued before it. Claiming it (status "running" in a free device slot) is one
BEGIN IMMEDIATE transaction, so two processes never both claim a slot. tcore.lab.queue.scheduler decides when to
call these; the queue lives here and nowhere else, so it survives a restart of any process. Its columns of `runs`
and its `owners` table are in schema.py; what a run's end sets off is run_ends.py's.
"""
from __future__ import annotations

import sqlite3
import time
from typing import Callable, NamedTuple, Protocol

from tcore.store.connection import Part
from tcore.store.records import RunRecord, Unreadable, json_object, new_id, to_json
from tcore.store.run_ends import ended

PAUSED = "paused"  # lab_state key: set while the instructor holds the queue ({"at": time})
CLUSTER_SLOT_PREFIX = "ray:"  # device slots of a Ray cluster (tcore.lab.launch.cluster): no local worker pid
CANCELLED_IN_QUEUE = "cancelled while waiting in the queue; it never started"
# runs.cancel_requested: who asked for the cancel. The owner's process decides the run's final message, so who
# asked is kept in the row, where the process that records the end reads it (cancel_words).
CANCEL_BY_OWNER, CANCEL_BY_INSTRUCTOR = 1, 2
BY_INSTRUCTOR = "cancelled by the instructor"
ID_TRIES = 5  # fresh run ids drawn before an id already taken is let fail the insert


def cancel_words(message: str, requested: int | None) -> str:
    """A cancelled run's message, saying so when the instructor cancelled it rather than its owner."""
    if requested != CANCEL_BY_INSTRUCTOR or message.startswith(BY_INSTRUCTOR):
        return message
    if "by the user" in message:  # the launcher's and the scheduler's words
        return message.replace("by the user", "by the instructor", 1)
    return BY_INSTRUCTOR + " " + message.removeprefix("cancelled").lstrip()  # "... while waiting in the queue; ..."


def cancel_if_queued(db: sqlite3.Connection, run_id: str, message: str = CANCELLED_IN_QUEUE) -> bool:
    """Within a write transaction: cancel `run_id` if it still waits; False if it has been claimed or has ended."""
    requested = db.execute("SELECT cancel_requested FROM runs WHERE id=?", (run_id,)).fetchone()
    message = cancel_words(message, requested[0] if requested else None)
    error = to_json({"type": "error", "kind": "cancelled", "message": message})
    cancelled = db.execute("UPDATE runs SET status='failed', finished_at=?, error_kind='cancelled', error=?"
                           " WHERE id=? AND status='queued'", (time.time(), error, run_id)).rowcount == 1
    if cancelled:
        ended(db, run_id)
    return cancelled


class Proc(Protocol):
    """A process that owns runs (tcore.lab.queue.scheduler.Proc)."""
    host: str
    pid: int
    started: str | None


class SlotRoom(NamedTuple):
    """How many runs may share one device slot, and the device memory (GiB) they may hold together (None: not
    counted). A run whose memory is unknown (NULL) shares its slot with no one: it is claimed only into an empty slot,
    and no run joins it."""
    runs: int = 1
    memory_gib: float | None = None

    def admits(self, residents: list[float | None], memory_gib: float | None) -> bool:
        """Whether a run needing `memory_gib` may join `residents` (their estimates) in this slot."""
        if not residents:
            return True
        if len(residents) >= self.runs or memory_gib is None or None in residents:
            return False
        return self.memory_gib is None or sum(residents) + memory_gib <= self.memory_gib


class QueueFull(Exception):
    """The owner already has `count` runs waiting."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


class Queue(Part):
    """The queue's operations: queue a run, claim a slot, cancel, and take over what dead processes left."""

    def enqueue(self, exp, *, device: str, owner: str, proc: Proc, timeout_s: float | None,
                max_queued: int | None = None, sweep: tuple[str, int] | None = None, sweep_width: int = 1,
                memory_gib: float | None = None) -> str:
        """Queue a run on `device` (cpu or cuda) for `proc` to start; QueueFull if `owner` has `max_queued` waiting.

        The count and the insert share one transaction, so two tabs of one session cannot both slip under it.
        sweep: (sweep id, place in it); every run of a sweep past its first `sweep_width` is held until one
        before it ends, so a sweep has at most that many runs in the queue at once (one per slot of a cluster).
        memory_gib: the run's device memory estimate, which decides whom it may share a slot with (None: no one).
        """
        with self._write() as db:
            run_id = new_id()
            for _ in range(ID_TRIES - 1):  # two runs queued in one second share new_id's time part: rare, not never
                if db.execute("SELECT 1 FROM runs WHERE id=?", (run_id,)).fetchone() is None:
                    break
                run_id = new_id()
            if max_queued is not None:
                (waiting,) = db.execute("SELECT COUNT(*) FROM runs WHERE status='queued' AND owner=?",
                                        (owner,)).fetchone()
                if waiting >= max_queued:
                    raise QueueFull(waiting)
            now = time.time()
            sweep_id, sweep_index = sweep or (None, None)
            db.execute(
                "INSERT INTO runs (id, created_at, status, label, model, preset, device, spec, owner, queued_at,"
                " timeout_s, host, owner_pid, owner_started, sweep_id, sweep_index, held, memory_gib)"
                " VALUES (?,?,'queued',?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, now, exp.label, exp.model, exp.preset, device, exp.to_json(), owner, now, timeout_s,
                 proc.host, proc.pid, proc.started, sweep_id, sweep_index,
                 int(sweep_index is not None and sweep_index >= sweep_width), memory_gib))
        return run_id

    def claim_next(self, proc: Proc, device: str, slots: list[str], run_ids: set[str],
                   room: dict[str, SlotRoom] | None = None) -> tuple[str, str] | None:
        """Claim the oldest queued `device` run on proc's host if it is one of proc's `run_ids` and a slot has room.

        Returns (run_id, slot), the run now "running" in that slot, or None. Only the owner of the
        oldest run may claim, so the queue is first come, first served across processes. `room` says how many runs
        may share each slot and how much device memory they may hold together (tcore.lab.queue.room); without it a slot
        takes one run. Of the slots with room, the one with the fewest runs is taken (the first, on a tie).
        """
        with self._write() as db:
            if db.execute("SELECT 1 FROM lab_state WHERE key=?", (PAUSED,)).fetchone():
                return None  # the instructor paused the queue: what runs goes on, nothing new starts
            oldest = db.execute(
                "SELECT id, owner_pid, owner_started, memory_gib FROM runs WHERE status='queued' AND held=0 AND host=?"
                " AND device=? ORDER BY rowid LIMIT 1", (proc.host, device)).fetchone()
            if (oldest is None or oldest["id"] not in run_ids
                    or (oldest["owner_pid"], oldest["owner_started"]) != (proc.pid, proc.started)):
                return None
            residents = _residents(db, proc.host)
            fits = [slot for slot in slots
                    if (room or {}).get(slot, SlotRoom()).admits(residents.get(slot, []), oldest["memory_gib"])]
            if not fits:
                return None
            slot = min(fits, key=lambda s: len(residents.get(s, [])))
            db.execute("UPDATE runs SET status='running', device_slot=?, started_at=? WHERE id=?",
                       (slot, time.time(), oldest["id"]))
            return oldest["id"], slot

    def busy_slots(self, host: str) -> set[str]:
        """The device slots on `host` that a run holds now."""
        with self._connect() as db:
            return set(_residents(db, host))

    def residents(self, host: str) -> dict[str, list[float | None]]:
        """slot -> the memory estimates (GiB; None: unknown) of the runs running in it on `host`."""
        with self._connect() as db:
            return _residents(db, host)

    def set_worker(self, run_id: str, pid: int, started: str | None, proc: Proc | None = None) -> bool:
        """Record the run's worker; with `proc`, only while the run is still running under proc (False: another
        process took it over while proc was stopped, and the worker just started must go)."""
        mine = " AND status='running' AND owner_pid=? AND owner_started IS ?" if proc else ""
        with self._write() as db:
            return db.execute(f"UPDATE runs SET pid=?, worker_started=? WHERE id=?{mine}",
                              (pid, started, run_id, *((proc.pid, proc.started) if proc else ()))).rowcount == 1

    def requeue(self, run_id: str, proc: Proc) -> bool:
        """Put back in its place in the queue a run that `proc` claimed but never handed to a worker (the store could
        not be told who runs it); False if it is no longer such a run of proc's."""
        with self._write() as db:
            return db.execute("UPDATE runs SET status='queued', device_slot=NULL, started_at=NULL WHERE id=? AND"
                              " status='running' AND pid IS NULL AND owner_pid=? AND owner_started IS ?",
                              (run_id, proc.pid, proc.started)).rowcount == 1

    def cancel_queued(self, run_id: str) -> bool:
        """Cancel a run that is still waiting; False if it has been claimed (or has ended) since."""
        with self._write() as db:
            return cancel_if_queued(db, run_id)

    def request_cancel(self, run_id: str, *, by_instructor: bool = False) -> str:
        """Cancel from any process: a queued run at once, a running one by asking its owner; returns the old status.
        `by_instructor`: the instructor asked, not the run's owner; the run's message will say so."""
        with self._write() as db:
            row = db.execute("SELECT status FROM runs WHERE id=?", (run_id,)).fetchone()
            if row is None:
                raise KeyError(f"no run {run_id!r} in {self.path}")
            if row["status"] in ("queued", "running"):
                db.execute("UPDATE runs SET cancel_requested=? WHERE id=?",
                           (CANCEL_BY_INSTRUCTOR if by_instructor else CANCEL_BY_OWNER, run_id))
            if row["status"] == "queued":
                cancel_if_queued(db, run_id)
            return row["status"]

    def mark_cancel_by_instructor(self, run_id: str) -> None:
        """Before this process cancels a run of its own on the instructor's word: the end it records says so."""
        with self._write() as db:
            db.execute("UPDATE runs SET cancel_requested=? WHERE id=? AND status IN ('queued', 'running')",
                       (CANCEL_BY_INSTRUCTOR, run_id))

    def cancel_requests(self, proc: Proc) -> list[str]:
        """Running runs of `proc` that another process asked to cancel."""
        with self._connect() as db:
            return [r[0] for r in db.execute(
                "SELECT id FROM runs WHERE status='running' AND cancel_requested>0 AND host=? AND owner_pid=?"
                " AND owner_started IS ?", (proc.host, proc.pid, proc.started))]

    def statuses(self, run_ids: list[str]) -> dict[str, str]:
        """run id -> status, for the ids still in the store."""
        with self._connect() as db:
            marks = ",".join("?" * len(run_ids))
            return {r[0]: r[1] for r in db.execute(f"SELECT id, status FROM runs WHERE id IN ({marks})", run_ids)}

    def orphaned(self, host: str, is_alive: Callable[[int, str | None], bool]) -> set[str]:
        """Queued runs on `host` whose owning process has ended: the next process that runs a queue adopts them."""
        with self._connect() as db:
            return {r["id"] for r in db.execute(
                "SELECT id, owner_pid, owner_started FROM runs WHERE status='queued' AND host=?"
                " AND owner_pid IS NOT NULL", (host,)) if not is_alive(r["owner_pid"], r["owner_started"])}

    def taken_over(self, proc: Proc, run_ids: list[str]) -> set[str]:
        """The ids among `run_ids` that another process now owns (it took them over while `proc` was silent)."""
        with self._connect() as db:
            marks = ",".join("?" * len(run_ids))
            return {r[0] for r in db.execute(
                f"SELECT id FROM runs WHERE id IN ({marks}) AND NOT (owner_pid=? AND owner_started IS ?)",
                [*run_ids, proc.pid, proc.started])}

    def queued_count(self, owner: str) -> int:
        """How many runs `owner` has waiting, the per-session bound's count: a sweep's runs are not among them (a sweep
        is one request, queued whole at once)."""
        with self._connect() as db:
            return db.execute("SELECT COUNT(*) FROM runs WHERE status='queued' AND owner=? AND sweep_id IS NULL",
                              (owner,)).fetchone()[0]

    def queue_state(self, host: str, device: str, *, recent: int = 200) -> tuple[list, list, list]:
        """For one device kind on one host, what the wait estimate needs (tcore.lab.queue.scheduler.places):
        queued runs, oldest first, as (id, spec, time limit); running runs as (spec, time limit, start
        time); the `recent` latest runs that ran to their end (finished, or stopped at their time limit), newest
        first, as (spec, duration in s)."""
        with self._connect() as db:  # a run whose spec cannot be read (tcore.store.records) is in no estimate
            queued = [(r[0], spec, r[2]) for r in db.execute(
                "SELECT id, spec, timeout_s FROM runs WHERE status='queued' AND held=0 AND host=? AND device=?"
                " ORDER BY rowid", (host, device)) if (spec := _spec(r[1])) is not None]
            running = [(spec, r[1], r[2]) for r in db.execute(
                "SELECT spec, timeout_s, started_at FROM runs WHERE status='running' AND host=? AND device=?"
                " AND started_at IS NOT NULL", (host, device)) if (spec := _spec(r[0])) is not None]
            history = [(spec, r[1]) for r in db.execute(
                # runs that ran to their end: a crash or a refusal at start-up says nothing of how long a run takes
                "SELECT spec, finished_at - started_at FROM runs WHERE (status='finished' OR error_kind='timeout')"
                " AND host=? AND device=? AND started_at IS NOT NULL"
                " ORDER BY finished_at DESC LIMIT ?", (host, device, recent)) if (spec := _spec(r[0])) is not None]
        return queued, running, history

    def running_and_queued(self, host: str) -> list[RunRecord]:
        """Running, then queued runs on `host`, in queue order: the room's queue, for a page to show.

        A sweep's held runs are not in it yet: each joins when the sweep's run before it ends."""
        with self._connect() as db:
            return [RunRecord.from_row(r) for r in db.execute(
                "SELECT * FROM runs WHERE status IN ('queued', 'running') AND held=0 AND host=?"
                " ORDER BY status DESC, rowid", (host,))]


def _spec(text: str) -> dict | None:
    """A stored spec, or None where it cannot be read."""
    try:
        return json_object(text, "spec")
    except Unreadable:
        return None


def _residents(db: sqlite3.Connection, host: str) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = {}
    for slot, memory in db.execute("SELECT device_slot, memory_gib FROM runs WHERE status='running' AND host=?"
                                   " AND device_slot IS NOT NULL", (host,)):
        out.setdefault(slot, []).append(memory)
    return out
