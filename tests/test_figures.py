"""The figures registry and the derived figures: pure arithmetic on measured numbers, on the CPU."""
import dataclasses

import pytest

from tcore import figures
from tcore.figures import Block, Result, RunFigures, VariantFigures


def _blocks(walls, steps=10, energy_j=20.0):
    return [Block(steps=steps, wall_s=w, step_s=[w / steps] * steps, energy_j=energy_j) for w in walls]


def test_percentile_interpolates():
    assert figures.percentile([1.0], 95) == 1.0
    assert figures.percentile([1, 2, 3, 4, 5], 50) == 3
    assert figures.percentile([0, 10], 95) == pytest.approx(9.5)


def test_a_variant_is_medians_with_spread_and_energy_per_step():
    # three blocks: 10 steps each at 1 s, 2 s and 0.5 s; 20 J each
    s = figures.summarize(_blocks([1.0, 2.0, 0.5]), batch_size=4, flops_per_step=3e12, peak_mem_gib=1.5)
    assert s.steps_per_s == 10.0  # median of 10, 5, 20
    assert (s.steps_per_s_min, s.steps_per_s_max) == (5.0, 20.0)
    assert s.samples_per_s == 40.0
    assert s.energy_j_per_step == pytest.approx(2.0)  # 60 J over 30 steps
    assert s.energy_j_per_sample == pytest.approx(0.5)
    assert s.samples_per_j == pytest.approx(2.0)  # 120 samples for 60 J
    assert s.power_w == pytest.approx(60 / 3.5)
    assert s.latency_ms_p50 == pytest.approx(100.0)
    assert s.block_s == 1.0
    assert s.tflops == pytest.approx(30.0)  # 3 TFLOP a step at 10 steps/s
    assert s.peak_mem_gib == 1.5 and s.steps == 30


def test_unmeasurable_energy_is_none_never_zero():
    assert figures.summarize(_blocks([0.05], steps=5, energy_j=0.0), batch_size=1).energy_j_per_step is None
    missing = figures.summarize(_blocks([0.05], steps=5, energy_j=None), batch_size=1)
    assert missing.power_w is None and missing.energy_j_per_sample is None and missing.samples_per_j is None
    assert figures.summarize(_blocks([1.0]), batch_size=1).tflops is None  # no FLOP count, no TFLOP/s


def test_speedup_and_break_even():
    eager, compiled = VariantFigures(steps_per_s=10.0), VariantFigures(steps_per_s=20.0)
    assert figures.speedup(eager, compiled) == 2.0
    # an eager step of 0.1 s at 2x: each compiled step saves 0.05 s, so 30 s of compiling pays back after 600 steps
    assert figures.breakeven_steps(30.0, 0.1, 2.0) == pytest.approx(600.0)
    assert figures.breakeven_steps(30.0, 0.1, 0.5) is None  # slower: it never pays back
    assert figures.breakeven_steps(30.0, 0.1, 1.0) is None


def test_break_even_follows_the_headline_not_the_unpaired_medians():
    # The medians say compiled is faster (12 over 10 steps/s), the paired headline says 0.74x: it never pays back.
    slower = {"speedup": 0.74, "compile_s": 20.0, "eager_steps_per_s": 10.0, "compiled_steps_per_s": 12.0,
              "breakeven_steps": 1554.0, "unavailable": {}}
    assert figures.headline_breakeven(slower) is None
    opened = figures.upgrade_result(slower)
    assert opened["breakeven_steps"] is None and "never pays back" in opened["unavailable"]["breakeven_steps"]
    # The medians say slower, the headline 1.25x: an eager step of 0.1 s saves 0.02 s, so 20 s pays back at 1,000.
    faster = {"speedup": 1.25, "compile_s": 20.0, "eager_steps_per_s": 10.0, "compiled_steps_per_s": 9.0,
              "breakeven_steps": None, "unavailable": {"breakeven_steps": "compiled is not faster, never pays back"}}
    opened = figures.upgrade_result(faster)
    assert opened["breakeven_steps"] == pytest.approx(1000.0) and "breakeven_steps" not in opened["unavailable"]
    assert faster["breakeven_steps"] is None  # the stored record is left as it was
    # A record that follows the headline already keeps its own figure, though the stored inputs, rounded, give
    # one a hair apart (the page showed the worker's; the record must say the same)
    current = {**faster, "breakeven_steps": 1000.0004, "unavailable": {}}
    assert figures.upgrade_result(current)["breakeven_steps"] == 1000.0004
    # Without the eager throughput stored, the stored figure stands.
    assert figures.headline_breakeven({"speedup": 1.5, "compile_s": 3.0, "breakeven_steps": 450.0}) == 450.0


def test_every_figure_is_defined_once_with_a_title_unit_format_and_meaning():
    for fig in [*figures.RUN_FIGURES.values(), *figures.VARIANT_FIGURES.values()]:
        assert fig.title and fig.means.endswith(".") and fig.fmt.startswith("%"), fig
        assert fig.better in (figures.HIGHER, figures.LOWER, None)
        assert fig.fmt % 1.0  # the format takes a number
    assert not set(figures.RUN_FIGURES) & {f"{v}_{k}" for v in figures.VARIANTS for k in figures.VARIANT_FIGURES}
    assert set(figures.SUMMARY_RUN) <= set(figures.RUN_FIGURES)
    assert set(figures.SUMMARY_VARIANT) <= set(figures.VARIANT_FIGURES)


def test_columns_labels_and_text_come_from_the_registry():
    fig, variant = figures.lookup("eager_samples_per_s")
    assert (fig.key, variant) == ("samples_per_s", "eager")
    assert figures.column_label("compiled_samples_per_s") == "Compiled throughput (samples/s)"
    assert figures.column_label("compile_s") == "Compile time (s)"
    result = {"compile_s": 12.34, "breakeven_steps": None, "unavailable": {"breakeven_steps": "never faster"}}
    assert figures.text(result, "compile_s") == "12.3 s"
    assert figures.text(result, "breakeven_steps") == "n/a (never faster)"
    assert figures.text(result, "breakeven_steps", reason=False) == "n/a"
    with pytest.raises(KeyError):
        figures.lookup("eager_no_such_figure")


def test_a_result_round_trips_through_its_flat_record():
    result = Result(device="cpu", variants=["eager", "compiled"], run=RunFigures(speedup=2.0, compile_s=3.0),
                    eager=VariantFigures(steps_per_s=1.0), compiled=VariantFigures(steps_per_s=2.0),
                    details={"graph_breaks": [{"reason": "x"}]}, notes=["n"], unavailable={"eager_power_w": "no meter"})
    record = result.to_record()
    assert record["speedup"] == 2.0 and record["compiled_steps_per_s"] == 2.0 and record["graph_breaks"]
    assert Result.from_record(record) == result


def test_a_record_stored_before_a_figure_existed_still_opens():
    old = {"device": "cuda", "variants": ["eager", "compiled"], "speedup": 1.5, "eager_steps_per_s": 2.0,
           "compiled_steps_per_s": 3.0, "compile_events": [], "notes": []}  # no block_s, kernels, ... yet
    result = Result.from_record(old)
    assert result.run.speedup == 1.5 and result.compiled.steps_per_s == 3.0
    assert result.compiled.block_s is None and result.details == {"compile_events": []}
    eager_only = Result.from_record({"device": "cpu", "variants": ["eager"], "eager_steps_per_s": 2.0})
    assert eager_only.compiled is None and dataclasses.asdict(eager_only.run)["speedup"] is None


def test_the_spread_of_the_rounds_and_the_slow_steps_are_counted():
    steady = Block(steps=10, wall_s=0.1, step_s=[0.01] * 10, energy_j=None)
    stalled = Block(steps=10, wall_s=0.19, step_s=[0.01] * 9 + [0.1], energy_j=None)  # one step took 10 medians
    s = figures.summarize([steady, stalled, steady], batch_size=1)
    assert s.spread_pct == pytest.approx((100 - 10 / 0.19) / 100 * 100)
    assert s.slow_steps == 1 and s.slow_time_pct == pytest.approx(0.1 / 0.39 * 100)
    assert figures.slow_step_places([steady, stalled]) == [{"round": 1, "step": 9, "ms": 100.0, "times_median": 10.0}]


def test_a_noisy_run_says_why_and_a_steady_one_says_nothing():
    steady = {"variants": ["eager", "compiled"], "eager_spread_pct": 2.0, "compiled_spread_pct": 3.0,
              "eager_slow_time_pct": 0.0, "compiled_slow_time_pct": 1.0, "busy_cores": 0.1}
    assert figures.noise_reasons(steady) == []
    assert figures.noise_reasons({**steady, "gpu_processes": 1}) == []  # the run's own worker
    noisy = {**steady, "eager_spread_pct": 373.0, "eager_steps_per_s_min": 21.0, "eager_steps_per_s_max": 230.0,
             "compiled_slow_steps": 8, "compiled_slow_time_pct": 40.0, "busy_cores": 0.9, "gpu_processes": 3}
    reasons = figures.noise_reasons(noisy)
    assert reasons == ["the eager rounds disagree by 373% (21 to 230 steps/s)",
                       "8 compiled step(s) took over 3x the median step and 40% of its timed time",
                       "other processes kept 0.9 CPU cores busy while it was timed",
                       "2 other process(es), not of this lab, were on this GPU while it was timed"]
    # on a shared GPU the lab's own runs (compiling, holding contexts) are not counted: the lease kept them out
    assert figures.noise_reasons({**steady, "gpu_processes": 4, "gpu_lab_processes": 3}) == []
    assert figures.noise_reasons({**steady, "gpu_processes": 5, "gpu_lab_processes": 3}) == [
        "1 other process(es), not of this lab, were on this GPU while it was timed"]
    # the load that counts on a shared GPU is the launch thread's own core's
    assert "on the core kept for its launch thread" in figures.noise_reasons(
        {**steady, "busy_cores": 0.9, "measure_cpus": [1, 2]})[0]


def test_throughput_and_median_step_that_disagree_are_explained_by_the_slow_steps():
    agree = {"speedup": 1.10, "speedup_p50": 1.12}
    assert figures.disagreement(agree) is None
    split = {"speedup": 0.31, "speedup_p50": 1.11, "compiled_slow_steps": 3, "compiled_slow_time_pct": 71.0,
             "eager_slow_steps": 0}
    words = figures.disagreement(split)
    # the speedup is the paired rounds' figure, not "by throughput" (the two median throughputs give another)
    assert words.startswith("The speedup (0.31x, from each round's throughputs) and the median step (1.11x) disagree: "
                            "3 slow compiled step(s), 71% of its time count in each round's throughput but not in the "
                            "median step")
    assert "By throughput" not in words
    assert "the machine's speed changed between rounds" in figures.disagreement({**split, "compiled_slow_steps": 0})


def test_round_speedups_pair_the_blocks_of_each_round():
    eager = [Block(10, 1.0, [0.1] * 10, None), Block(10, 2.0, [0.2] * 10, None)]
    compiled = [Block(20, 1.0, [0.05] * 20, None), Block(10, 1.0, [0.1] * 10, None)]
    assert figures.round_speedups(eager, compiled) == [2.0, 2.0]  # the slow second round hit both alike


def test_energy_error_shrinks_with_longer_and_more_blocks():
    blocks = [Block(10, 0.8, [0.08] * 10, 1.0)] * 5  # the default GPU run: 4 s per variant in 5 blocks
    assert figures.energy_error_pct(blocks, 0.1) == pytest.approx(2.28, abs=0.01)
    assert figures.energy_error_pct(blocks[:1] * 5, 0.1) > figures.energy_error_pct(blocks * 4, 0.1)
    short = [Block(10, 0.1, [0.01] * 10, 1.0)] * 3
    assert figures.energy_error_pct(short, 0.1) > 20


def test_every_interval_is_named_at_one_level_and_a_lopsided_one_by_both_sides():
    """Runs of 6, 10 and 20 rounds cover 96.9%, 98.8% and 99.6%: each is named a 95% interval, as the pages name
    it; one of 2 rounds reaches 50% and is named for what it is. A lopsided interval gives both sides, not the
    wider one as '±'."""
    for cover in (96.9, 98.8, 99.6):
        assert figures.interval_name({"speedup_confidence_pct": cover, "paired_rounds": 6}) == "95% interval"
    assert figures.interval_name({"speedup_confidence_pct": 50.0, "paired_rounds": 2}) == "range of its 2 rounds"
    assert figures.interval_reach({"speedup": 0.54, "speedup_low": 0.44, "speedup_high": 0.94}) == "−19% / +74%"
    assert figures.interval_reach({"speedup": 1.30, "speedup_low": 1.27, "speedup_high": 1.33}) == "± 2.3%"
    from tcore.experiment.spec import DEFAULTS
    from tcore.figures import paired
    assert paired.TARGET_PCT == paired.WIDE_PCT == DEFAULTS["target_pct"]  # one threshold: aimed for, and Noisy past it
