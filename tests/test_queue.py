"""The run queue: one run at a time per device slot across processes, cancel, limits, memory estimates, recovery.

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

from tcore.lab import limits, runs, scheduler
from tcore.lab.launcher import REPO_ROOT
from tcore.spec import Experiment, SpecError
from tcore.store import RunStore
from tests.helpers import insert_run

QUICK = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", warmup_steps=1, timed_steps=2,
                   rounds=1, backend="eager", cache="warm")


@pytest.fixture(autouse=True)
def _no_limits_from_outside(monkeypatch, tmp_path):
    """Only the limits a test sets apply: no compile-lab.toml from the working dir, no COMPILE_LAB_MAX_* vars."""
    for var in [limits.CONFIG_ENV, *limits.ENV.values()]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def cleanup():
    """Runs a test started; any still going at the end are cancelled, so no worker outlives its test."""
    started = []
    yield started
    for run in started:
        if not run.done:
            run.cancel()
        run.wait(60)


def hold_cpu_slot(store) -> str:
    """Occupy the cpu slot with a run that has no worker; store.finish() on its id frees the slot."""
    proc = scheduler.this_process()
    run_id = store.enqueue(QUICK, device="cpu", owner="holder", proc=proc, timeout_s=None)
    assert store.claim_next(proc, "cpu", ["cpu"], {run_id}) == (run_id, "cpu")
    return run_id


def wait_until(condition, limit_s=60, what="condition"):
    deadline = time.time() + limit_s
    while not condition():
        assert time.time() < deadline, f"no {what} within {limit_s} s"
        time.sleep(0.05)


def assert_no_overlap(records):
    spans = sorted((r.started_at, r.finished_at, r.device_slot) for r in records)
    for (_, end, slot), (start, _, next_slot) in zip(spans, spans[1:]):
        assert slot == next_slot == "cpu"
        assert start >= end, f"runs overlap on the cpu slot: {spans}"


# --- pure logic -----------------------------------------------------------------------------------

def test_wait_estimate_counts_the_runs_ahead_and_the_running_ones():
    Ahead, wait = scheduler.Ahead, scheduler.estimate_wait
    assert wait([], [], 1) == (0.0, 0.0, None)  # nothing ahead
    assert wait([Ahead(None, 900.0, 4.0)], [], 1) == (None, 896.0, None)  # nothing finished yet: no guess
    assert wait([Ahead(10.0, 900.0, 4.0)], [], 1) == (6.0, 896.0, None)
    assert wait([Ahead(10.0, 900.0, 4.0)], [Ahead(10.0, 600.0), Ahead(30.0, 600.0)], 1)[:2] == (46.0, 2096.0)
    two_gpus = wait([Ahead(10.0, 900.0, 4.0)], [Ahead(10.0, 600.0), Ahead(30.0, 600.0)], 2)
    assert two_gpus[:2] == (10.0, 896.0)  # the second GPU is free: the runs ahead share it and the first


def test_behind_a_run_past_its_usual_time_the_wait_is_unknown_not_zero():
    """The issue seen in a workshop: '#1 in the queue, starts in ~0 s' while the run ahead had 10 minutes left."""
    behind_long = scheduler.estimate_wait([scheduler.Ahead(40.0, 900.0, 720.0)], [], 1)
    assert behind_long.eta_s is None and behind_long.at_most_s == 180.0
    assert behind_long.overdue == "a run ahead has run 12 min, past the 40 s that runs like it took"


def test_a_run_is_expected_to_take_what_runs_like_it_took():
    captioner = {"model": "captioner", "preset": "small", "batch_size": 32, "task": "inference", "compile": "whole"}
    flux = {**captioner, "model": "flux", "preset": "full"}
    history = [(captioner, 40.0), ({**captioner, "rounds": 5}, 44.0), (flux, 300.0), (flux, 320.0)]
    assert scheduler.expected_duration(captioner, history) == 40.0  # the same settings
    assert scheduler.expected_duration({**flux, "rounds": 9}, history) == 310.0  # the same model, preset, batch...
    assert scheduler.expected_duration({**flux, "model": "resnet50"}, history) == 172.0  # any recent run
    assert scheduler.expected_duration(flux, []) is None


def test_a_reused_pid_is_not_the_process_that_queued_the_run():
    me = scheduler.this_process()
    assert scheduler.is_alive(me.pid, me.started)
    assert not scheduler.is_alive(me.pid, str(int(me.started) + 1))  # same pid, later start: another process
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not scheduler.is_alive(gone.pid, None)


def test_gpu_slots_pin_one_gpu_each(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert scheduler.slot_env("cuda:1") == {"CUDA_VISIBLE_DEVICES": "1"} and scheduler.slot_env("cpu") == {}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")  # this process may use GPUs 4 and 6 only
    assert scheduler.slot_env("cuda:1") == {"CUDA_VISIBLE_DEVICES": "6"}


def test_a_store_from_before_the_queue_gains_its_columns_and_keeps_its_runs(tmp_path):
    import sqlite3

    from tcore.store import runs as store_module

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(store_module.SCHEMA)
        db.execute("INSERT INTO runs (id, created_at, status, label, model, preset, spec) VALUES "
                   "('old', 1.0, 'finished', 'x', 'captioner', 'tiny', ?)", (QUICK.to_json(),))
    store = RunStore(path)
    (old,) = store.list()
    assert old.id == "old" and old.owner is None and old.device_slot is None
    assert store.queued_count("anyone") == 0


# --- limits and refusals --------------------------------------------------------------------------

def test_limits_come_from_the_file_and_the_environment_wins(tmp_path):
    config = tmp_path / "lab.toml"
    config.write_text("[limits]\nmax_run_s = 120\nmax_batch_size = 16\nmax_memory_gib = 2.5\n")
    lab = limits.load({"COMPILE_LAB_CONFIG": str(config), "COMPILE_LAB_MAX_BATCH_SIZE": "8"})
    assert (lab.max_run_s, lab.max_batch_size, lab.max_memory_gib, lab.max_queued_per_session) == (120, 8, 2.5, 5)
    assert lab.run_time(600)[0] == 120 and "lowered from 600 s" in lab.run_time(600)[1]
    (tmp_path / "compile-lab.toml").write_text("[limits]\nmax_batch_size = \"none\"\n")
    assert limits.load({}, cwd=tmp_path).max_batch_size is None

    with pytest.raises(limits.LimitsError, match="COMPILE_LAB_MAX_BATCH_SIZE.*whole number"):
        limits.load({"COMPILE_LAB_MAX_BATCH_SIZE": "lots"})
    with pytest.raises(limits.LimitsError, match="max_run_s = -5.*from .*lab.toml.*positive number"):
        config.write_text("[limits]\nmax_run_s = -5\n")
        limits.load({"COMPILE_LAB_CONFIG": str(config)})
    with pytest.raises(limits.LimitsError, match="unknown setting.*max_gpus"):
        config.write_text("[limits]\nmax_gpus = 2\n")
        limits.load({"COMPILE_LAB_CONFIG": str(config)})


def test_batch_and_memory_over_the_limits_are_refused_before_anything_is_queued(store, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "4")
    with pytest.raises(SpecError, match=r"batch_size 8 is over this lab's limit \(max_batch_size = 4 "
                                        r"\(from COMPILE_LAB_MAX_BATCH_SIZE\)\); choose a batch size of at most 4"):
        runs.start(QUICK.replace(batch_size=8), store, owner="s1")

    monkeypatch.setenv("COMPILE_LAB_MAX_MEMORY_GIB", "0.001")
    with pytest.raises(SpecError, match=r"needs an estimated 0\.00\d+ GiB \(weights and activations\), over this "
                                        r"lab's limit per run \(max_memory_gib = 0\.001.*smaller batch_size or preset"):
        runs.start(QUICK, store, owner="s1")

    monkeypatch.delenv("COMPILE_LAB_MAX_MEMORY_GIB")
    monkeypatch.setattr(limits, "device_memory_gib", lambda device: (0.0001, "of RAM available on this machine now"))
    with pytest.raises(SpecError, match=r"needs an estimated .* GiB \(weights, gradients, AdamW state and "
                                        r"activations\), more than the 0\.0001 GiB of RAM available"):
        runs.start(QUICK.replace(task="training"), store, owner="s1")
    assert store.list() == []


def test_the_memory_estimate_grows_with_batch_and_training_needs_more():
    small = limits.estimate_memory_gib(QUICK)
    assert 0 < small < limits.estimate_memory_gib(QUICK.replace(batch_size=64))
    assert limits.estimate_memory_gib(QUICK.replace(task="training")) > small
    resnet = Experiment(model="resnet50", preset="full", batch_size=64, device="cpu")
    # ResNet-50 at 224 px keeps about 5 GiB of activations for backward at batch 64 in float32
    assert 0.3 < limits.estimate_memory_gib(resnet) < 2
    assert 2 < limits.estimate_memory_gib(resnet.replace(task="training")) < 10
    assert limits.estimate_memory_gib(resnet.replace(task="training", precision="amp-bf16")) < \
        limits.estimate_memory_gib(resnet.replace(task="training"))


def test_one_session_may_queue_only_so_many_runs(store, monkeypatch, cleanup):
    monkeypatch.setenv("COMPILE_LAB_MAX_QUEUED_PER_SESSION", "2")
    holder = hold_cpu_slot(store)
    cleanup += [runs.start(QUICK, store, owner="alice") for _ in range(2)]
    with pytest.raises(SpecError, match=r"you already have 2 run\(s\) waiting in the queue.*"
                                        r"max_queued_per_session = 2.*cancel one"):
        runs.start(QUICK, store, owner="alice")
    cleanup.append(runs.start(QUICK, store, owner="bob"))  # another session is not held back by alice
    assert [r.status for r in store.list()].count("queued") == 3
    for run in cleanup:
        run.cancel()
    store.finish(holder, result={"device": "cpu"})


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
    # now that one run has finished, c (next after b) gets an estimate from its duration
    wait_until(lambda: c.snapshot()["queue_position"] == 1 and c.snapshot()["eta_s"] is not None, 5, "an ETA")
    assert 0 <= c.snapshot()["eta_s"] <= store.get(a.run_id).finished_at - store.get(a.run_id).started_at
    for run in (a, b, c):
        assert run.wait(120).status == "finished"
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
    rec = second.wait(5)
    assert rec.status == "failed" and rec.error_kind == "cancelled" and "never started" in rec.error["message"]
    assert rec.started_at is None and rec.device_slot is None and second.handle is None

    with pytest.raises(PermissionError, match="belongs to someone else; only its owner or the instructor"):
        runs.cancel(first.run_id, store, owner="bob")
    wait_until(lambda: first.status == "running" and first.handle is not None, what="first run starting")
    store.request_cancel(first.run_id)  # as another process would: the owning process stops the worker
    rec = first.wait(30)
    assert rec.status == "failed" and rec.error_kind == "cancelled"
    assert third.wait(120).status == "finished"  # the queue moved on
    assert second.handle is None


def test_a_killed_worker_a_compile_error_and_a_timeout_each_are_recorded_and_the_queue_moves_on(
        store, cleanup, monkeypatch):
    victim = runs.start(QUICK, store, owner="alice")
    broken = runs.start(QUICK.replace(graph_break=True, fullgraph=True), store, owner="bob")  # Dynamo refuses
    monkeypatch.setenv("COMPILE_LAB_MAX_RUN_S", "1.5")  # read when a run is submitted: this one only
    slow = runs.start(QUICK, store, owner="carol", timeout_s=600)
    monkeypatch.delenv("COMPILE_LAB_MAX_RUN_S")
    after = runs.start(QUICK, store, owner="dave")
    cleanup += [victim, broken, slow, after]
    assert any("lowered from 600 s" in note for note in slow.notes)

    wait_until(lambda: victim.phase not in ("queued", None), what="worker up")
    os.kill(victim.handle.pid, signal.SIGKILL)  # as the kernel's OOM killer would
    rec = victim.wait(30)
    assert rec.status == "failed" and rec.error_kind == "crashed" and "SIGKILL" in rec.error["message"]
    assert broken.wait(120).error_kind == "compile_error"
    rec = slow.wait(60)
    assert rec.error_kind == "timeout" and "1.5 s time limit" in rec.error["message"]
    assert after.wait(120).status == "finished"
    assert_no_overlap([store.get(r.run_id) for r in (victim, broken, slow, after)])
    assert store.pending(scheduler.this_process().host) == []  # nothing left queued or running


# --- several processes ----------------------------------------------------------------------------

SUBMIT_AND_HANG = """
import json, sys, time
from tcore.lab import runs
from tcore.spec import Experiment
from tcore.store import RunStore
from tests.helpers import insert_run
store = RunStore(sys.argv[1])
exp = Experiment.from_json(sys.argv[2])
live = [runs.start(exp, store, owner="crowd") for _ in range(3)]
while live[0].handle is None or live[0].phase in ("queued", None):
    time.sleep(0.05)
print(json.dumps({"ids": [r.run_id for r in live], "worker": live[0].handle.pid}), flush=True)
time.sleep(600)
"""


def killed_after_it_reports(script: str, store) -> dict:
    """Run `script` as an "app" process on `store`, read the JSON line it prints, then kill it (as a crash would)."""
    child = subprocess.Popen([sys.executable, "-c", script, str(store.path), QUICK.to_json()],
                             stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                             env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    try:
        line = child.stdout.readline()
    finally:
        child.kill()
        child.wait()
    return json.loads(line)


def test_after_an_app_restart_queued_runs_are_adopted_and_a_running_one_is_marked_crashed(store):
    state = killed_after_it_reports(SUBMIT_AND_HANG, store)  # the "app" dies with one run running, two queued
    running, *queued = state["ids"]
    assert [store.get(i).status for i in state["ids"]] == ["running", "queued", "queued"]

    adopted = runs.recover(store)
    assert sorted(r.run_id for r in adopted) == sorted(queued)
    crashed = store.get(running)
    assert crashed.status == "failed" and crashed.error_kind == "crashed"
    assert "ended mid-run" in crashed.error["message"]
    assert "worker, left behind, was stopped" in crashed.error["message"]
    assert not scheduler.is_alive(state["worker"], None)  # it cannot go on measuring beside the next run
    for run_id in queued:
        assert runs.live(run_id) is not None
        assert runs.live(run_id).wait(120).status == "finished"
    records = [store.get(i) for i in queued]
    assert all(r.owner == "crowd" for r in records)
    assert_no_overlap(records)


def test_a_stopped_owner_loses_its_runs_once_it_has_been_silent_too_long(store, monkeypatch):
    """Ctrl-Z on a command-line run: the process lives on but no longer moves its runs. Once it has not
    said it is alive for OWNER_SILENT_S, its running run is ended with the reason and its queued runs
    are taken over, so the room is not held."""
    from tcore.store import queue

    monkeypatch.setattr(queue, "OWNER_SILENT_S", 3.0)
    child = subprocess.Popen([sys.executable, "-c", SUBMIT_AND_HANG, str(store.path), QUICK.to_json()],
                             stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                             env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    try:
        state = json.loads(child.stdout.readline())
        os.kill(child.pid, signal.SIGSTOP)
        running, *queued = state["ids"]
        assert runs.recover(store) == []  # alive and heard from a moment ago: nothing is taken yet
        wait_until(lambda: store.get(running).status == "failed", limit_s=30, what="the silent owner's run ended")
        ended = store.get(running)
        assert ended.error_kind == "crashed" and "stopped answering" in ended.error["message"]
        wait_until(lambda: all(runs.live(i) is not None for i in queued), limit_s=30, what="adoption")
        records = [runs.live(i).wait(120) for i in queued]
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
        p.join(240)
        assert p.exitcode == 0
    records = RunStore(path).list()
    assert len(records) == 4 and {r.owner for r in records} == {"proc0", "proc1"}
    assert all(r.status == "finished" for r in records)
    assert_no_overlap(records)


def test_a_run_whose_outcome_cannot_be_recorded_still_ends_and_frees_its_slot(store, monkeypatch, cleanup):
    from tcore.lab import artifacts

    def broken_keep(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(artifacts, "keep", broken_keep)
    first = runs.start(QUICK, store)
    cleanup.append(first)
    rec = first.wait(120)
    assert first.done and rec.status == "failed" and rec.error_kind == "crashed"
    assert "recording its outcome failed: OSError: disk full" in rec.error["message"]
    monkeypatch.undo()
    second = runs.start(QUICK, store)  # the slot is free again: the next run is claimed and runs
    cleanup.append(second)
    assert second.wait(120).status == "finished"


def test_a_queue_that_cannot_tick_says_why_to_the_page(store, monkeypatch):
    sched, _ = runs._scheduler(store)  # this process's queue for the store, ticking in its thread

    def locked():
        raise sqlite3.OperationalError("database is locked")

    def problem_becomes(expected):
        deadline = time.time() + 10
        while runs.queue_problem(store) != expected and time.time() < deadline:
            time.sleep(0.05)
        return runs.queue_problem(store)

    assert problem_becomes(None) is None
    monkeypatch.setattr(sched, "_tick", locked)
    assert problem_becomes("OperationalError: database is locked") == "OperationalError: database is locked"
    monkeypatch.undo()  # the store answers again: the queue recovers by itself and the page stops saying so
    assert problem_becomes(None) is None


SWEEP_AND_HANG = """
import json, sys, time
from tcore.lab import runs, sweeps
from tcore.spec import Experiment
from tcore.store import RunStore
from tests.helpers import insert_run
store = RunStore(sys.argv[1])
exp = Experiment.from_json(sys.argv[2])
sweep_id = sweeps.start([exp, exp.replace(seed=1), exp.replace(seed=2)], store, owner="a session")
first = sweeps.get(sweep_id, store).runs[0].id
# running with its worker started: a run killed before its worker starts goes back to the queue instead
def worker_started():
    with store._connect() as db:
        row = db.execute("SELECT pid FROM runs WHERE id=? AND status='running'", (first,)).fetchone()
    return row is not None and row[0] is not None
while not worker_started():
    time.sleep(0.05)
print(json.dumps({"sweep": sweep_id}), flush=True)
time.sleep(600)
"""


def test_a_sweep_survives_an_app_restart_and_its_matrix_is_rebuilt_from_the_store(store):
    from tcore.lab import sweeps

    sweep_id = killed_after_it_reports(SWEEP_AND_HANG, store)["sweep"]  # mid-sweep: one run running, two waiting
    assert [(r.status, r.held) for r in sweeps.get(sweep_id, store).runs] == \
        [("running", False), ("queued", True), ("queued", True)]

    runs.recover(store)  # the app starts again
    deadline = time.time() + 240
    while not sweeps.get(sweep_id, store).done:
        assert time.time() < deadline, "the adopted sweep did not finish"
        time.sleep(0.2)
    sweep = sweeps.get(sweep_id, store)
    assert [r.status for r in sweep.runs] == ["failed", "finished", "finished"]
    assert sweep.runs[0].error_kind == "crashed" and sweeps.latest(store, "a session").id == sweep_id
    assert [r.spec["seed"] for r in sweep.runs] == [0, 1, 2]  # the matrix's order, from the store
    assert_no_overlap(sweep.runs[1:])


def test_a_sweep_takes_turns_with_other_runs_instead_of_holding_the_queue(store, cleanup):
    from tcore.lab import sweeps

    first = runs.start(QUICK, store, owner="someone")  # running while the sweep and another run queue
    cleanup.append(first)
    sweep_id = sweeps.start([QUICK.replace(seed=i) for i in range(3)], store)
    other = runs.start(QUICK.replace(seed=9), store, owner="someone else")
    cleanup.append(other)
    deadline = time.time() + 240
    while not sweeps.get(sweep_id, store).done or not other.done:
        assert time.time() < deadline
        time.sleep(0.2)
    order = sorted([first.record, other.record, *sweeps.get(sweep_id, store).runs], key=lambda r: r.started_at)
    # The other run queued after the whole sweep, yet it starts right after the sweep's first run.
    assert [r.spec["seed"] for r in order] == [0, 0, 9, 1, 2]
    assert_no_overlap(order)


def test_a_run_that_cannot_finish_in_its_time_limit_is_refused_with_the_numbers(store, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_MAX_RUN_S", "900")
    long = QUICK.replace(timed_steps=None, timed_s=600.0, rounds=50)
    with pytest.raises(SpecError) as refused:
        runs.start(long, store)
    assert ("needs at least 1200 s (2 × 600 s timed), more than its time limit of 900 s "
            "(this lab's max_run_s = 900.0 (from COMPILE_LAB_MAX_RUN_S))") in str(refused.value)
    assert store.list() == []  # nothing was queued
    runs.start(long.replace(timed_s=4.0, rounds=2), store).cancel()  # what fits is accepted


def test_only_the_owner_or_the_instructor_may_cancel_or_delete_a_run(store):
    run_id = insert_run(store, QUICK)
    with store._write() as db:
        db.execute("UPDATE runs SET owner='ada~3f9a' WHERE id=?", (run_id,))
    store.finish(run_id, result={"device": "cpu"})
    with pytest.raises(PermissionError, match="only its owner or the instructor can delete it"):
        runs.delete(run_id, store, owner="bob~0c1d")
    with pytest.raises(PermissionError, match="can cancel it"):
        runs.cancel(run_id, store, owner="bob~0c1d")
    runs.delete(run_id, store, owner="bob~0c1d", instructor=True)
    assert store.list() == []


def test_the_instructor_passcode_comes_from_the_file_or_the_environment(tmp_path):
    assert limits.instructor_passcode({}, cwd=tmp_path) is None
    assert not limits.is_instructor("anything", {}, cwd=tmp_path)  # no passcode set: nobody is instructor
    (tmp_path / "compile-lab.toml").write_text('[instructor]\npasscode = "sesame"\n')
    assert limits.is_instructor("sesame", {}, cwd=tmp_path)
    assert not limits.is_instructor("Sesame", {}, cwd=tmp_path) and not limits.is_instructor("", {}, cwd=tmp_path)
    env = {limits.PASSCODE_ENV: "open"}
    assert limits.is_instructor("open", env, cwd=tmp_path) and not limits.is_instructor("sesame", env, cwd=tmp_path)


def test_limits_the_instructor_sets_in_the_app_win_until_reset(store, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "64")
    now = limits.set_by_instructor(store, {"max_batch_size": 4, "max_run_s": 120.0})
    assert now.max_batch_size == 4 and now.max_run_s == 120.0
    assert now.describe("max_batch_size") == "max_batch_size = 4 (from the instructor, in the app)"
    with pytest.raises(SpecError, match="batch_size 8 is over this lab's limit"):
        runs.start(QUICK.replace(batch_size=8), store)
    with pytest.raises(limits.LimitsError, match="max_queued_per_session = 0"):
        limits.set_by_instructor(store, {"max_queued_per_session": 0})
    assert limits.load(store=store).max_batch_size == 4  # a refused change changes nothing
    assert limits.set_by_instructor(store, None).max_batch_size == 64  # back to the environment's


def test_a_paused_queue_starts_nothing_until_the_instructor_resumes_it(store, cleanup):
    runs.pause(store, True)
    assert runs.paused_since(store) is not None
    run = runs.start(QUICK, store)
    cleanup.append(run)
    time.sleep(3 * scheduler.TICK_S + scheduler.RECOVER_EVERY_S)
    assert run.status == "queued" and store.get(run.run_id).status == "queued"
    runs.pause(store, False)
    assert run.wait(120).status == "finished"
