"""The Diagnose page headless (AppTest) over real tiny runs: graph breaks with their source and the compile timeline,
the break pair queued and cancelled, cold against warm, a suggestion's counterpart and two runs' code side by side."""
import json
import re
import time
from pathlib import Path

from tcore.experiment.spec import Experiment
from tcore.lab.outputs import tlparse
from tcore.lab.run import registry, runs
from tests.app_harness import (  # noqa: F401
    EAGER_TINY,
    app,
    chart_titled,
    db,
    figure,
    stored_run,
    texts,
    wait_for,
)
from tests.helpers import HANG_S, insert_run, wait_until
from ui.words.store_words import plain

# The captioner's first deliberate graph break (EncoderBlock's `.item()`), found in its source: the line a break
# is listed at, whatever else the file gains above it.
BREAK_LINE = next(i for i, text in enumerate(
    (Path(__file__).resolve().parents[1] / "sample_models" / "captioner.py").read_text().splitlines(), 1)
    if ".item() > 1e4" in text)


def test_cold_vs_warm_compile_times_on_compare_and_the_four_way(db):
    from ui.panels.diagnose_sections import base_experiment

    tiny = base_experiment("captioner", backend="inductor")  # what Diagnose's four-way queues
    stored_run(db, tiny, compile_s=20.0, fx_graph_cache_misses=1, cache_artifacts="none")
    stored_run(db, tiny.replace(compile="regional"), compile_s=8.0, cache_artifacts="none")
    warm = stored_run(db, tiny.replace(cache="artifacts"), compile_s=2.0, cache_artifacts="loaded",
                      fx_graph_cache_hits=1, fx_graph_cache_misses=0, aot_autograd_cache_hits=1)
    stored_run(db, tiny.replace(compile="regional", cache="artifacts"), compile_s=1.0, cache_artifacts="loaded")

    at = app().switch_page("app_pages/compare.py").run()
    at.session_state["compare_charts"] = "Cold vs warm start"  # a lazy tab: drawn once opened
    at.run()
    assert not at.exception
    cold_warm = chart_titled(at, "Compile time: cold vs warm")
    assert [t["name"] for t in cold_warm["data"]] == ["cold", "artifacts loaded"]
    assert cold_warm["data"][1]["x"] == [1.0, 2.0]  # regional, then whole: newest settings first
    assert "FX graph cache: 1 hits, 0 misses" in cold_warm["data"][1]["hovertext"][1]
    at.selectbox(key="compare_detail").set_value(warm).run()  # one run in detail: its cache, beside its cold twin
    assert ("Compile cache: artifacts loaded: the compile artifacts an earlier run saved (the Mega-Cache); FX graph "
            "cache 1 hits") in texts(at.caption)
    assert [f["layout"]["title"]["text"] for f in map(figure, at.get("plotly_chart"))].count(
        "Compile time: cold vs warm") == 2

    at.switch_page("app_pages/diagnose.py").run()
    at.session_state["diagnose_tab"] = "Cold vs loaded artifacts"  # "warm" is the Run page's local cache
    at.run()
    assert not at.exception
    four_way = chart_titled(at, "Compile time: whole model vs regional, cold vs artifacts loaded")
    cold, hot = four_way["data"]
    assert [cold["name"], hot["name"]] == ["Cold: fresh caches", "Artifacts loaded (Mega-Cache)"]
    assert cold["text"] == ["20.0 s", "8.0 s<br>2.5x faster"]
    assert hot["text"] == ["2.0 s<br>10.0x faster", "1.0 s<br>20.0x faster"]


def test_diagnose_shows_breaks_with_their_source_and_the_compile_timeline(db):
    clean = runs.execute(EAGER_TINY, db)
    broken = runs.execute(EAGER_TINY.replace(graph_break=True), db)
    strict = runs.execute(EAGER_TINY.replace(graph_break=True, fullgraph=True), db)
    static = runs.execute(EAGER_TINY.replace(dynamic=False, shape_count=4, recompile_limit=2), db)
    assert [r.status for r in (clean, broken, static)] == ["finished"] * 3 and strict.error_kind == "compile_error"

    at = app().switch_page("app_pages/diagnose.py").run()
    assert not at.exception
    # Graph breaks: the stored pair side by side, each break with the user's line of code.
    assert at.selectbox(key="diag_with").value == broken.id and at.selectbox(key="diag_without").value == clean.id
    line = BREAK_LINE
    assert f"Graph break at `captioner.py:{line}`: Unsupported Tensor.item() call" in texts(at.markdown)
    assert "if x.abs().mean().item() > 1e4:" in [c.value for c in at.code]
    assert "ran the **whole enclosing function eagerly**" in texts(at.warning)  # Dynamo skipped a frame
    assert re.search(r"torch's registry: \*\*\[GB\d{4}\]\(https://meta-pytorch.github.io/compile-graph-break-site/gb/"
                     r"gb\d{4}\.html\)\*\*, Unsupported Tensor.item\(\) call", texts(at.markdown))  # torch's own words
    pair = chart_titled(at, "What the break costs")
    graphs = pair["data"][4:6]  # the third panel: throughput, speedup, then graphs, a bar per run
    assert [t["name"] for t in graphs] == ["without the break", "with the break"]
    assert [t["y"][0] for t in graphs] == [1, broken.result["graph_count"]]
    at.toggle(key="diag_break_fullgraph").set_value(True).run()
    assert f"sample_models/captioner.py:{line}" in texts(at.code)  # the fullgraph run's readable error

    # Recompilations: the static run's timeline, its recompiles and the limit.
    at.session_state["diagnose_tab"] = "Recompilations"
    at.run()
    assert not at.exception
    assert at.multiselect(key="diag_shape_runs").value == [static.id]
    timeline = chart_titled(at, "Every compilation")
    kinds = {t["name"]: t["marker"]["symbol"] for t in timeline["data"]}
    assert kinds == {"First compile of a frame": "circle", "Recompile (a guard failed)": "diamond",
                     "Recompile limit hit: eager from here": "x"}
    assert "size mismatch" in " ".join(timeline["data"][1]["hovertext"])
    assert chart_titled(at, "Step time over the shape schedule")["layout"]["yaxis"]["type"] == "log"
    assert "**The recompile limit was hit**" in texts(at.markdown)
    assert "would have **stopped at its first recompilation**" in texts(at.markdown)  # with the guard that failed

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
    assert ("No finished run of Toy image captioner (whole, backend inductor) with the deliberate break is stored yet"
            in texts(at.info))
    at.selectbox(key="diag_break_backend").set_value("eager").run()
    at.button(key="diag_break_start").click().run()
    assert not at.exception
    queued = sorted(registry.active(), key=lambda r: r.queued_at)
    assert [r.exp.graph_break for r in queued] == [False, True]
    assert {r.owner for r in queued} == {at.session_state["owner"]}
    assert "+break" in texts(at.markdown)  # the live line of each run
    for run in queued:
        at.button(key=f"diag_breaks_live_cancel_{run.run_id}").click().run()
        assert not at.exception
    for run in queued:
        assert run.wait(HANG_S).error_kind == "cancelled"


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
    assert "**Your runs**" in texts(at.markdown)  # the click's page switch: the Run page follows the counterpart
    # A browser stays on the Run page the app switched to; AppTest's next run() would go back to the page it was
    # told to open (Compare), so it is told the Run page too.
    at.switch_page("app_pages/run.py")
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
    at.session_state["diagnose_tab"] = "Two runs' code side by side"  # a lazy tab: its section runs once opened
    at.run()
    assert not at.exception
    at.selectbox(key="codes_a").set_value(ids[0]).run()
    at.selectbox(key="codes_b").set_value(ids[1]).run()
    assert [m.value for m in at.metric][-3:] == ["3", "1", "7 → 7"]
    assert "Generated kernels 3 → 1 (-2): pointwise 1 → 0, reduction 1 → 0; library calls 2 → 1." in texts(at.caption)
    at.segmented_control(key="codes_view").set_value("Diff").run()
    diff = next(c.value for c in at.code if c.value.startswith("--- A"))
    assert "-triton_poi_fused_add_0 = async_compile.triton(" in diff
    assert "+triton_per_fused_add_softmax_0 = async_compile.triton(" in diff


def _press_recompilations(db, monkeypatch):
    """Recompilations' Start pressed with at most 3 runs waiting per person and the queue paused (none starts): the
    page, the person's id, and their waiting runs."""
    monkeypatch.setenv("COMPILE_LAB_MAX_QUEUED_PER_SESSION", "3")
    runs.pause(db, True)
    at = app().switch_page("app_pages/diagnose.py").run()
    at.session_state["diagnose_tab"] = "Recompilations"
    at.run()
    at.button(key="diag_shape_start").click().run()
    me = at.session_state["owner"]
    return at, me, lambda: [r for r in db.list() if r.owner == me and r.status == "queued"]


def test_the_strategies_go_in_with_one_press_however_few_runs_a_person_may_have_waiting(db, monkeypatch):
    """Five strategies against a bound of three waiting runs: three are queued at once, the other two as places free
    up (here: as two of them are cancelled, the queue paused so that none starts), with no refusal."""
    at, me, waiting = _press_recompilations(db, monkeypatch)
    assert not at.exception and not at.error
    assert len(waiting()) == 3
    assert ("**2 more runs to queue**: this lab lets one person have 3 runs waiting at once, so they go in, in "
            "order, as yours start, whether or not this page is open.") in texts(at.markdown)
    for left in (1, 0):
        assert runs.cancel(waiting()[0].id, db, owner=me)  # a place frees up, as a run's start would free it
        at.run()
        assert not at.exception and not at.error
        assert len(waiting()) == 3
        assert ("more run" in texts(at.markdown)) == bool(left)
    strategies = [json.dumps(r.spec["shape_remedy"]) + str(r.spec["dynamic"]) for r in db.list() if r.owner == me]
    assert len(strategies) == len(set(strategies)) == 5  # each strategy once, none twice
    runs.pause(db, False)


def test_the_held_strategies_can_be_let_go_and_none_of_them_goes_in_after(db, monkeypatch):
    """One press queued five runs, three at once and two held: the person could cancel the three, but each cancel freed
    a place that a held run took; nothing let the held ones go."""
    at, me, waiting = _press_recompilations(db, monkeypatch)
    assert len(waiting()) == 3
    at.button(key="diag_shapes_live_let_go").click().run()
    assert not at.exception and "more run" not in texts(at.markdown)
    assert not at.toast  # a toast from a fragment's callback is refused, with a warning in the server's log
    said = "2 held runs will not be queued; those queued stay, each with its Cancel."
    assert (texts(at.info) + texts(at.warning)).count(said) == 1  # once (the live panel's redraws: the browser test)
    at.run()  # the page run whole again, as a person's next click runs it: said no more
    assert said not in texts(at.info) + texts(at.warning)
    for run in waiting():
        assert runs.cancel(run.id, db, owner=me)
    at.run()
    assert not at.exception and waiting() == []
    assert len([r for r in db.list() if r.owner == me]) == 3  # the two held were never queued
    runs.pause(db, False)


def test_held_strategies_go_in_as_places_free_while_the_page_is_elsewhere(db, monkeypatch):
    """The walk's fifth strategy went in 564 s after the press, the queue empty for two minutes meanwhile: the held
    runs were fed only while the Recompilations tab drew. The lab feeds them now, with the person on another page."""
    at, me, waiting = _press_recompilations(db, monkeypatch)
    assert len(waiting()) == 3
    at.switch_page("app_pages/compare.py").run()  # the person reads another page; nothing of Diagnose draws
    for run in waiting()[:2]:
        assert runs.cancel(run.id, db, owner=me)  # two places free, as two starts would free them
    wait_until(lambda: len(waiting()) == 3, HANG_S, "the held strategies to go in with the page elsewhere")
    assert len({json.dumps(r.spec["shape_remedy"]) + str(r.spec["dynamic"]) for r in db.list() if r.owner == me}) == 5
    at.switch_page("app_pages/diagnose.py")  # back: the page follows the runs the lab queued meanwhile
    at.session_state["diagnose_tab"] = "Recompilations"
    at.run()
    assert not at.exception and "more run" not in texts(at.markdown)
    assert {r.id for r in waiting()} <= set(at.session_state["diag_shapes"])
    runs.pause(db, False)


def test_the_start_up_tab_counts_running_and_waiting_runs_apart(db):
    from tcore.lab.queue import scheduler
    from tests.helpers import QUICK, hold_cpu_slot

    held = hold_cpu_slot(db, worker_started=True)
    runs.pause(db, True)  # nothing else starts: one run holds the slot, three wait
    for _ in range(3):
        db.queue.enqueue(QUICK, device="cpu", owner="ada", proc=scheduler.this_process(), timeout_s=None)
    at = app().switch_page("app_pages/diagnose.py").run()
    at.session_state["diagnose_tab"] = "Start-up and stances"
    at.run()
    assert not at.exception
    assert "On this machine's queue: 1 running, 3 waiting." in texts(at.warning)
    assert "4 run(s)" not in texts(at.warning)
    db.finish(held, error={"type": "error", "kind": "cancelled", "message": "cancelled"})
    for run in db.list():
        if run.status == "queued":
            db.queue.cancel_queued(run.id)
    runs.pause(db, False)


def test_the_break_pair_reuses_a_stored_run_without_the_break_and_says_so(db):
    from ui.panels.diagnose_sections import base_experiment

    base = base_experiment("captioner", compile="whole", backend="eager")  # what the section queues for these knobs
    for i in range(3):  # three identical runs stored; the newest is reused
        newest = stored_run(db, base, speedup=1.0 + i / 100, speedup_low=0.9, speedup_high=1.2)
        time.sleep(0.01)
    runs.pause(db, True)  # what is queued stays queued
    at = app().switch_page("app_pages/diagnose.py").run()
    at.selectbox(key="diag_break_backend").set_value("eager").run()
    at.button(key="diag_break_start").click().run()
    assert not at.exception
    queued = [r for r in db.list() if r.status == "queued"]
    assert [r.spec["graph_break"] for r in queued] == [True]  # only the run with the break
    assert (f"The run without the break is run {newest[-6:]} ({plain(base.label)}, 1.02x (0.90–1.20)), stored earlier "
            "with these settings on this machine: reused") in texts(at.info)

    at.toggle(key="diag_break_reuse").set_value(False).run()  # measured again on request
    at.button(key="diag_break_start").click().run()
    assert sorted(r.spec["graph_break"] for r in db.list() if r.status == "queued") == [False, True, True]
    for rec in db.list():
        if rec.status == "queued":
            runs.cancel(rec.id, db)
    runs.pause(db, False)


def test_recompilations_crown_no_strategy_that_compiled_nothing_nor_one_without_an_interval(db):
    """Four aot_eager strategy runs of 1-2 rounds (no interval) read apart by the machine's drift alone: eager kernels
    against eager, so the page names no fastest strategy, as Compare and the Sweep do not."""
    from ui.panels.diagnose_sections import base_experiment
    from ui.words.diagnose_queries import STRATEGIES

    base = base_experiment("captioner", backend="aot_eager", shape_count=4)
    for (name, (_, changes, _)), speedup in zip(STRATEGIES.items(), (1.21, 0.95, 1.05, 1.73)):
        if name != "buckets":
            stored_run(db, base.replace(**changes), speedup=speedup, paired_rounds=2, compile_s=1.0,
                       schedule_sizes=[8, 16, 24, 32], compile_events=[{"kind": "compile", "duration_s": 0.5}])
    at = app().switch_page("app_pages/diagnose.py").run()
    at.session_state["diagnose_tab"] = "Recompilations"
    at.run()
    assert not at.exception
    said = texts(at.markdown)
    assert "Fastest strategy" not in said
    assert "None of these strategies compiled code (backend aot_eager" in said


def test_the_break_pair_is_of_the_setting_picked_and_the_model_stays_picked_across_pages(db):
    """Graph breaks paired "without the break" of a ResNet (reduce-overhead, Inductor) with "with the break" of the
    captioner (aot_eager) and read a cost from them, also for a model with no run stored; and the model went back to
    the captioner after a page switch. Only runs of the model, scope and backend picked are listed, a pair is one
    setting, and the choices are kept."""
    from ui.panels.diagnose_sections import base_experiment

    captioner = base_experiment("captioner", compile="whole", backend="aot_eager")
    stored_run(db, base_experiment("resnet50", compile="whole", backend="inductor", mode="reduce-overhead"),
               speedup=1.5, graph_count=1, compile_s=90.0)
    time.sleep(0.01)
    broken = stored_run(db, captioner.replace(graph_break=True), speedup=1.1, graph_count=2, compile_s=8.0,
                        graph_breaks=[])
    at = app().switch_page("app_pages/diagnose.py").run()
    assert not at.exception
    # starts at the stored break run's setting; nothing without the break of it is stored: no pair, no cost
    assert (at.selectbox(key="diag_break_model").value, at.selectbox(key="diag_break_backend").value) == (
        "captioner", "aot_eager")
    assert at.selectbox(key="diag_with").value == broken
    assert not [s for s in at.selectbox if s.key == "diag_without"]
    assert f"No finished run without the break is stored with the settings of run {broken[-6:]}" in texts(at.info)
    assert "Compiling took" not in texts(at.markdown)

    at.selectbox(key="diag_break_model").set_value("flux").run()  # no run of it at all
    assert "No finished run of Flux" in texts(at.info) and "with the deliberate break is stored yet" in texts(at.info)
    assert not [s for s in at.selectbox if s.key in ("diag_with", "diag_without")]
    assert "Compiling took" not in texts(at.markdown)

    clean = stored_run(db, captioner, speedup=1.3, graph_count=1, compile_s=7.0)
    at.selectbox(key="diag_break_model").set_value("captioner").run()
    assert (at.selectbox(key="diag_without").value, at.selectbox(key="diag_with").value) == (clean, broken)
    assert "Compiling took 8.0 s instead of 7.0 s." in texts(at.markdown)

    for page in ("run", "compare"):
        at.switch_page(f"app_pages/{page}.py").run()
        at.switch_page("app_pages/diagnose.py").run()
        assert not at.exception
        assert (at.selectbox(key="diag_break_model").value, at.selectbox(key="diag_break_backend").value) == (
            "captioner", "aot_eager"), page


def test_the_open_tab_is_still_open_after_a_visit_to_another_page(db):
    """Diagnose always came back on Graph breaks after a page switch, though each tab keeps its choices."""
    at = app().switch_page("app_pages/diagnose.py").run()
    assert [b.key for b in at.button if b.key == "diag_break_start"]
    at.session_state["diagnose_tab"] = "Recompilations"
    at.run()
    at.number_input(key="diag_shape_count").set_value(5).run()
    for page in ("run", "compare"):
        at.switch_page(f"app_pages/{page}.py").run()
        at.switch_page("app_pages/diagnose.py").run()
        assert not at.exception
        shown = {b.key for b in at.button}
        assert "diag_shape_start" in shown and "diag_break_start" not in shown, page
        assert at.number_input(key="diag_shape_count").value == 5, page  # and its choices with it
