"""A room on one device, with real workers: runs share the slot, compile side by side, and hold the device alone in turn
for the phases that need it (tcore.lab.queue.room, tcore.lab.queue.lease, tcore.worker.device_lease); a crash, a cancel
or a
time limit while holding or waiting frees it for the others.

On a machine without a GPU the lab never shares the CPU (a compile beside a CPU measurement would share its cores),
so these tests give the cpu slot a room of several, as a GPU slot has, by the plan alone: the workers, the lease and
the store are the real ones. Runs are captioner/tiny with the eager backend (Dynamo traces, no Inductor).
"""
import os
import signal
import time

import pytest

from tcore.figures import timeline
from tcore.lab.queue import room, scheduler
from tcore.lab.run import runs
from tcore.store import RunStore
from tests.helpers import HANG_S, QUICK, wait_until

pytestmark = pytest.mark.usefixtures("no_outside_limits")
HOST = scheduler.this_process().host


@pytest.fixture
def shared_cpu(monkeypatch):
    """The cpu slot shared three ways, as a GPU slot of a room is."""
    plan = room.RoomPlan("cpu", 3, {"cpu": ()}, frozenset(), "three runs share the slot (a test's plan)")
    real = scheduler.room_plan
    monkeypatch.setattr(scheduler, "room_plan", lambda device: plan if device == "cpu" else real(device))
    return plan


def in_turn(purposes: list[str]) -> list[str]:
    """The purposes a run held the device for, each repeat in a row once (a compile lets it go and takes it back)."""
    return [p for i, p in enumerate(purposes) if i == 0 or purposes[i - 1] != p]


def spans_never_overlap(store: RunStore, since: float) -> list:
    spans = store.devices.slot_spans(HOST, "cpu", since)
    for (_, a), (_, b) in zip(spans, spans[1:]):
        assert a.released_at is not None and b.taken_at >= a.released_at, f"two runs held the device at once: {spans}"
    return spans


def test_three_runs_share_the_slot_and_hold_the_device_alone_exactly_in_their_listed_phases(store, cleanup,
                                                                                             shared_cpu):
    t0 = time.time()
    started = [runs.start(QUICK.replace(seed=i), store, owner=f"p{i}") for i in range(3)]
    cleanup += started
    wait_until(lambda: sum(r.status == "running" for r in started) >= 2, HANG_S, "two runs in the slot at once")
    records = [r.wait(HANG_S) for r in started]
    assert all(rec.status == "finished" for rec in records), [rec.error for rec in records]
    spans = spans_never_overlap(store, t0)
    for rec in records:
        mine = [s for run_id, s in spans if run_id == rec.id]
        assert in_turn([s.purpose for s in mine]) == ["eager", "compiled", "profile"], mine
        assert rec.result["device_shared"] is True
        # each listed phase of its timeline lies inside a hold of its purpose (the timeline counts from the submit)
        held = {"model build": "eager", "eager warm-up": "eager", "paired timing": "compiled", "profiling": "profile"}
        for phase in rec.result["timeline"]:
            purpose = next((p for name, p in held.items() if phase["name"].startswith(name)), None)
            if purpose is None or phase["s"] < 0.05 or phase["name"].endswith(timeline.CONTINUED):
                continue  # a phase's piece after a wait belongs to what the wait was for (the profile's start)
            # A phase begins inside its hold (the worker says so once it holds the device); where it ends is the next
            # phase's start, which on a loaded machine comes a while after the hold's release: not asked here.
            start = rec.queued_at + phase["start_s"]
            assert any(s.purpose == purpose and s.taken_at - 0.25 <= start <= s.released_at for s in mine), \
                (phase, mine)
    # they overlapped in the slot: the second started before the first ended
    firsts = sorted(records, key=lambda r: r.started_at)
    assert firsts[1].started_at < firsts[0].finished_at


def test_a_worker_killed_while_it_holds_the_device_frees_it_for_the_run_waiting(store, cleanup, shared_cpu):
    t0 = time.time()
    first = runs.start(QUICK.replace(timed_steps=400, rounds=2), store, owner="ada")  # holds it a while to measure
    second = runs.start(QUICK, store, owner="bob")
    cleanup += [first, second]
    wait_until(lambda: (first.snapshot()["device_held"] or ("",))[0] == "compiled", HANG_S, "the first run holding")
    os.killpg(first.handle.pid, signal.SIGKILL)
    assert first.wait(HANG_S).status == "failed" and first.record.error_kind == "crashed"
    assert second.wait(HANG_S).status == "finished", second.record.error
    spans = spans_never_overlap(store, t0)
    assert all(s.released_at is not None for _, s in spans)


def test_a_run_waiting_for_the_device_can_be_cancelled_and_a_time_limit_says_it_was_waiting(store, cleanup,
                                                                                             shared_cpu):
    proc = scheduler.this_process()
    holder = store.queue.enqueue(QUICK, device="cpu", owner="holder", proc=proc, timeout_s=None, memory_gib=1.0)
    assert store.queue.claim_next(proc, "cpu", ["cpu"], {holder}, shared_cpu.room(100.0))
    store.queue.set_worker(holder, os.getpid(), scheduler.process_start(os.getpid()))  # recovery leaves it alone
    store.devices.ask_device(HOST, "cpu", holder, "compiled", 1)
    assert store.devices.take_device(HOST, "cpu", holder)  # holds the device and never lets go
    waiting = runs.start(QUICK, store, owner="ada")
    limited = runs.start(QUICK, store, owner="bob", timeout_s=20)
    cleanup += [waiting, limited]
    wait_until(lambda: waiting.snapshot()["device_asked"] is not None, HANG_S, "the run asking for the device")
    assert waiting.snapshot()["device_asked"][0] == "eager" and waiting.snapshot()["status"] == "running"
    runs.cancel(waiting.run_id, store)
    rec = waiting.wait(60)
    assert rec.status == "failed" and rec.error_kind == "cancelled"
    assert [a.run_id for a in store.devices.device_asks(HOST, "cpu")] in ([limited.run_id], [])  # its ask went with it
    rec = limited.wait(HANG_S)
    assert rec.error_kind == "timeout" and "waiting for the GPU while other runs of the room held it" in \
        rec.error["message"], rec.error
    assert store.devices.device_holder(HOST, "cpu").run_id == holder and store.devices.device_asks(HOST, "cpu") == []
    store.finish(holder, result={"device": "cpu"})


def test_the_timeline_of_a_run_that_waited_for_the_device_shows_the_wait(store, cleanup, shared_cpu):
    proc = scheduler.this_process()
    holder = store.queue.enqueue(QUICK, device="cpu", owner="holder", proc=proc, timeout_s=None, memory_gib=1.0)
    assert store.queue.claim_next(proc, "cpu", ["cpu"], {holder}, shared_cpu.room(100.0))
    store.queue.set_worker(holder, os.getpid(), scheduler.process_start(os.getpid()))
    store.devices.ask_device(HOST, "cpu", holder, "compiled", 1)
    assert store.devices.take_device(HOST, "cpu", holder)
    run = runs.start(QUICK, store, owner="ada")
    cleanup.append(run)
    wait_until(lambda: run.snapshot()["device_asked"] is not None, HANG_S, "the run asking for the device")
    time.sleep(1.0)
    store.devices.release_device(holder)  # another process's release: seen within the broker's poll
    rec = run.wait(HANG_S)
    assert rec.status == "finished", rec.error
    waits = [p for p in rec.result["timeline"] if p["name"] == timeline.DEVICE_WAIT]
    assert waits and waits[0]["s"] >= 0.9 and rec.result["timeline_wait_s"] >= 0.9
    assert rec.result["device_wait_s"] >= 0.9
    store.finish(holder, result={"device": "cpu"})


def test_a_generation_shares_the_slot_and_holds_the_device_for_its_build_rounds_and_profile(store, cleanup,
                                                                                                 shared_cpu):
    t0 = time.time()
    gen = QUICK.replace(task="generate", prompt_len=6, new_tokens=8, rounds=2, timed_steps=2)
    started = [runs.start(gen, store, owner="ada"), runs.start(QUICK, store, owner="bob")]
    cleanup += started
    records = [r.wait(HANG_S) for r in started]
    assert all(rec.status == "finished" for rec in records), [rec.error for rec in records]
    spans = spans_never_overlap(store, t0)
    mine = [s.purpose for run_id, s in spans if run_id == records[0].id]
    # the copy bandwidth, the build and the eager generations in one hold; then as any run (the prefill's and the
    # decode step's compiles each let the device go and take it back)
    assert mine[0] == "eager" and in_turn(mine) == ["eager", "compiled", "profile"], mine
    assert records[0].result["device_shared"] is True


def test_a_run_whose_worker_the_store_cannot_record_is_not_started_and_keeps_its_place(store, cleanup, monkeypatch):
    """The store is told who runs a run before its worker is handed it: when that write fails (a full disk), the
    run is not measured, goes back to its place in the queue once the store can be written, and then runs."""
    from tcore.store import StoreError

    real, failures = store.queue.set_worker, []

    def set_worker(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise StoreError("database or disk is full")
        return real(*args, **kwargs)

    monkeypatch.setattr(store.queue, "set_worker", set_worker)
    run = runs.start(QUICK, store, owner="ada")
    cleanup.append(run)
    rec = run.wait(HANG_S)
    assert failures and rec.status == "finished", rec.error
    assert any("was not started and nothing was measured" in note for note in run.notes)


def test_a_process_that_keeps_no_spares_counts_none_for_the_room_s_free_places(store, monkeypatch):
    """What a measurement takes for the lab's own processes on its GPU (tcore.lab.run.following._lab_processes): the
    other runs resident in the slot, and a spare for each free place only where this process keeps spares (the app).
    A test's or a command line's run counted three spares of a four-run room that never start, and a process not of
    the lab, computing on the GPU beside the run, was taken for one of them: no noise reason (the H200's GPU test)."""
    from tcore.lab.queue import spares
    from tcore.lab.run import following

    monkeypatch.setattr(scheduler, "room_plan", lambda device: room.RoomPlan(device, runs_per_slot=4))
    monkeypatch.setattr(type(store.queue), "residents", lambda self, host: {"cuda:0": [None]})  # this run alone
    monkeypatch.setattr(spares.SPARES, "waiting", lambda slot: 0)
    monkeypatch.setattr(spares, "_SPARE_DEVICES", set())
    assert following._lab_processes(store, "cuda", "cuda:0") == 0
    monkeypatch.setattr(spares, "_SPARE_DEVICES", {"cuda"})  # the app keeps a spare in each free place
    assert following._lab_processes(store, "cuda", "cuda:0") == 3
    assert following._lab_processes(store, "cuda", None) == 0  # no slot: nothing shares it
