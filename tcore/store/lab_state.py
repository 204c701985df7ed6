"""The lab's state in the store: what the instructor set for the whole room (the queue paused, the limits, the
machine's spread reset)."""
from __future__ import annotations

import json
import time
from typing import Any

from tcore.store.connection import Part

# lab_state key: when the instructor last reset the machine's spread between processes ({"at": time}); runs finished
# before it no longer teach it (Runs.headlines)
SPREAD_RESET = "spread_reset"


class LabState(Part):
    """Values the instructor set, by key (tcore.store.run_queue.PAUSED, tcore.lab.policy.limits.INSTRUCTOR_LIMITS)."""

    def lab_state(self, key: str) -> Any:
        """A value the instructor set (PAUSED, the limits), or None."""
        with self._connect() as db:
            row = db.execute("SELECT value FROM lab_state WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def spread_reset_at(self) -> float | None:
        """When the instructor last reset the machine's spread between processes (SPREAD_RESET), or None: runs created
        before it teach no spread, neither the machine's nor a setting's own."""
        state = self.lab_state(SPREAD_RESET)
        return state["at"] if state else None

    def set_lab_state(self, key: str, value: Any) -> None:
        """Set (None: clear) a value of the room's state."""
        with self._write() as db:
            if value is None:
                db.execute("DELETE FROM lab_state WHERE key=?", (key,))
            else:
                db.execute("INSERT OR REPLACE INTO lab_state (key, value, set_at) VALUES (?,?,?)",
                           (key, json.dumps(value), time.time()))
