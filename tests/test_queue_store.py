"""The queue's store operations (tcore.store.run_queue) with a fake owning process and no worker: ids, order, and how
an owner's silence is judged."""
from typing import NamedTuple

import pytest

from tcore.store import RunStore, owners, run_queue
from tests.helpers import QUICK


class Proc(NamedTuple):
    host: str
    pid: int
    started: str | None


ME = Proc("h", 1000, "11")


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "runs.sqlite")


def test_an_id_already_taken_is_drawn_again(store, monkeypatch):
    drawn = iter(["20260101-120000-aaaaaa", "20260101-120000-aaaaaa", "20260101-120000-aaaaaa",
                  "20260101-120000-bbbbbb"])
    monkeypatch.setattr(run_queue, "new_id", lambda: next(drawn))
    first = store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=ME, timeout_s=None)
    second = store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=ME, timeout_s=None)
    assert (first, second) == ("20260101-120000-aaaaaa", "20260101-120000-bbbbbb")


def test_the_queue_keeps_the_order_runs_were_queued_in_when_the_clock_is_set_back(store, monkeypatch):
    clock = iter([1000.0, 400.0])  # the second run is queued after the clock was set back
    monkeypatch.setattr(run_queue.time, "time", lambda: next(clock, 401.0))
    first = store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=ME, timeout_s=None)
    second = store.queue.enqueue(QUICK, device="cpu", owner="bob", proc=ME, timeout_s=None)
    queued, _, _ = store.queue.queue_state("h", "cpu")
    assert [q[0] for q in queued] == [first, second]
    assert [r.id for r in store.queue.running_and_queued("h")] == [first, second]
    assert store.queue.claim_next(ME, "cpu", ["cpu"], {first, second}) == (first, "cpu")


def test_a_sweeps_next_run_joins_the_back_of_the_queue_when_released(store):
    sweep = store.sweeps.create_sweep(owner="ada", label="s", size=2, skipped=[])
    first, second = (store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=ME, timeout_s=None, sweep=(sweep, i))
                     for i in range(2))
    other = store.queue.enqueue(QUICK, device="cpu", owner="bob", proc=ME, timeout_s=None)
    assert store.queue.cancel_queued(first)  # its end releases `second`, queued before `other` but released after
    assert [q[0] for q in store.queue.queue_state("h", "cpu")[0]] == [other, second]


class Clocks:
    """The queue's `time` module: a wall clock the test steps, and a monotonic one it moves."""

    def __init__(self) -> None:
        self.wall, self.mono = 1000.0, 0.0

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono


@pytest.fixture
def watched(store, monkeypatch):
    """A running run of one lab process (the owner) and another lab process's look at it (recover), on clocks the test
    moves: (clocks, the run, a look, the worker pids a look stopped)."""
    clocks = Clocks()
    monkeypatch.setattr(run_queue, "time", clocks)
    monkeypatch.setattr(owners, "time", clocks)
    monkeypatch.setattr(owners, "_HEARD", {}, raising=False)
    monkeypatch.setattr(owners, "_LOOKED", {}, raising=False)
    owner, watcher = Proc("h", 2000, "22"), Proc("h", 3000, "33")
    run = store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=owner, timeout_s=None)
    assert store.queue.claim_next(owner, "cpu", ["cpu"], {run}) == (run, "cpu")
    assert store.queue.set_worker(run, 4000, "44", owner)
    store.owners.heartbeat(owner)
    stopped = []

    def recover():
        return store.owners.recover(watcher, lambda pid, started: True,
                                    lambda pid, started: stopped.append(pid) or True)

    return clocks, run, recover, stopped


def silent_while_watched(clocks, run, recover) -> None:
    """The owner says nothing while the watcher looks every 2 s, as a queue does: its run is taken at the look past
    OWNER_SILENT_S, 32 s after the first of them."""
    for _ in range(int(owners.OWNER_SILENT_S / 2)):
        clocks.mono += 2.0
        assert recover() == ([], [])
    clocks.mono += 2.0
    assert recover() == ([run], [])


def test_a_wall_clock_step_makes_no_live_owner_silent_but_a_silent_one_still_loses_its_run(store, watched):
    clocks, run, recover, stopped = watched
    owner = Proc("h", 2000, "22")
    assert recover() == ([], [])
    clocks.wall += 3600.0  # the host's clock is set forward an hour, between two heartbeats
    clocks.mono += 1.0
    assert recover() == ([], []) and stopped == []
    store.owners.heartbeat(owner)
    clocks.mono += 2.0
    assert recover() == ([], [])

    silent_while_watched(clocks, run, recover)  # the owner stops (Ctrl-Z)
    assert stopped == [4000] and "not heard from for 32 s" in store.get(run).error["message"]


def test_a_store_locked_longer_than_the_silence_allows_takes_no_live_process_s_runs(store, watched):
    """Another process held the write lock 40 s: no heartbeat could be written, and the first queue to get the lock
    after it took the other live process's running run as silent, killing its worker mid-measurement (a probe, one
    try in two). A watcher kept from looking counts the silence again from its next look; a process that stays
    silent while it is watched still loses its runs."""
    clocks, run, recover, _ = watched
    assert recover() == ([], [])
    clocks.mono += 40.0  # the store write-locked: neither the owner's heartbeat nor the watcher's look got in
    assert recover() == ([], []) and store.get(run).status == "running"  # the watcher's first look after the lock
    silent_while_watched(clocks, run, recover)  # from here it watches; the owner stays silent
    assert "not heard from for 32 s" in store.get(run).error["message"]
