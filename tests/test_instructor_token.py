"""The instructor's unlock outlives the session it was typed in, for the same browser at the same address only
(ui.people): a random token in a cookie, known only to this server process; Lock revokes every one; a changed
passcode, a token the server never issued, one from another address or one past UNLOCK_HOURS unlocks nothing; and
only the session that unlocked or locked writes the cookie. Driven in Streamlit's bare mode, where session_state is
one dict: each "session" here is that dict emptied, with the cookie the browser would send."""
import pytest
import streamlit as st

from tcore.lab import limits
from ui import people

CODE = "sesame"


@pytest.fixture
def browser(monkeypatch):
    """The browser's cookie jar as the server reads it when a tab connects, kept up to date by the pages' scripts
    (people.remember_instructor), at the address 10.0.0.7."""
    jar: dict[str, str] = {}
    written: list[str] = []

    def page_script(html, **_):
        value = html.split(f"{people.INSTRUCTOR_COOKIE}=", 1)[1].split(";", 1)[0]
        written.append(value)
        jar[people.INSTRUCTOR_COOKIE] = value

    monkeypatch.setattr(people, "cookie", jar.get)
    monkeypatch.setattr(people, "_address", lambda: "10.0.0.7")
    monkeypatch.setattr(st, "html", page_script)
    monkeypatch.setenv(limits.PASSCODE_ENV, CODE)
    new_session()
    jar["written"] = written  # what the pages wrote, in order
    yield jar
    new_session()
    people._UNLOCKED.clear()


def new_session(state: dict | None = None) -> None:
    """A reload, a second tab, or a reconnect the server did not match to its old session (or `state`: a tab that
    is still open)."""
    for key in list(st.session_state.keys()):
        del st.session_state[key]
    for key, value in (state or {}).items():
        st.session_state[key] = value


def page_drawn() -> dict:
    """The sidebar of one page drawn (what identity_sidebar does about the instructor); the session's state after."""
    people.is_instructor()
    people.remember_instructor()
    return dict(st.session_state)


def test_a_tab_opened_or_reloaded_after_the_unlock_is_unlocked(browser):
    people.unlock(CODE)
    page_drawn()
    assert browser["written"] == [st.session_state.instructor_token]
    new_session()
    assert people.is_instructor()
    page_drawn()
    assert len(browser["written"]) == 1  # a tab unlocked by the cookie does not write it again


def test_lock_in_one_tab_locks_every_tab_and_only_the_locking_tab_empties_the_cookie(browser):
    people.unlock(CODE)
    first = page_drawn()
    new_session()
    people.unlock(CODE)  # a second tab typed the passcode as well: a token of its own
    second = page_drawn()
    new_session(first)
    people.lock()
    page_drawn()
    assert browser["written"][-1] == "" and not people.is_instructor()
    new_session(second)  # still open, unlocked a moment ago by its own token
    assert not people.is_instructor()
    new_session()  # a new tab
    assert not people.is_instructor()

    people.unlock(CODE)  # unlocked again; a tab that only now learns of the Lock leaves the new cookie alone
    page_drawn()
    new_session(first)
    page_drawn()
    assert browser[people.INSTRUCTOR_COOKIE] == browser["written"][-1] != ""


def test_another_address_a_changed_passcode_a_forged_or_an_old_token_or_a_restart_unlocks_nothing(browser,
                                                                                                  monkeypatch):
    people.unlock(CODE)
    page_drawn()

    def fresh_tab_is_instructor() -> bool:
        new_session()
        return people.is_instructor()

    monkeypatch.setattr(people, "_address", lambda: "10.0.0.8")  # the cookie, copied to another machine
    assert not fresh_tab_is_instructor()
    monkeypatch.setattr(people, "_address", lambda: "10.0.0.7")
    assert not fresh_tab_is_instructor()  # and a token that was tried elsewhere is forgotten

    people.unlock(CODE)
    page_drawn()
    issued = browser[people.INSTRUCTOR_COOKIE]
    browser[people.INSTRUCTOR_COOKIE] = issued[:-4] + ("AAAA" if not issued.endswith("AAAA") else "BBBB")
    assert not fresh_tab_is_instructor()
    browser[people.INSTRUCTOR_COOKIE] = issued
    monkeypatch.setenv(limits.PASSCODE_ENV, "another")
    assert not fresh_tab_is_instructor()
    monkeypatch.setenv(limits.PASSCODE_ENV, CODE)

    people.unlock(CODE)
    page_drawn()
    token = browser[people.INSTRUCTOR_COOKIE]
    people._UNLOCKED[token] = people._UNLOCKED[token]._replace(until=0.0)  # issued more than UNLOCK_HOURS ago
    assert not fresh_tab_is_instructor()

    people.unlock(CODE)
    page_drawn()
    people._UNLOCKED.clear()  # the server restarted: its tokens are gone
    assert not fresh_tab_is_instructor()
