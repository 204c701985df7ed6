"""Runs the lab holds back for a person (one press that queues more than a person may have waiting), in Chromium: what
a press of Don't queue them did stays said while the live panel redraws itself every two seconds. Headless AppTest
runs the page whole at each step and cannot show a fragment's own redraws (tests/test_app_diagnose.py checks the
rest there)."""
import re

import pytest

from tcore.lab.run import runs
from tcore.store import RunStore
from tests.browser_harness import ARTIFACTS, WAIT_MS, open_run_page, serve

pytestmark = pytest.mark.browser


def redraws(page, count: int) -> None:
    """Wait for the live panel to redraw `count` times: each redraw says a queued run's wait anew ("waited 12 s")."""
    line = page.get_by_text(re.compile(r"in the queue · .* · waited")).first
    for _ in range(count):
        before = line.inner_text()
        page.wait_for_function("([el, text]) => el.innerText !== text", arg=[line.element_handle(), before],
                               timeout=WAIT_MS)


def test_what_don_t_queue_them_did_stays_said_as_the_live_panel_redraws(tmp_path):
    """Walk 7: the words went with the panel's next redraw, two seconds after the press, before they were read."""
    from playwright.sync_api import sync_playwright

    with serve(tmp_path, COMPILE_LAB_MAX_QUEUED_PER_SESSION="3") as server:
        runs.pause(RunStore(tmp_path / "runs.sqlite"), True)  # none starts: three wait, two are held
        with sync_playwright() as p:
            browser, page, watch = open_run_page(p, server)
            page.get_by_test_id("stSidebarNavItems").get_by_role("link", name="Diagnose", exact=True).click()
            page.get_by_role("tab", name="Recompilations").click()
            page.get_by_role("button", name="Run the strategies side by side").click()
            page.get_by_text(re.compile(r"2 more runs to queue")).wait_for(timeout=WAIT_MS)
            page.get_by_role("button", name="Don't queue them").click()
            said = page.get_by_text("2 held runs will not be queued; those queued stay, each with its Cancel.")
            said.wait_for(timeout=WAIT_MS)
            redraws(page, 3)
            assert said.count() == 1 and said.is_visible()
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=ARTIFACTS / "held-runs-let-go.png")
            assert page.locator('[data-testid="stException"]').count() == 0
            assert watch.problems() == []
            browser.close()
        runs.pause(RunStore(tmp_path / "runs.sqlite"), False)
