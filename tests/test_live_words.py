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


def test_the_compile_step_says_what_is_left_from_an_earlier_compile_of_the_setting_here(store):
    """The stepper showed "Compiling" with no word of how long: a first compile of a setting says there is no estimate
    yet; a later one counts down from the newest earlier compile of the setting here, from the same kind of cache."""
    from tcore.experiment.spec import Experiment
    from tcore.lab.rerun_outlook import earlier_compile_s, machine_env
    from tests.helpers import insert_run
    from ui.panels.live import compile_left_words

    exp = Experiment(model="captioner", preset="tiny", device="cpu", batch_size=4)
    assert earlier_compile_s(exp, store, "cpu") is None
    assert compile_left_words(None, 5.0).startswith("No estimate yet: the first compile of this setting here.")

    def compiled(spec: Experiment, compile_s: float) -> None:
        run_id = insert_run(store, spec)
        store.finish(run_id, env=machine_env("cpu"), result={"device": "cpu", "speedup": 1.2, "compile_s": compile_s})

    compiled(exp.replace(batch_size=8), 30.0)  # another batch: used while none at this one
    assert earlier_compile_s(exp, store, "cpu") == (30.0, False)
    compiled(exp.replace(cache="warm"), 3.0)  # a warm compile says nothing of a cold one
    compiled(exp, 40.0)
    compiled(exp, 24.0)  # the newest
    assert earlier_compile_s(exp, store, "cpu") == (24.0, True)
    assert earlier_compile_s(exp.replace(cache="warm"), store, "cpu") == (3.0, True)
    assert (compile_left_words((24.0, True), 10.0)
            == "About 14 s left (an earlier run of this setting compiled in 24 s).")
    assert "at another batch size compiled in 30 s" in compile_left_words((30.0, False), 2.0)
    assert compile_left_words((24.0, True), 30.0).startswith(
        "Longer than an earlier run of this setting, which compiled in 24 s")
