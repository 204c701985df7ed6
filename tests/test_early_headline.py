"""The headline before the profiling pass: the worker sends the timed figures once they are known, the lab keeps them,
the Run page draws the result's Speedup from them while the profiler runs, and the saved record agrees (or, where it
differs, the page shows the saved one)."""
import os
import signal
import threading
import time

import pytest

from tcore.experiment.spec import Experiment
from tcore.figures import Result, RunFigures, VariantFigures, rerun
from tcore.lab.run import runs
from tcore.worker.measurement import Measurement
from tests.app_harness import app, db, texts  # noqa: F401 (db: the fixture)
from tests.helpers import HANG_S

# The figures the headline shows, which the saved record must repeat.
HEADLINE_KEYS = ("speedup", "speedup_low", "speedup_high", "speedup_pm_pct", "compile_s", "breakeven_steps",
                 "eager_samples_per_s", "compiled_samples_per_s", "eager_latency_ms_p50", "compiled_latency_ms_p50")


@pytest.fixture
def quick():
    """A real run with a compiled variant that compiles in a moment (backend=eager: Dynamo, no Inductor)."""
    return Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", warmup_steps=2, timed_steps=4,
                      rounds=4, backend="eager")  # 3 or more state an interval


class HoldAtProfiling:
    """A run's on_event that notes each event with what the lab holds then, and holds the lab's reader at the
    profiling phase until released: the worker goes on, the lab sees nothing more until then."""

    def __init__(self, hold: bool = True):
        self.seen, self.hold = [], hold
        self.at_profiling, self.release = threading.Event(), threading.Event()
        self.live = None

    def __call__(self, event):
        # (an event before start() returned, were there one, says None: the run object was not known yet)
        held = None if self.live is None else self.live.snapshot()["headline"] is not None
        self.seen.append((event["type"], event.get("phase"), held))
        if event["type"] == "phase" and event["phase"] == "profiling":
            self.at_profiling.set()
            if self.hold:
                assert self.release.wait(300), "the test never released the run"


def start(exp, store, on_event, **kw):
    on_event.live = runs.start(exp, store, on_event=on_event, **kw)
    return on_event.live


def test_the_headline_reaches_the_lab_before_the_profiling_pass_and_the_record_repeats_it(quick, store):
    events = HoldAtProfiling(hold=False)
    live = start(quick, store, events)
    record = live.wait(300)
    assert record.status == "finished", record.error
    kinds = [(k, p) for k, p, _ in events.seen if k != "power"]
    headline = kinds.index(("headline", None))
    assert headline < kinds.index(("phase", "profiling")) < kinds.index(("result", None)), kinds
    assert kinds[headline - 1][1] == "measuring"  # straight after the timed rounds
    # from the headline on, the lab holds it (the page draws it at its next redraw), through the profiling pass
    assert [held for k, _, held in events.seen if k != "power"][headline:] == [True] * (len(kinds) - headline)
    shown, saved = live.headline, record.result
    assert shown["speedup"] is not None and shown["compiled_profiled_step_ms"] is None  # timed, not yet profiled
    assert saved["compiled_profiled_step_ms"] is not None
    for key in HEADLINE_KEYS:  # on the CPU nothing is host-bound: the profile cannot move the interval
        assert saved[key] == shown[key], key
    assert 0 < saved["headline_at_s"] < saved["timeline_wall_s"]


def test_the_run_page_draws_the_speedup_from_the_headline_while_the_profiler_runs(quick, db):
    at = app()
    events = HoldAtProfiling()
    live = start(quick, db, events, owner=at.session_state["owner"])
    try:
        assert events.at_profiling.wait(300), live.handle and live.handle.final
        at.run()
        assert not at.exception, at.exception
        assert not live.done and db.get(live.run_id).status == "running"  # nothing saved yet
        tiles = {m.label: m for m in at.metric}
        assert "Speedup" in tiles, [m.label for m in at.metric]
        headline = live.headline
        assert tiles["Speedup"].value == f"{headline['speedup']:.2f}x" or tiles["Speedup"].value.startswith(
            f"{headline['speedup']:.2f}"), tiles["Speedup"].value
        assert "Profiling: where the time goes, a second or two" in texts(at.info)
        # The interval the page drew is the headline's: make the held one differ from what the record will say
        # (as a host-bound verdict from the profile would widen it) to see which one each moment draws.
        narrow = dict(headline, speedup_low=headline["speedup"] * 0.999, speedup_high=headline["speedup"] * 1.001)
        live.headline = narrow
        at.run()
        early = next(m for m in at.metric if m.label == "Speedup")
        assert f"{narrow['speedup_low']:.2f}" in str(early.proto.delta)
    finally:
        events.release.set()
    record = live.wait(300)
    assert record.status == "finished", record.error
    deadline = time.time() + HANG_S  # only against a hang
    while "Profiling: where the time goes" in texts(at.info):
        assert time.time() < deadline
        at.run()
    final = next(m for m in at.metric if m.label == "Speedup")
    assert f"{record.result['speedup_low']:.2f}" in str(final.proto.delta)  # the saved interval, not the held one
    assert record.result["speedup_low"] != pytest.approx(narrow["speedup_low"], rel=1e-4)


def test_a_worker_that_dies_in_the_profiling_pass_keeps_its_headline_in_the_record(quick, store):
    events = HoldAtProfiling()
    live = start(quick, store, events)
    assert events.at_profiling.wait(300)
    os.kill(live.handle.pid, signal.SIGKILL)  # as the kernel's OOM killer would, mid-profile
    events.release.set()
    record = live.wait(300)
    assert record.status == "finished", record.error
    for key in HEADLINE_KEYS:
        assert record.result[key] == live.headline[key], key  # as the page showed it (restated with the store)
    for variant in ("eager", "compiled"):
        why = record.result["unavailable"][f"{variant}_profiled_step_ms"]
        assert "in the profiling pass (crashed" in why and "the timed figures stand" in why
        assert record.result[f"{variant}_profiled_step_ms"] is None
    assert any(n.startswith("The breakdown is missing") for n in record.result["notes"])


def test_a_cancel_after_the_headline_stays_a_cancel(quick, store):
    events = HoldAtProfiling()
    live = start(quick, store, events)
    assert events.at_profiling.wait(300)
    live.cancel()
    events.release.set()
    assert live.wait(300).status == "failed" and live.record.error_kind == "cancelled"


def test_an_error_in_the_profiler_leaves_the_timed_figures_and_says_why(monkeypatch):
    """The worker's side: profile() raising costs the breakdown only, each profiled figure n/a with the reason."""
    m = Measurement.__new__(Measurement)
    m.result = Result(device="cpu", variants=["eager", "compiled"], run=RunFigures(speedup=1.5),
                      eager=VariantFigures(samples_per_s=10.0, kernels_per_step=3),
                      compiled=VariantFigures(samples_per_s=15.0))
    m.result.details["breakdown"] = {"eager": {}}

    def broken(*_):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(m, "profile", broken)
    m.profile_or_say_why(None, None, None)
    record = m.result.to_record()
    assert record["speedup"] == 1.5 and record["compiled_samples_per_s"] == 15.0
    assert record["eager_kernels_per_step"] is None and "breakdown" not in record
    assert "CUPTI_ERROR_NOT_INITIALIZED" in record["unavailable"]["compiled_profiled_step_ms"]
    assert "the timed figures above it stand" in record["unavailable"]["eager_gpu_time_samples_per_s"]


def test_a_host_bound_verdict_widens_the_interval_so_the_final_record_can_differ_from_the_headline():
    """Why the page must redraw from the saved record: the same rounds give a wider interval once the profile calls a
    variant host-bound (its spread between processes is larger)."""
    ratios = [1.50, 1.52, 1.49, 1.51]
    early, final = (rerun.interval(ratios, device="cuda", host_bound=b) for b in (False, True))
    assert early.speedup == final.speedup
    assert final.low < early.low and final.high > early.high


def test_a_page_redraw_waiting_for_the_headline_wakes_when_it_arrives(quick, store):
    """The live view's redraw blocks on the headline's arrival (ui.panels.live.NEWS_WAIT_S) rather than drawing it a
    redraw later: the wait ends when the lab reads the headline, not when it times out."""
    from tcore.lab.run.liverun import LiveRun

    live = LiveRun(quick, store, run_id="r1", device="cpu", notes=[], owner="me", timeout_s=None)
    arrived = threading.Event()

    def worker_events():  # what the worker sends at the end of its timed rounds
        yield {"type": "phase", "phase": "measuring", "t": 1.0}
        assert arrived.wait(60)
        yield {"type": "headline", "t": 2.0, "result": {"speedup": 1.5, "variants": ["eager", "compiled"]}, "env": {}}

    live.handle = worker_events()
    reader = threading.Thread(target=live._read_events, daemon=True)
    reader.start()
    while live.phase != "measuring":
        time.sleep(0.01)
    threading.Timer(0.2, arrived.set).start()
    began = time.monotonic()
    live.wait_for_news(120)
    assert live.headline["speedup"] == 1.5
    assert time.monotonic() - began < 60  # woken by the headline, long before the wait's limit
    began = time.monotonic()
    live._done.set()  # after the headline, the run's end is the news
    live.wait_for_news(120)
    assert time.monotonic() - began < 60


def test_only_an_end_seen_from_outside_keeps_the_headline_an_error_the_worker_raised_stays_an_error():
    """A worker killed (or out of time) after its headline keeps its timed figures; an exception the worker raised
    itself after the headline (its error names the exception) is a bug to show, not a finished run."""
    from tcore.experiment.protocol import error
    from tcore.lab.run.liverun import LiveRun

    run = LiveRun.__new__(LiveRun)  # only the headline the worker sent matters here
    run._headline_sent = {"result": {"variants": ["eager"], "speedup": 1.5, "notes": []}, "env": {}}
    kept = run._headline_kept(error("crashed", "the worker process ended with signal 9"))
    assert kept["type"] == "result" and kept["result"]["speedup"] == 1.5
    assert "profiling pass" in kept["result"]["unavailable"]["eager_profiled_step_ms"]
    assert run._headline_kept(error("timeout", "stopped at the 60 s time limit")) is not None
    assert run._headline_kept(error("crashed", "KeyError: 'x'", exception="KeyError")) is None
    assert run._headline_kept(error("cancelled", "cancelled by the user")) is None
    run._headline_sent = None
    assert run._headline_kept(error("crashed", "the worker process ended with signal 9")) is None
