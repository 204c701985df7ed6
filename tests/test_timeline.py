"""A run's timeline: contiguous phases on one clock (tcore.figures.timeline), assembled by the lab side from the
moments it sees and the worker's own clock (tcore.lab.run.runclock); the bar and the caption the Run page draws."""
import pytest

from tcore.figures import timeline
from tcore.figures.timeline import COMPILE, LAB, MEASURE
from tcore.lab.run import runclock


def test_phases_touch_end_to_end_and_a_gap_before_the_first_mark_is_its_own_phase():
    phases = timeline.assemble([("a", LAB, 12.0), ("b", MEASURE, 13.5), ("c", COMPILE, 13.0)], end=20.0, start=10.0)
    # "c" came back in time (two processes' clocks): it begins where "b" began, and "b", lasting nothing, goes
    assert [p["name"] for p in phases] == ["other (not measured)", "a", "c"]
    assert [p["s"] for p in phases] == pytest.approx([2.0, 1.5, 6.5])
    assert sum(p["s"] for p in phases) == pytest.approx(10.0)
    for before, after in zip(phases, phases[1:]):
        assert after["start_s"] == pytest.approx(before["start_s"] + before["s"])


def test_the_compile_is_cut_by_torchs_timers_and_what_they_leave_is_named():
    phases = timeline.assemble([(timeline.WORKER_PHASES["compiling"][0], COMPILE, 0.0)], end=10.0, start=0.0)
    cut = timeline.refine(phases, {"first_call_phases_s": {"dynamo_tracing_s": 2.0, "aot_autograd_s": 1.0,
                                                           "inductor_lowering_s": 3.0, "codegen_and_compile_s": 0.0}})
    assert [(p["name"], p["s"]) for p in cut] == [
        ("Dynamo (tracing, guards)", 2.0), ("AOT autograd", 1.0), ("Inductor (lowering, passes)", 3.0),
        (timeline.COMPILE_REST, 4.0)]
    # timers that add up to more than their phase are scaled to fit it, not pushed past it
    over = timeline.refine(phases, {"first_call_phases_s": {"dynamo_tracing_s": 15.0, "aot_autograd_s": 5.0}})
    assert sum(p["s"] for p in over) == pytest.approx(10.0) and over[0]["s"] == pytest.approx(7.5)


def test_the_timed_rounds_are_their_blocks_walls_and_the_rest_is_calibration():
    phases = timeline.assemble([(timeline.WORKER_PHASES["measuring"][0], MEASURE, 0.0)], end=5.0, start=0.0)
    cut = timeline.refine(phases, {"blocks": {"eager": [[10, 1.0], [10, 1.5]], "compiled": [[10, 0.5], [10, 0.5]]}})
    assert [p["s"] for p in cut] == [2.5, 1.0, 1.5] and cut[-1]["name"].startswith("calibration")
    # a GPU run's untimed settling blocks come first, as they ran, each variant's seconds its own part
    settled = timeline.refine(phases, {"blocks": {"eager": [[10, 1.0]], "compiled": [[10, 0.5]]},
                                       "settle": {"eager": {"s": 0.8}, "compiled": {"s": 0.4}}})
    assert [(p["name"], p["s"]) for p in settled][:2] == [("eager untimed blocks until it settled", 0.8),
                                                         ("compiled untimed blocks until it settled", 0.4)]
    assert [p["s"] for p in settled[2:]] == [1.0, 0.5, 2.3]


def test_the_clock_puts_the_workers_clock_on_the_labs_and_splits_the_workers_start(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(runclock.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(runclock.time, "time", lambda: 5000.0)
    clock = runclock.RunClock()
    now[0] = 101.0
    clock.launch()
    now[0] = 106.0  # the worker received the run at 105.9 (its t=0.1 arrives at 106.0): imports 103.9-105.4
    clock.event({"type": "started", "t": 0.1, "imports_s": 1.5, "ready_wait_s": 0.5})
    for phase, t in [("building", 0.2), ("eager", 1.0), ("compiling", 2.0), ("warmup", 7.0), ("measuring", 8.0)]:
        now[0] = 105.9 + t + 0.05  # each read 50 ms after it was sent
        clock.event({"type": "phase", "phase": phase, "t": t})
    now[0] = 116.1  # the timed figures arrive (sent at 10.0), before the profiling pass
    clock.event({"type": "headline", "t": 10.0})
    clock.event({"type": "phase", "phase": "profiling", "t": 10.0})
    now[0] = 117.0
    clock.event({"type": "result", "t": 10.9})
    now[0] = 117.5
    result = {"first_call_phases_s": {"dynamo_tracing_s": 1.0, "inductor_lowering_s": 2.0}}
    got = clock.timeline(result)
    names = [p["name"] for p in got["timeline"]]
    assert names[:4] == [timeline.QUEUE, "worker process start (Python)",
                         "imports (torch, the engine; while idle, model libraries and the profiler's start)",
                         "hand-over to the worker (imports done)"]
    by_name = {p["name"]: p for p in got["timeline"]}
    assert by_name[timeline.QUEUE]["s"] == pytest.approx(1.0) and by_name[timeline.QUEUE]["kind"] == timeline.WAIT
    assert by_name["worker process start (Python)"]["s"] == pytest.approx(2.9)
    imports = by_name["imports (torch, the engine; while idle, model libraries and the profiler's start)"]
    assert imports["s"] == pytest.approx(1.5)
    assert by_name["Dynamo (tracing, guards)"]["s"] == pytest.approx(1.0)
    assert by_name[timeline.COMPILE_REST]["s"] == pytest.approx(2.0)
    assert by_name["worker exit, result handed back"]["s"] == pytest.approx(0.2)  # sent at 116.8
    assert names[-1].startswith("saving") and by_name[names[-1]]["s"] == pytest.approx(0.5)
    assert got["timeline_wall_s"] == pytest.approx(17.5) and got["timeline_compile_s"] == pytest.approx(5.0)
    assert got["timeline_measure_s"] == pytest.approx(1.0 + 1.0 + 2.0)  # eager warm-up, compiled warm-up, timing
    # the queue is the room's time, not the lab's overhead
    assert got["timeline_wait_s"] == pytest.approx(1.0)
    assert got["lab_overhead_s"] == pytest.approx(17.5 - 5.0 - 4.0 - 1.0)
    assert "1.0 s (6%) waiting for its turn (the queue, the GPU), 5.0 s (29%) the compile" in timeline.caption(got)
    assert got["headline_at_s"] == pytest.approx(16.1)  # submit at 100.0, before the profile and the save
    assert "The speedup reached the page at 16.1 s, before the profiling pass and the save." in timeline.caption(got)


def test_waits_for_the_gpu_are_cut_out_of_the_phase_they_fell_in(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(runclock.time, "monotonic", lambda: now[0])
    clock = runclock.RunClock()
    clock.launch()
    clock.event({"type": "started", "t": 0.0})  # the worker's clock on the lab's: offset 100
    for phase, t in [("building", 0.0), ("eager", 1.0), ("compiling", 2.0)]:
        now[0] = 100.0 + t
        clock.event({"type": "phase", "phase": phase, "t": t})
    now[0] = 105.0  # the compile's CPU work is done: its code must run, and another run holds the GPU
    clock.event({"type": "device", "ask": "compiled", "t": 5.0})
    now[0] = 108.0
    clock.granted()
    now[0] = 109.0
    clock.event({"type": "phase", "phase": "measuring", "t": 9.0})
    now[0] = 110.0
    clock.event({"type": "result", "t": 10.0})
    got = clock.timeline({})
    rows = [(p["name"], p["kind"], p["s"]) for p in got["timeline"]]
    compile_name = timeline.WORKER_PHASES["compiling"][0]
    assert (compile_name, timeline.COMPILE, pytest.approx(3.0)) in rows
    assert (timeline.DEVICE_WAIT, timeline.WAIT, pytest.approx(3.0)) in rows
    assert (compile_name + timeline.CONTINUED, timeline.COMPILE, pytest.approx(1.0)) in rows
    assert got["timeline_wait_s"] == pytest.approx(3.0) and got["timeline_compile_s"] == pytest.approx(4.0)
    assert sum(p["s"] for p in got["timeline"]) == pytest.approx(got["timeline_wall_s"])


def test_a_first_event_read_late_does_not_push_the_workers_phases_past_a_wait_it_asked_for(monkeypatch):
    """On a busy machine this process can read a worker's first events late and the next ones at once: the worker's
    clock goes on this one by the event read soonest, so the phase it asked the device in begins before the wait,
    as it did on the worker, and the wait is whole (it was clipped to the 15 ms before a phase placed late)."""
    now = [100.0]
    monkeypatch.setattr(runclock.time, "monotonic", lambda: now[0])
    clock = runclock.RunClock()
    clock.launch()
    now[0] = 102.0  # the worker received the run at 100.5 (its t=0): its first two events are read 1.5 s late
    clock.event({"type": "started", "t": 0.0})
    clock.event({"type": "phase", "phase": "building", "t": 0.1})
    now[0] = 102.53  # its eager phase begins at t=2.0, asking the device at once, and both are read within 30 ms
    clock.event({"type": "phase", "phase": "eager", "t": 2.0})
    clock.event({"type": "device", "ask": "eager", "t": 2.01})
    now[0] = 106.0  # another run held the device until now
    clock.granted()
    now[0] = 106.2
    clock.event({"type": "phase", "phase": "measuring", "t": 5.6})
    now[0] = 106.6
    clock.event({"type": "result", "t": 6.0})
    now[0] = 107.0
    got = clock.timeline({})["timeline"]
    waits = [p for p in got if p["name"] == timeline.DEVICE_WAIT]
    assert len(waits) == 1 and waits[0]["s"] == pytest.approx(3.48, abs=0.01)  # from t=2.01 (102.52 here) to 106.0
    before = got[got.index(waits[0]) - 1]
    assert before["name"] == timeline.WORKER_PHASES["eager"][0] and before["s"] == pytest.approx(0.01, abs=0.005)
    assert sum(p["s"] for p in got) == pytest.approx(7.0)


def test_cut_out_keeps_the_phases_end_to_end_and_clips_a_wait_at_its_phase():
    phases = [{"name": "a", "kind": "lab", "start_s": 0.0, "s": 2.0}, {"name": "b", "kind": "measure", "start_s": 2.0,
                                                                      "s": 2.0}]
    out = timeline.cut_out(phases, [(1.0, 1.5), (2.5, 9.0)])
    assert [(p["name"], p["start_s"], p["s"]) for p in out] == [
        ("a", 0.0, 1.0), (timeline.DEVICE_WAIT, 1.0, 0.5), ("a" + timeline.CONTINUED, 1.5, 0.5),
        ("b", 2.0, 0.5), (timeline.DEVICE_WAIT, 2.5, 1.5)]
    assert sum(p["s"] for p in out) == pytest.approx(4.0)


def test_a_spare_whose_imports_were_done_shows_no_imports_in_the_run():
    clock = runclock.RunClock()
    clock.launch()
    clock.worker(forked=False, from_spare="ready")
    clock.event({"type": "started", "t": 0.0, "imports_s": 9.0, "ready_wait_s": 60.0})
    clock.event({"type": "result", "t": 0.01})
    names = [p["name"] for p in clock.timeline({})["timeline"]]
    assert not any(n.startswith("imports") for n in names)


def test_a_record_without_a_timeline_says_so_and_draws_no_bar():
    from ui.panels import timeline_bar

    assert timeline.caption({"speedup": 1.2}) == "n/a: recorded before the lab kept a timeline"
    assert timeline_bar.timeline_chart({"speedup": 1.2}) is None
    fig = timeline_bar.timeline_chart({"timeline": [
        {"name": "queue", "kind": LAB, "start_s": 0.0, "s": 1.0},
        {"name": "Dynamo", "kind": COMPILE, "start_s": 1.0, "s": 2.0}]})
    assert [t.x[0] for t in fig.data] == [1.0, 2.0] and fig.data[0].marker.color != fig.data[1].marker.color
    assert [t.text for t in fig.data] == ["1.0 s", "2.0 s"]  # a bar's label carries its unit ("34.3" did not)
    assert "warm" not in timeline_bar.SUBTITLE  # "compile warm" read as a warm cache: the colour is named


def test_the_caption_names_the_compile_phase_apart_from_the_headline_s_compile_time():
    """A generate run read 8.2 s of compile time in its headline and 13.0 s of compile on its timeline, unexplained."""
    run = {"timeline": [{"name": "compile", "kind": COMPILE, "start_s": 0.0, "s": 13.0}], "timeline_wall_s": 40.0,
           "timeline_compile_s": 13.0, "lab_overhead_s": 5.0, "compile_s": 8.2}
    assert ("13.0 s (32%) the compile (the first compiled call whole; the compile time, 8.2 s, is that call less one "
            "eager step)") in timeline.caption(run)
    generated = timeline.caption({**run, "compile_prefill_s": 1.2})
    assert "(the first compiled generation whole; the compile time, 8.2 s, is that generation less an eager one)" \
        in generated
