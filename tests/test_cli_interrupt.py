"""Ctrl-C on `python -m tcore run`: its run is cancelled in the store, queued or running, and the command says so in
one line and exits with 130, as a shell expects. A run left queued used to be run later by the app, for no one, and
the command printed a KeyboardInterrupt traceback."""
import os
import signal
import subprocess
import sys

import pytest

from tests.helpers import hold_cpu_slot, wait_until

pytestmark = pytest.mark.usefixtures("no_outside_limits")

CLI_QUICK = ["--model", "captioner", "--preset", "tiny", "--batch-size", "2", "--device", "cpu", "--warmup-steps",
             "1", "--rounds", "1", "--backend", "eager", "--cache", "warm"]


def cli_run(store, *extra) -> subprocess.Popen:
    from tcore.lab.settings.config import REPO_ROOT

    # Ctrl-C as a terminal's foreground command gets it: a suite started in the background by a script (`make test &`,
    # bench/ci_soak.sh) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt for it
    start = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
             "sys.argv[0] = 'tcore'; runpy.run_module('tcore', run_name='__main__', alter_sys=True)")
    return subprocess.Popen([sys.executable, "-c", start, "run", "--db", str(store.path), *CLI_QUICK, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                            env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), COMPILE_LAB_SPARE_WORKERS="0"))


def interrupted(cli: subprocess.Popen, signum: int = signal.SIGINT) -> tuple[str, str]:
    cli.send_signal(signum)
    try:
        return cli.communicate(timeout=300)  # only a bound on a hang: a worker stops within seconds
    finally:
        cli.kill()


def own_run(store):
    runs = [r for r in store.list() if r.owner and ":" in r.owner]  # queued by a command line: "host:pid"
    return runs[0] if len(runs) == 1 else None


def cancelled_quietly(cli, err: str, store, *, code: int = 130, how: str = "interrupted") -> None:
    """The command exited 130 (143 for SIGTERM) with one line and no traceback, its own run recorded cancelled."""
    assert cli.returncode == code, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    run = own_run(store)
    assert run.status == "failed" and run.error_kind == "cancelled", (run.status, run.error)
    assert f"{how}: run {run.id} cancelled" in err.splitlines()[-1]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_on_a_queued_run_cancels_it_and_exits_without_a_traceback(store, signum):
    """SIGTERM (`kill`, a job's time limit) left the run in the store for the app to adopt and run for no one, or, once
    running, recorded it crashed when its owner was found gone; it is Ctrl-C's path now, exiting with 143."""
    holder = hold_cpu_slot(store, worker_started=True)  # the run waits behind this one
    cli = cli_run(store, "--timed-steps", "2")
    try:
        wait_until(lambda: ((r := own_run(store)) is not None and r.status == "queued") or cli.poll() is not None,
                   what="the run queued")
        assert cli.poll() is None, cli.communicate()
        out, err = interrupted(cli, signum)
    finally:
        cli.kill()
    cancelled_quietly(cli, err, store, code=128 + signum,
                      how="interrupted" if signum == signal.SIGINT else "terminated")
    assert store.get(holder).status == "running"  # someone else's run is none of its business


def test_ctrl_c_on_a_running_run_stops_its_worker_and_records_it_cancelled(store):
    cli = cli_run(store, "--timed-s", "400", "--target-pct", "0")  # within the lab's 900 s: it runs until stopped
    try:
        wait_until(lambda: worker_pid(store) or cli.poll() is not None, limit_s=300, what="the run's worker started")
        assert cli.poll() is None, cli.communicate()
        worker = worker_pid(store)
        out, err = interrupted(cli)
    finally:
        cli.kill()
    cancelled_quietly(cli, err, store)
    wait_until(lambda: not _alive(worker), what="the worker gone")


def worker_pid(store) -> int | None:
    with store._connect() as db:
        row = db.execute("SELECT pid FROM runs WHERE status='running' AND pid IS NOT NULL").fetchone()
    return row[0] if row else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has ended
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_ctrl_c_while_a_taken_over_run_runs_cancels_it_too_and_names_it(store):
    """The command took over a run queued by a process that ended, and was running it when Ctrl-C came: its line named
    only its own run, and the taken-over one was left `running` with its worker gone, until another process found it
    crashed. Its worker ends with the command, so it is cancelled too, and the line names it."""
    from tcore.experiment.spec import Experiment
    from tcore.lab.queue import scheduler

    me = scheduler.this_process()
    gone = scheduler.Proc(me.host, 999_999, "1")  # no such process: the command takes its run over at start
    long = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", backend="eager", cache="warm",
                      timed_s=400.0, target_pct=0.0, warmup_steps=1)
    # no time limit of its own (queued with none): its worker's end raised in the reading thread, and the command hung
    taken = store.queue.enqueue(long, device="cpu", owner="bob", proc=gone, timeout_s=None)
    cli = cli_run(store, "--timed-steps", "2")
    try:
        wait_until(lambda: worker_pid(store) or cli.poll() is not None, limit_s=300, what="the taken-over run's worker")
        assert cli.poll() is None, cli.communicate()
        assert store.get(taken).status == "running"
        out, err = interrupted(cli)
    finally:
        cli.kill()
    cancelled_quietly(cli, err, store)
    assert store.get(taken).error_kind == "cancelled", store.get(taken).error
    assert f"run {taken} (taken over from a process that ended) cancelled" in err.splitlines()[-1], err
