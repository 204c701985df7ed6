"""The host's single-thread speed, read where a host-bound figure is made: a fixed pure-Python loop timed on the
launch thread's own core.

A host-bound variant's throughput is one CPU thread's launch rate. On a virtual machine that thread's speed can move in
episodes of seconds, at rest as after load, with no trace inside the guest (no stolen time, the same clock in
/proc/cpuinfo, no other process running): the physical core under it is shared with work the guest cannot see
(bench/host_speed.py measures it). Only timing shows it.
So the worker reads the loop at its phase boundaries (its fastest reading is the host at rest); before its timed rounds
it waits a bounded time for the host to read at rest again, moving the pinned launch thread to another core that does
where one does; it reads the loop after every round, and says how much slower than at rest the host ran while the
rounds were timed: such a run's eager figure is not the solo figure.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

REFERENCE_N = 200_000  # milliseconds of one core: short beside a round, long beside the timer
SLOW_PCT = 5.0  # the host reads slower than at rest past this
WAIT_S = 20.0  # the longest the timed rounds wait for the host to read at rest again (a slow episode lasts seconds)


def reference_ms(loops: int = 3) -> float:
    """Milliseconds for the fixed loop on this thread, the fastest of `loops`: one interruption does not count."""
    best = float("inf")
    for _ in range(loops):
        t0 = time.perf_counter()
        x = 0
        for i in range(REFERENCE_N):
            x += i & 7
        best = min(best, time.perf_counter() - t0)
    return 1000 * best


class HostSpeed:
    """Readings of the loop over one run: the fastest is the host at rest; those after each timed round say how fast
    it ran while they were timed."""

    def __init__(self, read: Callable[[], float] = reference_ms, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._read, self._sleep, self._clock = read, sleep, clock
        self.seen: list[float] = []
        self.rounds: list[float] = []
        self.waited_s = 0.0
        self.core: int | None = None  # the core the launch thread was moved to, where wait_for_rest moved it
        self.moves = 0

    def note(self) -> float:
        """A reading at a phase boundary (counts toward the host at rest)."""
        ms = self._read()
        self.seen.append(ms)
        return ms

    @property
    def at_rest_ms(self) -> float | None:
        return min(self.seen) if self.seen else None

    def slow_pct(self, ms: float) -> float:
        return 100 * (ms / self.at_rest_ms - 1) if self.at_rest_ms else 0.0

    def wait_for_rest(self, most_s: float = WAIT_S, every_s: float = 0.5, cores: Sequence[int] = (),
                      move: Callable[[int], None] | None = None) -> bool:
        """Before the timed rounds: read the loop until it reads within SLOW_PCT of the host at rest, for at most
        `most_s`; whether it did. With `cores` and `move` (the launch thread pinned), a slow reading is followed by one
        on each of those cores, and the thread moves to the fastest: a virtual core reads slow while the physical
        core under it runs another thread (another guest's, or a compile of this machine's), and another virtual
        core may sit on an idle one. `core` is where it ended."""
        start = self._clock()
        while self.slow_pct(self.note()) > SLOW_PCT:
            if move is not None and cores and self.slow_pct(self._fastest(cores, move)) <= SLOW_PCT:
                break
            if self._clock() - start >= most_s:
                self.waited_s = self._clock() - start
                return False
            self._sleep(every_s)
        self.waited_s = self._clock() - start
        return True

    def _fastest(self, cores: Sequence[int], move: Callable[[int], None]) -> float:
        """Read the loop on each core, move to the one that read fastest; its reading."""
        readings = []
        for core in cores:
            try:
                move(core)
            except OSError:  # not one of this process's cores
                continue
            readings.append((self.note(), core))
        ms, self.core = min(readings)
        move(self.core)
        self.moves += 1
        return ms

    def round_done(self) -> None:
        self.rounds.append(self.note())

    def details(self) -> dict[str, Any]:
        """What the result keeps: the host at rest, its median reading over the timed rounds, how much slower that
        was, and how long the rounds waited for it."""
        if not self.rounds or not self.at_rest_ms:
            return {}
        during = statistics.median(self.rounds)
        return {"reference_at_rest_ms": round(self.at_rest_ms, 3), "reference_rounds_ms": round(during, 3),
                "slow_pct": round(self.slow_pct(during), 1), "waited_s": round(self.waited_s, 1),
                **({"moved_to_core": self.core} if self.core is not None else {})}


def words(details: dict[str, Any]) -> str | None:
    """A note for a run whose rounds the host ran through slower than at rest; None where it did not."""
    slow = details.get("slow_pct")
    if slow is None or slow <= SLOW_PCT:
        return None
    waited = f" (the rounds waited {details['waited_s']:.0f} s for it first)" if details.get("waited_s") else ""
    factor = 1 + slow / 100  # the loop's time over the rounds against at rest: "120% slower" reads as less than none
    how = f"speed ran {slow:.0f}% slower than at rest" if factor < 2 else f"work took {factor:.1f}x as long as at rest"
    return (f"The host's single-thread {how} while the rounds were timed{waited}: "
            f"a fixed loop on the launch thread's core took {details['reference_rounds_ms']:.1f} ms against "
            f"{details['reference_at_rest_ms']:.1f} ms at its fastest in this run. On a virtual machine that is the "
            "physical host (other guests, its clock budget), invisible from inside but for timing. Where a variant is "
            "host-bound (its figure one thread's launch rate), its figure here is not the solo figure: a rerun on a "
            "host at rest reads faster.")
