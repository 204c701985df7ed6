"""The Cancel button's answer (ui.panels.queue.cancel): "Cancelled" only once the cancel is done; a cancel still under
way when the click stops waiting says "Cancelling", and if it then fails, the person who clicked is told at their next
redraw, not only the server's log. Driven in Streamlit's bare mode: the click's callback is a plain call here."""
import threading

import pytest
import streamlit as st

from tcore.lab.run import runs
from tests.helpers import HANG_S, QUICK
from ui.panels import people, queue


@pytest.fixture
def ada(monkeypatch):
    monkeypatch.setattr(people, "me", lambda: "ada~0123456789abcdef")
    monkeypatch.setattr(people, "is_instructor", lambda: False)
    queue._LATE_FAILURES.clear()
    yield
    st.session_state.pop(queue.TOAST, None)
    queue._LATE_FAILURES.clear()


def test_a_cancel_done_within_the_click_says_cancelled(ada, monkeypatch):
    asked = []
    monkeypatch.setattr(runs, "cancel", lambda run_id, store, **who: asked.append((run_id, who)) or True)
    queue.cancel("r1", store=None)
    assert asked == [("r1", {"owner": "ada~0123456789abcdef", "instructor": False})]
    assert st.session_state[queue.TOAST].startswith(queue.CANCELLED)


def test_a_cancel_refused_within_the_click_says_why(ada, monkeypatch):
    def refuse(run_id, store, **who):
        raise PermissionError(f"run {run_id} belongs to someone else")

    monkeypatch.setattr(runs, "cancel", refuse)
    queue.cancel("r1", store=None)
    assert st.session_state[queue.TOAST] == "run r1 belongs to someone else"


def test_a_slow_cancel_says_cancelling_and_its_later_failure_reaches_the_one_who_clicked(ada, monkeypatch):
    go = threading.Event()

    def slow_then_fail(run_id, store, **who):
        go.wait(60)  # let go only after the click has stopped waiting (CANCEL_WAIT_S)
        raise OSError("the run store is locked")

    monkeypatch.setattr(runs, "cancel", slow_then_fail)
    queue.cancel("r1", store=None)
    said = st.session_state[queue.TOAST]
    assert said.startswith("Cancelling") and not said.startswith(queue.CANCELLED)
    worker = next(t for t in threading.enumerate() if t.name == "cancel-r1")
    go.set()
    worker.join(60)
    assert queue._LATE_FAILURES == {"ada~0123456789abcdef": "The cancel of run r1 failed: the run store is locked"}
    queue.show_toast()  # the next redraw tells it, once
    assert queue._LATE_FAILURES == {}
    assert "r1" not in queue._CANCELLING  # the row no longer says "cancelling"


def test_a_click_on_a_row_of_a_run_that_has_ended_since_says_nothing_was_cancelled(ada, store):
    """A queue row is drawn up to a redraw before its run ends: a Cancel clicked there reaches an ended run."""
    runs.pause(store, True)  # it waits in the queue: no worker is started
    run = runs.start(QUICK, store, owner="ada~0123456789abcdef")
    run.cancel()
    assert run.wait(HANG_S).status == "failed"
    queue.cancel(run.run_id, store)
    assert st.session_state[queue.TOAST] == f"Run {run.run_id} had already ended: nothing was cancelled."
    assert store.get(run.run_id).error["message"].startswith("cancelled")  # as it ended, not changed


def test_an_answer_whose_toast_a_rerun_interrupted_is_shown_by_the_next_redraw(ada, monkeypatch):
    """Every st call is where Streamlit stops a script that has a rerun pending (another tab's sync, a fragment's
    st.rerun): it raises inside st.toast before the toast is sent. The click's answer, and a late failure, must
    wait for the next redraw rather than be lost with the stopped one."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    calls, shown = [], []

    def toast(message, **kw):
        calls.append(message)
        if len(calls) in (1, 3):  # the first try of each: a rerun was pending
            raise RerunException(None)  # what the script runner raises at a yield point then
        shown.append(message)

    monkeypatch.setattr(st, "toast", toast)
    answer = f"{queue.CANCELLED}; a running one has its worker stopped."
    late = "The cancel of run r2 failed: the run store is locked"
    st.session_state[queue.TOAST] = answer
    queue._LATE_FAILURES["ada~0123456789abcdef"] = late
    for _ in range(2):  # stopped at the answer, then at the late failure
        with pytest.raises(RerunException):
            queue.show_toast()
    queue.show_toast()
    queue.show_toast()  # nothing is left: nothing is shown twice
    assert shown == [answer, late]
    assert queue.TOAST not in st.session_state and queue._LATE_FAILURES == {}
