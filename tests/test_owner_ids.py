"""An owner id carries a secret that no page shows: what a page shows of a person (their name, `guest 3f9a`) is not
enough for a second browser to act as them, through the same calls the pages make (cancel on the queue, delete on
Compare)."""
import pytest
from streamlit.testing.v1 import AppTest

from tcore.lab.queue import scheduler
from tcore.lab.run import runs
from tests.app_harness import app, db, stored_run  # noqa: F401 (db: the fixture)
from tests.helpers import QUICK


def page_as(me: str | None, page: str = "app_pages/run.py") -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=60)
    if me is not None:
        at.query_params["me"] = me
    at.run()
    if page != "app_pages/run.py":
        at.switch_page(page).run()
    return at


def everything_shown(at: AppTest) -> str:
    return "\n".join(str(getattr(e, "value", "")) + str(getattr(e, "label", "")) + str(getattr(e, "help", ""))
                     for e in at.main) + "\n".join(str(getattr(e, "value", "")) for e in at.sidebar)


def test_a_second_browser_cannot_rebuild_an_owner_from_what_pages_show(db):
    ada = app()
    guest = ada.session_state["owner"]
    tag = guest[6:10]
    assert f"guest {tag}" in everything_shown(ada)
    ada.text_input(key="people_name").set_value("Ada").run()
    owner = ada.session_state["owner"]
    assert owner.startswith(f"ada~{tag}.") and len(owner.rsplit(".", 1)[1]) == 16

    queued = db.queue.enqueue(QUICK, device="cpu", owner=owner, proc=scheduler.Proc("elsewhere", 999_999, "1"),
                              timeout_s=60)
    done = stored_run(db, QUICK)
    with db._write() as conn:
        conn.execute("UPDATE runs SET owner=? WHERE id=?", (owner, done))

    secret = owner.rsplit(".", 1)[1]
    for page in ("app_pages/run.py", "app_pages/compare.py", "app_pages/system.py"):
        assert secret not in everything_shown(page_as(None, page))  # nobody else's page shows it

    # every id a second browser could build from what it saw: the name and the guest tag, in the old forms too
    for forged in (f"ada~{tag}", f"guest-{tag}", f"guest-{tag}00", f"ada~{tag}.{'0' * 16}", f"ada~{tag}.",
                   f"ada~{tag}.{secret[:4]}"):
        mallory = page_as(forged)
        me = mallory.session_state["owner"]
        assert me != owner and mallory.query_params["me"] == me  # a fresh guest, not Ada
        assert not [b for b in mallory.button if b.key and b.key.startswith("run_queue_cancel_")]
        with pytest.raises(PermissionError):
            runs.cancel(queued, db, owner=me, instructor=False)  # what the queue's Cancel calls
        with pytest.raises(PermissionError):
            runs.delete(done, db, owner=me, instructor=False)  # what Compare's Delete calls
    assert db.get(queued).status == "queued" and db.get(done).status == "finished"

    # Ada's own bookmark (the whole address) keeps her runs hers
    again = page_as(owner)
    assert again.session_state["owner"] == owner
    runs.delete(done, db, owner=owner, instructor=False)


def test_an_id_with_a_trailing_newline_is_no_ones():
    from ui.panels import people

    for good in ("guest-3f9a.0123456789abcdef", "ada~3f9a.0123456789abcdef"):
        assert people._OWNER.match(good) and not people._OWNER.match(good + "\n")
    assert people.display_name("ada~3f9a") == "ada (3f9a)" and people.display_name("ada~3f9a\n") == "another session"
