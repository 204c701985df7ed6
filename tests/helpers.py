"""Test helpers: runs written straight into a store, as if a worker had run them, without the queue; and what the
queue's tests share (QUICK, a held slot, waiting, overlap, an "app" killed mid-run)."""
from __future__ import annotations

import copy
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tcore.experiment.spec import Experiment
from tcore.lab.queue import scheduler
from tcore.lab.settings.config import REPO_ROOT
from tcore.store import RunStore
from tests.store_children import insert_row

# The tests' one quick experiment, a real run in about 4 s on the CPU: Dynamo traces it, the eager backend skips
# Inductor. Import it and .replace() what a test needs otherwise (e.g. cache="cold" on a cluster).
QUICK = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", warmup_steps=1, timed_steps=2,
                   rounds=1, backend="eager", cache="warm")


def insert_run(store: RunStore, exp: Experiment, *, status: str = "running") -> str:
    """A run row outside the queue (no owner, no host, so no queue adopts it), for a test to finish by hand."""
    return insert_row(store, **row_of(exp), status=status)


def row_of(exp: Experiment) -> dict:
    """What insert_row needs of an experiment, for a child process that should not import torch to build one."""
    return {"label": exp.label, "model": exp.model, "preset": exp.preset, "spec_json": exp.to_json()}


DATA = Path(__file__).resolve().parent / "data"


def recorded_run() -> dict:
    """A real run's spec, env and result (resnet50/tiny on a 2-core CPU, Inductor, warm cache), as the store kept it."""
    return json.loads((DATA / "resnet50-tiny-cpu-run.json").read_text())


def gpu_like_result(*, samples_per_s: float, speedup: float, compile_s: float, batch: int,
                    power_w: float = 420.0) -> dict:
    """The recorded result rescaled to a GPU run's magnitudes: throughput, compile time, power and energy.

    For layout tests: labels and axes must fit real figures, from a few samples/s to tens of thousands.
    """
    r = copy.deepcopy(recorded_run()["result"])
    r.update(device="cuda", power_source="NVML energy counter", speedup=speedup, compile_s=compile_s)
    for variant, sps in (("eager", samples_per_s), ("compiled", samples_per_s * speedup)):
        steps = sps / batch
        watts = power_w * (1.35 if variant == "compiled" else 1.0)
        r.update({f"{variant}_samples_per_s": sps, f"{variant}_steps_per_s": steps,
                  f"{variant}_steps_per_s_min": steps * 0.97, f"{variant}_steps_per_s_max": steps * 1.02,
                  f"{variant}_latency_ms_p50": 1000 / steps, f"{variant}_latency_ms_p95": 1080 / steps,
                  f"{variant}_power_w": watts, f"{variant}_energy_j_per_step": watts / steps,
                  f"{variant}_energy_j_per_sample": watts / sps, f"{variant}_samples_per_j": sps / watts,
                  f"{variant}_peak_mem_gib": 21.4 if variant == "eager" else 19.8})
    # The stored rounds at these rates too: a record's speedup is recomputed from its blocks (tcore.figures.paired).
    r["blocks"] = {v: [[n, n * batch / (samples_per_s * (speedup if v == "compiled" else 1.0))] for n, _ in blocks]
                   for v, blocks in r["blocks"].items()}
    eager_step, compiled_step = batch / samples_per_s, batch / (samples_per_s * speedup)
    r["breakeven_steps"] = compile_s / (eager_step - compiled_step) if speedup > 1 else None
    r["compile_phases_s"] = {k: v * compile_s / 16.3 for k, v in r["compile_phases_s"].items()}
    r["unavailable"] = {}
    return r


def power_trace(seconds: float = 40.0, hz: float = 10.0) -> list[list]:
    """[t_s, watts, phase, util_pct] samples over the worker's phases, as the power sampler records them."""
    phases = [("building", 0.1), ("eager", 0.2), ("compiling", 0.45), ("warmup", 0.5), ("measuring", 0.9),
              ("profiling", 1.0)]
    samples, t = [], 0.0
    while t < seconds:
        phase = next(p for p, end in phases if t / seconds <= end)
        watts = {"measuring": 560.0, "eager": 410.0, "warmup": 500.0}.get(phase, 120.0)
        samples.append([round(t, 2), watts, phase, 95.0 if watts > 300 else 10.0])
        t += 1 / hz
    return samples


def store_a_labs_runs(store: RunStore, owner: str) -> dict[str, str]:
    """Finished runs of `owner` with a workshop's spread of figures: Flux at ~100-200 samples/s and the captioner at
    ~4,700 on a GPU (with and without its deliberate graph break), with power, and the recorded CPU run; name ->
    run id, oldest first (Flux is the newest)."""
    made = {}
    recorded = recorded_run()
    runs = [("resnet50-cpu", Experiment.from_dict(recorded["spec"]), recorded["result"], recorded["env"], []),
            ("captioner-gpu", Experiment(model="captioner", device="cuda", preset="full", batch_size=64,
                                         precision="bf16"),
             gpu_like_result(samples_per_s=4700.0, speedup=1.41, compile_s=9.8, batch=64), {"device": "cuda"},
             power_trace()),
            ("captioner-gpu-break", Experiment(model="captioner", device="cuda", preset="full", batch_size=64,
                                               precision="bf16", graph_break=True),
             {**gpu_like_result(samples_per_s=4700.0, speedup=1.12, compile_s=14.9, batch=64), "graph_count": 3,
              "graph_break_count": 2}, {"device": "cuda"}, []),
            ("flux-gpu", Experiment(model="flux", device="cuda", preset="medium", batch_size=2, precision="bf16"),
             {**gpu_like_result(samples_per_s=92.0, speedup=2.29, compile_s=21.2, batch=2, power_w=583.0),
              # two short phases side by side, whose labels would print over each other
              "compile_phases_s": {"dynamo_tracing_s": 3.1, "aot_autograd_s": 1.2, "inductor_lowering_s": 0.4,
                                   "codegen_and_compile_s": 15.9}},
             {"device": "cuda"}, power_trace(60.0))]
    for name, exp, result, env, samples in runs:
        run_id = insert_run(store, exp)
        with store._write() as db:
            db.execute("UPDATE runs SET owner=? WHERE id=?", (owner, run_id))
        store.finish(run_id, result=result, env=env, power_samples=samples)
        made[name] = run_id
        time.sleep(0.01)  # distinct creation times: pages list runs newest first
    return made


# --- the queue's tests ----------------------------------------------------------------------------

def hold_cpu_slot(store: RunStore, *, worker_started: bool = False) -> str:
    """Occupy the cpu slot with a run of this process that has no worker; store.finish() on its id frees the slot.

    worker_started: record this process as its worker, so that recovery does not put it back in the queue as a
    run whose worker never started."""
    proc = scheduler.this_process()
    run_id = store.queue.enqueue(QUICK, device="cpu", owner="holder", proc=proc, timeout_s=None)
    assert store.queue.claim_next(proc, "cpu", ["cpu"], {run_id}) == (run_id, "cpu")
    if worker_started:
        store.queue.set_worker(run_id, os.getpid(), scheduler.process_start(os.getpid()))
    return run_id


# How long a test waits for a real run to end: only a bound on a hang. A tiny run takes seconds alone, but CI's
# parallel part keeps both cores busy with compiles, so a run queued behind two others may wait minutes.
HANG_S = 600


def wait_until(condition, limit_s=180, what="condition"):
    """Poll until condition() holds; the limit only stops a hang (a loaded machine is slow, not wrong). `what` may be
    a function: what it says at the limit (the state that was found instead, say)."""
    deadline = time.time() + limit_s
    while not condition():
        assert time.time() < deadline, f"no {what() if callable(what) else what} within {limit_s} s"
        time.sleep(0.05)


def last_heartbeat(store: RunStore, pid: int) -> float | None:
    """When process `pid` last told the store it is alive (time.time()), or None if never. Until its first heartbeat
    recover() judges an owner by whether it is alive, so a test that stops one waits for that first."""
    with store._connect() as db:
        row = db.execute("SELECT max(seen_at) FROM owners WHERE pid=?", (pid,)).fetchone()
    return row[0] if row else None


def process_state(pid: int) -> str:
    """The process's state letter from /proc: 'T' while stopped, 'Z' once ended and not yet reaped."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def stop_outside_a_write(store: RunStore, pid: int) -> None:
    """SIGSTOP process `pid`, which writes to `store`, at a moment it holds no write lock. Stopped inside one of its
    short writes (a heartbeat, as Ctrl-Z can land), it would keep every other writer out until it goes on, and a test
    that stops it to see it judged silent read "database is locked" instead, now and then on a loaded machine. The
    test holds the write lock itself while it stops the process: theirs is waited out first, the next cannot begin.
    It lets go only once the process reads stopped: a signal is delivered when the process next runs, and one waiting
    for the lock would take it in between."""
    db = sqlite3.connect(store.path, timeout=HANG_S, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: process_state(pid) == "T", HANG_S, what="the process stopped")
    finally:
        db.execute("ROLLBACK")
        db.close()


class StepClock:
    """A clock for timing logic that moves only when a test's step says how long it took: the same figures on a
    quiet machine and a loaded one."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def assert_no_overlap(records):
    spans = sorted((r.started_at, r.finished_at, r.device_slot) for r in records)
    for (_, end, slot), (start, _, next_slot) in zip(spans, spans[1:]):
        assert slot == next_slot == "cpu"
        assert start >= end, f"runs overlap on the cpu slot: {spans}"


def killed_after_it_reports(script: str, store: RunStore, env: dict[str, str] | None = None) -> dict | list:
    """Run `script` as an "app" process on `store`, read the JSON line it prints, then kill it (as a crash would).

    The script gets the store's path and QUICK as JSON as its arguments; env: its environment (default: ours)."""
    child = subprocess.Popen([sys.executable, "-c", script, str(store.path), QUICK.to_json()],
                             stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                             env=env or dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    try:
        line = child.stdout.readline()
    finally:
        child.kill()
        child.wait()
    return json.loads(line)


def stop_group(proc: subprocess.Popen, wait_s: float = 15.0) -> None:
    """End a server started in a process group of its own: SIGTERM, then SIGKILL if it has not ended in `wait_s`
    (a run worker has its own group and ends by itself)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already gone
