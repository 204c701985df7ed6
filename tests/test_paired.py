"""The paired headline speedup: median of per-round ratios, its order-statistics interval, the adaptive stop,
old records, and the words that use it. Synthetic blocks with a drifting machine and with stalls; no torch run."""
import math
import random
import statistics

import pytest

from tcore import figures
from tcore.experiment.spec import Experiment
from tcore.figures import paired
from tcore.lab.outputs import stored_results
from tests.helpers import insert_run

TRUE_SPEEDUP = 1.40
EAGER_STEPS_PER_S = 100.0


def drifting_rounds(n: int, *, drift, stall_round: int | None = None, block_s: float = 0.2,
                    jitter: float = 0.01, seed: int = 0) -> dict[str, list[list[float]]]:
    """Blocks as the worker stores them ([steps, wall_s]) from a machine whose speed at time t is drift(t).

    Rounds alternate their order (eager first, then compiled first), as the worker times them; each block
    lasts about block_s; `stall_round`'s compiled block stalls for as long again as it ran.
    """
    rng, t = random.Random(seed), 0.0
    blocks = {"eager": [], "compiled": []}
    for r in range(n):
        order = ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager")
        for name in order:
            rate = EAGER_STEPS_PER_S * (TRUE_SPEEDUP if name == "compiled" else 1.0)
            steps = round(block_s * rate)
            wall = steps / (rate * drift(t + block_s / 2)) * (1 + rng.gauss(0, jitter))
            if name == "compiled" and r == stall_round:
                wall *= 2
            blocks[name].append([steps, wall])
            t += wall
    return blocks


def old_headline(blocks) -> float:
    """The headline before paired rounds: compiled's median throughput over eager's."""
    rates = {k: statistics.median(s / w for s, w in v) for k, v in blocks.items()}
    return rates["compiled"] / rates["eager"]


def host_cpu_drift(t: float) -> float:
    """A host whose speed swings by ±30% over a few seconds, as the launch-bound captioner saw on an H200,
    and drops by 40% for 1.3 s every 2.6 s."""
    return (1 + 0.3 * math.sin(2 * math.pi * t / 3.1)) * (1.0 if int(t / 1.3) % 2 else 0.6)


def test_paired_rounds_cancel_a_drift_that_moves_the_ratio_of_medians():
    old, new, covered = [], [], 0
    for seed in range(40):
        blocks = drifting_rounds(12, drift=lambda t, s=seed: host_cpu_drift(t + s * 0.37), seed=seed)
        est = paired.estimate(paired.round_ratios(blocks["eager"], blocks["compiled"]))
        old.append(old_headline(blocks))
        new.append(est.speedup)
        covered += est.low <= TRUE_SPEEDUP <= est.high
    assert covered >= 38
    # The unpaired headline wanders over a band several times as wide as the paired one's.
    assert (max(new) - min(new)) * 3 < max(old) - min(old)
    assert statistics.median(new) == pytest.approx(TRUE_SPEEDUP, rel=0.02)  # and does not lean either way


def test_a_stall_spoils_one_round_not_the_headline():
    blocks = drifting_rounds(8, drift=lambda t: 1.0, stall_round=3)
    ratios = paired.round_ratios(blocks["eager"], blocks["compiled"])
    assert min(ratios) < 0.75  # the stalled round reads about half the speedup
    est = paired.estimate(ratios)
    assert est.speedup == pytest.approx(TRUE_SPEEDUP, rel=0.02)


def test_order_statistics_interval_and_its_coverage():
    assert paired.order_interval(1) is None
    assert paired.order_interval(5) == (1, pytest.approx(1 - 2 / 32))  # below 95%: the widest pair, and said so
    assert paired.order_interval(6) == (1, pytest.approx(1 - 2 / 64))
    assert paired.order_interval(10)[0] == 2
    k, cover = paired.order_interval(30)
    assert cover >= 0.95 and 1 - 2 * paired._binom_cdf_half(30, k) < 0.95  # the narrowest that still covers
    est = paired.estimate([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9])
    assert (est.low, est.high) == (pytest.approx(1.1), pytest.approx(1.8))
    assert est.speedup == pytest.approx(math.sqrt(1.4 * 1.5))  # even n: the middle pair's mean in logs
    one = paired.estimate([1.3])
    assert one.low is None and one.half_width_pct is None and "no interval" in one.text()


def test_interval_covers_the_truth_about_as_often_as_it_says():
    rng, hits, trials = random.Random(1), 0, 400
    for _ in range(trials):
        ratios = [TRUE_SPEEDUP * math.exp(rng.gauss(0, 0.05)) for _ in range(8)]
        est = paired.estimate(ratios)
        hits += est.low <= TRUE_SPEEDUP <= est.high
    assert est.confidence == pytest.approx(1 - 2 / 256)  # 8 rounds: [x(2), x(7)] reaches only 93%, so [x(1), x(8)]
    assert hits / trials >= est.confidence - 0.04


def test_adaptive_stop_settles_a_steady_run_early_and_a_drifting_one_uses_its_budget():
    steady = paired.round_ratios(*drifting_rounds(6, drift=lambda t: 1.0, jitter=0.003).values())
    assert paired.settled(steady, 3.0, 6)
    assert not paired.settled(steady[:5], 3.0, 6)  # fewer than the fewest rounds
    assert not paired.settled(steady, 0.0, 6)      # target 0: always the whole budget
    noisy = paired.round_ratios(*drifting_rounds(6, drift=lambda t: 1.0, jitter=0.08).values())
    assert not paired.settled(noisy, 3.0, 6)
    # The rounds must reach 60% of the target, not all of it: the stated interval adds the spread between
    # processes, and rounds that took the whole target left the run wider than it (Noisy) once that was added.
    six = [1.00, 1.02, 1.03, 1.04, 1.05, 1.07]  # 6 rounds: the interval is [x(1), x(6)], about ± 3.4%
    assert 3.0 < paired.estimate(six).half_width_pct < 4.0
    assert not paired.settled(six, 5.0, 6) and paired.settled(six, 6.0, 6)
    assert paired.rounds_target(5.0) == pytest.approx(3.0)


def test_the_worker_stops_when_settled_or_when_another_round_would_pass_timed_s():
    from tcore.worker.pacing import most_rounds, round_seconds, stop_timing, stop_words

    exp = Experiment(model="captioner", timed_s=2.0, rounds=6, round_s=0.2, target_pct=3.0)
    assert round_seconds(exp) == 0.2 and most_rounds(exp) == 10
    steady = [1.40, 1.41, 1.39, 1.40, 1.40, 1.41]
    assert stop_timing(exp, 5, steady[:5], 1.0, 0.2) is None
    assert stop_timing(exp, 6, steady, 1.2, 0.2) == "settled"
    wide = [1.2, 1.6, 1.3, 1.5, 1.1, 1.7]
    assert stop_timing(exp, 6, wide, 1.2, 0.2) is None
    assert stop_timing(exp, 9, wide + [1.4] * 3, 1.95, 0.2) == "budget"  # a tenth round would pass 2 s
    assert stop_timing(exp, 3, wide[:3], 1.8, 0.6) == "budget"  # stalled blocks: timed_s holds before 6 rounds
    assert "stayed at ± " in stop_words(exp, "budget", wide, 2.0)
    # two rounds state no interval: the words quote none either (they said "no interval" and then "± 190.1%")
    two = stop_words(exp, "budget", [0.35, 1.22], 2.0)
    assert two == ("Timing used its 2 s per variant over 2 rounds, too few to give an interval of their own (their "
                   "ratios read 0.35–1.22x).") and "±" not in two
    short = Experiment(model="captioner", timed_s=0.6, rounds=6, round_s=0.2)
    assert round_seconds(short) == pytest.approx(0.1)  # the fewest rounds still fit the timed seconds
    few = Experiment(model="captioner", timed_s=2.0, rounds=3, round_s=0.2)
    assert stop_timing(few, 3, steady[:3], 0.6, 0.2) is None  # 3 rounds reach only 75%: not settled before 6
    fixed = Experiment(model="captioner", timed_steps=12, rounds=6)
    assert stop_timing(fixed, 6, wide, 9.0, 9.0) == "steps" and stop_timing(fixed, 5, wide, 9.0, 9.0) is None


def test_a_backend_that_runs_eagers_kernels_has_no_break_even(store):
    """hf:bert with backend=eager showed "Break-even 902 steps" beside the words "not a compiled speedup": a stored run
    of eager or aot_eager loses its break-even when the store is opened, and the figures give none for such a run."""
    from ui.words import run_words

    stored = {"device": "cpu", "variants": ["eager", "compiled"], "speedup": 1.08, "speedup_low": 1.0,
              "compile_s": 3.0, "eager_steps_per_s": 40.0, "unavailable": {}}
    stored["breakeven_steps"] = figures.breakeven_steps(3.0, 1 / 40.0, 1.08)  # what its headline gives
    eager = insert_run(store, Experiment(model="captioner", backend="eager"))
    store.finish(eager, result=stored, env={})
    inductor = insert_run(store, Experiment(model="captioner"))
    store.finish(inductor, result=stored, env={})
    assert stored_results.upgrade(store) == 1
    r = store.get(eager).result
    assert r["breakeven_steps"] is None and r["eager_kernels_only"] is True
    assert r["unavailable"]["breakeven_steps"] == figures.EAGER_KERNELS_NO_PAYBACK
    assert store.get(inductor).result["breakeven_steps"] == stored["breakeven_steps"]  # Inductor's keeps its own
    assert figures.headline_breakeven(r) is None and run_words.payback_words(r) is None
    (tile,) = [t for t in run_words.headline_tiles(r)[0] if "Break-even" in t["label"]]
    assert tile["value"] == "n/a"


def test_an_old_record_is_rewritten_with_the_paired_speedup_recomputed_from_its_blocks(store):
    blocks = drifting_rounds(5, drift=host_cpu_drift)
    old = {"device": "cuda", "variants": ["eager", "compiled"], "speedup": old_headline(blocks),
           "speedup_min": 1.1, "speedup_max": 1.9, "blocks": blocks, "eager_spread_pct": 40.0,
           "eager_steps_per_s_min": 70.0, "eager_steps_per_s_max": 130.0}
    run_id = insert_run(store, Experiment(model="captioner"))
    store.finish(run_id, result=old, env={})
    assert store.get(run_id).result == old  # the store returns what it keeps; the lab rewrites it once
    assert stored_results.upgrade(store) == 1 and stored_results.upgrade(store) == 0
    rec = store.get(run_id)
    expected = paired.estimate(paired.round_ratios(blocks["eager"], blocks["compiled"]))
    assert rec.result["speedup"] == pytest.approx(expected.speedup)
    assert rec.result["speedup_of_medians"] == pytest.approx(old["speedup"])
    assert rec.result["speedup_low"] == pytest.approx(expected.low) and rec.result["paired_rounds"] == 5
    assert "recomputed" in figures.speedup_words(rec.result)
    assert store.dataframe().loc[0, "speedup"] == pytest.approx(expected.speedup)
    # A record without blocks (an eager-only run, or a hand-made one) opens as it was stored, and so does one whose
    # only round was stored as 0 s (walls were rounded to 0.1 ms).
    assert figures.upgrade_result({"speedup": 1.7}) == {"speedup": 1.7}
    zero = {"speedup": 2.0, "variants": ["eager", "compiled"],
            "blocks": {"eager": [[1, 0.0001]], "compiled": [[1, 0.0]]}}
    assert figures.upgrade_result(zero) == zero


def test_noisy_is_the_intervals_width_not_a_variants_spread():
    steady = {"variants": ["eager", "compiled"], "speedup": 1.4, "speedup_low": 1.37, "speedup_high": 1.43,
              "speedup_pm_pct": 2.1, "paired_rounds": 12, "eager_spread_pct": 45.0, "compiled_spread_pct": 40.0,
              "eager_steps_per_s_min": 70.0, "eager_steps_per_s_max": 130.0}
    assert figures.noise_reasons(steady) == []  # the machine moved, both variants with it: the ratio held
    wide = dict(steady, speedup_low=1.1, speedup_high=1.8, speedup_pm_pct=28.6)
    assert figures.noise_reasons(wide) == [
        # both sides of a lopsided interval, and the one level and threshold every page names
        "the speedup's 95% interval is too wide to trust: 1.10–1.80x (−21% / +29%, beyond the ± 5% a run aims for) "
        "over 12 paired rounds"]
    eager_only = {"variants": ["eager"], "eager_spread_pct": 45.0, "eager_steps_per_s_min": 70.0,
                  "eager_steps_per_s_max": 130.0}
    assert "disagree by 45%" in figures.noise_reasons(eager_only)[0]
    stalled = dict(steady, compiled_slow_time_pct=12.0, compiled_slow_steps=3, busy_cores=1.2)
    assert len(figures.noise_reasons(stalled)) == 2  # the other reasons stay


def test_two_runs_are_told_apart_only_when_their_intervals_do_not_overlap():
    a = {"speedup_low": 1.30, "speedup_high": 1.40}
    assert figures.told_apart(a, {"speedup_low": 1.38, "speedup_high": 1.50}) is False
    assert figures.told_apart(a, {"speedup_low": 1.45, "speedup_high": 1.50}) is True
    assert figures.told_apart(a, {"speedup": 1.5}) is None


def test_a_block_on_a_machine_that_slows_mid_block_stops_at_its_deadline():
    from tcore.host.power import PowerMeter
    from tcore.worker.timing import time_block
    from tests.helpers import StepClock

    clock, calls = StepClock(), []

    def step():  # sized for 5 ms steps; from the third on the machine runs twenty times slower
        calls.append(1)
        clock.advance(0.005 if len(calls) <= 2 else 0.1)

    block = time_block(step, 40, "cpu", PowerMeter("none"), deadline_s=0.3, clock=clock)
    # steps end at 0.005, 0.01, 0.11, 0.21: still within 0.3 s, so a fifth starts; it ends at 0.31, past it
    assert block.steps == len(block.step_s) == len(calls) == 5  # not 40 steps of 0.1 s
    assert block.wall_s == pytest.approx(0.31) and sum(block.step_s) == pytest.approx(block.wall_s)
    assert time_block(step, 3, "cpu", PowerMeter("none"), clock=clock).steps == 3  # no deadline: every step asked


def test_the_command_line_reads_an_old_record_in_todays_figures(store, capsys):
    """The store returns results as it keeps them: a command (as the app's server, tcore.lab.api.serve) has the
    results stored before paired rounds rewritten first, so that no one reads the medians' ratio as the headline."""
    import json

    from tcore.cli import main

    blocks = drifting_rounds(5, drift=host_cpu_drift)
    old = {"device": "cuda", "variants": ["eager", "compiled"], "speedup": old_headline(blocks), "blocks": blocks}
    run_id = insert_run(store, Experiment(model="captioner"))
    store.finish(run_id, result=old, env={})
    assert main(["show", run_id, "--json", "--db", str(store.path)]) == 0
    shown = json.loads(capsys.readouterr().out)["result"]
    assert shown["speedup_of_medians"] == pytest.approx(old["speedup"]) and shown["speedup_recomputed"]
