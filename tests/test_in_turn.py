"""Runs queued in turn (tcore.lab.run.in_turn): what the person's bound lets in goes in at once, the rest as places
free, fed by the lab whether or not a page draws, in order, and a refusal stops the feed with its reason."""
import pytest

from tcore.experiment.spec import SpecError
from tcore.lab.run import in_turn, runs
from tests.app_harness import db  # noqa: F401 (the fixture)
from tests.helpers import HANG_S, QUICK, wait_until


def test_held_runs_go_in_as_places_free_without_a_page_and_a_refusal_stops_the_feed(db, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_MAX_QUEUED_PER_SESSION", "2")
    runs.pause(db, True)
    try:
        batch = [QUICK.replace(batch_size=b) for b in (1, 2, 3, 4)]
        token = in_turn.start(batch, db, owner="ada~1a2b.cafe")
        first = in_turn.view(token)
        assert len(first.queued) == 2 and [e.batch_size for e in first.held] == [3, 4]
        assert runs.cancel(first.queued[0], db, owner="ada~1a2b.cafe")  # a place frees: the lab's thread feeds it
        wait_until(lambda: len(in_turn.view(token).queued) == 3, HANG_S, "the lab's thread feeding the freed place")
        now = in_turn.view(token)
        assert [db.get(i).spec["batch_size"] for i in now.queued] == [1, 2, 3] and len(now.held) == 1

        def refuse(exp, store, **kw):
            raise SpecError("needs 99 GiB, over this lab's max_memory_gib")

        monkeypatch.setattr(runs, "start", refuse)
        assert runs.cancel(now.queued[1], db, owner="ada~1a2b.cafe")
        after = in_turn.feed(token)  # a page's draw feeds at once
        assert after.refusal == (batch[3].label, "needs 99 GiB, over this lab's max_memory_gib") and not after.held
        with pytest.raises(SpecError, match="max_memory_gib"):  # refused first: nothing held, said at once
            in_turn.start(batch[:1], db, owner="bob~1a2b.cafe")
    finally:
        runs.pause(db, False)


def test_a_rename_between_the_feeds_reading_of_the_name_and_its_insert_moves_the_fed_run_too(db, monkeypatch):
    """The feed read the person's id, then the person renamed themselves and cancelled their queued run before the feed
    queued the next: it went in under the id they had left, which they could not cancel, and the feed followed that
    id from then on (a loaded fresh clone's interleaving, made here without a race)."""
    monkeypatch.setenv("COMPILE_LAB_MAX_QUEUED_PER_SESSION", "1")
    runs.pause(db, True)
    guest, named = "guest-1a2b.00000000cafe0002", "ada~1a2b.00000000cafe0002"
    read_name = in_turn._named_now
    renamed = []

    def read_then_renamed(batch):
        owner = read_name(batch)
        if owner == guest and not renamed:  # the sidebar's rename and a cancel, right after the feed read the name
            renamed.append(db.people.rename_owner(guest, named, "Ada"))
            assert runs.cancel(first, db, owner=named)
        return owner

    try:
        token = in_turn.start([QUICK.replace(batch_size=b) for b in (1, 2, 3)], db, owner=guest)
        first = in_turn.view(token).queued[0]
        monkeypatch.setattr(in_turn, "_named_now", read_then_renamed)
        fed = in_turn.feed(token).queued  # the page's draw feeds; the thread's feed may have read the name first
        assert renamed == [1] and len(fed) == 2
        assert db.get(fed[1]).owner == named
        assert runs.cancel(fed[1], db, owner=named)
        assert db.get(in_turn.feed(token).queued[2]).owner == named  # and the feed follows the new id from then on
        # a person's id that keeps its own row (a stale tab kept its settings under it) was not renamed away from
        db.people.keep_settings_of(guest, {})
        assert db.people.renamed_from(guest, "1a2b.00000000cafe0002") is None
    finally:
        runs.pause(db, False)


def test_held_runs_follow_their_person_s_new_name(db, monkeypatch):
    """A person who typed a name (or another) while the lab held some of their runs: their runs moved to the new id,
    but the held ones went in under the id they had left, which was no longer theirs: they could not cancel them
    ("belongs to someone else"). The tag and the secret stay with the person through a rename; the feed follows them."""
    monkeypatch.setenv("COMPILE_LAB_MAX_QUEUED_PER_SESSION", "1")
    runs.pause(db, True)
    guest, named = "guest-1a2b.00000000cafe0001", "ada~1a2b.00000000cafe0001"
    try:
        token = in_turn.start([QUICK.replace(batch_size=b) for b in (1, 2)], db, owner=guest)
        first = in_turn.view(token).queued[0]
        assert db.people.rename_owner(guest, named, "Ada") == 1  # the sidebar's rename moves what the store holds
        assert runs.cancel(first, db, owner=named)
        wait_until(lambda: len(in_turn.view(token).queued) == 2, HANG_S, "the held run fed once a place freed")
        fed = in_turn.view(token).queued[1]
        assert db.get(fed).owner == named
        assert runs.cancel(fed, db, owner=named)
    finally:
        runs.pause(db, False)
