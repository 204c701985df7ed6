"""The app, headless (Streamlit's AppTest): pages load, a tiny CPU run from the Run page, runs queued behind it,
invalid settings, Compare with stored runs, the pages on a GPU machine (test_app_diagnose and test_app_sweep have
the Diagnose and Sweep pages).

Real runs use captioner/tiny with backend=aot_eager or eager: aot_eager traces forward and backward like
Inductor does but skips code generation; eager is Dynamo alone. Either way a run takes seconds on the CPU.
"""
import re
import time

import pytest
from streamlit.proto.Metric_pb2 import Metric
from streamlit.testing.v1 import AppTest

from tcore.experiment.spec import Experiment
from tcore.lab.run import registry, runs
from tests.app_harness import (  # noqa: F401 (the db fixture)
    app,
    db,
    set_tiny_fast,
    stored_run,
    texts,
    unlock,
    wait_for,
)
from tests.helpers import insert_run
from ui.words.store_words import plain

OWNER = "ada~abcd.00000000c0ffee00"  # a name tag and its secret part, as the page keeps them
PAGES = ["app_pages/run.py", "app_pages/diagnose.py", "app_pages/compare.py", "app_pages/sweep.py",
         "app_pages/system.py"]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_loads(db, page):
    at = app()
    if page != "app_pages/run.py":
        at.switch_page(page).run()
    assert not at.exception
    assert at.title[0].value  # each page opens with its title


def test_run_page_says_cpu_and_tiny_without_a_gpu(db):
    at = app()
    if runs.preflight(Experiment(model="captioner"))[0] == "cpu":
        assert "runs use the **CPU** with the **tiny** presets" in texts(at.info)
        assert at.selectbox(key="run_preset").value == "tiny"
        assert at.number_input(key="run_batch_size").value == 8  # the registry's CPU batch for the captioner


def test_tiny_cpu_run_from_the_run_page(db):
    at = set_tiny_fast(app())
    assert plain("captioner/tiny bs2 fp32 inference, whole aot_eager") in texts(at.caption)  # labels are text
    at.button(key="run_start").click().run()
    assert not at.exception
    assert any(re.match(r"(Queued|Running): " + re.escape(plain("captioner/tiny bs2")), s.value) for s in at.subheader)
    assert not at.button(key="run_start").disabled  # more runs can queue behind it

    # A refreshed tab keeps its address, so its owner: the run is still "yours" and can be cancelled there.
    me = at.session_state["owner"]
    assert me.startswith("guest-") and at.query_params["me"] == me
    refreshed = AppTest.from_file("../app.py", default_timeout=300)
    refreshed.query_params["me"] = me
    refreshed.run()
    assert plain("captioner/tiny bs2 fp32 inference, whole aot_eager") + " · :gray[yours]" in texts(refreshed.markdown)
    # Someone else sees whose it is, and has no button to cancel it.
    other = app()
    assert (plain("captioner/tiny bs2 fp32 inference, whole aot_eager") + f" · :gray[guest {me[6:10]}]"
            in texts(other.markdown))
    assert not other.subheader
    assert not [b for b in other.button if b.key and b.key.startswith("run_queue_cancel_")]

    # the saved result: the headline alone comes first, while the profiler runs (tests/test_early_headline.py)
    wait_for(at, lambda at: any(m.label == "Speedup" for m in at.metric)
             and "Compiled output matches" in texts(at.success))
    assert not at.exception
    metrics = {m.label: m.value.replace(",", "") for m in at.metric}  # tiles group thousands: "1,234.5"
    assert metrics["Speedup"].endswith(" x")
    assert metrics["Compile time"].endswith(" s")
    assert float(metrics["Eager samples/s"]) > 0
    assert "Compiled output matches eager" in texts(at.success)
    assert "Dynamo captured 1 graph with no graph breaks." in texts(at.markdown)
    assert "Compile cache: cold (fresh caches); FX graph cache 0 hits" in texts(at.caption)
    # The run's timeline bar under the headline, with the line that says what of the wall time was the compile
    assert re.search(r"[\d.]+ s from submit to saved: .*[\d.]+ s \(\d+%\) the compile", texts(at.caption))
    # The timeline, the Speed tab's throughput and latency, and Where the time goes' breakdown; the other tabs draw
    # when opened.
    # (and the kernels' classes side by side where compiled is slower, as aot_eager's often is on the CPU)
    drawn = {chart.key for chart in at.get("plotly_chart")}
    assert drawn - {"run_result_classes"} == {"run_result_timeline", "run_result_throughput", "run_result_latency",
                                              "run_result_breakdown"}
    opened = {}
    for tab in ("Memory and energy", "Compile phases"):  # no power trace tab: this CPU has no meter
        at.session_state["run_result_charts"] = tab
        at.run()
        assert not at.exception
        above = {"run_result_timeline", "run_result_breakdown", "run_result_classes"}  # drawn above the tabs
        opened[tab] = len([chart for chart in at.get("plotly_chart") if chart.key not in above])
    assert opened == {"Memory and energy": 2, "Compile phases": 1}  # memory, energy; compile phases
    assert "Where the time goes" in texts(at.markdown)
    (record,) = db.list()
    assert record.status == "finished" and record.spec["backend"] == "aot_eager"


def test_the_page_drawn_after_run_already_follows_the_run_in_one_pass(db, monkeypatch):
    """After Run the person's own page said "Nothing is running or waiting" for up to 15 s while everyone else's
    queue showed the run: the click's page queued the run and then went round again, two whole page runs on a loaded
    machine before the queue was drawn. Queued in the button's callback, the first page drawn shows it."""
    from tcore.lab import rerun_outlook

    runs.pause(db, True)  # it stays queued: no worker needed
    at = set_tiny_fast(app())
    passes = []
    words = rerun_outlook.words
    monkeypatch.setattr(rerun_outlook, "words", lambda *a, **k: passes.append(1) or words(*a, **k))
    at.button(key="run_start").click().run()
    assert not at.exception
    assert len(passes) == 1  # one pass of the page
    assert any(s.value.startswith("Queued: ") for s in at.subheader)
    assert "in the queue**" in texts(at.markdown) and "Nothing is running or waiting" not in texts(at.caption)


def show_below(at: AppTest) -> list:
    return [s for s in at.selectbox if s.label == "Show below"]


def test_the_run_just_queued_is_still_shown_after_a_visit_to_another_page(db):
    """A person with one run pressed Run, opened Compare and came back: "Show below" held their first run again and
    the new run's live progress was gone (a reload showed the right one). The value set before the selector was
    first drawn came back once a page switch had dropped the selector's own."""
    first = stored_run(db, Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", backend="eager"))
    runs.pause(db, True)  # the new run stays queued, followed: no worker needed
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.query_params["me"] = OWNER
    with db._write() as c:
        c.execute("UPDATE runs SET owner=? WHERE id=?", (OWNER, first))
    at.run()
    assert not show_below(at)  # one run: nothing to choose
    at.button(key="run_start").click().run()
    new = db.list()[0].id
    assert new != first
    for page in ("compare", "diagnose", "system"):
        at.switch_page(f"app_pages/{page}.py").run()
        at.switch_page("app_pages/run.py").run()
        assert not at.exception
        assert show_below(at)[0].value == new, page
        assert any(s.value.startswith("Queued: ") for s in at.subheader), page  # still followed live
    # a pick below is kept across a visit too
    show_below(at)[0].set_value(first).run()
    at.switch_page("app_pages/compare.py").run()
    at.switch_page("app_pages/run.py").run()
    assert show_below(at)[0].value == first
    assert not any(s.value.startswith("Queued: ") for s in at.subheader)


def test_cancel_from_the_run_page_shows_why_the_run_ended(db):
    at = set_tiny_fast(app())
    at.button(key="run_start").click().run()
    (run,) = registry.active()
    at.button(key=f"run_cancel_{run.run_id}").click().run()
    wait_for(at, lambda at: "**Cancelled**" in texts(at.error))
    assert not at.exception
    assert db.get(run.run_id).error_kind == "cancelled"
    assert not at.button(key="run_start").disabled  # free to run again


def test_runs_queue_behind_each_other_from_the_run_page_and_a_queued_one_cancels(db):
    at = set_tiny_fast(app())
    at.selectbox(key="run_backend").set_value("eager").run()  # Dynamo alone: the quickest real run
    for _ in range(3):  # one click each: nothing greys Run out while runs are waiting
        at.button(key="run_start").click().run()
        assert not at.exception and not at.button(key="run_start").disabled
    # Identical runs are allowed (a repeat is a measurement too), but not without a word.
    assert re.search(r"You have [23] identical runs of \*\*"
                     + re.escape(plain("captioner/tiny bs2 fp32 inference, whole eager")) + r"\*\*",
                     texts(at.warning))
    first, second, third = sorted(registry.active(), key=lambda r: r.queued_at)
    assert {r.owner for r in registry.active()} == {at.session_state["owner"]}  # submitted as this session
    assert third.status == "queued"
    # The page follows the newest run: waiting, with its place in the queue.
    assert any(s.value.startswith("Queued: " + plain("captioner/tiny bs2")) for s in at.subheader)
    assert re.search(r"#[123] in the queue · ", texts(at.markdown))
    board = texts(at.markdown)
    assert "in the queue**" in board and board.count(":gray[yours]") == 3
    assert [r.id for r in db.list()] == [third.run_id, second.run_id, first.run_id]

    at.button(key=f"run_queue_cancel_{third.run_id}").click().run()  # from the queue view
    assert not at.exception
    assert db.get(third.run_id).error_kind == "cancelled" and third.done

    deadline = time.time() + 300  # only against a hang
    while not (first.done and second.done):
        assert time.time() < deadline, "the two queued runs did not finish within 300 s"
        time.sleep(0.5)
    a, b = db.get(first.run_id), db.get(second.run_id)
    assert a.status == b.status == "finished"
    assert b.started_at >= a.finished_at  # the second waited for the first: one run at a time on the cpu
    at.run()
    assert not at.exception
    mine = next(d.value for d in at.dataframe if "State" in d.value.columns)  # "Your runs in this session"
    assert mine["State"][0] == "cancelled by you"
    assert all(state.startswith("finished") for state in mine["State"][1:])


@pytest.mark.parametrize("change, message", [
    ({"run_rounds": 9}, "timed_steps (4) must be at least rounds (9)"),
])
def test_invalid_settings_show_the_spec_error_and_start_nothing(db, change, message):
    at = set_tiny_fast(app())
    for key, value in change.items():
        (at.selectbox(key=key) if key == "run_mode" else at.number_input(key=key)).set_value(value)
    at.run()
    assert message in texts(at.error)
    assert at.button(key="run_start").disabled
    assert not registry.active() and not db.list()


def test_cuda_on_a_cpu_machine_is_refused_before_running(db):
    if runs.preflight(Experiment(model="captioner"))[0] == "cuda":
        pytest.skip("this machine has a GPU")
    at = app()
    at.radio(key="run_device").set_value("cuda").run()
    assert "device=cuda but this machine has no usable CUDA GPU" in texts(at.error)
    assert at.button(key="run_start").disabled


def test_compare_shows_stored_runs_side_by_side_and_deletes(db, monkeypatch):
    tiny = Experiment(model="captioner", device="cpu", backend="aot_eager")
    whole = stored_run(db, tiny, speedup=1.2, compile_s=3.0, breakeven_steps=450.0)
    regional = stored_run(db, tiny.replace(compile="regional"), speedup=1.1, compile_s=1.0, breakeven_steps=300.0)
    failed = insert_run(db, tiny.replace(model="resnet50"))
    db.finish(failed, error={"kind": "compile_error", "message": "InductorError: boom", "log_tail": ["g++ failed"]})

    at = app().switch_page("app_pages/compare.py").run()
    assert not at.exception
    assert set(at.multiselect(key="compare_runs").value) == {whole, regional}  # finished runs only
    # Six charts in four lazy tabs: compile and throughput, energy and the scatter, where the time goes, cold vs warm.
    drawn = {}
    for tab in ("Compile time and throughput", "Energy and trade-off", "Where the time goes", "Cold vs warm start"):
        at.session_state["compare_charts"] = tab
        at.run()
        assert not at.exception
        drawn[tab] = len(at.get("plotly_chart"))
        if tab == "Energy and trade-off":
            assert "up and to the left is best" in texts(at.caption)
    # Each tab's charts, plus the run in detail, which is one of the chosen runs (not the newest run, failed here):
    # its breakdown, throughput and latency.
    assert at.selectbox(key="compare_detail").value in (whole, regional)
    assert list(drawn.values()) == [2 + 3, 2 + 3, 1 + 3, 1 + 3]
    assert {b.label for b in at.get("download_button")} == {
        "Download the chosen runs (CSV)", "Download every run (CSV)", "Download this comparison (HTML)",
        "Download as a .py file"}  # the last: the run in detail, as code (hand-made runs keep no trace)

    at.multiselect(key="compare_status").set_value(["failed"]).run()
    assert at.selectbox(key="compare_detail").value == failed
    assert f"**Compile error**: {plain('InductorError: boom')}" in texts(at.error)  # its kind and cause

    # Not this participant's run: no deleting it, however the button is reached.
    at.button(key="compare_delete").click().run()
    assert "only its owner or the instructor can delete it" in texts(at.error)
    assert failed in {r.id for r in db.list()}

    # The instructor, once unlocked with the passcode, may.
    monkeypatch.setenv("COMPILE_LAB_INSTRUCTOR_PASSCODE", "sesame")
    unlock(at, "open up")
    assert "That is not the passcode." in texts(at.error)
    unlock(at, "sesame")
    assert at.button(key="instructor_pause")  # unlocked: the instructor's panel
    at.switch_page("app_pages/compare.py").run()
    at.multiselect(key="compare_status").set_value(["failed"]).run()
    at.button(key="compare_delete").click().run()
    assert not at.exception
    assert {r.id for r in db.list()} == {whole, regional}


def test_a_run_past_the_labs_limits_is_refused_with_the_reason(db, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_MAX_MEMORY_GIB", "0.000001")
    at = set_tiny_fast(app())
    at.button(key="run_start").click().run()
    assert not at.exception
    assert "cannot be queued:** " in texts(at.error) and "max_memory_gib" in texts(at.error)
    assert not registry.active() and not db.list()


def test_fullgraph_with_the_break_warns_before_running_and_its_failure_advice_is_about_tracing(db):
    at = set_tiny_fast(app())
    at.toggle(key="run_fullgraph").set_value(True).run()
    assert "This run will fail, on purpose" not in texts(at.warning)
    at.toggle(key="run_graph_break").set_value(True).run()
    assert "This run will fail, on purpose: fullgraph=True makes any graph break an error" in texts(at.warning)

    failed = insert_run(db, Experiment(model="captioner", device="cpu", fullgraph=True, graph_break=True))
    db.finish(failed, error={"kind": "compile_error", "compile_phase": "tracing",
                             "message": "Unsupported: Tensor.item() at sample_models/captioner.py:120"})
    at.switch_page("app_pages/compare.py").run()
    at.multiselect(key="compare_status").set_value(["failed"]).run()
    hints = texts(at.caption)
    assert "Under fullgraph=True every graph break is an error" in hints and "Try backend=aot_eager" not in hints


def test_run_page_settings_survive_a_visit_to_another_page(db):
    """Training and the optimizer compile were back to defaults after Compare."""
    at = app()
    at.radio(key="run_task").set_value("training").run()
    at.toggle(key="run_compile_optimizer").set_value(True).run()
    at.number_input(key="run_rounds").set_value(7).run()
    at.switch_page("app_pages/compare.py").run()
    at.switch_page("app_pages/run.py").run()
    assert not at.exception
    assert at.radio(key="run_task").value == "training"
    assert at.toggle(key="run_compile_optimizer").value
    assert at.number_input(key="run_rounds").value == 7
    assert not [w for w in at.warning if "Session State API" in str(w.value)]


def test_the_batch_box_takes_the_labs_limit_and_shows_what_will_run(db, monkeypatch):
    """The box allowed 4096 under a limit of 1024, then ran a number no longer shown. The boxes have no maximum of
    their own (a browser refuses a number past one without telling the page): the defaults come within the limit, a
    limit lowered since brings the kept value down, and a value typed past it is refused (tests/test_app_run_knobs)."""
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "4")
    at = app()
    box = at.number_input(key="run_batch_size")
    assert box.value == 4  # the CPU default of 8, brought down to the limit
    assert any("bs4 " in str(c.value) for c in at.caption if str(c.value).startswith("Will run"))
    monkeypatch.setenv("COMPILE_LAB_MAX_RUN_S", "300")
    at.run()
    assert at.number_input(key="run_timeout_min").value == 5
    assert not at.button(key="run_start").disabled


# What tcore.host.machine.facts() returned on an H200 (recorded), for the pages' GPU branches on a CPU machine.
H200 = {"name": "NVIDIA H200", "index": 0, "uuid": "GPU-5a1f0c3e-0000-4000-8000-00000000h200", "driver": "580.159.04",
        "memory_total_gib": 140.4, "memory_used_gib": 0.6, "power_limit_w": 700.0, "power_w": 79.9,
        "utilization_pct": 0.0}


def test_gpu_machine_pages(db, monkeypatch):
    from tcore.host import machine

    facts = {**machine.facts(), "device": "cuda", "cuda_available": True, "cuda": "13.0", "triton": "3.6.0",
             "gpus": [H200], "nvml_reason": None, "power_source": "nvml", "power_reason": None, "missing": []}
    monkeypatch.setattr(machine, "facts", lambda: facts)
    monkeypatch.setattr(machine, "gpus", lambda: ([H200], None))
    monkeypatch.setattr(machine, "cuda_available", lambda: True)
    from tcore.host import power
    from tcore.lab.queue import scheduler

    monkeypatch.setattr(scheduler, "device_slots", lambda device: ("cuda:0",) if device == "cuda" else ("cpu",))
    monkeypatch.setattr(power, "nvml_index", lambda torch_index: torch_index)
    done = insert_run(db, Experiment(model="captioner", device="cpu"))
    db.finish(done, result={"device": "cuda"}, env={"device": "cuda", "gpu": "NVIDIA H200", "gpu_index": 0,
                                                    "gpu_uuid": H200["uuid"]})

    at = app()
    assert not any("runs use the **CPU**" in str(i.value) for i in at.info)  # no CPU banner with a GPU
    assert at.selectbox(key="run_preset").value == "small"  # the registry's GPU defaults
    assert at.number_input(key="run_batch_size").value == 256  # busy GPU: its figure holds still
    assert at.selectbox(key="run_precision").value == "bf16"  # inference as people run it: bf16 weights
    at.radio(key="run_task").set_value("training").run()
    assert at.selectbox(key="run_precision").value == "amp-bf16"  # training keeps float32 master weights
    at.radio(key="run_task").set_value("inference").run()
    at.selectbox(key="run_builtin").set_value("resnet50").run()
    assert at.toggle(key="run_channels_last").value  # eager as people tune a CNN
    assert plain("resnet50/full bs64 bf16 inference, whole default") in texts(at.caption)

    at.switch_page("app_pages/system.py").run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert at.subheader[0].value == "GPU 0: NVIDIA H200"
    assert f"{H200['uuid']} · runs here take slot cuda:0" in texts(at.caption)
    assert "Idle: the next run in the queue can start here." in texts(at.markdown)
    assert "1 of the last 500 stored runs ran on this GPU" in texts(at.caption)
    assert metrics["Power limit"] == "700 W" and metrics["Memory"] == "140 GiB" and metrics["Driver"] == "580.159.04"
    assert metrics["Power now"] == "80 W" and metrics["Utilisation now"] == "0 %"
    assert len(at.get("plotly_chart")) == 1  # the live power chart


def test_a_noisy_run_says_so_beside_its_headline_with_the_spread(db):
    tiny = Experiment(model="captioner", device="cpu", backend="aot_eager")
    noisy = stored_run(db, tiny, speedup=10.01, speedup_min=0.4, speedup_max=16.1, speedup_p50=1.39, compile_s=3.0,
                       variants=["eager", "compiled"], eager_spread_pct=373.0, eager_steps_per_s_min=21.0,
                       eager_steps_per_s_max=230.0, compiled_slow_steps=8, compiled_slow_time_pct=40.0,
                       busy_cores=0.9)
    steady = stored_run(db, tiny.replace(compile="regional"), speedup=1.2, speedup_min=1.18, speedup_max=1.23,
                        speedup_p50=1.21, compile_s=1.0, variants=["eager", "compiled"], eager_spread_pct=2.0,
                        compiled_spread_pct=3.0, busy_cores=0.0)
    at = app().switch_page("app_pages/compare.py").run()
    at.selectbox(key="compare_detail").set_value(noisy).run()
    assert not at.exception
    speedup = next(m for m in at.metric if m.label == "Speedup")
    assert speedup.value == "10.01 x" and speedup.proto.delta == "rounds: 0.40–16.10 x"
    assert speedup.proto.color == Metric.MetricColor.ORANGE  # noisy: the spread under the headline is orange
    warning = texts(at.warning)
    assert "**Noisy: read these figures as rough, not solid.** The eager rounds disagree by 373%" in warning
    assert "other processes kept 0.9 CPU cores busy" in warning
    assert "The speedup (10.01x, from each round's throughputs) and the median step (1.39x) disagree" in texts(at.info)

    at.selectbox(key="compare_detail").set_value(steady).run()
    speedup = next(m for m in at.metric if m.label == "Speedup")
    assert speedup.proto.color == Metric.MetricColor.GRAY and "Noisy" not in texts(at.warning)


def test_a_submit_from_the_run_page_checks_the_device_once(db, monkeypatch):
    """The device check (tcore.lab.run.runs.preflight) ran in the page's build, in the outlook above Run and again in
    runs.start: the page hands its answer on, so one click checks once; the lab's limits are still checked at start."""
    from tcore.lab import api, rerun_outlook
    from tcore.lab.run import runs

    calls = []
    real = runs.preflight

    def counted(where):
        return lambda exp: calls.append(where) or real(exp)

    for module in (runs, api, rerun_outlook):  # the pages check through the lab's API
        monkeypatch.setattr(module, "preflight", counted(module.__name__.rsplit(".", 1)[-1]))
    at = set_tiny_fast(app())
    at.selectbox(key="run_backend").set_value("eager").run()  # Dynamo alone: the quickest real run
    assert calls.count("api") >= 1 and "rerun_outlook" not in calls  # each draw: build's check, handed on
    calls.clear()
    at.button(key="run_start").click().run()  # the submit in the click's callback, then the page drawn
    assert not at.exception
    (run,) = registry.active()
    # the click queues in Run's callback, then the page is drawn once: never again in runs.start or the outlook
    assert calls == ["api"] and run.device == "cpu"
    at.button(key=f"run_cancel_{run.run_id}").click().run()
