"""A run's label carries words anyone chose (a model file's presets and path): every page that draws it as Markdown
shows it as typed, never as an image every participant's browser fetches nor a link that looks like the lab's."""
import os

import pytest

from sample_models.sources import file_models
from tcore.experiment.spec import Experiment
from tcore.lab.queue import scheduler
from tests.app_harness import app, db, stored_run  # noqa: F401 (db: the fixture)
from ui.words.store_words import plain

EVIL = "![x](http://evil/img.png) [unlock instructor](http://evil)"
MODEL = "file:/nowhere/evil_model.py"  # no such file: the pages know it by the card a worker stored
KINDS = ("markdown", "caption", "subheader", "warning", "info", "error", "success", "toast")


@pytest.fixture
def evil_runs(db, monkeypatch):
    """A run of the file's evil preset holding the CPU (someone else's), and two finished ones to compare."""
    monkeypatch.setattr(file_models, "card_finder", file_models.card_finder)  # the app installs its own: undone
    db.model_cards.save_model_card({"name": MODEL, "ref": MODEL.removeprefix("file:"), "title": "evil",
                                    "description": "", "presets": [EVIL], "default_preset": {"cpu": EVIL, "cuda": EVIL},
                        "default_batch": {"cpu": 2, "cuda": 2}, "supports_channels_last": False,
                        "param_counts": {EVIL: 10}, "mtime_ns": None})
    file_models.card_finder = lambda name: db.model_cards.model_card(name)
    exp = Experiment(model=MODEL, preset=EVIL, batch_size=2, device="cpu", backend="eager")
    me = scheduler.this_process()
    running = db.queue.enqueue(exp, device="cpu", owner="mallory~1a2b.0123456789abcdef", proc=me, timeout_s=None)
    assert db.queue.claim_next(me, "cpu", ["cpu"], {running}) == (running, "cpu")
    db.queue.set_worker(running, os.getpid(), scheduler.process_start(os.getpid()))  # alive: left to run
    for backend, speedup in (("eager", 1.0), ("aot_eager", 1.3)):
        stored_run(db, exp.replace(backend=backend), speedup=speedup, speedup_low=speedup - 0.05,
                   speedup_high=speedup + 0.05)
    return exp


def drawn(at) -> list[str]:
    return [str(e.value) for kind in KINDS for e in at.get(kind)]


def assert_plain(texts: list[str]) -> None:
    for text in texts:
        assert "![x](" not in text and "[unlock instructor](" not in text, text


def test_an_evil_label_shows_as_typed_in_the_queue_on_the_run_and_system_pages(evil_runs):
    at = app()
    for page in ("app_pages/run.py", "app_pages/system.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
        texts = drawn(at)
        row = [t for t in texts if "**running**" in t]
        assert row and plain(evil_runs.label) in row[0], texts  # the queue's row: the label, escaped
        assert_plain(texts)


def test_an_evil_label_shows_as_typed_in_compare_s_heading_verdict_and_delete_confirmation(evil_runs):
    at = app().switch_page("app_pages/compare.py").run()
    assert not at.exception, at.exception
    texts, fastest = drawn(at), plain(evil_runs.replace(backend="aot_eager").label)  # the newest, shown in detail
    assert fastest in [str(s.value) for s in at.subheader], texts
    # none of them compiled code (aot_eager): the verdict lists each, escaped, rather than crowning one
    assert any(t.startswith("None of these runs compiled code") and fastest in t for t in texts), texts
    assert any(t.startswith(f"Delete {fastest}") for t in texts), texts
    assert_plain(texts)


def test_an_evil_label_shows_as_typed_in_diagnose_s_note_on_a_reused_run_without_the_break(db):
    """The break pair's note names the stored run it reuses by its label: a file model's preset in it is anyone's
    words, drawn by st.info as Markdown."""
    import sqlite3

    from tcore.lab.run import runs
    from tests.app_harness import stored_run
    from ui.panels.diagnose_sections import base_experiment

    base = base_experiment("captioner", compile="whole", backend="eager")
    reused = stored_run(db, base, speedup=1.0, speedup_low=0.9, speedup_high=1.1)
    with sqlite3.connect(db.path) as con:  # the label a file model's evil preset gives it
        con.execute("UPDATE runs SET label=? WHERE id=?", (EVIL, reused))
    runs.pause(db, True)  # what is queued stays queued
    try:
        at = app().switch_page("app_pages/diagnose.py").run()
        at.selectbox(key="diag_break_backend").set_value("eager").run()
        at.button(key="diag_break_start").click().run()
        assert not at.exception, at.exception
        texts = drawn(at)
        assert any(f"The run without the break is run {reused[-6:]} ({plain(EVIL)}," in t for t in texts), texts
        assert_plain(texts)
    finally:
        for rec in db.list():
            if rec.status == "queued":
                runs.cancel(rec.id, db)
        runs.pause(db, False)


def test_an_evil_error_message_shows_as_typed_on_compare_and_diagnose(db):
    """A failed run's message carries a model file's own words (its exception), and a command line runs any file
    into the store every participant's Compare page reads: Compare's run in detail and Diagnose's drew it as
    Markdown, an image each browser fetched and a link dressed as the lab's."""
    from tests.helpers import insert_run

    failed = insert_run(db, Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", backend="eager"))
    # a compile error: Diagnose lists those among its runs (a crash it leaves to Compare)
    db.finish(failed, error={"kind": "compile_error", "message": f"RuntimeError: {EVIL} :red[URGENT]"})
    at = app().switch_page("app_pages/compare.py").run()
    at.selectbox(key="compare_detail").set_value(failed).run()
    assert not at.exception, at.exception
    shown = [str(e.value) for e in at.error]
    assert any(plain(f"RuntimeError: {EVIL} :red[URGENT]") in t for t in shown), shown
    assert_plain(drawn(at))
    at = app().switch_page("app_pages/diagnose.py")
    at.query_params["run"] = failed  # opened by its id, as Compare's link does
    at.run()
    assert not at.exception and at.selectbox(key="diag_run").value == failed, at.exception
    shown = [str(e.value) for e in at.error]
    assert any(plain(f"RuntimeError: {EVIL} :red[URGENT]") in t for t in shown), shown
    assert_plain(drawn(at))
