"""The server's memory: ended runs let go of what the store holds, and the registry of live runs stays bounded."""
import time
from types import SimpleNamespace

import pytest

from tcore.experiment.spec import Experiment
from tcore.lab.run import registry
from tcore.lab.run.liverun import LiveRun
from tcore.store import RunStore

EXP = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", backend="eager")


@pytest.fixture
def empty_registry(monkeypatch):
    monkeypatch.setattr(registry, "_LIVE", {})


def _run(store: RunStore, run_id: str) -> LiveRun:
    return LiveRun(EXP, store, run_id=run_id, device="cpu", notes=[], owner="test", timeout_s=None)


def _end(run: LiveRun, status: str = "finished") -> LiveRun:
    # what the store says once it is recorded
    run.record = SimpleNamespace(id=run.run_id, status=status, error=None, finished_at=time.time())
    run._release()
    return run


def test_a_recorded_run_lets_go_of_its_power_samples_and_code(tmp_path):
    run = _run(RunStore(tmp_path / "runs.sqlite"), "r1")
    run.power_samples = [[0.1 * i, 300.0, "measuring", 90.0] for i in range(10_000)]
    run.code = ["def kernel(): pass\n" * 10_000]
    _end(run)
    assert run.done and run.power_samples == [] and run.code == []  # the store has them; the pages read them there
    assert run.snapshot()["power_samples"] == []


def test_a_run_the_store_does_not_say_ended_keeps_them(tmp_path):
    run = _run(RunStore(tmp_path / "runs.sqlite"), "r1")
    run.power_samples = [[0.0, 300.0, "measuring", 90.0]]
    _end(run, status="running")  # recording failed: the store does not hold them
    assert run.power_samples == [[0.0, 300.0, "measuring", 90.0]]


def test_ended_runs_beyond_a_count_are_dropped_and_runs_under_way_never(tmp_path, empty_registry):
    store = RunStore(tmp_path / "runs.sqlite")
    waiting = _run(store, "waiting")
    registry.register(waiting)
    for i in range(registry.KEEP_ENDED + 150):
        registry.register(_end(_run(store, f"r{i}")))
    assert registry.count() == registry.KEEP_ENDED + 1
    assert registry.live("waiting") is waiting and registry.active() == [waiting]
    latest = f"r{registry.KEEP_ENDED + 149}"
    assert registry.live(latest) is not None and registry.live("r0") is None  # the latest kept, the oldest dropped


def test_ended_runs_are_dropped_after_a_while(tmp_path, empty_registry, monkeypatch):
    store = RunStore(tmp_path / "runs.sqlite")
    old = _end(_run(store, "old"))
    old.ended_at = time.time() - registry.KEEP_ENDED_S - 1
    registry.register(old)
    registry.register(_end(_run(store, "new")))
    assert registry.live("old") is None and registry.live("new") is not None


def test_a_note_said_when_the_run_queued_is_not_repeated_when_its_worker_says_it(tmp_path):
    said = "precision=tf32 changes GPU matmuls only: on the CPU it runs as fp32"
    run = LiveRun(EXP, RunStore(tmp_path / "runs.sqlite"), run_id="r1", device="cpu", notes=[said], owner="test",
                  timeout_s=None)
    run.handle = [{"type": "note", "text": said}, {"type": "note", "text": "a note only the worker knows"}]
    run._read_events()
    assert run.notes == [said, "a note only the worker knows"]  # what the live panel shows (snapshot)


def test_cancel_from_the_live_panel_says_when_the_run_had_ended_already(tmp_path, empty_registry, monkeypatch):
    """The live panel's Cancel, pressed as the result came, said "Cancelled" of a run recorded finished."""
    from tcore.lab import api

    run = _end(_run(RunStore(tmp_path / "runs.sqlite"), "ended"))
    registry.register(run)
    asked = []
    monkeypatch.setattr(LiveRun, "cancel", lambda self: asked.append(self.run_id) or True)  # a stop that took
    assert api.stop("ended") is False and asked == []  # the page says it had ended: nothing stopped
    assert api.stop("not-followed-here") is False
    going = _run(RunStore(tmp_path / "runs.sqlite"), "going")
    registry.register(going)
    assert api.stop("going") is True and asked == ["going"]
