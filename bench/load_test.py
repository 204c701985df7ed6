"""A workshop on one machine: many sessions submit runs at once while the app serves pages, and processes fail.

    python bench/load_test.py --sessions 20 --processes 4
    python bench/load_test.py --server-memory 200   # the server's memory after 200 runs, nothing else

Starts the app as `make app` does (`streamlit run serve.py`, whose queue starts with the server) on a free
loopback port with a fresh run store ($COMPILE_LAB_DB), then `--processes` submitter processes each run a
share of `--sessions` threads; each thread is one session (its own owner id) that submits
`--runs-per-session` tiny CPU runs (captioner/tiny, backend eager) through tcore.lab.runs, as the app's pages do,
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
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import signal
import socket
import sqlite3
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
CLI_QUICK = ["--model", "captioner", "--preset", "tiny", "--batch-size", "2", "--device", "cpu", "--warmup-steps",
             "1", "--timed-steps", "2", "--rounds", "1", "--backend", "eager", "--cache", "warm", "--quiet"]
LATENCY_EVERY_S = 0.25
LATENCY_MAX_REQUESTS = 4000
MARKUP_NAME = "<b>x</b>![x](http://127.0.0.1:9/a.png)"  # session 14's owner id
# The sessions that misbehave sit in the submitters no fault hits (with 4 processes, sessions 2, 3, 6, 7, ...), so
# that each of them does what it means to: sessions 0, 4, ... and 1, 5, ... are in the killed and stopped ones.
CANCELS, KILLS_WORKER, HUGE_BATCH, DELETES_OTHERS, NO_TIME_LIMIT, MARKUP = 3, 6, 7, 10, 11, 14


def owner_of(index: int) -> str:
    return MARKUP_NAME if index == MARKUP else f"session-{index:02d}"


def session(index: int, runs_per_session: int, db: str, out) -> None:
    """One person: submit runs, watch them, wait; a few sessions make the mistakes people make."""
    from tcore.lab import runs
    from tcore.spec import Experiment, SpecError
    from tcore.store import RunStore

    store, owner = RunStore(db), owner_of(index)
    exp = Experiment(**QUICK)
    if index == HUGE_BATCH:  # a batch far over the limit: refused before it is queued
        try:
            runs.start(exp.replace(batch_size=10**5), store, owner=owner)
        except SpecError as e:
            out.append({"owner": owner, "refused": str(e)})
    if index == NO_TIME_LIMIT:  # a run no time limit allows, and a time limit of nan: refused before they are queued
        for attempt in (lambda: runs.start(exp.replace(rounds=10**8), store, owner=owner),
                        lambda: runs.start(exp, store, owner=owner, timeout_s=float("nan"))):
            try:
                attempt()
            except SpecError as e:
                out.append({"owner": owner, "refused": str(e)})
    if index == DELETES_OTHERS:  # tries to cancel and delete everyone else's runs: only the owner or the instructor may
        deadline = time.time() + 120
        while sum(r.owner != owner for r in store.list()) < 5 and time.time() < deadline:
            time.sleep(0.5)  # once there are others' runs to try it on
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
        out.append({"owner": owner, "run_id": live.run_id, "position": live.snapshot()["queue_position"],
                    "pid": os.getpid()})
        if index == CANCELS:  # changes their mind while waiting
            live.cancel()
        if index == KILLS_WORKER:  # the worker dies mid-run, as from the OOM killer
            while not live.done and (live.handle is None or live.phase in ("queued", None)):
                time.sleep(0.05)
            if not live.done and live.handle is not None:
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
    runs.run_adopted()  # runs taken over from a dead process are this one's to finish, as the command line's are


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


class Store:
    """What the faults look at: each run's status, owner id and owning process, straight from the store."""

    def __init__(self, db: str) -> None:
        from tcore.store import RunStore

        self.store = RunStore(db)

    def rows(self) -> dict[str, dict]:
        # The owning process's pid is in no RunRecord: read the file as any outside SQLite reader would.
        db = sqlite3.connect(self.store.path, timeout=30)
        db.row_factory = sqlite3.Row
        try:
            return {r["id"]: dict(r) for r in db.execute(
                "SELECT id, status, owner, owner_pid, pid, error_kind, error FROM runs")}
        finally:
            db.close()

    def wait_for(self, condition, limit_s: float) -> dict[str, dict] | None:
        deadline = time.time() + limit_s
        while time.time() < deadline:
            if condition(rows := self.rows()):
                return rows
            time.sleep(0.2)
        return None


def hit(rows: dict[str, dict], ids: set[str]) -> dict[str, list[str]]:
    """The runs among `ids` by status at the moment of a fault."""
    by: dict[str, list[str]] = {}
    for i in ids:
        if i in rows:
            by.setdefault(rows[i]["status"], []).append(i)
    return by


def ended_by(rows: dict[str, dict], ids: list[str], names: dict[int, str]) -> str:
    """How the runs `ids` ended, and which process owned them at their end."""
    counts = Counter((rows[i]["status"], names.get(rows[i]["owner_pid"], f"pid {rows[i]['owner_pid']}"))
                     for i in ids if i in rows)
    return ", ".join(f"{n} {status} under {who}" for (status, who), n in sorted(counts.items())) or "none"


def rss_mib() -> float:
    """This process's resident memory now (MiB), from /proc."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def server_memory(run_count: int, device: str = "cpu", every: int = 25) -> int:
    """`run_count` runs one after another in this process, as the app's server runs its pages' runs (runs.serve,
    then runs.start per run); every `every` runs, the process's resident memory and what its run registry holds.
    What a workshop day costs the server: its registry must stop growing (tcore.lab.registry). On "cuda" the runs
    compile with Inductor and sample power, so each ended run would hold its generated code and power samples
    were they not let go."""
    from tcore.lab import registry, runs
    from tcore.spec import Experiment
    from tcore.store import RunStore

    tmp = Path(tempfile.mkdtemp(prefix="compile-lab-memory-"))
    store = RunStore(tmp / "runs.sqlite")
    runs.serve(store)
    exp = Experiment(**QUICK) if device == "cpu" else Experiment(**{**QUICK, "device": "cuda", "backend": "inductor"})
    t0 = time.time()
    print(f"{run_count} runs of {exp.label} in one process (store {store.path})")
    print(f"{'runs':>5} {'rss_mib':>8} {'held_runs':>9} {'held_power_samples':>18} {'held_code_chars':>15} {'s':>6}")
    for i in range(1, run_count + 1):
        record = runs.start(exp, store).wait()
        if record is None or record.status != "finished":
            print(f"run {i} did not finish: {record and record.error}", file=sys.stderr)
            return 1
        if i % every == 0 or i in (1, run_count):
            held = [r for r in (registry.live(run_id) for run_id in list(registry._LIVE)) if r is not None]
            print(f"{i:5d} {rss_mib():8.1f} {registry.count():9d} {sum(len(r.power_samples) for r in held):18d} "
                  f"{sum(len(c) for r in held for c in r.code):15d} {time.time() - t0:6.0f}", flush=True)
    return 0


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
    from tcore.store import queue as store_queue

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
    faults: list[str] = []
    threads: list[threading.Thread] = []

    def submitted_by(share: list[int]) -> set[str]:
        owners = {owner_of(i) for i in share}
        return {o["run_id"] for o in list(out) if "run_id" in o and o.get("owner") in owners}

    def expected(share: list[int]) -> int:  # runs each session of the share submits (refusals aside)
        return len(share) * args.runs_per_session

    def kill_submitter(index: int) -> None:
        share, proc = shares[index], procs[index]
        rows = store.wait_for(lambda rows: len(mine := submitted_by(share)) >= expected(share)
                              and "queued" in hit(rows, mine), 300)
        if rows is None or not proc.is_alive():
            faults.append(f"killed submitter {index}: no fault (its runs never waited in the queue)")
            return
        at = hit(rows, submitted_by(share))
        os.kill(proc.pid, signal.SIGKILL)
        report_later.append((f"killed submitter {index} (pid {proc.pid}, {len(share)} sessions, as an app that "
                             f"crashes) at {time.time() - t0:.0f} s", at))

    def stop_submitter(index: int) -> None:
        share, proc = shares[index], procs[index]
        rows = store.wait_for(lambda rows: len(mine := submitted_by(share)) >= expected(share)
                              and "queued" in hit(rows, mine), 300)
        if rows is None or not proc.is_alive():
            faults.append(f"stopped submitter {index}: no fault (its runs never waited in the queue)")
            return
        at = hit(rows, submitted_by(share))
        os.kill(proc.pid, signal.SIGSTOP)
        stopped_at = time.time()
        for other in procs:  # stopped until the other submitters are done (a person back from lunch)
            if other is not proc:
                other.join(900)
        held = time.time() - stopped_at
        os.kill(proc.pid, signal.SIGCONT)
        report_later.append((f"stopped submitter {index} (pid {proc.pid}, {len(share)} sessions) at "
                             f"{stopped_at - t0:.0f} s for {held:.0f} s", at))

    def command_line(kind: str) -> None:
        # started once the submitters' runs fill the queue, so that its run waits
        store.wait_for(lambda rows: sum(r["status"] == "queued" for r in rows.values()) >= 3, 300)
        cli = subprocess.Popen([sys.executable, "-m", "tcore", "run", "--db", db, *CLI_QUICK], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        names[cli.pid] = f"the {kind} command line"
        owner = f"{socket.gethostname()}:{cli.pid}"
        rows = store.wait_for(lambda rows: any(r["owner"] == owner for r in rows.values()), 120)
        mine = {i for i, r in (rows or {}).items() if r["owner"] == owner}
        if not mine or rows[next(iter(mine))]["status"] != "queued":
            faults.append(f"{kind} command line: no fault (its run never waited in the queue: {rows and hit(rows, mine)})")
            cli.wait()
            return
        at = hit(rows, mine)
        if kind == "killed":
            cli.kill()
            cli.wait()
            report_later.append((f"killed command line (pid {cli.pid}) at {time.time() - t0:.0f} s", at))
            return
        cli.send_signal(signal.SIGSTOP)
        stopped_at = time.time()
        time.sleep(store_queue.OWNER_SILENT_S + 15)
        cli.send_signal(signal.SIGCONT)
        _, err = cli.communicate(timeout=3600)  # it follows its run, taken over, to its end
        (run_id,) = mine
        final = store.rows()[run_id]
        agrees = (cli.returncode == 0) == (final["status"] == "finished")
        cli_results.append(f"  after SIGCONT it exited {cli.returncode}, its run {final['status']}: the exit code "
                           f"{'agrees' if agrees else 'DISAGREES'}; "
                           f"{'it said the run was taken over' if 'took this run over' in err else 'it ran the run itself'}")
        if not agrees:
            disagreements.append(run_id)
        report_later.append((f"stopped command line (pid {cli.pid}) at {stopped_at - t0:.0f} s for "
                             f"{store_queue.OWNER_SILENT_S + 15:.0f} s", at))

    def kill_app() -> None:
        nonlocal app
        rows = store.wait_for(lambda rows: any(r["owner_pid"] == app.pid and r["status"] in ("queued", "running")
                                               for r in rows.values()), 400)
        held = {i for i, r in (rows or store.rows()).items() if r["owner_pid"] == app.pid
                and r["status"] in ("queued", "running")}
        at = hit(rows or store.rows(), held)
        old = app.pid
        os.killpg(app.pid, signal.SIGKILL)
        app.wait()
        killed_at = time.time()
        app = start_app(port, db, tmp / "app.log")
        names[app.pid] = "the restarted app"
        report_later.append((f"killed the app's server (pid {old}) at {killed_at - t0:.0f} s"
                             + ("" if held else " (it held no run: none had been left to it within 400 s)")
                             + f"; it answered again {time.time() - killed_at:.0f} s later", at))

    report_later: list[tuple[str, dict[str, list[str]]]] = []
    cli_results: list[str] = []
    disagreements: list[str] = []
    if not args.no_faults:
        plans = [(kill_submitter, (0,)), (command_line, ("killed",)), (command_line, ("stopped",)), (kill_app, ())]
        if len(procs) > 1:
            plans.insert(1, (stop_submitter, (1,)))
        threads = [threading.Thread(target=f, args=a, daemon=True) for f, a in plans]
        for t in threads:
            t.start()
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
    os.killpg(app.pid, signal.SIGTERM)
    app.wait(30)

    out = list(out)
    records = store.store.list()
    etas = {o["run_id"]: o["eta_seen"] for o in out if "eta_seen" in o}
    seen = {o["run_id"]: o["seen_at"] for o in out if o.get("seen_at") is not None}
    out = [o for o in out if "eta_seen" not in o]
    submitted = [o["run_id"] for o in out if "run_id" in o]
    refused = [o for o in out if "refused" in o]
    stored = Counter(r.id for r in records)
    cli_runs = {r.id for r in records if r.owner and re.fullmatch(r"[^:]+:\d+", r.owner)}  # Proc.name, host:pid
    lost = [i for i in submitted if i not in stored]
    duplicated = sum(n - 1 for n in Counter(submitted).values()) + sum(
        1 for i in stored if i not in set(submitted) and i not in cli_runs)
    overlapping = overlaps(records)
    failed = Counter(r.error_kind for r in records if r.status == "failed")
    positions = [o["position"] for o in out if o.get("position")]
    touched = [o["touched_others"] for o in out if "touched_others" in o]
    refused_others = sum(1 for o in out if "refused_others" in o)
    cancelled_not_by_owner = [r for r in records if r.error_kind == "cancelled" and r.owner != owner_of(CANCELS)]

    print(f"sessions: {args.sessions} in {args.processes} processes, {args.runs_per_session} run(s) each, "
          f"plus {len(cli_runs)} command-line run(s)")
    print(f"runs submitted: {len(submitted) + len(cli_runs)}   refused before queueing: {len(refused)}")
    print(f"  finished: {sum(r.status == 'finished' for r in records)}")
    print(f"  failed: {sum(failed.values())}" + (f" ({', '.join(f'{k}: {n}' for k, n in sorted(failed.items()))})"
                                                 if failed else ""))
    print(f"  overlapping on the same device slot: {overlapping}")
    print(f"  lost: {len(lost)}")
    print(f"  duplicated: {duplicated}")
    print(f"  stuck (queued or running {args.settle_s:.0f} s after every process but the app ended): {len(stuck)}")
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
    for line in faults:
        print(line)
    for what, at in report_later:
        running, queued = at.get("running", []), at.get("queued", [])
        print(f"{what}: {len(running)} of its runs running, {len(queued)} waiting")
        if running:
            print(f"  the running ones: {ended_by(final, running, names)}"
                  + "".join(f"; {final[i]['error_kind']}" for i in running[:1] if final[i]['error_kind']))
        if queued:
            print(f"  the waiting ones: {ended_by(final, queued, names)}")
        if "stopped command line" in what:
            print("\n".join(cli_results))
    print(f"runs cancelled or deleted by someone other than their owner: {len(touched) + len(cancelled_not_by_owner)} "
          f"({refused_others} attempts by {owner_of(DELETES_OTHERS)} refused)")
    for r in refused:
        print(f"refusal seen by {r['owner']}: {r['refused'][:160]}")
    if latencies:
        print(f"page latency (GET / and /_stcore/health, {len(latencies)} requests, {len(page_failures)} failed, "
              f"the app's restart included): p50 {pct(latencies, 50):.1f} ms, p95 {pct(latencies, 95):.1f} ms, "
              f"max {max(latencies):.1f} ms")
    print(f"total wall time: {time.time() - t0:.1f} s   store: {db}   app log: {tmp / 'app.log'}")
    return 1 if overlapping or lost or duplicated or stuck or touched or cancelled_not_by_owner or disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
