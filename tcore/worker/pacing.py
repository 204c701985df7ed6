"""How long the timed stage runs: steps per block, and when to stop adding paired rounds (with the words why)."""
from __future__ import annotations

import math
import os

from tcore.experiment.spec import Experiment
from tcore.figures import paired
from tcore.figures.rerun import MIN_INTERVAL_ROUNDS

SETTLE_ENV = "COMPILE_LAB_SETTLE"  # "0": the timed rounds begin at once, unsettled (to measure what settling does)


def settle_seconds(exp: Experiment, device: str) -> float:
    """The most untimed seconds per variant before the timed rounds (paired.steady): SETTLE_S, at most half the timed
    seconds, on a GPU, where throughput ramps up (the GPU's clocks, the host's launch thread); none on the CPU (its
    runs on small machines rarely steady within 1.5% and would spend the whole 2 s each for nothing), with
    timed_steps (a fixed, quick measurement) or with $COMPILE_LAB_SETTLE=0."""
    if device != "cuda" or exp.timed_steps is not None or os.environ.get(SETTLE_ENV) == "0":
        return 0.0
    return min(paired.SETTLE_S, exp.timed_s / 2)


def round_seconds(exp: Experiment) -> float:
    """Seconds per variant per round: round_s, shortened where the fewest rounds would not fit the timed seconds."""
    return min(exp.round_s, exp.timed_s / exp.rounds)


def most_rounds(exp: Experiment) -> int:
    """The rounds the timed stage may take at most: exactly `rounds` with timed_steps, else as many as fit."""
    return exp.rounds if exp.timed_steps is not None else max(exp.rounds, math.floor(exp.timed_s / round_seconds(exp)))


def steps_per_block(exp: Experiment, step_s: float, multiple: int = 1) -> int:
    """Steps per timed block: the experiment's step count, or enough steps of `step_s` (a steady-state
    step) to fill a round; rounded to a multiple of the schedule length so each block sees every
    shape equally often."""
    steps = exp.timed_steps // exp.rounds if exp.timed_steps is not None else round(
        round_seconds(exp) / max(step_s, 1e-6))
    return max(1, round(steps / multiple)) * multiple


def stop_timing(exp: Experiment, done: int, ratios: list[float], spent_s: float, block_s: float) -> str | None:
    """Why the adaptive timed stage stops after `done` rounds, or None to time another.

    `spent_s` is the most timed seconds a variant has used, `block_s` its typical block: another round
    that would take a variant past timed_s is not started, so timed_s stays the most it may take.
    """
    if exp.timed_steps is not None:
        return "steps" if done >= exp.rounds else None
    # timed_s is the most a variant may take, even before the fewest rounds: on a machine so busy that blocks
    # run long, the run stops with fewer rounds and a wider interval, which says so, rather than overrun.
    if spent_s + block_s > exp.timed_s * 1.05 or done >= most_rounds(exp) * 4:
        return "budget"
    if done < exp.rounds:
        return None
    if ratios and paired.settled(ratios, exp.target_pct, max(exp.rounds, paired.MIN_ROUNDS)):
        return "settled"
    return None


def stop_words(exp: Experiment, why: str, ratios: list[float], spent_s: float) -> str:
    """The timed stage's end, in a sentence stored with the run."""
    n = max(len(ratios), 1)
    rounds = f"{n} round{'s' if n != 1 else ''}"
    # under MIN_INTERVAL_ROUNDS the run states no interval (tcore.figures.rerun): the spread is not quoted as one
    width = paired.estimate(ratios).half_width_pct if len(ratios) >= MIN_INTERVAL_ROUNDS else None
    said = "" if width is None else f" ± {width:.1f}%"
    if why == "budget" and ratios and width is None:
        spread = (f" (their ratios read {min(ratios):.2f}–{max(ratios):.2f}x)" if len(ratios) > 1 else
                  f" (its ratio read {ratios[0]:.2f}x)")
        return (f"Timing used its {exp.timed_s:g} s per variant over {rounds}, too few to give an interval of "
                f"their own{spread}.")
    if why == "settled":
        return (f"Timing stopped after {rounds} ({spent_s:.1f} of at most {exp.timed_s:g} s per variant): the "
                f"rounds' own interval reached{said}, within ± {paired.rounds_target(exp.target_pct):g}%, which "
                f"leaves the rest of the ± {exp.target_pct:g}% target for the spread between processes.")
    if why == "budget":
        target = (f" against their ± {paired.rounds_target(exp.target_pct):g}% share of the ± {exp.target_pct:g}% "
                  "target" if exp.target_pct > 0 and ratios else "")
        return (f"Timing used its {exp.timed_s:g} s per variant over {rounds}; the rounds' interval stayed "
                f"at{said}{target}." if said else f"Timing used its {exp.timed_s:g} s per variant over {rounds}.")
    return f"Timed {exp.timed_steps} steps per variant in {rounds}, as set."
