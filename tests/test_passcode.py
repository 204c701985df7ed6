"""Guessing the instructor passcode is slowed per session and across the server, and logged, so a room cannot
brute-force it."""
import logging
import re

from streamlit.testing.v1 import AppTest

from tcore.lab.policy import guards
from tcore.store import RunStore

CODE = {"COMPILE_LAB_INSTRUCTOR_PASSCODE": "sesame"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_session_guessing_waits_longer_after_each_wrong_try(caplog):
    clock = Clock()
    guard = guards.PasscodeGuard(free=3, first_wait_s=2.0, longest_wait_s=60.0, clock=clock)
    caplog.set_level(logging.WARNING, logger="compile_lab")
    for _ in range(2):  # a typo or two costs nothing
        assert guard.attempt("tab-a", "open up", CODE) == (False, "That is not the passcode.")
    assert guard.attempt("tab-a", "open up", CODE) == (False, "That is not the passcode. Wait 2 s before trying again.")
    ok, why = guard.attempt("tab-a", "sesame", CODE)  # even the right one waits its turn: not checked
    assert not ok and why == "Too many wrong passcodes from this session: try again in 2 s."
    clock.now += 2
    assert guard.attempt("tab-a", "nope", CODE)[1].endswith("Wait 4 s before trying again.")
    clock.now += 4
    assert guard.attempt("tab-a", "nope", CODE)[1].endswith("Wait 8 s before trying again.")
    for _ in range(10):
        clock.now += 60
        guard.attempt("tab-a", "nope", CODE)
    assert guard.attempt("tab-a", "nope", CODE)[1] == "Too many wrong passcodes from this session: try again in 60 s."
    assert guard.attempt("tab-b", "sesame", CODE) == (True, None)  # another session is not held by this one
    clock.now += 60
    assert guard.attempt("tab-a", "sesame", CODE) == (True, None)
    assert guard.attempt("tab-a", "nope", CODE) == (False, "That is not the passcode.")  # its count starts again
    logged = [r.getMessage() for r in caplog.records]
    assert sum("wrong try refused" in m for m in logged) == 16
    assert sum("try refused without checking" in m for m in logged) == 2
    assert not any("nope" in m or "open up" in m or "sesame" in m for m in logged)  # never what was typed


def test_many_sessions_guessing_from_one_address_slow_that_address_not_the_instructor():
    clock = Clock()
    guard = guards.PasscodeGuard(free=3, free_per_address=10, first_wait_s=2.0, clock=clock)
    for tab in range(30):  # a new tab per guess gets around the per-session wait ...
        clock.now += 1
        guard.attempt(f"tab-{tab}", "nope", CODE, address="10.0.0.66")
    ok, why = guard.attempt("tab-new", "sesame", CODE, address="10.0.0.66")  # ... not around its address's
    assert not ok and why.startswith("Too many wrong passcodes from your network address")
    # hundreds of wrong tries from many addresses never refuse the right passcode from another one
    for n in range(300):
        guard.attempt(f"crowd-{n}", "nope", CODE, address=f"10.0.1.{n % 250}")
    assert guard.attempt("instructor", "sesame", CODE, address="10.0.0.2") == (True, None)
    assert guard.attempt("instructor-here", "sesame", CODE, address="127.0.0.1") == (True, None)
    told = guard.wrong_tries()
    assert re.match(r"\d{3} wrong passcode tries since the server started, from 251 addresses: "
                    r"10\.0\.0\.66 \(1\d\)", told), told
    # when, by the server's clock: "the latest 3 s ago" stood still on the panel while the page's queue ticked on
    assert re.search(r"; the latest at \d\d:\d\d:\d\d \(the server's clock\)\.", told) and " ago" not in told, told


def test_the_passcode_is_compared_as_digests_whatever_its_length():
    assert guards.is_instructor("sesame", CODE)
    assert guards.is_instructor(" sesame ", CODE)
    assert not guards.is_instructor("sesam", CODE)
    assert not guards.is_instructor("sesame" * 1000, CODE)
    assert not guards.is_instructor("", CODE) and not guards.is_instructor("x", {})


def test_the_system_page_slows_a_guessing_tab_down(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv("COMPILE_LAB_INSTRUCTOR_PASSCODE", "sesame")
    monkeypatch.setattr(guards, "PASSCODE_GUARD", guards.PasscodeGuard())  # this test's guesses stay its own
    caplog.set_level(logging.WARNING, logger="compile_lab")
    RunStore()
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    at.switch_page("app_pages/system.py").run()
    said = []
    for guess in ("a", "b", "c", "sesame"):
        at.text_input(key="instructor_attempt").set_value(guess)
        next(b for b in at.button if b.label == "Unlock").click().run()
        said.append([e.value for e in at.error])
    assert not at.exception
    assert said[:2] == [["That is not the passcode."]] * 2
    assert said[2] == ["That is not the passcode. Wait 2 s before trying again."]
    assert said[3] == ["Too many wrong passcodes from this session: try again in 2 s."]  # the right one, too soon
    assert "instructor_pause" not in [b.key for b in at.button]  # still locked
    assert sum("wrong try refused" in r.getMessage() for r in caplog.records) == 3


def test_a_wrong_try_from_the_server_s_own_machine_is_said_so_not_as_a_question_mark():
    """Streamlit reports loopback as no address: the panel said "from 1 address(es): ? (1)"."""
    guard = guards.PasscodeGuard(free=3, free_per_address=10, first_wait_s=2.0, clock=Clock())
    guard.attempt("tab", "nope", CODE, address=None)
    told = guard.wrong_tries()
    assert "from 1 address: this machine (1)" in told and "?" not in told


def test_both_guards_take_any_loopback_address_for_this_machine_and_only_those():
    """The passcode guard took only 127.0.0.1 and ::1 for this machine, the new-people guard all of loopback: they
    disagreed about 127.0.0.2. This machine is where the instructor sits: neither guard bounds it per address."""
    for here in ("127.0.0.1", "127.0.0.2", "127.255.0.9", "::1", "::ffff:127.0.0.2", "localhost"):
        clock = Clock()
        guard = guards.PasscodeGuard(free=3, free_per_address=10, first_wait_s=2.0, clock=clock)
        for tab in range(30):  # many sessions guessing from this machine slow each session, not the machine
            clock.now += 1
            guard.attempt(f"tab-{tab}", "nope", CODE, address=here)
        assert guard.attempt("instructor", "sesame", CODE, address=here) == (True, None), here
        people = guards.NewPeopleGuard(clock=clock)
        assert all(people.admit(here, limit=1) for _ in range(5)), here
    for elsewhere in ("10.0.0.66", "128.0.0.1", "::2", "::ffff:10.0.0.66"):
        clock = Clock()
        guard = guards.PasscodeGuard(free=3, free_per_address=10, first_wait_s=2.0, clock=clock)
        for tab in range(30):
            clock.now += 1
            guard.attempt(f"tab-{tab}", "nope", CODE, address=elsewhere)
        ok, why = guard.attempt("instructor", "sesame", CODE, address=elsewhere)
        assert not ok and why.startswith("Too many wrong passcodes from your network address"), elsewhere
        people = guards.NewPeopleGuard(clock=clock)
        assert people.admit(elsewhere, limit=1) and not people.admit(elsewhere, limit=1), elsewhere


def test_guessing_from_many_addresses_of_one_ipv6_64_slows_that_64():
    """An IPv6 host picks new addresses within its /64 at will (the new-people guard counts a /64 as one address for
    that reason): a new address and a new tab per guess stepped around the passcode guard's per-address wait, 200
    wrong tries never slowed. And an IPv4 address written into IPv6 (::ffff:10.0.0.66, as a dual-stack server reports
    it) is that IPv4 address, never the /64 every such address falls in."""
    clock = Clock()
    guard = guards.PasscodeGuard(free=3, free_per_address=10, first_wait_s=2.0, clock=clock)
    for n in range(30):
        clock.now += 1
        guard.attempt(f"tab-{n}", "nope", CODE, address=f"2001:db8:0:7::{n + 1:x}")
    ok, why = guard.attempt("tab-new", "sesame", CODE, address="2001:db8:0:7::ffff")
    assert not ok and why.startswith("Too many wrong passcodes from your network address")
    assert guard.attempt("instructor", "sesame", CODE, address="2001:db8:0:8::1") == (True, None)  # another /64
    for n in range(30):
        clock.now += 1
        guard.attempt(f"mapped-{n}", "nope", CODE, address="::ffff:10.0.0.66")
    ok, why = guard.attempt("tab-v4", "sesame", CODE, address="10.0.0.66")  # the same host, written the IPv4 way
    assert not ok and why.startswith("Too many wrong passcodes from your network address")
    assert guard.attempt("instructor-v4", "sesame", CODE, address="::ffff:10.0.0.2") == (True, None)
    people = guards.NewPeopleGuard(clock=clock)
    assert people.admit("::ffff:10.0.0.5", limit=1) and people.admit("::ffff:10.0.0.6", limit=1)  # two hosts
    assert not people.admit("10.0.0.5", limit=1)  # the first again, written the IPv4 way
