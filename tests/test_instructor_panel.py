"""The instructor's panel on the System page (ui.instructor): what it says stays true while the page sits open."""
import time

from streamlit.testing.v1 import AppTest

from tcore.lab import runs
from tcore.store import RunStore


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
    finally:
        runs.pause(store, False)
