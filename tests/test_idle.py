"""Idle tabs cost next to nothing (a room leaves dozens open), and the queue's words lead with when a run
starts (what a waiting participant asks first).

The store is read once per change for every session (tcore.store.changes); Streamlit's per-rerun garbage
collection and file polling are off; the queue redraws fast only while runs are under way; Cancel redraws
the queue on the click itself and is not drawn beside a run the viewer may not cancel.
"""
import re
import sqlite3
import tomllib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tcore.lab.queue import scheduler, waiting
from tcore.lab.queue.waiting import Wait
from tcore.store import RunStore
from tcore.store.changes import reads, store_reads
from tests.helpers import QUICK

ROOT = Path(__file__).resolve().parent.parent


def test_the_store_is_read_once_per_change_for_every_session(store):
    """Twenty tabs asking the same question between two changes of the file make one read, not twenty."""
    proc = scheduler.this_process()
    before = store_reads(store)
    for _ in range(20):
        assert reads(RunStore(store.path)).queue.running_and_queued(proc.host) == []
    assert store_reads(store) == before + 1
    # another connection
    run_id = store.queue.enqueue(QUICK, device="cpu", owner="ada~0001.00000000c0ffee00", proc=proc, timeout_s=60)
    assert [r.id for r in reads(store).queue.running_and_queued(proc.host)] == [run_id]  # the change is seen at once
    assert store_reads(store) == before + 2
    with sqlite3.connect(store.path) as db:  # a write from anywhere else, e.g. another process
        db.execute("UPDATE runs SET label='renamed' WHERE id=?", (run_id,))
    assert reads(store).get(run_id).label == "renamed"
    with pytest.raises(KeyError):  # a run that is not there is said so each time, not remembered
        reads(store).get("nope")


def test_streamlit_neither_collects_garbage_nor_polls_files_on_every_rerun():
    """Each of these cost an idle Run-page tab most of its server time (bench/idle_tabs.py, BENCHMARKS.md)."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False
    assert config["server"]["fileWatcherType"] == "none"


@pytest.mark.parametrize("wait, head, reason", [
    (Wait(95.0, 1200.0), "starts in about 1 min 30 s", "runs like the ones ahead took"),
    (Wait(None, 862.0, "a run ahead has run 38 s, past the 17 s that runs like it took"),
     "no estimate: a run ahead is overdue", "A run ahead has run 38 s, past the 17 s"),
    (Wait(None, 180.0), "no estimate yet, as nothing finished here; at most 3 min", "No estimate yet"),
    # The walk's first estimate, #2 behind two tiny runs before any had finished: a typical wait cannot be had, and
    # the worst case comes rounded up, not as "starts within 27 min 53 s at the latest".
    (Wait(None, 1673.0), "no estimate yet, as nothing finished here; at most 30 min", "starts within 30 min"),
    (Wait(88.0, 1673.0), "starts in about 1 min 30 s", "starts within 30 min"),
    (Wait(0.2, 300.0), "starts as soon as the device is free", "any moment"),
    (None, "no estimate yet", "has not placed"),
])
def test_the_wait_leads_with_when_it_starts_and_keeps_the_reason_for_the_hover(wait, head, reason):
    said, why = waiting.wait_words(wait)
    assert said == head
    assert reason in why
    assert len(said) < 60  # a few words: the reason is on hover, not in the line
    assert not re.search(r"min (?!30 s)\d+ s", said + why)  # rounded: minutes carry no seconds but a half


def test_the_command_line_says_the_wait_as_the_pages_do():
    source = (ROOT / "tcore" / "cli.py").read_text()
    assert "waiting.wait_words(" in source and "at most" not in source  # one copy of the words


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    return RunStore()


def queued_by_someone_else(store: RunStore, owner: str, *, running: bool = False) -> str:
    """A run in the queue that no scheduler will start: this process owns it but never submitted it."""
    proc = scheduler.this_process()
    run_id = store.queue.enqueue(QUICK, device="cpu", owner=owner, proc=proc, timeout_s=60)
    if running:
        assert store.queue.claim_next(proc, "cpu", ["cpu"], {run_id}) == (run_id, "cpu")
    return run_id


def run_page(me: str) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.query_params["me"] = me
    return at.run()


def markdown(at: AppTest) -> str:
    return "\n".join(str(m.value) for m in at.markdown)


def test_no_cancel_button_beside_someone_elses_run_and_the_wait_says_when_first(db):
    theirs = queued_by_someone_else(db, "bob~0002.00000000c0ffee00", running=True)
    mine = queued_by_someone_else(db, "ada~0001.00000000c0ffee00")
    at = run_page("ada~0001.00000000c0ffee00")
    assert not at.exception
    assert not [b for b in at.button if b.key == f"run_queue_cancel_{theirs}"]  # hidden, not greyed
    assert at.button(key=f"run_queue_cancel_{mine}")
    line = next(m for m in at.markdown if "#1 in the queue" in m.value)
    assert line.value.startswith("**#1 in the queue** · ")
    assert "(" not in line.value.split("·")[1]  # no clause in brackets: the reason is the hover's
    assert "runs like the ones ahead" in line.proto.help or "nothing to go on" in line.proto.help  # ... there it is


def test_cancel_in_the_queue_shows_on_the_click_itself(db):
    """The row changes in the redraw that the click causes, not one refresh later."""
    mine = queued_by_someone_else(db, "ada~0001.00000000c0ffee00")
    at = run_page("ada~0001.00000000c0ffee00")
    at.button(key=f"run_queue_cancel_{mine}").click().run()
    assert not at.exception
    assert db.get(mine).error_kind == "cancelled"
    assert "in the queue**" not in markdown(at)


def test_the_instructors_cancel_of_a_running_run_shows_at_once(db, monkeypatch):
    """A run being timed in another process: its owner stops the worker, which takes a while; every tab says it
    is being cancelled from the click on, and nobody is offered the button again meanwhile."""
    monkeypatch.setenv("COMPILE_LAB_INSTRUCTOR_PASSCODE", "sesame")
    running = queued_by_someone_else(db, "bob~0002.00000000c0ffee00", running=True)
    at = run_page("teacher~0003.00000000c0ffee00")
    at.session_state["instructor"] = "sesame"
    at.run()
    at.button(key=f"run_queue_cancel_{running}").click().run()  # another person's run: asked first
    at.button(key=f"run_queue_confirm_{running}").click().run()
    assert not at.exception
    assert "**cancelling**" in markdown(at)
    assert not [b for b in at.button if b.key == f"run_queue_cancel_{running}"]
    other_tab = run_page("carol~0004.00000000c0ffee00")
    assert "**cancelling**" in markdown(other_tab)


# --- the wait estimate (it once read 2-4x too low while runs were queued) -------------------------------------

def test_a_longer_timed_stage_is_expected_to_take_longer_than_the_runs_it_is_estimated_from():
    quick = QUICK.replace(timed_steps=None, timed_s=4.0).to_dict()
    long = {**quick, "timed_s": 60.0, "seed": 1}  # no earlier run of exactly this: estimated from `quick`
    history = [(quick, 30.0), (quick, 34.0)]
    assert waiting.expected_duration(quick, history) == 32.0
    assert waiting.expected_duration(long, history) == 32.0 - 2 * 4.0 + 2 * 60.0  # eager and compiled, 60 s each


def test_a_shape_schedule_is_estimated_from_runs_that_compiled_like_it_not_from_quick_ones():
    plain = QUICK.to_dict()
    shapes = {**plain, "shape_count": 6, "dynamic": False}
    history = [(plain, 17.0), (plain, 17.0), ({**shapes, "seed": 3}, 82.0)]  # the 17 s against 82 s
    assert waiting.expected_duration(shapes, history) == 82.0


def test_runs_that_crashed_or_were_refused_at_start_do_not_shorten_the_estimate(store):
    proc = scheduler.this_process()
    ids = [store.queue.enqueue(QUICK, device="cpu", owner="ada~0001.00000000c0ffee00", proc=proc, timeout_s=600)
           for _ in range(3)]
    for run_id in ids:
        assert store.queue.claim_next(proc, "cpu", ["cpu"], {run_id})
        if run_id == ids[0]:
            store.finish(run_id, result={"speedup": 1.2}, env={})
        else:
            store.finish(run_id, error={"type": "error", "kind": "timeout" if run_id == ids[1] else "crashed",
                                        "message": "x"})
    _, _, history = store.queue.queue_state(proc.host, "cpu")
    assert len(history) == 2  # the finished one and the one stopped at its time limit; not the crash


def test_the_load_test_reports_estimated_against_actual_waits():
    source = (ROOT / "bench" / "load" / "report.py").read_text()  # the load test's report (bench/load_test.py)
    assert "estimated against actual wait" in source
