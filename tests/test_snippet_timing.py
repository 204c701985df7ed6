"""Copy as code prints the effect: the snippet times eager against compiled in paired rounds, as the lab does, and
prints the speedup with its interval."""
import math
import random

import pytest

from tcore.experiment.spec import Experiment
from tcore.export.snippet import code_for
from tcore.figures import paired

TINY = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu")


def snippet_function(code: str, name: str):
    """A function the snippet defines, as the snippet defines it."""
    source = code[code.index(f"def {name}("):]
    source = source[:source.index("\n\n\n")]
    scope = {"math": math}
    exec(source, scope)
    return scope[name]


def test_the_snippets_interval_is_the_labs():
    interval = snippet_function(code_for(TINY.to_dict(), "cpu"), "median_and_interval")
    rng = random.Random(3)
    for n in (6, 7, 10, 17, 30):
        ratios = [1.4 * math.exp(rng.gauss(0, 0.05)) for _ in range(n)]
        est = paired.estimate(ratios)
        assert interval(ratios) == pytest.approx((est.speedup, est.low, est.high))


def test_the_snippet_times_in_synchronized_alternating_rounds_on_a_gpu():
    code = code_for(TINY.to_dict(), "cuda")
    assert "def sync():\n    torch.cuda.synchronize()" in code
    assert "order = (True, False) if len(rounds) % 2 == 0 else (False, True)" in code
    assert "torch.compiler.set_stance('force_eager' if eager else 'default')" in code

# The copied code's printed speedup and interval, from a real run of it: test_snippet.py's verbatim run.
