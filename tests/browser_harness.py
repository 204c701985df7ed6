"""What every browser test needs: a Chromium page watched for errors, failed or refused requests and addresses
outside the app (Watch), the app served on a free port over a store of its own (serve, the `server` fixture), the Run
page opened (open_run_page), charts waited for until they hold still (settle_charts), and a click repeated until the
page shows it took (click_until_shown). tests/app_harness.py is the same for AppTest; the tests import from here.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
# How long any wait in the browser may take before the test calls it a hang. Each ends as soon as what it waits for
# shows; on a 2-core machine loaded by something else a fresh server's first page can take minutes.
WAIT_MS = 300_000
# Tall enough that the whole Run page fits: Streamlit scrolls inside the page, so a full-page
# screenshot would show only the first screen.
VIEWPORT = {"width": 1600, "height": 2600}


class Watch:
    """What one browser page logs as an error or warning, fails to load, gets refused (status >= 400), and
    every address it asks for: a workshop's network may reach nothing outside the app's own server. A watched page
    waits up to WAIT_MS for anything."""

    # Opening a page by its address (.../compare), Streamlit's frontend first looks for its server under the
    # page's path, in case the app is served below a prefix: <page>/_stcore/health and <page>/_stcore/host-config
    # get a 404 (the server answers so on purpose), each logged as a console error, and 100 ms later it connects
    # at the root. The frontend takes that path from window.location unless index.html sets
    # window.__streamlit.BACKEND_BASE_URL, which an app's script runs too late to do; no config option changes it.
    # See docs/using.md, "Offline and the browser console".
    PAGE_PATH_PROBE = re.compile(r"^/[A-Za-z0-9_-]+/_stcore/(health|host-config)$")
    NOT_FOUND = "Failed to load resource: the server responded with a status of 404 (Not Found)"

    def __init__(self, page, server: str):
        page.set_default_timeout(WAIT_MS)  # every wait and navigation on a watched page: a bound against hangs only
        page.set_default_navigation_timeout(WAIT_MS)
        self.server = server
        self.console, self.failed, self.refused, self.asked = [], [], [], []
        page.on("console", lambda m: self.console.append((m.type, m.text, m.location.get("url", "")))
                if m.type in ("error", "warning") else None)
        # an uncaught exception in a page's script is no console message: it comes as a page error
        page.on("pageerror", lambda e: self.console.append(("uncaught", str(e), page.url)))
        page.on("requestfailed", lambda r: self.failed.append((r.url, r.failure)))
        page.on("response", lambda r: self.refused.append((r.status, r.url)) if r.status >= 400 else None)
        page.on("request", lambda r: self.asked.append(r.url))

    def probe(self, url: str) -> bool:
        return url.startswith(self.server) and bool(self.PAGE_PATH_PROBE.match(url[len(self.server):]))

    def problems(self) -> list[str]:
        out = [f"{status} {url}" for status, url in self.refused if not (status == 404 and self.probe(url))]
        out += [f"console {kind}: {text} ({url})" for kind, text, url in self.console
                if not (kind == "error" and text == self.NOT_FOUND and self.probe(url))]
        # A download button fetches its file once as it is drawn, to check that the server has it; leaving the
        # page, or a rerun that draws the button again, aborts that fetch. The click itself is not affected.
        out += [f"failed: {url} ({failure})" for url, failure in self.failed
                if not (failure == "net::ERR_ABORTED" and url.startswith(f"{self.server}/media/"))]
        out += [f"outside the app: {url}" for url in self.asked if not url.startswith((self.server, "data:", "blob:"))]
        return out


# Where every chart's text sits: plotly draws a chart, then lays it out again (legend, titles, margins) a moment later.
CHART_LAYOUT = """() => JSON.stringify(Array.from(document.querySelectorAll('.js-plotly-plot')).map(plot =>
  Array.from(plot.querySelectorAll('.main-svg, .gtitle, .legend, .g-xtitle, .g-ytitle, .annotation, .bartext'))
    .map(e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height].map(Math.round); })))"""


def settle_charts(page, *, still_s: float = 0.5, limit_s: float = WAIT_MS / 1000) -> None:
    """Wait until the page's charts have stopped moving: their text in the same places over `still_s`. A fixed pause
    would be too short on a loaded machine; `limit_s` only stops a hang."""
    deadline = time.monotonic() + limit_s
    before = page.evaluate(CHART_LAYOUT)
    while True:
        time.sleep(still_s)
        now = page.evaluate(CHART_LAYOUT)
        if now == before:
            return
        assert time.monotonic() < deadline, f"the charts were still moving after {limit_s} s"
        before = now


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(folder: Path, **env: str) -> Iterator[str]:
    """`streamlit run app.py` on a free port with its store in `folder` (and `env` set): its address, until the end.

    Without spare workers, as `make test`'s first part: a spare is a fork server (torch imported, about 7 s of a core
    here) and a child importing the model libraries (seconds more), started with the server whether or not its test
    runs anything: most browser tests run nothing, or one run, and the 21 servers' fork servers took 145 of the
    browser part's 950 CPU-s (2026-11-29, this 2-core machine). A run's worker is forked when the run starts, the fork
    server started then (tests/test_worker.py has the spares)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian package 'chromium'): the browser test needs it")
    env = {**os.environ, "COMPILE_LAB_SPARE_WORKERS": "0", "COMPILE_LAB_DB": str(folder / "runs.sqlite"), **env}
    deadline = time.time() + WAIT_MS / 1000
    for attempt in range(3):
        # A port free a moment ago can be taken before the server binds it (browser tests run side by side, each
        # serving its own app): the server then exits saying so, and another free port is tried.
        port = free_port()
        log = open(folder / "streamlit.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port",
             str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        while True:
            # Ours only once its own log says it listens on the port: another test's server that took the port
            # would answer the health check as well.
            try:
                if (url in (folder / "streamlit.log").read_text()
                        and urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200):
                    break
            except OSError:
                pass  # not listening yet
            if proc.poll() is not None:
                break
            assert time.time() < deadline, f"streamlit did not answer /_stcore/health within {WAIT_MS / 1000:g} s"
            time.sleep(0.5)
        if proc.poll() is None:
            break
        log.close()
        said = (folder / "streamlit.log").read_text()
        assert ("is not available" in said or "already in use" in said) and attempt < 2, said
    try:
        yield url
    finally:
        # The server's group; a run worker has its own group and, tiny as the runs here are, ends within seconds.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # already gone
        log.close()


@pytest.fixture
def server(tmp_path):
    with serve(tmp_path) as url:
        yield url


def click_until_shown(page, target, shown, attempts: int = 5) -> None:
    """Click `target` until the page shows `shown` (words, a pattern, or a locator). A person clicks again: once in
    a full loaded run a click on a radio's label landed while the page redrew and was lost; the instructor's Cancel in
    the queue's rows (a fragment redrawn every 2 s) once never brought up its confirmation, and once in ten loaded
    walks never said "cancelling". A choice already made changes nothing when clicked again; a button that a slow
    click has already disabled is only waited on. A click needed twice is a warning in the test report, to keep a
    recurrence in sight."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    wanted = shown if hasattr(shown, "wait_for") else page.get_by_text(shown)  # a locator, or words
    for attempt in range(attempts):
        if attempt == 0 or (not wanted.first.is_visible() and target.is_enabled()):
            target.click()
            if attempt:
                warnings.warn(f"a click was not taken within {WAIT_MS // attempts / 1000:g} s; clicked again "
                              f"(attempt {attempt + 1} of {attempts})")
        try:
            wanted.first.wait_for(timeout=WAIT_MS // attempts)
            return
        except PlaywrightTimeout:
            continue
    # What the page showed instead, for the next time this happens (twice in loaded full runs, never alone): the
    # screenshot, and the page's text in the failure itself
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "click-until-shown-failed.png"
    page.screenshot(path=str(shot), full_page=True)
    said = " | ".join(line for line in page.inner_text("body").splitlines() if line.strip())[:3000]
    raise AssertionError(f"{shown!r} never showed after {attempts} clicks ({shot}); the page said: {said}")


def open_run_page(p, server: str):
    """Chromium opened on the app's Run page, drawn: (browser, page, the page's error watch)."""
    browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport=VIEWPORT)
    watch = Watch(page, server)
    page.goto(server)
    page.get_by_text("Run an experiment").wait_for(timeout=WAIT_MS)
    return browser, page, watch
