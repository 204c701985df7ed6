"""The app the load test loads: started as `make app` does on a free loopback port, and its pages timed."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
LATENCY_EVERY_S = 0.25
LATENCY_MAX_REQUESTS = 4000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_ms(url: str) -> float | None:
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            response.read()
    except OSError:
        return None
    return (time.perf_counter() - start) * 1e3


def start_app(port: int, db: str, log_path: Path) -> subprocess.Popen:
    log = open(log_path, "a")
    app = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port)],
        cwd=REPO, env=dict(os.environ, COMPILE_LAB_DB=db), stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    deadline = time.time() + 120
    while get_ms(f"http://127.0.0.1:{port}/_stcore/health") is None:
        if app.poll() is not None or time.time() > deadline:
            app.kill()
            raise SystemExit(f"the app did not come up: see {log_path}")
        time.sleep(0.5)
    return app


def measure_pages(port: int, stop: threading.Event, latencies: list, failures: list) -> None:
    urls = [f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/_stcore/health"]
    while not stop.is_set() and len(latencies) + len(failures) < LATENCY_MAX_REQUESTS:
        for url in urls:
            ms = get_ms(url)
            (latencies if ms is not None else failures).append(ms if ms is not None else url)
        stop.wait(LATENCY_EVERY_S)
