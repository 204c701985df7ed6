"""The app, headless (Streamlit's AppTest): pages load, a tiny CPU run from the Run page, runs queued behind it,
invalid settings, Compare with stored runs, the Diagnose page over real runs, and a two-run sweep.

Real runs use captioner/tiny with backend=aot_eager or eager: aot_eager traces forward and backward like
Inductor does but skips code generation; eager is Dynamo alone. Either way a run takes seconds on the CPU.
"""
import json
import re
import time

import pytest
from streamlit.proto.Metric_pb2 import Metric
from streamlit.testing.v1 import AppTest

from tcore.lab import runs, sweeps, tlparse
from tcore.spec import Experiment
from tcore.store import RunStore
from tests.helpers import insert_run

PAGES = ["app_pages/run.py", "app_pages/diagnose.py", "app_pages/compare.py", "app_pages/sweep.py",
         "app_pages/system.py"]


@pytest.fixture
def db(tmp_path, monkeypatch):
    """The store every page opens (RunStore() reads $COMPILE_LAB_DB), empty for each test."""
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    yield RunStore()
    for run in runs.active():  # never leave a worker behind for the next test
        run.cancel()
        run.wait()


def app() -> AppTest:
    # The first run imports torch and the sample models: allow far more than AppTest's 3 s default.
    return AppTest.from_file("../app.py", default_timeout=60).run()


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def wait_for(at: AppTest, done, limit_s: float = 120) -> AppTest:
    """Rerun the script, as the page's fragment would, until done(at) or the time limit."""
    deadline = time.time() + limit_s
    while not done(at):
        assert time.time() < deadline, f"gave up after {limit_s} s; page says: {texts(at.markdown)[:500]}"
        assert not at.exception, at.exception
        time.sleep(1)
        at.run()
    return at


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


def set_tiny_fast(at: AppTest) -> AppTest:
    at.selectbox(key="run_builtin").set_value("captioner")
    at.selectbox(key="run_backend").set_value("aot_eager")
    at.number_input(key="run_batch_size").set_value(2)
    at.radio(key="run_timed_by").set_value("steps").run()
    at.number_input(key="run_timed_steps").set_value(4)
    at.number_input(key="run_rounds").set_value(2)
    return at.run()


def test_tiny_cpu_run_from_the_run_page(db):
    at = set_tiny_fast(app())
    assert "captioner/tiny bs2 fp32 inference, whole aot_eager" in texts(at.caption)
    at.button(key="run_start").click().run()
    assert not at.exception
    assert any(re.match(r"(Queued|Running): captioner/tiny bs2", s.value) for s in at.subheader)
    assert not at.button(key="run_start").disabled  # more runs can queue behind it

    # A refreshed tab keeps its address, so its owner: the run is still "yours" and can be cancelled there.
    me = at.session_state["owner"]
    assert me.startswith("guest-") and at.query_params["me"] == me
    refreshed = AppTest.from_file("../app.py", default_timeout=60)
    refreshed.query_params["me"] = me
    refreshed.run()
    assert "captioner/tiny bs2 fp32 inference, whole aot_eager · :gray[yours]" in texts(refreshed.markdown)
    # Someone else sees whose it is, and has no button to cancel it.
    other = app()
    assert f"captioner/tiny bs2 fp32 inference, whole aot_eager · :gray[guest {me[6:10]}]" in texts(other.markdown)
    assert not other.subheader
    assert not [b for b in other.button if b.key and b.key.startswith("run_queue_cancel_")]

    wait_for(at, lambda at: any(m.label == "Speedup" for m in at.metric))
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Speedup"].endswith(" x")
    assert metrics["Compile time"].endswith(" s")
    assert float(metrics["Eager samples/s"]) > 0
    assert "Compiled output matches eager" in texts(at.success)
    assert "Dynamo captured 1 graph with no graph breaks." in texts(at.markdown)
    assert "Compile cache: cold (fresh caches); FX graph cache 0 hits" in texts(at.caption)
    assert len(at.get("plotly_chart")) >= 6  # throughput, latency, memory, energy, compile phases, breakdown
    assert "Where the time goes" in texts(at.markdown)
    (record,) = db.list()
    assert record.status == "finished" and record.spec["backend"] == "aot_eager"


def test_cancel_from_the_run_page_shows_why_the_run_ended(db):
    at = set_tiny_fast(app())
    at.button(key="run_start").click().run()
    (run,) = runs.active()
    at.button(key=f"run_cancel_{run.run_id}").click().run()
    wait_for(at, lambda at: "**Cancelled**" in texts(at.error), limit_s=60)
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
    assert re.search(r"You have [23] identical runs of \*\*captioner/tiny bs2 fp32 inference, whole eager\*\*",
                     texts(at.warning))
    first, second, third = sorted(runs.active(), key=lambda r: r.queued_at)
    assert {r.owner for r in runs.active()} == {at.session_state["owner"]}  # submitted as this session
    assert third.status == "queued"
    # The page follows the newest run: waiting, with its place in the queue.
    assert any(s.value.startswith("Queued: captioner/tiny bs2") for s in at.subheader)
    assert re.search(r"#[123] in the queue · ", texts(at.markdown))
    board = texts(at.markdown)
    assert "in the queue**" in board and board.count(":gray[yours]") == 3
    assert [r.id for r in db.list()] == [third.run_id, second.run_id, first.run_id]

    at.button(key=f"run_queue_cancel_{third.run_id}").click().run()  # from the queue view
    assert not at.exception
    assert db.get(third.run_id).error_kind == "cancelled" and third.done

    deadline = time.time() + 120
    while not (first.done and second.done):
        assert time.time() < deadline, "the two queued runs did not finish within 120 s"
        time.sleep(0.5)
    a, b = db.get(first.run_id), db.get(second.run_id)
    assert a.status == b.status == "finished"
    assert b.started_at >= a.finished_at  # the second waited for the first: one run at a time on the cpu
    at.run()
    assert not at.exception
    mine = next(d.value for d in at.dataframe if "State" in d.value.columns)  # "Your runs in this session"
    assert mine["State"][0] == "failed: cancelled"
    assert all(state.startswith("finished") for state in mine["State"][1:])


@pytest.mark.parametrize("change, message", [
    ({"run_mode": "max-autotune"}, "mode 'max-autotune' applies only to the inductor backend"),
    ({"run_rounds": 9}, "timed_steps (4) must be at least rounds (9)"),
])
def test_invalid_settings_show_the_spec_error_and_start_nothing(db, change, message):
    at = set_tiny_fast(app())
    for key, value in change.items():
        (at.selectbox(key=key) if key == "run_mode" else at.number_input(key=key)).set_value(value)
    at.run()
    assert message in texts(at.error)
    assert at.button(key="run_start").disabled
    assert not runs.active() and not db.list()


def test_cuda_on_a_cpu_machine_is_refused_before_running(db):
    if runs.preflight(Experiment(model="captioner"))[0] == "cuda":
        pytest.skip("this machine has a GPU")
    at = app()
    at.radio(key="run_device").set_value("cuda").run()
    assert "device=cuda but this machine has no usable CUDA GPU" in texts(at.error)
    assert at.button(key="run_start").disabled


def stored_run(store: RunStore, exp: Experiment, **result) -> str:
    """A finished run with hand-made figures, as the worker would have recorded it."""
    run_id = insert_run(store, exp)
    batch = exp.batch_size
    figures = {"device": "cpu", "eager_steps_per_s": 10.0, "eager_samples_per_s": 10.0 * batch,
               "compiled_steps_per_s": 12.0, "compiled_samples_per_s": 12.0 * batch, "eager_energy_j_per_step": None,
               "compiled_energy_j_per_step": None, "unavailable": {"eager_energy_j_per_step": "no RAPL here"},
               **result}
    store.finish(run_id, result=figures, env={"torch": "2.13.0+cpu", "device": "cpu"})
    return run_id


def test_compare_shows_stored_runs_side_by_side_and_deletes(db, monkeypatch):
    tiny = Experiment(model="captioner", device="cpu", backend="aot_eager")
    whole = stored_run(db, tiny, speedup=1.2, compile_s=3.0, breakeven_steps=450.0)
    regional = stored_run(db, tiny.replace(compile="regional"), speedup=1.1, compile_s=1.0, breakeven_steps=300.0)
    failed = insert_run(db, tiny.replace(model="resnet50"))
    db.finish(failed, error={"kind": "compile_error", "message": "InductorError: boom", "log_tail": ["g++ failed"]})

    at = app().switch_page("app_pages/compare.py").run()
    assert not at.exception
    assert set(at.multiselect(key="compare_runs").value) == {whole, regional}  # finished runs only
    assert len(at.get("plotly_chart")) == 6  # compile, throughput, energy, scatter, cold vs warm, where the time goes
    assert "up and to the left is best" in texts(at.caption)
    assert {b.label for b in at.get("download_button")} == {
        "Download the chosen runs (CSV)", "Download every run (CSV)", "Download this comparison (HTML)",
        "Download as a .py file"}  # the last: the run in detail, as code (hand-made runs keep no trace)

    at.multiselect(key="compare_status").set_value(["failed"]).run()
    assert at.selectbox(key="compare_detail").value == failed
    assert "**Compile error**: InductorError: boom" in texts(at.error)  # a failed run shows its kind and cause

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


def unlock(at: AppTest, passcode: str) -> AppTest:
    at.switch_page("app_pages/system.py").run()
    at.text_input(key="instructor_attempt").set_value(passcode)
    next(b for b in at.button if b.label == "Unlock").click().run()
    return at


def test_a_run_past_the_labs_limits_is_refused_with_the_reason(db, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_MAX_MEMORY_GIB", "0.000001")
    at = set_tiny_fast(app())
    at.button(key="run_start").click().run()
    assert not at.exception
    assert "cannot be queued:** " in texts(at.error) and "max_memory_gib" in texts(at.error)
    assert not runs.active() and not db.list()


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
    """The box allowed 4096 under a limit of 1024, then ran a number no longer shown."""
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "4")
    at = app()
    box = at.number_input(key="run_batch_size")
    assert box.max == 4 and box.value == 4  # the CPU default of 8, brought down to the limit
    assert any("bs4 " in str(c.value) for c in at.caption if str(c.value).startswith("Will run"))
    monkeypatch.setenv("COMPILE_LAB_MAX_RUN_S", "300")
    at.run()
    assert at.number_input(key="run_timeout_min").max == 5 and at.number_input(key="run_timeout_min").value == 5


def test_cold_vs_warm_compile_times_on_compare_and_the_four_way(db):
    from ui.diagnose import base_experiment

    tiny = base_experiment("captioner", backend="inductor")  # what Diagnose's four-way queues
    stored_run(db, tiny, compile_s=20.0, fx_graph_cache_misses=1, cache_artifacts="none")
    stored_run(db, tiny.replace(compile="regional"), compile_s=8.0, cache_artifacts="none")
    warm = stored_run(db, tiny.replace(cache="artifacts"), compile_s=2.0, cache_artifacts="loaded",
                      fx_graph_cache_hits=1, fx_graph_cache_misses=0, aot_autograd_cache_hits=1)
    stored_run(db, tiny.replace(compile="regional", cache="artifacts"), compile_s=1.0, cache_artifacts="loaded")

    at = app().switch_page("app_pages/compare.py").run()
    assert not at.exception
    cold_warm = chart_titled(at, "Compile time: cold vs warm")
    assert [t["name"] for t in cold_warm["data"]] == ["cold", "artifacts loaded"]
    assert cold_warm["data"][1]["x"] == [1.0, 2.0]  # regional, then whole: newest settings first
    assert "FX graph cache: 1 hits, 0 misses" in cold_warm["data"][1]["hovertext"][1]
    at.selectbox(key="compare_detail").set_value(warm).run()  # one run in detail: its cache, beside its cold twin
    assert "Compile cache: warm: compile artifacts from an earlier run were loaded; FX graph cache 1 hits" \
        in texts(at.caption)
    assert [f["layout"]["title"]["text"] for f in map(figure, at.get("plotly_chart"))].count(
        "Compile time: cold vs warm") == 2

    at.switch_page("app_pages/diagnose.py").run()
    assert not at.exception
    cold, hot = chart_titled(at, "Compile time: whole model vs regional")["data"]
    assert cold["text"] == ["20.0 s", "8.0 s<br>2.5x faster"]
    assert hot["text"] == ["2.0 s<br>10.0x faster", "1.0 s<br>20.0x faster"]


def figure(chart) -> dict:
    """The plotly figure an AppTest plotly_chart element carries, as JSON."""
    return json.loads(chart.proto.spec)


def chart_titled(at: AppTest, start: str) -> dict:
    return next(f for f in map(figure, at.get("plotly_chart")) if f["layout"]["title"]["text"].startswith(start))


EAGER_TINY = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", warmup_steps=1, timed_steps=2,
                        rounds=1, backend="eager", cache="warm")


def test_diagnose_shows_breaks_with_their_source_and_the_compile_timeline(db):
    clean = runs.execute(EAGER_TINY, db, timeout_s=120)
    broken = runs.execute(EAGER_TINY.replace(graph_break=True), db, timeout_s=120)
    strict = runs.execute(EAGER_TINY.replace(graph_break=True, fullgraph=True), db, timeout_s=120)
    static = runs.execute(EAGER_TINY.replace(dynamic=False, shape_count=4, recompile_limit=2), db, timeout_s=120)
    assert [r.status for r in (clean, broken, static)] == ["finished"] * 3 and strict.error_kind == "compile_error"

    at = app().switch_page("app_pages/diagnose.py").run()
    assert not at.exception
    # Graph breaks: the stored pair side by side, each break with the user's line of code.
    assert at.selectbox(key="diag_with").value == broken.id and at.selectbox(key="diag_without").value == clean.id
    assert "Graph break at `captioner.py:74`: Unsupported Tensor.item() call" in texts(at.markdown)
    assert "if x.abs().mean().item() > 1e4:" in [c.value for c in at.code]
    assert "ran the **whole enclosing function eagerly**" in texts(at.warning)  # Dynamo skipped a frame
    pair = chart_titled(at, "What the break costs")
    graphs = pair["data"][4:6]  # the third panel: throughput, speedup, then graphs, a bar per run
    assert [t["name"] for t in graphs] == ["without the break", "with the break"]
    assert [t["y"][0] for t in graphs] == [1, broken.result["graph_count"]]
    at.toggle(key="diag_break_fullgraph").set_value(True).run()
    assert "sample_models/captioner.py:74" in texts(at.code)  # the fullgraph run's readable error

    # Recompilations: the static run's timeline, its recompiles and the limit.
    assert at.multiselect(key="diag_shape_runs").value == [static.id]
    timeline = chart_titled(at, "Every compilation")
    kinds = {t["name"]: t["marker"]["symbol"] for t in timeline["data"]}
    assert kinds == {"First compile of a frame": "circle", "Recompile (a guard failed)": "diamond",
                     "Recompile limit hit: eager from here": "x"}
    assert "size mismatch" in " ".join(timeline["data"][1]["hovertext"])
    assert chart_titled(at, "Step time over the shape schedule")["layout"]["yaxis"]["type"] == "log"
    assert "**The recompile limit was hit**" in texts(at.markdown)

    # One run, opened by id as the Compare page's link does.
    at.query_params["run"] = static.id
    at.run()
    assert not at.exception and at.selectbox(key="diag_run").value == static.id
    assert "None stored: only Inductor generates code, and this run used backend=eager." in texts(at.caption)
    # ... and its compile's tlparse report, rendered from the TORCH_TRACE the run kept, served by the app.
    try:
        [link] = [b.proto for b in at.get("link_button") if b.proto.label == "Open the tlparse report"]
        # the store's own shelf, and a query so tlparse's script logs no ReferenceError
        assert link.url == f"app/static/tlparse/{db.store_id}/{static.id}/index.html?run={static.id}"
        assert "recompile" in (tlparse.REPORTS / db.store_id / static.id / "index.html").read_text().lower()

        # The Compare page: one run in detail gives its settings as code, and the selection exports as HTML.
        at.switch_page("app_pages/compare.py").run()
        at.selectbox(key="compare_detail").set_value(broken.id).run()
        assert not at.exception
        [code] = [c.value for c in at.code if c.value.startswith("# Compile Lab run")]
        assert "entry.build('tiny', device=device, graph_break=True)" in code
        assert "compiled = torch.compile(model, backend='eager')  # <--" in code
        assert {b.proto.label for b in at.get("download_button")} >= {
            "Download this comparison (HTML)", "Report (.zip)", "TORCH_TRACE log (.gz)", "Download as a .py file"}
        # Every chart's camera button saves the chart under its own name, as PNG until the sidebar says SVG.
        configs = [json.loads(c.proto.config) for c in at.get("plotly_chart")]
        assert {c["toImageButtonOptions"]["format"] for c in configs} == {"png"}
        assert "compile-lab-compare_throughput" in {c["toImageButtonOptions"]["filename"] for c in configs}
        at.session_state["chart_format"] = "SVG"
        at.run()
        assert {json.loads(c.proto.config)["toImageButtonOptions"]["format"] for c in at.get("plotly_chart")} == {"svg"}
    finally:
        for run in (clean, broken, static):
            tlparse.forget(run.id)


def test_diagnose_queues_the_break_pair_for_this_session_and_cancels_it(db):
    at = app().switch_page("app_pages/diagnose.py").run()
    assert "No finished run with the deliberate break is stored yet" in texts(at.info)
    at.selectbox(key="diag_break_backend").set_value("eager").run()
    at.button(key="diag_break_start").click().run()
    assert not at.exception
    queued = sorted(runs.active(), key=lambda r: r.queued_at)
    assert [r.exp.graph_break for r in queued] == [False, True]
    assert {r.owner for r in queued} == {at.session_state["owner"]}
    assert "+break" in texts(at.markdown)  # the live line of each run
    for run in queued:
        at.button(key=f"diag_breaks_live_cancel_{run.run_id}").click().run()
        assert not at.exception
    for run in queued:
        assert run.wait(60).error_kind == "cancelled"


def test_sweep_crosses_settings_and_skips_invalid_ones():
    base = Experiment(model="captioner", device="cpu", backend="aot_eager")
    experiments, skipped = sweeps.cross(base, {"compile": ["off", "whole"], "mode": ["default", "max-autotune"]})
    assert [(e.compile, e.mode) for e in experiments] == [("off", "default"), ("whole", "default")]
    assert experiments[0].backend == "inductor"  # the eager baseline ignores the base's backend
    assert len(skipped) == 2 and all("max-autotune" in s for s in skipped)
    assert "compile settings (mode, dynamic, fullgraph, backend) need compile=whole or regional" in skipped[0]


def test_two_run_sweep_runs_one_at_a_time_and_its_page_names_the_best(db):
    base = Experiment(model="captioner", device="cpu", backend="aot_eager", batch_size=2, timed_steps=4, rounds=2,
                      warmup_steps=2)
    experiments, _ = sweeps.cross(base, {"compile": ["whole", "regional"]})
    sweep_id = sweeps.start(experiments, db)
    at = app().switch_page("app_pages/sweep.py").run()  # a fresh session finds the running sweep
    assert not at.exception
    assert any(s.value.startswith("Sweep running") for s in at.subheader)
    deadline = time.time() + 120
    while not sweeps.get(sweep_id, db).done:
        assert len([r for r in runs.active() if r.status == "running"]) <= 1  # never two runs at once
        assert time.time() < deadline, "the sweep did not finish within 120 s"
        time.sleep(0.5)
    sweep = sweeps.get(sweep_id, db)
    assert [r.status for r in sweep.runs] == ["finished", "finished"] and sweep.finished_count == 2

    at.run()
    assert not at.exception
    assert any(s.value == "Sweep finished: 2 of 2 runs finished" for s in at.subheader)
    # What every run shared, since the knobs beside it may have moved on (or reset, after a refresh).
    assert "fp32 inference, batch 2, backend aot_eager, 4 steps per variant in 2 rounds" in texts(at.caption)
    assert texts(at.success).startswith("Fastest: **")
    assert len(at.get("plotly_chart")) == 1  # the heatmap
    assert at.button(key="sweep_start").disabled is False


def test_cancelled_sweep_starts_no_further_runs(db):
    base = Experiment(model="captioner", device="cpu", backend="aot_eager", batch_size=2, timed_steps=4, rounds=2)
    sweep_id = sweeps.start(sweeps.cross(base, {"compile": ["whole", "regional"]})[0], db)
    while sweeps.get(sweep_id, db).runs[0].status == "queued":
        time.sleep(0.05)
    sweeps.cancel(sweep_id, db)
    deadline = time.time() + 60
    while not sweeps.get(sweep_id, db).done:
        assert time.time() < deadline, "the cancelled sweep did not stop within 60 s"
        time.sleep(0.2)
    sweep = sweeps.get(sweep_id, db)
    assert sweep.cancelled and [r.error_kind for r in sweep.runs] == ["cancelled", "cancelled"]
    assert sweep.runs[1].started_at is None  # the second never started
    assert "its sweep was cancelled" in sweep.runs[1].error["message"]

    # The page says what happened: cancelled, not failed, and no "None" in the cells of runs that never ran.
    at = app().switch_page("app_pages/sweep.py").run()
    at.session_state["sweep_id"] = sweep_id
    at.run()
    assert any(s.value == "Sweep cancelled: 0 of 2 runs finished, 2 cancelled" for s in at.subheader)
    table = at.dataframe[0].value
    assert list(table.status) == ["cancelled", "cancelled"] and "None" not in table.astype(str).to_string()


def test_a_sweep_with_nothing_to_cross_says_what_to_pick(db):
    at = app().switch_page("app_pages/sweep.py").run()
    at.multiselect(key="sweep_mode").set_value([]).run()
    assert "**Nothing to run.** Pick at least one value for: mode" in texts(at.warning)
    assert at.button(key="sweep_start").disabled


# What tcore.machine.facts() returned on an H200 (recorded), for the pages' GPU branches on a CPU machine.
H200 = {"name": "NVIDIA H200", "index": 0, "uuid": "GPU-5a1f0c3e-0000-4000-8000-00000000h200", "driver": "580.159.04", "memory_total_gib": 140.4, "memory_used_gib": 0.6,
        "power_limit_w": 700.0, "power_w": 79.9, "utilization_pct": 0.0}


def test_gpu_machine_pages(db, monkeypatch):
    from tcore import machine

    facts = {**machine.facts(), "device": "cuda", "cuda_available": True, "cuda": "13.0", "triton": "3.6.0",
             "gpus": [H200], "nvml_reason": None, "power_source": "nvml", "power_reason": None, "missing": []}
    monkeypatch.setattr(machine, "facts", lambda: facts)
    monkeypatch.setattr(machine, "gpus", lambda: ([H200], None))
    monkeypatch.setattr(machine, "cuda_available", lambda: True)
    from tcore import power
    from tcore.lab import scheduler

    monkeypatch.setattr(scheduler, "device_slots", lambda device: ("cuda:0",) if device == "cuda" else ("cpu",))
    monkeypatch.setattr(power, "nvml_index", lambda torch_index: torch_index)
    done = insert_run(db, Experiment(model="captioner", device="cpu"))
    db.finish(done, result={"device": "cuda"}, env={"device": "cuda", "gpu": "NVIDIA H200", "gpu_index": 0,
                                                    "gpu_uuid": H200["uuid"]})

    at = app()
    assert not any("runs use the **CPU**" in str(i.value) for i in at.info)  # no CPU banner with a GPU
    assert at.selectbox(key="run_preset").value == "small"  # the registry's GPU defaults
    assert at.number_input(key="run_batch_size").value == 32
    assert at.selectbox(key="run_precision").value == "bf16"  # inference as people run it: bf16 weights
    at.radio(key="run_task").set_value("training").run()
    assert at.selectbox(key="run_precision").value == "amp-bf16"  # training keeps float32 master weights
    at.radio(key="run_task").set_value("inference").run()
    at.selectbox(key="run_builtin").set_value("resnet50").run()
    assert at.toggle(key="run_channels_last").value  # eager as people tune a CNN
    assert "resnet50/full bs64 bf16 inference, whole default" in texts(at.caption)

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
    assert "By throughput compiled is 10.01x eager, by its median step 1.39x" in texts(at.info)

    at.selectbox(key="compare_detail").set_value(steady).run()
    speedup = next(m for m in at.metric if m.label == "Speedup")
    assert speedup.proto.color == Metric.MetricColor.GRAY and "Noisy" not in texts(at.warning)


def test_a_suggestion_queues_its_counterpart_and_shows_the_two_side_by_side(db):
    """A stored run with a deliberate graph break suggests running without it; one click queues that run
    (a real aot_eager run on the CPU), and once it finishes the Run page draws the two side by side."""
    exp = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", backend="aot_eager",
                     graph_break=True, timed_steps=4, rounds=2, warmup_steps=1)
    bd = {"step_ms": 10.0, "steps": 3, "source": "cpu ops", "overlap_ms": 0.0, "top": [],
          "ms": {"matmul": 4.0, "pointwise": 3.0, "idle": 3.0}}
    origin = stored_run(db, exp, speedup=0.9, compile_s=2.0, breakeven_steps=None, variants=["eager", "compiled"],
                        graph_break_count=2, graph_breaks=[{"reason": "Unsupported Tensor.item() call", "count": 2,
                                                            "file": "/m.py", "line": 7, "source": "x.item()"}],
                        eager_profiled_step_ms=10.0, compiled_profiled_step_ms=10.0, eager_latency_ms_p50=9.5,
                        breakdown={"eager": bd, "compiled": bd})
    at = app().switch_page("app_pages/compare.py").run()
    at.selectbox(key="compare_detail").set_value(origin).run()
    assert not at.exception
    assert "Where the time goes" in texts(at.markdown) and "What to try next" in texts(at.markdown)
    assert "Eager: 3 profiled steps of 10.00 ms on average against 9.50 ms timed (+5%)." in texts(at.caption)
    assert "at /m.py:7 (`x.item()`)" in texts(at.markdown)
    queue_it = next(b for b in at.button if b.label == "Queue it" and "graph_break=False" in (b.help or ""))
    queue_it.click().run()
    assert not at.exception
    wait_for(at, lambda at: "Side by side with the run that suggested it" in texts(at.markdown))
    assert "graph_break: True → False" in texts(at.markdown)
    counterpart = next(r for r in db.list() if r.id != origin)
    assert counterpart.status == "finished" and counterpart.spec["graph_break"] is False
    assert counterpart.result["breakdown"]["eager"]["source"] == "cpu ops"


def test_two_runs_code_side_by_side_with_the_kernel_change(db):
    """Diagnose › Two runs' code: pick two runs of one model; their programs, a diff, and the kernels by kind."""
    from tests.test_ecosystem import FUSED_CODE, TRITON_CODE

    tiny = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu")
    ids = []
    for exp, code in ((tiny, TRITON_CODE), (tiny.replace(mode="max-autotune-no-cudagraphs"), FUSED_CODE)):
        ids.append(insert_run(db, exp))
        db.finish(ids[-1], result={"device": "cpu", "variants": ["eager", "compiled"], "compiled_kernels_per_step": 7},
                  env={"device": "cpu"}, code=[code])
    at = app().switch_page("app_pages/diagnose.py").run()
    assert not at.exception
    at.selectbox(key="codes_a").set_value(ids[0]).run()
    at.selectbox(key="codes_b").set_value(ids[1]).run()
    assert [m.value for m in at.metric][-3:] == ["3", "1", "7 → 7"]
    assert "Generated kernels 3 → 1 (-2): pointwise 1 → 0, reduction 1 → 0; library calls 2 → 1." in texts(at.caption)
    at.segmented_control(key="codes_view").set_value("Diff").run()
    diff = next(c.value for c in at.code if c.value.startswith("--- A"))
    assert "-triton_poi_fused_add_0 = async_compile.triton(" in diff
    assert "+triton_per_fused_add_softmax_0 = async_compile.triton(" in diff
