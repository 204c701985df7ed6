"""The queue's scheduling, as pure logic: wait estimates and expected durations (tcore.lab.queue.waiting), telling
processes apart, GPU slots."""
import os
import subprocess
import sys

from tcore.lab.queue import disk, scheduler, waiting


def test_wait_estimate_counts_the_runs_ahead_and_the_running_ones():
    Ahead, wait = waiting.Ahead, waiting.estimate_wait
    assert wait([], [], 1) == (0.0, 0.0, None, None, False)  # nothing ahead
    assert wait([Ahead(None, 900.0, 4.0)], [], 1) == (None, 896.0, None, None, False)  # nothing finished yet: no guess
    assert wait([Ahead(10.0, 900.0, 4.0)], [], 1) == (6.0, 896.0, None, None, False)
    assert wait([Ahead(10.0, 900.0, 4.0)], [Ahead(10.0, 600.0), Ahead(30.0, 600.0)], 1)[:2] == (46.0, 2096.0)
    two_gpus = wait([Ahead(10.0, 900.0, 4.0)], [Ahead(10.0, 600.0), Ahead(30.0, 600.0)], 2)
    assert two_gpus[:2] == (10.0, 896.0)  # the second GPU is free: the runs ahead share it and the first


def test_behind_a_run_past_its_usual_time_the_wait_is_unknown_not_zero():
    """The issue seen in a workshop: '#1 in the queue, starts in ~0 s' while the run ahead had 10 minutes left."""
    behind_long = waiting.estimate_wait([waiting.Ahead(40.0, 900.0, 720.0)], [], 1)
    assert behind_long.eta_s is None and behind_long.at_most_s == 180.0
    assert behind_long.overdue == "a run ahead has run 12 min, past the 40 s that runs like it took"


def test_a_run_is_expected_to_take_what_runs_like_it_took():
    captioner = {"model": "captioner", "preset": "small", "batch_size": 32, "task": "inference", "compile": "whole"}
    flux = {**captioner, "model": "flux", "preset": "full"}
    history = [(captioner, 40.0), ({**captioner, "rounds": 5}, 44.0), (flux, 300.0), (flux, 320.0)]
    assert waiting.expected_duration(captioner, history) == 40.0  # the same settings
    assert waiting.expected_duration({**flux, "rounds": 9}, history) == 310.0  # the same model, preset, batch...
    assert waiting.expected_duration({**flux, "model": "resnet50"}, history) == 172.0  # any recent run
    assert waiting.expected_duration(flux, []) is None


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


class FakeJob:
    """A queued run of this process that records whether it was started, and what its place says."""

    def __init__(self, run_id: str) -> None:
        self.run_id, self.device, self.started, self.done, self.wait = run_id, "cpu", False, False, None

    def launch(self, slot, env) -> None:
        self.started = True

    def set_queue_place(self, position, wait) -> None:
        self.wait = wait

    def ended_in_queue(self) -> None:
        self.done = True


def test_no_run_starts_while_the_stores_disk_is_nearly_full_or_filled_up_and_the_queue_says_why(tmp_path,
                                                                                                monkeypatch):
    from tcore.store import RunStore
    from tests.helpers import QUICK

    store = RunStore(tmp_path / "runs.sqlite")
    monkeypatch.setattr(scheduler, "_HELD", {}, raising=False)
    monkeypatch.setattr(disk, "_FILLED", set(), raising=False)
    free = {"bytes": (16 << 20) - 1}
    monkeypatch.setattr(disk, "free_bytes", lambda folder: free["bytes"], raising=False)
    sched = scheduler.Scheduler(store, adopt=lambda record: None)
    job = FakeJob(store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=sched.proc, timeout_s=None))
    sched.submit(job)

    def tick():
        sched._next_recovery = 0.0  # the hold is looked at with each recovery
        sched._tick()

    tick()
    assert not job.started and "MiB free" in sched.held
    assert waiting.wait_words(job.wait)[0] == "waits: no run starts for now" and "MiB free" in waiting.wait_words(
        job.wait)[1]

    free["bytes"] = 1 << 40  # room again, but a record was cut short by a full disk: a test write decides
    disk.was_full(store.path)
    monkeypatch.setattr(disk, "_test_write", lambda folder: False)
    tick()
    assert not job.started and "filled up while a run was recorded" in sched.held
    monkeypatch.setattr(disk, "_test_write", lambda folder: True)
    tick()
    assert job.started and sched.held is None


def test_a_closed_queue_stops_ticking_and_the_next_run_on_its_store_starts_another(store):
    """A process done with a store (a test worker after each file's own) closes its queue there: the queue's thread
    and its watch of other lab processes' holds end, and a later use of the store starts them again."""
    import threading

    from tcore.lab.queue import quiet
    from tcore.lab.run import runs
    from tests.helpers import HANG_S, wait_until

    def watchers() -> int:
        return sum(t.name == "quiet-watch" and t.is_alive() for t in threading.enumerate())

    runs.recover(store)  # starts this process's queue for the store
    first = runs._SCHEDULERS[(os.getpid(), str(store.path.resolve()))]
    watching = watchers()
    assert first._thread.is_alive() and (not quiet.enabled() or str(store.path.resolve()) in quiet._watched)
    assert str(store.path.resolve()) in runs.close_queues()
    first._thread.join(HANG_S)
    assert not first._thread.is_alive()
    if quiet.enabled():
        wait_until(lambda: watchers() == watching - 1, what="the hold watcher's end")
    runs.recover(store)
    again = runs._SCHEDULERS[(os.getpid(), str(store.path.resolve()))]
    assert again is not first and again._thread.is_alive()
    runs.close_queues()


def test_closing_the_queues_of_one_folder_leaves_the_others_ticking(tmp_path_factory):
    """After each test, the queues of stores in its own tmp_path end (tests/conftest.py), a shared store's do not."""
    from tcore.lab.run import runs
    from tcore.store import RunStore

    mine, shared = (RunStore(tmp_path_factory.mktemp(name) / "runs.sqlite") for name in ("mine", "shared"))
    for s in (mine, shared):
        runs.recover(s)
    assert runs.close_queues(under=mine.path.parent) == [str(mine.path.resolve())]
    assert (os.getpid(), str(shared.path.resolve())) in runs._SCHEDULERS
    assert runs.close_queues(under=shared.path.parent) == [str(shared.path.resolve())]
