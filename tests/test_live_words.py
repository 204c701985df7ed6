"""The live view's words (ui.panels.live): what each phase does, and how a run's timed stage is said to end."""
from types import SimpleNamespace

import pytest

from tcore.experiment.protocol import PHASES
from tcore.worker.pacing import stop_timing
from tests.helpers import QUICK
from ui.panels import live


@pytest.mark.parametrize("phase", PHASES)
def test_every_phase_the_worker_says_has_its_own_explanation(phase):
    run = SimpleNamespace(exp=QUICK.replace(timed_steps=None))
    assert live.phase_explain(run, phase) != live.phase_explain(run, None)  # not the worker-start text


def test_the_measuring_words_say_the_timed_seconds_can_stop_a_run_before_its_fewest_rounds():
    exp = QUICK.replace(timed_steps=None, rounds=6, timed_s=1.0)
    # As the worker decides: 3 rounds of 0.3 s blocks spend 0.9 s, and a fourth would pass 1.0 s, so it stops at 3.
    assert stop_timing(exp, 3, [1.1, 1.2, 1.0], spent_s=0.9, block_s=0.3) == "budget"
    words = live.phase_explain(SimpleNamespace(exp=exp), "measuring")
    assert "at least" not in words and "fewer rounds" in words
    fixed = live.phase_explain(SimpleNamespace(exp=QUICK), "measuring")  # timed by steps: exactly its rounds
    assert fixed.startswith(f"{QUICK.rounds} rounds") and "as set" in fixed


def test_a_generation_run_is_said_to_time_all_its_rounds():
    """DecodeRounds runs every one of `rounds` before it looks at the seconds: there "at least" is true."""
    exp = QUICK.replace(task="generate", timed_steps=None, prompt_len=8, new_tokens=8, rounds=4)
    words = live.phase_explain(SimpleNamespace(exp=exp), "measuring")
    assert "(at least 4)" in words
