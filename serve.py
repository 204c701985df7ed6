"""Compile Lab's server: `streamlit run serve.py` (what `make app` runs) serves app.py, as `streamlit run app.py`
does, plus two things a page script cannot do.

- The run queue starts with the server. Streamlit runs app.py only when a browser opens a page, so a
  server started on its own after a restart left a dead server's running run 'running' and its queued
  runs waiting until someone opened a page. st.App's lifespan runs once, when the server starts:
  here it starts the queue for the store and takes those runs over (tcore.lab.api.serve), then imports
  what the pages import, in the background, so the first visitor of each page does not wait for it. On a GPU the
  queue also calibrates the machine while idle (tcore.lab.calibrate.keep_calibrated), never while a run waits.
- It says at start who can reach it: by default Streamlit listens on every network interface, which a
  workshop room needs and a laptop on a café's network does not; `--server.address 127.0.0.1` (`make app
  ADDRESS=127.0.0.1`) keeps it to this machine. Error details (tracebacks, source paths) are off for
  participants (.streamlit/config.toml); `--client.showErrorDetails full` turns them on while developing.
- Rendered tlparse reports (static/, served at app/static/) are sent without Streamlit's
  `Access-Control-Allow-Origin: *`, which its static route sets whatever server.enableCORS says: a
  page on another site must not read a run's compiled code through the participant's browser.
"""
from __future__ import annotations

import asyncio
import sys
import threading
from contextlib import asynccontextmanager
from pathlib import Path

import streamlit as st

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # tcore, when the server is started from elsewhere

STATIC_PREFIX = "/app/static/"


def start_queue() -> int:
    """Start the run queue; a store that cannot be used or settings written wrongly are said in a line and the server
    starts anyway: every page then says what is wrong and what to do (app.py), and the queue starts with the first
    page opened once it is mended. A server that refused to start would leave participants with "connection
    refused"."""
    import sqlite3

    from tcore.lab import api
    from tcore.store import RunStore, StoreError, default_path

    api.hide_environment()  # before anything can fail: the passcode, out of a worker's reach
    try:
        store = RunStore()  # $COMPILE_LAB_DB, as app.py opens it
        adopted = api.serve(store, calibrate_while_idle=True)
        if store.read_only:
            print(f"compile-lab: the run store {store.path} can only be read ({store.read_only}): no run queue; "
                  "the pages show its runs", file=sys.stderr, flush=True)
            return 0
    except (StoreError, sqlite3.DatabaseError) as e:
        print(f"compile-lab: the run queue did not start: the run store cannot be used: {e}. The server starts "
              "anyway and every page says so. If the file is damaged, keep it aside and start a new store with "
              f"`python -m tcore store set-aside --db {default_path()}`, then reload a page.", file=sys.stderr,
              flush=True)
        return 0
    except (api.LimitsError, api.ClusterError) as e:
        print(f"compile-lab: the run queue did not start: the lab's settings cannot be used: {e}. The server starts "
              "anyway and every page says so; mend the setting, then reload a page.", file=sys.stderr, flush=True)
        return 0
    print(f"compile-lab: run queue started with the server; {adopted} queued run(s) taken over",
          file=sys.stderr, flush=True)
    return adopted


def warm_imports() -> float:
    """Import what the pages import (ui/, pandas, plotly) and draw one figure, so that the first person to open
    each page does not wait for them (seconds of a small machine's CPU, paid once per server). Returns the seconds
    it took."""
    import importlib
    import pkgutil
    import time

    start = time.perf_counter()
    import ui

    for module in pkgutil.iter_modules(ui.__path__):
        importlib.import_module(f"ui.{module.name}")
    import plotly.graph_objects as go

    go.Figure(go.Scatter(x=[0], y=[0])).add_bar(x=[0], y=[0]).to_json()  # plotly builds its validators lazily
    return time.perf_counter() - start


def _warm_and_say() -> None:
    seconds = warm_imports()
    print(f"compile-lab: the pages' imports done in {seconds:.1f} s, before anyone waits for them", file=sys.stderr,
          flush=True)


def who_can_reach(address: str | None, port: int) -> str:
    """One line for the server's start: which network interfaces it listens on, and how to change that."""
    if not address or address in ("0.0.0.0", "::"):
        return (f"compile-lab: listening on every network interface, port {port}: anyone who can reach this machine "
                "can open the lab and queue runs on it. For this machine only, start it with --server.address "
                "127.0.0.1 (make app ADDRESS=127.0.0.1)")
    local = address in ("127.0.0.1", "localhost", "::1")
    return (f"compile-lab: listening on {address}, port {port}" + (": this machine only" if local else
            " only") + "; --server.address 0.0.0.0 opens it to the room's network")


def say_who_can_reach() -> None:
    from streamlit import config

    print(who_can_reach(config.get_option("server.address"), config.get_option("server.port")), file=sys.stderr,
          flush=True)


@asynccontextmanager
async def lifespan(_app):
    say_who_can_reach()
    # torch's import takes seconds: off the event loop, but before the server answers its first page
    adopted = await asyncio.to_thread(start_queue)
    # The pages' own imports are not needed to answer: they warm up while the server already serves.
    threading.Thread(target=_warm_and_say, name="warm-imports", daemon=True).start()
    yield {"adopted_at_start": adopted}


class NoCrossOriginStatic:
    """ASGI middleware: drop Access-Control-Allow-Origin from what is served under app/static/."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or STATIC_PREFIX not in scope.get("path", ""):
            await self.app(scope, receive, send)
            return

        async def send_without_cors(message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message, headers=[(k, v) for k, v in message.get("headers", [])
                                                 if k.lower() != b"access-control-allow-origin"])
            await send(message)

        await self.app(scope, receive, send_without_cors)


def _middleware():
    from starlette.middleware import Middleware

    return [Middleware(NoCrossOriginStatic)]


app = st.App(HERE / "app.py", lifespan=lifespan, middleware=_middleware())
