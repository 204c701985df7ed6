"""The queue in a real browser while someone else's run is timed: the instructor's Cancel shows, and
another participant's tab stops saying "running for ..." once the run has ended.

A command-line run on the app's store plays the other person's run (another process owns it, as in a workshop).
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.browser_harness import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    WAIT_MS,
    Watch,
    click_until_shown,
    serve,
)

pytestmark = pytest.mark.browser
PASSCODE = "sesame"


@pytest.fixture
def lab(tmp_path):
    """The app with an instructor passcode, and a command-line run on its store being timed for minutes."""
    with serve(tmp_path, COMPILE_LAB_INSTRUCTOR_PASSCODE=PASSCODE,
               COMPILE_LAB_CACHE_DIR=str(tmp_path / "cache")) as url:
        cli = subprocess.Popen(
            [sys.executable, "-m", "tcore", "run", "--model", "captioner", "--preset", "tiny", "--batch-size", "2",
             "--device", "cpu", "--backend", "eager", "--timed-s", "300", "--rounds", "2", "--quiet"],
            cwd=ROOT, env=dict(os.environ, COMPILE_LAB_DB=str(tmp_path / "runs.sqlite"),
                               COMPILE_LAB_CACHE_DIR=str(tmp_path / "cache")),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            yield url, cli
        finally:
            try:
                os.killpg(cli.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                cli.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(cli.pid, signal.SIGKILL)


def test_the_instructors_cancel_shows_and_the_end_reaches_every_tab(lab):
    from playwright.sync_api import expect, sync_playwright

    url, cli = lab
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        teacher = browser.new_context(viewport={"width": 1440, "height": 1400}).new_page()
        ada = browser.new_context(viewport={"width": 1440, "height": 1400}).new_page()
        watches = [Watch(teacher, url), Watch(ada, url)]
        teacher.goto(f"{url}/system?me=teacher~0001.00000000c0ffee00")
        teacher.get_by_label("Instructor passcode", exact=True).and_(teacher.locator("input")).fill(PASSCODE)
        teacher.get_by_role("button", name="Unlock").click()
        teacher.get_by_role("button", name="Pause the queue").wait_for(timeout=WAIT_MS)
        ada.goto(f"{url}/?me=ada~0002.00000000c0ffee00")
        ada.get_by_text("Run an experiment", exact=True).wait_for(timeout=WAIT_MS)
        # the command-line run shows up as running (the queue redraws every 10 s while idle, then every 2 s)
        expect(ada.get_by_text("running", exact=True).first).to_be_visible(timeout=WAIT_MS)
        assert ada.get_by_role("button", name="Cancel").count() == 0  # not hers: no button at all
        teacher.get_by_role("link", name="Run").click()
        expect(teacher.get_by_text("running", exact=True).first).to_be_visible(timeout=WAIT_MS)

        # another person's run: asked first. Once in a quiet full run the first click never brought the question up
        # (its confirmation did not show in 300 s): clicked again, as a person would, with a warning.
        confirm = teacher.get_by_role("button", name="Cancel their run")
        click_until_shown(teacher, teacher.get_by_role("button", name="Cancel").first, confirm)
        confirm.click()
        clicked = time.monotonic()
        # That the click's own redraw says so, not a refresh tick, is tests/test_idle.py's to prove (AppTest): a wait
        # here would be shorter than a tick only on a quiet machine. This checks it happens in a real browser. On a
        # quiet machine the owner can end the run before the page redraws, so "cancelling" may never be drawn: the
        # end counts too, and the command line's exit below says the cancel (not the run's own end) did it.
        cancelling = teacher.get_by_text("cancelling", exact=True)
        ended = teacher.get_by_text("Nothing is running or waiting", exact=False)
        expect(cancelling.or_(ended).first).to_be_visible(timeout=WAIT_MS)
        shown_s = time.monotonic() - clicked
        teacher.screenshot(path=str(ARTIFACTS / "idle-instructor-cancelling.png"))
        assert cli.wait(180) != 0  # its owner stopped the worker: the command line says the run failed (cancelled)
        # Every tab stops saying "running for ..." within a couple of refreshes of the end.
        for page in (ada, teacher):
            expect(page.get_by_text("Nothing is running or waiting", exact=False).first).to_be_visible(timeout=WAIT_MS)
            assert page.get_by_text("running", exact=True).count() == 0
        ada.screenshot(path=str(ARTIFACTS / "idle-participant-after-cancel.png"))
        print(f"cancelling or the end shown {shown_s:.2f} s after the click")
        for watch in watches:
            assert not watch.problems(), watch.problems()
        browser.close()
