"""Processes on this machine, from psutil: when one started, whether it still runs, this process's threads, and
signalling a process group (ending it, or stopping it and letting it go on).

A process is known by its pid and its start time: a pid is reused once its process has ended, the pair is not. The
start time is kept as the kernel counts it, clock ticks since boot (field 22 of /proc/<pid>/stat), the form the
store and the run folders hold. A worker leads a process group of its own (start_new_session), so a signal to its
group reaches what it started too (Inductor's compile workers), even those whose parent has ended; psutil has no call
for a group, so that one is os.killpg.
"""
from __future__ import annotations

import os
import signal

import psutil

_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_start(pid: int) -> str | None:
    """When the process started, in clock ticks since boot; None where there is no such process."""
    try:
        created_s = psutil.Process(pid).create_time()
    except psutil.Error:
        return None
    return str(round((created_s - psutil.boot_time()) * _TICKS_PER_S))


def is_alive(pid: int, started: str | None) -> bool:
    """Whether the process `pid` that started at `started` (process_start; None: any start) still runs; a zombie does
    not."""
    try:
        process = psutil.Process(pid)
        if process.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return False
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it runs, its start cannot be told
        return True
    return started is None or process_start(pid) == started


def end_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Send `sig` to every process of the group `pgid` (a worker's pid: it leads its group); False where the group
    is gone already or not ours to signal."""
    return _signal_group(pgid, sig)


def groups_can_stop() -> bool:
    """Whether this system can stop a process group and let it go on (POSIX signals)."""
    return hasattr(signal, "SIGSTOP") and hasattr(os, "killpg")


def stop_group(pgid: int) -> bool:
    """Stop every process of the group `pgid` where it stands (SIGSTOP) until continue_group; False where the group
    is gone or not ours."""
    return _signal_group(pgid, signal.SIGSTOP)


def continue_group(pgid: int) -> bool:
    """Let a group that stop_group stopped go on (SIGCONT); False where the group is gone or not ours."""
    return _signal_group(pgid, signal.SIGCONT)


def thread_ids() -> list[int]:
    """The native ids of this process's threads now; [0] (the calling thread, as sched_setaffinity reads it) where
    they cannot be listed."""
    try:
        return [t.id for t in psutil.Process().threads()]
    except psutil.Error:
        return [0]


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
