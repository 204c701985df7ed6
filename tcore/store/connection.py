"""The run store's file: where it lives, refusing a path that cannot hold one, and its connections.

WAL mode and short transactions make concurrent writers from several processes safe; readers never block
writers. StoreFile opens the file and creates or upgrades its tables once per process (tcore.store.schema);
every part of the store (tcore.store) reads through _connect() and writes through _write(), and nothing
outside tcore/store calls either. A store that can only be read (a read-only mount, file or folder) is opened as it
lies, read-only, with nothing made or written beside it: reads work and a write raises StoreReadOnly. So is one whose
disk is full, until there is room again. set_aside() moves a damaged store out of the way, kept, so that a new one is
made at its path.
"""
from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import stat
import sys
import time
from contextlib import AbstractContextManager, closing, contextmanager
from pathlib import Path
from typing import Iterator

from tcore.store import schema
from tcore.store.sidecars import Counted, of_file


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
BUSY_TIMEOUT_S = 30.0  # how long one statement waits for another process's write lock before SQLite says "locked"
# Under this much free space a "disk I/O error" is the disk being full: SQLite's -shm file alone takes 32 KiB.
FULL_BELOW_BYTES = 1 << 20
DISK_FULL = "the disk that holds it is full"
# What SQLite's "no such table" means here: every table is made when a store is opened, so they went with its file
TABLES_GONE = ("the run store's file was emptied or deleted under this process (its tables are gone, and the runs it "
               "held with them)")


class StoreError(Exception):
    """The run store's file cannot be used; the message says why in one sentence, and nothing was changed."""


class StoreReadOnly(StoreError):
    """A write to a run store that can only be read (a read-only mount, file or folder); `reason` says which."""

    def __init__(self, path: Path, reason: str) -> None:
        self.reason = reason
        fix = ("free some space on that disk (the store works again as soon as there is room) or name a store on "
               "another disk" if reason.startswith(DISK_FULL) else "name a store in a folder you can write")
        super().__init__(f"the run store {path} can only be read: {reason}. Its runs can be listed, shown and "
                         f"compared, but nothing can be queued, changed or deleted in it; to run, {fix} (--db PATH or "
                         "COMPILE_LAB_DB)")


def read_only_reason(path: Path) -> str | None:
    """Why the store at `path` can be read but not written, in words; None where it can be written.

    A read-only mount, a read-only file, or a folder where SQLite cannot make the -wal and -shm files it keeps beside
    a store in WAL mode. os.access answers for this process's user: root may write a file whose mode says read-only,
    and so is not told otherwise."""
    folder = next(p for p in path.absolute().parents if p.exists())
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
        return f"{folder} is on a read-only mount"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is read-only"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"its folder {folder} is read-only (SQLite writes its -wal and -shm files beside the store)"
    return None


def disk_full(e: BaseException, path: Path) -> str | None:
    """Whether `e`, met opening the store at `path`, is its disk being full: that in words, with how much is free;
    None for any other error. SQLite says "database or disk is full" where a write finds no room, but only "disk I/O
    error" where it cannot make or grow the -shm file it keeps beside a store in WAL mode, which opening one does."""
    folder = next(p for p in path.absolute().parents if p.exists())
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None
    said = "full" in str(e) or (isinstance(e, OSError) and e.errno == errno.ENOSPC)
    if not said and not ("disk I/O error" in str(e) and free < FULL_BELOW_BYTES):
        return None
    return f"{DISK_FULL}, {free / 1024:.0f} KiB free on {folder}"


def _read_only_uri(path: Path) -> str:
    """The URI that reads the store at `path` without writing anything beside it.

    mode=ro reads a store in WAL mode, its -wal file included, where its -shm file exists or can be made; on a
    read-only mount or a full disk without them only immutable=1 opens it (SQLite then reads the file alone, which is
    the whole store when the last connection closed cleanly and removed its -wal)."""
    base = path.resolve().as_uri()
    try:
        _read_schema(f"{base}?mode=ro")
        return f"{base}?mode=ro"
    except sqlite3.OperationalError as e:
        if "unable to open" not in str(e) and disk_full(e, path) is None:
            raise
    if _wal_size(path):
        print(f"compile-lab: the run store {path} can only be read and its -wal file cannot be read without a -shm "
              "file beside it: the runs written last may be missing", file=sys.stderr)
    return f"{base}?mode=ro&immutable=1"


def open_file(path: Path, *, kept: bool = False, **kwargs) -> sqlite3.Connection:
    """A connection to the store at `path`: read-only where this process found it can only be read (StoreFile).
    Counted among this process's connections to the file (tcore.store.sidecars), until it is closed. kept=True: one
    the process keeps open and only reads on (the change watch, tcore.store.changes), opened read-only, so that
    closing it never checkpoints a -wal (tcore.store.sidecars says why that matters)."""
    resolved = path.resolve()
    read_only = _READ_ONLY.get(resolved)
    uri = read_only[1] if read_only else f"{resolved.as_uri()}?mode=ro" if kept else None
    sidecars = of_file(resolved)
    sidecars.opening(kept)
    try:
        db = (sqlite3.connect(uri, uri=True, factory=Counted, **kwargs) if uri
              else sqlite3.connect(path, factory=Counted, **kwargs))
    except BaseException:
        sidecars.closed(kept)
        raise
    db.sidecars, db.kept = sidecars, kept
    return db


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
            if attempt < 2:  # a store being created by another process: its first page not written yet
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
    uri = path.resolve().as_uri()
    try:
        # immutable: read the file as it lies, making no -wal or -shm beside it (nothing touched if it is bad)
        _read_schema(f"{uri}?mode=ro&immutable=1")
    except sqlite3.DatabaseError as e:
        if not _in_use(path):
            raise StoreError(f"{where}: SQLite cannot read it: {e}") from None
        # Another connection has it open: its checkpoint may be copying pages from the log into the file as the
        # lock-free read above reads them, and a page half written reads "malformed". SQLite reading under its
        # locks, the log included, is the judge; beside a store in use, that makes no file that is not there.
        try:
            _read_schema(f"{uri}?mode=ro")
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{where}: SQLite cannot read it: {e}") from None


def _read_schema(uri: str) -> None:
    """Open the store at `uri` and read its list of tables, which is where a file that is not a store fails."""
    db = sqlite3.connect(uri, uri=True, timeout=30)
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    finally:
        db.close()


def _in_use(path: Path) -> bool:
    """Whether a connection has the store open now, or left it without closing: its -wal or -shm is beside it."""
    return any(path.with_name(path.name + suffix).exists() for suffix in ("-wal", "-shm"))


def _wal_size(path: Path) -> int:
    try:
        return path.with_name(path.name + "-wal").stat().st_size
    except OSError:
        return 0


def damage(path: Path) -> str | None:
    """What is wrong with the store file at `path`, in words; None where SQLite reads all of it without error.
    StoreError where its disk is full: SQLite then cannot open it to tell (a sound store reads as "disk I/O error")."""
    try:
        check_path(path)
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            found = [row[0] for row in db.execute("PRAGMA quick_check(5)")]
        finally:
            db.close()
    except StoreError as e:
        return str(e).split(": ", 1)[-1]
    except sqlite3.DatabaseError as e:
        if full := disk_full(e, path):  # no room for the -shm file a reader makes: nothing is known of the store
            raise StoreError(f"cannot tell whether the run store {path} is damaged: {full}, and SQLite needs a "
                             "little room to read a store. Nothing was moved: free some space on that disk (a "
                             "sound store then works again as it is)") from None
        return f"SQLite cannot read it: {e}"
    return None if found == ["ok"] else f"SQLite finds it damaged: {'; '.join(found)}"


def set_aside(path: Path, now: float | None = None) -> tuple[Path, list[Path], str]:
    """Move a damaged run store out of the way, so that the next process makes a new, empty one at `path`.

    Renamed beside itself with the time, its -wal and -shm files with it (runs.sqlite.damaged-20250101-120000): a -wal
    left behind would be replayed into the new store. Nothing is deleted: a person may get runs back from it
    (`sqlite3 FILE .recover`). Returns (the new path, the files moved, what was wrong). StoreError, with nothing
    moved, for a missing file, one that is not a file, an empty one, one that is not SQLite at all (`--db ~/.bashrc`
    would have renamed it), or a store SQLite reads without error."""
    if not path.exists():
        raise StoreError(f"there is no run store at {path}: nothing to set aside")
    if not path.is_file():
        raise StoreError(f"{path} is not a file: nothing was moved")
    with open(path, "rb") as f:
        header = f.read(len(SQLITE_MAGIC))
    if not header:
        raise StoreError(f"{path} is empty: a new store is made in it as it is, so nothing was moved")
    if header != SQLITE_MAGIC:
        raise StoreError(f"{path} is not a SQLite database (it does not start with SQLite's header), so not a run "
                         "store: nothing was moved. Check the path; to start a new store, name another file (--db "
                         "PATH or COMPILE_LAB_DB) or move this one away yourself")
    why = damage(path)
    if why is None:
        raise StoreError(f"the run store {path} is not damaged (SQLite reads all of it without error): nothing was "
                         "moved")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    target, n = path.with_name(f"{path.name}.damaged-{stamp}"), 1
    sidecars = ("", "-wal", "-shm")
    while any(target.with_name(target.name + s).exists() for s in sidecars):  # set aside twice within a second
        target, n = path.with_name(f"{path.name}.damaged-{stamp}-{n}"), n + 1
    moved: list[Path] = []
    for suffix in sidecars:
        source = path.with_name(path.name + suffix)
        if not source.exists():
            continue
        try:
            os.rename(source, target.with_name(target.name + suffix))
        except OSError as e:
            done = f"; moved already: {', '.join(map(str, moved))}" if moved else "; nothing was moved"
            raise StoreError(f"cannot move {source} to {target.parent}: {e.strerror}{done}") from None
        moved.append(source)
    return target, moved, why


# Store files this process has set up: resolved path -> the file's inode then. A store deleted while in use
# (its file recreated empty by the next connection) is set up again rather than left without tables.
_SCHEMA_READY: dict[Path, int] = {}
# Of those, the ones that can only be read: resolved path -> (why, in words; the URI that opens it read-only).
_READ_ONLY: dict[Path, tuple[str, str]] = {}


class StoreFile:
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
        if reason := read_only_reason(self.path):
            self._open_read_only(resolved, reason)
            return
        _READ_ONLY.pop(resolved, None)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._open() as db:
                _use_wal(db)
                if schema.create(db):
                    # into the file itself: until a checkpoint a new store's tables live only in its -wal, and a -wal
                    # deleted then (while another connection keeps it from being checkpointed) takes the whole store
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except (OSError, sqlite3.Error) as e:
            if full := disk_full(e, self.path):
                # read as it lies until there is room: not marked set up, so each use tries to open it writable again
                self._open_read_only(resolved, full)
                _SCHEMA_READY.pop(resolved, None)
                return
            raise StoreError(f"cannot use {self.path} as the run store: "
                             f"{e.strerror or e if isinstance(e, OSError) else e}") from None
        if ready is not None:
            print(f"compile-lab: the run store {self.path} was deleted while in use; a new, empty one was made "
                  "in its place (the runs it held are gone, unless it was moved: `python -m tcore store set-aside` "
                  "keeps it beside, renamed)", file=sys.stderr)
        _SCHEMA_READY[resolved] = resolved.stat().st_ino

    def _open_read_only(self, resolved: Path, reason: str) -> None:
        """Read a store that cannot be written as it is: no WAL switch, no tables made, nothing written beside it."""
        if not resolved.exists() or resolved.stat().st_size == 0:
            raise StoreError(f"cannot make a run store at {self.path}: {reason}; name a file in a folder you can "
                             "write (--db PATH or COMPILE_LAB_DB)")
        try:
            uri = _read_only_uri(resolved)
            with closing(sqlite3.connect(uri, uri=True, timeout=30)) as db:
                lacking = schema.missing(db)
        except sqlite3.Error as e:
            raise StoreError(f"cannot use {self.path} as the run store ({reason}): {e}") from None
        if lacking:
            shown = ", ".join(lacking[:3]) + (" and more" if len(lacking) > 3 else "")
            raise StoreError(f"cannot use {self.path} as the run store: {reason}, and it was made by an older version "
                             f"of the lab (it lacks {shown}); open it once where it can be written")
        _READ_ONLY[resolved] = (reason, uri)
        _SCHEMA_READY[resolved] = resolved.stat().st_ino

    @property
    def read_only(self) -> str | None:
        """Why this store can only be read, in words (a read-only mount, file or folder); None where it can be
        written. Known once the store is opened; writes to it raise StoreReadOnly."""
        found = _READ_ONLY.get(self.path.resolve())
        return found[0] if found else None

    @property
    def store_id(self) -> str:
        """A random id made with the store: a store deleted and made again at the same path has another."""
        with self._connect() as db:
            return db.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()[0]

    @contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        db = open_file(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
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
    def _write(self, wait: bool = True) -> Iterator[sqlite3.Connection]:
        """One short write transaction; BEGIN IMMEDIATE takes the write lock up front, so no deadlock. wait=False: a
        write lock another process holds is not waited for ("database is locked" at once)."""
        self._ensure_schema()
        if (reason := self.read_only) is not None:
            raise StoreReadOnly(self.path, reason)
        for attempt in range(2):
            with self._connect() as db:
                if not wait:
                    db.execute("PRAGMA busy_timeout=0")
                db.execute("BEGIN IMMEDIATE")
                if attempt == 0 and db.sidecars is not None and db.sidecars.replaced():
                    db.execute("ROLLBACK")  # its -wal and -shm deleted under this process: tcore.store.sidecars
                    replaced = db.sidecars
                else:
                    try:
                        yield db
                    except BaseException:
                        db.execute("ROLLBACK")
                        raise
                    db.execute("COMMIT")
                    return
            if not replaced.drain():
                print(f"compile-lab: the run store {self.path}'s -wal and -shm files were deleted while this process "
                      "had it open, and some of its connections stayed open: what it writes now may not be kept",
                      file=sys.stderr)


class Part:
    """One concern of the store (the queue, the devices, the sweeps...) over its file: it reads through _connect() and
    writes through _write(), the file's own."""

    def __init__(self, file: StoreFile) -> None:
        self._file = file

    @property
    def path(self) -> Path:
        return self._file.path

    def _connect(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._file._connect()

    def _write(self, wait: bool = True) -> AbstractContextManager[sqlite3.Connection]:
        return self._file._write(wait)
