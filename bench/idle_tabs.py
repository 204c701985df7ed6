"""What idle browser tabs cost the app's server: its CPU and page-load latency with N tabs open.

    python bench/idle_tabs.py                       # 1, 5 and 20 Run-page tabs, System and Compare, 20 beside a run
    python bench/idle_tabs.py --scenarios run:20 run:20+run --window 20 --json out.json

Starts `streamlit run serve.py` (as `make app` does) on its own store ($COMPILE_LAB_DB, a fresh temporary file) and a
free loopback port, seeds the store with one finished tiny CPU run (so the Compare page has something and half the tabs
are a participant with a run of their own, the other half fresh guests), then, per scenario, opens N real Chromium
browser contexts (one browser, N contexts, one tab each) on a page, waits for each to draw, lets them settle, and reads
the Streamlit server's CPU time from /proc/<pid>/stat over --window seconds (user + system, all its threads; run workers
are other processes and are not counted), as % of one core, and how long GET /_stcore/health takes meanwhile (once a
second). Page load: from the request to the page's title drawn by its script, for each tab as it opens and for one more
tab opened at the end of the window, and the server CPU that last page took (less the idle tabs' share meanwhile),
which, unlike the wall time, does not depend on what else the machine runs.

A scenario "PAGE:N" is N tabs on PAGE (run, system, compare); "PAGE:N+run" does the same while a
command-line run on the same store is being timed (captioner tiny, backend eager, timed for longer
than the window), which is what a workshop's tabs look like while someone's run is measured.
Chromium itself runs on the same machine: on a 2-core CPU its rendering competes with the server,
so latencies there are an upper bound; the server's CPU time is its own.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
PAGES = {"run": ("/", "Run an experiment"), "system": ("/system", "System"), "compare": ("/compare", "Compare runs")}
NAV_LABEL = {"run": "Run", "system": "System", "compare": "Compare"}  # the sidebar's links (app.py)
SEED_OWNER = "ada~0001"  # the participant whose finished run seeds the store; even tabs open as her
QUICK = ["--model", "captioner", "--preset", "tiny", "--batch-size", "2", "--device", "cpu", "--backend", "eager",
         "--warmup-steps", "1"]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far, all its threads (fields 14 and 15 of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def scratch(prefix: str) -> tuple[Path, str, dict]:
    """A fresh folder with the app's store and compile caches in it: (folder, store path, environment using them)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    db = str(tmp / "runs.sqlite")
    return tmp, db, dict(os.environ, COMPILE_LAB_DB=db, COMPILE_LAB_CACHE_DIR=str(tmp / "cache"))


def start_app(port: int, env: dict, log: Path) -> subprocess.Popen:
    app = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=REPO, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 90
    while True:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).status == 200:
                return app
        except OSError:
            pass
        if app.poll() is not None or time.time() > deadline:
            raise SystemExit(f"the app did not come up; its log: {log}")
        time.sleep(0.5)


def cli_run(env: dict, *extra: str, owner: str | None = None) -> subprocess.Popen:
    """A run on the same store from another process; `owner` submits it as that participant (the app's way)."""
    if owner is None:
        cmd = [sys.executable, "-m", "tcore", "run", *QUICK, *extra]
    else:  # the command line queues under its process; a participant's run goes through runs.execute
        cmd = [sys.executable, "-c", "from tcore.lab.run import runs; "
               "from tcore.experiment.spec import Experiment; from tcore.store import RunStore; "
               f"runs.execute(Experiment(model='captioner', preset='tiny', batch_size=2, device='cpu', "
               f"backend='eager', warmup_steps=1, timed_steps=4, rounds=1), RunStore(), owner={owner!r})"]
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_running(db: str, timeout_s: float = 120) -> None:
    """Until a run in the store is being timed (its worker has reached the measuring phase, roughly: running
    for a few seconds past the start), so the window sees a run under way, not its start-up."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        with sqlite3.connect(db) as con:
            row = con.execute("SELECT started_at FROM runs WHERE status='running'").fetchone()
        if row and row[0] and time.time() - row[0] > 8:
            return
        time.sleep(0.5)
    raise SystemExit("the command-line run did not start within 2 min")


def open_tab(browser, server: str, page_name: str, index: int, timeout_ms: float):
    """A new context and tab on the page; returns (context, page, load seconds or None if it timed out)."""
    path, title = PAGES[page_name]
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = ctx.new_page()
    me = SEED_OWNER if index % 2 == 0 else f"guest-{index:06x}"
    t0 = time.perf_counter()
    try:
        page.goto(f"{server}{path}?me={me}", wait_until="commit", timeout=timeout_ms)
    except PlaywrightTimeout:  # a load that times out is a figure of this benchmark: None, counted as such
        return ctx, page, None
    return ctx, page, _until_title(page, title, t0, timeout_ms)


def _until_title(page, title: str, t0: float, timeout_ms: float) -> float | None:
    """Seconds from t0 until the page's title is drawn, or None if it is not within timeout_ms of t0."""
    try:
        page.get_by_text(title, exact=True).first.wait_for(
            timeout=max(timeout_ms - 1e3 * (time.perf_counter() - t0), 1))
    except PlaywrightTimeout:  # timed out: a figure of this benchmark, counted as such; anything else is raised
        return None
    return time.perf_counter() - t0


def returning(page, page_name: str, timeout_ms: float) -> dict:
    """What the person who just arrived waits for next, in the same tab: another page of the app from the sidebar (a
    rerun over the open connection, no page load), then a reload (the browser's cache holds Streamlit's scripts, as
    it does for anyone who opened the lab before). Also the first load's own parts, from the browser's Navigation
    Timing: the HTML's first byte and the document parsed (Streamlit's scripts still run after that)."""
    timing = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0];"
                           " return {ttfb: n.responseStart, dom: n.domContentLoadedEventEnd}; }")
    other = "compare" if page_name != "compare" else "run"
    link = page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=re.compile(NAV_LABEL[other]))
    t0 = time.perf_counter()
    link.first.click(timeout=timeout_ms)
    nav = _until_title(page, PAGES[other][1], t0, timeout_ms)
    t0 = time.perf_counter()
    page.reload(wait_until="commit", timeout=timeout_ms)
    reload_s = _until_title(page, PAGES[other][1], t0, timeout_ms)
    return {"probe_first_byte_s": timing["ttfb"] / 1e3, "probe_document_s": timing["dom"] / 1e3,
            "probe_sidebar_page_s": nav, "probe_reload_s": reload_s}


def scenario(browser, server: str, app_pid: int, spec: str, window_s: float, settle_s: float, env: dict,
             db: str, timeout_ms: float) -> dict:
    page_name, _, rest = spec.partition(":")
    n_text, _, with_run = rest.partition("+")
    n = int(n_text)
    run = None
    if with_run:
        run = cli_run(env, "--timed-s", str(int(window_s * 3 + 60)), "--rounds", "3")
        wait_running(db)
    tabs, loads = [], []
    for i in range(n):
        ctx, page, load = open_tab(browser, server, page_name, i, timeout_ms)
        tabs.append(ctx)
        loads.append(load)
    time.sleep(settle_s)
    t0, c0 = time.monotonic(), cpu_s(app_pid)
    health = []  # ms for GET /_stcore/health once a second: how soon the server answers at all
    while time.monotonic() - t0 < window_s:
        asked = time.perf_counter()
        try:
            urllib.request.urlopen(f"{server}/_stcore/health", timeout=30).read()
            health.append(1e3 * (time.perf_counter() - asked))
        except OSError:
            health.append(None)
        time.sleep(max(0.0, 1.0 - (time.perf_counter() - asked)))
    cpu_pct = 100 * (cpu_s(app_pid) - c0) / (time.monotonic() - t0)
    t1, c1 = time.monotonic(), cpu_s(app_pid)
    ctx, page, probe = open_tab(browser, server, page_name, n + 1, timeout_ms)  # one more person arrives
    # The server's CPU for that page, less what the idle tabs took meanwhile: unlike the load's wall time, it
    # does not depend on what else the machine runs.
    probe_cpu_s = cpu_s(app_pid) - c1 - cpu_pct / 100 * (time.monotonic() - t1)
    again = returning(page, page_name, timeout_ms) if probe is not None else {}
    ctx.close()
    for ctx in tabs:
        ctx.close()
    if run is not None:
        with sqlite3.connect(db) as con:  # as another process cancels a run: its owner stops the worker
            con.execute("UPDATE runs SET cancel_requested=1 WHERE status='running'")
        run.wait(60)
    done = [s for s in loads if s is not None]
    return {"scenario": spec, "tabs": n, "page": page_name, "with_run": bool(with_run), "server_cpu_pct": cpu_pct,
            "load_median_s": statistics.median(done) if done else None, "load_max_s": max(done) if done else None,
            "loads_timed_out": loads.count(None), "probe_load_s": probe,
            "probe_server_cpu_s": probe_cpu_s, **again,
            "health_median_ms": statistics.median([h for h in health if h is not None] or [float("nan")]),
            "health_max_ms": max([h for h in health if h is not None] or [float("nan")]),
            "health_failed": health.count(None)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", nargs="+",
                        default=["run:1", "system:1", "compare:1", "run:5", "run:20", "run:20+run"])
    parser.add_argument("--window", type=float, default=20.0, help="seconds the server's CPU is read over")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after the last tab drew, before the window")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds a page load may take")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()

    tmp, db, env = scratch("compile-lab-idle-")
    t_start = time.time()
    seed = cli_run(env, owner=SEED_OWNER)
    if seed.wait(300) != 0:
        raise SystemExit("the seed run failed")
    port = free_port()
    app = start_app(port, env, tmp / "streamlit.log")
    rows = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for spec in args.scenarios:
                rows.append(scenario(browser, f"http://127.0.0.1:{port}", app.pid, spec, args.window, args.settle,
                                     env, db, args.timeout * 1e3))
                r = rows[-1]
                fmt = lambda s: "timed out" if s is None else f"{s:.2f} s"  # noqa: E731
                print(f"{spec:>12}: server {r['server_cpu_pct']:5.1f}% of a core over {args.window:g} s; health "
                      f"{r['health_median_ms']:.0f} ms median, {r['health_max_ms']:.0f} ms max; page load "
                      f"median {fmt(r['load_median_s'])}, max {fmt(r['load_max_s'])} ({r['loads_timed_out']} timed "
                      f"out), one more tab {fmt(r['probe_load_s'])} ({r['probe_server_cpu_s']:.2f} s of server CPU; "
                      f"first byte {fmt(r.get('probe_first_byte_s'))}, document {fmt(r.get('probe_document_s'))}); "
                      f"then another page from the sidebar {fmt(r.get('probe_sidebar_page_s'))}, a reload "
                      f"{fmt(r.get('probe_reload_s'))}",
                      flush=True)
            browser.close()
    finally:
        os.killpg(app.pid, signal.SIGTERM)
        app.wait(20)
    print(f"machine: {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} at the end; "
          f"total {time.time() - t_start:.0f} s; store {db}")
    if args.json:
        Path(args.json).write_text(json.dumps({"window_s": args.window, "cores": os.cpu_count(), "rows": rows},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
