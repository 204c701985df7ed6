"""Reading the store once per change for every session of a process: SQLite's data_version as the change marker.

A page open in twenty tabs asks the same questions of the store every few seconds (who is queued, what
is running, this person's runs). `reads(store)` answers them from one copy per change of the file, shared
by every session of the process: `PRAGMA data_version`, asked on a connection this module keeps open and
never writes on, changes exactly when another connection (any process, this one included) has committed
a change, and costs microseconds. The answers are shared objects: read them, never change them.
"""
from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable

from tcore.store import connection, sidecars

# The read-only RunStore methods whose answers are kept, a part's named after it; each answer stands until the file
# changes.
CACHED = frozenset({"list", "get", "queue.running_and_queued", "queue.queue_state", "queue.queued_count",
                    "lab.lab_state", "people.typed_names"})


class _Watch:
    """One file's change marker and the answers kept for its current version."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._db: sqlite3.Connection | None = None
        self._inode: int | None = None
        self._opened = 0  # connections opened so far: data_version is counted per connection
        self._stale = False  # let go of while a question was being answered: closed before the next
        self._lock = threading.Lock()
        self.version: int | None = None
        self.answers: dict[tuple, Any] = {}
        self.reads = 0  # answers read from the store rather than kept: what the tests count
        # A write that finds the store's -shm file replaced closes every connection of the process to it, this one's
        # too (tcore.store.sidecars._Sidecars): it is opened again at the next question.
        sidecars.sidecars(path).on_drain(id(self), self._let_go)

    def _let_go(self) -> None:
        """Close the kept connection, unless a question is being answered on it now (it is closed after)."""
        if self._lock.acquire(blocking=False):
            try:
                self._close()
            finally:
                self._lock.release()
        else:
            self._stale = True

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
        self._db, self._stale = None, False

    def answer(self, key: tuple, read: Callable[[], Any]) -> Any:
        # One lock for the marker, the lookup and the read: twenty sessions asking at once after a change
        # wait for one read instead of making twenty.
        with self._lock:
            version = self._marker()
            if version != self.version:
                self.version, self.answers = version, {}
            if key not in self.answers:
                try:
                    self.answers[key] = read()  # an exception (a run deleted meanwhile) is raised, not kept
                finally:
                    if self._stale:  # a write waits for this process's connections to close: let go at once
                        self._close()
                self.reads += 1
            return self.answers[key]

    def _marker(self) -> tuple[int | None, int, int]:
        """(the file's inode, which connection, SQLite's data_version on it: a number each connection counts on its
        own). A store set aside (tcore.store.connection.set_aside) or deleted,
        and made anew at the same path, is another file: the connection open on the old one would never see it
        change, so it is opened again."""
        try:
            inode = os.stat(self._path).st_ino
        except FileNotFoundError:
            inode = None
        if self._db is None or inode != self._inode or self._stale:
            self._close()
            # Autocommit, so the connection never holds a read transaction open (it would pin the WAL).
            self._db = connection.open_file(self._path, kept=True, timeout=30, isolation_level=None,
                                            check_same_thread=False)
            self._inode, self._opened = inode, self._opened + 1
        return inode, self._opened, self._db.execute("PRAGMA data_version").fetchone()[0]


_WATCHES: dict[tuple[int, Path], _Watch] = {}
_WATCHES_LOCK = threading.Lock()


def _watch(path: Path) -> _Watch:
    key = (os.getpid(), path.resolve())  # a forked child must not share its parent's connection
    with _WATCHES_LOCK:
        if key not in _WATCHES:
            _WATCHES[key] = _Watch(key[1])
        return _WATCHES[key]


class Reads:
    """A RunStore whose read-only questions (CACHED) are answered once per change of the file for the whole
    process; everything else, writes included, goes to the store itself. A part of the store (store.queue) comes back
    as Reads of that part."""

    def __init__(self, store, prefix: str = "") -> None:
        self._store = store
        self._prefix = prefix  # "queue." for the store's queue part
        self._watch = _watch(store.path)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if isinstance(attr, connection.Part):
            return Reads(attr, f"{self._prefix}{name}.")
        asked = self._prefix + name
        if asked not in CACHED:
            return attr

        def cached(*args, **kwargs):
            return self._watch.answer((asked, args, tuple(sorted(kwargs.items()))), lambda: attr(*args, **kwargs))
        return cached


def reads(store) -> Reads:
    """`store`, answering its read-only questions from the process's copy for the file's current version."""
    return store if isinstance(store, Reads) else Reads(store)


def store_reads(store) -> int:
    """How many answers this process has read from `store`'s file rather than kept (for tests)."""
    return _watch(store.path).reads
