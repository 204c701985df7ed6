"""How long each page of the app takes to load in a real browser, end to end, and which part of it is whose; then how
long each lazy tab takes from its click to its charts drawn.

    python bench/page_loads.py                      # every page, 5 loads each, first visits and reloads
    python bench/page_loads.py --pages run-owner compare --loads 8 --json out.json

Starts `streamlit run serve.py` (as `make app` does) on its own store, seeds it with three finished tiny CPU
runs of one participant (eager and two compiled: the Run page then shows her result, Compare three runs, Diagnose
its charts), then opens each page in Chromium, over and over, alternating a first visit (a new browser context:
nothing cached) and a reload (the same tab again: the browser holds Streamlit's scripts). For each load it
reads, from the request:

    document   the HTML and Streamlit's scripts fetched and parsed (Navigation Timing's DOMContentLoaded)
    title      the page's title drawn by its script (the first thing a person reads)
    settled    the script has finished (the app's "running" state is over) and every chart on the page is drawn
               (each Plotly chart holds its SVG): what "loaded" means here, end to end

and the server's CPU seconds during the load. Chromium runs on the same machine as the server: on a 2-core machine
its own work competes with the server's, so the figures are an upper bound for a participant's laptop.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from idle_tabs import CHROMIUM, CHROMIUM_ARGS, REPO, SEED_OWNER, cpu_s, free_port, scratch, start_app  # noqa: E402

PAGES = {  # name: (path, who opens it, its title)
    "run-owner": ("/", SEED_OWNER, "Run an experiment"),
    "run-guest": ("/", "guest-0001", "Run an experiment"),
    "compare": ("/compare", SEED_OWNER, "Compare runs"),
    "diagnose": ("/diagnose", SEED_OWNER, "Diagnose"),
    "sweep": ("/sweep", SEED_OWNER, "Sweep"),
    "system": ("/system", SEED_OWNER, "System"),
}
SEEDS = ("eager", "aot_eager", "inductor")  # the owner's three runs' backends; her Run page shows the last
# True once the script has ended and the page's `expected` Plotly charts have each drawn their SVG (Streamlit loads
# its Plotly component when the first chart arrives, so until then a chart has no element at all to wait on).
SETTLED_JS = """(expected) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')];
  return charts.length >= expected && charts.every(c => c.querySelector('.main-svg'));
}"""


# The lazy tabs timed per page, after its loads: (tab, a chart title in it). Its charts are drawn only once clicked.
TABS = {
    "run-owner": [("Memory and energy", "Peak memory (GiB)"), ("Compile phases", "Compile time by phase"),
                  ("Speed", "Throughput (samples/s)")],
    "compare": [("Energy and trade-off", "Compile time vs speedup"),
                ("Cold vs warm start", "Compile time: cold vs warm")],
    "diagnose": [("Cold vs warm start", "Compile time: whole model vs regional")],
}
# The chart titled `title` has drawn its SVG and the script has ended: the clicked tab's rerun is done.
TAB_DRAWN_JS = """(title) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  return [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].some(
    c => c.querySelector('.main-svg') && (c.querySelector('.gtitle') || {}).textContent?.startsWith(title));
}"""


def tab_opens(page, name: str, timeout_ms: float) -> list[dict]:
    """Click each of the page's lazy tabs in turn: seconds from the click until its chart is drawn."""
    rows = []
    for tab, title in TABS.get(name, []):
        t0 = time.perf_counter()
        page.get_by_role("tab", name=tab, exact=True).click()
        page.wait_for_function(TAB_DRAWN_JS, arg=title, timeout=timeout_ms, polling=20)
        rows.append({"page": name, "tab": tab, "drawn_s": time.perf_counter() - t0,
                     "charts": page.locator('[data-testid="stPlotlyChart"]').count()})
        print(f"{name:>10} tab {tab!r}: click to its charts drawn {rows[-1]['drawn_s']:.2f} s, "
              f"{rows[-1]['charts']} charts on the page", flush=True)
        time.sleep(1.0)
    return rows


# Page switches from the sidebar timed after the loads: (from, to), both as SEED_OWNER, from a page with no chart.
SWITCHES = (("system", "run-owner"), ("system", "compare"))
NAV_LABEL = {"run-owner": "Run", "compare": "Compare"}  # the sidebar's links (app.py)


def switch(browser, server: str, start: str, to: str, expected: int, timeout_ms: float) -> float:
    """A fresh tab on `start`, settled and left idle 3 s (as a person reads it), then `to` from the sidebar: seconds
    from the click until `to` has settled with its `expected` charts drawn."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = ctx.new_page()
    path, me, title = PAGES[start]
    page.goto(f"{server}{path}?me={me}", wait_until="commit", timeout=timeout_ms)
    page.get_by_text(title, exact=True).first.wait_for(timeout=timeout_ms)
    page.wait_for_function(SETTLED_JS, arg=0, timeout=timeout_ms, polling=20)
    time.sleep(3)
    t0 = time.perf_counter()
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=re.compile(NAV_LABEL[to])).first.click()
    page.get_by_text(PAGES[to][2], exact=True).first.wait_for(timeout=timeout_ms)
    page.wait_for_function(SETTLED_JS, arg=expected, timeout=timeout_ms, polling=20)
    took = time.perf_counter() - t0
    ctx.close()
    return took


def seed(env: dict, backend: str) -> subprocess.Popen:
    """A finished tiny CPU run of SEED_OWNER's, submitted as the app does (runs.execute)."""
    exp = (f"Experiment(model='captioner', preset='tiny', batch_size=2, device='cpu', backend={backend!r}, "
           "warmup_steps=1, timed_steps=4, rounds=2)")
    code = ("from tcore.lab.run import runs; from tcore.experiment.spec import Experiment; "
            "from tcore.store import RunStore; "
            f"runs.execute({exp}, RunStore(), owner={SEED_OWNER!r})")
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def charts_on(page, url: str, title: str, timeout_ms: float) -> int:
    """How many charts the page draws for this person: counted once, untimed, after it has had time to draw all."""
    page.goto(url, wait_until="commit", timeout=timeout_ms)
    page.get_by_text(title, exact=True).first.wait_for(timeout=timeout_ms)
    time.sleep(10)
    return page.locator('[data-testid="stPlotlyChart"]').count()


def one_load(page, url: str, title: str, server_pid: int, reload: bool, expected: int, timeout_ms: float) -> dict:
    c0, t0 = cpu_s(server_pid), time.perf_counter()
    if reload:
        page.reload(wait_until="commit", timeout=timeout_ms)
    else:
        page.goto(url, wait_until="commit", timeout=timeout_ms)
    page.get_by_text(title, exact=True).first.wait_for(timeout=timeout_ms)
    t_title = time.perf_counter() - t0
    page.wait_for_function(SETTLED_JS, arg=expected, timeout=timeout_ms, polling=20)
    t_settled = time.perf_counter() - t0
    dom = page.evaluate("() => performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd") / 1e3
    charts = page.locator('[data-testid="stPlotlyChart"]').count()
    return {"reload": reload, "document_s": dom, "title_s": t_title, "settled_s": t_settled, "charts": charts,
            "server_cpu_s": cpu_s(server_pid) - c0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", nargs="+", default=list(PAGES), choices=list(PAGES))
    parser.add_argument("--loads", type=int, default=6, help="loads per page, alternating first visit and reload")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a load may take")
    parser.add_argument("--switches", type=int, default=3, help="times each sidebar switch (SWITCHES) is timed")
    parser.add_argument("--json", help="also write every load here")
    args = parser.parse_args()

    tmp, db, env = scratch("compile-lab-pages-")
    for backend in SEEDS:
        if seed(env, backend).wait(600) != 0:
            raise SystemExit(f"the seed run with backend={backend} failed")
    port = free_port()
    app = start_app(port, env, tmp / "streamlit.log")
    server = f"http://127.0.0.1:{port}"
    rows, tabs, switches, expected = [], [], [], {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for name in args.pages:
                path, me, title = PAGES[name]
                url = f"{server}{path}?me={me}"
                ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
                expected[name] = charts_on(ctx.new_page(), url, title, args.timeout * 1e3)
                ctx.close()
                ctx = page = None
                for i in range(args.loads):
                    reload = i % 2 == 1
                    if not reload:
                        if ctx is not None:
                            ctx.close()
                        ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
                        page = ctx.new_page()
                    rows.append({"page": name, **one_load(page, url, title, app.pid, reload, expected[name],
                                                                 args.timeout * 1e3)})
                    time.sleep(1.0)  # let the tab go idle before the next load
                tabs += tab_opens(page, name, args.timeout * 1e3)  # on the last load's page
                ctx.close()
                for reload in (False, True):
                    got = [r for r in rows if r["page"] == name and r["reload"] == reload]
                    med = {k: statistics.median(r[k] for r in got) for k in ("document_s", "title_s", "settled_s",
                                                                                "server_cpu_s")}
                    print(f"{name:>10} {'reload' if reload else 'first ':>6}: settled {med['settled_s']:.2f} s "
                          f"(max {max(r['settled_s'] for r in got):.2f}), title {med['title_s']:.2f} s, document "
                          f"{med['document_s']:.2f} s, server CPU {med['server_cpu_s']:.2f} s, "
                          f"{got[0]['charts']} charts; median of {len(got)}", flush=True)
            for start, to in SWITCHES:
                if start in expected and to in expected:
                    took = [switch(browser, server, start, to, expected[to], args.timeout * 1e3)
                            for _ in range(args.switches)]
                    switches.append({"from": start, "to": to, "seconds": took})
                    print(f"{start:>10} -> {to} from the sidebar: settled {statistics.median(took):.2f} s (max "
                          f"{max(took):.2f}); median of {len(took)}", flush=True)
            browser.close()
    finally:
        os.killpg(app.pid, signal.SIGTERM)
        app.wait(20)
    print(f"machine: {os.cpu_count()} CPU cores; store {db}")
    if args.json:
        Path(args.json).write_text(json.dumps({"cores": os.cpu_count(), "loads": rows, "tabs": tabs,
                                               "switches": switches}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
