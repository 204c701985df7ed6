"""The store's disk, as the queue sees it: no run starts while the disk that holds the run store has too little room
for a run's record, or filled up while one was written and a test write there still fails (the queue's waiting
words say which). A run that hits a full disk while recording tells it here (was_full).
"""
from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

# Below this much free space on the store's disk no run starts: it could run to its end and not be recorded (its
# result, profiles and TORCH_TRACE take up to a few MiB).
MIN_FREE_BYTES = 16 << 20
TEST_WRITE_BYTES = 1 << 20  # after a disk-full, runs start again once a write of this much succeeds there
_FILLED: set[str] = set()  # stores whose disk filled while a run was recorded (was_full)


def was_full(store_path: str | Path) -> None:
    """Recording into the store at `store_path` hit a full disk: its queue starts no run until a test write succeeds."""
    _FILLED.add(str(Path(store_path).resolve()))


def free_bytes(folder: Path) -> int:
    return shutil.disk_usage(folder).free


def hold(store_path: str | Path) -> str | None:
    """Why no run may start now for the store at `store_path`, or None: its disk has too little room for a record,
    or filled up while one was written and a test write there still fails."""
    path = Path(store_path).resolve()
    try:
        free = free_bytes(path.parent)
    except OSError:
        return None  # cannot tell: the store's own errors say what is wrong
    if free < MIN_FREE_BYTES:
        return (f"the disk that holds the run store has {free / 2**20:.1f} MiB free, under the "
                f"{MIN_FREE_BYTES >> 20} MiB a run's record may need; runs start again once there is room")
    if str(path) in _FILLED:
        if not _test_write(path.parent):
            return ("the disk that holds the run store filled up while a run was recorded; runs start again once "
                    "there is room")
        _FILLED.discard(str(path))
    return None


def _test_write(folder: Path) -> bool:
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".compile-lab-room-") as f:
            f.write(bytes(TEST_WRITE_BYTES))
            f.flush()
            os.fsync(f.fileno())
        return True
    except OSError:
        return False


def full(e: BaseException) -> bool:
    """SQLITE_FULL ("database or disk is full") or ENOSPC."""
    return (isinstance(e, sqlite3.OperationalError) and "full" in str(e)) or \
        (isinstance(e, OSError) and e.errno == errno.ENOSPC)
