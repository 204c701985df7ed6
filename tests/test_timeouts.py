"""A run's time limit ends it at that time whatever phase it is in, and the record says which phase that was.
A test hook (tcore.worker.failures.STALL_ENV) makes the worker sleep as a phase begins, as a run stuck there would."""
import time

import pytest

from tcore.experiment.protocol import PHASE_TITLES
from tcore.lab.launch.handles import timeout_message
from tcore.lab.run import runs
from tcore.worker.failures import STALL_ENV
from tests.helpers import wait_until

LIMIT_S = 8.0
SLACK_S = 5.0  # the limit holds to within this: SIGTERM, then SIGKILL after a 3 s grace
LOADED_SLACK_S = 60.0  # where the worker is already stuck: the grace, then reading its end on a machine of any pace


@pytest.fixture(scope="module", autouse=True)
def _fork_server_ready():
    """The fork server's imports done first (a worker started and let go), so each run reaches its phase in time."""
    from tcore.lab.launch.launcher import Worker

    Worker({}).dismiss()


def _limit_from_now(handle, limit_s: float) -> float:
    """Restart the run's limit timer at `limit_s` from now (as if it had been given that limit at this moment); when
    it was restarted. How long a worker takes to reach a phase depends on the machine's pace, which no test here
    measures: the limit starts once the worker is stuck where the test wants it."""
    handle._timer.cancel()
    handle.timeout_s = limit_s
    restarted = time.time()
    handle._start_timer(limit_s)
    return restarted


@pytest.mark.parametrize("phase", ["building", "eager", "compiling", "measuring"])
def test_the_limit_ends_a_run_stuck_in_any_phase(phase, store, tiny, monkeypatch):
    monkeypatch.setenv(STALL_ENV, f"{phase}:600")
    exp = tiny.replace(backend="eager", cache="cold")  # Dynamo alone: no C++ compile before the measuring phase
    live = runs.start(exp, store, timeout_s=900)
    wait_until(lambda: live.handle is not None and live.handle.phase == phase, limit_s=900,
               what=f"the worker stuck in {phase}")
    limit_set = _limit_from_now(live.handle, LIMIT_S)
    record = live.wait()
    assert record is not None and record.status == "failed" and record.error_kind == "timeout"
    assert record.error["phase"] == phase
    assert PHASE_TITLES[phase] in record.error["message"] and "8 s time limit" in record.error["message"]
    took_s = live.handle.finished_at - limit_set
    assert LIMIT_S - 0.5 <= took_s < LIMIT_S + LOADED_SLACK_S, f"stopped {took_s:.1f} s after its limit was set"


def test_the_limit_counts_the_workers_start(store, tiny, monkeypatch):
    """A worker that takes its time to start (imports, a fork server still importing) spends the run's time."""
    from tcore.lab.run import liverun

    started = liverun.Worker

    def slow_worker(*args, **kwargs):
        time.sleep(4)
        return started(*args, **kwargs)

    monkeypatch.setattr(liverun, "Worker", slow_worker)
    monkeypatch.setattr(liverun.SPARES, "take", lambda slot, env: None)
    monkeypatch.setenv(STALL_ENV, "building:600")
    live = runs.start(tiny.replace(backend="eager"), store, timeout_s=LIMIT_S)
    record = live.wait(timeout=120)
    assert record.error_kind == "timeout"
    assert live.handle.finished_at - live.launched_at < LIMIT_S + SLACK_S


def test_a_worker_still_starting_at_the_limit_ends_then(store, tiny, monkeypatch):
    from tcore.lab.run import liverun

    started = liverun.Worker

    def slower_than_the_limit(*args, **kwargs):
        time.sleep(LIMIT_S + 4)
        return started(*args, **kwargs)

    monkeypatch.setattr(liverun, "Worker", slower_than_the_limit)
    monkeypatch.setattr(liverun.SPARES, "take", lambda slot, env: None)
    t0 = time.time()
    live = runs.start(tiny.replace(backend="eager"), store, timeout_s=LIMIT_S)
    record = live.wait(timeout=120)
    assert record.error_kind == "timeout" and record.error["phase"] is None
    assert record.error["message"] == timeout_message(LIMIT_S, None)
    assert time.time() - t0 < LIMIT_S + SLACK_S
