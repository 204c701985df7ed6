"""Derived figures: pure arithmetic over measured numbers (throughput, latency percentiles, energy per step,
speedup, break-even, shares of the peak), so it is unit-tested on the CPU."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping

from tcore.figures import paired
from tcore.figures.fields import SLOW_STEP_FACTOR, VariantFigures


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

    `peak` is the GPU's tcore.host.peaks.Peak, or None for a CPU or a GPU not in the table.
    """
    if peak is None:
        why = "no peak figures for this device (the lab knows the common data-centre GPUs' peaks)"
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


def change_pct(result: Mapping[str, Any], key: str) -> float | None:
    """Compiled over eager of one per-variant figure as a percentage change (+88 for 1.88x), from the two stored
    values a page shows side by side; None when either is missing."""
    eager, compiled = result.get(f"eager_{key}"), result.get(f"compiled_{key}")
    return None if not eager or compiled is None else (compiled / eager - 1) * 100


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
    as its speedup; it keeps that as speedup_of_medians and gets the paired speedup from its stored blocks. Its
    break-even follows the headline (headline_breakeven)."""
    if "speedup_low" in result or result.get("speedup") is None:
        return _breakeven_upgraded(result)
    estimate = paired.from_record(result)
    if estimate is None:
        return _breakeven_upgraded(result)
    result = dict(result)
    result["speedup_of_medians"] = result["speedup"]
    result.update(paired_figures(estimate))
    result["speedup_recomputed"] = True  # said beside the figure: the run predates paired headlines
    return _breakeven_upgraded(result)


def gpu_time_samples_per_s(category_ms: dict[str, float], batch_size: int, overlap_ms: float = 0.0) -> float | None:
    """Samples per second on the GPU's time alone: the batch over a profiled step's kernel time, its categories
    less the idle gaps and less the time kernels overlapped on several streams (tcore.figures.breakdown). None without
    kernel time."""
    busy_ms = sum(ms for k, ms in category_ms.items() if k != "idle" and ms is not None) - overlap_ms
    return batch_size * 1e3 / busy_ms if busy_ms > 0 else None


def breakeven_steps(compile_s: float, eager_step_s: float, speedup: float) -> float | None:
    """Steps after which the compiled model has made up its compile time; None if it never does. It follows the
    headline: a compiled step takes the eager step (its median) over the speedup (the paired estimate), so a run
    whose headline says compiled is slower never pays back, whatever its unpaired medians say."""
    saved_s = eager_step_s - eager_step_s / speedup if speedup > 0 else 0.0
    return compile_s / saved_s if saved_s > 0 else None


NEVER_PAYS = "the compiled variant is not faster, so compiling never pays back"
# A result whose compiled variant ran eager's own kernels (eager_kernels_only: backend eager or aot_eager) has no
# break-even: its speedup is not a compiled one.
EAGER_KERNELS_NO_PAYBACK = ("this backend runs eager's own kernels, so its speedup is not a compiled speedup and there "
                            "is no compile to pay back")


def headline_breakeven(result: Mapping[str, Any]) -> float | None:
    """A stored result's break-even from its headline speedup, compile time and eager throughput; the stored figure
    where those are not all stored."""
    speedup, compile_s, eager_sps = result.get("speedup"), result.get("compile_s"), result.get("eager_steps_per_s")
    if (speedup is not None and speedup <= 1) or result.get("eager_kernels_only"):
        return None
    if speedup is None or compile_s is None or not eager_sps:
        return result.get("breakeven_steps")
    return breakeven_steps(compile_s, 1 / eager_sps, speedup)


def _breakeven_upgraded(result: dict[str, Any]) -> dict[str, Any]:
    """A stored result whose break-even follows its headline (one stored before break-even did came from the
    unpaired medians, and could say "never pays back" beside a 1.1x headline, or 1,554 steps beside 0.74x)."""
    steps, stored = headline_breakeven(result), result.get("breakeven_steps")
    if steps is not None and stored is not None and abs(steps - stored) <= 1e-3 * stored:
        return result  # the same figure, from the stored (rounded) inputs: the record keeps what the page showed
    return with_headline_breakeven(result)


def with_headline_breakeven(result: dict[str, Any]) -> dict[str, Any]:
    """`result` with its break-even made from its headline as it stands (headline_breakeven): a headline restated
    from the stored rounds (tcore.figures.rerun.restate) carries its own break-even, which near 1x moves far with
    the fourth digit of the speedup."""
    steps, stored = headline_breakeven(result), result.get("breakeven_steps")
    if "breakeven_steps" not in result or steps == stored:
        return result
    result = dict(result)
    result["breakeven_steps"] = steps
    unavailable = dict(result.get("unavailable") or {})
    if steps is None and result.get("eager_kernels_only"):
        unavailable["breakeven_steps"] = EAGER_KERNELS_NO_PAYBACK
    elif steps is None:
        unavailable.setdefault("breakeven_steps", NEVER_PAYS)
    else:
        unavailable.pop("breakeven_steps", None)
    result["unavailable"] = unavailable
    return result


def decode_read_bytes(weight_bytes: int, kv_bytes: int, static: bool, prompt: int, new: int) -> float:
    """Bytes one decode step reads: the weights once, and the KV cache. A static cache is read whole at every step
    (attention masks the slots not yet written); a dynamic one holds prompt + i tokens at step i, so on average
    (prompt + new / 2) / (prompt + new) of what it holds at the end (`kv_bytes`)."""
    if static:
        return weight_bytes + kv_bytes
    return weight_bytes + kv_bytes * (prompt + new / 2) / (prompt + new)


def read_tb_s(read_bytes: float, steps_per_s: float) -> float:
    """The bandwidth, in TB/s, that reading `read_bytes` per step at `steps_per_s` uses."""
    return read_bytes * steps_per_s / 1e12


def bandwidth_pct(read_bytes: float, steps_per_s: float, peak_tb_s: float) -> float:
    """The share of a memory bandwidth (a datasheet's or a measured one, TB/s) that reading `read_bytes` per step at
    `steps_per_s` uses."""
    return 100 * read_tb_s(read_bytes, steps_per_s) / peak_tb_s


def decode_bandwidth(read_bytes: float, steps_per_s: float, measured_tb_s: float | None,
                     datasheet_tb_s: float | None) -> dict[str, float | None]:
    """A decode step's read rate (decode_tb_s) and its share of each yardstick: the bandwidth measured on the GPU
    (decode_bw_measured_pct) and the datasheet's (decode_bw_pct); None where that yardstick is None."""
    return {"decode_tb_s": read_tb_s(read_bytes, steps_per_s),
            "decode_bw_measured_pct": None if measured_tb_s is None else bandwidth_pct(read_bytes, steps_per_s,
                                                                                       measured_tb_s),
            "decode_bw_pct": None if datasheet_tb_s is None else bandwidth_pct(read_bytes, steps_per_s,
                                                                               datasheet_tb_s)}


def copy_bandwidth_tb_s(buffer_bytes: int, copies: int, elapsed_ms: float) -> float:
    """A device-to-device copy's bandwidth in TB/s, as STREAM and nvbandwidth count it: each copy reads the buffer
    and writes it, so it moves twice its bytes."""
    return 2 * buffer_bytes * copies / (elapsed_ms / 1e3) / 1e12


def same_tokens_pct(eager: list[list[int]], compiled: list[list[int]]) -> float:
    """The share of positions where two generations (sequences of token ids) chose the same token."""
    pairs = [(a, b) for e, c in zip(eager, compiled) for a, b in zip(e, c)]
    return 100 * sum(a == b for a, b in pairs) / len(pairs) if pairs else 0.0
