"""A workshop on one machine: many sessions submit runs at once while the app serves pages, and processes fail.

    python bench/load_test.py --sessions 20 --processes 4
    python bench/load_test.py --server-memory 200   # the server's memory after 200 runs, nothing else

Starts the app as `make app` does (`streamlit run serve.py`, whose queue starts with the server) on a free
loopback port with a fresh run store ($COMPILE_LAB_DB), then `--processes` submitter processes each run a
share of `--sessions` threads; each thread is one session (its own owner id) that submits
`--runs-per-session` tiny CPU runs (captioner/tiny, backend eager) through tcore.lab.run.runs, as the app's pages do,
and waits for them. Some people misbehave: one cancels its queued run, one kills its worker mid-run, one asks
for a batch over the limit, one for a run no time limit allows, one has markup for a name, one tries to
cancel and delete everyone else's runs.

Faults, each timed on what the store says, so that it lands on real work (never on a process with nothing
submitted): once every session of a submitter has submitted and one of its runs waits in the queue,
- the first submitter process is killed (SIGKILL), as an app that crashes;
- the second is stopped (SIGSTOP, as Ctrl-Z) until the other submitters are done, then let go;
- a command line (`python -m tcore run`) is killed while its run waits;
- another command line is stopped while its run waits, for OWNER_SILENT_S + 15 s, then let go;
- the app's server is killed (SIGKILL) once it holds runs it took over, and started again.
Each fault's line counts what the store says happened to the runs it hit: the ones running at the fault,
the ones waiting, and which process finished them. Meanwhile a thread here times GET / and
GET /_stcore/health on the app. This process never runs or adopts a run itself: what is left queued or
running once every process has ended (the app's server aside, which keeps its queue) counts as stuck.

It also prints each waiting run's first wait estimate against the wait that followed.

Exits 1 if any run overlapped another on its slot, was lost, duplicated, stuck, or touched by someone other
than its owner. What the latency covers: Streamlit serves / and its health check itself; a page's script
runs over a websocket per browser session, which this does not drive.

Its parts are in bench/load/: sessions.py (the people and their submitter processes), app.py (the app started
and its pages timed), faults.py, report.py and memory.py (--server-memory).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.load.app import free_port, measure_pages, start_app  # noqa: E402
from bench.load.faults import Faults, Store  # noqa: E402
from bench.load.memory import server_memory  # noqa: E402
from bench.load.report import report  # noqa: E402
from bench.load.sessions import submitter  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--processes", type=int, default=4, help="submitter processes the sessions are spread over")
    parser.add_argument("--runs-per-session", type=int, default=1)
    parser.add_argument("--no-faults", action="store_true", help="no process is killed or stopped")
    parser.add_argument("--settle-s", type=float, default=240.0,
                        help="how long the app may take to finish what is left once every other process has ended")
    parser.add_argument("--server-memory", type=int, metavar="RUNS",
                        help="instead: RUNS runs one after another in this process, as the app's server runs them, "
                             "printing its memory and what it holds every 25 runs")
    parser.add_argument("--server-memory-device", choices=("cpu", "cuda"), default="cpu",
                        help="with --server-memory: cuda runs compile with Inductor and sample power")
    args = parser.parse_args()
    if args.server_memory:
        return server_memory(args.server_memory, args.server_memory_device)
    t0 = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="compile-lab-load-"))
    db = str(tmp / "runs.sqlite")
    port = free_port()
    app = start_app(port, db, tmp / "app.log")
    names = {app.pid: "the app"}
    stop, latencies, page_failures = threading.Event(), [], []
    pager = threading.Thread(target=measure_pages, args=(port, stop, latencies, page_failures), daemon=True)
    pager.start()
    store = Store(db)

    spawn = multiprocessing.get_context("spawn")
    manager = spawn.Manager()
    out = manager.list()  # each submission is reported at once: a killed process cannot take its ids along
    shares = [list(range(args.sessions))[p::args.processes] for p in range(args.processes)]
    procs = [spawn.Process(target=submitter, args=(share, args.runs_per_session, db, out)) for share in shares]
    for i, p in enumerate(procs):
        p.start()
        names[p.pid] = f"submitter {i}"
    faults = Faults(store=store, db=db, tmp=tmp, port=port, app=app, t0=t0, shares=shares, procs=procs, out=out,
                    names=names, runs_per_session=args.runs_per_session, start_app=start_app)
    threads = [] if args.no_faults else faults.start()
    for p in procs:
        p.join()
    for t in threads:
        t.join()
    # every process but the app's server has ended: what is not done now, the app must finish, or it is stuck
    store.wait_for(lambda rows: not any(r["status"] in ("queued", "running") for r in rows.values()), args.settle_s)
    stop.set()
    pager.join()
    final = store.rows()
    stuck = [i for i, r in final.items() if r["status"] in ("queued", "running")]
    os.killpg(faults.app.pid, signal.SIGTERM)  # the app now: the fault that killed it started it again
    faults.app.wait(30)
    return report(args, out=list(out), records=store.store.list(), final=final, stuck=stuck, faults=faults,
                  latencies=latencies, page_failures=page_failures, t0=t0, db=db, tmp=tmp)


if __name__ == "__main__":
    sys.exit(main())
