"""The headline's interval covers a rerun, not only the rounds of its own run: tcore.figures.rerun's arithmetic on runs
with a known shift between processes, the drift between a run's halves, the floor learned from the store's history or
the default, the host-bound verdict on recorded figures, and the history of the same setting (query, words, dots)."""
import math
import random
import statistics

import pytest

from tcore import figures
from tcore.analysis import history, report
from tcore.experiment.spec import Experiment
from tcore.figures import paired, rerun
from tcore.lab.run.recording import with_history
from tests.helpers import insert_run


def run_rounds(rng: random.Random, shift: float, n: int = 12, noise: float = 0.01, center: float = 1.5) -> list[float]:
    """One fresh process: its rounds' ratios around center·exp(shift), the shift fixed for the whole process."""
    return [center * math.exp(shift + rng.gauss(0, noise)) for _ in range(n)]


def coverage(intervals: list[tuple[float, float]], target: float) -> float:
    return sum(lo <= target <= hi for lo, hi in intervals) / len(intervals)


def test_the_interval_covers_reruns_where_the_rounds_alone_do_not():
    """Thirty fresh processes of one setting, each shifted by σ 6% for its whole life (core, clock, allocator),
    their rounds steady within 1%. The rounds' own intervals miss the median of all runs in most of them; the
    rerun interval, learned from each run's earlier runs, holds it in at least 90%."""
    rng = random.Random(7)
    runs = [run_rounds(rng, rng.gauss(0, 0.06)) for _ in range(30)]
    headlines = [paired.estimate(r).speedup for r in runs]
    median = statistics.median(headlines)
    within = [(e.low, e.high) for e in map(paired.estimate, runs)]
    restated = [rerun.interval(r, device="cuda", host_bound=True, history=headlines[:i]) for i, r in enumerate(runs)]
    assert coverage(within, median) < 0.4
    assert coverage([(r.low, r.high) for r in restated], median) >= 0.9
    # From the third earlier run on, the spread is learned: σ near the 6% the processes really moved by.
    learned = [r for r in restated if r.between_source == "history"]
    assert len(learned) == 27 and 4 < statistics.median(r.between_pct for r in learned) < 12
    assert all(r.confidence == 0.95 for r in restated)


def test_with_no_history_the_default_floor_covers_the_issues_resnet50_reruns():
    """ResNet-50's GPU default in fresh processes on an H100 (recorded): the headline and the interval each run
    stated from its rounds; eager kept the GPU busy 78-93% (host-bound). None of the three stated intervals holds
    the median of the six runs; the rerun interval with the default host-bound floor holds it in all three."""
    stated = [(1.652, 1.643, 1.682), (2.027, 1.952, 2.093), (1.783, 1.736, 1.904)]
    median_of_six = statistics.median([1.652, 2.027, 1.783, 1.700, 1.736, 1.734])
    for speedup, low, high in stated:
        ratios = [low, high, speedup, speedup] * 3  # 12 rounds whose order-statistics interval is the stated one
        within = paired.estimate(ratios)
        assert within.low == pytest.approx(low) and within.high == pytest.approx(high)
        assert not within.low <= median_of_six <= within.high
        r = rerun.interval(ratios, device="cuda", host_bound=True)
        assert r.between_source == "default"
        assert r.between_pct == pytest.approx(rerun.FALLBACK_BETWEEN_PCT["cuda-host-bound"])
        assert r.low <= median_of_six <= r.high
        assert r.speedup == pytest.approx(speedup) and r.pm_pct > within.half_width_pct


def test_parts_of_the_interval_drift_history_and_device():
    steady = [1.4, 1.42, 1.38, 1.41, 1.39, 1.4, 1.41, 1.39]
    drifting = [1.30, 1.32, 1.34, 1.36, 1.64, 1.66, 1.68, 1.70]  # the ratio moved while the run ran
    a = rerun.interval(steady, device="cuda", history=[1.4] * 5)
    b = rerun.interval(drifting, device="cuda", history=[1.4] * 5)
    shuffled = rerun.interval(drifting[::2] + drifting[1::2], device="cuda", history=[1.4] * 5)
    assert a.drift_pct < 2 and b.drift_pct > 20 and b.pm_pct > shuffled.pm_pct
    assert "drift between the run's halves" in b.basis()
    # Learned when there are MIN_HISTORY earlier runs, never below MIN_BETWEEN_PCT; the default otherwise.
    assert rerun.between_sigma([1.5, 1.5, 1.5], "cuda", False)[1:] == ("history", 3)
    # Three earlier runs that agree exactly do not shrink the spread to nothing: the default still weighs in.
    default = math.log1p(rerun.FALLBACK_BETWEEN_PCT["cuda"] / 100)
    agreeing = rerun.between_sigma([1.5, 1.5, 1.5], "cuda", False)[0]
    assert default * math.sqrt(rerun.PRIOR_RUNS / (rerun.PRIOR_RUNS + 2)) < agreeing
    # Many earlier runs that agree within 1% do bring it down towards what they show.
    many = rerun.between_sigma([1.5 * (1 + 0.01 * ((i % 3) - 1)) for i in range(40)], "cuda", True)[0]
    assert many < math.log1p(rerun.FALLBACK_BETWEEN_PCT["cuda-host-bound"] / 100) / 2
    assert rerun.between_sigma([1.5, 1.6], "cuda", False)[1:] == ("default", 0)
    cpu, gpu, bound = (rerun.interval(steady, device=d, host_bound=h) for d, h in
                       (("cpu", False), ("cuda", False), ("cuda", True)))
    assert gpu.pm_pct < bound.pm_pct and gpu.pm_pct < cpu.pm_pct
    assert "a starting value of σ 2%" in gpu.basis() and "It is a starting value" in gpu.basis()
    with pytest.raises(ValueError):
        rerun.interval([], device="cpu")


def test_a_stored_result_is_restated_with_the_store_history_of_its_setting(store):
    """The lab restates the worker's interval with the earlier runs of the same setting on the same machine."""
    env = {"hostname": "h1", "gpu": "NVIDIA H100", "cpu": "x"}
    exp = Experiment(model="captioner", preset="small", batch_size=256, precision="bf16")
    blocks = {"eager": [[100, 1.0]] * 8, "compiled": [[150, 1.0 + 0.01 * (i % 3)] for i in range(8)]}
    earlier = [1.30, 1.50, 1.70, 1.45]
    for s in earlier:
        run_id = insert_run(store, exp)
        store.finish(run_id, result={"device": "cuda", "speedup": s, "speedup_low": 0.98 * s, "variants": [
            "eager", "compiled"]}, env=env)
    mine = insert_run(store, exp)
    result = {"device": "cuda", "variants": ["eager", "compiled"], "blocks": blocks}
    restated = with_history(store, mine, exp.to_dict(), result, env)
    assert restated["speedup_between_source"] == "history" and restated["speedup_history_runs"] == 4
    assert restated["speedup_low"] < 1.30 < 1.70 < restated["speedup_high"]
    assert "4 earlier runs of this setting on this machine" in restated["speedup_interval_words"]
    assert "interval for a rerun" in figures.speedup_words({**restated, "paired_rounds": 8})
    # No blocks (an eager-only run): unchanged.
    assert rerun.restate({"device": "cuda"}, earlier, False) == {"device": "cuda"}


def test_a_restated_headline_carries_the_break_even_of_its_own_speedup():
    """Near 1x the break-even moves far with the speedup's fourth digit: the worker's, made before the lab restated the
    headline from the stored rounds, disagreed by 0.5% with the saved record's, so the page's early headline and the
    saved run named different break-evens."""
    blocks = {"eager": [[100, 1.0]] * 4, "compiled": [[101, 1.0], [102, 1.0], [101, 1.0], [103, 1.0]]}
    result = {"device": "cpu", "variants": ["eager", "compiled"], "blocks": blocks, "compile_s": 2.0,
              "eager_steps_per_s": 100.0, "speedup": 1.0151, "breakeven_steps": 13_444.0, "unavailable": {}}
    restated = rerun.restate(result, [], False)
    speedup = restated["speedup"]
    assert speedup == pytest.approx(1.015, rel=1e-3) and speedup != result["speedup"]
    assert restated["breakeven_steps"] == figures.headline_breakeven(restated) == 2.0 / (0.01 - 0.01 / speedup)
    slower = {**result, "blocks": {"eager": [[100, 1.0]] * 4, "compiled": [[99, 1.0]] * 4}}
    restated = rerun.restate(slower, [], False)  # restated below 1x: it never pays back, and says so
    assert restated["breakeven_steps"] is None and "breakeven_steps" in restated["unavailable"]


def test_a_first_rerun_of_another_setting_widens_the_starting_value_by_what_it_showed_not_four_times_that():
    """A room's first two ResNet-50 processes on an H200 read 1.81 and 1.57x (the host's episodes): raised to its upper
    bound on that one degree of freedom (x4) and then pooled with the starting value, it made every other host-bound
    setting state σ 22% (gpt2 ±49% where its reruns agreed within ±2%). Pooled on the degrees of freedom it joins,
    it widens the starting value, to about what the two processes showed apart, no further."""
    from tcore.analysis.history import Spread

    scatter, own = statistics.stdev([math.log(1.808), math.log(1.571)]), math.log1p(0.012)
    two = Spread(math.sqrt(scatter ** 2 - own ** 2), 1, 2, 1, scatter, own)
    for gpu, start in (("NVIDIA H100 80GB HBM3", 3.0), ("NVIDIA H200", 10.0)):
        sigma, source, _ = rerun.between_sigma([], "cuda", True, two, (), gpu)
        pct = 100 * math.expm1(sigma)
        assert source == "machine" and start < pct < max(start, 100 * scatter) * 1.2, (gpu, pct)


def test_a_run_with_no_interval_teaches_no_spread(store):
    """A one-round run read 37.9x beside its setting's 0.62x on a loaded CPU, and every later run of the machine was
    told σ 1294%: a headline with no interval of its own counts neither in the machine's spread nor in its setting's
    earlier runs."""
    env = {"hostname": "h1", "cpu": "x"}
    exp = Experiment(model="captioner", preset="tiny", batch_size=2, backend="inductor")
    for speedup, low in ((0.62, 0.55), (0.64, 0.58), (0.61, 0.52), (37.9, None)):
        run_id = insert_run(store, exp)
        store.finish(run_id, result={"device": "cpu", "speedup": speedup, "speedup_low": low,
                                     "speedup_high": None if low is None else speedup * 1.1, "speedup_kind": "cpu",
                                     "variants": ["eager", "compiled"]}, env=env)
    assert sorted(r[2] for r in store.headlines("cpu")) == [0.61, 0.62, 0.64]
    assert not rerun.teaches_spread({"speedup": 37.9, "speedup_low": None}) and rerun.teaches_spread(
        {"speedup": 0.62, "speedup_low": 0.55})
    mine = insert_run(store, exp)
    blocks = {"eager": [[100, 1.0]] * 4, "compiled": [[62, 1.0]] * 4}
    restated = with_history(store, mine, exp.to_dict(), {"device": "cpu", "variants": ["eager", "compiled"],
                                                        "blocks": blocks}, env)
    assert restated["speedup_history_runs"] == 3 and restated["speedup_pm_pct"] < 50


def test_the_history_query_takes_the_same_setting_on_the_same_machine_only(store):
    h100 = {"hostname": "h1", "gpu": "NVIDIA H100"}
    exp = Experiment(model="captioner", preset="small", batch_size=256, precision="bf16")

    def finished(e, env, speedup, device="cuda"):
        run_id = insert_run(store, e)
        store.finish(run_id, result={"device": device, "speedup": speedup}, env=env)
        return run_id

    first = finished(exp, h100, 1.52)
    finished(exp.replace(timed_s=10.0, cache="warm", device="cuda"), h100, 1.53)  # timing and caches: same setting
    finished(exp.replace(batch_size=32), h100, 1.30)                # another batch
    finished(exp.replace(mode="reduce-overhead"), h100, 1.90)       # another mode
    finished(exp, {"hostname": "h2", "gpu": "NVIDIA H100"}, 1.60)   # another machine
    finished(exp, {"hostname": "h1", "gpu": "NVIDIA H200"}, 1.61)   # another GPU
    finished(exp, {"hostname": "h1", "cpu": "x"}, 1.1, device="cpu")  # another device
    failed = insert_run(store, exp)
    store.finish(failed, error={"kind": "oom", "message": "x"})
    last = finished(exp, h100, 1.51)
    found = store.same_setting(exp.to_dict(), "cuda", h100)
    assert [r.result["speedup"] for r in found] == [1.52, 1.53, 1.51]  # oldest first
    assert found[0].id == first
    before_last = store.same_setting(exp.to_dict(), "cuda", h100, before=store.get(last).created_at, exclude=last)
    assert [r.result["speedup"] for r in before_last] == [1.52, 1.53]

    h = history.history(found)
    assert h.median == pytest.approx(1.52) and 0 < h.spread_pct < 1
    assert h.words(1.60) == ("3 earlier runs of this setting on this machine: 1.51–1.53x, median 1.52x (σ 0.7%); "
                             "this run 1.60x, +5.3% from their median. The interval's spread between processes learns "
                             "from 0 of the 3 (those with an interval of their own; one or two rounds' ratio can land "
                             "anywhere).")
    line = history.dots(h, 1.60, width=11)
    assert line == "1.51x |···       •| 1.60x"
    lines = report.history_lines(h, 1.60, "cold")
    assert lines[0].startswith("history: 3 earlier runs") and "• this run" in lines[1]
    # the warm-cache run counts alike, and the words say why: the cache changes the compile time, not the speedup
    assert "Runs that compiled from another cache (warm) count alike" in lines[0]
    assert report.history_lines(history.history([]), 1.5) == [
        "history: No earlier run of this setting on this machine: rerun it to see how far the figure moves."]


def test_after_the_instructors_reset_no_earlier_run_of_the_setting_teaches_its_spread(store):
    """After the instructor reset the machine's spread, a setting's runs from before it (one of them 0.62x, another
    5x: a loaded machine) still made its rerun's interval 0.02-30.71x (σ 457%). They stay listed, said to be from
    before the reset, and teach nothing: not the interval after the run, not the note before it; and the advice
    counts the runs it did learn from."""
    from tcore.lab import calibrate, rerun_outlook
    from tcore.store.lab_state import SPREAD_RESET
    from ui.words import run_words

    env = rerun_outlook.machine_env("cpu")  # this machine, as the note before a run looks for it
    exp = Experiment(model="captioner", preset="tiny", batch_size=2, backend="inductor")

    def stored(speedup: float, cache: str = "warm") -> str:
        run_id = insert_run(store, exp.replace(cache=cache))
        store.finish(run_id, result={"device": "cpu", "speedup": speedup, "speedup_low": 0.9 * speedup,
                                     "speedup_high": 1.1 * speedup, "speedup_kind": "cpu",
                                     "variants": ["eager", "compiled"]}, env=env)
        return run_id

    for speedup, cache in ((0.62, "warm"), (5.0, "artifacts"), (0.3, "warm")):
        stored(speedup, cache)
    with store._write() as db:  # they ran well before the reset, whatever this machine's clock resolves
        db.execute("UPDATE runs SET created_at = created_at - 100")
    store.lab.set_lab_state(SPREAD_RESET, {"at": store.get(store.list()[0].id).created_at + 50})
    assert calibrate.reset_at(store) == store.lab.spread_reset_at() is not None
    blocks = {"eager": [[100, 1.0]] * 4, "compiled": [[62, 1.0], [63, 1.0], [62, 1.0], [61, 1.0]]}
    mine = insert_run(store, exp)
    restated = with_history(store, mine, exp.to_dict(), {"device": "cpu", "variants": ["eager", "compiled"],
                                                        "blocks": blocks}, env)
    assert restated["speedup_history_runs"] == 0 and restated["speedup_between_source"] == "default"
    assert restated["speedup_between_pct"] == pytest.approx(rerun.FALLBACK_BETWEEN_PCT["cpu"])
    # before a run: the note learns nothing from them either, but the runs are listed and said to be before the reset
    device, past, _ = rerun_outlook.earlier(exp, store, device="cpu")
    assert len(past.points) == 3 and past.teaching().points == []
    ahead = rerun_outlook.outlook(exp, store, device="cpu")
    assert ahead.between_pct == pytest.approx(rerun.FALLBACK_BETWEEN_PCT["cpu"]) and ahead.moved_pct is None
    said = past.words(0.6, "warm")
    assert "3 of them ran before the instructor's reset of this machine's spread" in said
    assert "learns from 0 of the 3" in said and "another cache (artifacts) count alike" in said
    # three runs since the reset teach it, and the words count the same three
    for speedup in (0.60, 0.64, 0.61):
        stored(speedup)
    restated = with_history(store, mine, exp.to_dict(), {"device": "cpu", "variants": ["eager", "compiled"],
                                                        "blocks": blocks}, env)
    assert restated["speedup_between_source"] == "history" and restated["speedup_history_runs"] == 3
    assert restated["speedup_pm_pct"] < 50
    advice = run_words.noise_advice({**restated, "speedup_between_pct": 40.0, "speedup_rounds_pm_pct": 1.0})
    assert "already learns from the 3 earlier runs" in advice and "once 3 earlier runs" not in advice
    past = rerun_outlook.earlier(exp, store, device="cpu")[1]
    assert len(past.points) == 6 and len(past.teaching().points) == 3 and "learns from 3 of the 6" in past.words()
    # the note before a run: three runs that strayed are learned from already, not "once 3 are stored"
    strayed = rerun.outlook([1.0, 1.02, 0.7], "cpu").words()
    assert "its interval learns the spread from those 3 runs" in strayed and "once 3" not in strayed


def recorded_host_bound_run(**changes) -> dict:
    """ResNet-50's GPU default as run 2 of the recorded reruns measured it (H100): eager kept the GPU busy 78.5%,
    its rounds 102-183 steps/s; compiled busy 99%."""
    r = {"variants": ["eager", "compiled"], "speedup": 2.027, "eager_samples_per_s": 8764.0,
         "eager_gpu_busy_pct": 78.5, "eager_steps_per_s_min": 102.0, "eager_steps_per_s_max": 183.0,
         "eager_spread_pct": 59.0, "eager_matmul_ms": 5.8, "eager_idle_ms": 1.5,
         "eager_gpu_time_samples_per_s": 11034.0,
         "compiled_samples_per_s": 18284.0, "compiled_gpu_busy_pct": 99.0, "compiled_matmul_ms": 3.4,
         "compiled_idle_ms": 0.05}
    return {**r, **changes}


def test_the_host_bound_verdict_says_the_figure_is_the_hosts_launch_rate():
    (said,) = figures.host_bound(recorded_host_bound_run(), "cuda")
    variant, words = said
    assert variant == "eager"
    assert words.startswith("**Eager is host-bound**: the GPU sat idle 21% of each eager step and NVML saw it busy "
                            "78% of the timed time, so its 8,764 samples/s is the host CPU's launch rate")
    assert "moved from 102.0 to 183.0 steps/s (59% of the median) across this run" in words
    assert "On the GPU's time alone it would reach 11,034 samples/s" in words and "a larger batch" in words
    # A busy GPU is not host-bound; the CPU never is (the host is the device).
    assert figures.host_bound(recorded_host_bound_run(eager_gpu_busy_pct=99.0, eager_idle_ms=0.1), "cuda") == []
    assert figures.host_bound(recorded_host_bound_run(), "cpu") == []
    # A host-bound compiled side is offered CUDA graphs, unless it already replays them.
    slow = recorded_host_bound_run(compiled_gpu_busy_pct=60.0)
    assert "mode=reduce-overhead" in dict(figures.host_bound(slow, "cuda"))["compiled"]
    assert "already replays CUDA graphs" in dict(figures.host_bound(slow, "cuda", "reduce-overhead"))["compiled"]
    assert "host-bound: Eager is host-bound" in report.text_table(recorded_host_bound_run(), None, "cuda")


def test_a_short_wait_of_the_gpu_is_said_but_only_a_long_one_takes_the_host_bound_spread():
    """The words name a variant host-bound from a 5% wait; the interval's kind of spread asks whether the headline
    follows the host, which a GPU waiting 8% of a step (the GPU default on an H100: host-bound in one process, not in
    the next, its width flipping between them) does not, and ResNet-50's eager waiting 21% does."""
    borderline = recorded_host_bound_run(eager_idle_ms=0.6, eager_gpu_busy_pct=92.0)  # 8% of its 7.4 ms step idle
    assert figures.host_bound(borderline, "cuda")  # said: part of its figure is the host's launch rate
    assert not figures.follows_host(borderline, "cuda")
    assert figures.follows_host(recorded_host_bound_run(), "cuda")  # idle 21%, busy 78.5%
    assert figures.follows_host(recorded_host_bound_run(eager_idle_ms=0.1, eager_gpu_busy_pct=80.0), "cuda")
    assert not figures.follows_host(recorded_host_bound_run(), "cpu")


def test_gpu_time_throughput_is_the_batch_over_kernel_time():
    assert figures.gpu_time_samples_per_s({"matmul": 3.0, "pointwise": 1.0, "idle": 4.0}, 64) == pytest.approx(16000)
    assert figures.gpu_time_samples_per_s({"matmul": 3.0, "pointwise": 1.0, "idle": 4.0}, 64, 2.0) == pytest.approx(
        32000)  # kernels overlapping on two streams count once
    assert figures.gpu_time_samples_per_s({"idle": 4.0}, 64) is None


def test_the_launch_thread_is_pinned_for_the_timed_stage_on_a_gpu_and_given_back(monkeypatch):
    """Decision logic on the CPU: with enough cores, a GPU run's launch thread holds one core while timing and gets
    its cores back after; the CPU never pins (its intra-op threads need every core); the switch turns it off."""
    import gc
    import os

    from tcore.worker import timing

    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("this system has no sched_setaffinity")
    before = os.sched_getaffinity(0)
    monkeypatch.setattr(timing, "MIN_CORES_TO_PIN", 1)
    with timing.pinned_launch_thread("cuda") as (cpu, why_not):
        assert why_not is None and os.sched_getaffinity(0) == {cpu}
        assert len(before) == 1 or cpu != min(before)  # the first core (interrupts) is left alone
    assert os.sched_getaffinity(0) == before
    with timing.pinned_launch_thread("cpu") as (cpu, why_not):
        assert cpu is None and "intra-op threads" in why_not and os.sched_getaffinity(0) == before
    monkeypatch.setenv(timing.PIN_ENV, "0")
    with timing.pinned_launch_thread("cuda") as (cpu, why_not):
        assert cpu is None and timing.PIN_ENV in why_not
    with timing.no_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


# ResNet-50's GPU default (full, batch 64, bf16, channels_last) in ten fresh processes one after another on an H100
# (bench/rerun_spread.py, torch 2.11): each run's headline, its rounds' own interval and whether a variant left the GPU
# idle for a noticeable share (NVML busy under 95%). Runs 9 and 10 met a slow host: eager fell to 8k samples/s.
H100_RESNET50 = [(1.676, 1.665, 1.705, False), (1.687, 1.677, 1.699, False), (1.667, 1.662, 1.674, True),
                 (1.682, 1.676, 1.700, False), (1.822, 1.790, 1.854, True), (1.702, 1.693, 1.730, False),
                 (1.771, 1.674, 1.891, True), (1.659, 1.647, 1.696, False), (1.976, 1.924, 2.009, True),
                 (2.000, 1.736, 2.092, True)]


def test_the_recorded_h100_resnet50_reruns_are_covered_when_each_learns_from_the_ones_before():
    """Replayed in order on one store, as the benchmark ran them: the rounds' own intervals hold the median of the ten
    in 6 of 10; the rerun intervals, each pooling the default with the runs before it, in at least 9."""
    median = statistics.median(s for s, *_ in H100_RESNET50)
    stated = []
    for i, (speedup, low, high, host_bound) in enumerate(H100_RESNET50):
        ratios = [low, high, speedup, speedup] * 3
        history = [s for s, *_ in H100_RESNET50[:i]]
        stated.append(rerun.interval(ratios, device="cuda", host_bound=host_bound, history=history))
    assert coverage([(lo, hi) for _, lo, hi, _ in H100_RESNET50], median) <= 0.6
    assert coverage([(r.low, r.high) for r in stated], median) >= 0.9


def test_the_machines_reruns_of_other_settings_replace_the_default_once_there_are_enough(store):
    """What this machine has shown for a kind of run, pooled over every setting it ran more than once, is the prior
    of a setting it has not run yet: a host-bound run here gets the machine's σ, not the 10% default."""
    env = {"hostname": "h1", "gpu": "NVIDIA H100", "cpu": "x"}
    rows = []
    for model, centre in (("captioner", 2.0), ("resnet50", 1.7)):
        spec = Experiment(model=model, preset="small", batch_size=8, precision="bf16").to_dict()
        for i in range(5):  # five reruns each, within about ± 1%
            rows.append((spec, env, centre * (1 + 0.01 * ((i % 3) - 1)), "cuda-host-bound"))
    rows.append((rows[0][0], {**env, "hostname": "h2"}, 9.0, "cuda-host-bound"))  # another machine: not counted
    other = Experiment(model="flux", preset="tiny", batch_size=8, precision="bf16").to_dict()
    rows += [(other, env, 9.0, "cuda"), (other, env, 5.0, "cuda")]  # a setting of another kind: not counted
    spread = history.machine_spread(rows, env, "cuda", "cuda-host-bound")
    assert spread.runs == 10 and spread.settings == 2 and spread.dof == 8
    assert 0.5 < spread.sigma_pct < 1.5
    steady = [1.4, 1.42, 1.38, 1.41, 1.39, 1.4, 1.41, 1.39]
    alone = rerun.interval(steady, device="cuda", host_bound=True)
    learned = rerun.interval(steady, device="cuda", host_bound=True, machine=spread)
    assert alone.between_source == "default" and learned.between_source == "machine"
    assert learned.pm_pct < 5.0 < alone.pm_pct  # ± 18% on the default, within ± 5% on what the machine showed
    assert spread.sigma_pct < learned.between_pct < 3 * spread.sigma_pct  # raised to its upper bound, not beyond
    assert "that this machine has shown for host-bound GPU runs" in learned.basis() and "10 reruns of 2 settings" \
        in learned.basis()
    # a first few reruns (under MIN_MACHINE_DOF) count at once, pooled with the starting value, which still weighs in
    thin = history.machine_spread(rows[:4], env, "cuda", "cuda-host-bound")
    early = rerun.interval(steady, device="cuda", host_bound=True, machine=thin)
    assert thin.dof == 3 and early.between_source == "machine" and learned.pm_pct < early.pm_pct < alone.pm_pct
    assert "a starting value of σ 10%" in early.basis() and "pooled with this machine's first 4 reruns" in early.basis()
    # the setting's own history, once there, is pooled with the machine's prior
    own = rerun.interval(steady, device="cuda", host_bound=True, machine=spread, history=[1.4, 1.41, 1.39])
    assert own.between_source == "history" and "pooled with 3 earlier runs" in own.basis()
    # seven earlier runs of its own stand alone: a machine prior that moves more (or less) steps aside, as a default
    wide = history.machine_spread([(r[0], r[1], r[2] * (1 + 0.1 * (i % 2)), r[3]) for i, r in enumerate(rows[:10])],
                                  env, "cuda", "cuda-host-bound")
    own7 = [1.4, 1.41, 1.39, 1.4, 1.405, 1.395, 1.4]
    pooled = rerun.interval(steady, device="cuda", host_bound=True, machine=wide, history=own7[:6])
    alone7 = rerun.interval(steady, device="cuda", host_bound=True, machine=wide, history=own7)
    assert alone7.pm_pct < 5.0 < pooled.pm_pct
    assert "learned from 7 earlier runs of this setting" in alone7.basis() and "pooled" not in alone7.basis()
    # the run's own setting is left out of the machine's, so it is never counted twice
    assert history.machine_spread(rows, env, "cuda", "cuda-host-bound", exclude=rows[0][0]).settings == 1


def test_runs_whose_own_rounds_spread_too_wide_to_see_a_spread_between_processes_teach_none(store):
    """Walk 6: three aot_eager reruns on a loaded CPU read 0.93x, 2.22x and 0.37x, each with an interval of about
    ± 100% of its own; their own σ, taken out of their scatter, left "learned σ 0.00%", and "a new setting gets σ 8%",
    under the 10% it starts from: noisy runs narrowed every other setting's interval."""
    env = {"hostname": "h1", "cpu": "x"}
    spec = Experiment(model="captioner", preset="tiny", batch_size=2, backend="aot_eager").to_dict()
    noisy = [(spec, env, x, "cpu", 110.0) for x in (0.93, 2.22, 0.37)]
    assert history.machine_spread(noisy, env, "cpu", "cpu") is None  # nothing learned: the starting value stands
    assert history.machine_spread([(spec, env, x, "cpu", 3.0) for x in (0.93, 0.95, 0.94)], env, "cpu", "cpu").dof == 2
    assert not rerun.teaches_spread({"speedup": 0.93, "speedup_low": 0.2, "speedup_within_pct": 110.0})
    assert rerun.teaches_spread({"speedup": 0.93, "speedup_low": 0.9, "speedup_within_pct": 3.0})
    points = history.History([history.Point(f"r{i}", i, x, x / 2, x * 2, rerun.within_sigma(110.0))
                              for i, x in enumerate((0.93, 2.22, 0.37))])
    assert points.teaching().points == []
    assert ("learns from 0 of the 3 (those with an interval of their own; one or two rounds' ratio can land anywhere; "
            "3 of them had rounds spreading wider than ± 25% of their own, too wide to see a spread between "
            "processes)") in points.teaching_words()  # walk 7: the words gave the rounds' reason alone


def test_the_spread_between_processes_leaves_out_what_each_runs_own_rounds_explain(store):
    """Headlines scatter by their own rounds and by what a fresh process adds; the interval counts the rounds once,
    in the run's own part, so the machine's spread is the scatter the rounds do not explain (never below zero). A
    setting that scatters exactly as its rounds say adds nothing between processes; one that scatters further keeps
    the excess, so its reruns' intervals stay as wide as they must."""
    env = {"hostname": "h1", "gpu": "NVIDIA H100", "cpu": "x"}
    spec = Experiment(model="captioner", preset="tiny", batch_size=1, precision="bf16").to_dict()
    logs = [math.log(1.4 * (1 + 0.04 * d)) for d in (-1, 0, 1, -1, 1, 0, -1, 1)]  # σ about 3.7% apart
    noisy_rounds = [(spec, env, math.exp(x), "cuda-host-bound", 5.0) for x in logs]  # rounds say 5%
    steady_rounds = [(spec, env, math.exp(x), "cuda-host-bound", 0.5) for x in logs]  # rounds say 0.5%
    older = [(spec, env, math.exp(x), "cuda-host-bound") for x in logs]  # records before the runs' own σ was kept
    explained = history.machine_spread(noisy_rounds, env, "cuda", "cuda-host-bound")
    unexplained = history.machine_spread(steady_rounds, env, "cuda", "cuda-host-bound")
    assert explained.sigma_pct == 0.0 and explained.dof == 7  # the rounds explain all of it
    assert 3.0 < unexplained.sigma_pct < history.machine_spread(older, env, "cuda", "cuda-host-bound").sigma_pct
    # the upper bound is taken of the scatter, then the runs' own part comes out: never below zero
    assert rerun.between_of(0.02, 0.0, 6) > 0.02 and rerun.between_of(0.02, 0.05, 6) == 0.0
    bound = rerun.between_of(0.03, 0.02, 6)
    assert bound ** 2 == pytest.approx(rerun.between_of(0.03, 0.0, 6) ** 2 - 0.02 ** 2)
    # a stored result says its own σ, and a later run of the setting takes it out of the history's scatter
    ratios = [1.4, 1.42, 1.38, 1.41, 1.39, 1.4, 1.41, 1.39]
    first = rerun.figures_of(rerun.interval(ratios, device="cuda", host_bound=True))
    own_pct = first["speedup_within_pct"]
    assert own_pct > 0
    assert rerun.within_sigma(own_pct) == pytest.approx(math.log1p(own_pct / 100))
    earlier = [1.36, 1.40, 1.44]
    counted = rerun.interval(ratios, device="cuda", host_bound=True, history=earlier)
    explained_away = rerun.interval(ratios, device="cuda", host_bound=True, history=earlier,
                                    history_within=[math.log1p(0.03)] * 3)
    assert explained_away.between_pct < counted.between_pct and explained_away.pm_pct < counted.pm_pct
    assert "beyond each run's own rounds" in explained_away.basis()


def test_a_settings_own_reruns_replace_the_default_once_they_are_evidence_enough():
    """Seven quiet reruns of the CPU default read 1.28-1.31x (2-core CPU, 2026-11-26) while each stated ± 21-24%, all
    of it the 10% default spread: once a setting's own reruns hold the degrees of freedom that would replace the
    default from other settings, they replace it for that setting too, and a steady setting reads as narrow as its
    rounds. Under that, the default still weighs in, so three runs that agree by luck cannot narrow it."""
    quiet = [1.298, 1.279, 1.282, 1.313, 1.304, 1.29, 1.30]
    ratios = [1.29, 1.30, 1.28, 1.31, 1.29, 1.30, 1.30, 1.29]
    own = [math.log1p(0.015)] * len(quiet)
    learned = rerun.interval(ratios, device="cpu", history=quiet, history_within=own)
    assert learned.between_source == "history" and learned.pm_pct < 5.0
    assert "learned from 7 earlier runs of this setting" in learned.basis() and "default" not in learned.basis()
    few = rerun.interval(ratios, device="cpu", history=quiet[:3], history_within=own[:3])
    assert few.pm_pct > 10.0  # the 10% default, pooled with three runs, still speaks
    assert rerun.between_sigma(quiet, "cpu", False, None, own)[0] < rerun.between_sigma(quiet[:6], "cpu", False)[0]


def test_calibrate_runs_enough_of_a_kinds_only_reference_to_replace_its_default():
    from tcore.lab import calibrate

    assert calibrate.runs_for(1, 5) == 7  # 5 runs of one setting give 4 degrees of freedom, short of 6
    assert calibrate.runs_for(2, 5) == 5 and calibrate.runs_for(2, 2) == 4 and calibrate.runs_for(1, 9) == 9


def test_a_fresh_lab_starts_from_the_spread_measured_for_its_gpu_model():
    """A lab with no reruns stored states what was measured on its GPU model for the kind of run, not a round 10%:
    on an H100 the issue's fresh-process reruns (ResNet-50 1.649-1.696x, each stated ± 20.5%) are held by intervals of
    about ± 6%; a GPU not measured, and the CPU, start wide (coverage first). The words say it is a starting value and
    what narrows it."""
    h100 = "NVIDIA H100 80GB HBM3"
    assert rerun.starting_between("cuda-host-bound", h100)[0] == 3.0
    assert rerun.starting_between("cuda", h100)[0] == 1.5 and "H100" in rerun.starting_between("cuda", h100)[1]
    assert rerun.starting_between("cuda-host-bound", "NVIDIA L4")[0] == rerun.FALLBACK_BETWEEN_PCT["cuda-host-bound"]
    assert rerun.starting_between("cuda", None)[0] == rerun.FALLBACK_BETWEEN_PCT["cuda"]
    assert rerun.starting_between("cpu", h100)[0] == rerun.FALLBACK_BETWEEN_PCT["cpu"]
    resnet50 = [1.680, 1.649, 1.696]
    median = statistics.median(resnet50)
    for s in resnet50:
        ratios = [s * (1 + 0.002 * d) for d in (-1, 0, 1, 0, -1, 1, 0, 0)]  # rounds within ± 0.2%
        fresh = rerun.interval(ratios, device="cuda", host_bound=True, gpu=h100)
        unknown = rerun.interval(ratios, device="cuda", host_bound=True, gpu="NVIDIA L4")
        assert fresh.between_source == "default" and fresh.low <= median <= fresh.high
        assert fresh.pm_pct < 7.0 < 15.0 < unknown.pm_pct
        assert "a starting value of σ 3%" in fresh.basis() and "measured on H100s" in fresh.basis()
        assert "each setting run here again narrows it" in fresh.basis()
    busy = rerun.interval([1.524, 1.53, 1.528, 1.532, 1.526, 1.529], device="cuda", gpu=h100)
    assert busy.pm_pct < 3.5 and busy.low <= 1.528 <= busy.high


def test_a_run_of_too_few_rounds_states_no_interval_and_how_to_get_one():
    """One round said ± 21% on the CPU (the default spread alone) and its rerun landed 30-fold outside, with advice that
    timing longer would not narrow it. Under MIN_INTERVAL_ROUNDS rounds the run states no interval, says why and that
    more rounds give one, and is read as rough; from there on it states one."""
    from ui.words import run_words

    for ratios in ([1.5], [1.5, 1.2]):
        few = rerun.interval(ratios, device="cpu")
        assert few.low is None and few.high is None and few.pm_pct is None and few.rounds == len(ratios)
        stored = {"device": "cpu", "variants": ["eager", "compiled"], "paired_rounds": len(ratios),
                  **rerun.figures_of(few)}
        assert stored["speedup_low"] is None and stored["speedup_pm_pct"] is None
        assert f"Run it with {rerun.MIN_INTERVAL_ROUNDS} rounds or more" in stored["speedup_no_interval"]
        assert "no interval: " in figures.speedup_words(stored) and "interval for a rerun" not in \
            figures.speedup_words(stored)
        assert any("states no interval" in r for r in figures.noise_reasons(stored))
        said = run_words.noise_words(stored)
        assert "or more" in said and "Timing longer will not narrow it" not in said  # how to get one, once
        assert paired.apart(stored, {"speedup_low": 1.0, "speedup_high": 1.1}) is None  # cannot be told apart
    enough = rerun.interval([1.5, 1.45, 1.55], device="cpu")
    assert enough.low < 1.5 < enough.high and enough.no_interval() is None
    assert rerun.figures_of(enough)["speedup_no_interval"] is None


def test_a_settings_kind_is_its_historys_majority_so_its_width_does_not_flip(store):
    """timm:convnext_tiny on an H100 read GPU-busy in one process and host-bound in the next, and its width flipped
    between ± 4% and ± 20%. The kind is the majority of the setting's runs' own readings here (a tie counts as
    host-bound, the wider), for the interval, for the machine's spread and for the outlook before a run."""
    assert rerun.setting_kind("cuda", [True, False, False]) == "cuda"
    assert rerun.setting_kind("cuda", [True, True, False]) == "cuda-host-bound"
    assert rerun.setting_kind("cuda", [True, False]) == "cuda-host-bound"  # a tie: coverage first
    assert rerun.setting_kind("cuda", []) == "cuda" and rerun.setting_kind("cpu", [True]) == "cpu"

    env = {"hostname": "h1", "gpu": "NVIDIA H100 80GB HBM3", "cpu": "x"}
    exp = Experiment(model="timm:convnext_tiny", preset="full", batch_size=64, precision="bf16")
    busy = recorded_host_bound_run(eager_gpu_busy_pct=99.0, eager_idle_ms=0.1, device="cuda")
    bound = recorded_host_bound_run(device="cuda")
    blocks = {"eager": [[100, 1.0]] * 8, "compiled": [[150, 1.0 + 0.002 * (i % 3)] for i in range(8)]}
    stated = []
    for i, reading in enumerate([busy, busy, bound, busy, bound]):
        run_id = insert_run(store, exp)
        result = with_history(store, run_id, exp.to_dict(), {**reading, "blocks": blocks}, env)
        store.finish(run_id, result=result, env=env)
        stated.append(result)
    assert [r["speedup_kind"] for r in stated] == ["cuda", "cuda", "cuda", "cuda", "cuda"]
    assert max(r["speedup_pm_pct"] for r in stated) < 5.0  # no run flipped to the host-bound width
    assert "This run read as host-bound, but 2 of the 3 runs" in stated[2]["notes"][-1]
    assert not stated[3].get("notes")
    # the machine's spread counts every run of the setting for its majority kind
    rows = store.headlines("cuda")
    assert history.machine_spread(rows, env, "cuda", "cuda").runs == 5
    assert history.machine_spread(rows, env, "cuda", "cuda-host-bound") is None
    # before a run, too: two host-bound readings of five do not make the setting host-bound
    from tcore.lab import rerun_outlook

    past = history.history(store.same_setting(exp.to_dict(), "cuda", env))
    assert "host-bound" not in rerun_outlook.outlook(exp, store, found=("cuda", past, 2)).reason
    assert "3 of them were host-bound" in rerun_outlook.outlook(exp, store, found=("cuda", past, 3)).reason
