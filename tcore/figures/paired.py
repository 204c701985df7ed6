"""The headline speedup from paired rounds: the median of per-round ratios, with a distribution-free interval.

Each timed round runs an eager block and a compiled block back to back, so whatever the machine's
speed did over the seconds of a run (a host CPU whose clock drifts, a neighbour's burst), both
blocks of a round saw nearly the same machine: their ratio cancels most of it. The ratio of the two
variants' median throughputs does not, since the two medians can come from different rounds.

The estimate is the median of the per-round ratios (a stall in one block spoils one ratio, which the
median ignores); its interval comes from order statistics: for n rounds, [x_(k), x_(n+1-k)] holds the
true median of the ratios with probability 1 - 2 P(Binomial(n, 1/2) < k), whatever their distribution.
With fewer than 6 rounds no pair of order statistics reaches 95%; the widest one's coverage is said.
Rounds that the host disturbed (a block far slower than its variant's fastest) are left out where enough clean ones
remain (undisturbed): the figure is then what the machine gives undisturbed, which a rerun finds again.
Everything is in log-ratios so 2x and 0.5x sit symmetrically. Pure, tested on the CPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

CONFIDENCE = 0.95       # the interval's aim; fewer than 6 rounds reach less, and say how much
MIN_ROUNDS = 6          # the fewest rounds whose order-statistics interval covers 95% (96.9% for 6)
WIDE_PCT = 5.0          # an interval wider than ± this is "too wide to trust" (a noise reason) ...
TARGET_PCT = WIDE_PCT   # ... and the adaptive timed stage aims the whole stated interval within it: one threshold
# The interval a run states adds the spread between fresh processes to its rounds (tcore.figures.rerun): σ 0.5-2% on
# a quiet machine once calibrated, ± 1-4% at 95%. So the timed stage stops once the rounds alone are within this share
# of the target, which leaves the rest of it for that spread: rounds alone at the target would leave the stated
# interval wider than the target, flagged Noisy, as soon as anything was added.
ROUNDS_SHARE = 0.6


@dataclass(frozen=True)
class Paired:
    """The paired speedup of a run: estimate, interval, how many rounds, and the interval's coverage."""

    speedup: float              # the median of the per-round compiled/eager throughput ratios
    low: float | None           # the interval's ends; None with a single round
    high: float | None
    rounds: int
    confidence: float | None    # the interval's coverage, e.g. 0.969 for 6 rounds

    @property
    def half_width_pct(self) -> float | None:
        """How far the interval reaches from the estimate, in %, on the wider side: '± 2.4%'."""
        if self.low is None or self.high is None:
            return None
        return 100 * max(self.high / self.speedup - 1, 1 - self.low / self.speedup)

    def text(self) -> str:
        """'1.38x (95% interval 1.33–1.44x, 12 rounds)'."""
        if self.low is None:
            return f"{self.speedup:.2f}x (1 round, no interval)"
        return (f"{self.speedup:.2f}x ({self.confidence:.0%} interval {self.low:.2f}–{self.high:.2f}x, "
                f"{self.rounds} rounds)")


def _timed_pairs(eager: Iterable[Sequence[float]],
                 compiled: Iterable[Sequence[float]]) -> list[tuple[Sequence[float], Sequence[float]]]:
    """Each round's (eager, compiled) blocks as stored, [steps, wall_s]; a round with a block stored as 0 s (older
    records rounded walls to 0.1 ms, so one very short step could read 0) has no ratio to give and is left out."""
    return [(e, c) for e, c in zip(eager, compiled) if e[1] > 0 and c[1] > 0 and e[0] > 0 and c[0] > 0]


def _ratio(eager: Sequence[float], compiled: Sequence[float]) -> float:
    """Compiled over eager throughput of one round's blocks, [steps, wall_s] each."""
    return (compiled[0] / compiled[1]) / (eager[0] / eager[1])


def round_ratios(eager: Iterable[Sequence[float]], compiled: Iterable[Sequence[float]]) -> list[float]:
    """Compiled over eager throughput per round, from blocks as stored: [steps, wall_s] each (_timed_pairs)."""
    return [_ratio(e, c) for e, c in _timed_pairs(eager, compiled)]


# A host-bound loop on a shared or virtual machine runs at its floor most of the time and in bursts far slower, and
# interference only ever slows a block: the medians of such runs scatter where the rounds with both blocks at their
# floors agree (bench/results/settle-ab-h100.json keeps such runs). A round is disturbed where either
# block ran more than DISTURBED_PCT slower a step than its variant's fastest block of the run; with MIN_ROUNDS clean
# rounds or more, the headline and its interval are the clean rounds' and the run says how many it left out. With
# fewer, every round counts, and the interval reaches to the ratio of the two variants' fastest blocks (`floor`):
# the run was disturbed throughout, and what it would read undisturbed may lie there.
DISTURBED_PCT = 5.0


@dataclass(frozen=True)
class Rounds:
    """The rounds a headline is made of (paired.undisturbed)."""

    ratios: list[float]        # compiled over eager throughput, per round counted
    left_out: int = 0          # rounds left out as disturbed
    floor: float | None = None  # the fastest blocks' ratio, where the host disturbed too many rounds to leave out


def undisturbed(eager: Iterable[Sequence[float]], compiled: Iterable[Sequence[float]],
                pct: float = DISTURBED_PCT) -> Rounds:
    """The rounds the headline is made of, from blocks [steps, wall_s]: those whose two blocks both ran within `pct`
    of their variant's fastest step time, where at least MIN_ROUNDS did and some did not; else every round, with the
    fastest blocks' ratio as `floor` where some round was disturbed."""
    pairs = _timed_pairs(eager, compiled)
    ratios = [_ratio(e, c) for e, c in pairs]
    if len(pairs) < 2:
        return Rounds(ratios)
    floor_e = min(e[1] / e[0] for e, _ in pairs)
    floor_c = min(c[1] / c[0] for _, c in pairs)
    reach = 1 + pct / 100
    clean = [r for r, (e, c) in zip(ratios, pairs)
             if e[1] / e[0] <= floor_e * reach and c[1] / c[0] <= floor_c * reach]
    if len(clean) == len(ratios):
        return Rounds(ratios)
    if len(clean) < MIN_ROUNDS:
        return Rounds(ratios, floor=floor_e / floor_c)
    return Rounds(clean, len(ratios) - len(clean))


def _binom_cdf_half(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def order_interval(n: int, confidence: float = CONFIDENCE) -> tuple[int, float] | None:
    """(k, coverage): the 1-based rank k whose [x_(k), x_(n+1-k)] covers the median at `confidence`, the
    narrowest that does (largest k); where none does, k=1 and the coverage it reaches. None for n < 2."""
    if n < 2:
        return None
    best = 1
    for k in range(1, n // 2 + 1):
        if 1 - 2 * _binom_cdf_half(n, k - 1) >= confidence:
            best = k
        else:
            break
    return best, 1 - 2 * _binom_cdf_half(n, best - 1)


def estimate(ratios: Sequence[float], confidence: float = CONFIDENCE) -> Paired:
    """The paired speedup of per-round ratios: their median, and the order-statistics interval around it."""
    if not ratios:
        raise ValueError("no rounds to estimate a speedup from")
    logs = sorted(math.log(r) for r in ratios)
    n = len(logs)
    mid = (logs[(n - 1) // 2] + logs[n // 2]) / 2
    found = order_interval(n, confidence)
    if found is None:
        return Paired(math.exp(mid), None, None, n, None)
    k, coverage = found
    return Paired(math.exp(mid), math.exp(logs[k - 1]), math.exp(logs[n - k]), n, coverage)


def rounds_target(target_pct: float) -> float:
    """The ± % the rounds' own interval must reach for the whole stated interval to aim within ± `target_pct`."""
    return ROUNDS_SHARE * target_pct


def settled(ratios: Sequence[float], target_pct: float = TARGET_PCT, min_rounds: int = MIN_ROUNDS) -> bool:
    """Whether the adaptive timed stage may stop: enough rounds, and their interval within ± rounds_target(target_pct),
    so the stated interval, the spread between processes added, can still end within ± `target_pct`."""
    if len(ratios) < max(min_rounds, 2) or target_pct <= 0:
        return False
    width = estimate(ratios).half_width_pct
    return width is not None and width <= rounds_target(target_pct)


def from_record(result: Mapping[str, Any]) -> Paired | None:
    """The paired speedup of a stored result, recomputed from its blocks (records of every age keep them), its
    disturbed rounds left out as the run left them out (undisturbed); None for a run without both variants' blocks."""
    blocks = result.get("blocks") or {}
    if not blocks.get("eager") or not blocks.get("compiled"):
        return None
    ratios = undisturbed(blocks["eager"], blocks["compiled"]).ratios
    return estimate(ratios) if ratios else None


def apart(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool | None:
    """Whether two runs' speedups can be told apart: their intervals do not overlap. None when either has none."""
    if None in (a.get("speedup_low"), a.get("speedup_high"), b.get("speedup_low"), b.get("speedup_high")):
        return None
    return a["speedup_high"] < b["speedup_low"] or b["speedup_high"] < a["speedup_low"]


# Before the timed rounds, untimed blocks of each variant (the rounds' size, the order alternating) until the last
# SETTLE_BLOCKS of each agree within SETTLE_PCT, or each has run tcore.worker.pacing.settle_seconds(): host-bound
# loops speed up over their first seconds of timed blocks (by a tenth or more), which the rounds would take as spread
# and drift; GPU-bound ones hold still from the first block.
SETTLE_BLOCKS = 4
SETTLE_PCT = 1.5
SETTLE_S = 2.0


def steady(step_s: list[float], blocks: int = SETTLE_BLOCKS, pct: float = SETTLE_PCT) -> bool:
    """Whether a variant's blocks have stopped speeding up or slowing down: its last `blocks` blocks' mean step times
    lie within `pct` of their median (a ramp of a third of that per block shows across them)."""
    last = step_s[-blocks:]
    if len(last) < blocks:
        return False
    middle = sorted(last)[len(last) // 2]
    return (max(last) - min(last)) <= pct / 100 * max(middle, 1e-12)
