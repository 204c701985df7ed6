"""The figures of a run, each defined once, and the arithmetic that derives some of them from others.

A figure is a field of `RunFigures` (one value per run) or of `VariantFigures` (one value per variant,
eager and compiled), declared with `figure(...)`: its title, unit, format, which way is better and one
sentence on what it means. The worker fills a `Result`; the record stored and read by every page, the
CSV and the command line is its flat form, where a per-variant figure is the column
f"{variant}_{key}" (`eager_samples_per_s`). Adding a figure is one field here plus the code that
measures it: every table, chart and export reads its title, unit and format from here.

The derived figures (throughput, latency percentiles, energy per step and per sample, speedup,
break-even, TFLOP/s) are pure functions of measured numbers, so they are unit-tested on the CPU.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping

from tcore import paired
from tcore.breakdown import CATEGORIES

VARIANTS = ("eager", "compiled")
HIGHER, LOWER = "higher", "lower"
# Past these a figure is noise, not a measurement, and the run says so next to its headline.
NOISY_SPREAD_PCT = 10.0   # the timed rounds of a variant disagree by more than this
SLOW_STEP_FACTOR = 3.0    # a step slower than this many median steps is a stall, not the steady state
SLOW_TIME_PCT = 5.0       # ... and such steps took more than this share of the timed time
BUSY_CORES = 0.5          # other processes kept more than this many CPU cores busy while timing
DISAGREE_PCT = 20.0       # throughput and median-step speedups further apart than this need explaining


@dataclass(frozen=True)
class Figure:
    key: str          # the field name; per variant, the stored column is f"{variant}_{key}"
    title: str        # "Throughput"
    unit: str         # "samples/s"; "" for a count or a ratio without a unit
    fmt: str          # printf style, as pandas and st.column_config take it: "%.1f"
    better: str | None  # HIGHER, LOWER, or None where neither is better
    means: str        # one sentence: what it is and how it was measured
    per_variant: bool = False

    @property
    def label(self) -> str:
        """'Throughput (samples/s)': a title with its unit, for an axis or a column."""
        return f"{self.title} ({self.unit})" if self.unit else self.title

    def column(self, variant: str | None = None) -> str:
        return f"{variant}_{self.key}" if self.per_variant else self.key

    def column_label(self, variant: str | None = None) -> str:
        """'Eager throughput (samples/s)' for a per-variant column, else the label."""
        return f"{variant.capitalize()} {self.label[0].lower()}{self.label[1:]}" if variant else self.label

    def text(self, value: Any, *, unit: bool = True) -> str:
        """The value formatted, with its unit unless `unit` is False; 'n/a' for None."""
        if value is None:
            return "n/a"
        shown = self.fmt % value
        return f"{shown} {self.unit}" if unit and self.unit else shown


def figure(title: str, unit: str, fmt: str, better: str | None, means: str) -> Any:
    """A dataclass field that is a figure: None until measured; its metadata is the Figure."""
    return field(default=None, metadata={"figure": (title, unit, fmt, better, means)})


_MEANS = {k: f"Per profiled step: {what}." for k, (_, what) in CATEGORIES.items()}


@dataclass
class VariantFigures:
    """What one variant (eager or compiled) measured over its timed blocks."""

    steps: int | None = figure("Timed steps", "steps", "%d", None, "Steps timed over all rounds of this variant.")
    steps_per_s: float | None = figure(
        "Throughput", "steps/s", "%.2f", HIGHER, "Steps per second: the median of the timed rounds.")
    steps_per_s_min: float | None = figure(
        "Slowest round", "steps/s", "%.2f", HIGHER, "Steps per second in the slowest timed round.")
    steps_per_s_max: float | None = figure(
        "Fastest round", "steps/s", "%.2f", HIGHER, "Steps per second in the fastest timed round.")
    samples_per_s: float | None = figure(
        "Throughput", "samples/s", "%.1f", HIGHER, "Samples per second: median steps per second times the batch size.")
    latency_ms_p50: float | None = figure(
        "Step latency p50", "ms", "%.2f", LOWER, "The median time of one step, over every timed step.")
    latency_ms_p95: float | None = figure(
        "Step latency p95", "ms", "%.2f", LOWER, "95% of timed steps took at most this long.")
    block_s: float | None = figure(
        "Timed block", "s", "%.2f", None, "How long one timed block of consecutive steps lasted (median).")
    spread_pct: float | None = figure(
        "Round-to-round spread", "%", "%.0f", LOWER,
        "How far apart the fastest and the slowest timed round are, as a share of the median round.")
    slow_steps: int | None = figure(
        "Slow steps", "steps", "%d", LOWER,
        "Timed steps that took over 3 times the median step: a recompile, a stall, or a busy machine.")
    slow_time_pct: float | None = figure(
        "Time in slow steps", "%", "%.0f", LOWER, "The share of the timed time that the slow steps took.")
    gpu_busy_pct: float | None = figure(
        "GPU busy while timed", "%", "%.0f", None,
        "NVML's utilization (the share of time a kernel ran) read after each timed block, median: well under 100% "
        "means the GPU waits on the host (launch-bound).")
    peak_mem_gib: float | None = figure(
        "Peak memory", "GiB", "%.3f", LOWER, "The most memory held during the timed blocks.")
    power_w: float | None = figure(
        "Mean power", "W", "%.0f", LOWER, "Energy over the timed blocks divided by their duration.")
    energy_j_per_step: float | None = figure(
        "Energy per step", "J", "%.3g", LOWER, "Energy counter difference over the timed blocks, per step.")
    energy_j_per_sample: float | None = figure(
        "Energy per sample", "J", "%.3g", LOWER, "Energy per step divided by the batch size.")
    samples_per_j: float | None = figure(
        "Energy efficiency", "samples/J", "%.3g", HIGHER, "Samples computed per joule of energy over the timed blocks.")
    tflops: float | None = figure(
        "Achieved compute", "TFLOP/s", "%.3g", HIGHER, "The model's FLOPs per step times steps per second.")
    kernels_per_step: int | None = figure(
        "Kernels per step", "", "%d", LOWER, "Compute kernels one step launches, from the profiler.")
    peak_pct: float | None = figure(
        "Share of peak compute", "%", "%.1f", HIGHER,
        "Achieved TFLOP/s over the GPU's dense peak for the precision the matmuls ran in (tcore.peaks).")
    weights_bw_pct: float | None = figure(
        "Weight reads, share of memory bandwidth", "%", "%.1f", None,
        "The weights' bytes read once per step, per second, over the GPU's memory bandwidth: a floor on the "
        "bandwidth a step uses (activations come on top); inference only.")
    # Where the time of one profiled step goes (tcore.breakdown): the categories plus the idle make up the step.
    profiled_step_ms: float | None = figure(
        "Profiled step", "ms", "%.2f", LOWER, "One step under the profiler: the steps profiled back to back, averaged.")
    matmul_ms: float | None = figure("Matmuls and convolutions", "ms", "%.2f", LOWER, _MEANS["matmul"])
    attention_ms: float | None = figure("Attention", "ms", "%.2f", LOWER, _MEANS["attention"])
    pointwise_ms: float | None = figure("Pointwise, norms and reductions", "ms", "%.2f", LOWER, _MEANS["pointwise"])
    copy_ms: float | None = figure("Copies and conversions", "ms", "%.2f", LOWER, _MEANS["copy"])
    optimizer_ms: float | None = figure("Optimizer", "ms", "%.2f", LOWER, _MEANS["optimizer"])
    other_ms: float | None = figure("Other kernels", "ms", "%.2f", LOWER, _MEANS["other"])
    idle_ms: float | None = figure("Idle", "ms", "%.2f", LOWER, _MEANS["idle"])


@dataclass
class RunFigures:
    """What the run measured as a whole."""

    speedup: float | None = figure(
        "Speedup", "x", "%.2f", HIGHER,
        "The median over the timed rounds of compiled throughput divided by eager throughput within the round: "
        "each round times both back to back (order alternating), so drift in the machine's speed cancels.")
    speedup_low: float | None = figure(
        "Speedup, interval low", "x", "%.2f", HIGHER,
        "The low end of the speedup's interval: an order statistic of the rounds' ratios (95% for 6 rounds or "
        "more, whatever their distribution).")
    speedup_high: float | None = figure(
        "Speedup, interval high", "x", "%.2f", HIGHER, "The high end of the speedup's interval.")
    speedup_pm_pct: float | None = figure(
        "Speedup interval, ±", "%", "%.1f", LOWER,
        "How far the speedup's interval reaches from it, on the wider side: the run's own error bar.")
    speedup_confidence_pct: float | None = figure(
        "Interval coverage", "%", "%.1f", None,
        "How sure the interval is to hold the median ratio: 95% or more from 6 rounds; fewer rounds reach less.")
    paired_rounds: int | None = figure(
        "Paired rounds", "rounds", "%d", None, "Rounds timed, each an eager and a compiled block back to back.")
    speedup_of_medians: float | None = figure(
        "Speedup of median throughputs", "x", "%.2f", HIGHER,
        "Compiled's median throughput over eager's, the rounds unpaired: the headline before paired rounds; "
        "drift between rounds moves it, since the two medians can come from different rounds.")
    compile_s: float | None = figure(
        "Compile time", "s", "%.1f", LOWER, "The first compiled call minus one eager step: what compiling cost.")
    speedup_min: float | None = figure(
        "Lowest round's speedup", "x", "%.2f", HIGHER,
        "Each round times eager then compiled back to back: the lowest compiled-over-eager ratio of a round.")
    speedup_max: float | None = figure(
        "Highest round's speedup", "x", "%.2f", HIGHER, "The highest compiled-over-eager ratio of a round.")
    speedup_p50: float | None = figure(
        "Speedup by median step", "x", "%.2f", HIGHER,
        "Eager's median step time over compiled's: what a typical step gains, whatever the slow steps did.")
    gpu_processes: int | None = figure(
        "Processes on the GPU while timing", "", "%d", LOWER,
        "The most compute processes NVML saw on this GPU between timed blocks, this run's own included.")
    busy_cores: float | None = figure(
        "Other load while timing", "cores", "%.1f", LOWER,
        "CPU cores that other processes kept busy, on average, during the timed blocks (from /proc/stat).")
    breakeven_steps: float | None = figure(
        "Break-even", "steps", "%.0f", LOWER,
        "Steps after which compiling has paid for itself: compile time / (eager step time - compiled step time).")
    graph_count: int | None = figure("Graphs", "", "%d", LOWER, "Distinct graphs Dynamo captured.")
    graph_break_count: int | None = figure(
        "Graph breaks", "", "%d", LOWER, "Times Dynamo stopped a graph and ran Python in between.")
    recompile_count: int | None = figure(
        "Recompilations", "", "%d", LOWER, "Compiles caused by a failed guard (a new shape, a new type).")
    correctness_rel_diff: float | None = figure(
        "Largest compiled-vs-eager difference (relative)", "", "%.2g", LOWER,
        "The largest |compiled - eager| over the largest |eager| of the outputs.")
    eager_first_call_s: float | None = figure(
        "First eager call", "s", "%.2f", LOWER, "The first eager step: allocation and kernel selection included.")
    compiled_first_call_s: float | None = figure(
        "First compiled call", "s", "%.2f", LOWER, "The first compiled step: tracing and compiling included.")
    eager_step_s: float | None = figure(
        "Eager step (warm-up)", "s", "%.4f", LOWER, "The median eager warm-up step after the first.")
    param_count: int | None = figure("Parameters", "", "%d", None, "Weights in the model.")
    flops_per_step: float | None = figure(
        "FLOPs per step", "FLOP", "%.3g", None, "Counted on the meta device at the preset's default shape.")
    cache_artifacts_bytes: int | None = figure(
        "Compile artifacts saved", "bytes", "%d", None, "What this run saved for a later warm start.")
    fx_graph_cache_hits: int | None = figure("FX graph cache hits", "", "%d", HIGHER, "Inductor graphs reused.")
    fx_graph_cache_misses: int | None = figure("FX graph cache misses", "", "%d", LOWER, "Inductor graphs built.")
    aot_autograd_cache_hits: int | None = figure("AOT autograd cache hits", "", "%d", HIGHER, "AOT graphs reused.")
    cudagraph_skip_count: int | None = figure(
        "CUDA graph skips", "", "%d", LOWER, "Graphs that could not be captured as CUDA graphs.")
    compilations: int | None = figure(
        "Compilations", "", "%d", LOWER, "Dynamo compiles over the whole run: first compiles and recompiles.")
    compiling_s: float | None = figure(
        "Time compiling", "s", "%.1f", LOWER, "The compile time of every compilation in the run, added up.")


# What a summary of a run shows, in this order: the command line's table, the Run page's "All figures".
SUMMARY_RUN = ("speedup", "speedup_low", "speedup_high", "speedup_pm_pct", "paired_rounds", "speedup_of_medians",
               "speedup_min", "speedup_max", "speedup_p50", "compile_s", "breakeven_steps", "graph_count",
               "graph_break_count", "recompile_count", "correctness_rel_diff", "busy_cores", "gpu_processes")
SUMMARY_VARIANT = ("steps_per_s", "samples_per_s", "spread_pct", "gpu_busy_pct", "latency_ms_p50", "latency_ms_p95", "slow_steps",
                   "slow_time_pct", "block_s", "peak_mem_gib",
                   "power_w", "energy_j_per_step", "energy_j_per_sample", "samples_per_j", "tflops", "peak_pct",
                   "weights_bw_pct", "kernels_per_step", "profiled_step_ms", *(f"{k}_ms" for k in CATEGORIES))
# The parts of compile time (details["compile_phases_s"], from Dynamo's nested timers), outermost first.
COMPILE_PHASES = {
    "dynamo_tracing_s": "Dynamo tracing and guards",
    "aot_autograd_s": "AOT autograd",
    "inductor_lowering_s": "Inductor lowering and passes",
    "codegen_and_compile_s": "Code generation and C++/Triton compile",
}


def _figures(cls: type, per_variant: bool) -> dict[str, Figure]:
    return {f.name: Figure(f.name, *f.metadata["figure"], per_variant=per_variant)
            for f in dataclasses.fields(cls) if "figure" in f.metadata}


RUN_FIGURES: dict[str, Figure] = _figures(RunFigures, per_variant=False)
VARIANT_FIGURES: dict[str, Figure] = _figures(VariantFigures, per_variant=True)


def lookup(column: str) -> tuple[Figure, str | None]:
    """The figure of a stored column and its variant: 'eager_samples_per_s' -> (samples_per_s, 'eager')."""
    if column in RUN_FIGURES:
        return RUN_FIGURES[column], None
    variant, _, key = column.partition("_")
    if variant in VARIANTS and key in VARIANT_FIGURES:
        return VARIANT_FIGURES[key], variant
    raise KeyError(f"no figure is stored as {column!r}")


def column_label(column: str) -> str:
    fig, variant = lookup(column)
    return fig.column_label(variant)


def text(result: Mapping[str, Any], column: str, *, unit: bool = True, reason: bool = True) -> str:
    """A stored figure with its unit, or 'n/a' with (if `reason`) why it could not be measured."""
    fig, _ = lookup(column)
    value = result.get(column)
    if value is None:
        why = (result.get("unavailable") or {}).get(column)
        return f"n/a ({why})" if why and reason else "n/a"
    return fig.text(value, unit=unit)


@dataclass
class Result:
    """A finished run's figures and what else it found, as the worker fills it.

    `details` holds the structured findings that are not figures (graph breaks with their source lines,
    recompilations, the compile timeline, the shape schedule, ...); `unavailable` maps a stored column
    to why it could not be measured.
    """

    device: str
    variants: list[str]
    run: RunFigures = field(default_factory=RunFigures)
    eager: VariantFigures = field(default_factory=VariantFigures)
    compiled: VariantFigures | None = None
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)

    def variant(self, name: str) -> VariantFigures | None:
        return {"eager": self.eager, "compiled": self.compiled}[name]

    def to_record(self) -> dict[str, Any]:
        """The flat record that is stored: run figures, f"{variant}_{key}" columns, details, notes."""
        record: dict[str, Any] = {"device": self.device, "variants": list(self.variants), **self.details}
        record.update(dataclasses.asdict(self.run))
        for name in self.variants:
            record.update({f"{name}_{k}": v for k, v in dataclasses.asdict(self.variant(name)).items()})
        record.update(notes=list(self.notes), unavailable=dict(self.unavailable))
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Result:
        """A stored record back as a Result; records stored before a figure existed read it as None."""
        variants = list(record.get("variants") or ["eager"])
        known = {"device", "variants", "notes", "unavailable", *RUN_FIGURES}
        known |= {f"{v}_{k}" for v in VARIANTS for k in VARIANT_FIGURES}

        def variant(name: str) -> VariantFigures:
            return VariantFigures(**{k: record.get(f"{name}_{k}") for k in VARIANT_FIGURES})

        return cls(device=record.get("device", "?"), variants=variants,
                   run=RunFigures(**{k: record.get(k) for k in RUN_FIGURES}), eager=variant("eager"),
                   compiled=variant("compiled") if "compiled" in variants else None,
                   details={k: v for k, v in record.items() if k not in known},
                   notes=list(record.get("notes") or []), unavailable=dict(record.get("unavailable") or {}))


# --- derived figures: pure arithmetic over measured numbers --------------------------------------

@dataclass
class Block:
    """One timed block of consecutive steps of one variant, as measured."""

    steps: int
    wall_s: float
    step_s: list[float]
    energy_j: float | None  # the energy counter's difference over the block; None without a meter


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(blocks: list[Block], *, batch_size: int, flops_per_step: float | None = None,
              peak_mem_gib: float | None = None) -> VariantFigures:
    """A variant's figures from its timed blocks. Energy is None when any block has no reading, or when the
    counter did not advance (a block shorter than its update interval is no reading)."""
    rates = [b.steps / b.wall_s for b in blocks]
    all_steps = [s for b in blocks for s in b.step_s]
    total_steps, total_wall = sum(b.steps for b in blocks), sum(b.wall_s for b in blocks)
    slow_limit = percentile(all_steps, 50) * SLOW_STEP_FACTOR
    slow = [s for s in all_steps if s > slow_limit]
    energies = [b.energy_j for b in blocks]
    energy = None if None in energies else sum(energies)
    if energy is not None and energy <= 0:
        energy = None
    steps_per_s = statistics.median(rates)
    return VariantFigures(
        steps=total_steps, steps_per_s=steps_per_s, steps_per_s_min=min(rates), steps_per_s_max=max(rates),
        samples_per_s=steps_per_s * batch_size,
        latency_ms_p50=percentile(all_steps, 50) * 1e3, latency_ms_p95=percentile(all_steps, 95) * 1e3,
        block_s=statistics.median(b.wall_s for b in blocks), peak_mem_gib=peak_mem_gib,
        spread_pct=(max(rates) - min(rates)) / steps_per_s * 100, slow_steps=len(slow),
        slow_time_pct=sum(slow) / sum(all_steps) * 100 if all_steps else 0.0,
        power_w=None if energy is None else energy / total_wall,
        energy_j_per_step=None if energy is None else energy / total_steps,
        energy_j_per_sample=None if energy is None else energy / (total_steps * batch_size),
        samples_per_j=None if energy is None else total_steps * batch_size / energy,
        tflops=None if flops_per_step is None else flops_per_step * steps_per_s / 1e12)


def peak_shares(v: VariantFigures, peak: Any, precision: str, weight_bytes: int | None,
                inference: bool) -> tuple[dict[str, float], dict[str, str]]:
    """(peak_pct and weights_bw_pct that can be worked out, {figure: why not} for those that cannot).

    `peak` is the GPU's tcore.peaks.Peak, or None for a CPU or a GPU not in the table.
    """
    if peak is None:
        why = "no peak figures for this device (tcore.peaks lists the common data-centre GPUs)"
        return {}, {"peak_pct": why, "weights_bw_pct": why}
    shares, missing = {}, {}
    if v.tflops is not None:
        shares["peak_pct"] = 100 * v.tflops / peak.tflops(precision)
    else:
        missing["peak_pct"] = "the FLOPs per step are not known for this run"
    if inference and weight_bytes and v.steps_per_s:
        shares["weights_bw_pct"] = 100 * weight_bytes * v.steps_per_s / (peak.mem_tb_s * 1e12)
    else:
        missing["weights_bw_pct"] = "a training step moves gradients and optimizer state too: not estimated"
    return shares, missing


def compile_totals(events: list[dict[str, Any]] | None) -> dict[str, Any]:
    """How many compilations a run did and how long they took in all, from its compile events."""
    done = [e for e in events or [] if e.get("kind") in ("compile", "recompile")]
    return {"compilations": len(done), "compiling_s": sum(e.get("duration_s") or 0 for e in done) if done else None}


def energy_error_pct(blocks: list[Block], update_s: float) -> float:
    """The expected error of a variant's summed energy, as a share of it, from a counter updating every `update_s`.

    Each block's start and end readings lag the truth by up to one update (uniformly, if the block
    does not line up with the counter): the difference of two such lags has a variance of
    update_s**2 / 6, so n blocks of T seconds in all, at steady power, are off by update_s * sqrt(n / 6) / T.
    """
    total_s = sum(b.wall_s for b in blocks)
    return 100 * update_s * math.sqrt(len(blocks) / 6) / total_s


def speedup(eager: VariantFigures, compiled: VariantFigures) -> float:
    return compiled.steps_per_s / eager.steps_per_s


def round_speedups(eager: list[Block], compiled: list[Block]) -> list[float]:
    """Compiled over eager throughput, round by round: each round's two blocks ran back to back."""
    return [(c.steps / c.wall_s) / (e.steps / e.wall_s) for e, c in zip(eager, compiled)]


def slow_step_places(blocks: list[Block], limit: int = 12) -> list[dict[str, Any]]:
    """Where the slow steps were: round, step within its block, and how many median steps each took."""
    median_s = percentile([s for b in blocks for s in b.step_s], 50)
    return [{"round": r, "step": i, "ms": round(s * 1e3, 3), "times_median": round(s / median_s, 1)}
            for r, b in enumerate(blocks) for i, s in enumerate(b.step_s)
            if s > median_s * SLOW_STEP_FACTOR][:limit]


def paired_figures(estimate: paired.Paired) -> dict[str, Any]:
    """The run figures of a paired estimate, as stored columns."""
    return {"speedup": estimate.speedup, "speedup_low": estimate.low, "speedup_high": estimate.high,
            "speedup_pm_pct": estimate.half_width_pct, "paired_rounds": estimate.rounds,
            "speedup_confidence_pct": None if estimate.confidence is None else 100 * estimate.confidence}


def upgrade_result(result: dict[str, Any]) -> dict[str, Any]:
    """A stored result in today's figures: one stored before paired rounds had the ratio of median throughputs
    as its speedup; it keeps that as speedup_of_medians and gets the paired speedup from its stored blocks."""
    if "speedup_low" in result or result.get("speedup") is None:
        return result
    estimate = paired.from_record(result)
    if estimate is None:
        return result
    result = dict(result)
    result["speedup_of_medians"] = result["speedup"]
    result.update(paired_figures(estimate))
    result["speedup_recomputed"] = True  # said beside the figure: the run predates paired headlines
    return result


def speedup_words(result: Mapping[str, Any]) -> str | None:
    """How the headline speedup was made, in a sentence: 'The median of 12 paired rounds ...'."""
    if result.get("speedup") is None:
        return None
    n, low, high = result.get("paired_rounds"), result.get("speedup_low"), result.get("speedup_high")
    if n is None:
        return f"Speedup {result['speedup']:.2f}x: compiled throughput over eager (medians of the rounds)."
    words = (f"Speedup {result['speedup']:.2f}x: the median of {n} paired round{'s' if n != 1 else ''}' ratios "
             "(each round times eager and compiled back to back, so drift in the machine's speed cancels)")
    if low is not None:
        cover = result.get("speedup_confidence_pct")
        words += (f"; {cover:.0f}% interval {low:.2f}–{high:.2f}x (± {result['speedup_pm_pct']:.1f}%), "
                  "from the rounds' order statistics")
    else:
        words += "; one round gives no interval"
    medians = result.get("speedup_of_medians")
    if medians is not None and abs(medians / result["speedup"] - 1) > 0.02:
        words += f". The ratio of the two median throughputs, unpaired, reads {medians:.2f}x"
    if result.get("speedup_recomputed"):
        words += " (recomputed from this older run's stored rounds)"
    return words + "."


def noise_reasons(result: Mapping[str, Any]) -> list[str]:
    """Why a run's headline should not be read as solid, in sentences; empty when nothing says so.

    A run with a paired interval is judged by its width: a variant's rounds may move together with the
    machine (a launch-bound model follows the host CPU) while their ratio holds still. Without one (an
    eager-only run, a single round) the rounds' spread speaks.
    """
    reasons = []
    width = result.get("speedup_pm_pct")
    if width is not None and width > paired.WIDE_PCT:
        reasons.append(f"the speedup's interval is too wide to trust: {result['speedup_low']:.2f}–"
                       f"{result['speedup_high']:.2f}x (± {width:.0f}%, over ± {paired.WIDE_PCT:g}%) over "
                       f"{result.get('paired_rounds')} paired rounds")
    for v in result.get("variants") or ["eager"]:
        spread = result.get(f"{v}_spread_pct")
        if width is None and spread is not None and spread > NOISY_SPREAD_PCT:
            reasons.append(f"the {v} rounds disagree by {spread:.0f}% ({result[f'{v}_steps_per_s_min']:.3g} to "
                           f"{result[f'{v}_steps_per_s_max']:.3g} steps/s)")
        slow_pct = result.get(f"{v}_slow_time_pct")
        if slow_pct is not None and slow_pct > SLOW_TIME_PCT:
            reasons.append(f"{result[f'{v}_slow_steps']} {v} step(s) took over {SLOW_STEP_FACTOR:g}x the median step "
                           f"and {slow_pct:.0f}% of its timed time")
    busy = result.get("busy_cores")
    if busy is not None and busy > BUSY_CORES:
        reasons.append(f"other processes kept {busy:.1f} CPU cores busy while it was timed")
    sharing = result.get("gpu_processes")
    if sharing is not None and sharing > 1:
        reasons.append(f"{sharing - 1} other process(es) computed on this GPU while it was timed")
    return reasons


def told_apart(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool | None:
    """Whether two runs' speedups differ beyond their intervals; None when either run has no interval."""
    return paired.apart(a, b)


def disagreement(result: Mapping[str, Any]) -> str | None:
    """When throughput and median steps tell different stories, which steps make the difference."""
    by_rate, by_step = result.get("speedup"), result.get("speedup_p50")
    if by_rate is None or by_step is None or abs(by_step / by_rate - 1) * 100 <= DISAGREE_PCT:
        return None
    slow = [f"{result.get(f'{v}_slow_steps')} slow {v} step(s), {result.get(f'{v}_slow_time_pct'):.0f}% of its time"
            for v in ("eager", "compiled") if result.get(f"{v}_slow_steps")]
    why = ("; ".join(slow) + " count in throughput but not in the median step") if slow else \
        "the rounds differ more than the steps within them: the machine's speed changed between rounds"
    return (f"By throughput compiled is {by_rate:.2f}x eager, by its median step {by_step:.2f}x: {why}. "
            f"Throughput is what a long job gets; the median step, what a typical step costs.")


def breakeven_steps(compile_s: float, eager: VariantFigures, compiled: VariantFigures) -> float | None:
    """Steps after which the compiled model has made up its compile time; None if it never does."""
    saved_s = 1 / eager.steps_per_s - 1 / compiled.steps_per_s
    return compile_s / saved_s if saved_s > 0 else None
