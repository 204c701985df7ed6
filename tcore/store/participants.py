"""Whose runs are whose: a run's and a sweep's `owner`, a browser session id or the name a participant took; and what
each participant typed and left set: their name as typed, their pages' settings.

Not the processes that own runs (the queue's `owners` table, tcore.store.run_queue): those run them, these asked.
"""
from __future__ import annotations

import json
import time
from typing import Any

from tcore.store.connection import Part


class People(Part):
    """The people behind runs and sweeps."""

    def rename_owner(self, old: str, new: str, name: str | None = None) -> int:
        """A participant took a name: their runs (and sweeps) follow it, and so do their kept settings; `name`: the
        name as they typed it (None: keep the one stored under `new`, if any). Returns how many runs moved."""
        with self._write() as db:
            moved = db.execute("UPDATE runs SET owner=? WHERE owner=?", (new, old)).rowcount
            db.execute("UPDATE sweeps SET owner=? WHERE owner=?", (new, old))
            if old != new:
                db.execute("INSERT OR IGNORE INTO people (owner, set_at) VALUES (?, ?)", (new, time.time()))
                db.execute("UPDATE people SET settings=COALESCE(settings, (SELECT settings FROM people WHERE owner=?))"
                           " WHERE owner=?", (old, new))
                db.execute("DELETE FROM people WHERE owner=?", (old,))
            if name is not None:
                db.execute("INSERT INTO people (owner, name, set_at) VALUES (?, ?, ?) ON CONFLICT(owner) DO UPDATE"
                           " SET name=excluded.name, set_at=excluded.set_at", (new, name, time.time()))
            return moved

    def owner_ending(self, suffix: str) -> str | None:
        """The owner of the newest run or sweep whose owner ends with `suffix` (a participant's tag and secret: the
        name may have changed since the id someone holds was made), or None where nothing is stored under it."""
        with self._connect() as db:
            row = db.execute(
                "SELECT owner FROM (SELECT owner, created_at FROM runs WHERE substr(owner, -?) = ?"
                " UNION ALL SELECT owner, created_at FROM sweeps WHERE substr(owner, -?) = ?"
                " UNION ALL SELECT owner, set_at FROM people WHERE substr(owner, -?) = ?)"
                " ORDER BY created_at DESC LIMIT 1",
                (len(suffix), suffix, len(suffix), suffix, len(suffix), suffix)).fetchone()
        return row[0] if row else None

    def renamed_from(self, old: str, suffix: str) -> str | None:
        """Where a rename took the participant who was `old` (their tag and secret: `suffix`): the newest id here that
        ends with them, once `old` has no row of its own (a rename deletes it); None while it has one, or none ends so.
        """
        with self._connect() as db:
            if db.execute("SELECT 1 FROM people WHERE owner=?", (old,)).fetchone():
                return None
            row = db.execute("SELECT owner FROM people WHERE substr(owner, -?) = ? ORDER BY set_at DESC LIMIT 1",
                             (len(suffix), suffix)).fetchone()
        return row[0] if row else None

    def give_run(self, run_id: str, owner: str) -> None:
        """One run to `owner`: the rest of its old owner's stay where they are."""
        with self._write() as db:
            db.execute("UPDATE runs SET owner=? WHERE id=?", (owner, run_id))

    def typed_names(self) -> dict[str, str]:
        """owner id -> the name as its participant typed it, for every participant who named themselves."""
        with self._connect() as db:
            return dict(db.execute("SELECT owner, name FROM people WHERE name IS NOT NULL").fetchall())

    def settings_of(self, owner: str) -> dict[str, Any] | None:
        """The pages' settings `owner` last left (keep_settings_of), or None."""
        with self._connect() as db:
            row = db.execute("SELECT settings FROM people WHERE owner=?", (owner,)).fetchone()
        return json.loads(row[0]) if row and row[0] else None

    def keep_settings_of(self, owner: str, settings: dict[str, Any]) -> None:
        """Keep `owner`'s pages' settings (JSON values) for their next session: a reload, a bookmark, a new tab."""
        with self._write() as db:
            db.execute("INSERT INTO people (owner, settings, set_at) VALUES (?, ?, ?) ON CONFLICT(owner) DO UPDATE"
                       " SET settings=excluded.settings, set_at=excluded.set_at",
                       (owner, json.dumps(settings), time.time()))
