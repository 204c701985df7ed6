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


def test_the_snippet_stops_where_the_run_stops_when_its_seconds_run_out():
    """The timed seconds stop the copied loop as they stop the run (tcore.worker.pacing.stop_timing): with fewer
    rounds than the fewest that can settle, not after 'at least 6 rounds'. The steps are a stub: 10 ms eager, 8 ms
    compiled, each call a little off; under 6 rounds the interval cannot settle, so the seconds decide."""
    from tcore.worker.pacing import stop_timing

    exp = TINY.replace(timed_s=1.0, round_s=0.3)
    code = code_for(exp.to_dict(), "cpu")
    loop = code[code.index("per_step = {"):code.index("eager_ms, compiled_ms")]
    rng = random.Random(5)
    scope = {"median_and_interval": snippet_function(code, "median_and_interval"), "batches": [None],
             "seconds_per_step": lambda n, eager: (0.010 if eager else 0.008) * math.exp(rng.gauss(0, 0.02))}
    exec(loop, scope)
    done = len(scope["rounds"])
    assert done < paired.MIN_ROUNDS  # about 0.3 s a round: the fourth would pass 1.05 s
    blocks = [max(r[e] * scope["steps"][e] for e in (True, False)) for r in scope["rounds"]]
    ratios = [r[True] / r[False] for r in scope["rounds"]]
    assert stop_timing(exp, done, ratios, sum(blocks), blocks[-1]) == "budget"
    assert stop_timing(exp, done - 1, ratios[:-1], sum(blocks[:-1]), blocks[-2]) is None  # not a round sooner


def test_the_snippet_says_no_interval_for_too_few_rounds_as_the_lab_does():
    """Walk 6: the copied code of a one-round run printed 'interval 1.29-1.29x', a range of one point, where the
    lab's own page says the run has no interval."""
    import contextlib
    import io

    exp = TINY.replace(timed_s=0.2, round_s=0.3)  # the seconds allow one round
    code = code_for(exp.to_dict(), "cpu")
    tail = code[code.index("per_step = {"):]
    tail = tail[:tail.index("\n\n")] if "\n\n" in tail else tail
    scope = {"median_and_interval": snippet_function(code, "median_and_interval"), "batches": [None],
             "seconds_per_step": lambda n, eager: 0.010 if eager else 0.008}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(tail, scope)
    assert len(scope["rounds"]) < 3
    said = out.getvalue()
    assert "no interval: 1 paired round(s), and an interval takes 3" in said and "interval 1.25-1.25x" not in said
