"""The instructor's unlock outlives the session it was typed in, for the same browser at the same address only
(ui.panels.people): a random token in a cookie and under the browser's Streamlit XSRF token, known only to this server
process; Lock revokes every one; a changed
passcode, a token the server never issued, one from another address or one past UNLOCK_HOURS unlocks nothing; and
only the session that unlocked or locked writes the cookie. Driven in Streamlit's bare mode, where session_state is
one dict: each "session" here is that dict emptied, with the cookie the browser would send."""
import pytest
import streamlit as st

from tcore.lab.settings import private
from ui.panels import people

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
    monkeypatch.setattr(people, "client_address", lambda: "10.0.0.7")
    monkeypatch.setattr(st, "html", page_script)
    monkeypatch.setenv(private.PASSCODE_ENV, CODE)
    new_session()
    jar["written"] = written  # what the pages wrote, in order
    yield jar
    new_session()
    people._UNLOCKED.clear()
    people._BROWSER_UNLOCKS.clear()


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

    monkeypatch.setattr(people, "client_address", lambda: "10.0.0.8")  # the cookie, copied to another machine
    assert not fresh_tab_is_instructor()
    monkeypatch.setattr(people, "client_address", lambda: "10.0.0.7")
    assert not fresh_tab_is_instructor()  # and a token that was tried elsewhere is forgotten

    people.unlock(CODE)
    page_drawn()
    issued = browser[people.INSTRUCTOR_COOKIE]
    browser[people.INSTRUCTOR_COOKIE] = issued[:-4] + ("AAAA" if not issued.endswith("AAAA") else "BBBB")
    assert not fresh_tab_is_instructor()
    browser[people.INSTRUCTOR_COOKIE] = issued
    monkeypatch.setenv(private.PASSCODE_ENV, "another")
    assert not fresh_tab_is_instructor()
    monkeypatch.setenv(private.PASSCODE_ENV, CODE)

    people.unlock(CODE)
    page_drawn()
    token = browser[people.INSTRUCTOR_COOKIE]
    people._UNLOCKED[token] = people._UNLOCKED[token]._replace(until=0.0)  # issued more than UNLOCK_HOURS ago
    assert not fresh_tab_is_instructor()

    people.unlock(CODE)
    page_drawn()
    people._UNLOCKED.clear()  # the server restarted: its tokens are gone
    assert not fresh_tab_is_instructor()


def xsrf(token: bytes, mask: bytes = b"\x01\x02\x03\x04") -> str:
    """Streamlit's XSRF cookie for `token`, as its server writes it: masked afresh on each response."""
    return f"2|{mask.hex()}|{bytes(b ^ mask[i % 4] for i, b in enumerate(token)).hex()}|1795717826"


def test_a_session_that_starts_before_the_page_wrote_the_cookie_is_unlocked_by_the_browsers_xsrf_token(browser,
                                                                                                     monkeypatch):
    """A reload, a new tab or a reconnect right after Unlock, before the page's script has written the unlock's
    cookie (late on a loaded machine), started a session that was locked. The server keeps the unlock under the
    browser's XSRF token, which Streamlit's server sets before any page's script runs; the address, the hours and Lock
    bind it as they bind the cookie."""
    token = bytes(range(16))
    browser[people.XSRF_COOKIE] = xsrf(token)
    people.unlock(CODE)  # no page drawn after it: the cookie is never written
    new_session()
    assert people.INSTRUCTOR_COOKIE not in browser and people.is_instructor()
    browser[people.XSRF_COOKIE] = xsrf(token, b"\xaa\xbb\xcc\xdd")  # the same browser, its cookie masked afresh
    new_session()
    assert people.is_instructor()

    browser[people.XSRF_COOKIE] = xsrf(bytes(range(1, 17)))  # another browser at the same address
    new_session()
    assert not people.is_instructor()
    browser[people.XSRF_COOKIE] = "not|a|token"
    new_session()
    assert not people.is_instructor()

    browser[people.XSRF_COOKIE] = xsrf(token)
    monkeypatch.setattr(people, "client_address", lambda: "10.0.0.8")  # the cookie, copied to another machine
    new_session()
    assert not people.is_instructor()
    monkeypatch.setattr(people, "client_address", lambda: "10.0.0.7")

    people.unlock(CODE)
    new_session()
    assert people.is_instructor()
    people.lock()  # in any tab: the browser's key unlocks nothing either
    new_session()
    assert not people.is_instructor()
