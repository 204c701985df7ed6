"""Lazy chart tabs (headless, AppTest): a result, the Compare page and the Diagnose page draw only the open tab's
charts, every chart is still one tab away, and a section's choices survive closing its tab."""
from tcore.experiment.spec import Experiment
from tests.app_harness import app, db, figure, stored_run, texts  # noqa: F401
from tests.helpers import gpu_like_result, insert_run, power_trace, recorded_run

TINY = Experiment(model="resnet50", preset="tiny", device="cpu", backend="inductor", batch_size=2)


def a_recorded_run(store) -> str:
    """A real run's record (compiled, with its profile), plus a power trace, as the worker would have stored it."""
    rec = recorded_run()
    run_id = insert_run(store, TINY)
    store.finish(run_id, result=gpu_like_result(samples_per_s=300.0, speedup=1.6, compile_s=20.0, batch=2),
                 env=rec["env"], power_samples=power_trace(seconds=4.0))
    return run_id


BREAKDOWN = "Where the time of a step goes"  # the chart under "Where the time goes", above the tabs


def titles(at) -> list[str]:
    return [figure(c)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def detail(at, run_id: str):
    """The Compare page with no runs compared, showing one run in detail: only that run's panel draws charts."""
    at.switch_page("app_pages/compare.py").run()
    at.multiselect(key="compare_runs").set_value([]).run()
    at.selectbox(key="compare_detail").set_value(run_id).run()
    assert not at.exception
    return at


def test_a_result_draws_only_the_speed_tab_until_another_is_opened(db):
    run_id = a_recorded_run(db)
    at = detail(app(), run_id)
    assert [t.label for t in at.tabs][:4] == ["Speed", "Memory and energy", "Compile phases", "Power over the run"]
    # The default view: "Where the time goes" and the Speed tab's two charts; no hidden tab's chart is built.
    assert titles(at) == [BREAKDOWN, "Throughput (samples/s)", "Step latency (ms)"]
    assert "Where the time goes" in texts(at.markdown)
    assert "Peak memory:" not in texts(at.caption)  # the memory tab's caption goes with its charts
    for label, charts in (("Memory and energy", ["Peak memory (GiB)", "Power and energy per step"]),
                          ("Compile phases", ["Compile time by phase: 20.0 s in all"]),
                          ("Power over the run", ["Power over the run, by phase"])):
        at.session_state["compare_detail_run_charts"] = label
        at.run()
        assert not at.exception
        assert titles(at) == [BREAKDOWN] + charts, label
        assert ("Peak memory:" in texts(at.caption)) == (label == "Memory and energy")
    at.switch_page("app_pages/system.py").run()  # away and back: the page opens on Speed again
    detail(at, run_id)
    assert titles(at) == [BREAKDOWN, "Throughput (samples/s)", "Step latency (ms)"]


def test_a_result_without_compile_or_power_has_no_tab_for_them_and_says_why(db):
    run_id = stored_run(db, TINY.replace(backend="eager"), speedup=1.2, compile_s=3.0)
    at = detail(app(), run_id)
    assert [t.label for t in at.tabs] == ["Speed", "Memory and energy"]
    assert "No power trace for this run: no power samples were recorded." in texts(at.caption)


def test_the_all_figures_and_environment_expanders_build_their_tables_only_when_open(db):
    run_id = a_recorded_run(db)
    at = detail(app(), run_id)
    assert not [d for d in at.dataframe if "figure" in d.value.columns and "eager" in d.value.columns]
    at.session_state["compare_detail_run_figures_open"] = True
    at.session_state["compare_detail_run_env_open"] = True
    at.run()
    assert not at.exception
    columns = [list(d.value.columns) for d in at.dataframe]
    assert ["figure", "eager", "compiled"] in columns and ["what", "value"] in columns


def test_compare_draws_its_first_tab_and_exports_all_six_charts(db):
    tiny = Experiment(model="captioner", device="cpu", backend="aot_eager")
    stored_run(db, tiny, speedup=1.2, compile_s=3.0, breakeven_steps=450.0)
    stored_run(db, tiny.replace(compile="regional"), speedup=1.1, compile_s=1.0, breakeven_steps=300.0)
    failed = insert_run(db, tiny.replace(model="resnet50"))
    db.finish(failed, error={"kind": "compile_error", "message": "InductorError: boom"})  # in detail: no charts
    at = app().switch_page("app_pages/compare.py").run()
    assert at.selectbox(key="compare_detail").value != failed  # the detail opens on a chosen, finished run
    at.selectbox(key="compare_detail").set_value(failed).run()  # a person may pick another: no charts of its own
    assert at.selectbox(key="compare_detail").value == failed
    assert [t.label for t in at.tabs] == ["Compile time and throughput", "Energy and trade-off", "Where the time goes",
                                          "Cold vs warm start"]
    assert titles(at) == ["Compile time (s)", "Throughput (samples/s)"]
    assert "up and to the left is best" not in texts(at.caption)
    seen = titles(at)
    for label, count, words in (("Energy and trade-off", 2, "up and to the left is best"),
                                ("Where the time goes", 1, None), ("Cold vs warm start", 1, "cold vs warm groups")):
        at.session_state["compare_charts"] = label
        at.run()
        assert not at.exception and len(titles(at)) == count, (label, titles(at))
        assert words is None or words in texts(at.caption)
        seen += titles(at)
    assert len(set(seen)) == 6  # none lost (the HTML export's six: tests/test_browser_takeaway.py opens it)


def test_diagnose_runs_only_the_open_section_and_a_closed_one_keeps_its_choices(db):
    at = app().switch_page("app_pages/diagnose.py").run()
    assert not at.exception
    assert at.session_state["diagnose_tab"] == "Graph breaks"
    assert "diag_break_backend" in [s.key for s in at.selectbox]
    assert not [n for n in at.number_input if n.key == "diag_shape_count"]  # Recompilations has not run
    at.session_state["diagnose_tab"] = "Recompilations"
    at.run()
    assert "diag_break_backend" not in [s.key for s in at.selectbox]
    at.number_input(key="diag_shape_count").set_value(12)
    at.radio(key="diag_shape_order").set_value(at.radio(key="diag_shape_order").options[-1]).run()
    order = at.radio(key="diag_shape_order").value
    for tab in ("Cold vs loaded artifacts", "Start-up and stances", "Graph breaks", "Recompilations"):
        at.session_state["diagnose_tab"] = tab
        at.run()
        assert not at.exception
    assert at.number_input(key="diag_shape_count").value == 12 and at.radio(key="diag_shape_order").value == order


def test_recompilations_draws_one_strategys_timeline_at_a_time(db, tmp_path):
    from tests.test_browser import store_schedule_run

    static = store_schedule_run(db.path)
    result = db.get(static).result
    dynamic = insert_run(db, Experiment(model="captioner", device="cpu", backend="eager", dynamic=True, shape_count=6,
                                        recompile_limit=4))
    db.finish(dynamic, result=result, env={"device": "cpu"})
    at = app().switch_page("app_pages/diagnose.py").run()
    at.session_state["diagnose_tab"] = "Recompilations"
    at.run()
    assert not at.exception
    strategies = [t.label for t in at.tabs if t.label.endswith((static[-6:], dynamic[-6:]))]
    assert len(strategies) == 2
    drawn = {}
    for label in strategies:
        at.session_state["diag_shape_tab"] = label
        at.run()
        assert not at.exception
        drawn[label] = [c.proto.id for c in at.get("plotly_chart")]
        assert titles(at)[0] == "The strategies side by side" and len(titles(at)) == 3, titles(at)  # + this run's two
    first, second = drawn.values()
    assert first[0] == second[0] and not set(first[1:]) & set(second[1:])  # each tab its own run's charts


def test_each_session_has_the_browser_load_the_chart_component_once(db):
    """ui.panels.exports.warm_charts: the first script run puts one import of Streamlit's Plotly and table components in
    the sidebar (run when the browser is idle); the session's later runs send nothing more."""
    at = app()  # its first run
    first = [h.proto.body for h in at.sidebar.get("html") if "PlotlyChart." in h.proto.body]
    assert len(first) == 1 and "requestIdleCallback" in first[0] and "import('./static/js/PlotlyChart." in first[0]
    assert "import('./static/js/DataFrame." in first[0]  # the data grid's, for the first table
    at.run()
    assert not [h for h in at.sidebar.get("html") if "PlotlyChart." in h.proto.body]
