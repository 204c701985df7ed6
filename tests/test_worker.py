"""The worker process and its events: bad input, compile errors, cancel, timeout, a worker that dies."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from tcore.experiment.spec import Experiment, SpecError
from tcore.figures import timeline
from tcore.lab.queue import spares
from tcore.lab.run import registry, runs
from tcore.lab.settings.config import REPO_ROOT


class Recorder:
    """Collects a run's events (from the run's follower thread) so a test can wait for one."""

    def __init__(self):
        self.events = []

    def __call__(self, event):
        self.events.append(event)

    def wait_for_phase(self, live, phase, timeout_s=120):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if any(e["type"] == "phase" and e["phase"] == phase for e in list(self.events)):
                return list(self.events)
            assert not live.done, f"run ended before phase {phase}: {live.handle.final}"
            time.sleep(0.05)
        raise AssertionError(f"no phase {phase} within {timeout_s} s; saw {self.events}")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_worker_refuses_an_invalid_spec_with_an_error_event():
    proc = subprocess.run([sys.executable, "-m", "tcore.worker"], input=json.dumps({"model": "gpt9"}),
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 1
    (event,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert event["type"] == "error" and event["kind"] == "invalid_spec"
    assert "choose one of: captioner, resnet50, flux" in event["message"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_bad_input_is_refused_before_any_worker_starts(store):
    with pytest.raises(SpecError, match="no usable CUDA GPU"):
        runs.start(Experiment(device="cuda"), store)
    assert store.list() == []


def test_events_arrive_in_phase_order_and_cancel_kills_the_process_group(tiny, store):
    recorder = Recorder()
    # cold caches: the compile phase lasts long enough to cancel in
    live = runs.start(tiny.replace(cache="cold"), store, on_event=recorder)
    seen = recorder.wait_for_phase(live, "compiling")
    phases = [e["phase"] for e in seen if e["type"] == "phase"]
    assert phases == ["building", "eager", "compiling"]
    assert seen[0]["type"] == "started" and seen[0]["device"] == "cpu"
    assert all("t" in e for e in seen)
    live.cancel()
    record = live.wait()
    assert record.status == "failed" and record.error_kind == "cancelled"
    assert not _group_alive(live.handle.pid)
    assert store.get(live.run_id).error["message"] == "cancelled by the user"


def test_timeout_stops_the_run_and_records_it(tiny, store):
    # the most steps a spec allows, eager: minutes on any machine, so it is the 3 s that ends it
    record = runs.execute(tiny.replace(backend="eager", timed_steps=100_000), store, timeout_s=3)
    assert record.status == "failed" and record.error_kind == "timeout"
    assert "3 s time limit" in record.error["message"]


def test_a_worker_that_dies_is_recorded_as_crashed_with_its_log(tiny, store):
    recorder = Recorder()
    live = runs.start(tiny.replace(cache="cold"), store, on_event=recorder)
    recorder.wait_for_phase(live, "compiling")
    os.kill(live.handle.pid, signal.SIGKILL)  # as the kernel's OOM killer would
    record = live.wait()
    assert record.status == "failed" and record.error_kind == "crashed"
    assert "SIGKILL" in record.error["message"]
    assert isinstance(record.error["log_tail"], list)


def test_a_graph_break_under_fullgraph_is_a_compile_error_with_the_reason(tiny, store):
    exp = tiny.replace(graph_break=True, fullgraph=True, compile="regional")
    record = runs.execute(exp, store, timeout_s=300)
    assert record.status == "failed" and record.error_kind == "compile_error"
    assert "item" in record.error["message"]  # the .item() call that breaks the graph
    assert record.error["traceback"]
    assert record.error["compile_phase"] == "tracing"  # so the page's advice is about tracing, not the backend


def test_a_compile_error_says_which_part_of_torch_compile_failed():
    from tcore.worker.__main__ import compile_phase

    class BackendCompilerFailed(Exception):  # as torch._dynamo.exc names it
        pass

    class Unsupported(Exception):
        pass

    assert compile_phase(BackendCompilerFailed()) == "backend"
    assert compile_phase(Unsupported()) == "tracing"


def test_command_line_runs_and_lists_what_the_app_would_store(tmp_path):
    db = tmp_path / "cli.sqlite"
    run = subprocess.run([sys.executable, "-m", "tcore", "run", "--db", str(db), "--model", "resnet50",
                          "--device", "cpu", "--backend", "eager", "--timed-steps", "2", "--rounds", "1",
                          "--warmup-steps", "1", "--quiet"], capture_output=True, text=True, cwd=REPO_ROOT,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert "Throughput (steps/s)" in run.stdout and "Speedup" in run.stdout
    assert "no interval: 1 round cannot give an interval of the run's own" in run.stdout  # --rounds 1
    assert "history: No earlier run of this setting on this machine" in run.stdout
    again = subprocess.run(run.args, capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "history: 1 earlier run of this setting on this machine: " in again.stdout and "• this run" in again.stdout
    assert "before this run: 1 earlier run of this setting on this machine" in again.stderr
    listed = subprocess.run([sys.executable, "-m", "tcore", "list", "--db", str(db), "--json"],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    (record, _) = json.loads(listed.stdout)
    assert record["status"] == "finished" and record["spec"]["preset"] == "tiny"  # the CPU default preset
    assert record["result"]["speedup_between_source"] == "default" and record["result"]["pinned_cpu"] is None
    assert "no separate GPU time" in record["result"]["unavailable"]["eager_gpu_time_samples_per_s"]
    # The run's timeline: its phases touch end to end, in the order a run goes, and add up to the run's wall time
    # as the store saw it (queued to finished, read on another clock) within 5%
    phases, wall = record["result"]["timeline"], record["finished_at"] - record["created_at"]
    assert abs(sum(p["s"] for p in phases) - wall) <= 0.05 * wall
    assert record["result"]["timeline_wall_s"] == pytest.approx(sum(p["s"] for p in phases), abs=0.01)
    for before, after in zip(phases, phases[1:]):
        assert after["start_s"] == pytest.approx(before["start_s"] + before["s"], abs=2e-3)
    names = [p["name"] for p in phases]
    order = ["queue", "worker", "model build", "eager warm-up", "Dynamo", "compiled warm-up", "eager timed rounds",
             "profiling", "worker exit", "saving"]
    where = [next(i for i, n in enumerate(names) if n.startswith(o)) for o in order]
    assert where == sorted(where), names
    assert {"compile", "measure", "lab", "wait"} == {p["kind"] for p in phases}
    helped = subprocess.run([sys.executable, "-m", "tcore", "run", "--help"], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=120)
    assert "the same one the Run page opens on: captioner" in " ".join(helped.stdout.split())
    refused = subprocess.run([sys.executable, "-m", "tcore", "run", "--db", str(db), "--batch-size", "0"],
                             capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert refused.returncode == 2 and "batch_size must be a whole number" in refused.stderr


def test_a_run_takes_the_spare_worker_waiting_in_its_slot(tiny, store):
    """A spare has imported torch and the engine before the run is queued; the run uses it, and its
    compile is still cold: the spare's own fresh cache folders are empty."""
    spares.SPARES.fill("cpu", {}, wait_for_fork_server=True)
    (spare,) = [spares.SPARES._spares["cpu"]]
    deadline = time.time() + 300  # only against a hang: imports take seconds, minutes on a machine loaded to the brim
    while not spare.ready:
        assert time.time() < deadline, "the spare did not finish its imports in 300 s"
        time.sleep(0.1)
    record = runs.execute(tiny.replace(cache="cold", backend="aot_eager"), store, timeout_s=300)
    assert record.status == "finished", record.error
    live = registry.live(record.id)
    assert live.from_spare == "ready" and live.handle.worker is spare
    assert record.result["cache_artifacts"] == "none" and not record.result["fx_graph_cache_hits"]
    assert spares.SPARES._spares.get("cpu") is not spare  # taken: it is nobody's spare any more
    # Figures the live view shows before the result: the compile time (final) and the speedup round by round
    so_far = live.snapshot()["figures_so_far"]
    assert so_far["compile_s"]["value"] == pytest.approx(record.result["compile_s"])
    assert so_far["speedup_so_far"]["rounds"] == so_far["speedup_so_far"]["of"] == live.exp.rounds
    # ... and first of all the eager warm-up step, known before compiling starts
    assert so_far["eager_step_s"]["value"] == pytest.approx(record.result["eager_step_s"])
    # the spare's imports were done before the run: its timeline goes from the queue to the hand-over
    names = [p["name"] for p in record.result["timeline"]]
    assert names[:2] == [timeline.QUEUE, "hand-over to the worker (imports done)"], names
    assert not any(n.startswith("imports") for n in names), names


def test_a_spare_started_under_other_torch_settings_is_not_used(monkeypatch):
    spares.SPARES.fill("cpu", {}, wait_for_fork_server=True)
    spare = spares.SPARES._spares["cpu"]
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE", "1")  # read when Inductor is imported
    assert spares.SPARES.take("cpu", {}) is None
    assert spare.proc.wait(60) == 0  # let go: it exits by itself once its imports are done


def test_a_worker_given_nothing_exits_quietly():
    proc = subprocess.run([sys.executable, "-m", "tcore.worker"], input="", capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0 and proc.stdout == ""
