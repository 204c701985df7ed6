"""A disk that fills up under the run store: the run under way fails with a reason in words, nothing already
recorded is lost, the store can still be read while the disk is full, and it works again once there is room (it used
to be refused for good)."""
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tcore import cli
from tcore.lab.settings.config import REPO_ROOT
from tcore.store import RunStore, StoreReadOnly, connection
from tcore.store.connection import check_path
from tests.app_harness import stored_run
from tests.helpers import QUICK, insert_run, wait_until


def frames(wal: bytes) -> list[tuple[int, bytes]]:
    """(page number, page) of every frame of a SQLite write-ahead log, oldest first."""
    page_size = int.from_bytes(wal[8:12], "big")
    out, at = [], 32
    while at + 24 + page_size <= len(wal):
        out.append((int.from_bytes(wal[at:at + 4], "big"), wal[at + 24:at + 24 + page_size]))
        at += 24 + page_size
    return out


def test_a_checkpoint_cut_short_by_a_full_disk_leaves_a_store_sqlite_can_read(tmp_path):
    """The state a full disk left: the new first page (its header counting every page) written into the file, the
    other pages still only in the write-ahead log. SQLite reads them from the log; the pre-open check refused it."""
    live = tmp_path / "live" / "runs.sqlite"
    store = RunStore(live)
    kept = [stored_run(store, QUICK)]
    holder = sqlite3.connect(live)  # open, so that no close checkpoints the log into the file
    holder.execute("PRAGMA wal_autocheckpoint=0")
    holder.execute("SELECT 1 FROM runs").fetchall()
    with store._connect() as db:
        db.execute("PRAGMA wal_autocheckpoint=0")
    kept += [insert_run(store, QUICK) for _ in range(40)]
    copy = tmp_path / "copy" / "runs.sqlite"  # the files as a killed process left them
    copy.parent.mkdir()
    shutil.copy(live, copy)
    shutil.copy(live.with_name("runs.sqlite-wal"), copy.with_name("runs.sqlite-wal"))
    holder.close()
    wal = copy.with_name("runs.sqlite-wal").read_bytes()
    first = [page for number, page in frames(wal) if number == 1][-1]
    data = bytearray(copy.read_bytes())
    data[:len(first)] = first  # the checkpoint wrote page 1, then the disk was full
    copy.write_bytes(bytes(data))
    header_pages = int.from_bytes(first[28:32], "big")
    assert header_pages * len(first) > copy.stat().st_size  # cut short, as the header reads it

    check_path(copy)  # not refused
    reopened = RunStore(copy)
    assert {r.id for r in reopened.list(limit=100)} == set(kept)
    with reopened._connect() as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.fixture
def small_disk(tmp_path):
    """A 700 KB tmpfs, where the machine lets this test mount one (root)."""
    where = tmp_path / "small"
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=700k", "tmpfs", str(where)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def fill(folder: Path) -> Path:
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:  # ENOSPC: full
        pass
    finally:
        os.close(fd)
    return filler


def test_a_disk_that_fills_up_mid_run_fails_the_run_in_words_and_the_store_comes_back(small_disk):
    path = small_disk / "runs.sqlite"
    store = RunStore(path)
    earlier = stored_run(store, QUICK)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), COMPILE_LAB_SPARE_WORKERS="0")
    cli = subprocess.Popen(
        [sys.executable, "-m", "tcore", "run", "--db", str(path), "--model", "captioner", "--preset", "tiny",
         "--batch-size", "2", "--device", "cpu", "--warmup-steps", "1", "--timed-steps", "2", "--rounds", "1",
         "--backend", "aot_eager", "--cache", "warm", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=env)
    try:
        wait_until(lambda: worker_recorded(store), limit_s=300, what="the run's worker recorded")
        filler = fill(small_disk)  # while its worker measures: its result cannot be written
        out, err = cli.communicate(timeout=300)
    finally:
        cli.kill()
    assert cli.returncode == 1, err
    assert "Traceback" not in err and "None: None" not in err, err
    last = err.strip().splitlines()[-1]
    assert "failed" in last and "the disk that holds the run store is full" in last, err

    filler.unlink()  # room again: the store opens, and what it held is there
    time.sleep(0.2)
    listed = subprocess.run([sys.executable, "-m", "tcore", "list", "--db", str(path)], capture_output=True,
                            text=True, cwd=REPO_ROOT, env=env)
    assert listed.returncode == 0, listed.stderr
    reopened = RunStore(path)
    assert reopened.get(earlier).status == "finished" and reopened.get(earlier).result["eager_steps_per_s"] == 10.0
    (run,) = [r for r in reopened.list() if r.id != earlier]
    # the lab said it ended: it stays ended, however often the queue is read again, and says how
    assert run.status == "failed" and run.error_kind == "crashed", run
    assert "could not be written then (a full disk)" in run.error["message"]
    again = subprocess.run([sys.executable, "-m", "tcore", "list", "--db", str(path)], capture_output=True,
                           text=True, cwd=REPO_ROOT, env=env)
    assert again.returncode == 0 and RunStore(path).get(run.id).status == "failed"
    with reopened._connect() as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def worker_recorded(store: RunStore) -> bool:
    """Whether a running run's worker is in the store (the lab writes it before the worker is handed the run)."""
    with store._connect() as db:
        return db.execute("SELECT 1 FROM runs WHERE status='running' AND pid IS NOT NULL").fetchone() is not None


def test_a_store_on_a_full_disk_is_read_as_it_lies_and_a_write_says_the_disk_is_full(tmp_path, monkeypatch, capsys):
    """Opening a store in WAL mode makes its -shm file; on a full disk SQLite says only "disk I/O error" there, and
    the store was refused whole, for reading too. Simulated: the switch to WAL fails as it does there, with 0 free."""
    path = tmp_path / "runs.sqlite"
    kept = insert_run(RunStore(path), QUICK, status="finished")
    monkeypatch.setattr(connection, "_SCHEMA_READY", {})  # a fresh process
    monkeypatch.setattr(connection, "_READ_ONLY", {})

    def no_room(db):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(connection, "_use_wal", no_room)
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: shutil._ntuple_diskusage(1 << 30, 1 << 30, 0))
    store = RunStore(path)
    assert store.read_only == f"the disk that holds it is full, 0 KiB free on {tmp_path}"
    assert [r.id for r in store.list()] == [kept]
    with pytest.raises(StoreReadOnly, match=r"is full, 0 KiB free on .*; to run, free some space on that disk"):
        store.lab.set_lab_state("paused", True)
    assert cli.main(["list", "--db", str(path)]) == 0
    assert kept in capsys.readouterr().out

    monkeypatch.undo()  # room again: the same process writes to it
    store.lab.set_lab_state("paused", True)
    assert store.read_only is None and store.lab.lab_state("paused") is True


def test_list_and_run_on_a_really_full_disk(small_disk, tmp_path):
    made = tmp_path / "made" / "runs.sqlite"
    kept = insert_run(RunStore(made), QUICK, status="finished")
    path = small_disk / "runs.sqlite"
    shutil.copy(made, path)  # closed cleanly: the file alone is the store, its -shm made by the next opening
    filler = fill(small_disk)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), COMPILE_LAB_SPARE_WORKERS="0")
    try:
        listed = subprocess.run([sys.executable, "-m", "tcore", "list", "--db", str(path)], capture_output=True,
                                text=True, cwd=REPO_ROOT, env=env)
        assert listed.returncode == 0 and kept in listed.stdout, listed.stderr
        ran = subprocess.run([sys.executable, "-m", "tcore", "run", "--db", str(path), "--model", "captioner",
                              "--preset", "tiny", "--device", "cpu", "--quiet"], capture_output=True, text=True,
                             cwd=REPO_ROOT, env=env)
        assert ran.returncode == 2 and "the disk that holds it is full, 0 KiB free" in ran.stderr, ran.stderr
        assert "free some space on that disk" in ran.stderr and "I/O" not in ran.stderr, ran.stderr
    finally:
        filler.unlink()


def test_set_aside_leaves_a_sound_store_on_a_full_disk_where_it_is(small_disk, tmp_path):
    """On a full disk SQLite cannot make the -shm file it opens a store with, and says "disk I/O error": set-aside
    took that for damage and moved a sound store aside, so the next command, once there was room, began an empty
    store in its place (the instructor's runs gone from every page)."""
    made = tmp_path / "made" / "runs.sqlite"
    kept = insert_run(RunStore(made), QUICK, status="finished")
    path = small_disk / "runs.sqlite"
    shutil.copy(made, path)
    filler = fill(small_disk)
    try:
        with pytest.raises(connection.StoreError, match="the disk that holds it is full"):
            connection.set_aside(path)
        assert path.exists() and not list(small_disk.glob("*.damaged-*"))
    finally:
        filler.unlink()
    assert [r.id for r in RunStore(path).list()] == [kept]
