"""The queue's store operations (tcore.store.queue) with a fake owning process and no worker: ids, order, and how
an owner's silence is judged."""
from typing import NamedTuple

import pytest

from tcore.store import RunStore
from tcore.store import queue
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
    monkeypatch.setattr(queue, "new_id", lambda: next(drawn))
    first = store.enqueue(QUICK, device="cpu", owner="ada", proc=ME, timeout_s=None)
    second = store.enqueue(QUICK, device="cpu", owner="ada", proc=ME, timeout_s=None)
    assert (first, second) == ("20260101-120000-aaaaaa", "20260101-120000-bbbbbb")


def test_the_queue_keeps_the_order_runs_were_queued_in_when_the_clock_is_set_back(store, monkeypatch):
    clock = iter([1000.0, 400.0])  # the second run is queued after the clock was set back
    monkeypatch.setattr(queue.time, "time", lambda: next(clock, 401.0))
    first = store.enqueue(QUICK, device="cpu", owner="ada", proc=ME, timeout_s=None)
    second = store.enqueue(QUICK, device="cpu", owner="bob", proc=ME, timeout_s=None)
    queued, _, _ = store.queue_state("h", "cpu")
    assert [q[0] for q in queued] == [first, second]
    assert [r.id for r in store.running_and_queued("h")] == [first, second]
    assert store.claim_next(ME, "cpu", ["cpu"], {first, second}) == (first, "cpu")


def test_a_sweeps_next_run_joins_the_back_of_the_queue_when_released(store):
    sweep = store.create_sweep(owner="ada", label="s", size=2, skipped=[])
    first, second = (store.enqueue(QUICK, device="cpu", owner="ada", proc=ME, timeout_s=None, sweep=(sweep, i))
                     for i in range(2))
    other = store.enqueue(QUICK, device="cpu", owner="bob", proc=ME, timeout_s=None)
    assert store.cancel_queued(first)  # its end releases `second`, queued before `other` but released after
    assert [q[0] for q in store.queue_state("h", "cpu")[0]] == [other, second]
