"""Runs on a Ray cluster (tcore.lab.launch.cluster): two nodes of one logical GPU each, started on this machine.

ray.cluster_utils.Cluster starts real raylets; their "GPUs" are declared, so the runs themselves are
captioner/tiny on the CPU with backend=eager, as in test_queue.py. One cluster for the module: it takes
about 20 s to start on a 2-core machine. The node-killing test goes last.
"""
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

ray = pytest.importorskip("ray", reason="Ray is optional: pip install -r requirements-cluster.txt")
from ray.cluster_utils import Cluster  # noqa: E402

from tcore.lab.launch import cluster  # noqa: E402
from tcore.lab.policy import limits  # noqa: E402
from tcore.lab.queue import scheduler  # noqa: E402
from tcore.lab.run import runs  # noqa: E402
from tcore.lab.settings import config  # noqa: E402
from tests import helpers  # noqa: E402
from tests.helpers import wait_until  # noqa: E402

QUICK = helpers.QUICK.replace(cache="cold")  # each run on a node starts with empty caches (tcore.lab.launch.remote)
REPO = Path(__file__).resolve().parent.parent
# the most steps a spec allows (minutes): still measuring when it is cancelled or times out
LONG = QUICK.replace(timed_steps=100_000)
# The waits below end as soon as what they wait for happens; their bound only stops a hang, and is long enough for a
# machine whose cores are all taken by something else (the suite's parallel part, or another user).
HANG_S = 180


@pytest.fixture(scope="module")
def ray_cluster():
    """A head with no GPU and two nodes of one logical GPU each; the lab connects to it by its address."""
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    # each node its own folder for the unpacked working_dir (cluster.own_runtime_dir says why)
    nodes = [c.add_node(num_cpus=1, num_gpus=1, **cluster.own_runtime_dir(i)) for i in range(2)]
    c.wait_for_nodes()
    old = os.environ.get(cluster.ADDRESS_ENV)
    os.environ[cluster.ADDRESS_ENV] = c.address
    yield c, nodes
    # the address goes first: the queue's thread, still ticking, would otherwise connect again after the shutdown
    # (ray.init), and the cluster then refuses to remove the head this process is connected to
    if old is None:
        os.environ.pop(cluster.ADDRESS_ENV, None)
    else:
        os.environ[cluster.ADDRESS_ENV] = old
    ray.shutdown()
    c.shutdown()


@pytest.fixture(autouse=True)
def _no_limits_from_outside(monkeypatch, tmp_path):
    for var in [config.CONFIG_ENV, *limits.ENV.values()]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


def gone(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def niceness(pid: int) -> int:
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[16])


def test_the_clusters_gpus_are_the_slots_and_four_runs_spread_over_both_nodes_one_per_slot(ray_cluster, store):
    _, nodes = ray_cluster
    slots = scheduler.device_slots("cpu")
    assert len(slots) == 2 and all(s.startswith("ray:") and s.endswith(":gpu0") for s in slots)
    assert {cluster.node_of(s).node_id for s in slots} == {n.node_id for n in nodes}
    assert len({n.get_runtime_env_dir_path() for n in nodes}) == 2  # neither deletes the code the other runs from
    assert runs._sweep_width("cpu") == 2  # a sweep spreads over both

    events: dict[str, list[str]] = {}
    lock = threading.Lock()

    def on_event(run_id):
        def seen(event):
            with lock:
                events.setdefault(run_id, []).append(event["type"])
        return seen

    started = []
    for i in range(4):
        run = runs.start(QUICK, store, owner=f"p{i}")
        run._on_event = on_event(run.run_id)
        started.append(run)
    records = [run.wait(2 * HANG_S) for run in started]
    assert [r.status for r in records] == ["finished"] * 4, [r.error for r in records]
    assert {r.device_slot for r in records} == set(slots)  # both nodes ran
    assert {r.env["ray_node_id"] for r in records} == {n.node_id for n in nodes}
    assert all(r.env["ray_gpu_ids"] == ["0"] and r.env["hostname"] for r in records)  # the node and its GPU
    # Ray's OMP_NUM_THREADS=1 does not reach the worker: torch has the threads it has locally
    assert {r.env["torch_threads"] for r in records} == {torch.get_num_threads()}
    for slot in slots:  # one run at a time per slot
        here = sorted((r.started_at, r.finished_at) for r in records if r.device_slot == slot)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(here, here[1:]))
    for run in started:  # the live view streamed back: phases, progress, power, before the result
        assert {"phase", "progress"} <= set(events[run.run_id]) and events[run.run_id][-1] == "result"
        assert run.record.result["eager_samples_per_s"] > 0
    assert store.queue.running_and_queued(scheduler.this_process().host) == []


def test_the_system_page_lists_the_nodes_their_gpus_and_what_each_runs(ray_cluster, store, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("COMPILE_LAB_DB", str(store.path))
    run = runs.start(LONG, store, owner="erin~3f9a")
    wait_until(lambda: run.status == "running", HANG_S, "the run leaving the queue")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300).run()
    at.switch_page("app_pages/system.py").run()
    assert not at.exception
    assert "Ray cluster" in [h.value for h in at.subheader]
    table = at.dataframe[0].value
    assert len(table) == 2 and set(table["GPU"]) == {"GPU"}
    # named as the queue names owners
    assert sorted(table["running"]) == sorted(["idle", f"{LONG.label} · erin (3f9a)"])
    run.cancel()
    assert run.wait(HANG_S).error_kind == "cancelled"


def test_cancel_and_time_out_reach_the_remote_worker_and_only_the_owner_or_instructor_may_cancel(
        ray_cluster, store, monkeypatch):
    # Ray's forced kill comes almost at once, so the task's own clean-up loses the race to it every time, as it
    # sometimes does with the 5 s grace on a loaded machine: its guard must remove its folder
    monkeypatch.setattr(cluster, "CANCEL_GRACE_S", 0.2)
    victim = runs.start(LONG, store, owner="alice")
    monkeypatch.setenv("COMPILE_LAB_MAX_RUN_S", "12")  # read when a run is submitted: this one only
    slow = runs.start(LONG, store, owner="bob", timeout_s=600)
    monkeypatch.delenv("COMPILE_LAB_MAX_RUN_S")
    wait_until(lambda: victim.phase == "measuring" and victim.handle.remote, HANG_S, "the victim measuring")
    pid = victim.handle.remote["pid"]
    # at this process's niceness (the raylets' here), not at the +15 Ray gives its workers and their children
    assert niceness(pid) == os.getpriority(os.PRIO_PROCESS, 0)
    with pytest.raises(PermissionError, match="belongs to someone else"):
        runs.cancel(victim.run_id, store, owner="bob")
    runs.cancel(victim.run_id, store, owner="carol", instructor=True)
    rec = victim.wait(HANG_S)
    assert rec.status == "failed" and rec.error_kind == "cancelled" and rec.owner == "alice"
    wait_until(lambda: gone(pid), HANG_S, "the remote worker gone")
    # Its folder on the node goes too, whoever wins the race between the task's own clean-up and Ray's forced kill
    # CANCEL_GRACE_S after the cancel: the task's guard removes it once the task has ended, however it ended
    # (tests/test_remote_cleanup.py kills a task outright).
    workdir = Path(victim.handle.remote["workdir"])
    wait_until(lambda: not workdir.exists(), HANG_S, "the cancelled task's folder removed")

    rec = slow.wait(HANG_S)
    assert rec.error_kind == "timeout" and "12 s time limit" in rec.error["message"]
    remote = slow.handle.remote
    if "pid" in remote:  # on a loaded machine the 12 s can pass before the remote worker has said its pid
        wait_until(lambda: gone(remote["pid"]), HANG_S, "the timed-out worker gone")
        wait_until(lambda: not Path(remote["workdir"]).exists(), HANG_S, "the timed-out task's folder removed")
    assert store.queue.running_and_queued(scheduler.this_process().host) == []  # both slots free again


APP_THAT_DIES = """
import sys, time
from tcore.experiment.spec import Experiment
from tcore.lab.run import runs
from tcore.store import RunStore
store = RunStore(sys.argv[1])
running = [runs.start(Experiment.from_json(sys.argv[2]), store, owner=o) for o in ("fay", "gus")]
runs.start(Experiment.from_json(sys.argv[3]), store, owner="hal")  # waits for a slot
while not all(r.handle is not None and r.handle.remote for r in running):
    time.sleep(0.1)
print(*[f'{r.handle.remote["pid"]}:{r.handle.remote["workdir"]}' for r in running], flush=True)
time.sleep(600)
"""


def test_an_app_that_restarts_recovers_the_queue_and_its_remote_runs_end(ray_cluster, store):
    app = subprocess.Popen([sys.executable, "-c", APP_THAT_DIES, str(store.path), LONG.to_json(), QUICK.to_json()],
                           stdout=subprocess.PIPE, text=True, cwd=REPO)
    said = [p.split(":", 1) for p in app.stdout.readline().split()]
    assert len(said) == 2, "the dying app's runs never started"
    pids, workdirs = [int(p) for p, _ in said], [Path(w) for _, w in said]
    app.kill()
    app.wait()
    adopted = runs.recover(store)  # what a restarted app does first
    crashed = [r for r in store.list() if r.owner in ("fay", "gus")]
    assert [r.error_kind for r in crashed] == ["crashed", "crashed"]
    assert [r.owner for r in adopted] == ["hal"]
    # Ray ends a dead driver's tasks
    wait_until(lambda: all(gone(p) for p in pids), HANG_S, "the dead app's remote workers gone")
    wait_until(lambda: not any(w.exists() for w in workdirs), HANG_S, "the dead app's tasks' folders removed")
    assert adopted[0].wait(HANG_S).status == "finished"


def test_a_killed_node_ends_its_run_as_crashed_with_the_reason_and_takes_its_slot_away(ray_cluster, store):
    c, nodes = ray_cluster
    run = runs.start(LONG, store, owner="dora")
    wait_until(lambda: run.phase == "measuring" and run.handle.remote, HANG_S, "the run measuring")
    victim = next(n for n in nodes if n.node_id == run.handle.remote["ray_node_id"])
    c.remove_node(victim, allow_graceful=False)
    rec = run.wait(HANG_S)
    assert rec.status == "failed" and rec.error_kind == "crashed"
    assert "ended without a result" in rec.error["message"] and run.handle.remote["hostname"] in rec.error["message"]
    assert store.queue.running_and_queued(scheduler.this_process().host) == []  # its slot is free ...
    wait_until(lambda: len(scheduler.device_slots("cpu")) == 1, HANG_S, "the node's slot gone")  # ... and gone
    assert runs.start(QUICK, store, owner="dora").wait(HANG_S).status == "finished"  # the other node goes on
