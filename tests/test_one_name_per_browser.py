"""A name is the browser's, not the tab's (ui.panels.people): a name typed in one tab is every tab's, each tab says so,
and no run changes hands between two tabs of one browser. Two tabs here are two AppTest sessions opened from the same
address (?me=), as a second tab of the browser is; tests/test_browser_people.py does the same in Chromium."""
import secrets

import pytest
from streamlit.testing.v1 import AppTest

from tcore.lab.queue import scheduler
from tcore.lab.run import runs
from tests.app_harness import db, stored_run  # noqa: F401 (db: the fixture)
from tests.helpers import QUICK


def tab(me: str) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.query_params["me"] = me
    return at.run()


def sidebar_says(at: AppTest) -> str:
    return "\n".join(str(getattr(e, "value", "")) for e in at.sidebar)


def cancels(at: AppTest) -> list[str]:
    return [b.key for b in at.button if b.key and b.key.startswith("run_queue_cancel_")]


def test_a_name_typed_in_a_second_tab_is_the_first_tabs_too_and_it_says_so(db):
    """Both tabs shared one secret, so "bob" typed in tab 2 moved ada's runs to bob~...: tab 1 (still ada) lost
    "yours", its Cancel and its runs, and everyone saw them as bob's."""
    ada = f"ada~1a2b.{secrets.token_hex(8)}"
    bob = ada.replace("ada~", "bob~")
    runs.pause(db, True)  # the queued run stays queued
    waiting = db.queue.enqueue(QUICK, device="cpu", owner=ada, proc=scheduler.this_process(), timeout_s=60)
    done = stored_run(db, QUICK)
    with db._write() as conn:
        conn.execute("UPDATE runs SET owner=? WHERE id=?", (ada, done))

    first, second = tab(ada), tab(ada)
    assert cancels(first) == [f"run_queue_cancel_{waiting}"] and "You: **ada**" in sidebar_says(first)
    second.text_input(key="people_name").set_value("Bob").run()
    # kept as typed: the id and the address hold its lower-case slug, every page shows "Bob"
    assert [t.value for t in second.toast][0].startswith("You are Bob now; 2 run(s) moved with you")
    assert {db.get(waiting).owner, db.get(done).owner} == {bob}

    # Before tab 1 learns of it, it queues one more under the old name (its click raced the rename).
    late = db.queue.enqueue(QUICK, device="cpu", owner=ada, proc=scheduler.this_process(), timeout_s=60)
    first.run()  # tab 1's next redraw (its sidebar's "You" line looks every few seconds)
    assert first.session_state["owner"] == bob and first.query_params["me"] == bob
    assert first.text_input(key="people_name").value == "Bob"
    said = sidebar_says(first)
    assert "You: **Bob**" in said and "Another tab of this browser changed its name from ada to Bob" in said
    assert "(1 more moved from this one)" in said
    assert db.get(late).owner == bob
    assert sorted(cancels(first)) == sorted(f"run_queue_cancel_{i}" for i in (waiting, late))  # still theirs
    first.run()  # and it stays so: the name box does not rename the browser back
    assert first.session_state["owner"] == bob and db.get(waiting).owner == bob
    assert "Another tab of this browser" in sidebar_says(first)

    # A reload of tab 1's old address (ada's bookmark) is bob too; another browser is nobody's but its own, and so
    # is an id that shares only the secret (the name's tag tells two people apart, as it tells two Adas).
    assert tab(ada).session_state["owner"] == bob
    stranger = AppTest.from_file("../app.py", default_timeout=300).run()
    assert stranger.session_state["owner"] not in (ada, bob) and not cancels(stranger)
    namesake = ada.replace("~1a2b.", "~9f9f.")
    assert tab(namesake).session_state["owner"] == namesake

    # Either tab may rename the browser; the other follows.
    first.text_input(key="people_name").set_value("Carol").run()
    second.run()
    carol = ada.replace("ada~", "carol~")
    assert second.session_state["owner"] == carol and "from Bob to Carol" in sidebar_says(second)
    assert {db.get(i).owner for i in (waiting, late, done)} == {carol}
    assert not first.exception and not second.exception


def test_an_id_the_server_has_not_seen_goes_by_the_name_its_runs_have_now(db):
    """After a restart (this process forgets every name) a bookmark made before a rename still finds its runs: the
    store knows the secret under its new name."""
    from ui.panels import people

    ada = f"ada~1a2b.{secrets.token_hex(8)}"
    bob = ada.replace("ada~", "bob~")
    done = stored_run(db, QUICK)
    with db._write() as conn:
        conn.execute("UPDATE runs SET owner=? WHERE id=?", (bob, done))
    people._NOW.pop(people._key(ada), None)
    at = tab(ada)
    assert at.session_state["owner"] == bob and "You: **bob**" in sidebar_says(at)
    assert not at.exception


def test_a_name_shows_as_it_was_typed_while_the_address_holds_its_slug(db):
    """"Ada Lovelace" became "ada-lovelace" in the sidebar, the queue and the name box after a reload."""
    me = AppTest.from_file("../app.py", default_timeout=300).run()
    me.text_input(key="people_name").set_value("Ada Lovelace").run()
    ada = me.session_state["owner"]
    assert ada.startswith("ada-lovelace~") and me.query_params["me"] == ada  # the id and the address: the slug
    assert "You: **Ada Lovelace**" in sidebar_says(me)
    runs.pause(db, True)  # the run stays in the queue, where everyone sees whose it is
    db.queue.enqueue(QUICK, device="cpu", owner=ada, proc=scheduler.this_process(), timeout_s=60)
    other = AppTest.from_file("../app.py", default_timeout=300).run()
    queue = "\n".join(str(m.value) for m in other.markdown)
    assert f":gray[Ada Lovelace \\({ada.split('~')[1][:4]}\\)]" in queue and "ada-lovelace" not in queue

    reloaded = tab(ada)
    assert reloaded.text_input(key="people_name").value == "Ada Lovelace"
    assert "You: **Ada Lovelace**" in sidebar_says(reloaded) and not [t for t in reloaded.toast]
    reloaded.text_input(key="people_name").set_value("ada lovelace").run()  # the same name typed another way
    assert reloaded.session_state["owner"] == ada and "You: **ada lovelace**" in sidebar_says(reloaded)


def test_the_notice_of_a_rename_in_another_tab_goes_once_seen_not_all_session(db, monkeypatch):
    """"Another tab of this browser changed its name from Dee to Dee Two..." was still in tab 1's sidebar 20 minutes
    later. It goes with a click on Dismiss, or at the first redraw a minute after it was said."""
    import time
    from types import SimpleNamespace

    from ui.panels import people

    dee = f"dee~1a2b.{secrets.token_hex(8)}"
    first, second = tab(dee), tab(dee)
    second.text_input(key="people_name").set_value("Dee Two").run()
    first.run()
    assert "Another tab of this browser changed its name from dee to Dee Two" in sidebar_says(first)
    first.run()  # a redraw at once: still there, as the person may not have read it yet
    assert "Another tab of this browser" in sidebar_says(first)
    later = time.time() + 20 * 60  # the sidebar's clock, 20 minutes on
    monkeypatch.setattr(people, "time", SimpleNamespace(time=lambda: later))
    first.run()  # the first redraw over a minute later: gone
    assert "Another tab of this browser" not in sidebar_says(first)
    first.run()
    assert "Another tab of this browser" not in sidebar_says(first)

    monkeypatch.setattr(people, "time", time)  # the clock of now again
    second.text_input(key="people_name").set_value("Dee Three").run()
    first.run()
    assert "from Dee Two to Dee Three" in sidebar_says(first)
    first.button(key="people_renamed_dismiss").click().run()
    assert "Another tab of this browser" not in sidebar_says(first) and not first.exception


@pytest.mark.parametrize("typed, slugged", [("Иван", None), ("王芳", None), ("Zoë Ünal", "zoe-unal")])
def test_a_name_in_any_script_is_taken_and_shown_as_typed(db, typed, slugged):
    """"Иван" or "王芳" was refused with "A name needs a letter or a digit" (only a to z counted as letters), and
    "Zoë Ünal" lost its accented letters from the address ("zo-nal"). Accents fold to their letters; a name with no
    letter a to z still gets an address of its own, and shows as typed."""
    me = AppTest.from_file("../app.py", default_timeout=300).run()
    me.text_input(key="people_name").set_value(typed).run()
    owner = me.session_state["owner"]
    assert not owner.startswith("guest-") and me.query_params["me"] == owner, owner
    assert slugged is None or owner.startswith(f"{slugged}~"), owner
    assert f"You: **{typed}**" in sidebar_says(me) and "needs a letter" not in sidebar_says(me)
    again = AppTest.from_file("../app.py", default_timeout=300).run()  # another person of the same name: apart
    again.text_input(key="people_name").set_value(typed).run()
    assert again.session_state["owner"].split("~")[0] == owner.split("~")[0] != ""
    assert again.session_state["owner"] != owner
