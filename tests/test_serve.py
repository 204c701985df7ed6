"""The app's server (serve.py, what `make app` runs): its queue starts with it, and what it serves from static/
carries no Access-Control-Allow-Origin, so another site's page cannot read a run's report."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tcore.lab.settings.config import REPO_ROOT
from tests.helpers import QUICK, stop_group

ONE_RUNNING_ONE_QUEUED = """
import json, sys, time
from tcore.experiment.spec import Experiment
from tcore.lab.run import runs
from tcore.store import RunStore
store = RunStore(sys.argv[1])
live = [runs.start(Experiment.from_json(sys.argv[2]), store, owner="ada~1234") for _ in range(2)]
while live[0].handle is None or live[0].phase in ("queued", None):
    time.sleep(0.05)
print(json.dumps([r.run_id for r in live]), flush=True)
time.sleep(600)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_restarted_server_recovers_its_queue_before_any_page_is_opened(store, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), COMPILE_LAB_DB=str(store.path), COMPILE_LAB_SPARE_WORKERS="0")
    old_server = subprocess.Popen([sys.executable, "-c", ONE_RUNNING_ONE_QUEUED, str(store.path), QUICK.to_json()],
                                  stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=env)
    try:
        running, queued = json.loads(old_server.stdout.readline())
    finally:
        old_server.kill()  # the app dies with one run running and one waiting
        old_server.wait()
    report = Path(REPO_ROOT) / "static" / "tlparse" / f".test-{os.getpid()}.html"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("<p>a report</p>")

    port = free_port()
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # only against a hang; no page is opened: only the server's own start-up can do this
        deadline = time.time() + 300
        while store.get(queued).status != "finished":
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            assert time.time() < deadline, f"the queue was not recovered: {store.get(queued)}"
            time.sleep(0.5)
        crashed = store.get(running)
        assert crashed.status == "failed" and crashed.error_kind == "crashed"
        assert store.get(queued).owner == "ada~1234"

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/app/static/tlparse/{report.name}", timeout=60) as r:
            assert r.status == 200 and r.read() == b"<p>a report</p>"
            assert r.headers.get("Access-Control-Allow-Origin") is None, dict(r.headers)
    finally:
        report.unlink(missing_ok=True)
        stop_group(server)
        log.close()
    said = (tmp_path / "server.log").read_text()
    assert "run queue started with the server; 1 queued run(s) taken over" in said
    assert f"listening on 127.0.0.1, port {port}: this machine only" in said
    assert "the pages' imports done in" in said  # the first visitor of Compare does not wait for plotly and ui/

