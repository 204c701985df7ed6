"""One answer to "what state is my run in" (ui.words.run_state.state): the store's record says first that a run has
ended, this process's live run gives the phase of a run it follows, the queue places a run another process runs;
every fragment of the Run page reads the same RunState."""
import dataclasses
from types import SimpleNamespace

from tcore.experiment.protocol import PHASE_TITLES
from tcore.lab.queue.waiting import Wait
from tcore.lab.run import registry
from tcore.store.run_queue import BY_INSTRUCTOR
from tests.helpers import QUICK, insert_run
from ui.words import run_state


def following(monkeypatch, run_id: str, **snap) -> None:
    """This process follows `run_id` live, its snapshot saying `snap`."""
    live = SimpleNamespace(run_id=run_id, exp=None, device="cpu", owner=None, queued_at=0.0, done=False,
                           snapshot=lambda: {"status": "running", "phase": None, "queue_position": None,
                                             "wait": None, "waited_s": 0.0, **snap})
    monkeypatch.setattr(registry, "live", lambda i: live if i == run_id else None)


def test_a_finished_run_reads_as_ended_with_its_speedup(store):
    run_id = insert_run(store, QUICK)
    store.finish(run_id, result={"device": "cpu", "speedup": 1.318})
    now = run_state.state(run_id, store)
    assert (now.status, now.ended, now.followed) == ("finished", True, False)
    assert now.words() == "finished, 1.32x eager"


def test_the_record_says_first_that_a_run_has_ended_though_the_live_run_has_not_yet(store, monkeypatch):
    run_id = insert_run(store, QUICK)
    following(monkeypatch, run_id, phase="measuring")
    assert run_state.state(run_id, store).followed
    assert run_state.state(run_id, store).words() == f"running: {PHASE_TITLES['measuring']}"
    store.finish(run_id, result={"device": "cpu", "speedup": 0.9})  # written a moment before the live run ends
    now = run_state.state(run_id, store)
    assert now.ended and not now.followed and now.words() == "finished, 0.90x eager"


def test_a_followed_run_waiting_in_the_queue_says_its_place_and_when_it_starts(store, monkeypatch):
    run_id = insert_run(store, QUICK, status="queued")
    following(monkeypatch, run_id, status="queued", queue_position=2, wait=Wait(95.0, 1200.0), waited_s=12.0)
    now = run_state.state(run_id, store)
    assert (now.status, now.queue_position, now.followed) == ("queued", 2, True)
    assert now.words() == "#2 in the queue · starts in about 1 min 30 s"


def test_a_run_another_process_runs_is_placed_by_the_queue(store):
    queued, running = insert_run(store, QUICK, status="queued"), insert_run(store, QUICK)
    places = {queued: {"status": "queued", "queue_position": 3, "wait": None},
              running: {"status": "running", "queue_position": None, "wait": None}}
    assert run_state.state(queued, store, places=places).words() == "#3 in the queue · no estimate yet"
    now = run_state.state(running, store, places=places)
    assert now.elsewhere and not now.followed and not now.ended and now.words() == "running"


def test_failed_cancelled_and_deleted_runs_say_what_ended_them(store):
    failed, by_owner, by_instructor = (insert_run(store, QUICK) for _ in range(3))
    store.finish(failed, error={"kind": "timeout", "message": "ran past its 60 s"})
    store.finish(by_owner, error={"kind": "cancelled", "message": "cancelled by the user"})
    store.finish(by_instructor, error={"kind": "cancelled", "message": f"{BY_INSTRUCTOR} while it ran"})
    assert run_state.state(failed, store).words() == "failed: timeout"
    assert run_state.state(by_owner, store).cancelled_by == "owner"
    assert run_state.state(by_owner, store).words() == "cancelled by you"  # it said "failed: cancelled"
    assert run_state.state(by_instructor, store).cancelled_by == "instructor"
    assert run_state.state(by_instructor, store).words() == BY_INSTRUCTOR
    gone = run_state.state("20260101-000000-gone00", store)
    assert gone.ended and gone.status == run_state.DELETED


def test_a_run_s_header_says_queued_and_started_only_once_it_started(store):
    """A run cancelled in the queue read "started <time>" beside "it never started"."""
    from ui.panels import results

    never = store.get(insert_run(store, QUICK, status="queued"))
    assert never.started_at is None
    assert results.header_times(never).startswith("queued ") and "started" not in results.header_times(never)
    ran = dataclasses.replace(never, started_at=never.created_at + 5)
    assert " · started " in results.header_times(ran)


def test_the_live_panel_and_the_diagnose_lines_say_finished_as_soon_as_the_record_does(store, monkeypatch):
    """For seconds after a run ended the Run page showed it finished (the table, from the record) and "Running" (the
    live panel, from the LiveRun, which says it is done a moment later); the Diagnose page's live lines likewise."""
    import pytest
    import streamlit as st

    from ui.panels import live, queue

    run_id = insert_run(store, QUICK)
    following(monkeypatch, run_id, phase="profiling")
    drawn = []
    monkeypatch.setattr(live, "draw_progress", lambda run, key: drawn.append(run))

    class Rerun(Exception):
        pass

    def rerun():
        raise Rerun

    monkeypatch.setattr(st, "rerun", rerun)
    live.run_panel(run_id, store)
    assert len(drawn) == 1 and queue.live_ids([run_id], store) == [run_id]
    store.finish(run_id, result={"device": "cpu", "speedup": 1.2})  # the LiveRun still says it is not done
    with pytest.raises(Rerun):
        live.run_panel(run_id, store)
    assert len(drawn) == 1 and queue.live_ids([run_id], store) == []
