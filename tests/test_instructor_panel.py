"""The instructor's panel on the System page (ui.panels.instructor): what it says stays true while the page sits open.
"""
import time

from streamlit.testing.v1 import AppTest

from tcore.lab.policy import guards, limits
from tcore.lab.run import runs
from tcore.store import RunStore
from ui.words.store_words import plain


def test_a_paused_queue_says_since_when_by_the_clock_not_how_long_ago(tmp_path, monkeypatch):
    """The panel is drawn once, beside the queue box that ticks on: "Paused 0 s ago" stayed on it for minutes while
    the queue box said "paused 3 min 10 s ago" (seen in a browser walk).
    A clock time cannot go stale."""
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv("COMPILE_LAB_INSTRUCTOR_PASSCODE", "sesame")
    store = RunStore()
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    at.switch_page("app_pages/system.py").run()
    at.text_input(key="instructor_attempt").set_value("sesame")
    next(b for b in at.button if b.label == "Unlock").click().run()
    try:
        at.button(key="instructor_pause").click().run()
        since = runs.paused_since(store)
        assert since is not None
        said = "\n".join(str(m.value) for m in at.markdown)
        assert f"Paused since {time.strftime('%H:%M:%S', time.localtime(since))}" in said
        assert "ago" not in said.split("Paused since")[1].split("\n")[0]
        # the queue box beside it too: "paused 3 min ago" stood still between its redraws while its rows ticked on
        clock = time.strftime('%H:%M:%S', time.localtime(since))
        (paused,) = [str(w.value) for w in at.warning if "paused the queue" in str(w.value)]
        assert paused.startswith(f"The instructor paused the queue at {clock} (the server's clock): ") and " ago" \
            not in paused
    finally:
        runs.pause(store, False)


def test_an_absurd_limit_typed_in_the_panel_is_refused_in_a_sentence_and_not_applied(tmp_path, monkeypatch):
    store, at = _unlocked_with_the_files_limits(tmp_path, monkeypatch)
    at.number_input(key="instructor_max_run_s").set_value(1e12)
    next(b for b in at.button if b.label == "Apply to everyone").click().run()
    assert not at.exception, at.exception
    said = "\n".join(str(e.value) for e in at.error)
    assert "max_run_s = 1000000000000.0: it must be a positive number of seconds, at most 604800 (a week)" in said
    assert limits.load(store=store).max_run_s == limits.Limits().max_run_s


def test_the_limits_form_shows_the_limits_in_force_after_apply_and_after_going_back_to_the_file(tmp_path,
                                                                                               monkeypatch):
    """The fields kept the applied values after "Back to the file's limits", and Most memory showed 0.50 beside a
    ticked "No limit": they are refilled from the limits in force, and a field with no limit is empty."""
    store, at = _unlocked_with_the_files_limits(tmp_path, monkeypatch)
    default = limits.Limits()
    assert at.number_input(key="instructor_max_memory_gib").value is None  # no limit: empty, not 0.50
    assert at.checkbox(key="instructor_max_memory_gib_none").value is True
    at.number_input(key="instructor_max_run_s").set_value(600.0)
    at.number_input(key="instructor_max_memory_gib").set_value(2.0)
    at.checkbox(key="instructor_max_memory_gib_none").uncheck()
    next(b for b in at.button if b.label == "Apply to everyone").click().run()
    assert not at.exception, at.exception
    assert (limits.load(store=store).max_run_s, limits.load(store=store).max_memory_gib) == (600.0, 2.0)
    assert at.number_input(key="instructor_max_run_s").value == 600.0
    assert at.checkbox(key="instructor_max_memory_gib_none").value is False
    next(b for b in at.button if b.label == "Back to the file's limits").click().run()
    assert not at.exception, at.exception
    assert limits.load(store=store).max_run_s == default.max_run_s
    assert at.number_input(key="instructor_max_run_s").value == default.max_run_s  # not the 600 applied before
    assert at.number_input(key="instructor_max_memory_gib").value is None
    assert at.checkbox(key="instructor_max_memory_gib_none").value is True


def _unlocked_with_the_files_limits(tmp_path, monkeypatch) -> tuple[RunStore, AppTest]:
    """The System page, unlocked, in a lab whose limits are the defaults: an empty settings file, none from the
    environment."""
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv("COMPILE_LAB_INSTRUCTOR_PASSCODE", "sesame")
    for var in limits.ENV.values():
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COMPILE_LAB_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    store = RunStore()
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    at.switch_page("app_pages/system.py").run()
    at.text_input(key="instructor_attempt").set_value("sesame")
    next(b for b in at.button if b.label == "Unlock").click().run()
    return store, at


def test_an_unlock_clicked_just_before_a_move_to_another_page_holds_there(tmp_path, monkeypatch):
    """Unlock, then at once a click on Compare in the sidebar: the server handled both clicks in one run of the
    Compare page (Streamlit merges a rerun request that comes in before the last one ran), which never reads the
    System page's button, so the unlock was lost and the sidebar never said "instructor" (a browser test on a loaded
    machine). The button's callback runs before whichever page is drawn; a wrong passcode is still said on the System
    page, and the guard still counts it."""
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv("COMPILE_LAB_INSTRUCTOR_PASSCODE", "sesame")
    monkeypatch.setattr(guards, "PASSCODE_GUARD", guards.PasscodeGuard())  # this test's tries stay its own
    RunStore()
    at = AppTest.from_file("../app.py", default_timeout=300).run()

    def unlock_then_compare(attempt: str) -> str:
        """What the sidebar's "You" line says on Compare after Unlock and the move, handled in one run."""
        at.switch_page("app_pages/system.py").run()
        at.text_input(key="instructor_attempt").set_value(attempt)
        next(b for b in at.button if b.label == "Unlock").click()
        at.switch_page("app_pages/compare.py").run()
        assert not at.exception, at.exception
        return next(str(c.value) for c in at.sidebar.caption if str(c.value).startswith("You: "))

    assert "instructor" not in unlock_then_compare("wrong")
    at.switch_page("app_pages/system.py").run()
    assert [e.value for e in at.error] == ["That is not the passcode."]  # said where it was typed
    assert "instructor" in unlock_then_compare("sesame")
    at.switch_page("app_pages/system.py").run()
    assert "instructor_pause" in [b.key for b in at.button] and not at.error


def test_a_negative_largest_batch_is_refused_in_a_sentence_not_stored_as_no_limit(tmp_path, monkeypatch):
    """-1 in Largest batch was stored as "no limit": the field's smallest value was its min_value, and Streamlit
    drops a number below that, which left the field empty, read as none."""
    store, at = _unlocked_with_the_files_limits(tmp_path, monkeypatch)
    for bad in (-1, 0):
        at.number_input(key="instructor_max_batch_size").set_value(bad)
        next(b for b in at.button if b.label == "Apply to everyone").click().run()
        assert not at.exception, at.exception
        said = "\n".join(str(e.value) for e in at.error)
        assert f"Nothing was changed: Largest batch must be at least 1 sample, not {bad}." in said, said
        assert limits.load(store=store).max_batch_size == limits.Limits().max_batch_size


def test_apply_says_what_it_applied_beside_the_form(tmp_path, monkeypatch):
    store, at = _unlocked_with_the_files_limits(tmp_path, monkeypatch)
    at.number_input(key="instructor_max_run_s").set_value(600.0)
    next(b for b in at.button if b.label == "Apply to everyone").click().run()
    assert not at.exception, at.exception
    said = "\n".join(str(s.value) for s in at.success)
    assert "Applied to everyone at " in said and ": Longest run 900 s → 600 s. They apply to the next run" in said
    next(b for b in at.button if b.label == "Apply to everyone").click().run()  # the same values again
    assert "no limit changed" in "\n".join(str(s.value) for s in at.success)


def test_enter_in_a_limit_field_applies_nothing_and_what_was_applied_reads_in_good_plurals(tmp_path, monkeypatch):
    """Enter in a field of the limits form applied it to the whole room at once (a form submits on Enter), and the
    click meant for it then read "no limit changed"; "1 runs" read so. Only the form's buttons apply
    (tests/test_browser_buttons.py presses Enter in Chromium)."""
    store, at = _unlocked_with_the_files_limits(tmp_path, monkeypatch)
    (form,) = [f for f in at.get("form") if f.proto.form.form_id == "instructor_limits"]
    assert form.proto.form.enter_to_submit is False
    at.number_input(key="instructor_max_queued_per_session").set_value(1)
    next(b for b in at.button if b.label == "Apply to everyone").click().run()
    said = "\n".join(str(s.value) for s in at.success)
    assert f"Runs one person may have waiting {limits.Limits().max_queued_per_session} runs → 1 run." in said, said


def test_the_instructors_cancel_of_another_persons_run_asks_first(tmp_path, monkeypatch):
    from tcore.lab.queue import scheduler
    from tests.helpers import QUICK

    store, at = _unlocked_with_the_files_limits(tmp_path, monkeypatch)
    runs.pause(store, True)  # the run stays queued
    theirs = store.queue.enqueue(QUICK, device="cpu", owner="ada~0123", proc=scheduler.this_process(), timeout_s=60)
    try:
        at.run()
        at.button(key=f"system_queue_cancel_{theirs}").click().run()
        assert not at.exception, at.exception
        assert store.get(theirs).status == "queued"  # not yet: the instructor is asked first
        said = "\n".join(str(m.value) for m in at.markdown)
        assert f"run {plain(QUICK.label)} · {theirs[-6:]}? It leaves the queue and never starts" in said
        at.button(key=f"system_queue_keep_{theirs}").click().run()
        assert store.get(theirs).status == "queued" and not [b for b in at.button if "_confirm_" in (b.key or "")]
        at.button(key=f"system_queue_cancel_{theirs}").click().run()
        at.button(key=f"system_queue_confirm_{theirs}").click().run()
        assert not at.exception, at.exception
        assert store.get(theirs).error_kind == "cancelled"
        assert "cancelled by the instructor" in store.get(theirs).error["message"]
    finally:
        runs.pause(store, False)


def test_the_limits_form_shows_seconds_without_trailing_decimals(tmp_path, monkeypatch):
    """'Longest run (s)' read "900.00": a whole number of seconds reads as one."""
    _, at = _unlocked_with_the_files_limits(tmp_path, monkeypatch)
    field = at.number_input(key="instructor_max_run_s")
    assert field.proto.format == "%g"
