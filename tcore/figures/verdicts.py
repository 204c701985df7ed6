"""How far a run's headline can be trusted, in words: how the speedup was made, why it may be noise, whether two
runs are told apart, where throughput and the median step disagree."""
from __future__ import annotations

from typing import Any, Mapping

from tcore.experiment.spec import CUDAGRAPH_MODES
from tcore.figures import paired
from tcore.figures.breakdown import CATEGORIES
from tcore.figures.fields import (
    BUSY_CORES,
    DISAGREE_PCT,
    HOST_BUSY_PCT,
    HOST_IDLE_SHARE,
    NOISY_SPREAD_PCT,
    SLOW_STEP_FACTOR,
    SLOW_TIME_PCT,
    SPREAD_BUSY_PCT,
    SPREAD_IDLE_SHARE,
    UNPAIRED_GAP_PCT,
)

LEVEL_PCT = round(100 * paired.CONFIDENCE)  # the one confidence level every page names


def interval_name(result: Mapping[str, Any]) -> str:
    """'95% interval' for a run whose interval reaches the level (its coverage is 95% or more: the order statistics
    give 96.9% for 6 rounds, 98.8% for 10; one level is named, not each run's); else what it is, a narrower thing."""
    cover, n = result.get("speedup_confidence_pct"), result.get("paired_rounds")
    if cover is None or cover >= LEVEL_PCT - 0.05:
        return f"{LEVEL_PCT}% interval"
    return f"range of its {n} rounds"


def interval_reach(result: Mapping[str, Any]) -> str | None:
    """How far the interval reaches from the speedup, both sides: '± 4.6%', or '−19% / +74%' for a lopsided one
    (the stored speedup_pm_pct is the wider side only)."""
    s, lo, hi = result.get("speedup"), result.get("speedup_low"), result.get("speedup_high")
    if s is None or lo is None or hi is None:
        return None
    down, up = (1 - lo / s) * 100, (hi / s - 1) * 100
    if abs(up - down) < 1:
        return f"± {max(up, down):.1f}%"
    return f"−{down:.0f}% / +{up:.0f}%"


def speedup_words(result: Mapping[str, Any]) -> str | None:
    """How the headline speedup was made, in a sentence: 'The median of 12 paired rounds ...'."""
    if result.get("speedup") is None:
        return None
    n, low, high = result.get("paired_rounds"), result.get("speedup_low"), result.get("speedup_high")
    if n is None:
        return f"Speedup {result['speedup']:.2f}x: compiled throughput over eager (medians of the rounds)."
    whose = f"the median of {n} paired rounds' ratios" if n != 1 else "the ratio of a single paired round"
    words = (f"Speedup {result['speedup']:.2f}x: {whose} "
             "(each round times eager and compiled back to back, so drift in the machine's speed cancels)")
    if low is not None and result.get("speedup_interval_words"):
        words += (f"; {interval_name(result)} for a rerun {low:.2f}–{high:.2f}x ({interval_reach(result)}), "
                  f"from {result['speedup_interval_words']}")
    elif low is not None:
        words += (f"; {interval_name(result)} {low:.2f}–{high:.2f}x ({interval_reach(result)}), "
                  "from the rounds' order statistics (this older run's interval covers its rounds only, not a rerun)")
        if not interval_name(result).endswith("% interval"):
            words += f" ({paired.MIN_ROUNDS} rounds are the fewest for a {LEVEL_PCT}% interval)"
    elif result.get("speedup_no_interval"):
        words += f"; no interval: {result['speedup_no_interval']}"
    else:
        words += "; one round gives no interval"
    medians = result.get("speedup_of_medians")
    if medians is not None and abs(medians / result["speedup"] - 1) > 0.02 and not _gap(result):  # else said apart
        words += f". The ratio of the two median throughputs, unpaired, reads {medians:.2f}x"
    if result.get("speedup_recomputed"):
        words += " (recomputed from this older run's stored rounds)"
    return words + "."


def slower_than_eager(result: Mapping[str, Any]) -> bool | None:
    """Whether the run shows compiled slower than eager: True where its interval lies below 1x, False where the
    headline is 1x or more, None where it cannot tell (an interval that takes in 1x: 0.98x within 0.01-104.61x; or
    too few rounds for an interval). A record from before intervals, with none and no reason, reads by its headline."""
    s, high = result.get("speedup"), result.get("speedup_high")
    if s is None or s >= 1:
        return False if s is not None else None
    if high is not None:
        return True if high < 1 else None
    rounds = result.get("paired_rounds")
    if result.get("speedup_no_interval") or (rounds is not None and rounds < 2):
        return None
    return True


def _gap(result: Mapping[str, Any]) -> bool:
    """Whether the ratio of the two median throughputs is further than UNPAIRED_GAP_PCT from the paired headline."""
    s, medians = result.get("speedup"), result.get("speedup_of_medians")
    return bool(s) and medians is not None and abs(medians / s - 1) * 100 > UNPAIRED_GAP_PCT


def unpaired_gap(result: Mapping[str, Any]) -> str | None:
    """Why the two median throughputs give another speedup than the headline, and whether that is a reason to doubt
    the run; None where they agree within UNPAIRED_GAP_PCT (then the throughput tiles' percentage stands beside it).

    Each throughput is the median of its own variant's rounds, so the two can come from different rounds: when the
    machine's speed moved between rounds, their ratio is not a measurement of the speedup. The headline pairs each
    round's compiled block with the eager block timed beside it, so that movement cancels; whether the headline
    holds is its own interval's question (noise_reasons), not the gap's.
    """
    if not _gap(result):
        return None
    s, medians = result["speedup"], result["speedup_of_medians"]
    moved = [f"{v}'s from {lo:,.3g} to {hi:,.3g} steps/s" for v in ("eager", "compiled")
             if (lo := result.get(f"{v}_steps_per_s_min")) is not None
             and (hi := result.get(f"{v}_steps_per_s_max")) is not None]
    words = (f"**The two throughputs give {medians:.2f}x; the speedup is {s:.2f}x.** Each throughput is the median of "
             "its own variant's rounds, and the two medians came from different rounds while the machine's speed "
             "changed between rounds" + (f" ({' and '.join(moved)})" if moved else "") + ", so their ratio is not a "
             "measurement of the speedup. The speedup divides compiled by eager within each round, the two timed back "
             "to back, and takes the median of those ratios: the change in speed cancels in it.")
    low, high = result.get("speedup_low"), result.get("speedup_high")
    if noise_reasons(result):
        words += " The speedup's own rounds disagree too (its noise reasons say how): read neither figure as solid."
    elif low is not None and high is not None:
        words += (f" The speedup's own rounds agree ({interval_name(result)} {low:.2f}–{high:.2f}x), so it holds; "
                  "the throughputs are not this machine's steady speed, which moved during the run.")
    return words


def noise_reasons(result: Mapping[str, Any]) -> list[str]:
    """Why a run's headline should not be read as solid, in sentences; empty when nothing says so.

    A run with a paired interval is judged by its width: a variant's rounds may move together with the
    machine (a launch-bound model follows the host CPU) while their ratio holds still. Without one (an
    eager-only run, a single round) the rounds' spread speaks.
    """
    reasons = []
    if result.get("speedup_no_interval"):  # too few rounds: rough by construction, whatever they happened to read
        reasons.append(f"it states no interval: {result['speedup_no_interval']}")
    width = result.get("speedup_pm_pct")
    rounds_width = result.get("speedup_rounds_pm_pct")  # None in older records: their interval was the rounds'
    if width is not None and width > paired.WIDE_PCT:
        why = (f"the speedup's {interval_name(result)} is too wide to trust: {result['speedup_low']:.2f}–"
               f"{result['speedup_high']:.2f}x ({interval_reach(result)}, beyond the ± {paired.WIDE_PCT:g}% a run "
               f"aims for) over {result.get('paired_rounds')} paired rounds")
        if rounds_width is not None and rounds_width <= paired.WIDE_PCT:
            why += (f": the rounds agree (± {rounds_width:.1f}%), but this setting's figure moves between fresh "
                    f"processes on this machine (σ {result.get('speedup_between_pct') or 0:.1f}%), so a rerun can "
                    "land anywhere in it")
        reasons.append(why)
    for v in result.get("variants") or ["eager"]:
        spread = result.get(f"{v}_spread_pct")
        if width is None and spread is not None and spread > NOISY_SPREAD_PCT:
            reasons.append(f"the {v} rounds disagree by {spread:.0f}% ({result[f'{v}_steps_per_s_min']:.3g} to "
                           f"{result[f'{v}_steps_per_s_max']:.3g} steps/s)")
        slow_pct = result.get(f"{v}_slow_time_pct")
        if slow_pct is not None and slow_pct > SLOW_TIME_PCT:
            reasons.append(f"{result[f'{v}_slow_steps']} {v} step(s) took over {SLOW_STEP_FACTOR:g}x the median step "
                           f"and {slow_pct:.0f}% of its timed time")
    busy = result.get("busy_cores")
    if busy is not None and busy > BUSY_CORES:
        where = ("on the core kept for its launch thread" if result.get("measure_cpus") else "")
        reasons.append(f"other processes kept {busy:.1f} CPU cores busy {where} while it was timed".replace("  ", " "))
    sharing = result.get("gpu_processes")
    # the lab's own runs that share the GPU (compiling, waiting for it) hold contexts there, but the device lease kept
    # their work out of the timed rounds: only processes beyond them say something else computed
    others = None if sharing is None else sharing - 1 - (result.get("gpu_lab_processes") or 0)
    if others is not None and others > 0:
        reasons.append(f"{others} other process(es), not of this lab, were on this GPU while it was timed")
    return reasons


def told_apart(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool | None:
    """Whether two runs' speedups differ beyond their intervals; None when either run has no interval."""
    return paired.apart(a, b)


def disagreement(result: Mapping[str, Any]) -> str | None:
    """When the speedup (each round's throughputs, paired) and the median steps tell different stories, which steps
    make the difference."""
    by_rounds, by_step = result.get("speedup"), result.get("speedup_p50")
    if by_rounds is None or by_step is None or abs(by_step / by_rounds - 1) * 100 <= DISAGREE_PCT:
        return None
    slow = [f"{result.get(f'{v}_slow_steps')} slow {v} step(s), {result.get(f'{v}_slow_time_pct'):.0f}% of its time"
            for v in ("eager", "compiled") if result.get(f"{v}_slow_steps")]
    why = ("; ".join(slow) + " count in each round's throughput but not in the median step") if slow else \
        ("the machine's speed changed between rounds: the speedup pairs each round's compiled with its own eager, the "
         "median step mixes steps of every round")
    return (f"The speedup ({by_rounds:.2f}x, from each round's throughputs) and the median step ({by_step:.2f}x) "
            f"disagree: {why}. The speedup is what a long job gets; the median step, what a typical step costs.")


def _idle_share(result: Mapping[str, Any], variant: str) -> float | None:
    """The profiled step's idle share, from its breakdown (the categories and the idle make up the step)."""
    parts = [result.get(f"{variant}_{k}_ms") for k in CATEGORIES]
    step = sum(p for p in parts if p is not None)
    idle = result.get(f"{variant}_idle_ms")
    return idle / step if idle is not None and step > 0 else None


def follows_host(result: Mapping[str, Any], device: str | None) -> bool:
    """Whether a GPU run's headline follows the host CPU's speed, which moves between processes: a variant's GPU sat
    idle SPREAD_IDLE_SHARE or more of its profiled step, or NVML saw it busy under SPREAD_BUSY_PCT of the timed time.
    It picks the kind of spread between processes its interval takes (tcore.figures.rerun.kind); host_bound() says,
    with a lower bar, where a variant's figure is partly the host's launch rate."""
    if device != "cuda":
        return False
    for v in result.get("variants") or ["eager"]:
        idle, busy = _idle_share(result, v), result.get(f"{v}_gpu_busy_pct")
        if (idle is not None and idle >= SPREAD_IDLE_SHARE) or (busy is not None and busy < SPREAD_BUSY_PCT):
            return True
    return False


def host_bound(result: Mapping[str, Any], device: str | None, mode: str | None = None) -> list[tuple[str, str]]:
    """(variant, sentence) for each variant whose figure is the host's launch rate rather than the GPU's speed: on
    a GPU, the GPU sat idle for HOST_IDLE_SHARE or more of its profiled step, or NVML saw it busy under HOST_BUSY_PCT
    of the timed time. The sentence says so, how much the figure moved across the run, what the GPU's time alone
    would give, and what would change it. Empty on the CPU, where the host is the device."""
    if device != "cuda":
        return []
    said = []
    for v in result.get("variants") or ["eager"]:
        idle, busy = _idle_share(result, v), result.get(f"{v}_gpu_busy_pct")
        evidence = []
        if idle is not None and idle >= HOST_IDLE_SHARE:
            evidence.append(f"the GPU sat idle {idle:.0%} of each {v} step")
        if busy is not None and busy < HOST_BUSY_PCT:
            evidence.append(f"NVML saw it busy {busy:.0f}% of the timed time")
        if not evidence:
            continue
        rate, unit = ((result.get(f"{v}_decode_tokens_per_s"), "decode tokens/s")
                      if result.get(f"{v}_decode_tokens_per_s") is not None else
                      (result.get(f"{v}_samples_per_s"), "samples/s"))
        words = (f"**{v.capitalize()} is host-bound**: {' and '.join(evidence)}, so its "
                 f"{rate:,.0f} {unit} is the host CPU's launch rate, not the GPU's speed" if rate is not None else
                 f"**{v.capitalize()} is host-bound**: {' and '.join(evidence)}, so its figure is the host CPU's "
                 "launch rate, not the GPU's speed")
        lo, hi, spread = (result.get(f"{v}_steps_per_s_min"), result.get(f"{v}_steps_per_s_max"),
                          result.get(f"{v}_spread_pct"))
        if lo is not None and hi is not None and spread is not None:
            words += (f". Its rounds moved from {lo:,.1f} to {hi:,.1f} steps/s ({spread:.0f}% of the median) across "
                      "this run, and a fresh process can land elsewhere: the host's clock, its other work and the "
                      "core the worker got all move it")
        gpu_rate = result.get(f"{v}_gpu_time_samples_per_s")
        if gpu_rate is not None:
            words += f". On the GPU's time alone it would reach {gpu_rate:,.0f} {unit}"
        if v == "compiled" and mode in CUDAGRAPH_MODES:
            fix = "a larger batch (more work per launch) would change it; this run already replays CUDA graphs"
        elif v == "compiled":
            fix = ("a larger batch (more work per launch), or CUDA graphs (mode=reduce-overhead, which replays the "
                   "step without launching each kernel) would change it")
        else:
            fix = ("a larger batch (more work per launch) would change it; eager has no CUDA graphs, so against a "
                   "compiled mode=reduce-overhead the speedup grows by exactly this wait")
        said.append((v, f"{words}. What would change it: {fix}."))
    return said
