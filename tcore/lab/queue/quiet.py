"""While a run that shares its GPU is timed, the runs beside it hold still.

Runs that share a GPU (tcore.lab.queue.room) compile on the CPU while another holds the GPU alone, its launch thread
on cores kept for it. In a room on one H100 that was not enough for host-bound runs (BENCHMARKS.md, "Figures a room
can quote"): their timed rounds, the launch rate of one CPU thread, read ResNet-50 within ± 11-21% and ConvNeXt
within ± 3-27% with three compiles beside them on the other cores, where the GPU-busy default read ± 0.1-3% beside
the same compiles; the kept core itself stayed idle of anything else. What reaches it from the other cores (the
memory bus, the shared cache, virtual cores that share one physical core) cannot be told apart from inside a VM.

So for a run's timed rounds, its "measuring" phase (seconds; a minute for a large model's generations), the lab stops
the other workers of its GPU slot, each with its process group (its compile jobs too), and lets them go on when the
phase ends, when the run ends, or after MAX_HOLD_S, whichever comes first. A compile beside it is those seconds
later; the room's round barely is, since its GPU, held by one run at a time, is what the round waits on. Only the
runs of the same slot hold still: on a host of several GPUs each slot's runs compile while another slot measures.
The slot's spare workers (tcore.lab.queue.spares) hold still too: one importing torch is seconds of a busy core, and a
spare taken for a run meanwhile goes on with the rest. $COMPILE_LAB_QUIET_ROUNDS=0 turns this off.
"""
from __future__ import annotations

import atexit
import os
import signal
import threading
from typing import Callable

SWITCH_ENV = "COMPILE_LAB_QUIET_ROUNDS"
MAX_HOLD_S = 180.0  # the longest the neighbours stay stopped for one run's rounds, whatever happens to that run

_lock = threading.Lock()
_members: dict[str, tuple[str, int]] = {}  # run id -> (its slot, its worker's process group)
_holds: dict[str, tuple[list[tuple[str, int]], threading.Timer]] = {}  # run timed -> (who, group) it stopped, limit
_spares: list[Callable[[str], list[int]]] = []  # a slot's spare workers' process groups (tcore.lab.queue.spares)


def enabled() -> bool:
    """Whether timed runs hold their neighbours still: not where switched off, nor without POSIX signals."""
    return hasattr(signal, "SIGSTOP") and hasattr(os, "killpg") and \
        os.environ.get(SWITCH_ENV, "").strip().lower() not in ("0", "off", "false", "no")


def spares_from(groups: Callable[[str], list[int]]) -> None:
    """Where a slot's spare workers are found: they hold still too (one importing torch is seconds of a busy core)."""
    _spares[:] = [groups]


def join(run_id: str, slot: str, pgid: int) -> None:
    """`run_id`'s worker (the leader of process group `pgid`) shares `slot` with other runs from now on."""
    with _lock:
        _members[run_id] = (slot, pgid)


def leave(run_id: str) -> None:
    """`run_id` has ended: it holds no one still, and if it was held still, it goes on (so it can end)."""
    release(run_id)
    with _lock:
        member = _members.pop(run_id, None)
        for stopped, _ in _holds.values():
            stopped[:] = [(who, group) for who, group in stopped if who != run_id]
    if member is not None:
        _signal(member[1], signal.SIGCONT)


def hold(run_id: str) -> int:
    """`run_id` is about to be timed: stop the other runs of its slot, and its spares, until release(run_id); how many
    runs were stopped."""
    if not enabled():
        return 0
    spares = [group for find in _spares for group in find(_members.get(run_id, ("", 0))[0])]
    with _lock:
        if run_id not in _members or run_id in _holds:
            return sum(not who.startswith("spare:") for who, _ in _holds.get(run_id, ([], None))[0])
        slot, mine = _members[run_id]
        held_already = {group for stopped, _ in _holds.values() for _, group in stopped}
        others = [(r, group) for r, (s, group) in _members.items() if s == slot and r != run_id] + \
            [(f"spare:{group}", group) for group in spares]
        stopped = [(who, group) for who, group in others
                   if group != mine and group not in held_already and _signal(group, signal.SIGSTOP)]
        timer = threading.Timer(MAX_HOLD_S, release, args=(run_id,))
        timer.daemon = True
        _holds[run_id] = (stopped, timer)
    timer.start()
    return sum(not who.startswith("spare:") for who, _ in stopped)


def release(run_id: str) -> None:
    """`run_id`'s rounds are over (or its time to hold others ran out): the workers it stopped go on."""
    with _lock:
        stopped, timer = _holds.pop(run_id, ([], None))
    if timer is not None:
        timer.cancel()
    for _, group in stopped:
        _signal(group, signal.SIGCONT)


def held(run_id: str) -> bool:
    """Whether another run's rounds hold `run_id` still now."""
    with _lock:
        return any(who == run_id for stopped, _ in _holds.values() for who, _ in stopped)


@atexit.register
def _release_all() -> None:
    """A lab process that ends leaves no worker stopped behind it."""
    for run_id in list(_holds):
        release(run_id)


def _signal(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
