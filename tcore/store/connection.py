"""The run store's file: where it lives, refusing a path that cannot hold one, and its connections.

WAL mode and short transactions make concurrent writers from several processes safe; readers never block
writers. StoreFile opens the file and creates or upgrades its tables once per process (tcore.store.schema);
every part of the store (tcore.store) reads through _connect() and writes through _write(), and nothing
outside tcore/store calls either.
"""
from __future__ import annotations

import os
import sqlite3
import stat
import sys
import time
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Callable, Iterator

from tcore.store import schema


def default_path() -> Path:
    """$COMPILE_LAB_DB, else a per-user file under $XDG_DATA_HOME (~/.local/share)."""
    if os.environ.get("COMPILE_LAB_DB"):
        return Path(os.environ["COMPILE_LAB_DB"])
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data_home / "compile-lab" / "runs.sqlite"


def _use_wal(db: sqlite3.Connection, wait_s: float = 30.0) -> None:
    """Switch the store to WAL, waiting for any other process that is creating it at the same moment.

    Switching the journal mode needs the file to itself, and SQLite answers "database is locked" at once
    there rather than through the busy timeout, so two processes opening a new store together would
    otherwise see one of them fail. The mode is kept in the file: once one process has set it, it is done.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if db.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal":
                return
            reason = "SQLite kept another journal mode"
        except sqlite3.OperationalError as e:
            if "locked" not in str(e):
                raise
            reason = str(e)
        if time.monotonic() > deadline:
            raise sqlite3.OperationalError(f"could not switch the run store to WAL within {wait_s:.0f} s: {reason}")
        time.sleep(0.02)


SQLITE_MAGIC = b"SQLite format 3\x00"


class StoreError(Exception):
    """The run store's file cannot be used; the message says why in one sentence, and nothing was changed."""


def check_path(path: Path) -> None:
    """Refuse, before anything is created or written, a path that cannot hold a run store (StoreError).

    A folder, a device such as /dev/null, a file that is not SQLite or is cut short, a parent that is a file.
    A missing or empty file is fine: the store is made there.
    """
    where = f"cannot use {path} as the run store"
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise StoreError(f"{where}: {parent} is a file, not a folder")
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    except OSError as e:
        raise StoreError(f"{where}: {e.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{where}: it is a folder; name a file in it, e.g. {path / 'runs.sqlite'}")
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"{where}: it is not a regular file (a device, a pipe or a socket)")
    for attempt in range(3):  # another process may be creating the file, or a checkpoint growing it: look again
        try:
            with open(path, "rb") as f:
                header = f.read(100)
                size = os.fstat(f.fileno()).st_size
        except OSError as e:
            raise StoreError(f"{where}: {e.strerror}") from None
        if size == 0:
            return
        if not header.startswith(SQLITE_MAGIC):
            if attempt < 2:  # seen: a store being created by another process, its first page not written yet
                time.sleep(0.1)
                continue
            raise StoreError(f"{where}: it is not a SQLite database (it does not start as one)")
        expected = 0
        if len(header) == 100 and header[24:28] == header[92:96]:  # the page count in the header is current
            page_size = int.from_bytes(header[16:18], "big")
            expected = int.from_bytes(header[28:32], "big") * (65536 if page_size == 1 else page_size)
        if size >= expected:
            break
        if _wal_size(path):
            # The pages the header counts may still be in the write-ahead log: a checkpoint that the disk filling
            # up cut short wrote the new first page and not the rest. SQLite reads them from the log and finishes
            # the checkpoint when it can; it is the judge (the immutable read below would ignore the log).
            return
        time.sleep(0.1)
    else:
        raise StoreError(f"{where}: it is cut short ({size} bytes; its header says {expected})")
    try:
        # immutable: read the file as it lies, making no -wal or -shm beside it (nothing touched if it is bad)
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, timeout=30)
        try:
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{where}: SQLite cannot read it: {e}") from None


def _wal_size(path: Path) -> int:
    try:
        return path.with_name(path.name + "-wal").stat().st_size
    except OSError:
        return 0


# Store files this process has set up: resolved path -> the file's inode then. A store deleted while in use
# (its file recreated empty by the next connection) is set up again rather than left without tables.
_SCHEMA_READY: dict[Path, int] = {}


class Part:
    """What every part of the store (runs, queue, sweeps, ...) gets from StoreFile: its path and connections."""

    path: Path
    _connect: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]


class StoreFile(Part):
    def __init__(self, path: str | Path | None = None) -> None:
        if path is not None and not str(path).strip():  # `--db ''` (an unset shell variable): not the default
            raise StoreError("the run store's path is empty: name a file (or leave the option out for "
                             f"{default_path()})")
        self.path = Path(path) if path is not None else default_path()
        self._ensure_schema()

    def _ensure_schema(self) -> None:
        """Set up the schema the first time this process opens the file, and again if it was deleted meanwhile.

        Cheap when nothing changed (one stat): pages open the store on every rerun.
        """
        resolved = self.path.resolve()
        try:
            info = resolved.stat()
        except OSError:
            info = None
        ready = _SCHEMA_READY.get(resolved)
        if ready is not None and info is not None and info.st_size > 0 and info.st_ino == ready:
            return
        check_path(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._open() as db:
                _use_wal(db)
                schema.create(db)
        except OSError as e:
            raise StoreError(f"cannot use {self.path} as the run store: {e.strerror or e}") from None
        except sqlite3.Error as e:
            raise StoreError(f"cannot use {self.path} as the run store: {e}") from None
        if ready is not None:
            print(f"compile-lab: the run store {self.path} was deleted while in use; a new, empty one was made "
                  "in its place (the runs it held are gone)", file=sys.stderr)
        _SCHEMA_READY[resolved] = resolved.stat().st_ino

    @property
    def store_id(self) -> str:
        """A random id made with the store: a store deleted and made again at the same path has another."""
        with self._connect() as db:
            return db.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()[0]

    @contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA foreign_keys=ON")
        try:
            yield db
        finally:
            db.close()

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self._ensure_schema()
        with self._open() as db:
            yield db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One short write transaction; BEGIN IMMEDIATE takes the write lock up front, so no deadlock."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
