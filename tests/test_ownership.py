"""Who owns and runs a queued run when processes die, stop or only read the store: a run is never lost
nor run twice."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tcore import cli
from tcore.lab.queue import scheduler
from tcore.lab.run import runs
from tcore.lab.settings.config import REPO_ROOT
from tcore.store import owners as store_owners
from tcore.store import run_queue as store_queue
from tests.helpers import (
    HANG_S,
    QUICK,
    hold_cpu_slot,
    killed_after_it_reports,
    last_heartbeat,
    stop_outside_a_write,
    wait_until,
)

CLI_QUICK = ["--model", "captioner", "--preset", "tiny", "--batch-size", "2", "--device", "cpu", "--warmup-steps",
             "1", "--timed-steps", "2", "--rounds", "1", "--backend", "eager", "--cache", "warm", "--quiet"]
ENV = dict(os.environ, PYTHONPATH=str(REPO_ROOT), COMPILE_LAB_SPARE_WORKERS="0")

pytestmark = pytest.mark.usefixtures("no_outside_limits")

QUEUE_TWO_AND_HANG = """
import json, sys, time
from tcore.experiment.spec import Experiment
from tcore.lab.run import runs
from tcore.store import RunStore
store = RunStore(sys.argv[1])
live = [runs.start(Experiment.from_json(sys.argv[2]), store, owner="crowd") for _ in range(2)]
print(json.dumps([r.run_id for r in live]), flush=True)
time.sleep(600)
"""


def cli_run(store, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tcore", "run", "--db", str(store.path), *CLI_QUICK, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=ENV)


def queued_ids(store) -> list[str]:
    return [r.id for r in store.list() if r.status == "queued"]


# --- pure store logic -----------------------------------------------------------------------------

def test_a_run_claimed_whose_worker_never_started_goes_back_to_the_queue_not_crashed(store):
    me = scheduler.this_process()
    gone = scheduler.Proc(me.host, 999_999, "1")  # no such process
    run_id = store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=gone, timeout_s=60)
    queued_at = store.get(run_id).queued_at
    assert store.queue.claim_next(gone, "cpu", ["cpu"], {run_id}) == (run_id, "cpu")  # claimed, then its owner died

    crashed, adopted = store.owners.recover(me, scheduler.is_alive, scheduler.stop_worker)
    assert (crashed, adopted) == ([], [run_id])
    rec = store.get(run_id)
    assert (rec.status, rec.error_kind, rec.device_slot, rec.started_at) == ("queued", None, None, None)
    assert rec.queued_at == queued_at and rec.owner == "ada"  # in its place, still ada's
    # the old owner, were it only stopped, can neither start a worker for it nor record over it
    assert not store.queue.set_worker(run_id, 1, None, gone)
    assert not store.finish(run_id, error={"type": "error", "kind": "crashed", "message": "x"}, owner=gone)
    assert store.get(run_id).status == "queued"


def test_a_reader_ends_dead_owners_runs_but_adopts_none(store):
    me = scheduler.this_process()
    gone = scheduler.Proc(me.host, 999_999, "1")
    running = store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=gone, timeout_s=60)
    store.queue.claim_next(gone, "cpu", ["cpu"], {running})
    store.queue.set_worker(running, 999_998, "1")  # its worker is gone too
    waiting = store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=gone, timeout_s=60)
    crashed, adopted = store.owners.recover(me, scheduler.is_alive, scheduler.stop_worker, adopt=False)
    assert (crashed, adopted) == ([running], [])
    assert store.queue.orphaned(me.host, scheduler.is_alive) == {waiting}


# --- several processes ----------------------------------------------------------------------------

def test_a_command_line_that_adopted_runs_runs_them_before_it_exits(store):
    """The CLI's own run is ahead; an "app" queues two behind it and is killed; the CLI adopts them. It used to
    exit 0 when its own run ended, leaving one adopted run 'running' with no worker and one queued under a dead
    owner."""
    holder = hold_cpu_slot(store, worker_started=True)
    command_line = cli_run(store)
    try:
        wait_until(lambda: len(queued_ids(store)) == 1, what="the command line's run queued")
        (own,) = queued_ids(store)
        app = subprocess.Popen([sys.executable, "-c", QUEUE_TWO_AND_HANG, str(store.path), QUICK.to_json()],
                               stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=ENV)
        try:
            theirs = json.loads(app.stdout.readline())
        finally:
            app.kill()  # the app dies with two runs queued behind the command line's
            app.wait()
        wait_until(lambda: not {r.id for r in store.list() if r.id in theirs} & store.queue.orphaned(
            scheduler.this_process().host, scheduler.is_alive), what="the command line's adoption")
        store.finish(holder, error={"type": "error", "kind": "cancelled", "message": "held by the test"})
        out, err = command_line.communicate(timeout=HANG_S)
    finally:
        command_line.kill()
    assert command_line.returncode == 0, err
    assert f"run {own} on cpu" in out
    assert "took over runs queued by a process that ended; it runs them before it exits" in err
    records = [store.get(i) for i in (own, *theirs)]
    assert [r.status for r in records] == ["finished"] * 3, [(r.status, r.error) for r in records]
    assert all(r.owner == "crowd" for r in records[1:])  # still theirs; only who ran them changed
    spans = sorted((r.started_at, r.finished_at) for r in records)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))  # one at a time


def test_a_stopped_command_line_whose_run_was_taken_over_reports_how_it_really_ended(store, monkeypatch):
    """Ctrl-Z on a queued CLI run past OWNER_SILENT_S, then fg: it used to print 'failed: None: None' and exit 1
    while its run was still queued. Now it follows the run where it went and reports its result."""
    monkeypatch.setattr(store_owners, "OWNER_SILENT_S", 3.0)
    holder = hold_cpu_slot(store, worker_started=True)
    command_line = cli_run(store)
    try:
        wait_until(lambda: len(queued_ids(store)) == 1, what="the command line's run queued")
        (run_id,) = queued_ids(store)
        # it has said it is alive at least once (an owner never heard from is judged by being alive, and it is)
        wait_until(lambda: last_heartbeat(store, command_line.pid), what="the command line's first heartbeat")
        stop_outside_a_write(store, command_line.pid)
        adopted = []
        wait_until(lambda: adopted.extend(runs.recover(store)) or adopted, what="the take-over")
        assert [r.run_id for r in adopted] == [run_id]
        woke = time.time()
        os.kill(command_line.pid, signal.SIGCONT)  # fg, while its run is still queued here
        # Two heartbeats after it woke: its queue's tick between them, on the same thread, saw its run taken over.
        beats = set()

        def beat_twice():
            seen = last_heartbeat(store, command_line.pid) or 0.0
            if seen > woke:
                beats.add(seen)
            return len(beats) >= 2

        wait_until(beat_twice, what="two heartbeats after fg")
        store.finish(holder, error={"type": "error", "kind": "cancelled", "message": "held by the test"})
        assert adopted[0].wait(HANG_S).status == "finished"
        out, err = command_line.communicate(timeout=HANG_S)
    finally:
        command_line.kill()
    assert "None: None" not in err
    assert command_line.returncode == 0, err
    assert f"run {run_id} on cpu" in out  # its figures, as if it had run it itself
    assert "another process took this run over while this one was stopped" in err


def test_list_and_show_notice_a_dead_owner_themselves(store, capsys):
    """A killed command line's run read 'running' until another process ran a queue on the store."""
    script = """
import json, sys, time
from tcore.experiment.spec import Experiment
from tcore.lab.run import runs
from tcore.store import RunStore
store = RunStore(sys.argv[1])
live = [runs.start(Experiment.from_json(sys.argv[2]), store) for _ in range(2)]
while live[0].handle is None or live[0].phase in ("queued", None):
    time.sleep(0.05)
print(json.dumps([r.run_id for r in live]), flush=True)
time.sleep(600)
"""
    running, waiting = killed_after_it_reports(script, store, env=ENV)
    assert cli.main(["show", running, "--db", str(store.path)]) == 0
    assert "failed: crashed: the process that ran it" in capsys.readouterr().out
    assert cli.main(["list", "--db", str(store.path)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert " failed " in lines[running] and "[crashed]" in lines[running]
    assert " queued " in lines[waiting] and "its process ended: the next app or `tcore run`" in lines[waiting]
    assert store.get(waiting).status == "queued"  # left for a process that runs a queue, not adopted by `list`
    assert cli.main(["show", waiting, "--db", str(store.path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "queued (its process ended: the next app or `tcore run` on this store runs it)")  # not "queued: None: None"
