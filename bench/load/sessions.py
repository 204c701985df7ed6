"""The load test's people: sessions that submit tiny CPU runs through tcore.lab.run.runs, as the app's pages do, a few
of them making the mistakes people make; and the submitter processes that run them, one thread per session."""
from __future__ import annotations

import os
import signal
import threading
import time

QUICK = dict(model="captioner", preset="tiny", batch_size=2, device="cpu", warmup_steps=1, timed_steps=2,
             rounds=1, backend="eager", cache="warm")
CLI_QUICK = ["--model", "captioner", "--preset", "tiny", "--batch-size", "2", "--device", "cpu", "--warmup-steps",
             "1", "--timed-steps", "2", "--rounds", "1", "--backend", "eager", "--cache", "warm", "--quiet"]
MARKUP_NAME = "<b>x</b>![x](http://127.0.0.1:9/a.png)"  # session 14's owner id
# The sessions that misbehave sit in the submitters no fault hits (with 4 processes, sessions 2, 3, 6, 7, ...), so
# that each of them does what it means to: sessions 0, 4, ... and 1, 5, ... are in the killed and stopped ones.
CANCELS, KILLS_WORKER, HUGE_BATCH, DELETES_OTHERS, NO_TIME_LIMIT, MARKUP = 3, 6, 7, 10, 11, 14


def owner_of(index: int) -> str:
    return MARKUP_NAME if index == MARKUP else f"session-{index:02d}"


def session(index: int, runs_per_session: int, db: str, out) -> None:
    """One person: submit runs, watch them, wait; a few sessions make the mistakes people make."""
    from tcore.experiment.spec import Experiment, SpecError
    from tcore.lab.run import runs
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
    from tcore.lab.run import runs

    threads = [threading.Thread(target=session, args=(i, runs_per_session, db, out)) for i in indices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    runs.run_adopted()  # runs taken over from a dead process are this one's to finish, as the command line's are
