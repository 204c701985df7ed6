"""This process's connections to a store file, counted, and the -shm file they share (_Sidecars): what lets a write
notice that the store's -wal and -shm files were deleted under the process, and close the process's connections
before it writes (tcore.store.connection opens every connection through here)."""
from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Callable


class Counted(sqlite3.Connection):
    """A connection that tells its file's _Sidecars when it closes (once, however often close() is called)."""
    sidecars: _Sidecars | None = None
    kept = False

    def close(self) -> None:
        if self.sidecars is not None:
            self.sidecars.replaced()  # the -shm file it used noted, where this process had noted none yet
        try:
            super().close()
        finally:
            sidecars, self.sidecars = self.sidecars, None
            if sidecars is not None:
                sidecars.closed(self.kept)

    def __del__(self) -> None:
        """One never closed (a watch dropped whole) leaves the count as it goes; SQLite closes it on its own, and
        close() here could not: a collection may run in another thread than the one that opened it."""
        sidecars, self.sidecars = self.sidecars, None
        if sidecars is not None:
            sidecars.closed(self.kept)


class _Sidecars:
    """This process's connections to one store file, and the -shm file they share.

    SQLite's connections in one process share one mapping of the store's -shm file (its index of the -wal) while any
    of them is open. Where the -wal and -shm files are deleted then (a person cleaning up, a script), the next
    connection of another process makes new ones, while this process's connections, old and new, keep the deleted
    mapping: what they write is lost, and the last of them to close checkpoints the old -wal and deletes the new one
    by its name, taking the other process's commits with it (another process's finished run lost). So a write first
    checks that the -shm file at the path is the one this process mapped; where it is not, every connection of the
    process to the file is closed before the write is made on a new one, which maps the files as they now are. The
    read-only one the process keeps open (the change watch's, tcore.store.changes) closes last: a read-only
    connection never checkpoints, and while it is open no other can, so nothing of the old -wal is written back."""

    DRAIN_S = 10.0  # how long a write waits for the process's other connections to close (each is one short read)

    def __init__(self, path: Path) -> None:
        self.path = path
        self.shm = path.with_name(path.name + "-shm")
        self._cond = threading.Condition()
        self._open = 0
        self._kept_open = 0  # of those, the ones kept open (read-only)
        self._mapped: int | None = None  # the -shm file's inode when this process's connections first used it
        self._draining = False
        self._closers: dict[int, Callable[[], None]] = {}

    def opening(self, kept: bool = False) -> None:
        with self._cond:
            self._cond.wait_for(lambda: not self._draining, timeout=self.DRAIN_S)
            self._open += 1
            self._kept_open += kept

    def closed(self, kept: bool = False) -> None:
        with self._cond:
            self._open -= 1
            self._kept_open -= kept
            if self._open <= 0:
                self._open, self._mapped = 0, None  # SQLite lets the mapping go with its last connection
                self._cond.notify_all()

    def on_drain(self, key: int, close: Callable[[], None]) -> None:
        """`close()` lets go of a connection kept open (the change watch's) when the -shm file was replaced."""
        self._closers[key] = close

    def replaced(self) -> bool:
        """Whether the -shm file at the path is not the one this process's connections map (deleted, or deleted and
        made again by another process). Asked inside a transaction, where SQLite has mapped it."""
        try:
            inode: int | None = self.shm.stat().st_ino
        except OSError:
            inode = None
        with self._cond:
            if self._mapped is None and inode is not None:
                self._mapped = inode
            return inode is None or inode != self._mapped

    def drain(self) -> bool:
        """Close every connection of this process to the file, new ones waiting meanwhile; False where some stayed open
        past DRAIN_S."""
        with self._cond:
            self._draining = True
            closers = list(self._closers.values())
        try:
            with self._cond:  # the read-only ones kept open close last (see above)
                self._cond.wait_for(lambda: self._open - self._kept_open <= 0, timeout=self.DRAIN_S)
            for close in closers:
                close()
            with self._cond:
                return self._cond.wait_for(lambda: self._open <= 0, timeout=self.DRAIN_S)
        finally:
            with self._cond:
                self._draining = False
                if self._open <= 0:
                    self._mapped = None
                self._cond.notify_all()


_SIDECARS: dict[tuple[int, Path], _Sidecars] = {}
_SIDECARS_LOCK = threading.Lock()


def of_file(resolved: Path) -> _Sidecars:
    key = (os.getpid(), resolved)  # a forked child has none of its parent's connections
    with _SIDECARS_LOCK:
        if key not in _SIDECARS:
            _SIDECARS[key] = _Sidecars(resolved)
        return _SIDECARS[key]


def sidecars(path: Path) -> _Sidecars:
    """This process's connections to the store file at `path` (tcore.store.changes registers its watch here)."""
    return of_file(path.resolve())
