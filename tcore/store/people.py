"""Whose runs are whose: a run's and a sweep's `owner`, a browser session id or the name a participant took.

Not the processes that own runs (the queue's `owners` table, tcore.store.queue): those run them, these asked.
"""
from __future__ import annotations

from tcore.store.connection import Part


class People(Part):
    """The people behind runs and sweeps."""

    def rename_owner(self, old: str, new: str) -> int:
        """A participant took a name: their runs (and sweeps) follow it; returns how many runs moved."""
        with self._write() as db:
            moved = db.execute("UPDATE runs SET owner=? WHERE owner=?", (new, old)).rowcount
            db.execute("UPDATE sweeps SET owner=? WHERE owner=?", (new, old))
            return moved

    def owner_ending(self, suffix: str) -> str | None:
        """The owner of the newest run or sweep whose owner ends with `suffix` (a participant's tag and secret: the
        name may have changed since the id someone holds was made), or None where nothing is stored under it."""
        with self._connect() as db:
            row = db.execute(
                "SELECT owner FROM (SELECT owner, created_at FROM runs WHERE substr(owner, -?) = ?"
                " UNION ALL SELECT owner, created_at FROM sweeps WHERE substr(owner, -?) = ?)"
                " ORDER BY created_at DESC LIMIT 1", (len(suffix), suffix, len(suffix), suffix)).fetchone()
        return row[0] if row else None
