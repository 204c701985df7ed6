"""Every figure of a run, defined once: its title, unit, format, which way is better and what it means; the
thresholds the words on trust use; and the Result the worker fills. tcore.figures re-exports all of it."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from tcore.figures.breakdown import CATEGORIES
from tcore.figures.paired import DISTURBED_PCT

VARIANTS = ("eager", "compiled")
HIGHER, LOWER = "higher", "lower"
# Past these a figure is noise, not a measurement, and the run says so next to its headline.
NOISY_SPREAD_PCT = 10.0   # the timed rounds of a variant disagree by more than this
SLOW_STEP_FACTOR = 3.0    # a step slower than this many median steps is a stall, not the steady state
SLOW_TIME_PCT = 5.0       # ... and such steps took more than this share of the timed time
BUSY_CORES = 0.5          # other processes kept more than this many CPU cores busy while timing
DISAGREE_PCT = 20.0       # throughput and median-step speedups further apart than this need explaining
UNPAIRED_GAP_PCT = 10.0   # the paired headline and the ratio of the two median throughputs further apart than
                          # this: the card shows the headline alone and says why the other differs
# A variant's figures that come from the profiling pass (after the headline): n/a, with one reason, when it fails
PROFILED = ("profiled_step_ms", "kernels_per_step", "gpu_time_samples_per_s")
# A GPU variant is host-bound when the GPU waits on the host for a noticeable share of its steps: then its figure is
# the host CPU's launch rate, which moves between processes (tcore.figures.rerun widens the interval for it).
HOST_IDLE_SHARE = 0.05    # the profiled step's idle share at or above this
HOST_BUSY_PCT = 95.0      # ... or NVML's busy share while timed below this
# Which spread between fresh processes a run's interval takes (tcore.figures.rerun.kind) asks a stronger question: does
# the headline follow the host? A step whose GPU waits a few % of it reads host-bound above in one process and GPU-busy
# in the next, and the kind flipped its width between them; the GPU's own time covers a short wait of the host, so only
# a wait this long moves the headline with the host's speed.
SPREAD_IDLE_SHARE = 0.15  # the profiled step's idle share at or above this
SPREAD_BUSY_PCT = 85.0    # ... or NVML's busy share while timed below this


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
        # Thousands grouped as the sentences beside a figure group them ("14,660", not "14660").
        shown = format(value, "," + self.fmt[1:]) if self.fmt[-1] in "df" else self.fmt % value
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
    gpu_time_samples_per_s: float | None = figure(
        "Throughput on GPU time", "samples/s", "%.1f", HIGHER,
        "Samples per second if the GPU never waited on the host: the batch over the profiled step's kernel time "
        "(the step less its idle gaps). Far above the throughput means the host's launches set the pace.")
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
        "Achieved TFLOP/s over the GPU's dense peak for the precision the matmuls ran in (tcore.host.peaks).")
    weights_bw_pct: float | None = figure(
        "Weight reads, share of memory bandwidth", "%", "%.1f", None,
        "The weights' bytes read once per step, per second, over the GPU's memory bandwidth: a floor on the "
        "bandwidth a step uses (activations come on top); inference only.")
    # Generation (task=generate): a step is one decode step, so steps_per_s is a sequence's tokens per second
    ttft_ms: float | None = figure(
        "Time to first token", "ms", "%.2f", LOWER,
        "The prefill: the prompt read into the KV cache and the first token chosen, median over the timed "
        "generations.")
    decode_tokens_per_s: float | None = figure(
        "Decode speed per sequence", "tokens/s", "%.1f", HIGHER,
        "Tokens one sequence gains per second after its first: decode steps over their time, median of the rounds.")
    tokens_per_s: float | None = figure(
        "Decode throughput", "tokens/s", "%.1f", HIGHER,
        "Tokens per second over the whole batch: the decode speed per sequence times the batch size.")
    decode_ms_per_token: float | None = figure(
        "Decode step", "ms", "%.3f", LOWER, "One decode step (a token for every sequence of the batch), median.")
    energy_j_per_token: float | None = figure(
        "Energy per token", "J", "%.3g", LOWER,
        "The energy counter's difference over the timed generations (prefill included) per generated token.")
    decode_tb_s: float | None = figure(
        "Decode, memory read rate", "TB/s", "%.3f", HIGHER,
        "Bytes a decode step reads (the weights once, less embedding tables it reads a row of, and the KV cache) "
        "times decode steps per second: gpt-fast's 'bandwidth achieved'.")
    decode_bw_pct: float | None = figure(
        "Decode, share of datasheet memory bandwidth", "%", "%.1f", HIGHER,
        "The decode's memory read rate over the GPU's datasheet memory bandwidth (tcore.host.peaks): a bus's peak, "
        "which no kernel reaches.")
    decode_bw_measured_pct: float | None = figure(
        "Decode, share of measured memory bandwidth", "%", "%.1f", HIGHER,
        "The decode's memory read rate over the bandwidth a plain device-to-device copy reached on this GPU in "
        "this run (tcore.worker.membw): how close decoding is to what memory-bound code achieves here.")
    decode_idle_pct: float | None = figure(
        "Decode step, device idle", "%", "%.0f", LOWER,
        "The share of a profiled decode step in which the GPU ran no kernel: waiting on Python and launches. Above "
        "half the step is launch-bound, which CUDA graphs (reduce-overhead) remove.")
    kv_share_pct: float | None = figure(
        "KV cache, share of peak memory", "%", "%.0f", None, "The KV cache's bytes over the variant's peak memory.")
    # Where the time of one profiled step goes (tcore.figures.breakdown): the categories plus the idle make up the step.
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
        "The low end of the speedup's 95% interval for a rerun: the rounds' own interval, the drift between the "
        "run's halves and the spread between fresh processes of this setting (learned from the store's earlier "
        "runs on this machine, or a default), combined (tcore.figures.rerun).")
    speedup_high: float | None = figure(
        "Speedup, interval high", "x", "%.2f", HIGHER, "The high end of the speedup's interval.")
    speedup_pm_pct: float | None = figure(
        "Speedup interval, ±", "%", "%.1f", LOWER,
        "How far the speedup's interval reaches from it, on the wider side: how far a rerun can move.")
    speedup_confidence_pct: float | None = figure(
        "Interval coverage", "%", "%.1f", None, "The confidence of the speedup's interval: 95%, for every run.")
    speedup_rounds_pm_pct: float | None = figure(
        "Rounds' own interval, ±", "%", "%.1f", LOWER,
        "The interval of the paired rounds alone (order statistics, 95% from 6 rounds): the run's inside spread, "
        "which says nothing of what a fresh process would find.")
    speedup_drift_pct: float | None = figure(
        "Drift within the run", "%", "%.1f", LOWER,
        "How far apart the median ratios of the first and the second half of the rounds are.")
    speedup_within_pct: float | None = figure(
        "The run's own spread", "%", "%.1f", LOWER,
        "The standard deviation of the headline that the run's own rounds and drift give: the part of its scatter "
        "that a later run's interval does not count again as spread between processes.")
    speedup_between_pct: float | None = figure(
        "Spread between processes", "%", "%.1f", LOWER,
        "The standard deviation of the headline between fresh processes of this setting that the interval "
        "allows for, beyond each run's own spread: learned from earlier runs on this machine, or a default "
        "(tcore.figures.rerun).")
    speedup_history_runs: int | None = figure(
        "Earlier runs of this setting", "runs", "%d", None,
        "Earlier runs of the same setting on this machine that the spread between processes was learned from.")
    paired_rounds: int | None = figure(
        "Paired rounds", "rounds", "%d", None, "Rounds the headline is made of, each an eager and a compiled block "
        "back to back (those the host disturbed left out).")
    speedup_rounds_left_out: int | None = figure(
        "Rounds left out as disturbed", "rounds", "%d", LOWER,
        f"Timed rounds left out of the headline because a block ran more than {DISTURBED_PCT:g}% slower than its "
        "variant's fastest (tcore.figures.paired.undisturbed): only the host's other work slows a steady loop that "
        "far.")
    speedup_floor: float | None = figure(
        "Fastest blocks' ratio", "x", "%.2f", None,
        "Where the host disturbed too many rounds to leave them out: the ratio of each variant's fastest block, which "
        "the interval was stretched to reach (what the run may read undisturbed).")
    speedup_of_medians: float | None = figure(
        "Speedup of median throughputs", "x", "%.2f", HIGHER,
        "Compiled's median throughput over eager's, the rounds unpaired: the headline before paired rounds; "
        "drift between rounds moves it, since the two medians can come from different rounds.")
    compile_s: float | None = figure(
        "Compile time", "s", "%.1f", LOWER,
        "What compiling cost: the first compiled call minus one eager step (a generate run: the first compiled "
        "generation minus an eager one). The timeline's compile phase is that first call whole, so it is longer.")
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
        "Steps after which compiling has paid for itself: compile time / (eager step time - compiled step time), "
        "where a compiled step is the eager step over the headline speedup.")
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
    # The run's timeline (tcore.figures.timeline), from the submit to the record saved, in three kinds of phase.
    timeline_wall_s: float | None = figure(
        "Submit to result", "s", "%.1f", LOWER,
        "From the moment the run was submitted (the click) to its record being saved, on one monotonic clock.")
    headline_at_s: float | None = figure(
        "Submit to speedup shown", "s", "%.1f", LOWER,
        "From the submit (the click) to the timed figures reaching the lab, which the Run page draws at once: "
        "before the profiling pass and the save, which the submit-to-result time includes.")
    timeline_compile_s: float | None = figure(
        "Compiling, on the timeline", "s", "%.1f", LOWER,
        "The timeline's compile phase: the first compiled call whole (Dynamo, AOT autograd, Inductor, code "
        "generation and its compile, the step itself, the correctness check); the compile time takes the eager "
        "step (a generate run: the eager generation) off it, so it is shorter.")
    timeline_measure_s: float | None = figure(
        "Measuring, on the timeline", "s", "%.1f", None,
        "Eager and compiled warm-ups and the paired timed rounds: what the figures are measured from.")
    lab_overhead_s: float | None = figure(
        "Lab overhead", "s", "%.1f", LOWER,
        "The rest of the timeline: worker start and imports, model build, profiling, handing back and saving, and "
        "any gap nothing measured (the waits for its turn are counted apart).")
    timeline_wait_s: float | None = figure(
        "Waiting for its turn, on the timeline", "s", "%.1f", LOWER,
        "Time in the queue, and time waiting for the GPU while another run held it alone (its warm-up, timed rounds "
        "or profile): the room's share of the wall time, not the lab's.")
    # Generation (task=generate)
    compile_prefill_s: float | None = figure(
        "Compile time, prefill", "s", "%.1f", LOWER,
        "The first compiled prefill minus the eager one: compiling the prompt's graph.")
    compile_decode_s: float | None = figure(
        "Compile time, decode", "s", "%.1f", LOWER,
        "The first compiled generation's decode steps minus eager's: compiling the decode step, any recompiles "
        "as the cache grows, and recording CUDA graphs.")
    ttft_speedup: float | None = figure(
        "Time-to-first-token speedup", "x", "%.2f", HIGHER, "Eager's median prefill time over compiled's.")
    tokens_same_pct: float | None = figure(
        "Tokens equal to eager's", "%", "%.1f", HIGHER,
        "The share of generated tokens that the compiled decoder chose as eager did (greedy, same prompt): 100% "
        "when they generate the same text.")
    kv_cache_gib: float | None = figure(
        "KV cache", "GiB", "%.4f", None,
        "The keys and values the cache holds at the end of a generation (a static cache: all it allocated).")
    decode_recompiles: int | None = figure(
        "Recompilations as the cache grows", "", "%d", LOWER,
        "Recompilations during the first compiled generation's decode steps: none with a static cache.")
    mem_bw_measured_tb_s: float | None = figure(
        "Memory bandwidth, measured", "TB/s", "%.3f", None,
        "A device-to-device copy of a buffer far larger than L2, read and write bytes counted, best of five "
        "CUDA-event timings after a warm-up (STREAM's Copy, nvbandwidth's device-local copy); once per worker.")
    mem_bw_datasheet_tb_s: float | None = figure(
        "Memory bandwidth, datasheet", "TB/s", "%.3g", None,
        "The GPU's memory bandwidth from its vendor's datasheet (tcore.host.peaks).")
    prompt_recompiles: int | None = figure(
        "Recompilations for a new prompt length", "", "%d", LOWER,
        "Recompilations that one more generation, with a prompt one token shorter, caused (after the timing).")


# What a summary of a run shows, in this order: the command line's table, the Run page's "All figures".
SUMMARY_RUN = ("speedup", "speedup_low", "speedup_high", "speedup_pm_pct", "speedup_rounds_pm_pct",
               "speedup_drift_pct", "speedup_between_pct", "paired_rounds", "speedup_of_medians",
               "speedup_min", "speedup_max", "speedup_p50", "compile_s", "breakeven_steps", "graph_count",
               "graph_break_count", "recompile_count", "correctness_rel_diff", "busy_cores", "gpu_processes")
SUMMARY_VARIANT = ("steps_per_s", "samples_per_s", "gpu_time_samples_per_s", "spread_pct", "gpu_busy_pct",
                   "latency_ms_p50", "latency_ms_p95", "slow_steps",
                   "slow_time_pct", "block_s", "peak_mem_gib",
                   "power_w", "energy_j_per_step", "energy_j_per_sample", "samples_per_j", "tflops", "peak_pct",
                   "weights_bw_pct", "kernels_per_step", "profiled_step_ms", *(f"{k}_ms" for k in CATEGORIES))
# A generation run's summary, in place of the two above.
GENERATE_RUN = ("speedup", "speedup_low", "speedup_high", "speedup_pm_pct", "paired_rounds", "ttft_speedup",
                "compile_s", "compile_prefill_s", "compile_decode_s", "tokens_same_pct", "graph_count",
                "graph_break_count", "recompile_count", "decode_recompiles", "prompt_recompiles", "kv_cache_gib",
                "mem_bw_measured_tb_s", "mem_bw_datasheet_tb_s", "busy_cores", "gpu_processes")
GENERATE_VARIANT = ("ttft_ms", "decode_tokens_per_s", "tokens_per_s", "decode_ms_per_token", "spread_pct",
                    "decode_tb_s", "decode_bw_measured_pct", "decode_bw_pct", "decode_idle_pct", "gpu_busy_pct",
                    "peak_mem_gib", "kv_share_pct", "power_w", "energy_j_per_token")


def summary_keys(task: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(run figures, per-variant figures) that a run's summary shows, in order, for its task."""
    return (GENERATE_RUN, GENERATE_VARIANT) if task == "generate" else (SUMMARY_RUN, SUMMARY_VARIANT)


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
