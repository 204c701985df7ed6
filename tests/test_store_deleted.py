"""The run store deleted under a lab process while a run is under way: the run's owner is told what happened, in
words, and the process logs no FOREIGN KEY traceback."""
import gc
import sqlite3
import subprocess
import sys
from contextlib import closing

import pytest

from tcore.lab.run import runs
from tcore.lab.run.recording import store_failure
from tcore.lab.settings.config import REPO_ROOT
from tcore.store import RunStore, changes, schema
from tests.helpers import QUICK, insert_run, wait_until

pytestmark = pytest.mark.usefixtures("no_outside_limits")


def test_a_run_whose_store_was_deleted_ends_with_a_word_for_its_owner(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("COMPILE_LAB_SPARE_WORKERS", "0")
    store = RunStore(tmp_path / "runs.sqlite")
    run = runs.start(QUICK.replace(timed_steps=40, rounds=4), store, owner="ada~0001.00000000c0ffee00")
    wait_until(lambda: run.phase not in ("queued", None), limit_s=180, what="the run under way")
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"runs.sqlite{suffix}").unlink(missing_ok=True)
    record = run.wait(240)
    assert run.done and record is not None
    assert record.status == "failed"
    assert "the run store was deleted or replaced while the run was under way" in record.error["message"]
    assert run.snapshot()["status"] == "failed"  # what the owner's page shows
    err = capfd.readouterr().err
    assert "FOREIGN KEY" not in err and "Traceback" not in err, err


def test_a_new_store_s_tables_are_in_its_file_not_only_in_its_write_ahead_log(tmp_path):
    """While another connection is open, closing the one that made the tables does not checkpoint them into the file:
    a -wal deleted then took the whole store, and a run under way ended on "no such table: runs"."""
    path = tmp_path / "runs.sqlite"
    other = sqlite3.connect(path, isolation_level=None)  # another process's connection, open before the store is made
    other.execute("PRAGMA journal_mode=WAL")
    other.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    RunStore(path)
    with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)) as alone:  # the file, no -wal
        assert schema.missing(alone) == []
    other.close()


def test_a_store_whose_tables_went_is_said_as_emptied_or_deleted_not_no_such_table(tmp_path):
    said = store_failure(sqlite3.OperationalError("no such table: runs"), RunStore(tmp_path / "runs.sqlite"))
    assert said.startswith("the run store's file was emptied or deleted under this process") and "no such" not in said


def test_wal_and_shm_deleted_under_a_process_that_keeps_the_store_open_lose_no_ones_runs(tmp_path):
    """probe4 #6: a lab process keeps a connection open (its pages' change watch); the -wal and -shm files are deleted;
    another process records a run, then this one finishes its own. This process's connections kept the deleted -shm
    mapped: its write went nowhere and its last connection to close wrote the old -wal back and deleted the new one
    by its name, taking the other process's run with it."""
    path = tmp_path / "runs.sqlite"
    store = RunStore(path)
    before = insert_run(store, QUICK)
    page = changes.reads(store)
    assert [r.id for r in page.list()] == [before]  # the watch's connection is open from here on
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"runs.sqlite{suffix}").unlink()
    code = ("import sys; from tcore.store import RunStore; from tests.helpers import QUICK, insert_run; "
            "print(insert_run(RunStore(sys.argv[1]), QUICK))")
    other = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                           cwd=REPO_ROOT).stdout.strip()
    mine = insert_run(store, QUICK)
    store.finish(mine, result={"speedup": 1.5})
    assert {r.id for r in page.list()} == {before, other, mine}  # the page sees them all, on a new connection
    changes._WATCHES.clear()  # the process lets go of the store, its kept connection last
    gc.collect()
    code = ("import sys; from tcore.store import RunStore; "
            "print(*(f'{r.id}:{r.status}' for r in RunStore(sys.argv[1]).list()))")
    seen = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                          cwd=REPO_ROOT).stdout.split()
    assert sorted(seen) == sorted([f"{before}:running", f"{other}:running", f"{mine}:finished"])
