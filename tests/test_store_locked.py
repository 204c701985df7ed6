"""A finished run's result survives a store that another process holds write-locked (it waits and writes it once the
lock goes) and a store that lost the run's row while it ran (its -wal file deleted under the connections that held it:
the run is written again with its result); `tcore list` lists what it can read beside a held lock."""
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from tcore.lab.run import recording, runs
from tcore.lab.settings.config import REPO_ROOT
from tcore.store import connection
from tests.helpers import QUICK


def _hold_write_lock(path, until: threading.Event, holding: threading.Event) -> threading.Thread:
    """Another connection (as another process would) holds the store write-locked until `until` is set."""
    def hold():
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        holding.set()
        until.wait(600)
        db.execute("ROLLBACK")
        db.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    holding.wait(60)
    return thread


def test_a_write_refused_for_another_connections_lock_is_tried_again_until_it_goes(store, monkeypatch):
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_S", 0.05)
    run_id = store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=runs.scheduler.this_process(), timeout_s=60)
    release, holding, waits = threading.Event(), threading.Event(), []
    holder = _hold_write_lock(store.path, release, holding)

    def on_wait(e):  # the lock goes once the write has been refused twice: no clock decides
        waits.append(e)
        if len(waits) == 2:
            release.set()

    finished = recording.through_locks(lambda: store.finish(run_id, result={"speedup": 1.5}), on_wait, every_s=0.01)
    holder.join(60)
    assert finished and len(waits) == 2 and all(recording.is_locked(e) for e in waits)
    assert store.get(run_id).status == "finished" and store.get(run_id).result["speedup"] == 1.5


def test_other_store_errors_and_a_lock_past_its_bound_are_raised(store):
    def refuse(message):
        raise sqlite3.OperationalError(message)

    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        recording.through_locks(lambda: refuse("disk I/O error"), lambda e: None)
    ticks = iter(range(100))
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        recording.through_locks(lambda: refuse("database is locked"), lambda e: None, for_s=3, every_s=0,
                                clock=lambda: next(ticks))


def test_a_run_whose_row_the_store_lost_while_it_ran_is_written_again_with_its_result(store):
    def lose_the_row(event):  # in the thread that follows the run, so before its result comes
        if event.get("type") == "phase" and event.get("phase") == "measuring":
            with sqlite3.connect(store.path) as db:  # what a deleted -wal does to rows written since a checkpoint
                db.execute("DELETE FROM runs WHERE id=?", (live.run_id,))

    live = runs.start(QUICK, store, on_event=lose_the_row)
    live.wait()
    record = store.get(live.run_id)
    assert record.status == "finished" and record.result["speedup"] > 0
    assert any("lost this run's record while it ran" in n for n in record.result["notes"])
    assert record.label == QUICK.label and record.spec == QUICK.to_dict()


def test_list_shows_the_runs_while_another_process_holds_the_store_write_locked(store, monkeypatch):
    run_id = store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=runs.scheduler.this_process(), timeout_s=60)
    release, holding = threading.Event(), threading.Event()
    holder = _hold_write_lock(store.path, release, holding)
    try:
        env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "COMPILE_LAB_SPARE_WORKERS": "0"}
        script = ("import tcore.store.connection as c; c.BUSY_TIMEOUT_S = 0.2; "
                  "from tcore.cli import main; raise SystemExit(main())")
        listed = subprocess.run([sys.executable, "-c", script, "list", "--db", str(store.path)],
                                capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=600)
    finally:
        release.set()
        holder.join(60)
    assert listed.returncode == 0, listed.stderr
    assert run_id in listed.stdout and "write-locked" in listed.stderr


def test_a_run_that_ends_while_another_process_holds_the_store_write_locked_keeps_its_result(store, monkeypatch):
    """The whole end of a run, not the finish alone: what it saved (profiler traces, compile artifacts) is written
    before its result, and a lock refused there must be waited for as the result's own write is."""
    from tcore.lab.run import following

    monkeypatch.setattr(connection, "BUSY_TIMEOUT_S", 0.05)
    release, holding, said = threading.Event(), threading.Event(), []
    holders = []

    def hold_at_the_end(event):  # in the thread that follows the run: before anything of its end is written
        if event.get("type") == "result":
            holders.append(_hold_write_lock(store.path, release, holding))

    def say(self, e):  # each refusal is said; the lock goes after the first, as another process's would
        said.append(e)
        release.set()

    monkeypatch.setattr(following.Following, "_say_store_trouble", say, raising=False)
    live = runs.start(QUICK.replace(torch_trace=False), store, on_event=hold_at_the_end)
    live.wait()
    for holder in holders:
        holder.join(60)
    assert holders and said and all(recording.is_locked(e) for e in said)
    record = store.get(live.run_id)
    assert record.status == "finished", record.error
    assert record.result["speedup"] > 0


def test_list_and_show_beside_a_held_write_lock_do_not_wait_for_it(store, monkeypatch, capsys):
    """Their housekeeping writes (marking the runs of processes that ended, rewriting old results) are tried without
    waiting and skipped while another process holds the lock: `list` waited SQLite's whole busy timeout first, and
    `show` then failed. No clock decides: SQLite would wait 600 s, the lock goes after 120 s, and both commands must
    have answered while it was still held."""
    from tcore import cli

    monkeypatch.setattr(connection, "BUSY_TIMEOUT_S", 600.0)
    run_id = store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=runs.scheduler.this_process(), timeout_s=60)
    release, holding = threading.Event(), threading.Event()
    holder = _hold_write_lock(store.path, release, holding)
    let_go = threading.Timer(120, release.set)  # a command that waited for the lock returns only after this
    let_go.start()
    try:
        listed = cli.main(["list", "--db", str(store.path)])
        listed_while_held = not release.is_set()
        said_list = capsys.readouterr()
        shown = cli.main(["show", run_id, "--db", str(store.path)])
        shown_while_held = not release.is_set()
        said_show = capsys.readouterr()
    finally:
        let_go.cancel()
        release.set()
        holder.join(60)
    assert listed == 0 and run_id in said_list.out and listed_while_held, said_list.err
    assert said_list.err.count("\n") == 1 and "write-locked" in said_list.err
    assert shown == 0 and QUICK.label in said_show.out and shown_while_held, said_show.err
    assert said_show.err.count("\n") <= 1
