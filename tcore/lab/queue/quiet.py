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
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

SWITCH_ENV = "COMPILE_LAB_QUIET_ROUNDS"
MAX_HOLD_S = 180.0  # the longest the neighbours stay stopped for one run's rounds, whatever happens to that run

_lock = threading.Lock()


@dataclass
class _Member:
    slot: str
    pgid: int
    waiting: Callable[[], bool] = lambda: False          # whether it waits for the device now
    continued: Callable[[float, float, bool], None] | None = None  # (stopped at, continued at, owed) once it goes on


@dataclass
class _Stopped:
    who: str            # a run id, or "spare:PGID"
    pgid: int
    at: float           # time.monotonic() when stopped
    owed: bool          # not waiting for the device then: the held time is the worker's to leave out of its compile


_members: dict[str, _Member] = {}
_holds: dict[str, tuple[list[_Stopped], threading.Timer]] = {}  # run timed -> whom it stopped, its time limit
_spares: list[Callable[[str], list[int]]] = []  # a slot's spare workers' process groups (tcore.lab.queue.spares)


def enabled() -> bool:
    """Whether timed runs hold their neighbours still: not where switched off, nor without POSIX signals."""
    return hasattr(signal, "SIGSTOP") and hasattr(os, "killpg") and \
        os.environ.get(SWITCH_ENV, "").strip().lower() not in ("0", "off", "false", "no")


def spares_from(groups: Callable[[str], list[int]]) -> None:
    """Where a slot's spare workers are found: they hold still too (one importing torch is seconds of a busy core)."""
    _spares[:] = [groups]


def join(run_id: str, slot: str, pgid: int, waiting: Callable[[], bool] = lambda: False,
         continued: Callable[[float, float, bool], None] | None = None) -> None:
    """`run_id`'s worker (the leader of process group `pgid`) shares `slot` with other runs from now on.
    waiting: whether it waits for the device (time held then is a wait already); continued(stopped at, continued at,
    owed): told each time it goes on after being held, so the run can leave the time out of its compile, its time
    limit and its timeline."""
    with _lock:
        _members[run_id] = _Member(slot, pgid, waiting, continued)
        # a run that starts while another of its slot is timed holds still with the rest
        timing = next((r for r in _holds if r in _members and _members[r].slot == slot and r != run_id), None)
        if timing is not None and enabled() and _signal(pgid, signal.SIGSTOP):
            _holds[timing][0].append(_Stopped(run_id, pgid, time.monotonic(), not waiting()))
            _guard(f"+{pgid}")


def leave(run_id: str) -> None:
    """`run_id` has ended: it holds no one still, and if it was held still, it goes on (so it can end)."""
    release(run_id)
    with _lock:
        member = _members.pop(run_id, None)
        mine = [x for stopped, _ in _holds.values() for x in stopped if x.who == run_id]
        for stopped, _ in _holds.values():
            stopped[:] = [x for x in stopped if x.who != run_id]
    if member is not None:
        _signal(member.pgid, signal.SIGCONT)
        _guard(f"-{member.pgid}")
        _tell(member, mine)


def hold(run_id: str) -> int:
    """`run_id` is about to be timed: stop the other runs of its slot, and its spares, until release(run_id); how many
    runs were stopped."""
    if not enabled():
        return 0
    with _lock:
        slot = _members[run_id].slot if run_id in _members else None
    spares = [group for find in _spares for group in find(slot)] if slot is not None else []
    with _lock:
        if run_id not in _members or run_id in _holds:
            return sum(not x.who.startswith("spare:") for x in _holds.get(run_id, ([], None))[0])
        mine = _members[run_id].pgid
        held_already = {x.pgid for stopped, _ in _holds.values() for x in stopped}
        others = [(r, m.pgid, m.waiting) for r, m in _members.items() if m.slot == slot and r != run_id] + \
            [(f"spare:{group}", group, lambda: False) for group in spares]
        stopped = []
        for who, group, waiting in others:
            if group == mine or group in held_already:
                continue
            owed = not waiting()
            if _signal(group, signal.SIGSTOP):
                stopped.append(_Stopped(who, group, time.monotonic(), owed))
                _guard(f"+{group}")
        timer = threading.Timer(MAX_HOLD_S, release, args=(run_id,))
        timer.daemon = True
        _holds[run_id] = (stopped, timer)
    timer.start()
    return sum(not x.who.startswith("spare:") for x in stopped)


def release(run_id: str) -> None:
    """`run_id`'s rounds are over (or its time to hold others ran out): the workers it stopped go on, and each run
    among them is told for how long it was held."""
    with _lock:
        stopped, timer = _holds.pop(run_id, ([], None))
        told = [(_members.get(x.who), x) for x in stopped]
    if timer is not None:
        timer.cancel()
    for x in stopped:
        _signal(x.pgid, signal.SIGCONT)
        _guard(f"-{x.pgid}")
    for member, x in told:
        if member is not None:
            _tell(member, [x])


def held(run_id: str) -> bool:
    """Whether another run's rounds hold `run_id` still now."""
    with _lock:
        return any(x.who == run_id for stopped, _ in _holds.values() for x in stopped)


def _tell(member: _Member, spans: list[_Stopped]) -> None:
    now = time.monotonic()
    for x in spans:
        if member.continued is not None:
            member.continued(x.at, now, x.owed)


# A process of its own that continues every group this lab process still holds once the lab is gone: atexit does not
# run when the lab is killed (SIGKILL, the kernel's OOM killer, a command line ended by its caller), and a worker left
# stopped would hold its GPU memory until someone killed it. It reads "+PGID" (stopped) and "-PGID" (continued).
GUARD = ("import os, signal, sys\nheld = set()\nfor line in sys.stdin:\n    g = int(line[1:])\n"
         "    held.add(g) if line[0] == '+' else held.discard(g)\nfor g in held:\n    try:\n"
         "        os.killpg(g, signal.SIGCONT)\n    except OSError:\n        pass\n")
_guard_proc: list[subprocess.Popen] = []


def _guard(line: str) -> None:
    """Tell the guard what this process holds still now (started at the first hold)."""
    try:
        if not _guard_proc or _guard_proc[0].poll() is not None:
            _guard_proc[:] = [subprocess.Popen([sys.executable, "-c", GUARD], stdin=subprocess.PIPE, text=True,
                                               start_new_session=True)]
        _guard_proc[0].stdin.write(line + "\n")
        _guard_proc[0].stdin.flush()
    except (OSError, ValueError):
        pass  # without a guard the holds still end with this process's atexit and their time limit


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
