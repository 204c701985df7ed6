"""The headline's interval for a rerun: how far the speedup can move when the same setting runs again, in a fresh
process on the same machine. Pure, tested on the CPU.

The rounds of one run pair eager and compiled back to back, so drift *within* the run cancels (tcore.figures.paired).
What the rounds cannot see is what stays fixed for a whole process and changes with the next one: which cores the
scheduler gave the worker, the host CPU's frequency state, the allocator's layout. A launch-bound variant's throughput
is the host's launch rate, so it moves with all of those, by far more between processes than each run's own interval
says. An interval made of the rounds alone is about the rounds, not about a rerun.

So the interval adds, in log space (2x and 0.5x sit symmetrically), three independent parts as standard deviations:
  rounds   the paired rounds' order-statistics interval (tcore.figures.paired), turned back into a standard error;
  drift    half the difference between the median ratio of the first and of the second half of the rounds: a
           run whose ratio moved while it ran has no single value that a rerun would find again;
  between  the spread of the headline between processes, for the kind of run (kind(): the device, and whether a variant
           is host-bound), beyond what each run's own rounds and drift already explain: earlier headlines scatter by
           both, so their variance less the runs' mean own variance (within_sigma, stored with each result) is the part
           a fresh process adds (between_of: the scatter raised to its upper bound first; never below zero). Counting
           the rounds twice, once in each run's rounds and again in the headlines' scatter, made a steady setting read
           as wide as its noisiest reference. Its prior is what this machine has shown for that kind
           (tcore.analysis.history.machine_spread: every setting of the kind it has run more than once, pooled, e.g. the
           reruns of `python -m tcore calibrate` or of the lab's own idle-time references), pooled with a starting
           value measured for the GPU model and kind (MEASURED_BETWEEN_PCT; FALLBACK_BETWEEN_PCT for one not
           measured) from its first rerun, alone once it holds MIN_MACHINE_DOF degrees of freedom. The prior is
           pooled with the earlier runs of the same setting on the same machine once the store holds at least
           MIN_HISTORY of them; the starting value counts as PRIOR_RUNS runs' worth of evidence, so three earlier
           runs that agreed by luck cannot shrink it to nothing (a few reruns can agree within a fraction of a
           percent and the next read several percent away). A learned standard deviation is raised to a
           one-sided 80% upper bound on its degrees of freedom, since a few runs understate it.
The interval is speedup × exp(± z · sqrt(rounds² + drift² + between²)) at one level, CONFIDENCE (95%), everywhere.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Protocol, Sequence

from tcore.figures import derived, paired


class Spread(Protocol):
    """What a machine's reruns say of one kind of run (tcore.analysis.history.Spread gives it)."""
    sigma_log: float
    dof: int
    runs: int
    settings: int

CONFIDENCE = paired.CONFIDENCE  # one level for every interval the lab states: 95%
# The spread of the headline between fresh processes a lab starts from, before its own reruns teach it: a standard
# deviation in %, by GPU model (a pattern of its CUDA name, as tcore.host.peaks matches them) and kind of run, from
# fresh processes of the lab on that model (`python bench/fresh_lab_spread.py`, BENCHMARKS.md "Does a fresh lab's
# interval cover a rerun"). The value sits above the pooled σ those reruns showed and near what an independent harness
# moved between processes: coverage first, and this machine's own reruns narrow it.
MEASURED_BETWEEN_PCT: dict[str, dict[str, float]] = {
    r"H100": {"cuda-host-bound": 3.0, "cuda": 1.5},
}
MEASURED_WHERE = {r"H100": "measured on H100s (ResNet-50, gpt2, the GPU default and ConvNeXt in fresh processes)"}
# A GPU not in the table, and the CPU, start wide: a host-bound GPU run follows its host, which differs between
# machines; a GPU-busy one holds far tighter, and 2% leaves room for hosts not seen; a CPU run shares its cores with
# everything else on the machine, so it starts as wide as a host-bound GPU run.
FALLBACK_BETWEEN_PCT = {"cuda": 2.0, "cuda-host-bound": 10.0, "cpu": 10.0}


def starting_between(kind_: str, gpu: str | None = None) -> tuple[float, str]:
    """(σ in %, where it comes from) of the spread between fresh processes a lab starts from for runs of `kind_` on
    the GPU named `gpu` (its CUDA name): the measured table's value for that model, else the wide fallback."""
    if kind_ != "cpu" and gpu:
        for pattern, by_kind in MEASURED_BETWEEN_PCT.items():
            if re.search(pattern, gpu) and kind_ in by_kind:
                return by_kind[kind_], MEASURED_WHERE[pattern]
    where = ("the CPU's starting value" if kind_ == "cpu" else
             f"a wide starting value for a GPU not measured yet ({gpu or 'unknown'})")
    return FALLBACK_BETWEEN_PCT[kind_], where


MIN_HISTORY = 3          # earlier runs of the same setting needed to learn the spread from them
# A run of fewer rounds states no interval of its own: one round says nothing of how far the next would land, and an
# interval made of the spread between processes alone would read as if the run had measured it. From 3 the rounds'
# order statistics and their spread speak.
MIN_INTERVAL_ROUNDS = 3
MIN_MACHINE_DOF = 6      # degrees of freedom of the machine's reruns (runs less one per setting) to replace the default
KIND_WORDS = {"cuda-host-bound": "host-bound GPU runs (the GPU waits on the host's launches)",
              "cuda": "GPU runs that keep the GPU busy", "cpu": "CPU runs"}
MIN_BETWEEN_PCT = 0.5    # a learned spread is never taken below this: a few identical readings prove little
HISTORY_UPPER = 0.80     # the learned standard deviation is raised to this one-sided upper confidence bound
PRIOR_RUNS = 4           # the default spread weighs as much as this many degrees of freedom of earlier runs


@dataclass(frozen=True)
class Rerun:
    """The headline and its interval for a rerun, with the parts the interval is made of (all in %, as σ or ±)."""

    speedup: float
    low: float | None            # None: too few rounds for an interval (MIN_INTERVAL_ROUNDS)
    high: float | None
    confidence: float          # CONFIDENCE
    rounds_pm_pct: float | None  # the rounds' own interval, ± % (None with a single round)
    drift_pct: float | None      # first-half vs second-half median ratio, % apart (None under 4 rounds)
    between_pct: float           # the between-process σ used, %
    between_source: str          # "history" (pooled with the prior), "machine" (the machine's alone) or "default"
    history_runs: int            # earlier runs of the setting it was learned from (0 for the default)
    kind: str = "cpu"            # kind(): which spread between processes applies
    machine_runs: int = 0        # the machine's reruns the prior was learned from (0: the documented default)
    machine_settings: int = 0
    within_pct: float = 0.0      # the run's own σ: its rounds and drift together (within_sigma), %
    left_out: int = 0            # rounds left out as disturbed (tcore.figures.paired.undisturbed)
    floor: float | None = None   # the fastest blocks' ratio the interval was stretched to reach (disturbed throughout)
    machine_dof: int = 0         # the degrees of freedom of the machine's reruns (under MIN_MACHINE_DOF: pooled)
    start_pct: float = FALLBACK_BETWEEN_PCT["cpu"]  # the starting σ between processes for this kind and GPU, %
    start_where: str = ""        # where that starting value comes from (starting_between)

    rounds: int = 0              # the rounds the headline is made of

    @property
    def pm_pct(self) -> float | None:
        """How far the interval reaches from the headline, on the wider side, in %; None without an interval."""
        if self.low is None or self.high is None:
            return None
        return 100 * max(self.high / self.speedup - 1, 1 - self.low / self.speedup)

    def no_interval(self) -> str | None:
        """Why the run states no interval, and how to get one; None where it states one."""
        if self.low is not None:
            return None
        few = "1 round cannot" if self.rounds == 1 else f"{self.rounds} rounds cannot"
        return (f"{few} give an interval of the run's own: so few say nothing of how far the next would land. Run it "
                f"with {MIN_INTERVAL_ROUNDS} rounds or more (Rounds, or more timed seconds) for an interval; rerunning "
                "the setting here then also teaches the lab how far it moves between processes")

    def basis(self) -> str:
        """What the interval is made of, in a clause: 'the rounds (± 1.2%), drift 0.4%, and ...'."""
        if (why := self.no_interval()) is not None:
            return why
        parts = [f"the rounds (± {self.rounds_pm_pct:.1f}%)" if self.rounds_pm_pct is not None else
                 "a single round (no interval of its own)"]
        if self.left_out:
            parts[0] = (f"the undisturbed rounds (± {self.rounds_pm_pct:.1f}%; {self.left_out} round"
                        f"{'s' if self.left_out != 1 else ''} left out, where a block ran more than "
                        f"{paired.DISTURBED_PCT:g}% slower than its variant's fastest: the host interfered)")
        elif self.floor is not None:
            parts[0] += (f", stretched to the ratio of the two variants' fastest blocks ({self.floor:.2f}x: the host "
                         "disturbed too many rounds to leave them out, and undisturbed the run may read that)")
        if self.drift_pct is not None:
            parts.append(f"the drift between the run's halves ({self.drift_pct:.1f}%)")
        what = KIND_WORDS.get(self.kind, self.kind)
        reruns = (f"{self.machine_runs} reruns of {self.machine_settings} "
                  f"setting{'s' if self.machine_settings != 1 else ''}")
        start = f"a starting value of σ {self.start_pct:g}% ({self.start_where})"
        if self.machine_runs and self.machine_dof >= MIN_MACHINE_DOF:
            prior = f"what this machine has shown for {what} ({reruns})"
        elif self.machine_runs:
            prior = f"{start} pooled with this machine's first {reruns} of {what}"
        else:
            prior = start
        if self.between_source == "history" and self.history_runs - 1 >= MIN_MACHINE_DOF:
            parts.append(f"the spread between fresh processes learned from {self.history_runs} earlier runs of this "
                         f"setting on this machine (σ {self.between_pct:.1f}% beyond each run's own rounds)")
        elif self.between_source == "history":
            parts.append(f"the spread between fresh processes, {prior} pooled with {self.history_runs} earlier runs of "
                         f"this setting on this machine (σ {self.between_pct:.1f}% beyond each run's own rounds)")
        elif self.between_source == "machine" and self.machine_dof >= MIN_MACHINE_DOF:
            parts.append(f"the spread between fresh processes that this machine has shown for {what} beyond each "
                         f"run's own rounds (σ {self.between_pct:.1f}%, from {reruns})")
        elif self.between_source == "machine":
            parts.append(f"the spread between fresh processes, {prior} (σ {self.between_pct:.1f}%; it narrows to what "
                         f"this machine shows as more of its runs are stored again, its own alone from "
                         f"{MIN_MACHINE_DOF + 1} reruns)")
        else:
            parts.append(f"{start} for the spread between fresh processes: this machine has no rerun of {what} "
                         "stored yet. It is a starting value: each setting run here again narrows it to what this "
                         "machine shows (the lab reruns reference settings itself while it is idle; `python -m "
                         "tcore calibrate` does it now)")
        return ", ".join(parts[:-1]) + " and " + parts[-1]


# A run whose own rounds spread wider than this (its speedup_within_pct) cannot see a spread between processes of the
# size the lab states (its starting values are 2-10%): the between-process σ is what its reruns' scatter leaves once
# each run's own σ is taken out, and runs of 0.93x, 2.22x and 0.37x, each ± 100% or so of its own, took out more than
# they scattered and taught the machine "σ 0%", narrowing every other setting's interval (walk 6). They teach none.
MAX_TEACHING_WITHIN_PCT = 25.0


def teaches(low: float | None, within_pct: float | None) -> bool:
    """Whether a headline with this interval's low end and this own spread (%) teaches a spread between processes."""
    return low is not None and (within_pct is None or within_pct <= MAX_TEACHING_WITHIN_PCT)


def teaches_spread(result: dict) -> bool:
    """Whether a stored result counts among the earlier runs a setting's spread between processes is learned from:
    a headline with an interval of its own, and a run whose own rounds agree well enough to see one (teaches). One or
    two rounds' ratio (no interval) can land anywhere on a loaded machine, and one such run of 37x beside 0.6x made a
    setting's reruns "expected within ± 7520%"."""
    return bool(result.get("speedup")) and teaches(result.get("speedup_low"), result.get("speedup_within_pct"))


def _untaught_words(untaught: int) -> str:
    """What the note before a run says of the earlier runs that teach the setting's spread nothing: none count toward
    MIN_HISTORY, so "until 3 earlier runs teach it" beside 3 stored runs would read as if the next one would."""
    if not untaught:
        return ""
    which = "its earlier run here teaches" if untaught == 1 else f"its {untaught} earlier runs here teach"
    return (f"; {which} nothing: a run teaches it with an interval of its own whose rounds agree within "
            f"± {MAX_TEACHING_WITHIN_PCT:.0f}%")


def z_value(confidence: float) -> float:
    """The two-sided normal quantile: 1.96 for 95%."""
    return statistics.NormalDist().inv_cdf((1 + confidence) / 2)


def rounds_sigma(ratios: Sequence[float]) -> tuple[float, float | None]:
    """(σ in log space, ± % of the rounds' own interval) of the paired rounds' median: the order-statistics interval
    read back as a standard error at the coverage it reached. A single round: (0, None)."""
    est = paired.estimate(ratios)
    if est.low is None:
        return 0.0, None
    half = max(math.log(est.high / est.speedup), math.log(est.speedup / est.low))
    return half / z_value(est.confidence), est.half_width_pct


def drift_sigma(ratios: Sequence[float]) -> tuple[float, float | None]:
    """(σ in log space, % apart) from the median ratio of the first half of the rounds against the second half, in
    the order they ran; (0, None) under 4 rounds. A steady run's halves agree within its noise; a drifting one's
    do not, and no single value describes it."""
    if len(ratios) < 4:
        return 0.0, None
    logs = [math.log(r) for r in ratios]
    half = len(logs) // 2
    apart = abs(statistics.median(logs[:half]) - statistics.median(logs[-half:]))
    return apart / 2, 100 * (math.exp(apart) - 1)


def within_sigma(pct: float | None) -> float:
    """σ in log space of a stored headline about what its own process would read again, from its result's
    speedup_within_pct (its rounds and its drift together); 0 for a record that does not say (then none of its
    scatter is explained away)."""
    return math.log1p(pct / 100) if pct else 0.0


def chi2_quantile(p: float, k: int) -> float:
    """The p-quantile of a chi-square with k degrees of freedom (Wilson-Hilferty; within 1-2% from k = 2)."""
    z = statistics.NormalDist().inv_cdf(p)
    return k * max(1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k)), 1e-6) ** 3


def kind(device: str | None, host_bound: bool) -> str:
    """Which spread between processes applies: "cuda-host-bound", "cuda" or "cpu"."""
    return "cuda-host-bound" if device == "cuda" and host_bound else ("cuda" if device == "cuda" else "cpu")


def setting_kind(device: str | None, host_bound_readings: Sequence[bool]) -> str:
    """The kind of a setting on a machine: the majority of its runs' own host-bound readings there (this run's among
    them), a tie read as host-bound, the wider (coverage first). One process's reading flipped a setting's width between
    ± 4% and ± 20% from run to run (a model GPU-busy in one process can read host-bound in the next)."""
    readings = list(host_bound_readings)
    return kind(device, bool(readings) and 2 * sum(readings) >= len(readings))


def _upper(sigma: float, dof: int) -> float:
    """A standard deviation learned with `dof` degrees of freedom, raised to its one-sided HISTORY_UPPER bound."""
    return sigma * math.sqrt(dof / chi2_quantile(1 - HISTORY_UPPER, dof))


def between_sigma(history: Sequence[float], device: str, host_bound: bool,
                  machine: Spread | None = None, history_within: Sequence[float] = (),
                  gpu: str | None = None) -> tuple[float, str, int]:
    """(σ in log space, "history", "machine" or "default", earlier runs of the setting used) between processes.

    `history` holds the headline speedups of earlier runs of the same setting on the same machine; `machine`, what
    the machine has shown for runs of this kind (tcore.analysis.history.machine_spread); `gpu`, the GPU's CUDA name,
    which picks the measured starting value (starting_between). The prior: the machine's spread alone once it holds
    MIN_MACHINE_DOF degrees of freedom; before that, from its first rerun on, the machine's spread (raised to its upper
    bound, its runs' own σ taken out) pooled with the starting value, which weighs PRIOR_RUNS degrees of freedom, so
    every finished rerun counts at once and two that agree by luck cannot narrow it to nothing; with no rerun, the
    starting value. From MIN_HISTORY earlier runs of the setting: the prior pooled with their sample variance of
    log-speedups (n - 1); the prior steps aside once they hold MIN_MACHINE_DOF degrees of freedom themselves. A
    learned prior pools every setting of the kind, and one that moves between processes would otherwise widen a
    setting whose own reruns agree within 1%. Fewer: the prior alone.
    `history_within`: those runs' own σ (within_sigma). What is learned is the headlines' scatter, raised to its
    one-sided HISTORY_UPPER bound, less the runs' own variance, which their rounds already state (a learned prior
    brings its own, tcore.analysis.history.Spread.within_log; the starting value is a spread between processes
    already); never below MIN_BETWEEN_PCT."""
    default = math.log1p(starting_between(kind(device, host_bound), gpu)[0] / 100)
    floor = math.log1p(MIN_BETWEEN_PCT / 100)
    dof_m = machine.dof if machine is not None else 0
    if dof_m >= MIN_MACHINE_DOF:
        scatter, own, prior_dof, source = machine.scatter, machine.within_log, machine.dof, "machine"
    elif dof_m > 0:
        # raised to its upper bound on the degrees of freedom it is pooled into: raised on its own few (x4 on one)
        # and then pooled again, its uncertainty would count twice, and one pair of processes that met the host's
        # episodes would widen every other setting of the kind several-fold
        learned = between_of(machine.scatter, machine.within_log, PRIOR_RUNS + dof_m)
        pooled = math.sqrt((PRIOR_RUNS * default ** 2 + dof_m * learned ** 2) / (PRIOR_RUNS + dof_m))
        scatter, own, prior_dof, source = max(pooled, floor), 0.0, PRIOR_RUNS, "machine"
    else:
        scatter, own, prior_dof, source = default, 0.0, PRIOR_RUNS, "default"
    speedups = [s for s in history if s and s > 0]
    if len(speedups) < MIN_HISTORY:
        if source == "machine" and dof_m >= MIN_MACHINE_DOF:
            return max(between_of(scatter, own, prior_dof), floor), source, 0
        return scatter, source, 0
    logs = [math.log(s) for s in speedups]
    withins = [w for s, w in zip(history, history_within) if s and s > 0] if history_within else []
    k = len(logs) - 1
    if k >= MIN_MACHINE_DOF:  # the setting's own reruns are evidence enough: the prior, default or learned, steps aside
        scatter, own, prior_dof = 0.0, 0.0, 0
    dof = prior_dof + k
    pooled = math.sqrt((prior_dof * scatter ** 2 + k * statistics.variance(logs)) / dof)
    their_own = statistics.fmean(w * w for w in withins) if withins else 0.0
    pooled_own = math.sqrt((prior_dof * own ** 2 + k * their_own) / dof)
    return max(between_of(pooled, pooled_own, dof), floor), "history", len(speedups)


def between_of(scatter: float, own: float, dof: int) -> float:
    """The σ between processes that headlines scattering by `scatter` (learned with `dof` degrees of freedom, raised
    to its one-sided HISTORY_UPPER bound) leave once the runs' own σ (`own`, root mean square) is taken out."""
    return math.sqrt(max(0.0, _upper(scatter, dof) ** 2 - own ** 2))


def interval(ratios: Sequence[float], *, device: str, host_bound: bool = False, history: Sequence[float] = (),
             machine: Spread | None = None, confidence: float = CONFIDENCE,
             history_within: Sequence[float] = (), left_out: int = 0, floor: float | None = None,
             gpu: str | None = None) -> Rerun:
    """The headline (the median paired ratio) and its CONFIDENCE interval for a rerun of the same setting.
    `ratios`: the rounds the headline is made of, `left_out` disturbed ones already taken out; `floor`: the fastest
    blocks' ratio that the interval must reach, where too many were disturbed to leave out
    (tcore.figures.paired.undisturbed); `gpu`: the GPU's CUDA name, which picks the measured starting spread."""
    if not ratios:
        raise ValueError("no rounds to estimate a speedup from")
    center = paired.estimate(ratios).speedup
    if len(ratios) < MIN_INTERVAL_ROUNDS:
        start_pct, start_where = starting_between(kind(device, host_bound), gpu)
        return Rerun(center, None, None, confidence, None, None, start_pct, "default", 0, kind(device, host_bound),
                     left_out=left_out, start_pct=start_pct, start_where=start_where, rounds=len(ratios))
    s_rounds, rounds_pm = rounds_sigma(ratios)
    s_drift, drift_pct = drift_sigma(ratios)
    s_between, source, n = between_sigma(history, device, host_bound, machine, history_within, gpu)
    learned = machine is not None and machine.dof > 0
    start_pct, start_where = starting_between(kind(device, host_bound), gpu)
    half = z_value(confidence) * math.sqrt(s_rounds ** 2 + s_drift ** 2 + s_between ** 2)
    low, high = center * math.exp(-half), center * math.exp(half)
    if floor is not None and not low <= floor <= high:
        low, high = min(low, floor), max(high, floor)
    else:
        floor = None
    return Rerun(center, low, high, confidence, rounds_pm, drift_pct,
                 100 * (math.exp(s_between) - 1), source, n, kind(device, host_bound),
                 machine.runs if learned else 0, machine.settings if learned else 0,
                 100 * (math.exp(math.hypot(s_rounds, s_drift)) - 1), left_out, floor,
                 machine.dof if learned else 0, start_pct, start_where, len(ratios))


def figures_of(r: Rerun) -> dict[str, float | int | str | None]:
    """The stored columns of a rerun interval: it is the headline's interval (speedup_low/high/pm_pct)."""
    return {"speedup": r.speedup, "speedup_low": r.low, "speedup_high": r.high, "speedup_pm_pct": r.pm_pct,
            "speedup_confidence_pct": 100 * r.confidence, "speedup_rounds_pm_pct": r.rounds_pm_pct,
            "speedup_drift_pct": r.drift_pct, "speedup_between_pct": r.between_pct,
            "speedup_between_source": r.between_source, "speedup_history_runs": r.history_runs,
            "speedup_kind": r.kind, "speedup_machine_runs": r.machine_runs, "speedup_within_pct": r.within_pct,
            "speedup_rounds_left_out": r.left_out, "speedup_floor": r.floor,
            "speedup_interval_words": r.basis(), "speedup_no_interval": r.no_interval()}


def restate(result: dict, history: Sequence[float], host_bound: bool, machine: Spread | None = None,
            history_within: Sequence[float] = (), gpu: str | None = None) -> dict:
    """A finished result's headline interval again, with the store's earlier runs of the same setting as `history` and
    what the machine has shown for its kind of run as `machine` (`gpu`: its CUDA name, for the starting spread); the
    result unchanged where it has no paired rounds."""
    blocks = result.get("blocks") or {}
    if not blocks.get("eager") or not blocks.get("compiled"):
        return result
    rounds = paired.undisturbed(blocks["eager"], blocks["compiled"])
    if not rounds.ratios:
        return result
    return derived.with_headline_breakeven({**result, **figures_of(interval(
        rounds.ratios, device=result.get("device", "cpu"), host_bound=host_bound, history=history, machine=machine,
        history_within=history_within, left_out=rounds.left_out, floor=rounds.floor, gpu=gpu))})


# Before a run: whether the setting can be expected to hold. A headline "holds" when a rerun lands within ± HOLD_PCT
# of the median of reruns in HOLD_SHARE of them (9 of 10); with the between-process σ above that needs σ ≤ about 3%.
HOLD_PCT = 5.0
HOLD_SHARE = 0.90


@dataclass(frozen=True)
class Outlook:
    """What the lab expects of reruns of a setting before it runs, from the same evidence the interval will use."""

    between_pct: float     # the between-process σ the interval will use, %
    reach_pct: float       # ± % of the median that HOLD_SHARE of reruns should land within
    moved_pct: float | None  # how far the earlier runs here strayed from their median, %; None under 2 runs
    reason: str            # the evidence, in a clause
    history_runs: int = 0  # earlier runs of the setting the σ was learned from (0: too few, MIN_HISTORY)

    @property
    def holds(self) -> bool:
        return self.reach_pct <= HOLD_PCT and (self.moved_pct is None or self.moved_pct <= HOLD_PCT)

    def words(self) -> str | None:
        """The note shown before the run, or None when the setting is expected to hold ± HOLD_PCT."""
        if self.holds:
            return None
        if self.moved_pct is not None and self.moved_pct > self.reach_pct:  # the runs strayed past what is assumed
            learns = (f"its interval learns the spread from those {self.history_runs} runs" if self.history_runs else
                      f"its interval learns the spread once {MIN_HISTORY} earlier runs are stored")
            read = (f"The earlier runs strayed further than that σ allows ({HOLD_SHARE:.0%} of reruns within "
                    f"± {self.reach_pct:.0f}%): read one run's speedup no closer than ± {self.moved_pct:.0f}% "
                    f"({learns})")
        else:
            read = (f"{HOLD_SHARE:.0%} of reruns should land within ± {self.reach_pct:.0f}% of their median: read one "
                    "run's speedup no closer than that (its interval allows for it)")
        return (f"**The headline may move by more than ± {HOLD_PCT:.0f}% between reruns of this setting**: "
                f"{self.reason}. {read}.")


def outlook(history: Sequence[float], device: str, host_bound_runs: int = 0,
            bound_at_batch: tuple[int, int] | None = None, machine: Spread | None = None,
            history_within: Sequence[float] = (), gpu: str | None = None, untaught: int = 0) -> Outlook:
    """The outlook for a rerun of a setting, from the headlines of its earlier runs on this machine (`history`), how
    many of those were host-bound, and the device: between_sigma's σ, as the run's interval will use it.
    `bound_at_batch` (that batch, this batch): an earlier run of the setting at a larger batch here was host-bound;
    at a smaller batch each launch carries less work, so this one will be too. `machine`: what this machine's reruns
    of that kind of run say (tcore.analysis.history.machine_spread); `gpu`: its CUDA name."""
    bound = device == "cuda" and (host_bound_runs > 0 or bound_at_batch is not None)
    s, source, n = between_sigma(history, device, bound, machine, history_within, gpu)
    default = starting_between(kind(device, bound), gpu)[0]
    speedups = [x for x in history if x and x > 0]
    median = statistics.median(speedups) if speedups else None
    moved = 100 * max(max(x / median, median / x) - 1 for x in speedups) if len(speedups) > 1 else None
    parts = []
    if len(speedups) > 1:
        parts.append(f"its {len(speedups)} earlier runs on this machine read {min(speedups):.2f}–"
                     f"{max(speedups):.2f}x, up to {moved:.0f}% from their median {median:.2f}x")
    if bound and not host_bound_runs:
        parts.append(f"an earlier run of this setting here at batch {bound_at_batch[0]} was host-bound (the GPU waited "
                     f"on the host CPU's launches), and at batch {bound_at_batch[1]} each launch carries less work, so "
                     "the figure will follow the host's clock, its other work and the cores the worker gets")
    elif bound:
        many = "all" if host_bound_runs == len(speedups) else str(host_bound_runs)
        who = ("its earlier run here was" if len(speedups) < 2 else
               f"{many} of them {'was' if host_bound_runs == 1 else 'were'}")
        parts.append(f"{who} host-bound (the GPU waited on the host CPU's launches), so the figure follows the host's "
                     "clock, its other work and the cores the worker gets")
    elif device != "cuda":
        parts.append("on the CPU the run shares the machine's cores with everything else running on it")
    between = 100 * (math.exp(s) - 1)
    learned = machine is not None and machine.dof >= MIN_MACHINE_DOF
    prior = (f"what this machine's {machine.runs} reruns of {KIND_WORDS[kind(device, bound)]} showed" if learned else
             f"its starting value of {default:g}% pooled with this machine's first {machine.runs} reruns of "
             f"{KIND_WORDS[kind(device, bound)]}" if machine is not None and machine.dof > 0 else
             f"its starting value of {default:g}%")
    expect = f"the lab expects σ {between:.0f}% between fresh processes" + (
        f" (learned from those {n} runs)" if source == "history" and n - 1 >= MIN_MACHINE_DOF else
        f" ({prior} pooled with those {n} runs)" if source == "history" else
        f" ({prior}, until {MIN_HISTORY} earlier runs of this setting here teach it{_untaught_words(untaught)})")
    reach = 100 * (math.exp(z_value(HOLD_SHARE) * s) - 1)
    return Outlook(between, reach, moved, "; ".join(parts + [expect]), n if source == "history" else 0)
