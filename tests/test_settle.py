"""The untimed blocks before the timed rounds (tcore.worker.rounds.StepRounds._settle, tcore.figures.paired.steady):
the timed rounds begin once each variant's blocks have stopped speeding up, as host-bound loops on an H100 did over
their first seconds (BENCHMARKS.md), and not later than the settle seconds allow."""
import functools
from types import SimpleNamespace

import pytest

from tcore.experiment.spec import Experiment
from tcore.figures import paired
from tcore.host.power import PowerMeter
from tcore.worker import pacing
from tcore.worker import rounds as rounds_module
from tcore.worker.rounds import DecodeRounds, StepRounds
from tcore.worker.timing import time_block
from tests.helpers import StepClock


def test_blocks_are_steady_once_their_last_few_agree_and_not_while_they_ramp():
    assert not paired.steady([1.0, 1.0, 1.0])  # too few to tell
    assert paired.steady([1.3, 1.0, 1.005, 0.998, 1.002])  # a slow first block, then steady
    assert not paired.steady([1.06, 1.04, 1.02, 1.0])  # 2% a block: a ramp, though each step from the last is small
    assert not paired.steady([1.0, 1.0, 1.0, 1.05])  # a late change
    assert pacing.settle_seconds(Experiment(timed_s=2.0), "cuda") == 1.0  # at most half the timed seconds
    assert pacing.settle_seconds(Experiment(timed_s=4.0), "cuda") == paired.SETTLE_S
    assert pacing.settle_seconds(Experiment(timed_steps=12), "cuda") == 0.0  # a fixed, quick measurement
    assert pacing.settle_seconds(Experiment(timed_s=4.0), "cpu") == 0.0  # GPU runs only, where the ramp was seen


def test_the_switch_turns_settling_off_to_measure_what_it_does(monkeypatch):
    monkeypatch.setenv(pacing.SETTLE_ENV, "0")
    assert pacing.settle_seconds(Experiment(timed_s=4.0), "cuda") == 0.0


def _rounds(kind, exp):
    rounds = kind.__new__(kind)  # the phases' state that settling reads, without a worker around it
    rounds.exp, rounds.device, rounds.meter = exp, "cpu", PowerMeter("no meter in this test")
    rounds.result = SimpleNamespace(details={}, notes=[])
    return rounds


@pytest.fixture(autouse=True)
def _settling_on(monkeypatch):
    """Settle as a GPU run does (the steps here run on the host clock), whatever the shell says (one that ran the
    settle-ab sitting row may have it off)."""
    monkeypatch.delenv(pacing.SETTLE_ENV, raising=False)
    monkeypatch.setattr(rounds_module, "settle_seconds", lambda exp, device: pacing.settle_seconds(exp, "cuda"))


def _settle(step_seconds, exp, monkeypatch):
    """StepRounds._settle over an eager step that takes step_seconds(now) and a compiled one of 1 ms, timed on a
    clock that moves only by the steps' own seconds: the same figures on a quiet machine and a loaded one."""
    clock = StepClock()
    monkeypatch.setattr(rounds_module, "time_block", functools.partial(time_block, clock=clock))
    rounds = _rounds(StepRounds, exp)
    step_s = {"eager": step_seconds(0.0), "compiled": 0.001}
    StepRounds._settle(rounds, [("eager", lambda _: clock.advance(step_seconds(clock())), [None]),
                                ("compiled", lambda _: clock.advance(0.001), [None])], step_s, 1, None)
    return rounds.result, step_s


def test_the_timed_rounds_wait_for_a_ramping_variant_and_size_their_first_block_from_its_steady_step(monkeypatch):
    exp = Experiment(device="cpu", timed_s=4.0, round_s=0.05)

    def ramping(now):  # 3 ms a step, falling to 1 ms over its first 0.6 s, then steady: a host that speeds up
        return max(0.003 - 0.002 * now / 0.6, 0.001)

    result, step_s = _settle(ramping, exp, monkeypatch)
    eager = result.details["settle"]["eager"]
    assert eager["steady"] and eager["s"] >= 0.6  # it ran past the ramp: the rounds never begin while it speeds up
    assert eager["change_pct"] < -50  # the first four blocks' steps against the last four's
    assert step_s["eager"] == pytest.approx(0.001)  # the first timed block is sized from the settled step
    assert not result.notes


def test_steady_variants_settle_in_four_blocks_and_a_variant_that_keeps_moving_stops_at_its_seconds(monkeypatch):
    exp = Experiment(device="cpu", timed_s=4.0, round_s=0.05)
    result, _ = _settle(lambda now: 0.002, exp, monkeypatch)
    assert [result.details["settle"][v]["blocks"] for v in ("eager", "compiled")] == [paired.SETTLE_BLOCKS] * 2
    assert not result.notes
    # a host that slows down all along: stopped at the settle seconds (a block more at most), and said
    slowing, _ = _settle(lambda now: 0.002 * (1 + now), exp, monkeypatch)
    eager = slowing.details["settle"]["eager"]
    most_s = pacing.settle_seconds(exp, "cuda")
    assert not eager["steady"] and most_s <= eager["s"] <= most_s + 0.1
    assert slowing.details["settle"]["compiled"]["blocks"] == paired.SETTLE_BLOCKS  # the steady one stopped early
    assert "had not settled" in slowing.notes[0] and "eager +" in slowing.notes[0]


class _Generations:
    """Generations whose decode speeds up for the first `ramp` of them, as Llama-3.2-1B's eager decode did on an H100
    (1.05 -> 0.95 s a generation of 64 tokens over six), then holds."""

    def __init__(self, decode_s, ramp=0, new=65):
        self.new, self.made, self._decode_s, self._ramp = new, 0, decode_s, ramp

    def run(self):
        self.made += 1
        slower = 1 + 0.05 * max(self._ramp - self.made, 0)
        return SimpleNamespace(decode_s=self._decode_s * slower, total_s=self._decode_s * slower + 0.01)


def test_generations_settle_before_the_timed_rounds_and_the_last_one_sizes_the_blocks():
    rounds = _rounds(DecodeRounds, Experiment(device="cpu", task="generate", timed_s=4.0))
    eager, compiled = _Generations(0.1, ramp=6), _Generations(0.01)
    per_block = rounds._settle([("eager", eager), ("compiled", compiled)])
    settle = rounds.result.details["settle"]
    assert eager.made >= 6 + paired.SETTLE_BLOCKS - 1 and settle["eager"]["steady"]  # past the ramp, then four alike
    assert settle["eager"]["change_pct"] < -10  # the first four blocks against the last four
    # blocks of generations that fill a round (0.2 s), sized from the first as before: 0.135 s eager, 0.02 compiled
    assert per_block == {"eager": 1, "compiled": 10} and compiled.made == 1 + 10 * (paired.SETTLE_BLOCKS - 1)
    # a generation longer than the settle seconds runs once, as the one that sized the blocks before
    slow = _rounds(DecodeRounds, Experiment(device="cpu", task="generate", timed_s=4.0))
    long = _Generations(5.0, ramp=6)
    slow._settle([("eager", long)])
    assert long.made == 1 and not slow.result.notes  # one block says nothing of a trend
    # a fixed, quick measurement (timed_steps) sizes from one generation each and keeps no settle record
    quick = _rounds(DecodeRounds, Experiment(device="cpu", task="generate", timed_steps=6))
    one = _Generations(0.1, ramp=6)
    quick._settle([("eager", one)])
    assert one.made == 1 and "settle" not in quick.result.details
