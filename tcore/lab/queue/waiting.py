"""How long a queued run waits: how long runs like it took, when a device slot frees for it, and the words for that.

Pure arithmetic over what the store says is running and queued (the scheduler's places() gathers it), tested on
the CPU; the pages, the command line and the queue's own rows say a wait with wait_words, one copy of the words.
"""
from __future__ import annotations

import math
import statistics
from typing import NamedTuple

from tcore.figures import paired

RECENT_RUNS = 10  # a run's expected duration is the median of this many latest runs like it ...
HISTORY_RUNS = 200  # ... found among this many latest runs on the same device kind


class Ahead(NamedTuple):
    """A run ahead in the queue, as the wait estimate sees it."""
    expected_s: float | None  # how long runs like it took (expected_duration), None with nothing to go on
    limit_s: float | None     # its time limit: it cannot take longer
    elapsed_s: float = 0.0    # how long it has run (0 while queued)


class Wait(NamedTuple):
    """When a queued run should start: eta_s, the estimate (None when it cannot be made honestly); at_most_s,
    the latest it can start if every run ahead uses its whole time limit; overdue, words about a run ahead
    that has run past what runs like it took (the reason there is no estimate); paused, the instructor paused the
    queue, so it starts only once they resume it, whatever the runs ahead do."""
    eta_s: float | None
    at_most_s: float | None
    overdue: str | None = None
    held: str | None = None   # why no run starts now whatever its turn (the store's disk is full), in words
    paused: bool = False


def estimate_wait(running: list[Ahead], queued_ahead: list[Ahead], n_slots: int) -> Wait:
    """When the run behind `queued_ahead` starts, with `running` in the device's `n_slots` slots.

    Each run ahead takes the slot that frees first. A running run is expected to end `expected_s`
    after it started; one already past that (a long compile, a hung run) makes the estimate unknown
    rather than "any moment now", and the time limits still bound the wait.
    """
    if n_slots < 1:
        return Wait(None, None)
    eta: list[float | None] = []
    latest: list[float | None] = []
    overdue = None
    for run in running[:n_slots]:
        left = None if run.expected_s is None else run.expected_s - run.elapsed_s
        if left is not None and left <= 0:
            overdue = (f"a run ahead has run {_words(run.elapsed_s)}, past the {_words(run.expected_s)} that runs "
                       "like it took")
            left = None
        eta.append(left)
        latest.append(None if run.limit_s is None else max(run.limit_s - run.elapsed_s, 0.0))
    eta += [0.0] * (n_slots - len(eta))
    latest += [0.0] * (n_slots - len(latest))
    for run in queued_ahead:
        eta = _take_first_free(eta, run.expected_s)
        latest = _take_first_free(latest, run.limit_s)
    return Wait(_first_free(eta), _first_free(latest), overdue)


def duration_words(seconds: float | None) -> str:
    """'45 s', '3 min 05 s', '1 h 02 min': a wait or an elapsed time, for people."""
    if seconds is None:
        return "n/a"
    s = max(int(round(seconds)), 0)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def rough_words(seconds: float, *, up: bool = False) -> str:
    """'45 s', '1 min 30 s', '28 min', '1 h 15 min': a wait to the precision it has. An estimate is rounded to the
    nearest step; an upper bound (`up`) up to a coarser one, since its seconds are a worst case, not a reading."""
    steps = ((60, 10 if up else 5), (600, 60 if up else 30), (3600, 300 if up else 60), (float("inf"), 900 if up
                                                                                          else 300))
    step = next(step for below, step in steps if seconds < below)
    rounded = step * (math.ceil(seconds / step) if up else max(round(seconds / step), 1))
    if rounded < 60:
        return f"{rounded} s"
    if rounded < 3600:
        return f"{rounded // 60} min" + (f" {rounded % 60} s" if rounded % 60 else "")
    return f"{rounded // 3600} h" + (f" {rounded % 3600 // 60} min" if rounded % 3600 else "")


def wait_words(wait: Wait | None) -> tuple[str, str]:
    """When a queued run starts, as (what a person needs first, the reason): the Run and System pages show the
    first and put the second on hover; the command line prints the first.

    'starts in about 40 s' / 'no estimate: a run ahead is overdue' / 'waits for the instructor to resume the queue' /
    'no estimate yet, as nothing finished here; at most 30 min' / 'no estimate yet'; never 'now' behind a long run.
    A typical wait leads; the worst case (every run ahead using its whole time limit) comes second, rounded up, as
    a bound of half an hour read first alarms a person whose run will start in two minutes.
    """
    latest = (f"when every run ahead uses its whole time limit, it starts within {rough_words(wait.at_most_s, up=True)}"
              if wait is not None and wait.at_most_s is not None else "the runs ahead have no time limit")
    if wait is None:
        return "no estimate yet", "The queue has not placed this run yet; it does within a second."
    if wait.held:
        return "waits: no run starts for now", f"No run starts for now: {wait.held}."
    if wait.paused:
        return ("waits for the instructor to resume the queue",
                "The instructor paused the queue: runs under way finish, and waiting runs keep their place and start "
                "only when it resumes.")
    if wait.overdue:
        # Said of the run ahead, not this one: "late" read as this run being late, and the limit as its start.
        head = "no estimate: a run ahead is overdue"  # when at the latest: the reason, on hover
        return head, f"{wait.overdue[0].upper()}{wait.overdue[1:]}, so there is no estimate; {latest}."
    if wait.eta_s is None:
        head = "no estimate yet" + (f", as nothing finished here; at most {rough_words(wait.at_most_s, up=True)}"
                                    if wait.at_most_s is not None else "")
        return head, (f"No estimate yet: no run like the ones ahead has finished on this device, so there is nothing "
                      f"to go on; {latest}.")
    if wait.eta_s < 1:
        return "starts as soon as the device is free", f"The run ahead should end any moment; {latest}."
    return (f"starts in about {rough_words(wait.eta_s)}",
            f"An estimate from how long runs like the ones ahead took on this machine, compile included; {latest}.")


def _first_free(free_at: list[float | None]) -> float | None:
    """When the first slot frees; None if any slot's time is unknown (it might be the first)."""
    return None if any(t is None for t in free_at) else min(free_at)


def _take_first_free(free_at: list[float | None], duration_s: float | None) -> list[float | None]:
    """The slots' free times after a run of `duration_s` takes the one that frees first."""
    if any(t is None for t in free_at):
        return [None] * len(free_at)  # which slot frees first is unknown: so is every time behind it
    i = free_at.index(min(free_at))
    return [*free_at[:i], None if duration_s is None else free_at[i] + duration_s, *free_at[i + 1:]]


def _words(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def expected_duration(spec: dict, history: list[tuple[dict, float]]) -> float | None:
    """How long a run of `spec` should take on this machine, start-up and compile included: the median duration of
    the latest runs with the same settings; else of runs that compile the same thing (SIMILAR), else of the same
    model and compile, else of any recent run, each less its own timed stage and plus this one's (a run timed
    for 60 s per variant does not take what one timed for 4 s took)."""
    found = duration_like(spec, history, any_run=True)
    return found[0] if found else None


# duration_like's tiers, each with what its runs have in common with the one asked about, in words
LIKE_WORDS = ("runs of these settings", "runs that compile the same model the same way",
              "runs of this model, task and compile", "recent runs of any model")


def duration_like(spec: dict, history: list[tuple[dict, float]], *,
                  any_run: bool = False) -> tuple[float, str, int] | None:
    """(seconds, which runs it is made of: LIKE_WORDS, how many) for expected_duration; without `any_run`, None
    where no run of this model, task and compile finished here (a page says no other model's time as this one's)."""
    tiers = ((lambda s: s == spec, False), (lambda s: all(s.get(k) == spec.get(k) for k in SIMILAR), True),
             (lambda s: all(s.get(k) == spec.get(k) for k in SAME_MODEL), True), (lambda s: True, True))
    for (same, adjust), words in list(zip(tiers, LIKE_WORDS))[:None if any_run else 3]:
        durations = [d - timed_stage_s(s) + timed_stage_s(spec) if adjust else d
                     for s, d in history if same(s)][:RECENT_RUNS]
        if durations:
            return max(statistics.median(durations), timed_stage_s(spec)), words, len(durations)
    return None


def timed_stage_s(spec: dict) -> float:
    """The seconds a run of `spec` spends in its timed blocks by the clock, and in the untimed ones that settle them
    first (tcore.worker.pacing.settle_seconds): each variant's timed_s and its settle seconds at most (0 when it
    counts steps instead, or the spec does not say)."""
    if spec.get("timed_steps") is not None or not spec.get("timed_s"):
        return 0.0
    compiled = spec.get("compile", "off") != "off" or spec.get("compile_optimizer")
    timed_s = float(spec["timed_s"])
    settle_s = min(paired.SETTLE_S, timed_s / 2) if spec.get("device") == "cuda" else 0.0  # GPU runs settle
    return (2 if compiled else 1) * (timed_s + settle_s)


# What makes two runs take about as long, when no earlier run had exactly the same settings: what is built,
# what is compiled and how (a shape schedule compiles once per size, a graph break once per piece).
SIMILAR = ("model", "preset", "batch_size", "task", "compile", "backend", "mode", "cache", "precision", "dynamic",
           "shape_count", "shape_remedy", "graph_break", "compile_optimizer", "torch_trace")
SAME_MODEL = ("model", "preset", "task", "compile", "backend")
