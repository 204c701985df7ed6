"""The instructor's unlock outlives the session it was typed in, for the same browser only (ui.people): a random
token in a cookie, known only to this server process; Lock revokes it in every tab; a changed passcode or a token
the server never issued unlocks nothing. Driven in Streamlit's bare mode, where session_state is one dict: each
"session" here is that dict emptied, with the cookie the browser would send."""
import pytest
import streamlit as st

from tcore.lab import limits
from ui import people

CODE = "sesame"


@pytest.fixture
def browser(monkeypatch):
    """The browser's cookie jar as the server reads it when a tab connects."""
    jar: dict[str, str] = {}
    monkeypatch.setattr(people, "cookie", jar.get)
    monkeypatch.setenv(limits.PASSCODE_ENV, CODE)
    new_session()
    yield jar
    new_session()
    people._UNLOCKED.clear()


def new_session(state: dict | None = None) -> None:
    for key in list(st.session_state.keys()):
        del st.session_state[key]
    for key, value in (state or {}).items():
        st.session_state[key] = value


def unlock_in_a_tab(jar: dict) -> dict:
    """Type the passcode; the page sets the cookie (people.remember_instructor). Returns the tab's session state."""
    people.unlock(CODE)
    jar[people.INSTRUCTOR_COOKIE] = st.session_state.instructor_token
    return dict(st.session_state)


def test_another_tab_or_a_reloaded_session_of_the_browser_stays_unlocked(browser):
    unlock_in_a_tab(browser)
    assert people.is_instructor()
    new_session()  # a reload, a second tab, or a reconnect the server did not match to the old session
    assert people.is_instructor()


def test_lock_in_one_tab_locks_the_others_and_the_cookie_no_longer_unlocks(browser):
    first = unlock_in_a_tab(browser)
    new_session()
    assert people.is_instructor()
    second = dict(st.session_state)
    new_session(first)
    people.lock()
    assert not people.is_instructor()
    new_session(second)  # the other tab, still open, was unlocked a moment ago
    assert not people.is_instructor()
    new_session()  # and a new one, with the cookie the browser still sends
    assert not people.is_instructor()


def test_a_changed_passcode_a_forged_token_or_a_restarted_server_unlocks_nothing(browser, monkeypatch):
    unlock_in_a_tab(browser)
    issued = browser[people.INSTRUCTOR_COOKIE]
    monkeypatch.setenv(limits.PASSCODE_ENV, "another")
    new_session()
    assert not people.is_instructor()
    monkeypatch.setenv(limits.PASSCODE_ENV, CODE)
    browser[people.INSTRUCTOR_COOKIE] = issued[:-4] + "AAAA"
    new_session()
    assert not people.is_instructor()
    browser[people.INSTRUCTOR_COOKIE] = issued
    people._UNLOCKED.clear()  # the server restarted: its tokens are gone
    new_session()
    assert not people.is_instructor()
