"""A participant's name, as typed, is anyone's words too: the name box takes 24 characters, and only its slug must
match the id in the page's address, so `![](http://ev.il/a.png)` is a name (slug `http-ev-il-a-png`). Every page that
draws a run's owner as Markdown shows the name as typed, never as an image every participant's browser fetches nor a
link; and the instructor's confirmation of a cancel shows the run's label as typed too."""
import os

from tcore.lab.queue import scheduler
from tcore.lab.run import runs
from tests.app_harness import app, db, stored_run  # noqa: F401 (db: the fixture)
from tests.helpers import QUICK
from tests.test_instructor_panel import _unlocked_with_the_files_limits
from ui.panels.people import slug
from ui.words.store_words import plain

KINDS = ("markdown", "caption", "subheader", "warning", "info", "error", "success", "toast")
NAME = "![](http://ev.il/a.png)"  # 23 characters
EVIL_LABEL = "![x](http://evil/img.png) [unlock instructor](http://evil)"


def drawn(at) -> list[str]:
    return [str(e.value) for kind in KINDS for e in at.get(kind)]


def assert_plain(texts: list[str]) -> None:
    for text in texts:
        assert "](http://ev" not in text, text


def _owner_typed(store) -> str:
    owner = f"{slug(NAME)}~1a2b.0123456789abcdef"
    store.people.rename_owner(owner, owner, NAME)
    assert store.people.typed_names()[owner] == NAME
    return owner


def test_a_name_with_markdown_shows_as_typed_in_the_queue_on_the_run_and_system_pages(db):
    owner = _owner_typed(db)
    me = scheduler.this_process()
    running = db.queue.enqueue(QUICK, device="cpu", owner=owner, proc=me, timeout_s=None)
    assert db.queue.claim_next(me, "cpu", ["cpu"], {running}) == (running, "cpu")
    db.queue.set_worker(running, os.getpid(), scheduler.process_start(os.getpid()))  # alive: left to run
    at = app()
    for page in ("app_pages/run.py", "app_pages/system.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
        texts = drawn(at)
        assert any(plain(NAME) in t for t in texts if "**running**" in t), texts  # the queue's row: the name, escaped
        assert_plain(texts)


def test_the_instructors_cancel_confirmation_shows_the_owner_and_the_label_as_typed(tmp_path, monkeypatch):
    store, at = _unlocked_with_the_files_limits(tmp_path, monkeypatch)
    owner = _owner_typed(store)
    runs.pause(store, True)  # the run stays queued
    theirs = store.queue.enqueue(QUICK, device="cpu", owner=owner, proc=scheduler.this_process(), timeout_s=60)
    with store._write() as con:  # the label a model file's evil preset gives a run
        con.execute("UPDATE runs SET label=? WHERE id=?", (EVIL_LABEL, theirs))
    try:
        at.run()
        at.button(key=f"system_queue_cancel_{theirs}").click().run()
        assert not at.exception, at.exception
        asked = [t for t in drawn(at) if t.startswith("Cancel ")]
        assert asked and plain(EVIL_LABEL) in asked[0] and plain(NAME) in asked[0], asked
        assert_plain(drawn(at))
        assert "](http://evil" not in "\n".join(drawn(at))
    finally:
        runs.pause(store, False)
