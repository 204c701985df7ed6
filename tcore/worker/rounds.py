"""The timed rounds of a run and the figures derived from them: eager and compiled back to back, the order
alternating, each round's ratio one paired measurement (tcore.figures.paired). StepRounds times a model's steps
(tcore.worker.measurement), DecodeRounds whole generations (tcore.worker.generate_measurement); both lean on
tcore.worker.phases.Phases for what they share.
"""
from __future__ import annotations

import itertools
import statistics
from contextlib import nullcontext

from tcore import figures
from tcore.experiment.spec import PRECISIONS
from tcore.figures import paired, rerun
from tcore.host import peaks
from tcore.worker import diagnostics
from tcore.worker.build import Step, Workload, eager
from tcore.worker.generation import Generation, Generator, new_steps
from tcore.worker.pacing import (
    most_rounds,
    round_seconds,
    settle_seconds,
    steps_per_block,
    stop_timing,
    stop_words,
)
from tcore.worker.phases import Phases
from tcore.worker.timing import PeakMemory, calibrate, sync, time_block

# NVML's energy counter updates about every 100 ms: each block's two readings are blurred by that.
NVML_UPDATE_S = 0.1
# An energy figure whose expected error from that blur is above this gets a note.
ENERGY_ERROR_PCT = 5.0


class StepRounds(Phases):
    """Timed blocks of a model's steps, eager against compiled, and the run's figures from them."""

    def time_blocks(self, w: Workload, eager_step: Step, compiled_step: Step | None) -> None:
        """Rounds of an eager and a compiled block back to back, until the paired speedup is known or the time is up.

        The order alternates between rounds (eager first, then compiled first), so a steady drift of the
        machine's speed favours neither variant. Each round's ratio of the two throughputs is one paired
        measurement (tcore.figures.paired); rounds are added until their interval is within paired.rounds_target
        (the target less room for the spread between processes), or until another would take a variant past
        timed_s. Each variant's blocks are sized from a steady-state calibration, then run untimed until they settle
        (_settle), the first timed one sized from the last of those, each later one from the median step so far,
        so blocks last what was asked whatever the warm-up did.
        """
        self.phase("measuring")
        exp, memory = self.exp, PeakMemory(self.device)
        multiple = len(w.batches)
        variants = [("eager", eager_step, w.batches)]
        if compiled_step is not None:
            variants.append(("compiled", compiled_step, w.compiled_batches))
        target_s = round_seconds(exp)
        # A block stops launching past 3 rounds' time: on a machine that slows many-fold mid-block, sizing from
        # the steps before cannot hold it to its time (a loaded CPU can take minutes over a block sized for 0.2 s).
        deadline = None if exp.timed_steps is not None else 3 * target_s
        step_s = {name: self._steady_step_s(name, step, inputs, target_s) for name, step, inputs in variants}
        self._settle(variants, step_s, multiple, deadline)
        self.host_at_rest()
        self.blocks = {name: [] for name, *_ in variants}
        load = self.load_beside()
        sharing, ratios, why, busy = [], [], None, {}
        while why is None:
            done = len(self.blocks["eager"])
            for name, step, inputs in variants if done % 2 == 0 else variants[::-1]:
                sharing.append(self.meter.compute_processes())
                memory.reset()
                cycle = itertools.cycle(inputs)
                n = steps_per_block(exp, step_s[name], multiple)
                with eager() if name == "eager" else nullcontext():
                    block = time_block(lambda: step(next(cycle)), n, self.device, self.meter, deadline)
                self.blocks[name].append(block)
                busy.setdefault(name, []).append(self.meter.utilization_pct())
                # The next block is sized from the median step so far: a stall does not shrink it.
                step_s[name] = statistics.median(s for b in self.blocks[name] for s in b.step_s)
                self.peak_gib[name] = max(self.peak_gib.get(name, 0.0), memory.peak_gib())
            done += 1
            self.host.round_done()
            spent = max(sum(b.wall_s for b in blocks) for blocks in self.blocks.values())
            typical = max(statistics.median(b.wall_s for b in blocks) for blocks in self.blocks.values())
            if compiled_step is not None:
                self.round_done(ratios, done)
            why = stop_timing(exp, done, ratios, spent, typical)
            self.progress("measuring", done, done if why else max(most_rounds(exp), done + 1))
        sync(self.device)
        self.rounds_beside(load, sharing, busy)
        self.host_during_rounds()
        self.result.details.update(block_target_s=None if exp.timed_steps is not None else target_s,
                                   timed_stop=why, timed_stop_words=stop_words(exp, why, ratios, spent),
                                   blocks={name: [[b.steps, round(b.wall_s, 6)] for b in blocks]
                                           for name, blocks in self.blocks.items()})

    def _settle(self, variants: list, step_s: dict[str, float], multiple: int, deadline: float | None) -> None:
        """Untimed blocks of each variant, the rounds' size and order, until each runs steady (paired.steady) or has
        spent pacing.settle_seconds(): the timed rounds then begin on a machine that has stopped speeding up (the
        GPU's clocks, the host's launch thread). What happened is kept in details["settle"], and a note says so where
        a variant was still changing."""
        most_s = settle_seconds(self.exp, self.device)
        if most_s <= 0:
            return
        by_name = {name: (step, inputs) for name, step, inputs in variants}

        def one(name: str) -> tuple[float, float]:
            step, inputs = by_name[name]
            cycle = itertools.cycle(inputs)
            with eager() if name == "eager" else nullcontext():
                block = time_block(lambda: step(next(cycle)), steps_per_block(self.exp, step_s[name], multiple),
                                   self.device, self.meter, deadline)
            step_s[name] = statistics.median(block.step_s)  # the first timed block's size, from the steady state
            return block.wall_s / block.steps, block.wall_s

        self.settle(one, {name: [] for name in by_name}, dict.fromkeys(by_name, 0.0), most_s)

    def _steady_step_s(self, name: str, step: Step, inputs: list, target_s: float) -> float:
        """A steady-state step of one variant, for sizing its first block (nothing to size with timed_steps)."""
        if self.exp.timed_steps is not None:
            return 0.0
        cycle = itertools.cycle(inputs)
        with eager() if name == "eager" else nullcontext():
            return calibrate(lambda: step(next(cycle)), self.device, at_least_s=min(0.2, target_s / 4),
                             budget_s=target_s)

    def derive(self, recompiles_before: int) -> None:
        """The figures of each variant and of the run, from the timed blocks; notes on what to distrust."""
        exp, result = self.exp, self.result
        power_reason = None if self.meter.available else self.meter.reason
        for name, blocks in self.blocks.items():
            if power_reason:
                blocks = [figures.Block(b.steps, b.wall_s, b.step_s, None) for b in blocks]
            summary = figures.summarize(blocks, batch_size=exp.batch_size, flops_per_step=result.run.flops_per_step,
                                        peak_mem_gib=self.peak_gib[name])
            shares, missing = figures.peak_shares(summary, peaks.lookup(self.env.get("gpu")), exp.precision,
                                                  self.weight_bytes, exp.task == "inference")
            for key, value in shares.items():
                setattr(summary, key, value)
            summary.gpu_busy_pct = self.busy_pct.get(name)
            if summary.gpu_busy_pct is None:
                result.unavailable[f"{name}_gpu_busy_pct"] = "no GPU utilization reading (NVML) on this device"
            result.unavailable.update({f"{name}_{key}": why for key, why in missing.items()})
            setattr(result, name, summary)
            result.details.setdefault("slow_steps", {})[name] = figures.slow_step_places(blocks)
            if summary.energy_j_per_step is None:
                for key in ("power_w", "energy_j_per_step", "energy_j_per_sample"):
                    result.unavailable[f"{name}_{key}"] = power_reason or (
                        "the energy counter did not advance over the timed blocks; time longer blocks")
            elif self.meter.source == "nvml" and (
                    error := figures.energy_error_pct(blocks, NVML_UPDATE_S)) > ENERGY_ERROR_PCT:
                result.notes.append(f"{name} energy may be off by about {error:.0f}%: its {len(blocks)} blocks last "
                                    f"{sum(b.wall_s for b in blocks):.1f} s in all against NVML's ~0.1 s counter "
                                    "updates; raise timed_s for a finer figure")
        if result.compiled is None:
            result.unavailable["speedup"] = "nothing is compiled in this run (compile=off)"
            return
        run = result.run
        self.paired_speedup("the compiled model is not faster, so compiling never pays back")
        run.speedup_p50 = result.eager.latency_ms_p50 / result.compiled.latency_ms_p50
        late = diagnostics.collect()["recompile_count"] - recompiles_before
        if late:
            result.notes.append(f"{late} recompilation(s) happened during the timed blocks; "
                                "their cost is in the timings")
        if result.details.get("recompile_limit_hit"):
            result.notes.append(f"the recompile limit ({exp.recompile_limit}) was hit: from then on Dynamo runs the "
                                "affected code eagerly, so new shapes get no compiled speed")
        if not result.details["correctness_ok"]:
            result.notes.append(f"compiled output differs from eager by {run.correctness_rel_diff:.2g} "
                                f"(relative), above the {exp.precision} tolerance of "
                                f"{PRECISIONS[exp.precision].tolerance:g}")

    def rerun_interval(self) -> None:
        """The headline's interval for a rerun (tcore.figures.rerun), with the default spread between processes: the lab
        restates it with the store's earlier runs of this setting when it records the run."""
        if self.result.compiled is None:
            return
        record = self.result.to_record()
        bound = figures.follows_host(record, self.device)
        rounds = self.headline_rounds()
        for key, value in rerun.figures_of(rerun.interval(rounds.ratios, device=self.device, host_bound=bound,
                                                          left_out=rounds.left_out, floor=rounds.floor,
                                                          gpu=self.env.get("gpu"))).items():
            if key in figures.RUN_FIGURES:
                setattr(self.result.run, key, value)
            else:
                self.result.details[key] = value


class DecodeRounds(Phases):
    """Timed blocks of whole generations, eager against compiled, and the decode figures from them."""

    def time_rounds(self, eager: Generator, compiled: Generator | None) -> None:
        """Rounds of an eager and a compiled block of generations back to back, the order alternating.

        A generation lasts seconds on a large model, far past round_s: a block holds as many whole generations as
        fill round_s (at least one), and the fewest rounds (`rounds`) always run, so the interval has its 95%;
        more are added until it is within paired.rounds_target or timed_s is spent.
        """
        self.phase("measuring")
        exp, memory = self.exp, PeakMemory(self.device)
        variants = [("eager", eager)] + ([("compiled", compiled)] if compiled else [])
        per_block = self._settle(variants)
        self.host_at_rest()
        self.gens: dict[str, list[Generation]] = {name: [] for name, _ in variants}
        self.blocks = {name: [] for name, _ in variants}
        load = self.load_beside()
        ratios, sharing, busy, done = [], [], {}, 0
        while True:
            for name, gen in variants if done % 2 == 0 else variants[::-1]:
                sharing.append(self.meter.compute_processes())
                memory.reset()
                e0 = self.meter.energy_j()
                runs = [gen.run() for _ in range(per_block[name])]
                e1 = self.meter.energy_j()
                self.gens[name] += runs
                steps, wall = sum(new_steps(gen) for _ in runs), sum(g.decode_s for g in runs)
                self.blocks[name].append(figures.Block(steps, wall, [g.decode_s / new_steps(gen) for g in runs],
                                                       None if e0 is None or e1 is None else e1 - e0))
                busy.setdefault(name, []).append(self.meter.utilization_pct())
                self.peak_gib[name] = max(self.peak_gib.get(name, 0.0), memory.peak_gib())
            done += 1
            self.host.round_done()
            spent = max(sum(g.ttft_s + g.decode_s for g in gens) for gens in self.gens.values())
            if compiled:
                self.round_done(ratios, done)
            why = None
            if done >= exp.rounds:
                if ratios and paired.settled(ratios, exp.target_pct, max(exp.rounds, paired.MIN_ROUNDS)):
                    why = "settled"
                elif spent >= exp.timed_s or done >= 4 * most_rounds(exp) or exp.timed_steps is not None:
                    why = "budget"
            self.progress("measuring", done, done if why else max(exp.rounds, done + 1))
            if why:
                break
        self.rounds_beside(load, sharing, busy)
        self.host_during_rounds()
        self.result.details.update(
            timed_stop=why, generations_per_block=per_block,
            timed_stop_words=f"{done} rounds of {', '.join(f'{n} {name}' for name, n in per_block.items())} "
                             f"generation(s) each; " + ("the rounds' interval reached its share of the target."
                                                        if why == "settled" else "the timed seconds were spent."),
            blocks={name: [[b.steps, round(b.wall_s, 6)] for b in blocks] for name, blocks in self.blocks.items()})

    def _settle(self, variants: list[tuple[str, Generator]]) -> dict[str, int]:
        """Generations per block for each variant (enough to fill round_s, one at least, sized from a first untimed
        generation), after untimed blocks of them, the order alternating, until each variant's last decode
        rates agree (paired.steady) or it has run pacing.settle_seconds(). A generation of seconds (Llama-3.2-1B's
        eager) is past that after the first, so it adds nothing there; short ones settle."""
        exp, most_s = self.exp, settle_seconds(self.exp, self.device)
        first = {name: gen.run() for name, gen in variants}
        per_block = {name: max(1, round(round_seconds(exp) / run.total_s)) for name, run in first.items()}
        seen = {name: [run.decode_s / new_steps(gen)] for (name, gen), run in zip(variants, first.values())}
        spent = {name: run.total_s for name, run in first.items()}
        gens = dict(variants)

        def one(name: str) -> tuple[float, float]:
            runs = [gens[name].run() for _ in range(per_block[name])]
            return (sum(r.decode_s for r in runs) / (len(runs) * new_steps(gens[name])),
                    sum(r.total_s for r in runs))

        if most_s > 0:  # else the first generation, which sized the blocks, is all there is
            self.settle(one, seen, spent, most_s)
        return per_block

    def derive(self, eager: Generator, compiled: Generator | None) -> None:
        exp, result, run = self.exp, self.result, self.result.run
        peak = peaks.lookup(self.env.get("gpu"))
        measured = self.yardstick.tb_s
        run.mem_bw_datasheet_tb_s = peak.mem_tb_s if peak else None
        if peak is None:
            result.unavailable["mem_bw_datasheet_tb_s"] = (
                "a GPU that tcore.host.peaks does not list" if self.device == "cuda" else "on the CPU")
        for name, gen in (("eager", eager), ("compiled", compiled)):
            if gen is None:
                continue
            blocks = self.blocks[name]
            summary = figures.summarize([figures.Block(b.steps, b.wall_s, b.step_s, None) for b in blocks],
                                        batch_size=exp.batch_size, peak_mem_gib=self.peak_gib[name])
            summary.ttft_ms = statistics.median(g.ttft_s for g in self.gens[name]) * 1e3
            summary.decode_tokens_per_s = summary.steps_per_s
            summary.tokens_per_s = summary.samples_per_s
            summary.decode_ms_per_token = 1e3 / summary.steps_per_s
            summary.gpu_busy_pct = self.busy_pct.get(name)
            summary.kv_share_pct = 100 * gen.kv_bytes / 2**30 / summary.peak_mem_gib if summary.peak_mem_gib else None
            energies = [b.energy_j for b in blocks]
            if None not in energies and sum(energies) > 0:
                tokens = len(self.gens[name]) * exp.batch_size * gen.new
                summary.energy_j_per_token = sum(energies) / tokens
                summary.power_w = sum(energies) / sum(g.ttft_s + g.decode_s for g in self.gens[name])
            else:
                why = self.meter.reason if not self.meter.available else "the energy counter did not advance"
                for key in ("energy_j_per_token", "power_w"):
                    result.unavailable[f"{name}_{key}"] = why
            read = figures.decode_read_bytes(self.weight_bytes - self.gathered_bytes, gen.kv_bytes, gen.static,
                                             gen.prompt_len, gen.new)
            for key, value in figures.decode_bandwidth(read, summary.steps_per_s, measured,
                                                       run.mem_bw_datasheet_tb_s).items():
                setattr(summary, key, value)
            if peak is None:
                result.unavailable[f"{name}_decode_bw_pct"] = (
                    "no datasheet memory bandwidth: a GPU that tcore.host.peaks does not list"
                    if self.device == "cuda" else "on the CPU: no GPU memory bandwidth to compare with")
            if measured is None:
                result.unavailable[f"{name}_decode_bw_measured_pct"] = self.yardstick.why_not
            setattr(result, name, summary)
        if compiled is None:
            return
        self.paired_speedup("the compiled decoder is not faster, so compiling never pays back")
        run.ttft_speedup = result.eager.ttft_ms / result.compiled.ttft_ms
