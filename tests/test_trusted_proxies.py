"""Behind a reverse proxy every connection comes from the proxy, so the per-address limits and the instructor's
address binding told nobody apart. [room] trusted_proxies names the proxies whose X-Forwarded-For is believed
(tcore.lab.queue.room.client_address, read by ui.panels.people.client_address); a header from anyone else is ignored."""
from types import SimpleNamespace

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tcore.lab.policy import guards
from tcore.lab.queue import room
from tcore.lab.settings import config, private
from tests.app_harness import db  # noqa: F401 (db: the fixture)
from ui.panels import people

LOCAL = room.trusted_proxies({room.PROXIES_ENV: "127.0.0.1,::1"})


@pytest.mark.parametrize("peer, forwarded, client", [
    (None, ["10.0.0.5"], "10.0.0.5"),                         # a proxy on this machine (Streamlit says None)
    ("127.0.0.1", ["6.6.6.6, 10.0.0.5"], "10.0.0.5"),         # the client's own words, then what the proxy saw
    (None, ["6.6.6.6", "10.0.0.5, 127.0.0.1"], "10.0.0.5"),   # two headers, and a second proxy on this machine
    (None, ["[2001:db8::7]:5123"], "2001:db8::7"),
    (None, ["10.0.0.5:5123"], "10.0.0.5"),
    (None, ["::ffff:10.0.0.5"], "10.0.0.5"),
    (None, ["127.0.0.1"], "127.0.0.1"),                       # every hop a proxy: the first one's client
    (None, ["10.0.0.5, unknown"], "unparsed:unknown"),        # not an address: itself, never this machine
    ("127.0.0.1", ["unix:"], "unparsed:unix:"),
    (None, [], None),
    ("10.0.0.7", ["10.0.0.5"], "10.0.0.7"),                   # not a trusted proxy: its header is ignored
    ("::1", ["10.0.0.5"], "10.0.0.5"),
])
def test_the_rightmost_hop_no_trusted_proxy_wrote_is_the_client(peer, forwarded, client):
    assert room.client_address(peer, forwarded, LOCAL) == client


def test_without_trusted_proxies_every_header_is_ignored():
    assert room.client_address(None, ["10.0.0.5"], ()) is None
    assert room.client_address("10.0.0.7", ["10.0.0.5"], ()) == "10.0.0.7"
    only_v4 = room.trusted_proxies({room.PROXIES_ENV: "127.0.0.1"})
    assert room.client_address(None, ["10.0.0.5"], only_v4) == "10.0.0.5"  # None is this machine, either loopback
    lan = room.trusted_proxies({room.PROXIES_ENV: "10.0.0.0/24"})
    assert room.client_address("10.0.0.1", ["10.0.0.200, 192.0.2.8"], lan) == "192.0.2.8"
    assert room.client_address(None, ["192.0.2.8"], lan) is None  # loopback is not in 10.0.0.0/24


def test_a_hop_that_is_not_an_address_is_counted_as_itself_not_as_this_machine():
    assert guards._per_address(room.client_address(None, ["unknown"], LOCAL)) == "unparsed:unknown"


def test_trusting_the_whole_internet_is_warned_about_once(caplog, monkeypatch):
    monkeypatch.setattr(room, "_WARNED", set())
    with caplog.at_level("WARNING", logger="compile_lab"):
        for _ in range(2):
            room.trusted_proxies({room.PROXIES_ENV: "127.0.0.1, 10.0.0.0/8, 0.0.0.0/0, ::/0"})
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "0.0.0.0/0 trusts" in said[0] and "::/0 trusts" in said[1]


def test_trusted_proxies_come_from_room_in_the_file_or_the_environment_and_are_checked(tmp_path):
    toml = tmp_path / "compile-lab.toml"
    toml.write_text('[room]\nruns_per_gpu = 2\ntrusted_proxies = ["127.0.0.1", "::1", "10.1.0.0/16"]\n')
    env = {config.CONFIG_ENV: str(toml)}
    assert [str(n) for n in room.trusted_proxies(env)] == ["127.0.0.1/32", "::1/128", "10.1.0.0/16"]
    assert room.runs_per_gpu_setting(env) == 2  # the table's other setting is read as before
    assert room.trusted_proxies({**env, room.PROXIES_ENV: "192.0.2.1"})[0].compressed == "192.0.2.1/32"
    assert room.trusted_proxies({**env, room.PROXIES_ENV: ""}) == ()  # the environment wins, even empty
    assert room.trusted_proxies({}, cwd=tmp_path / "nowhere") == ()  # none by default

    for value, said in (('["localhost"]', "'localhost' is not a network address"),
                        ('"127.0.0.1"', "it must be a list of addresses"), ("[1]", "1 is not a network address")):
        toml.write_text(f"[room]\ntrusted_proxies = {value}\n")
        with pytest.raises(config.LimitsError, match=said):
            room.trusted_proxies(env)
    toml.write_text("[room]\ntrusted_proxy = []\n")
    with pytest.raises(config.LimitsError, match=r"unknown setting\(s\) in \[room\]: trusted_proxy; known: "
                                                 r"runs_per_gpu, trusted_proxies"):
        room.runs_per_gpu_setting(env)


class Headers:
    def __init__(self, forwarded: list[str]) -> None:
        self.forwarded = forwarded

    def get_all(self, key: str) -> list[str]:
        return list(self.forwarded) if key.lower() == "x-forwarded-for" else []


@pytest.fixture
def connection(monkeypatch):
    """What Streamlit tells a session about its connection, set by each test: the peer and its X-Forwarded-For."""
    jar: dict[str, str] = {}

    def connect(peer: str | None, *forwarded: str) -> None:
        monkeypatch.setattr(st, "context", SimpleNamespace(ip_address=peer, headers=Headers(list(forwarded)),
                                                           cookies=jar))
    monkeypatch.setenv(room.PROXIES_ENV, "127.0.0.1")
    connect(None)
    yield connect, jar


def test_the_instructors_unlock_is_bound_to_the_browser_behind_the_proxy(connection, monkeypatch):
    connect, jar = connection
    monkeypatch.setenv(private.PASSCODE_ENV, "sesame")
    monkeypatch.setattr(st, "html", lambda html, **_: jar.update(
        {people.INSTRUCTOR_COOKIE: html.split(f"{people.INSTRUCTOR_COOKIE}=", 1)[1].split(";", 1)[0]}))
    def new_session_is_instructor() -> bool:
        for key in list(st.session_state.keys()):
            del st.session_state[key]
        return people.is_instructor()

    try:
        connect(None, "10.0.0.67")
        people.unlock("sesame")
        people.remember_instructor()
        assert new_session_is_instructor()  # a new tab of the same browser, through the proxy
        connect(None, "10.0.0.68")  # the cookie, copied to another browser behind the same proxy
        assert not new_session_is_instructor()
        people.unlock("sesame")
        people.remember_instructor()
        assert new_session_is_instructor()
        connect("10.0.0.99", "10.0.0.68")  # a client that says it is behind the proxy, but is not
        assert not new_session_is_instructor()
    finally:
        people._UNLOCKED.clear()
        for key in list(st.session_state.keys()):
            del st.session_state[key]


def test_the_system_page_slows_guesses_per_address_behind_the_proxy_and_ignores_anyone_elses_header(db, connection,
                                                                                                     monkeypatch):
    connect, _ = connection
    monkeypatch.setenv(private.PASSCODE_ENV, "sesame")
    # A clock that stands still: a wait, once earned, lasts however slowly the pages below are drawn
    monkeypatch.setattr(guards, "PASSCODE_GUARD", guards.PasscodeGuard(free=5, free_per_address=2, clock=lambda: 1e6))

    def try_passcode(attempt: str) -> list[str]:
        at = AppTest.from_file("../app.py", default_timeout=300).run()
        at.switch_page("app_pages/system.py").run()
        at.text_input(key="instructor_attempt").set_value(attempt)
        next(b for b in at.button if b.label == "Unlock").click().run()
        assert not at.exception, at.exception
        return [e.value for e in at.error] + (["unlocked"] if "instructor_pause" in [b.key for b in at.button] else [])

    connect(None, "10.0.0.66")  # through the proxy on this machine
    assert try_passcode("a") == ["That is not the passcode."]
    assert try_passcode("b") == ["That is not the passcode. Wait 2 s before trying again."]  # the address's second
    said = try_passcode("sesame")
    assert said[0].startswith("Too many wrong passcodes from your network address")  # a new tab, same browser
    connect(None, "10.0.0.67")
    assert try_passcode("sesame") == ["unlocked"]  # another browser behind the same proxy never waits for them
    connect("10.0.0.66", "10.0.0.67")  # the guesser, straight to the server, claiming another address
    assert try_passcode("sesame")[0].startswith("Too many wrong passcodes from your network address")
