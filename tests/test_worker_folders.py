"""A lab process that exits leaves no worker folder (tcore-run-*) behind: not its spares', not its runs'.

A dismissed spare's folder used to be removed by a daemon thread that waited up to 30 s for the spare to finish
its imports; a command line that ended or an app that shut down killed that thread first, and the folder stayed
in the temporary folder (hundreds of them on the CI machine).
"""
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# A lab process with a spare waiting, a spare it has just let go, and a run that has ended (its recording thread,
# which removes the folder, is not there: it is a daemon thread, which the exit may kill first). Then it exits.
LAB = """
import json, sys
from tcore.experiment.spec import Experiment
from tcore.lab.launch import handles, launcher
from tcore.lab.queue.spares import SPARES

SPARES.fill("cpu", {}, wait_for_fork_server=True)
waiting = SPARES._spares["cpu"]
let_go = launcher.Worker({})
let_go.dismiss()
exp = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", warmup_steps=1, timed_steps=1,
                 rounds=1, backend="eager", cache="cold")
run = handles.RunHandle(exp, launcher.Worker({}))
events = [event["type"] for event in run]
print(json.dumps({"events": events, "workers": [[w.proc.pid, str(w.workdir)] for w in (waiting, let_go, run.worker)]}))
"""


def alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_lab_process_that_exits_removes_its_spares_and_runs_folders():
    done = subprocess.run([sys.executable, "-c", LAB], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["events"][-1] == "result", said["events"]
    for pid, workdir in said["workers"]:
        assert not Path(workdir).exists(), f"{workdir} left behind"
        assert not alive(pid), f"worker {pid} left running"


def test_a_spare_whose_lab_process_was_killed_removes_its_own_folder():
    """SIGKILL runs no clean-up in the lab process: the spare, whose stdin then ends, removes its folder itself."""
    lab = subprocess.Popen([sys.executable, "-c", SPARE_THEN_HANG], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        pid, workdir = json.loads(lab.stdout.readline())
        assert Path(workdir).exists()
    finally:
        lab.kill()
        lab.wait()
    deadline = time.time() + 300  # the spare finishes its imports first (300 s only against a hang)
    while alive(pid) or Path(workdir).exists():
        assert time.time() < deadline, f"{workdir} left behind" if Path(workdir).exists() else f"spare {pid} alive"
        time.sleep(0.2)


SPARE_THEN_HANG = """
import json, time
from tcore.lab.launch import handles, launcher
spare = launcher.Worker({})
print(json.dumps([spare.proc.pid, str(spare.workdir)]), flush=True)
time.sleep(600)
"""


def test_a_lab_process_at_exit_signals_no_group_by_the_number_of_a_worker_reaped_long_since(tmp_path, monkeypatch):
    """A spare that died was reaped; its number, which pid_max (32768 here) soon hands to another process, stayed in the
    list the lab's exit goes through, and the exit sent SIGKILL to that number's group: another run's worker, or a
    stand-in a test held still (a loaded CI run read it never stopped). A worker not reaped yet is ended as before."""
    import weakref

    from tcore.lab.launch import launcher

    class Stub:  # what _remove_folders_at_exit reads of a worker
        def __init__(self, proc, folder):
            self.proc, self.workdir, self.taken = proc, folder, False

    reaped = subprocess.Popen([sys.executable, "-c", "pass"])
    reaped.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    workers = [Stub(reaped, tmp_path / "reaped"), Stub(alive, tmp_path / "alive")]
    for w in workers:
        w.workdir.mkdir()
    ended = []
    monkeypatch.setattr(launcher, "_STARTED", weakref.WeakSet(workers))
    monkeypatch.setattr(launcher.processes, "end_group", lambda pgid, *sig: ended.append(pgid) or alive.kill())
    launcher._remove_folders_at_exit()
    assert ended == [alive.pid]  # the reaped one's number is no one's to signal
    assert not any(w.workdir.exists() for w in workers)  # both folders go
