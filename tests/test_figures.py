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
    assert s.power_w == pytest.approx(60 / 3.5)
    assert s.latency_ms_p50 == pytest.approx(100.0)
    assert s.block_s == 1.0
    assert s.tflops == pytest.approx(30.0)  # 3 TFLOP a step at 10 steps/s
    assert s.peak_mem_gib == 1.5 and s.steps == 30


def test_unmeasurable_energy_is_none_never_zero():
    assert figures.summarize(_blocks([0.05], steps=5, energy_j=0.0), batch_size=1).energy_j_per_step is None
    missing = figures.summarize(_blocks([0.05], steps=5, energy_j=None), batch_size=1)
    assert missing.power_w is None and missing.energy_j_per_sample is None
    assert figures.summarize(_blocks([1.0]), batch_size=1).tflops is None  # no FLOP count, no TFLOP/s


def test_speedup_and_break_even():
    eager, compiled = VariantFigures(steps_per_s=10.0), VariantFigures(steps_per_s=20.0)
    assert figures.speedup(eager, compiled) == 2.0
    # each compiled step saves 0.1 - 0.05 = 0.05 s: 30 s of compiling pays back after 600 steps
    assert figures.breakeven_steps(30.0, eager, compiled) == pytest.approx(600.0)
    assert figures.breakeven_steps(30.0, compiled, eager) is None  # slower: it never pays back
    assert figures.breakeven_steps(30.0, eager, VariantFigures(steps_per_s=10.0)) is None


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
