"""Rounds that the host disturbed (tcore.figures.paired.undisturbed): a host-bound loop on a lent machine runs at its
floor and in bursts far slower, and only ever slower; the headline is the clean rounds', and a run disturbed
throughout states an interval that reaches the ratio of its variants' fastest blocks (BENCHMARKS.md)."""
import pytest

from tcore.figures import paired, rerun


def _blocks(step_ms, steps=36):
    """Blocks as stored, [steps, wall_s], from each block's milliseconds a step."""
    return [[steps, steps * ms / 1e3] for ms in step_ms]


# ResNet-50's GPU default on an H100, solo (bench/results/settle-ab-h100.json, resnet50-settle0-2): eager at 5.5 ms a
# step but for a burst of six blocks at 6.8-7.8 ms; compiled at 3.30 ms with small bursts
EAGER = [5.58, 5.66, 5.54, 7.78, 6.98, 6.77, 6.78, 6.84, 7.35, 5.54, 6.04, 5.8, 5.55, 5.65, 5.54, 5.54, 5.85, 5.55,
         5.54, 5.56]
COMPILED = [3.42, 3.35, 3.3, 3.3, 3.46, 3.45, 3.35, 3.46, 3.55, 3.37, 3.31, 3.3, 3.31, 3.36, 3.31, 3.3, 3.37, 3.34,
            3.3, 3.38]


def test_a_burst_of_slow_blocks_is_left_out_and_the_headline_is_the_undisturbed_rounds():
    rounds = paired.undisturbed(_blocks(EAGER), _blocks(COMPILED))
    everything = paired.estimate(paired.round_ratios(_blocks(EAGER), _blocks(COMPILED)))
    clean = paired.estimate(rounds.ratios)
    assert rounds.left_out == 8 and len(rounds.ratios) == 12 and rounds.floor is None
    assert clean.speedup == pytest.approx(5.55 / 3.31, rel=0.01)  # both at their floors
    assert clean.half_width_pct < 3 < 10 < everything.half_width_pct  # the burst made the rounds read ± 16%


def test_a_steady_run_keeps_every_round_and_so_does_a_short_one():
    steady = paired.undisturbed(_blocks([5.5, 5.52, 5.49, 5.51] * 3), _blocks([3.3, 3.31] * 6))
    assert steady.left_out == 0 and len(steady.ratios) == 12 and steady.floor is None
    # a slow block within 5% of the fastest is the loop's own noise, not the host's
    assert paired.undisturbed(_blocks([5.5, 5.7] * 6), _blocks([3.3] * 12)).left_out == 0
    one = paired.undisturbed(_blocks([5.5]), _blocks([3.3]))
    assert one.ratios == [pytest.approx(5.5 / 3.3)] and one.left_out == 0 and one.floor is None


def test_a_run_disturbed_throughout_keeps_every_round_and_reaches_the_fastest_blocks_ratio():
    # resnet50-settle0-1: one eager block at the floor in seventeen, the median 1.94x
    eager = [6.98, 5.99, 5.85, 6.94, 6.74, 6.17, 5.54, 6.75, 7.58, 6.96, 7.42, 6.7, 6.89, 7.47, 7.33, 7.05, 8.1]
    compiled = [3.4, 3.31, 3.53, 3.7, 3.58, 3.78, 3.32, 3.31, 3.31, 3.31, 3.69, 3.34, 4.16, 3.46, 3.77, 3.81, 3.7]
    rounds = paired.undisturbed(_blocks(eager), _blocks(compiled))
    assert rounds.left_out == 0 and len(rounds.ratios) == 17
    assert rounds.floor == pytest.approx(5.54 / 3.31)
    machine = _Spread()
    r = rerun.interval(rounds.ratios, device="cuda", host_bound=True, machine=machine, floor=rounds.floor)
    assert r.speedup > 1.85 and r.low == pytest.approx(rounds.floor)  # stretched down to 1.67x, where reruns read
    assert "fastest blocks (1.67x" in r.basis()
    plain = rerun.interval(rounds.ratios, device="cuda", host_bound=True, machine=machine)
    assert plain.low > 1.7 and plain.high == r.high  # without it the interval missed the 1.67x its reruns read
    # a floor the interval already holds changes nothing and is not said
    inside = rerun.interval(rounds.ratios, device="cuda", host_bound=True, machine=machine, floor=r.speedup)
    assert inside.floor is None and (inside.low, inside.high) == (plain.low, plain.high)


class _Spread:
    """A machine whose reruns of host-bound runs showed them steady (σ 0.5% beyond their rounds)."""
    sigma_log, scatter, within_log, dof, runs, settings = 0.005, 0.005, 0.0, 12, 13, 3


def test_the_restated_interval_leaves_the_same_rounds_out_and_says_so():
    result = {"device": "cuda", "speedup": 1.69, "blocks": {"eager": _blocks(EAGER), "compiled": _blocks(COMPILED)}}
    restated = rerun.restate(result, [1.66, 1.67, 1.68], True, _Spread())
    assert restated["speedup_rounds_left_out"] == 8
    assert restated["speedup"] == pytest.approx(5.55 / 3.31, rel=0.01)
    assert restated["speedup_pm_pct"] < 5  # ± 16% with the burst counted
    words = restated["speedup_interval_words"]
    assert "undisturbed rounds" in words and "8 rounds left out" in words and "5% slower" in words
    assert paired.from_record(result).speedup == pytest.approx(restated["speedup"])  # one rule wherever recomputed
