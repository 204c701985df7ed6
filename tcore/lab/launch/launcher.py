"""Start a worker process for one experiment, follow its events, cancel it or time it out.

Each run gets a fresh process in its own process group, with fresh TORCHINDUCTOR_CACHE_DIR and
TRITON_CACHE_DIR: that is what makes its compile time a cold one. Cancelling or timing out kills
the whole group (the worker and Inductor's compile workers).

A worker imports torch, the engine and the models before it reads its experiment (seconds), so the app
keeps one spare per device slot started ahead (SparePool): a run takes it and
skips the imports. A spare is unused, so nothing in it has compiled and its caches are empty; it is
only handed a run while the settings torch reads at import (IMPORT_TIME_ENV) are the ones it started with.
On a machine without a GPU, workers (spares too) are forked from a process that has done those imports
once (tcore.lab.launch.fork_server_client), under the same rule.
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from pathlib import Path

from tcore.experiment import protocol
from tcore.host import processes
from tcore.lab.launch import fork_server_client
from tcore.lab.settings import private
from tcore.lab.settings.config import REPO_ROOT, TORCH_TRACE_DIR

_END = {"type": "_end"}


def warm_cache_dir() -> Path:
    """The compile caches that warm runs share: $COMPILE_LAB_CACHE_DIR, else ~/.cache/compile-lab."""
    if os.environ.get("COMPILE_LAB_CACHE_DIR"):
        return Path(os.environ["COMPILE_LAB_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "compile-lab"


# Environment variables read when torch, Triton, the engine or their libraries are imported: a spare
# started under other values than the lab process has now would run with stale ones. The rest are
# handed over with the experiment (RunHandle), as they are read at run time if at all.
IMPORT_TIME_ENV = ("TORCH", "PYTORCH", "TRITON", "INDUCTOR", "CUDA", "NVIDIA", "NCCL", "OMP_", "MKL", "KMP_",
                   "LD_", "PYTHON")
# Set for each worker, whatever the lab process has: its own cache folders, and its own folder for the
# compile's TORCH_TRACE (read when torch is imported; spares record one, as runs do by default).
PER_WORKER_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_TRACE")


# The app process's alone, never a worker's: a worker runs the participant's settings (and model files), and
# anything in its environment can be read by other processes of the same user (/proc/<pid>/environ).
_without_private = private.without_private


def _import_time_part(env: dict[str, str]) -> dict[str, str]:
    # Inductor writes its default cache folder into os.environ the first time it is asked for it
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_ENV) and k not in PER_WORKER_ENV}


def _import_time_env() -> dict[str, str]:
    return _import_time_part(dict(os.environ))


class Worker:
    """A started `python -m tcore.worker` process, waiting for its experiment on stdin."""

    def __init__(self, env: dict[str, str], *, torch_trace: bool = True, wait_for_fork_server: bool = True,
                 spare: bool = False) -> None:
        """torch_trace: record the compile's TORCH_TRACE in the worker's folder. torch reads TORCH_TRACE once, at
        import, so a run that wants no TORCH_TRACE (to see what recording one costs) gets a worker started without.
        wait_for_fork_server: where workers are forked (tcore.lab.launch.fork_server_client), wait for a fork server
        still doing
        its imports; False raises fork_server_client.StillImporting instead (a spare, from the queue's thread).
        spare: started ahead of any run, so it may use its wait (protocol.SPARE_WORKER)."""
        self.workdir = run_folder("tcore-run-")
        self.log_path = self.workdir / "worker.log"
        self.taken = False  # handed a run (RunHandle): its folder is then the run's, removed when the run is recorded
        self.lab_env = _import_time_env()  # a spare is handed a run only while these still hold
        self.slot_env = dict(env)
        full = dict(_without_private(dict(os.environ)), PYTHONUNBUFFERED="1",
                    TORCHINDUCTOR_CACHE_DIR=str(self.workdir / "inductor"),
                    TRITON_CACHE_DIR=str(self.workdir / "triton"),
                    TORCH_TRACE=str(self.workdir / TORCH_TRACE_DIR), **{protocol.WORKER_DIR: str(self.workdir)})
        if not torch_trace:
            del full["TORCH_TRACE"]
        if spare:
            full[protocol.SPARE_WORKER] = "1"
        full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full.get("PYTHONPATH")]))
        full.update(env)
        self.spawn_env = full
        self._log = open(self.log_path, "w")
        # forked from a process that has done the imports (on a machine without a GPU), else started afresh
        server_env = {k: v for k, v in full.items() if k not in PER_WORKER_ENV and k != protocol.WORKER_DIR}
        try:
            self.proc = fork_server_client.spawn(full, cwd=str(REPO_ROOT), server_env=server_env,
                                                 key=_import_time_part(full), stderr_fd=self._log.fileno(),
                                                 wait=wait_for_fork_server)
        except fork_server_client.StillImporting:
            self._log.close()
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        if self.proc is None:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tcore.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._log, text=True, env=full, cwd=REPO_ROOT, start_new_session=True)
        _STARTED.add(self)

    @property
    def forked(self) -> bool:
        """Whether it came from the fork server (tcore.lab.launch.fork_server_client) rather than its own `python -m
        tcore.worker`."""
        return isinstance(self.proc, fork_server_client.ForkedProcess)

    @property
    def ready(self) -> bool:
        """Whether its imports are done (the worker logs READY), so a run handed to it starts at once."""
        try:
            with open(self.log_path) as log:
                return log.readline().startswith(protocol.READY)
        except OSError:
            return False

    @property
    def usable(self) -> bool:
        """Still waiting, and started with the settings torch and the engine read at import that this process has now.
        """
        return self.proc.poll() is None and self.lab_env == _import_time_env()

    def dismiss(self) -> None:
        """Let an unused worker go: on empty stdin it exits once its imports are done; its folder goes too."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        threading.Thread(target=self._reap, name=f"dismiss-{self.proc.pid}", daemon=True).start()

    def _reap(self, grace_s: float = 30.0) -> None:
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc)
        self._log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


# The workers this process started, while something here still refers to them (a spare, a dismissed one being
# reaped, a run's): at exit, those that run nothing are ended and their folders removed (_remove_folders_at_exit).
_STARTED: weakref.WeakSet[Worker] = weakref.WeakSet()


def _remove_folders_at_exit() -> None:
    """The folders of this process's workers that the threads meant to remove them would leave behind.

    A dismissed spare is reaped by a daemon thread (Worker._reap), and a run's folder is removed by the thread that
    records it: both die with the process, so a command line that ends, or an app that shuts down, left them in the
    temporary folder, one per spare it had. A worker still running a run is left to the lab process that
    recovers the queue next (tcore.lab.run.runs.recover); an unused one has nothing to lose.
    """
    for worker in list(_STARTED):
        if worker.taken and worker.proc.poll() is None:
            continue
        if not worker.taken and worker.proc.returncode is None:
            # Only a worker not reaped yet: its pid is still its own. One reaped long since (a spare that died) left a
            # number that pid_max (32768 here) soon hands to another process, which its group's SIGKILL would end.
            _end_group(worker.proc)
            worker.proc.wait()  # gone before its folder goes, so nothing of it writes there again
        shutil.rmtree(worker.workdir, ignore_errors=True)


atexit.register(_remove_folders_at_exit)  # before tcore.lab.queue.spares registers SPARES.clear: runs after it

# What run_folder names its folders with, in the temporary folder; and the file in each that says whose it is.
RUN_FOLDER_PREFIXES = ("tcore-run-", "tcore-ray-")
FOLDER_OWNER = ".owner"


def run_folder(prefix: str) -> Path:
    """A new folder for one run's worker, in the temporary folder, marked with this process (pid and start time): a
    lab process killed with SIGKILL cannot remove its folders, and the next one removes them for it
    (tcore.lab.queue.scheduler.remove_stale_folders)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    pid = os.getpid()
    (folder / FOLDER_OWNER).write_text(f"{pid} {processes.process_start(pid) or ''}\n")
    return folder


class SparePool:
    """Spare workers per device slot, started ahead so a run does not wait for the imports: one per slot, or more where
    several runs share a slot (tcore.lab.queue.room), kept under the slot's name and then "SLOT#2", "SLOT#3", ...

    The scheduler calls fill() for slots with room and take() when it starts a run; a lab process that never calls
    fill() (the command line) starts each worker when its run starts.
    """

    def __init__(self) -> None:
        self._spares: dict[str, Worker] = {}  # place (the slot, or "SLOT#n") -> its spare
        self._lock = threading.Lock()

    @staticmethod
    def _places(slot: str, want: int) -> list[str]:
        return [slot] + [f"{slot}#{i}" for i in range(2, want + 1)]

    def fill(self, slot: str, env: dict[str, str], *, wait_for_fork_server: bool = False, want: int = 1) -> None:
        """Start spares for `slot` until `want` usable ones wait there (any past `want`, or started under other
        settings, are let go). Where workers are forked and the fork server is still importing, none for now (the
        scheduler's next fill forks one), unless `wait_for_fork_server`."""
        with self._lock:
            mine = [k for k in self._spares if k.partition("#")[0] == slot]
            good = [k for k in mine if self._spares[k].usable and self._spares[k].slot_env == env]
            keep = good[:want]
            gone = [self._spares.pop(k) for k in mine if k not in keep]
            free = [k for k in self._places(slot, want + len(mine)) if k not in keep][:want - len(keep)]
        for spare in gone:
            spare.dismiss()
        for place in free:
            try:
                fresh = Worker(env, wait_for_fork_server=wait_for_fork_server, spare=True)
            except fork_server_client.StillImporting:  # the next fill forks one: the queue's thread does not wait
                return
            with self._lock:
                self._spares[place] = fresh

    def take(self, slot: str, env: dict[str, str]) -> Worker | None:
        """A spare waiting for `slot` (one whose imports are done first), now the caller's; None if there is none it
        may use."""
        with self._lock:
            places = sorted((k for k in self._spares if k.partition("#")[0] == slot),
                            key=lambda k: not self._spares[k].ready)
            spare = self._spares.pop(places[0]) if places else None
        if spare is not None and spare.usable and spare.slot_env == env:
            return spare
        if spare is not None:
            spare.dismiss()
        return None

    def groups(self, slot: str) -> list[int]:
        """The process groups of the spares of `slot` that still run (each spare leads its own)."""
        with self._lock:
            return [w.proc.pid for k, w in self._spares.items()
                    if k.partition("#")[0] == slot and w.proc.poll() is None]

    def waiting(self, slot: str) -> int:
        """How many spares wait in `slot`: each holds a CUDA context on its GPU, computing nothing."""
        with self._lock:
            return sum(1 for k, w in self._spares.items() if k.partition("#")[0] == slot and w.proc.poll() is None)

    def clear(self) -> None:
        with self._lock:
            spares, self._spares = list(self._spares.values()), {}
        for spare in spares:
            spare.dismiss()


def _end_group(proc: subprocess.Popen) -> None:
    processes.end_group(proc.pid)


def _kill_group(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """SIGTERM the process group, then SIGKILL it if anything is left after `grace_s`. A group held still while
    another run is timed (tcore.lab.queue.quiet) is continued, so that it hears the SIGTERM at once."""
    if not (processes.end_group(proc.pid, signal.SIGTERM) and processes.end_group(proc.pid, signal.SIGCONT)):
        return
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        pass
    processes.end_group(proc.pid)  # the group may be gone already, which is what we wanted
