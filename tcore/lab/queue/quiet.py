"""While a run that shares its GPU is timed, the runs beside it hold still.

Runs that share a GPU (tcore.lab.queue.room) compile on the CPU while another holds the GPU alone, its launch thread
on cores kept for it. For a host-bound run that is not enough: its timed rounds are the launch rate of one CPU
thread, and compiles on the other cores reach that thread's core through the memory bus, the shared cache and virtual
cores that share one physical core, widening its spread many times over a GPU-busy run's beside the same compiles
(bench/room.py and bench/host_bound.py measure both). None of that can be told apart from inside a VM.

So for a run's timed rounds, its "measuring" phase (seconds; a minute for a large model's generations), the lab stops
the other workers of its GPU slot, each with its process group (its compile jobs too), and lets them go on when the
phase ends, when the run ends, or after MAX_HOLD_S, whichever comes first. A compile beside it is those seconds
later; the room's round barely is, since its GPU, held by one run at a time, is what the round waits on. Only the
runs of the same slot hold still: on a host of several GPUs each slot's runs compile while another slot measures.
The slot's spare workers (tcore.lab.queue.spares) hold still too: one importing torch is seconds of a busy core, and a
spare taken for a run meanwhile goes on with the rest. Every lab process on the host holds still with them (a second
app server, a command line on the same store): a hold is written in the store (quiet_holds), and each lab process that
runs a queue on that store reads it every POLL_S (watch()) and stops its own runs of that slot, letting them go when the
row goes, its bound passes, or the process that wrote it has ended. $COMPILE_LAB_QUIET_ROUNDS=0 turns this off.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

from tcore.host import processes
from tcore.store import QuietHold, StoreError

SWITCH_ENV = "COMPILE_LAB_QUIET_ROUNDS"
MAX_HOLD_S = 180.0  # the longest the neighbours stay stopped for one run's rounds, whatever happens to that run
POLL_S = 0.25  # how often a lab process reads the holds of the others on its host (its workers stop within this)
ELSEWHERE = "elsewhere:"  # the key of a hold this process keeps for a run of another lab process

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
_hold_slots: dict[str, str] = {}  # run timed (here, or another lab process's, as follow() keeps it) -> its slot
_spares: list[Callable[[str], list[int]]] = []  # a slot's spare workers' process groups (tcore.lab.queue.spares)
_watched: dict[str, tuple[object, QuietHold]] = {}  # store path -> (the store, this process as a hold names it)


def enabled() -> bool:
    """Whether timed runs hold their neighbours still: not where switched off, nor without POSIX signals."""
    return processes.groups_can_stop() and \
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
        # a run that starts while another of its slot is timed, here or in another lab process, holds still with the
        # rest (one timed elsewhere was missed: its hold is no member here, and follow() stops a slot at a new hold)
        timing = next((r for r in _holds if _hold_slots.get(r) == slot and r != run_id), None)
        if timing is not None and enabled() and processes.stop_group(pgid):
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
        processes.continue_group(member.pgid)
        _guard(f"-{member.pgid}")
        _tell(member, mine)


def hold(run_id: str) -> int:
    """`run_id` is about to be timed: stop the other runs of its slot, and its spares, in this lab process and (through
    the store) in every other on this host, until release(run_id); how many runs of this process were stopped."""
    if not enabled():
        return 0
    with _lock:
        member = _members.get(run_id)
        if member is None or run_id in _holds:
            return sum(not x.who.startswith("spare:") for x in _holds.get(run_id, ([], None))[0])
    stopped = _stop_slot(run_id, member.slot, member.pgid, MAX_HOLD_S)
    _publish(run_id, member.slot)
    return stopped


def _stop_slot(key: str, slot: str, mine: int | None, bound_s: float) -> int:
    """Stop this process's runs of `slot` (but the group `mine`) and its spares, kept as hold `key` for at most
    `bound_s`; how many runs were stopped."""
    spares = [group for find in _spares for group in find(slot)]
    with _lock:
        if key in _holds:
            return 0
        held_already = {x.pgid for stopped, _ in _holds.values() for x in stopped}
        others = [(r, m.pgid, m.waiting) for r, m in _members.items() if m.slot == slot and r != key] + \
            [(f"spare:{group}", group, lambda: False) for group in spares]
        stopped = []
        for who, group, waiting in others:
            if group == mine or group in held_already:
                continue
            owed = not waiting()
            if processes.stop_group(group):
                stopped.append(_Stopped(who, group, time.monotonic(), owed))
                _guard(f"+{group}")
        timer = threading.Timer(bound_s, release, args=(key,))
        timer.daemon = True
        _holds[key] = (stopped, timer)
        _hold_slots[key] = slot
    timer.start()
    return sum(not x.who.startswith("spare:") for x in stopped)


def release(run_id: str) -> None:
    """`run_id`'s rounds are over (or its time to hold others ran out): the workers it stopped go on, and each run
    among them is told for how long it was held."""
    with _lock:
        stopped, timer = _holds.pop(run_id, ([], None))
        _hold_slots.pop(run_id, None)
        told = [(_members.get(x.who), x) for x in stopped]
    if timer is not None:
        timer.cancel()
        if not run_id.startswith(ELSEWHERE):
            _unpublish(run_id)
    for x in stopped:
        processes.continue_group(x.pgid)
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


def watch(store, me: tuple[str, int, str | None], is_alive: Callable[[int, str | None], bool]) -> None:
    """Hold this process's runs still while a run of another lab process on this host is timed (the store says so),
    and publish this process's own holds there. `me`: (host, pid, start time) of this process; is_alive(pid, started):
    whether a process still runs. Once per store per process (the queue calls it as it starts)."""
    if not enabled():
        return
    key = str(store.path.resolve())
    with _lock:
        if key in _watched:
            return
        _watched[key] = (store, QuietHold("", me[0], "", me[1], me[2], 0.0))
    threading.Thread(target=_watch, args=(store, me, is_alive), name="quiet-watch", daemon=True).start()


def unwatch(store) -> None:
    """Stop reading `store`'s holds (its watcher ends within POLL_S), and let go what this process held for them."""
    key = str(store.path.resolve())
    with _lock:
        _watched.pop(key, None)
        kept = [k for k in _holds if k.startswith(_for_store(store))]
    for k in kept:
        release(k)


def _for_store(store) -> str:
    """How the holds this process keeps for other lab processes' runs on `store` begin (the rest: their run id)."""
    return f"{ELSEWHERE}{store.path}|"


def _watch(store, me: tuple[str, int, str | None], is_alive: Callable[[int, str | None], bool]) -> None:
    said, key = False, str(store.path.resolve())
    while True:
        time.sleep(POLL_S)
        with _lock:
            if key not in _watched:
                return
        try:
            holds = store.devices.neighbour_holds(me[0])
        except (sqlite3.Error, StoreError) as e:  # said once; the holds already kept end by their bounds
            if not said:
                print(f"compile-lab: cannot read other lab processes' holds ({e}): this one's runs do not hold still "
                      "for theirs until it can", file=sys.stderr, flush=True)
                said = True
            continue
        follow(store, holds, me, is_alive)


def follow(store, holds: list[QuietHold], me: tuple[str, int, str | None],
           is_alive: Callable[[int, str | None], bool]) -> None:
    """Bring this process's holds for other lab processes' runs in line with `holds`, the store's list: a new one
    stops this process's runs of its slot for what is left of its bound; one gone, past its bound or whose process has
    ended lets them go (the row of an ended process is removed)."""
    now, wanted, mine = time.time(), {}, _for_store(store)
    for h in holds:
        if (h.pid, h.started) == (me[1], me[2]):
            continue
        if not is_alive(h.pid, h.started):
            with contextlib.suppress(sqlite3.Error, StoreError):
                store.devices.let_neighbours_go(h.run_id)
            continue
        if h.until > now:
            wanted[mine + h.run_id] = h
    with _lock:
        kept = [k for k in _holds if k.startswith(mine)]
    for key in kept:
        if key not in wanted:
            release(key)
    for key, h in wanted.items():
        if key not in kept:
            _stop_slot(key, h.slot, None, h.until - now)


def _publish(run_id: str, slot: str) -> None:
    with _lock:
        watched = list(_watched.values())
    for store, me in watched:
        try:
            store.devices.hold_neighbours(me._replace(run_id=run_id, slot=slot, until=time.time() + MAX_HOLD_S))
        except (sqlite3.Error, StoreError) as e:  # this process's own neighbours are held all the same
            print(f"compile-lab: run {run_id}: other lab processes could not be told to hold still ({e})",
                  file=sys.stderr, flush=True)


def _unpublish(run_id: str) -> None:
    with _lock:
        watched = list(_watched.values())
    for store, _ in watched:
        try:
            store.devices.let_neighbours_go(run_id)
        except (sqlite3.Error, StoreError) as e:  # its bound ends it for the others
            print(f"compile-lab: run {run_id}: other lab processes could not be told to go on ({e}); they do once "
                  f"its bound of {MAX_HOLD_S:.0f} s passes", file=sys.stderr, flush=True)


# A process of its own that continues every group this lab process still holds once the lab is gone: atexit does not
# run when the lab is killed (SIGKILL, the kernel's OOM killer, a command line ended by its caller), and a worker left
# stopped would hold its GPU memory until someone killed it. It reads "+PGID" (stopped) and "-PGID" (continued). It
# is a few lines of the standard library run with `python -c`, which finds no tcore to import from wherever the lab
# was started, so it signals the groups itself, as tcore.host.processes.continue_group does.
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

