"""A workshop on one machine: many sessions submit runs at once while the app serves pages.

    python bench/load_test.py --sessions 20 --processes 4

Starts `streamlit run app.py` on a free loopback port with a fresh run store ($COMPILE_LAB_DB), then
`--processes` submitter processes each run a share of `--sessions` threads; each thread is one
session (its own owner id) that submits `--runs-per-session` tiny CPU runs (captioner/tiny, backend
eager) through tcore.runs, as the app's pages do, and waits for them. A few sessions misbehave, as
people do: one cancels its queued run, one kills its worker mid-run, one asks for a batch over the
limit, one tries to cancel and delete everyone else's runs. `--stop-after` seconds in, the second
submitter process is stopped (SIGSTOP, as Ctrl-Z) and kept stopped: once it has been silent for
OWNER_SILENT_S its running run must be ended with the reason and its queued runs taken over.
`--kill-after` seconds in, the first submitter process is killed (SIGKILL), as an app that crashes:
its running run must be marked crashed and its queued runs adopted by a live process and run; at
the end this process adopts whatever is left. Meanwhile a thread here times GET / and
GET /_stcore/health on the app.

Prints runs submitted, finished, failed (by kind), overlapping on one device slot, lost, duplicated,
each waiting run's first wait estimate against the wait that followed, page latency and wall time; exits 1 if any run overlapped another on its slot, was lost or duplicated.
What the latency covers: Streamlit serves / and its health check itself; a page's script runs over a
websocket per browser session, which this does not drive.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

QUICK = dict(model="captioner", preset="tiny", batch_size=2, device="cpu", warmup_steps=1, timed_steps=2,
             rounds=1, backend="eager", cache="warm")
LATENCY_EVERY_S = 0.25
LATENCY_MAX_REQUESTS = 4000


def session(index: int, runs_per_session: int, db: str, out) -> None:
    """One person: submit runs, watch them, wait; sessions 3, 5 and 7 make the mistakes people make."""
    from tcore.lab import runs
    from tcore.spec import Experiment, SpecError
    from tcore.store import RunStore

    store, owner = RunStore(db), f"session-{index:02d}"
    exp = Experiment(**QUICK)
    if index == 7:  # a batch far over the limit: refused before it is queued
        try:
            runs.start(exp.replace(batch_size=10**6), store, owner=owner)
        except SpecError as e:
            out.append({"owner": owner, "refused": str(e)})
    if index == 9:  # tries to cancel and delete everyone else's runs: only the owner or the instructor may
        time.sleep(3)
        for record in store.list():
            if record.owner == owner:
                continue
            for action in (runs.cancel, runs.delete):
                try:
                    action(record.id, store, owner=owner)
                    out.append({"owner": owner, "touched_others": f"{action.__name__} {record.id}"})
                except PermissionError:
                    out.append({"owner": owner, "refused_others": 1})
    for _ in range(runs_per_session):
        live = runs.start(exp, store, owner=owner)
        out.append({"owner": owner, "run_id": live.run_id, "position": live.snapshot()["queue_position"]})
        if index == 3:  # changes their mind while waiting
            live.cancel()
        if index == 5:  # the worker dies mid-run, as from the OOM killer
            while not live.done and (live.handle is None or live.phase in ("queued", None)):
                time.sleep(0.05)
            if not live.done:
                os.kill(live.handle.pid, signal.SIGKILL)
        eta_seen = seen_at = None
        while not live.done:
            if eta_seen is None and (eta_seen := live.snapshot()["eta_s"]) is not None:  # the first estimate made
                seen_at = time.time()
            time.sleep(0.5)
        out.append({"run_id": live.run_id, "eta_seen": eta_seen, "seen_at": seen_at})


def submitter(indices: list[int], runs_per_session: int, db: str, out) -> None:
    """A process with one thread per session: the queue must hold across processes as well as threads."""
    from tcore.lab import runs

    threads = [threading.Thread(target=session, args=(i, runs_per_session, db, out)) for i in indices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    while runs.active():  # runs adopted from a dead process are this one's to finish, as the app's would be
        time.sleep(0.5)


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


def start_app(port: int, db: str) -> subprocess.Popen | None:
    if not (REPO / "app.py").exists():
        print("app.py is not there yet: page latency is skipped", file=sys.stderr)
        return None
    app = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port)],
        cwd=REPO, env=dict(os.environ, COMPILE_LAB_DB=db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while get_ms(f"http://127.0.0.1:{port}/_stcore/health") is None:
        if app.poll() is not None or time.time() > deadline:
            print("the app did not come up: page latency is skipped", file=sys.stderr)
            app.kill()
            return None
        time.sleep(0.5)
    return app


def measure_pages(port: int, stop: threading.Event, latencies: list, failures: list) -> None:
    urls = [f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/_stcore/health"]
    while not stop.is_set() and len(latencies) + len(failures) < LATENCY_MAX_REQUESTS:
        for url in urls:
            ms = get_ms(url)
            (latencies if ms is not None else failures).append(ms if ms is not None else url)
        stop.wait(LATENCY_EVERY_S)


def overlaps(records) -> int:
    """Pairs of runs whose [started_at, finished_at] intersect on the same device slot."""
    count = 0
    by_slot: dict[str, list] = {}
    for r in records:
        if r.started_at is not None:
            by_slot.setdefault(r.device_slot, []).append((r.started_at, r.finished_at or time.time()))
    for spans in by_slot.values():
        spans.sort()
        count += sum(1 for (_, end), (start, _) in zip(spans, spans[1:]) if start < end)
    return count


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--processes", type=int, default=4, help="submitter processes the sessions are spread over")
    parser.add_argument("--runs-per-session", type=int, default=1)
    parser.add_argument("--kill-after", type=float, default=15.0,
                        help="seconds until the first submitter process is killed; 0: none is")
    parser.add_argument("--stop-after", type=float, default=8.0,
                        help="seconds until the second submitter process is stopped (SIGSTOP, as Ctrl-Z) and left "
                             "stopped until the others are done; 0: none is")
    args = parser.parse_args()

    t0 = time.time()
    db = str(Path(tempfile.mkdtemp(prefix="compile-lab-load-")) / "runs.sqlite")
    port = free_port()
    app = start_app(port, db)
    stop, latencies, page_failures = threading.Event(), [], []
    pager = threading.Thread(target=measure_pages, args=(port, stop, latencies, page_failures), daemon=True)
    if app is not None:
        pager.start()

    spawn = multiprocessing.get_context("spawn")
    manager = spawn.Manager()
    out = manager.list()  # each submission is reported at once: a killed process cannot take its ids along
    shares = [list(range(args.sessions))[p::args.processes] for p in range(args.processes)]
    procs = [spawn.Process(target=submitter, args=(share, args.runs_per_session, db, out)) for share in shares]
    for p in procs:
        p.start()
    killed, killed_at, stopped = None, None, None
    if args.stop_after > 0 and len(procs) > 1:
        procs[1].join(args.stop_after)
        if procs[1].is_alive():
            os.kill(procs[1].pid, signal.SIGSTOP)
            stopped = f"stopped submitter process {procs[1].pid} ({len(shares[1])} sessions) at {args.stop_after:g} s"
    if args.kill_after > 0:
        procs[0].join(max(args.kill_after - (time.time() - t0), 0))
        if procs[0].is_alive():
            os.kill(procs[0].pid, signal.SIGKILL)
            killed_at = time.time()
            killed = f"killed submitter process {procs[0].pid} ({len(shares[0])} sessions) at {args.kill_after:g} s"
    for p in procs[2:] + procs[:1]:
        p.join()
    if stopped:  # the others are done; the stopped one has lost its runs to them by now: let it go on and end
        os.kill(procs[1].pid, signal.SIGCONT)
    procs[1].join(120)
    if procs[1].is_alive():
        procs[1].kill()

    from tcore.lab import runs
    from tcore.store import RunStore

    store = RunStore(db)
    left = runs.recover(store)  # runs still queued by a process that ended: this one runs them
    for run in left:
        run.wait()
    stop.set()
    if app is not None:
        pager.join()
        app.terminate()
        app.wait(30)

    out = list(out)
    records = store.list()
    etas = {o["run_id"]: o["eta_seen"] for o in out if "eta_seen" in o}
    seen = {o["run_id"]: o["seen_at"] for o in out if o.get("seen_at") is not None}
    out = [o for o in out if "eta_seen" not in o]
    submitted = [o["run_id"] for o in out if "run_id" in o]
    refused = [o for o in out if "refused" in o]
    stored = Counter(r.id for r in records)
    lost = [i for i in submitted if i not in stored or
            next(r for r in records if r.id == i).status not in ("finished", "failed")]
    duplicated = sum(n - 1 for n in Counter(submitted).values()) + sum(1 for i in stored if i not in set(submitted))
    overlapping = overlaps(records)
    failed = Counter(r.error_kind for r in records if r.status == "failed")
    positions = [o["position"] for o in out if o.get("position")]
    crashed_by_owner_death = [r for r in records if r.error_kind == "crashed" and "ended mid-run" in r.error["message"]]
    ended_for_silence = [r for r in records if r.error_kind == "crashed" and "stopped answering" in r.error["message"]]
    silent = {f"session-{i:02d}" for i in shares[1]} if len(shares) > 1 else set()
    taken_over = [r for r in records if r.owner in silent and r.status == "finished" and r.started_at
                  and stopped and r.started_at > t0 + args.stop_after]
    touched = [o["touched_others"] for o in out if "touched_others" in o]
    refused_others = sum(1 for o in out if "refused_others" in o)
    cancelled_not_by_owner = [r for r in records if r.error_kind == "cancelled" and r.owner != "session-03"]
    orphans = {f"session-{i:02d}" for i in shares[0]}
    adopted = [r for r in records if r.owner in orphans and r.status == "finished" and killed_at
               and r.started_at > killed_at]

    print(f"sessions: {args.sessions} in {args.processes} processes, {args.runs_per_session} run(s) each")
    print(f"runs submitted: {len(submitted)}   refused before queueing: {len(refused)}")
    print(f"  finished: {sum(r.status == 'finished' for r in records)}")
    print(f"  failed: {sum(failed.values())}" + (f" ({', '.join(f'{k}: {n}' for k, n in sorted(failed.items()))})"
                                                 if failed else ""))
    print(f"  overlapping on the same device slot: {overlapping}")
    print(f"  lost: {len(lost)}")
    print(f"  duplicated: {duplicated}")
    print(f"queue position on submission: max {max(positions, default=0)}; "
          f"runs that showed an ETA while waiting: {sum(e is not None for e in etas.values())} of {len(submitted)}")
    # The first estimate a waiting run showed against the wait that followed it (until its run was claimed).
    started = {r.id: r.started_at for r in records if r.started_at is not None}
    pairs = sorted((etas[i], started[i] - seen[i]) for i in seen if i in started and etas[i] is not None)
    if pairs:
        ratios = [actual / max(estimate, 1.0) for estimate, actual in pairs]
        print(f"estimated against actual wait, {len(pairs)} runs: actual/estimate median {statistics.median(ratios):.2f}, "
              f"range {min(ratios):.2f}-{max(ratios):.2f}; within a factor of 1.5: "
              f"{sum(1 / 1.5 <= r <= 1.5 for r in ratios)} of {len(ratios)}; (estimate s, actual s): "
              + ", ".join(f"({e:.0f}, {a:.0f})" for e, a in pairs))
    if killed:
        print(f"{killed}: {len(crashed_by_owner_death)} of its runs marked crashed mid-run, "
              f"{len(adopted)} queued ones finished by the processes that adopted them "
              f"({len(left)} adopted by this one at the end)")
    if stopped:
        print(f"{stopped}: {len(ended_for_silence)} of its runs ended for its silence, {len(taken_over)} queued ones "
              "finished by the processes that took them over")
    print(f"runs cancelled or deleted by someone other than their owner: {len(touched) + len(cancelled_not_by_owner)} "
          f"({refused_others} attempts by session-09 refused)")
    if refused:
        print(f"refusal seen by a session: {refused[0]['refused']}")
    if latencies:
        print(f"page latency (GET / and /_stcore/health, {len(latencies)} requests, {len(page_failures)} failed): "
              f"p50 {pct(latencies, 50):.1f} ms, p95 {pct(latencies, 95):.1f} ms, max {max(latencies):.1f} ms")
    else:
        print("page latency: not measured (no app)")
    print(f"total wall time: {time.time() - t0:.1f} s   store: {db}")
    return 1 if overlapping or lost or duplicated or touched or cancelled_not_by_owner else 0


if __name__ == "__main__":
    sys.exit(main())
