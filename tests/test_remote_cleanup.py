"""The Ray task's side of a cluster run (tcore.lab.launch.remote.run_on_node), without a Ray cluster: its folder on the
node goes however the task ends, its worker runs at the node's niceness, not at Ray's +15, and it finds the code even
when the folder Ray started it in has been deleted.

run_on_node is driven here in a plain process that plays the Ray worker (node_facts stubbed); the test kills that
process with SIGKILL, as Ray's forced cancel does, so the task's own `finally` never runs: only its guard can
remove the folder. The worker is killed while it still imports torch, so each test takes a second or two.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tcore.experiment import protocol
from tests.helpers import QUICK, wait_until

REPO = Path(__file__).resolve().parent.parent
LONG = QUICK.replace(timed_steps=100_000, cache="cold")  # still measuring when the task is killed

# Plays the Ray worker process: starts the task, prints each event it yields as a JSON line, then keeps going
# (the worker imports, then measures) until killed; sys.argv[2] "close" ends the generator instead, as Ray does
# when the lab side lets go of it.
TASK = """
import json, os, sys
from tcore.lab.launch import remote
remote.node_facts = lambda: {"ray_node_id": "test", "hostname": "here"}
os.nice(int(sys.argv[3]))  # as Ray starts its workers: nicer than the raylet
os.rmdir(os.getcwd())  # as another node on this machine unpacking the working_dir afresh leaves a Ray worker
assert str(remote.CODE_ROOT) == os.environ["PYTHONPATH"]  # where the worker will run from: this checkout
gen = remote.run_on_node(sys.argv[1], {}, False, False)
print(json.dumps(next(gen)), flush=True)
print(json.dumps(next(gen)) if sys.argv[2] == "note" else "{}", flush=True)
if sys.argv[2] == "close":
    gen.close()
    print("closed", flush=True)
for event in gen:
    pass
"""


def start_task(how: str, nicer_by: int = 0, raylet_pid: int | None = None) -> tuple[subprocess.Popen, dict]:
    env = dict(os.environ, RAY_RAYLET_PID=str(raylet_pid or os.getpid()), PYTHONPATH=str(REPO))
    # started in a folder of its own that the task deletes first: the worker must find the code without its cwd
    task = subprocess.Popen([sys.executable, "-c", TASK, protocol.envelope(LONG.to_json(), {}), how, str(nicer_by)],
                            stdout=subprocess.PIPE, text=True, cwd=tempfile.mkdtemp(prefix="ray-worker-cwd-"),
                            env=env)
    started = json.loads(task.stdout.readline())
    assert started["type"] == "remote", started
    return task, started


def gone(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def guards_of(workdir: str) -> list[int]:
    """The processes whose command line names the folder: its guard, while it waits."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and workdir.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def test_a_task_killed_outright_still_has_its_folder_removed_and_its_worker_ended():
    task, started = start_task("run")
    workdir, pid = Path(started["workdir"]), started["pid"]
    assert workdir.is_dir() and guards_of(str(workdir))
    task.stdout.readline()
    task.send_signal(signal.SIGKILL)  # what ray.cancel(force=True) does: no finally, no clean-up of its own
    task.wait()
    wait_until(lambda: gone(pid), what="worker gone")
    wait_until(lambda: not workdir.exists(), what="folder removed after the task was killed")
    wait_until(lambda: not guards_of(str(workdir)), what="guard gone")


def test_a_task_that_cleans_up_itself_leaves_its_guard_nothing_to_do():
    task, started = start_task("close")
    workdir, pid = Path(started["workdir"]), started["pid"]
    task.stdout.readline()
    assert task.stdout.readline().strip() == "closed"
    assert not workdir.exists() and gone(pid)  # the task's own finally, before anything else
    wait_until(lambda: not guards_of(str(workdir)), what="guard gone")  # told "done": it exits at once
    task.kill()
    task.wait()


def test_the_worker_runs_at_the_nodes_niceness_not_at_rays():
    here = os.getpriority(os.PRIO_PROCESS, 0)  # this process plays the raylet
    task, started = start_task("note", nicer_by=5)
    try:
        note = json.loads(task.stdout.readline())
        worker_nice = int(open(f"/proc/{started['pid']}/stat").read().rsplit(")", 1)[1].split()[16])
        if note.get("type") == "note":  # not allowed to lower it here (no CAP_SYS_NICE): the person is told
            assert "RAY_worker_niceness=0" in note["text"] and worker_nice == min(here + 5, 19)
        else:
            assert worker_nice == here
    finally:
        task.kill()
        task.wait()
