"""The run queue: one run at a time per device slot across processes, cancel, crashes and timeouts, recovery.

Real runs use captioner/tiny with backend=eager (Dynamo traces, Inductor is skipped): about 4 s each.
A "held" slot is a row claimed straight in the store, with no worker: it keeps the queue waiting for free.
"""
import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tcore.lab.queue import scheduler, waiting
from tcore.lab.run import registry, runs
from tcore.lab.settings.config import REPO_ROOT
from tcore.store import RunStore
from tcore.worker.failures import STALL_ENV
from tests.helpers import (
    HANG_S,
    QUICK,
    assert_no_overlap,
    hold_cpu_slot,
    killed_after_it_reports,
    last_heartbeat,
    stop_outside_a_write,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("no_outside_limits")


# --- the queue with real runs ---------------------------------------------------------------------

def test_runs_start_first_come_first_served_across_sessions_one_at_a_time(store, cleanup):
    holder = hold_cpu_slot(store)
    a, b, c = [runs.start(QUICK, store, owner=owner) for owner in ("alice", "bob", "alice")]
    cleanup += [a, b, c]
    assert [r.snapshot()["queue_position"] for r in (a, b, c)] == [1, 2, 3]
    assert all(r.phase == "queued" and r.handle is None for r in (a, b, c))
    assert c.snapshot()["eta_s"] is None  # no run has finished on this store: nothing to estimate from
    time.sleep(1)
    assert all(r.status == "queued" for r in (a, b, c))  # the slot is busy: nothing starts
    store.finish(holder, result={"device": "cpu"})

    wait_until(lambda: b.status == "running", what="second run starting")
    assert a.done and c.status == "queued"
    # now that runs have finished, c (next after b) gets an estimate from their durations: the holder's counts too
    # (the same settings), and it held the slot for as long as this test took to queue three runs, which on a busy
    # machine was longer than a's whole run; the median of the two is at most the longer, less b's time so far
    wait_until(lambda: c.snapshot()["queue_position"] == 1 and c.snapshot()["eta_s"] is not None, 60, "an ETA")
    took = [store.get(run_id).finished_at - store.get(run_id).started_at for run_id in (holder, a.run_id)]
    assert 0 <= c.snapshot()["eta_s"] <= max(took)
    for run in (a, b, c):
        assert run.wait(HANG_S).status == "finished"
    records = [store.get(r.run_id) for r in (a, b, c)]
    assert [r.owner for r in records] == ["alice", "bob", "alice"]
    assert records[0].started_at < records[1].started_at < records[2].started_at
    assert_no_overlap(records)


def test_cancel_a_queued_run_it_never_starts_cancel_a_running_one_it_stops(store, cleanup):
    first = runs.start(QUICK, store, owner="alice")
    second = runs.start(QUICK, store, owner="alice")
    third = runs.start(QUICK, store, owner="bob")
    cleanup += [first, second, third]
    second.cancel()
    rec = second.wait(HANG_S)
    assert rec.status == "failed" and rec.error_kind == "cancelled" and "never started" in rec.error["message"]
    assert rec.started_at is None and rec.device_slot is None and second.handle is None

    with pytest.raises(PermissionError, match="belongs to someone else; only its owner or the instructor"):
        runs.cancel(first.run_id, store, owner="bob")
    wait_until(lambda: first.status == "running" and first.handle is not None, what="first run starting")
    store.queue.request_cancel(first.run_id)  # as another process would: the owning process stops the worker
    rec = first.wait(HANG_S)
    assert rec.status == "failed" and rec.error_kind == "cancelled"
    assert third.wait(HANG_S).status == "finished"  # the queue moved on
    assert second.handle is None


def test_a_killed_worker_a_compile_error_and_a_timeout_each_are_recorded_and_the_queue_moves_on(
        store, cleanup, monkeypatch):
    victim = runs.start(QUICK, store, owner="alice")
    broken = runs.start(QUICK.replace(graph_break=True, fullgraph=True), store, owner="bob")  # Dynamo refuses
    monkeypatch.setenv("COMPILE_LAB_MAX_RUN_S", "1.5")  # read when a run is submitted: this one only
    # the most steps a spec allows: minutes on any machine, so it is the 1.5 s that ends it, however fast the machine
    slow = runs.start(QUICK.replace(timed_steps=100_000), store, owner="carol", timeout_s=600)
    monkeypatch.delenv("COMPILE_LAB_MAX_RUN_S")
    after = runs.start(QUICK, store, owner="dave")
    cleanup += [victim, broken, slow, after]
    assert any("lowered from 600 s" in note for note in slow.notes)

    wait_until(lambda: victim.phase not in ("queued", None), what="worker up")
    os.kill(victim.handle.pid, signal.SIGKILL)  # as the kernel's OOM killer would
    rec = victim.wait(HANG_S)
    assert rec.status == "failed" and rec.error_kind == "crashed" and "SIGKILL" in rec.error["message"]
    assert broken.wait(HANG_S).error_kind == "compile_error"
    rec = slow.wait(HANG_S)
    assert rec.error_kind == "timeout" and "1.5 s time limit" in rec.error["message"]
    assert after.wait(HANG_S).status == "finished"
    assert_no_overlap([store.get(r.run_id) for r in (victim, broken, slow, after)])
    assert store.queue.running_and_queued(scheduler.this_process().host) == []  # nothing left queued or running


# --- several processes ----------------------------------------------------------------------------

SUBMIT_AND_HANG = """
import json, sys, time
from tcore.experiment.spec import Experiment
from tcore.lab.run import runs
from tcore.store import RunStore
from tcore.worker.failures import STALL_ENV
from tests.helpers import insert_run
store = RunStore(sys.argv[1])
exp = Experiment.from_json(sys.argv[2])
live = [runs.start(exp, store, owner="crowd") for _ in range(3)]
while live[0].handle is None or live[0].phase in ("queued", None):
    time.sleep(0.05)
print(json.dumps({"ids": [r.run_id for r in live], "worker": live[0].handle.pid}), flush=True)
time.sleep(600)
"""


def test_after_an_app_restart_queued_runs_are_adopted_and_a_running_one_is_marked_crashed(store):
    # the "app" dies with one run running, two queued. Its worker stays stuck building (it writes nothing more), so it
    # is still there to be stopped however fast the machine is: one that wrote an event after the app died would end
    # on the broken pipe by itself, sooner or later.
    stuck = dict(os.environ, PYTHONPATH=str(REPO_ROOT), **{STALL_ENV: "building:600"})
    state = killed_after_it_reports(SUBMIT_AND_HANG, store, env=stuck)
    running, *queued = state["ids"]
    assert [store.get(i).status for i in state["ids"]] == ["running", "queued", "queued"]

    adopted = runs.recover(store)
    assert sorted(r.run_id for r in adopted) == sorted(queued)
    crashed = store.get(running)
    assert crashed.status == "failed" and crashed.error_kind == "crashed"
    assert "ended before it recorded how the run ended" in crashed.error["message"]
    assert "worker, left behind, was stopped" in crashed.error["message"]
    assert not scheduler.is_alive(state["worker"], None)  # it cannot go on measuring beside the next run
    for run_id in queued:
        assert registry.live(run_id) is not None
        assert registry.live(run_id).wait(HANG_S).status == "finished"
    records = [store.get(i) for i in queued]
    assert all(r.owner == "crowd" for r in records)
    assert_no_overlap(records)


def test_a_stopped_owner_loses_its_runs_once_it_has_been_silent_too_long(store, monkeypatch):
    """Ctrl-Z on a command-line run: the process lives on but no longer moves its runs. Once it has not
    said it is alive for OWNER_SILENT_S, its running run is ended with the reason and its queued runs
    are taken over, so the room is not held."""
    from tcore.store import owners

    monkeypatch.setattr(owners, "OWNER_SILENT_S", 3.0)
    child = subprocess.Popen([sys.executable, "-c", SUBMIT_AND_HANG, str(store.path), QUICK.to_json()],
                             stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                             env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    try:
        state = json.loads(child.stdout.readline())
        wait_until(lambda: last_heartbeat(store, child.pid), what="the owner's first heartbeat")  # else judged alive
        stop_outside_a_write(store, child.pid)
        running, *queued = state["ids"]
        assert runs.recover(store) == []  # alive and heard from a moment ago: nothing is taken yet
        wait_until(lambda: store.get(running).status == "failed", what="the silent owner's run ended")
        ended = store.get(running)
        assert ended.error_kind == "crashed" and "stopped answering" in ended.error["message"]
        wait_until(lambda: all(registry.live(i) is not None for i in queued), what="adoption")
        records = [registry.live(i).wait(HANG_S) for i in queued]
        assert [r.status for r in records] == ["finished", "finished"]
        assert_no_overlap([store.get(i) for i in state["ids"]])
    finally:
        child.kill()
        child.wait()


def _submit_two(path: str, owner: str) -> None:
    assert "streamlit" not in sys.modules, "the spawned child ran app.py as its main module (see conftest)"
    store = RunStore(path)
    pending = [runs.start(QUICK, store, owner=owner) for _ in range(2)]
    for run in pending:
        assert run.wait(300).status == "finished"


def test_two_processes_submitting_at_once_never_overlap_on_the_cpu_slot(tmp_path):
    path = tmp_path / "shared.sqlite"
    RunStore(path)
    spawn = multiprocessing.get_context("spawn")
    procs = [spawn.Process(target=_submit_two, args=(str(path), f"proc{i}")) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(HANG_S)  # a bound on a hang only
        assert p.exitcode == 0
    records = RunStore(path).list()
    assert len(records) == 4 and {r.owner for r in records} == {"proc0", "proc1"}
    assert all(r.status == "finished" for r in records)
    assert_no_overlap(records)


def test_a_run_whose_outcome_cannot_be_recorded_still_ends_and_frees_its_slot(store, monkeypatch, cleanup):
    from tcore.lab.outputs import artifact_handover

    def broken_keep(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(artifact_handover, "keep", broken_keep)
    first = runs.start(QUICK, store)
    cleanup.append(first)
    rec = first.wait(HANG_S)
    assert first.done and rec.status == "failed" and rec.error_kind == "crashed"
    assert "recording its outcome failed: OSError: disk full" in rec.error["message"]
    monkeypatch.undo()
    second = runs.start(QUICK, store)  # the slot is free again: the next run is claimed and runs
    cleanup.append(second)
    assert second.wait(HANG_S).status == "finished"


def test_a_queue_that_cannot_tick_says_why_to_the_page(store, monkeypatch):
    sched, _ = runs._scheduler(store)  # this process's queue for the store, ticking in its thread

    def locked():
        raise sqlite3.OperationalError("database is locked")

    def problem_becomes(expected):
        deadline = time.time() + HANG_S  # only against a hang: it returns once the page would say so
        while runs.queue_problem(store) != expected and time.time() < deadline:
            time.sleep(0.05)
        return runs.queue_problem(store)

    assert problem_becomes(None) is None
    monkeypatch.setattr(sched, "_tick", locked)
    assert problem_becomes("OperationalError: database is locked") == "OperationalError: database is locked"
    monkeypatch.undo()  # the store answers again: the queue recovers by itself and the page stops saying so
    assert problem_becomes(None) is None


def test_a_paused_queue_starts_nothing_until_the_instructor_resumes_it(store, cleanup):
    runs.pause(store, True)
    assert runs.paused_since(store) is not None
    run = runs.start(QUICK, store)
    cleanup.append(run)
    time.sleep(3 * scheduler.TICK_S + scheduler.RECOVER_EVERY_S)
    assert run.status == "queued" and store.get(run.run_id).status == "queued"
    # Its place says it waits for the resume, not "starts as soon as the device is free" with the device idle.
    row = next(r for r in runs.under_way(store) if r["run_id"] == run.run_id)
    assert row["wait"].paused and waiting.wait_words(row["wait"])[0] == "waits for the instructor to resume the queue"
    from ui.panels import queue  # here, not at the top: the spawned submitters import this module (see conftest)

    assert "resume" in queue.empty_queue_words(paused=True) and "at once" not in queue.empty_queue_words(paused=True)
    runs.pause(store, False)
    assert run.wait(HANG_S).status == "finished"
    assert queue.empty_queue_words(paused=False) == "Nothing is running or waiting: a run starts at once."
