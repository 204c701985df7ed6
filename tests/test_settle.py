"""The untimed blocks before the timed rounds (tcore.worker.rounds.StepRounds._settle, tcore.worker.paired.steady):
the timed rounds begin once each variant's blocks have stopped speeding up, as host-bound loops on an H100 did over
their first seconds (BENCHMARKS.md), and not later than the settle seconds allow."""
import time
from types import SimpleNamespace

from tcore.experiment.spec import Experiment
from tcore.figures import paired
from tcore.host.power import PowerMeter
from tcore.worker import pacing
from tcore.worker.rounds import StepRounds


def test_blocks_are_steady_once_their_last_few_agree_and_not_while_they_ramp():
    assert not paired.steady([1.0, 1.0, 1.0])  # too few to tell
    assert paired.steady([1.3, 1.0, 1.005, 0.998, 1.002])  # a slow first block, then steady
    assert not paired.steady([1.06, 1.04, 1.02, 1.0])  # 2% a block: a ramp, though each step from the last is small
    assert not paired.steady([1.0, 1.0, 1.0, 1.05])  # a late change
    assert pacing.settle_seconds(Experiment(device="cpu", timed_s=2.0)) == 1.0  # at most half the timed seconds
    assert pacing.settle_seconds(Experiment(device="cuda", timed_s=4.0)) == paired.SETTLE_S
    assert pacing.settle_seconds(Experiment(device="cpu", timed_steps=12)) == 0.0  # a fixed, quick measurement


def _settle(step, exp):
    rounds = SimpleNamespace(exp=exp, device="cpu", meter=PowerMeter("no meter in this test"),
                             result=SimpleNamespace(details={}, notes=[]))
    step_s = {"eager": 0.002, "compiled": 0.002}
    StepRounds._settle(rounds, [("eager", step, [None]), ("compiled", lambda _: time.sleep(0.001), [None])],
                       step_s, 1, None)
    return rounds.result, step_s


def test_the_timed_rounds_wait_for_a_ramping_variant_and_size_their_first_block_from_its_steady_step():
    exp = Experiment(device="cpu", timed_s=4.0, round_s=0.05)
    begun = time.perf_counter()

    def ramping(_):  # 3 ms a step, falling to 1 ms over its first 0.6 s, then steady: a host that speeds up
        time.sleep(max(0.003 - 0.002 * (time.perf_counter() - begun) / 0.6, 0.001))

    result, step_s = _settle(ramping, exp)
    eager = result.details["settle"]["eager"]
    # it ran past the ramp (or to its limit): the rounds never begin on blocks that are still speeding up
    assert eager["s"] >= 0.6 * 0.8 or eager["s"] >= pacing.settle_seconds(exp)
    assert eager["change_pct"] < -20  # the first block's steps against the last's
    assert eager["s"] <= pacing.settle_seconds(exp) + 3 * exp.round_s  # bounded: a block more at most
    assert step_s["eager"] < 0.0025  # the first timed block is sized from the settled step, not the ramp's first


def test_steady_variants_settle_in_a_few_blocks():
    result, _ = _settle(lambda _: time.sleep(0.002), Experiment(device="cpu", timed_s=4.0, round_s=0.05))
    for name in ("eager", "compiled"):
        done = result.details["settle"][name]
        assert done["blocks"] >= paired.SETTLE_BLOCKS and done["s"] <= pacing.settle_seconds(
            Experiment(device="cpu", timed_s=4.0)) + 3 * 0.05
    assert not result.notes or "had not settled" in result.notes[0]  # a busy machine may leave it unsettled, said
