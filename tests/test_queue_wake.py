"""The queue wakes on what it waits for: a run submitted in this process, or one of its runs ending, starts the next
at once rather than at the end of the queue's tick."""
import time

from tcore.lab.queue import scheduler
from tcore.lab.run import runs
from tests.helpers import HANG_S

TICK_S = 6 * HANG_S  # a tick so long that only a wake can start a run within HANG_S, however loaded the machine


def started_soon(live, what: str) -> None:
    deadline = time.time() + HANG_S  # a sixth of the tick: only a wake starts it in time
    while not live.started:
        assert time.time() < deadline, f"{what} waited for the queue's tick"
        time.sleep(0.05)


def test_the_queue_starts_a_run_when_it_is_submitted_and_the_next_when_one_ends(tiny, store, monkeypatch):
    monkeypatch.setattr(scheduler, "TICK_S", TICK_S)
    runs.recover(store)  # this store's queue, started and settled into its wait
    time.sleep(0.5)
    first, second = runs.start(tiny, store), runs.start(tiny, store)
    try:
        started_soon(first, "the submitted run")
        assert not second.started  # one run at a time on the device: it waits for the first
        first.cancel()
        assert first.wait(HANG_S) is not None, "the cancelled run did not end"
        started_soon(second, "the run queued behind the one that ended")
    finally:
        for live in (first, second):
            live.cancel()
            live.wait(HANG_S)
