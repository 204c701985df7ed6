"""A fresh id cannot be had at will (ui.panels.people, tcore.lab.policy.guards.NewPeopleGuard): any well-formed ?me=
used to be a new participant, each with max_queued_per_session runs of their own, so a reload with a made-up id got
around the limit. Now each network address starts at most max_new_people_per_address participants in a workshop's day;
ids the server knows (a reload, a bookmark, an id whose runs the store keeps) are not new."""
import secrets

import pytest
from streamlit.testing.v1 import AppTest

from tcore.lab.policy import guards, limits
from tests.app_harness import db, stored_run, texts  # noqa: F401 (db: the fixture)
from tests.helpers import QUICK
from ui.panels import people


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_starts_a_few_participants_a_day_and_loopback_is_not_counted():
    clock = Clock()
    guard = guards.NewPeopleGuard(window_s=12 * 3600, clock=clock)
    assert [guard.admit("10.0.0.5", 3) for _ in range(4)] == [True, True, True, False]
    assert guard.admit("10.0.0.6", 3)  # another address has its own
    clock.now += 11 * 3600
    assert not guard.admit("10.0.0.5", 3)
    assert guard.admit("10.0.0.5", 4)  # the instructor raised the limit
    clock.now += 1.5 * 3600  # a day after the first three: they no longer count
    assert [guard.admit("10.0.0.5", 3) for _ in range(3)] == [True, True, False]
    # an IPv6 host picks new addresses in its /64 at will: the /64 is one address
    assert [guard.admit(f"2001:db8:0:1::{i:x}", 2) for i in range(3)] == [True, True, False]
    assert guard.admit("2001:db8:0:2::1", 2)
    # the server's own machine, and a session with no known address (what Streamlit reports for loopback)
    assert all(guard.admit(address, 1) for address in ("127.0.0.1", "::1", None, None, "127.0.0.1"))


def page(me: str | None = None) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    if me is not None:
        at.query_params["me"] = me
    return at.run()


def made_up() -> str:
    return f"eve~{secrets.token_hex(2)}.{secrets.token_hex(8)}"


@pytest.fixture
def at_address(db, monkeypatch):
    """Pages opened from 10.0.0.9 unless a test says otherwise, with a guard of their own and a limit of 2."""
    monkeypatch.setattr(guards, "NEW_PEOPLE", guards.NewPeopleGuard())
    monkeypatch.setenv(limits.ENV["max_new_people_per_address"], "2")
    where = {"address": "10.0.0.9"}
    monkeypatch.setattr(people, "client_address", lambda: where["address"])
    return where


def test_made_up_ids_past_the_address_limit_are_refused_and_known_ones_still_work(db, at_address):
    first = page()  # a new browser: a guest id, the address's first participant
    guest = first.session_state["owner"]
    second = page(made_up())  # a made-up id: accepted, the second
    assert second.session_state["owner"] != guest and not second.exception

    for me in (made_up(), None):  # a third made-up id, or a private window: nobody new from here today
        refused = page(me)
        said = texts(refused.error)
        assert "this network address has started 2 participants" in said, said
        assert "max_new_people_per_address = 2 (from COMPILE_LAB_MAX_NEW_PEOPLE_PER_ADDRESS)" in said
        assert "owner" not in refused.session_state and not refused.exception
        assert not [b for b in refused.button if b.label == "Run"]  # no page: nothing to queue as

    assert page(guest).session_state["owner"] == guest  # a reload of a known id is no one new
    # After a restart this process has forgotten every id; one whose runs the store keeps is still known.
    run_id = stored_run(db, QUICK)
    with db._write() as conn:
        conn.execute("UPDATE runs SET owner=? WHERE id=?", (guest, run_id))
    people._NOW.pop(people._key(guest))
    assert page(guest).session_state["owner"] == guest

    at_address["address"] = "10.0.0.10"  # someone else in the room
    assert page(made_up()).session_state.owner
    at_address["address"] = None  # the server's own machine: where the instructor sits, never limited
    assert all("owner" in page(made_up()).session_state for _ in range(3))
