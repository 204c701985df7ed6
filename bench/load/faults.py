"""The load test's faults, each timed on what the store says, so that it lands on real work: a submitter killed and
one stopped, a command line killed and one stopped, the app's server killed and started again. Each keeps which of
the runs it hit were running and which waiting, for the report to say what became of them."""
from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from bench.load.app import REPO
from bench.load.sessions import CLI_QUICK, owner_of


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


class Faults:
    """One load test's faults on its submitters (`procs`, each running a `share` of the sessions), its command lines
    and its app, and what each hit: `report_later` (what, the runs it hit by status), `faults` (lines for one that
    found no work to land on), `cli_results` and `disagreements` (a stopped command line's exit code against its run).
    `app` is the app's server now: a new process once the fault that kills it has started it again."""

    def __init__(self, *, store: Store, db: str, tmp: Path, port: int, app: subprocess.Popen, t0: float,
                 shares: list[list[int]], procs: list, out, names: dict[int, str], runs_per_session: int,
                 start_app: Callable[[int, str, Path], subprocess.Popen]) -> None:
        self.store, self.db, self.tmp, self.port, self.app, self.t0 = store, db, tmp, port, app, t0
        self.shares, self.procs, self.out, self.names = shares, procs, out, names
        self.runs_per_session, self.start_app = runs_per_session, start_app
        self.faults: list[str] = []
        self.report_later: list[tuple[str, dict[str, list[str]]]] = []
        self.cli_results: list[str] = []
        self.disagreements: list[str] = []

    def start(self) -> list[threading.Thread]:
        """Every fault, each in a thread of its own that waits for its moment."""
        plans = [(self.kill_submitter, (0,)), (self.command_line, ("killed",)), (self.command_line, ("stopped",)),
                 (self.kill_app, ())]
        if len(self.procs) > 1:
            plans.insert(1, (self.stop_submitter, (1,)))
        threads = [threading.Thread(target=f, args=a, daemon=True) for f, a in plans]
        for t in threads:
            t.start()
        return threads

    def submitted_by(self, share: list[int]) -> set[str]:
        owners = {owner_of(i) for i in share}
        return {o["run_id"] for o in list(self.out) if "run_id" in o and o.get("owner") in owners}

    def expected(self, share: list[int]) -> int:  # runs each session of the share submits (refusals aside)
        return len(share) * self.runs_per_session

    def _once_its_runs_wait(self, index: int, verb: str) -> dict[str, list[str]] | None:
        """Wait until submitter `index` has submitted all its runs and one waits in the queue; then what its runs are
        doing (hit), or None, said as a fault that found no work, if that never came or the submitter is gone."""
        share, proc = self.shares[index], self.procs[index]
        rows = self.store.wait_for(lambda rows: len(mine := self.submitted_by(share)) >= self.expected(share)
                                   and "queued" in hit(rows, mine), 300)
        if rows is None or not proc.is_alive():
            self.faults.append(f"{verb} submitter {index}: no fault (its runs never waited in the queue)")
            return None
        return hit(rows, self.submitted_by(share))

    def kill_submitter(self, index: int) -> None:
        share, proc = self.shares[index], self.procs[index]
        if (at := self._once_its_runs_wait(index, "killed")) is None:
            return
        os.kill(proc.pid, signal.SIGKILL)
        self.report_later.append((f"killed submitter {index} (pid {proc.pid}, {len(share)} sessions, as an app that "
                                  f"crashes) at {time.time() - self.t0:.0f} s", at))

    def stop_submitter(self, index: int) -> None:
        share, proc = self.shares[index], self.procs[index]
        if (at := self._once_its_runs_wait(index, "stopped")) is None:
            return
        os.kill(proc.pid, signal.SIGSTOP)
        stopped_at = time.time()
        for other in self.procs:  # stopped until the other submitters are done (a person back from lunch)
            if other is not proc:
                other.join(900)
        held = time.time() - stopped_at
        os.kill(proc.pid, signal.SIGCONT)
        self.report_later.append((f"stopped submitter {index} (pid {proc.pid}, {len(share)} sessions) at "
                                  f"{stopped_at - self.t0:.0f} s for {held:.0f} s", at))

    def command_line(self, kind: str) -> None:
        from tcore.store import owners as store_owners

        # started once the submitters' runs fill the queue, so that its run waits
        self.store.wait_for(lambda rows: sum(r["status"] == "queued" for r in rows.values()) >= 3, 300)
        cli = subprocess.Popen([sys.executable, "-m", "tcore", "run", "--db", self.db, *CLI_QUICK], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.names[cli.pid] = f"the {kind} command line"
        owner = f"{socket.gethostname()}:{cli.pid}"
        rows = self.store.wait_for(lambda rows: any(r["owner"] == owner for r in rows.values()), 120)
        mine = {i for i, r in (rows or {}).items() if r["owner"] == owner}
        if not mine or rows[next(iter(mine))]["status"] != "queued":
            self.faults.append(f"{kind} command line: no fault (its run never waited in the queue: "
                               f"{rows and hit(rows, mine)})")
            cli.wait()
            return
        at = hit(rows, mine)
        if kind == "killed":
            cli.kill()
            cli.wait()
            self.report_later.append((f"killed command line (pid {cli.pid}) at {time.time() - self.t0:.0f} s", at))
            return
        cli.send_signal(signal.SIGSTOP)
        stopped_at = time.time()
        time.sleep(store_owners.OWNER_SILENT_S + 15)
        cli.send_signal(signal.SIGCONT)
        _, err = cli.communicate(timeout=3600)  # it follows its run, taken over, to its end
        (run_id,) = mine
        final = self.store.rows()[run_id]
        agrees = (cli.returncode == 0) == (final["status"] == "finished")
        self.cli_results.append(
            f"  after SIGCONT it exited {cli.returncode}, its run {final['status']}: the exit code "
            f"{'agrees' if agrees else 'DISAGREES'}; "
            f"{'it said the run was taken over' if 'took this run over' in err else 'it ran the run itself'}")
        if not agrees:
            self.disagreements.append(run_id)
        self.report_later.append((f"stopped command line (pid {cli.pid}) at {stopped_at - self.t0:.0f} s for "
                                  f"{store_owners.OWNER_SILENT_S + 15:.0f} s", at))

    def kill_app(self) -> None:
        app = self.app
        rows = self.store.wait_for(lambda rows: any(r["owner_pid"] == app.pid and r["status"] in ("queued", "running")
                                                    for r in rows.values()), 400)
        held = {i for i, r in (rows or self.store.rows()).items() if r["owner_pid"] == app.pid
                and r["status"] in ("queued", "running")}
        at = hit(rows or self.store.rows(), held)
        old = app.pid
        os.killpg(app.pid, signal.SIGKILL)
        app.wait()
        killed_at = time.time()
        self.app = self.start_app(self.port, self.db, self.tmp / "app.log")
        self.names[self.app.pid] = "the restarted app"
        self.report_later.append((f"killed the app's server (pid {old}) at {killed_at - self.t0:.0f} s"
                                  + ("" if held else " (it held no run: none had been left to it within 400 s)")
                                  + f"; it answered again {time.time() - killed_at:.0f} s later", at))
