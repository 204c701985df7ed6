"""Who a browser is, across its tabs, in headless Chromium against `streamlit run app.py` (ui.panels.people).

- A name is the browser's: "bob" typed in a second tab used to move ada's runs to bob while the first tab (still ada)
  lost "yours", its Cancel and its runs. Now the first tab takes the name too, says so, and keeps its Cancel.
- The instructor's unlock holds for a session that starts before the page's script has written the unlock's cookie
  (late on a loaded machine): the server keeps it under the browser's Streamlit XSRF token. The cookie's writes are
  blocked here, so the test does not depend on how fast the machine is.
"""
from __future__ import annotations

import re
import time

import pytest

from tests.browser_harness import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, WAIT_MS, Watch, serve
from tests.test_browser_buttons import CANCEL_TAKEN, no_exception, queue_row

pytestmark = pytest.mark.browser

PASSCODE = "letmein"
ADA, TEACHER = "ada~4d5e.00000000feedbeef", "teacher~9e9e.00000000feedbeef"
# What a page's script cannot do before it runs: the unlock's cookie is never written.
NO_INSTRUCTOR_COOKIE = """(() => {
  const real = Object.getOwnPropertyDescriptor(Document.prototype, 'cookie');
  Object.defineProperty(Document.prototype, 'cookie', {
    configurable: true,
    get() { return real.get.call(this); },
    set(value) { if (!String(value).startsWith('compile_lab_instructor=')) real.set.call(this, value); },
  });
})();"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from tcore.store import RunStore

    folder = tmp_path_factory.mktemp("people")
    store = RunStore(folder / "runs.sqlite")
    with serve(folder, COMPILE_LAB_INSTRUCTOR_PASSCODE=PASSCODE, COMPILE_LAB_CACHE_DIR=str(folder / "cache")) as url:
        yield {"url": url, "store": store, "log": folder / "streamlit.log"}


@pytest.fixture
def browser(request, lab):
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    expect.set_options(timeout=WAIT_MS)
    failed = request.session.testsfailed
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        if request.session.testsfailed > failed:
            for n, context in enumerate(launched.contexts):
                for i, page in enumerate(context.pages):
                    page.screenshot(path=ARTIFACTS / f"people-failed-{request.node.name[:40]}-{n}-{i}.png")
            print("the server's log, last 80 lines:", *lab["log"].read_text().splitlines()[-80:], sep="\n")
        launched.close()


def open_tab(context, watches: list, url: str, heading: str):
    page = context.new_page()
    watches.append(Watch(page, url.split("/", 3)[0] + "//" + url.split("/", 3)[2]))
    page.goto(url)
    page.get_by_role("heading", name=heading).first.wait_for()
    return page


def problems(watches: list) -> list[str]:
    """What the pages' watches saw, less the script loads a reload cut short (the test reloads on purpose)."""
    return [p for w in watches for p in w.problems()
            if not (p.startswith("failed: ") and "/static/" in p and p.endswith("(net::ERR_ABORTED)"))]


def sidebar(page):
    return page.locator('[data-testid="stSidebar"]')


def click_while_queued(page, cancel, store, run_id: str, attempts: int = 5) -> None:
    """Click a queued run's Cancel until the store has the run cancelled. A click that lands while the page redraws is
    lost (a person clicks again); one that was only slow is not repeated: the next click comes only while the run is
    still waiting and its button is still there."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(attempts):
        if store.get(run_id).status != "queued":
            return
        try:
            cancel.click(timeout=WAIT_MS // attempts)
        except PlaywrightTimeout:  # the button went: the run is cancelled, or the page is still redrawing
            continue
        deadline = time.monotonic() + WAIT_MS / 1000 / attempts
        while store.get(run_id).status == "queued" and time.monotonic() < deadline:
            page.wait_for_timeout(200)
    assert store.get(run_id).status != "queued", f"the run stayed queued after {attempts} clicks on Cancel"


def test_a_name_typed_in_a_second_tab_is_the_first_tabs_too_and_its_runs_stay_its_own(browser, lab):
    from playwright.sync_api import expect

    from tcore.lab.queue import scheduler
    from tcore.lab.run import runs
    from tests.helpers import QUICK

    store, url, watches = lab["store"], lab["url"], []
    runs.pause(store, True)  # the run waits in the queue while the tabs look at it
    try:
        waiting = store.queue.enqueue(QUICK, device="cpu", owner=ADA, proc=scheduler.this_process(), timeout_s=60)
        context = browser.new_context(viewport={"width": 1440, "height": 2400})
        first = open_tab(context, watches, f"{url}/?me={ADA}", "Run an experiment")
        queue_row(first, "yours", waiting).get_by_role("button", name="Cancel").wait_for()
        expect(sidebar(first).get_by_text(re.compile(r"^You: "))).to_have_text("You: ada")

        second = open_tab(context, watches, f"{url}/?me={ADA}", "Run an experiment")  # a second tab from that address
        name = second.get_by_placeholder("e.g. Ada")
        name.fill("Bob")
        name.press("Enter")
        expect(sidebar(second).get_by_text(re.compile(r"^You: "))).to_have_text("You: Bob")
        queue_row(second, "yours", waiting).get_by_role("button", name="Cancel").wait_for()

        # The first tab, untouched, follows: its name, what it says about it, and the run still its own.
        expect(sidebar(first).get_by_text(re.compile(r"^You: "))).to_have_text("You: Bob")
        sidebar(first).get_by_text("Another tab of this browser changed its name from ada to Bob").wait_for()
        expect(first.get_by_placeholder("e.g. Ada")).to_have_value("Bob")
        cancel = queue_row(first, "yours", waiting).get_by_role("button", name="Cancel")
        click_while_queued(first, cancel, store, waiting)
        first.get_by_text(CANCEL_TAKEN).first.wait_for()
        assert store.get(waiting).owner == ADA.replace("ada~", "bob~")
        expect(second.get_by_text(re.compile(r"#1 in the queue"))).to_have_count(0)  # gone from the other tab too
        no_exception(first)
        no_exception(second)
        first.screenshot(path=ARTIFACTS / "people-renamed-in-another-tab.png")
        assert not (seen := problems(watches)), seen
    finally:
        runs.pause(store, False)


def test_an_unlock_holds_for_a_session_started_before_the_page_wrote_its_cookie(browser, lab):
    """A reload or a new tab after Unlock but before the page's script has written the unlock's cookie (late on a
    loaded machine) starts a session that the server unlocks by the browser's XSRF cookie. (A click on a page link
    keeps the session: tests/test_instructor_panel.py has an Unlock followed at once by such a move.)"""
    url, watches = lab["url"], []
    context = browser.new_context(viewport={"width": 1440, "height": 2400})
    context.add_init_script(NO_INSTRUCTOR_COOKIE)
    system = open_tab(context, watches, f"{url}/system?me={TEACHER}", "System")
    system.get_by_label("Instructor passcode", exact=True).fill(PASSCODE)
    system.get_by_role("button", name="Unlock").click()
    # exact: "Lock" alone also names the Unlock button (a substring), and the reload must come after the unlock
    system.get_by_role("button", name="Lock", exact=True).wait_for()

    system.reload()  # a new session, as a reconnect the server did not match to the old one starts
    system.get_by_role("heading", name="System").wait_for()
    sidebar(system).get_by_text("instructor", exact=True).wait_for()
    system.get_by_role("button", name="Lock", exact=True).wait_for()
    other = open_tab(context, watches, f"{url}/compare?me={TEACHER}", "Compare runs")  # and a new tab
    sidebar(other).get_by_text("instructor", exact=True).wait_for()
    assert "compile_lab_instructor" not in {c["name"] for c in context.cookies()}  # the page never wrote it

    stranger = browser.new_context()  # another browser at the same address: not the instructor
    elsewhere = open_tab(stranger, watches, f"{url}/system", "System")
    elsewhere.get_by_label("Instructor passcode", exact=True).wait_for()

    system.get_by_role("button", name="Lock", exact=True).click()
    system.get_by_label("Instructor passcode", exact=True).wait_for()
    other.reload()  # Lock revokes it for the browser's key too
    other.get_by_role("heading", name="Compare runs").wait_for()
    from playwright.sync_api import expect

    expect(sidebar(other).get_by_text(re.compile(r"^You: "))).to_have_text("You: teacher")
    no_exception(system)
    assert not (seen := problems(watches)), seen
