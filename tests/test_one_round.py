"""A run of one paired round: its speedup is one ratio, with no interval of its own, and the page says so and how to
get one, whatever interval the figures stored beside it."""
import copy

import pytest

from tests.helpers import recorded_run
from ui.words import run_words

# What the walk met: "95% interval for a rerun 0.11-0.16x" on a run of one round, made of the spread between fresh
# processes alone, and "Timing longer will not narrow it" under it.
BETWEEN_ONLY = "a single round (no interval of its own) and a documented default spread between fresh processes"


def one_round(**more) -> dict:
    r = copy.deepcopy(recorded_run()["result"])
    r.update({"speedup": 0.13, "speedup_low": 0.11, "speedup_high": 0.16, "speedup_pm_pct": 23.0,
              "speedup_confidence_pct": 95.0, "paired_rounds": 1, "speedup_rounds_pm_pct": None,
              "speedup_drift_pct": None, "speedup_between_pct": 10.0, "speedup_interval_words": BETWEEN_ONLY,
              "speedup_of_medians": 0.13, "eager_samples_per_s": 100.0, "compiled_samples_per_s": 13.0,
              "blocks": {"eager": [[4, 0.16]], "compiled": [[4, 1.23]]}, **more})
    return r


@pytest.mark.parametrize("stored", [one_round(), one_round(speedup_low=None, speedup_high=None,
                                                            speedup_pm_pct=None, speedup_confidence_pct=None)])
def test_one_round_states_no_interval_and_how_to_get_one(stored):
    """Whether the figures keep an interval made of the spread between processes or none, the words are the same."""
    (speedup, _, _), _ = run_words.headline_tiles(stored)
    assert speedup["delta"] == "1 round: no interval" and speedup["delta_color"] == "orange"
    how = run_words.how_words(stored)
    assert "interval" not in how.replace("one round gives no interval", ""), how
    noise = run_words.noise_words(stored)
    assert noise.startswith("**One round: this speedup has no interval of its own.**")
    assert "time more rounds" in noise and "Rounds at 6" in noise
    assert "0.11" not in how + noise + speedup["help"] and "Timing longer will not narrow it" not in noise


def test_too_few_rounds_are_never_told_that_timing_longer_will_not_help():
    few = {"speedup": 1.2, "speedup_low": 0.9, "speedup_high": 1.6, "speedup_pm_pct": 33.0, "paired_rounds": 3,
           "speedup_confidence_pct": 75.0, "speedup_rounds_pm_pct": 1.0, "speedup_between_pct": 10.0}
    words = run_words.noise_words(few)
    assert "Timing longer will not narrow it" not in words
    assert "It has 3 rounds, fewer than the 6 a 95% interval of its own needs" in words
    many = {**few, "paired_rounds": 12, "speedup_confidence_pct": 96.1}  # rounds agree, the processes do not
    assert "Timing longer will not narrow it" in run_words.noise_words(many)


def test_one_round_says_why_it_has_no_interval_once():
    """The run's stored reason ("1 round cannot give an interval ...") repeats the paragraph above it: it is said once,
    and a reason of another kind (a busy machine) still follows it."""
    from tcore.figures.rerun import MIN_INTERVAL_ROUNDS

    why = (f"1 round cannot give an interval of the run's own: so few say nothing of how far the next would land. Run "
           f"it with {MIN_INTERVAL_ROUNDS} rounds or more")
    stored = one_round(speedup_low=None, speedup_high=None, speedup_pm_pct=None, speedup_confidence_pct=None,
                       speedup_no_interval=why)
    noise = run_words.noise_words(stored)
    assert noise.startswith(run_words.ONE_ROUND)
    assert noise.count("interval") == run_words.ONE_ROUND.count("interval") and "cannot give" not in noise, noise
    busy = run_words.noise_words({**stored, "busy_cores": 3.0})
    assert busy.count("interval") == noise.count("interval") and "other processes kept 3.0 CPU cores busy" in busy
