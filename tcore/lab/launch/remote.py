"""Inside a Ray task on a cluster node: start one worker there, stream its events back, bring back what it saved.

tcore.lab.launch.cluster submits run_on_node() as a Ray generator task; Ray runs it in a worker process of its
own on the node it was pinned to. It does there what tcore.lab.launch.launcher does locally: a fresh
`python -m tcore.worker` in its own process group with fresh Inductor and Triton cache folders (made on
that node), the experiment on its stdin, its events read line by line and yielded to the lab process as
they come. At the end it yields the files the worker left in its folder (compile artifacts, profiler
traces, the TORCH_TRACE log), which the lab side stores as it does a local worker's.

A cancel or time-out (ray.cancel) raises KeyboardInterrupt here: the worker's group is killed on the way
out. A forced cancel, or a node that dies, kills this process outright: the worker was started with
PR_SET_PDEATHSIG, so the kernel kills it too, and the task's folder is removed by its guard, a small
process that waits for this one to end however it ends (_start_guard).

Ray runs its worker processes at niceness +15 (its worker_niceness), which every child inherits: the run's
worker is put back at the node's own niceness, as a local worker has the lab process's (_as_nice_as_the_node).

This module imports nothing heavy (no torch, no Ray at import): it runs in Ray's worker process.
"""
from __future__ import annotations

import ctypes
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections import deque
from pathlib import Path
from typing import Any, Iterator

from tcore.experiment import protocol
from tcore.host import processes

CODE_ROOT = Path(__file__).resolve().parents[3]  # the folder tcore was imported from on this node
WORKDIR = "{workdir}"  # in the environment the lab side sends: the worker's folder on this node
LOG_TAIL_LINES = 40
KEPT = ("inductor", "triton", "worker.log")  # what stays on the node: single-use caches, and the log (its tail travels)
_PR_SET_PDEATHSIG = 1
# What Ray sets in its worker processes that a local worker does not have. OMP_NUM_THREADS=1 (Ray's guard
# against oversubscribing a node's CPUs with many tasks) would give torch one thread: a run has its GPU
# and node to itself, as locally, and its CPU-side figures must match a local run's.
RAY_SETS = ("OMP_NUM_THREADS", "PYTHONBREAKPOINT", "SPT_NOENV")
try:  # looked up here, not between fork and exec, where Ray's threads may hold the loader's lock
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None  # not Linux: a forced cancel may then leave the worker to finish on its own


# The guard of one task's folder (run with -I -S: nothing to import but the standard library). Its stdin is a pipe
# whose writing end only the task holds, so its read returns when the task process has ended, by the kernel closing
# that end: after the task's own clean-up if it had one ("done"), else it ends the worker's group and removes the
# folder itself. It forks away at once: Ray kills a task process's direct children when it exits.
_GUARD = r"""
import os, shutil, signal, sys
if os.fork():
    os._exit(0)
os.setsid()
said = sys.stdin.read().split()
if "done" not in said:
    for pid in said:
        try:
            os.killpg(int(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    shutil.rmtree(sys.argv[1], ignore_errors=True)
"""


def _start_guard(workdir: Path) -> int:
    """Start the folder's guard; returns the pipe's writing end: write the worker's pid to it, and "done" once cleaned
    up."""
    read_end, write_end = os.pipe()  # both not inherited by anything this process starts (PEP 446)
    try:
        subprocess.run([sys.executable, "-I", "-S", "-c", _GUARD, str(workdir)], stdin=read_end, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return write_end


def _say(fd: int, words: str) -> None:
    os.write(fd, f"{words}\n".encode())


def _node_niceness() -> int:
    """The niceness of this node's raylet, which started this Ray worker: what a process started on the node has."""
    return os.getpriority(os.PRIO_PROCESS, int(os.environ.get("RAY_RAYLET_PID") or os.getppid()))


def _as_nice_as_the_node() -> str | None:
    """Put this thread (and so the worker it starts, and its event reader) back at the node's niceness; a note if it
    cannot.

    Ray starts its workers at +15 over the raylet (RAY_worker_niceness) so that its own processes come first; a
    worker running a launch-bound eager loop at +15 loses the CPU to every ordinary process on the machine.
    Linux keeps niceness per thread; this one is the thread that starts the worker.
    """
    target, now = _node_niceness(), os.getpriority(os.PRIO_PROCESS, 0)
    if now <= target:
        return None
    try:
        os.setpriority(os.PRIO_PROCESS, 0, target)
    except PermissionError:
        return (f"the worker ran at niceness {now}, as Ray starts its processes on {socket.gethostname()}, not at the "
                f"node's {target} (lowering it needs CAP_SYS_NICE): CPU-bound figures may read low when the machine "
                f"is busy; start the node with RAY_worker_niceness=0 to avoid it")
    return None


def _die_with_parent() -> None:
    """In the worker, before exec: the kernel SIGKILLs it when this task's process dies (Linux)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def node_facts() -> dict[str, Any]:
    """Where this task runs: Ray's node id, the node's address and host name, the GPUs Ray gave it."""
    import ray

    ctx = ray.get_runtime_context()
    ids = ctx.get_accelerator_ids() if hasattr(ctx, "get_accelerator_ids") else {"GPU": ray.get_gpu_ids()}
    return {"ray_node_id": ctx.get_node_id(), "node_ip": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(), "ray_gpu_ids": [str(g) for g in ids.get("GPU", [])]}


def run_on_node(envelope: str, files_in: dict[str, bytes], warm_cache: bool, torch_trace: bool,
                code_root: str | None = None) -> Iterator[dict[str, Any]]:
    """The Ray generator task: yields {"type": "remote", ...node facts, pid, workdir}, then the worker's events, then
    {"type": "_files", "files": {relative path: bytes}}, then the terminal event with the log tail if it failed."""
    workdir = Path(tempfile.mkdtemp(prefix="tcore-ray-run-"))
    log_path = workdir / "worker.log"
    proc = None
    guard = _start_guard(workdir)
    try:
        niceness_note = _as_nice_as_the_node()
        for name, data in files_in.items():  # e.g. the compile artifacts a cache=artifacts run loads
            (workdir / name).write_bytes(data)
        spec, env = protocol.open_envelope(envelope.replace(WORKDIR, str(workdir)))
        if warm_cache:  # this node's own warm caches (each node keeps its own)
            warm = Path(os.environ.get("COMPILE_LAB_CACHE_DIR") or Path.home() / ".cache" / "compile-lab")
            env.update(TORCHINDUCTOR_CACHE_DIR=str(warm / "inductor"), TRITON_CACHE_DIR=str(warm / "triton"))
        # Ray's working_dir as unpacked on this node, or a shared checkout. Not os.getcwd(), though Ray starts the
        # worker there: nodes on one machine (a test's or the demo's cluster) share one session folder, and a node's
        # first task unpacks the working_dir afresh, deleting the folder another node's worker stands in.
        root = code_root or str(CODE_ROOT)
        full = dict(os.environ, PYTHONUNBUFFERED="1", TORCHINDUCTOR_CACHE_DIR=str(workdir / "inductor"),
                    TRITON_CACHE_DIR=str(workdir / "triton"), TORCH_TRACE=str(workdir / "torch_trace"))
        for name in RAY_SETS:  # so that the worker runs as it would locally: same torch threads, same figures
            full.pop(name, None)
        if not torch_trace:
            del full["TORCH_TRACE"]
        full["PYTHONPATH"] = os.pathsep.join(filter(None, [root, full.get("PYTHONPATH")]))
        with open(log_path, "w") as log:
            proc = subprocess.Popen([sys.executable, "-m", "tcore.worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, text=True, env=full, cwd=root,
                                    start_new_session=True, preexec_fn=_die_with_parent)
        _say(guard, str(proc.pid))
        yield {"type": "remote", "pid": proc.pid, "workdir": str(workdir), **node_facts()}
        if niceness_note:
            yield {"type": "note", "text": niceness_note}
        proc.stdin.write(protocol.envelope(spec, env))
        proc.stdin.close()
        terminal = None
        for line in _lines(proc.stdout):
            event = protocol.parse(line)
            if event["type"] in protocol.TERMINAL:
                terminal = event  # sent last, after the files
            else:
                yield event
        returncode = proc.wait()
        processes.end_group(proc.pid)  # compile workers left behind by a worker that exited without teardown
        yield {"type": "_files", "files": _files(workdir)}
        if terminal is None:
            terminal = {"type": "error", "kind": "crashed", "message": _death_message(returncode)}
        if terminal["type"] == "error":
            terminal["log_tail"] = _tail(log_path)
        yield terminal
    finally:  # also on KeyboardInterrupt (ray.cancel) and GeneratorExit
        if proc is not None and proc.poll() is None:
            processes.end_group(proc.pid)
            proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
        try:
            _say(guard, "done")
        except BrokenPipeError:
            pass  # the guard has gone already (killed by someone): there is nothing left for it to do
        os.close(guard)


def _lines(stream) -> Iterator[str]:
    """The stream's lines, read in a thread: Ray's cancel raises KeyboardInterrupt in this thread only between
    bytecodes, never inside a blocking read of the worker's stdout, so this thread must wait in short steps."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, name="worker-events", daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        if line is None:
            return
        yield line


def _files(workdir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(workdir)): p.read_bytes() for p in sorted(workdir.rglob("*"))
            if p.is_file() and p.relative_to(workdir).parts[0] not in KEPT}


def _tail(log_path: Path) -> list[str]:
    with open(log_path, errors="replace") as f:
        return [line.rstrip("\n") for line in deque(f, maxlen=LOG_TAIL_LINES)]


def _death_message(returncode: int) -> str:
    where = f"on {socket.gethostname()}"
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = " (the kernel's OOM killer sends SIGKILL when memory runs out)" if name == "SIGKILL" else ""
        return f"the worker process {where} died from {name}{hint} before reporting a result"
    return f"the worker process {where} exited with code {returncode} before reporting a result"
