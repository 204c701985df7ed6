"""A run cancelled by the instructor says so to its owner, whichever process records its end."""
from types import SimpleNamespace

from tcore.experiment.protocol import error as error_event
from tcore.experiment.spec import Experiment
from tcore.lab.run import runs
from tcore.store.run_queue import CANCELLED_IN_QUEUE, cancel_words

EXP = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", backend="eager")
# Another process's queue (never started here): runs.cancel cannot reach a live run and asks through the store.
ELSEWHERE = SimpleNamespace(host="elsewhere", pid=1, started="0")


def test_the_instructor_cancelling_a_queued_run_is_named_in_its_message(store):
    run_id = store.queue.enqueue(EXP, device="cpu", owner="ada~1a2b", proc=ELSEWHERE, timeout_s=None)
    runs.cancel(run_id, store, owner="teacher~9f9f", instructor=True)
    rec = store.get(run_id)
    assert rec.error_kind == "cancelled"
    assert rec.error["message"] == "cancelled by the instructor while waiting in the queue; it never started"


def test_the_owner_cancelling_their_own_run_reads_as_before(store):
    run_id = store.queue.enqueue(EXP, device="cpu", owner="ada~1a2b", proc=ELSEWHERE, timeout_s=None)
    # the instructor's own run: theirs, not "by the instructor"
    runs.cancel(run_id, store, owner="ada~1a2b", instructor=True)
    assert store.get(run_id).error["message"] == CANCELLED_IN_QUEUE


def test_a_running_run_stopped_on_the_instructors_word_says_so_when_its_owner_records_the_end(store):
    run_id = store.queue.enqueue(EXP, device="cpu", owner="ada~1a2b", proc=ELSEWHERE, timeout_s=None)
    assert store.queue.claim_next(ELSEWHERE, "cpu", ["cpu"], {run_id}) == (run_id, "cpu")
    assert store.queue.request_cancel(run_id, by_instructor=True) == "running"
    assert run_id in store.queue.cancel_requests(ELSEWHERE)  # the owning process is asked to stop it, as before
    # what the owning process's launcher records once the worker is stopped
    store.finish(run_id, error=error_event("cancelled", "cancelled by the user"))
    assert store.get(run_id).error["message"] == "cancelled by the instructor"


def test_cancel_words():
    assert cancel_words("cancelled by the user before its worker started", 2) == \
        "cancelled by the instructor before its worker started"
    assert cancel_words("cancelled by the user", 1) == "cancelled by the user"
    assert cancel_words("cancelled by the user", None) == "cancelled by the user"
