"""The Compare page headless (AppTest) over stored runs: what its verdict crowns, what it calls reruns, which runs it
leaves out of a ranking; cancelled runs said as cancelled; the run pickers' search."""
import time

from tcore.experiment.spec import Experiment
from tests.app_harness import app, db, stored_run, texts  # noqa: F401
from tests.helpers import insert_run
from ui.words.store_words import plain


def interval(speedup, low, high):
    return {"speedup": speedup, "speedup_low": low, "speedup_high": high, "paired_rounds": 12,
            "speedup_pm_pct": 100 * max(high / speedup - 1, 1 - low / speedup)}


def test_the_default_selection_crowns_no_run_that_compiled_nothing_and_ranks_one_task(db):
    tiny = Experiment(model="captioner", device="cpu")
    made = {}
    for name, exp, figures in (("generate", tiny.replace(task="generate"), interval(2.0, 1.9, 2.1)),
                               ("inductor", tiny, interval(1.3, 1.25, 1.35)),
                               ("regional", tiny.replace(compile="regional"), interval(1.1, 1.05, 1.15)),
                               ("eager rerun", tiny.replace(backend="eager"), interval(0.13, 0.11, 0.16)),
                               ("eager", tiny.replace(backend="eager"), interval(4.15, 3.9, 4.4))):
        made[name] = stored_run(db, exp, compile_s=1.0, **figures)
        time.sleep(0.01)  # the newest first
    at = app().switch_page("app_pages/compare.py").run()
    assert not at.exception
    assert len(at.multiselect(key="compare_runs").value) == 4  # the newest four: the generate run is not among them
    at.multiselect(key="compare_runs").set_value(list(made.values())).run()
    said = texts(at.markdown)
    shown = plain(tiny.label)  # anyone's words, escaped for the page's Markdown
    assert f"Fastest run: **{shown} · {made['inductor'][-6:]}**, 1.30x (1.25–1.35) eager." in said
    assert "whole eager · " + made["eager"][-6:] + "** (backend eager, 4.15x" in said  # not ranked, and why
    assert "are reruns of one setting: their headlines read 0.13–4.15x" in said
    assert "Left out of the ranking, as another task times other work" in said and made["generate"][-6:] in said


def test_a_cancelled_run_reads_cancelled_in_the_table_the_filter_and_the_csv(db):
    tiny = Experiment(model="captioner", device="cpu")
    stored_run(db, tiny, speedup=1.2, compile_s=1.0)
    cancelled = insert_run(db, tiny.replace(compile="regional"))
    db.finish(cancelled, error={"type": "error", "kind": "cancelled", "message": "cancelled by its owner"})
    failed = insert_run(db, tiny.replace(mode="max-autotune"))
    db.finish(failed, error={"type": "error", "kind": "compile_error", "message": "InductorError: boom"})
    at = app().switch_page("app_pages/compare.py").run()
    assert not at.exception
    assert at.multiselect(key="compare_status").options == ["cancelled", "failed", "finished"]
    table = at.dataframe[0].value  # the run table, the page's first
    assert dict(zip(table["Run id"], table["Status"])) == {
        cancelled: "cancelled", failed: "failed", **{i: "finished" for i in table["Run id"] if i not in (cancelled,
                                                                                                        failed)}}
    # "Download every run (CSV)" writes the frame the table is drawn from
    assert dict(zip(db.dataframe().id, db.dataframe().status))[cancelled] == "cancelled"


def test_typing_part_of_an_id_finds_only_the_runs_whose_names_contain_it(db):
    from streamlit.proto.SelectWidgetFilterMode_pb2 import SelectWidgetFilterMode

    stored_run(db, Experiment(model="captioner", device="cpu"), speedup=1.2, compile_s=1.0)
    at = app().switch_page("app_pages/compare.py").run()
    # The browser filters the options as a person types: by substring, not fuzzy (letters scattered in order).
    assert at.multiselect(key="compare_runs").proto.filter_mode == SelectWidgetFilterMode.FILTER_MODE_CONTAINS
    assert at.selectbox(key="compare_detail").proto.filter_mode == SelectWidgetFilterMode.FILTER_MODE_CONTAINS


def test_the_html_export_s_verdict_shows_each_label_as_typed_not_escaped_for_markdown(db, monkeypatch):
    """The page's verdict escapes each run's label for its Markdown; the HTML export escapes for HTML alone."""
    import html

    from streamlit.runtime.media_file_manager import MediaFileManager

    built = {}  # the export's file name -> what builds it on the click
    add_deferred = MediaFileManager.add_deferred

    def keep(self, data_callable, mimetype, coordinates, file_name=None, **kwargs):
        built[file_name] = data_callable
        return add_deferred(self, data_callable, mimetype, coordinates, file_name, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", keep)
    tiny = Experiment(model="captioner", device="cpu")
    whole = stored_run(db, tiny, compile_s=1.0, **interval(1.3, 1.25, 1.35))
    stored_run(db, tiny.replace(compile="regional"), compile_s=1.0, **interval(1.1, 1.05, 1.15))
    at = app().switch_page("app_pages/compare.py").run()
    assert not at.exception
    assert f"Fastest run: **{plain(tiny.label)} · {whole[-6:]}**" in texts(at.markdown)  # the page: Markdown
    page = built["compile-lab-comparison.html"]()
    assert "/" in tiny.label and "," in tiny.label
    assert f"<p>Fastest run: {html.escape(tiny.label)} · {whole[-6:]}, 1.30x (1.25–1.35) eager." in page
    assert "\\/" not in page.split("<div class='chart'>")[0]  # no Markdown escape in the notes above the charts


def test_the_chosen_runs_survive_a_visit_to_another_page_and_a_reload(db):
    """Compare forgot "Runs to compare side by side" on a page switch and on a reload (back to the newest four),
    while the Run and Sweep pages kept their settings: it keeps them the same way, in the session and in the store
    under the person's id."""
    from streamlit.testing.v1 import AppTest

    tiny = Experiment(model="captioner", device="cpu")
    made = []
    for i in range(6):
        made.append(stored_run(db, tiny.replace(batch_size=i + 1), speedup=1.1, compile_s=1.0))
        time.sleep(0.01)  # the newest first
    chosen = [made[0], made[2]]  # two of the oldest: not the default four
    at = app().switch_page("app_pages/compare.py").run()
    at.multiselect(key="compare_status").set_value(["finished"]).run()
    at.multiselect(key="compare_runs").set_value(chosen).run()
    for page in ("run", "sweep", "diagnose"):
        at.switch_page(f"app_pages/{page}.py").run()
        at.switch_page("app_pages/compare.py").run()
        assert not at.exception
        assert at.multiselect(key="compare_runs").value == chosen, page
        assert at.multiselect(key="compare_status").value == ["finished"], page
    reloaded = AppTest.from_file("../app.py", default_timeout=300)
    reloaded.query_params["me"] = at.session_state["owner"]
    reloaded.switch_page("app_pages/compare.py").run()
    assert not reloaded.exception
    assert reloaded.multiselect(key="compare_runs").value == chosen
    # a kept run deleted since leaves the selection rather than break the widget
    db.delete(made[0])
    reloaded.run()
    assert not reloaded.exception and reloaded.multiselect(key="compare_runs").value == [made[2]]


def test_a_run_whose_row_cannot_be_read_is_marked_in_the_table_and_the_instructor_deletes_it(db, monkeypatch):
    """One row with malformed JSON made the Compare page "This app has encountered an error" for everyone, and its
    store-trouble words sent the instructor to `tcore store set-aside`, which refuses a store SQLite reads."""
    from tests.app_harness import unlock

    good = stored_run(db, Experiment(model="captioner", device="cpu"), speedup=1.2, compile_s=1.0)
    bad = stored_run(db, Experiment(model="captioner", device="cpu"), speedup=1.3, compile_s=1.0)
    with db._write() as conn:
        conn.execute("UPDATE runs SET spec='{not json' WHERE id=?", (bad,))
    monkeypatch.setenv("COMPILE_LAB_INSTRUCTOR_PASSCODE", "sesame")
    at = unlock(app(), "sesame").switch_page("app_pages/compare.py").run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert dict(zip(table["Run id"], table["Status"])) == {good: "finished", bad: "unreadable"}
    assert at.multiselect(key="compare_runs").value == [good]  # never charted
    at.multiselect(key="compare_status").set_value(["unreadable"]).run()
    assert at.selectbox(key="compare_detail").value == bad
    assert "its spec column is not JSON" in texts(at.error) and "Compare page" in texts(at.error)
    at.button(key="compare_delete").click().run()
    assert not at.exception, at.exception
    assert [r.id for r in db.list(unreadable=True)] == [good]
