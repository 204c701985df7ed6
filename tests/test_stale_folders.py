"""Folders a SIGKILLed process leaves in the temporary folder: a worker's profiler scratch lies inside its run's
folder, and a run folder whose lab process is gone is removed by the next lab process (never a live one's)."""
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from tcore.experiment import protocol
from tcore.lab.launch import launcher
from tcore.lab.queue import scheduler
from tcore.lab.settings.config import REPO_ROOT
from tcore.worker import profiling

MAKE_FOLDER_AND_HANG = """
import sys, time
from tcore.lab.launch.launcher import run_folder
print(run_folder("tcore-run-"), flush=True)
time.sleep(600)
"""


def test_the_profilers_scratch_lies_in_the_runs_folder(tmp_path, monkeypatch):
    temp, run = tmp_path / "temp", tmp_path / "run"
    temp.mkdir(), run.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setenv(protocol.WORKER_DIR, str(run))
    made = []
    real = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: made.append(real(**kw)) or made[-1])
    x = torch.ones(4)
    profiling.profile_steps(lambda: x + 1, "cpu", 2, "eager")
    assert made and all(Path(m).parent == run for m in made)
    assert not [p for p in temp.iterdir() if p.name.startswith("tcore-")]


def test_a_killed_lab_process_folders_are_removed_by_the_next_one_and_a_live_ones_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TMPDIR=str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", MAKE_FOLDER_AND_HANG], stdout=subprocess.PIPE, text=True,
                             cwd=REPO_ROOT, env=env)
    dead = Path(child.stdout.readline().strip())
    (dead / "worker.log").write_text("a run's log")
    assert scheduler.remove_stale_folders() == []  # its process still runs: left alone
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    mine = launcher.run_folder("tcore-run-")
    someone_elses = tmp_path / "tcore-run-unmarked"  # no owner said: not ours to judge
    someone_elses.mkdir()
    assert scheduler.remove_stale_folders() == [dead]
    assert not dead.exists() and mine.is_dir() and someone_elses.is_dir()
