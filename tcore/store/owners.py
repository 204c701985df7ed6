"""Who runs the queue: each lab process says it is alive (heartbeat), and recover() takes the runs of one that has
died or gone silent: a running run ends as crashed, with the reason, and a queued one is adopted by the process
that recovers it, in its place. Part of the run store (tcore.store.RunStore); the queue itself is run_queue.py.
"""
from __future__ import annotations

import time
from typing import Callable

from tcore.store.connection import Part
from tcore.store.records import to_json
from tcore.store.run_ends import ended
from tcore.store.run_queue import CLUSTER_SLOT_PREFIX, Proc

# An owner that is alive but has not said so for this long (stopped with Ctrl-Z or SIGSTOP, or hung)
# loses its runs: the queue must not wait on a process that does not move.
OWNER_SILENT_S = 30.0
OWNERS_KEPT_S = 86400.0  # a heartbeat older than a day is dropped; recover() then judges by is_alive alone
# (store, host, owner pid, owner start) -> (its heartbeat as last read, this process's monotonic time when that value
# was first read). Silence is judged on the observer's own clock since the heartbeat last changed, never by comparing
# wall-clock times: a wall clock stepped forward 30 s would make every live owner look silent and lose its runs.
_HEARD: dict[tuple, tuple[float, float]] = {}
# A watcher that has not looked for this long was not watching: the store was write-locked under it (another
# process's long transaction, a backup, a stalled disk), or it was stopped itself. Every other process was as
# likely kept from writing its heartbeat then, so the silence it counts starts again from its next look: the first
# queue to get the lock after a 40 s lock took every other live process's runs (a probe, one try in two). A queue
# looks every 2 s (tcore.lab.queue.scheduler.RECOVER_EVERY_S).
WATCH_GAP_S = 10.0
# (store, host, watcher pid, watcher start) -> this process's monotonic time at its last look (recover) there
_LOOKED: dict[tuple, float] = {}


class Owners(Part):
    """Each lab process's heartbeat, and what becomes of the runs of one that stops."""

    def heartbeat(self, proc: Proc) -> None:
        """`proc` is alive and ticking: recover() leaves its runs alone while it keeps saying so."""
        now = time.time()
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO owners (host, pid, started, seen_at) VALUES (?,?,?,?)",
                       (proc.host, proc.pid, proc.started or "", now))
            db.execute("DELETE FROM owners WHERE seen_at < ?", (now - OWNERS_KEPT_S,))  # long gone: forget them

    def recover(self, proc: Proc, is_alive: Callable[[int, str | None], bool],
                stop_worker: Callable[[int, str | None], bool],
                silent_s: float | None = None, *, adopt: bool = True, wait: bool = True) -> tuple[list[str], list[str]]:
        """Fix the runs of owners on proc's host that have died or gone silent; returns (ids ended, ids adopted).

        Gone silent: alive, but its heartbeat unchanged for `silent_s` on this process's own clock since this
        process first read that heartbeat (a process stopped with Ctrl-Z holds its runs without moving them); so only
        a process that calls this over time, as a queue does, finds one silent. A running run is marked failed, kind
        "crashed", with the reason (its worker, if still alive, is stopped first, so it cannot overlap the next run);
        a queued run is adopted by `proc`: it stays queued, in its place. A run claimed whose worker never started
        was never measured: it goes back to the queue, in its place, and is adopted like a queued one.
        adopt=False (a process that will not run them: `tcore list`) ends what must end and leaves queued
        runs where they are, for the next process that runs a queue. wait=False: "database is locked" at once where
        another process holds the write lock, rather than after SQLite's busy timeout.
        """
        silent_s = OWNER_SILENT_S if silent_s is None else silent_s
        crashed, adopted = [], []
        with self._write(wait=wait) as db:
            now = time.monotonic()  # once the write lock is ours: a wait for it is time nobody could write
            self._look(proc, now)
            rows = db.execute(
                "SELECT id, status, owner_pid, owner_started, pid, worker_started, device_slot FROM runs"
                " WHERE status IN ('queued', 'running') AND host=? AND owner_pid IS NOT NULL", (proc.host,)).fetchall()
            heard = {(r["pid"], r["started"] or None): r["seen_at"] for r in db.execute(
                "SELECT pid, started, seen_at FROM owners WHERE host=?", (proc.host,))}
            verdicts: dict[tuple, str | None] = {}  # owner -> None (fine) or why it lost its runs
            for row in rows:
                owner = (row["owner_pid"], row["owner_started"])
                if owner == (proc.pid, proc.started):
                    continue
                if owner not in verdicts:
                    silent_for = self._silent_for(proc.host, owner, heard.get(owner), now)
                    verdicts[owner] = _gone(owner, is_alive, silent_for, silent_s, proc.host)
                if verdicts[owner] is None:
                    continue
                # Claimed, but no worker ever started. A run on a cluster slot has no local worker to record: its
                # Ray task was submitted once it was claimed, and Ray ends a dead owner's tasks, so it ended mid-run.
                never_started = (row["status"] == "running" and row["pid"] is None
                                 and not (row["device_slot"] or "").startswith(CLUSTER_SLOT_PREFIX))
                if never_started:
                    db.execute("UPDATE runs SET status='queued', device_slot=NULL, started_at=NULL WHERE id=?",
                               (row["id"],))
                if row["status"] == "queued" or never_started:
                    if adopt:
                        db.execute("UPDATE runs SET owner_pid=?, owner_started=? WHERE id=?",
                                   (proc.pid, proc.started, row["id"]))
                        adopted.append(row["id"])
                    continue
                stopped = row["pid"] is not None and stop_worker(row["pid"], row["worker_started"])
                message = verdicts[owner] + ("; its worker, left behind, was stopped" if stopped else "")
                db.execute("UPDATE runs SET status='failed', finished_at=?, error_kind='crashed', error=? WHERE id=?",
                           (time.time(), to_json({"type": "error", "kind": "crashed", "message": message}), row["id"]))
                ended(db, row["id"])
                crashed.append(row["id"])
        for key in [k for k in _HEARD if k[:2] == (str(self.path), proc.host) and k[2:] not in heard]:
            del _HEARD[key]  # its heartbeat row is gone (dropped after a day): nothing left to judge it by
        return crashed, adopted

    def _look(self, proc: Proc, now: float) -> None:
        """`proc` looks at the store's heartbeats at `now`: after a gap longer than WATCH_GAP_S since its last look,
        each heartbeat's silence is counted again from now, as if first read."""
        looked = _LOOKED.get(key := (str(self.path), proc.host, proc.pid, proc.started))
        _LOOKED[key] = now
        if looked is not None and now - looked > WATCH_GAP_S:
            for heard in [k for k in _HEARD if k[:2] == (str(self.path), proc.host)]:
                _HEARD[heard] = (_HEARD[heard][0], now)

    def _silent_for(self, host: str, owner: tuple, seen_at: float | None, now: float) -> float | None:
        """How long (s, on this process's monotonic clock `now`) the owner's heartbeat has read `seen_at`; None for an
        owner that never sent one. The first read of a value counts as hearing from it."""
        if seen_at is None:
            return None
        key = (str(self.path), host, *owner)
        last = _HEARD.get(key)
        if last is None or last[0] != seen_at:
            _HEARD[key] = (seen_at, now)
            return 0.0
        return now - last[1]


def _gone(owner: tuple[int, str | None], is_alive: Callable[[int, str | None], bool], silent_for: float | None,
          silent_s: float, host: str) -> str | None:
    """Why an owner's runs must be taken from it, or None while it is alive and heard from."""
    pid = owner[0]
    if not is_alive(*owner):
        return (f"the process that ran it (pid {pid} on {host}) ended before it recorded how the run ended, "
                "e.g. the app was restarted, the command line was stopped, or the store could not be written then "
                "(a full disk)")
    if silent_for is not None and silent_for > silent_s:
        return (f"the process that ran it (pid {pid} on {host}) stopped answering: not heard from for "
                f"{silent_for:.0f} s (more than {silent_s:g} s), e.g. stopped with Ctrl-Z; "
                "the queue went on without it")
    return None  # an owner that never sent a heartbeat (an older version) is judged by is_alive alone
