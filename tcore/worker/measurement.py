"""One experiment in the worker process: run() sets torch up as the experiment asks, starts the power meter, then
measures its phases, in order, as methods of Measurement (build, eager warm-up, compile, compiled warm-up, timed
blocks, derive, whose figures go to the lab at once as the headline, profile), or of
tcore.worker.generate_measurement.GenerateMeasurement for a generation run. The arithmetic on what the phases measure
is tcore.figures.

The worker process calls run(); nothing else should, because cold compile time means a fresh process with fresh
Inductor and Triton cache directories (the lab side's launcher sets those up).
"""
from __future__ import annotations

import statistics
import traceback
from collections import Counter
from contextlib import nullcontext
from typing import IO, Any

import torch

from tcore import figures
from tcore.experiment.device import check_on_device, resolve_device
from tcore.experiment.spec import INDUCTOR_OPTIONS, PRECISIONS, Experiment
from tcore.figures import Result, breakdown
from tcore.host.power import PowerMeter, PowerSampler, open_meter
from tcore.worker import compile_artifacts, diagnostics, envinfo, failures, profiling, shapes
from tcore.worker.build import (
    Step,
    Workload,
    build,
    clone,
    compare,
    compile_errors,
    eager,
    restore,
    snapshot,
    step_fn,
)
from tcore.worker.compile import apply_compile, block_shapes, graph_break_errors, optimizer_step
from tcore.worker.device_lease import DeviceLease
from tcore.worker.generate_measurement import GenerateMeasurement
from tcore.worker.phases import Emit
from tcore.worker.rounds import StepRounds
from tcore.worker.timing import (
    PeakMemory,
    no_gc,
    pinned_launch_thread,
    timed_call,
)


def compiles_on_device(exp: Experiment) -> bool:
    """Whether the compile itself works on the GPU all along, so the device stays held through it: the max-autotune
    modes benchmark every matmul and convolution choice while they lower; freezing folds the weights there."""
    return exp.mode.startswith("max-autotune") or exp.freezing


class Measurement(StepRounds):
    """The phases of one run, in order; each fills its part of `self.result`."""

    def __init__(self, exp: Experiment, device: str, meter: PowerMeter, emit: Emit,
                 sampler: PowerSampler | None, env: dict[str, Any], lease: DeviceLease | None = None) -> None:
        super().__init__(exp, device, meter, emit, sampler, env, lease, compiles=exp.has_compiled_variant)

    def measure(self, breaks: diagnostics.BreakRecorder) -> Result:
        lease = self.lease
        # The build makes the weights and inputs on the device (initialising kernels, copies): work that would land in
        # another run's timed rounds, so it holds the device too, with the eager warm-up after it. Each phase that holds
        # the device alone runs on the cores kept for its holder (tcore.lab.queue.room): the eager warm-up gives the
        # step that compile time is measured against, the profile the idle share.
        with lease.hold("eager"):
            self.phase("building")
            w = build(self.exp, self.device)
            failures.note_workload(w.model, w.batches[0].inputs)
            eager_step = step_fn(w.model, w, self.exp, self.device, w.optimizer and w.optimizer.step)
            self._describe(w)
            with pinned_launch_thread(self.device, lease.measure_cpus):
                eager_out = self.eager_warmup(w, eager_step)
        compiled_step, recompiles_before = None, 0
        if self.exp.has_compiled_variant:
            # The device is let go while Dynamo and Inductor compile (CPU work), held for what the compiled code runs;
            # held throughout where the compile itself works on the GPU (freezing, max-autotune's benchmarks).
            with lease.compiling("compiled", firm=compiles_on_device(self.exp)):
                compiled_step = self.compile(w, eager_out)
                self.warm_up(w, eager_step, compiled_step)
            self.schedule_pass(w, eager_step, compiled_step)
            self._record(diagnostics.collect(breaks, lease.compile_waits_s))
            recompiles_before = self.result.run.recompile_count
            self.result.run.cache_artifacts_bytes = compile_artifacts.save()
        else:
            self.result.unavailable["compile_s"] = "nothing is compiled in this run (compile=off)"
        lease.take("compiled")  # the timed rounds: held, and never let go in between
        # The launch thread stays on one core while timing (GPU only): a host-bound variant runs at the launch rate
        # of whichever core the scheduler gives it, and a thread moved between cores mid-run changes that rate. Where
        # the lab keeps cores for the run that holds the device, it is the first of them (tcore.lab.queue.room).
        # Python's cyclic garbage collector stays off while timing, as timeit keeps it: a collection lands in
        # whichever block is running, and a launch-bound step waits for it (steps free their tensors by refcount).
        with pinned_launch_thread(self.device, lease.measure_cpus) as (cpu, why_not), no_gc():
            self.result.details.update(pinned_cpu=cpu, pinned_cpu_words=why_not)
            self.time_blocks(w, eager_step, compiled_step)
        self.derive(recompiles_before)
        self.rerun_interval()
        if compiled_step is not None:  # the compiles so far, for the headline; counted again after the profile
            self.compile_totals()
        self.result.details.update(lease.words())
        # The headline is known now: the lab shows it while the profiler runs (a second or two more). Its interval
        # is from what is known now; the profile's idle share may yet call a variant host-bound, which widens it.
        # The device is let go first: a run waiting to measure goes ahead of this one's profiling pass.
        lease.release()
        self.emit({"type": "headline", "result": self.result.to_record(), "env": self.env})
        with lease.hold("profile"), pinned_launch_thread(self.device, lease.measure_cpus):
            self.profile_or_say_why(w, eager_step, compiled_step)
        if compiled_step is not None:
            self.compile_totals()
        self.rerun_interval()
        self.result.details.update(lease.words())
        return self.result

    def profile_or_say_why(self, w: Workload, eager_step: Step, compiled_step: Step | None) -> None:
        """profile(), whose failure costs the run its breakdown only: the timed figures are known and shown by now,
        so an error in the profiler leaves them in the record, with the profiled figures n/a and the reason."""
        try:
            self.profile(w, eager_step, compiled_step)
        except Exception as e:  # noqa: BLE001 (said in the record, and the traceback goes to the log)
            traceback.print_exception(e)
            self.result.details.pop("breakdown", None)
            why = (f"the profiling pass failed ({type(e).__name__}: {str(e).strip()[:200] or 'no message'}); the "
                   "timed figures above it stand")
            for name in self.result.variants:
                figs = getattr(self.result, name)
                for key in figures.PROFILED:
                    setattr(figs, key, None)
                    self.result.unavailable[f"{name}_{key}"] = why
                for category in breakdown.CATEGORIES:
                    setattr(figs, f"{category}_ms", None)
            self.result.notes.append(f"The breakdown is missing: {why}.")

    def _describe(self, w: Workload) -> None:
        exp, run = self.exp, self.result.run
        run.param_count = sum(p.numel() for p in w.model.parameters())
        self.weight_bytes = sum(t.numel() * t.element_size() for t in (*w.model.parameters(), *w.model.buffers()))
        try:
            run.flops_per_step = w.entry.flops_per_sample(exp.preset, training=exp.task == "training") * exp.batch_size
        except NotImplementedError as e:  # no abstract or small real run counts them: the run goes on without
            run.flops_per_step = None
            self.result.unavailable["flops_per_step"] = f"the FLOPs could not be counted: {e}"
        self.result.details.update(peak_mem_source=PeakMemory(self.device).what, power_source=self.meter.source,
                                   rounds=exp.rounds)
        if w.schedule:
            self.result.details.update(schedule_sizes=w.schedule.sizes, schedule_dim=w.schedule.dim_name,
                                       schedule_buckets=w.schedule.buckets)
            self.result.unavailable["flops_per_step"] = ("the shapes vary: FLOPs are counted at the preset's default "
                                                         "shape only")
            run.flops_per_step = None

    def eager_warmup(self, w: Workload, eager_step: Step):
        """Untimed eager steps; the first pays for allocation and kernel selection, later ones are the steady state.

        Returns the reference output for the correctness check (None for training, which compares later).
        """
        self.phase("eager")
        times = []
        for i in range(self.exp.warmup_steps):
            times.append(timed_call(lambda: eager_step(w.batches[0]), self.device)[1])
            self.progress("eager", i + 1, self.exp.warmup_steps)
        run = self.result.run
        run.eager_first_call_s, run.eager_step_s = times[0], statistics.median(times[1:] or times)
        self.result.details["eager_warmup_ms"] = [round(t * 1e3, 2) for t in times]
        # The first figure on screen: a warm-up step, not the timed figure (that comes from the paired rounds).
        self.emit({"type": "figure", "name": "eager_step_s", "value": run.eager_step_s,
                   "samples_per_s": self.exp.batch_size / run.eager_step_s if run.eager_step_s else None})
        return None if w.optimizer else clone(eager_step(w.compiled_batches[0]))

    def compile(self, w: Workload, eager_out) -> Step:
        """The first compiled call: compile time is its duration minus one eager step."""
        exp, run = self.exp, self.result.run
        self.phase("compiling")
        self.result.details["cache_artifacts"], cache_note = compile_artifacts.load(self.env)
        if cache_note:
            self.result.notes.append(cache_note)
        diagnostics.reset()
        with compile_errors():
            blocks = w.entry.repeated_blocks(w.model)
            if blocks:  # whether one compiled block could serve its copies: what a regional compile would reuse
                self.result.details["repeated_block_shapes"] = block_shapes(blocks)
            # class -> copies: the page says what was compiled and what shares it
            if exp.compile in ("regional", "hierarchical"):
                self.result.details["regional_blocks"] = dict(Counter(type(b).__name__ for b in blocks))
                self.result.details["regional_call"] = ("nested_compile_region" if exp.compile == "hierarchical"
                                                        else w.entry.repeated_call or "block.compile")
            target = apply_compile(w.model, exp, blocks, w.entry.repeated_call)
            opt_step = optimizer_step(w.optimizer, exp) if w.optimizer else None
            compiled_step = step_fn(target, w, exp, self.device, opt_step)
            if exp.shape_remedy == "mark_dynamic":
                shapes.mark_dynamic(w.compiled_batches[0], w.dims)
            saved = snapshot(w.model) if w.optimizer else None
            waited = self.lease.idle_s
            with diagnostics.progress_events(self.emit):
                compiled_out, first_call_s = timed_call(lambda: compiled_step(w.compiled_batches[0]), self.device)
            # what the call would have taken alone: the time it waited for the device, or was held still while another
            # run was timed, is not the compile's
            waited = self.lease.idle_s - waited
            run.compiled_first_call_s = max(first_call_s - waited, 0.0)
            self.result.details["first_call_device_wait_s"] = round(waited, 3)
            compiled_out = clone(compiled_out)
        # Dynamo's timers for the first call alone, for the run's timeline (tcore.figures.timeline)
        self.result.details["first_call_phases_s"] = diagnostics.phase_split_s(diagnostics.metrics(),
                                                                               self.lease.compile_waits_s)
        run.compile_s = max(run.compiled_first_call_s - run.eager_step_s, 0.0)
        self.emit({"type": "figure", "name": "compile_s", "value": run.compile_s})  # final: shown before the rest
        if w.optimizer:
            # The step changed the weights: rerun it eagerly from the same weights to compare outputs
            # (the output is computed before the optimizer step, so optimizer state does not matter).
            restore(saved)
            del saved
            with eager():
                eager_out = clone(compiled_step(w.compiled_batches[0]))
        checked = compare(compiled_out, eager_out, exp.precision)
        run.correctness_rel_diff = checked.pop("correctness_rel_diff")
        self.result.details.update(checked)
        return compiled_step

    def warm_up(self, w: Workload, eager_step: Step, compiled_step: Step) -> None:
        """Untimed compiled steps (every bucket first, with buckets), then one pass over any shape schedule."""
        self.phase("warmup")
        with compile_errors():
            if w.schedule and w.schedule.buckets:  # compile every bucket before the schedule starts
                for size in w.schedule.buckets:
                    first = next(b for b, s in zip(w.compiled_batches, w.schedule.sizes)
                                 if w.schedule.padded(s) == size)
                    compiled_step(first)
            for i in range(self.exp.warmup_steps):
                compiled_step(w.compiled_batches[0])
                self.progress("warmup", i + 1, self.exp.warmup_steps)

    def schedule_pass(self, w: Workload, eager_step: Step, compiled_step: Step) -> None:
        """With a shape schedule, one pass over it, the device held throughout: each row's compiled step times its
        recompile, and a wait for the device inside it would be timed too."""
        if w.schedule:
            self.lease.take("compiled")
            self.phase("schedule")
            with compile_errors():
                self.result.details["schedule"] = self._first_pass(w, eager_step, compiled_step)

    def _first_pass(self, w: Workload, eager_step: Step, compiled_step: Step) -> list[dict]:
        """One pass over the shape schedule: each size's compiled step (with any compile it triggers)
        and eager step, and which compilations each compiled step caused."""
        rows = []
        for i, (batch, padded, size) in enumerate(zip(w.batches, w.compiled_batches, w.schedule.sizes)):
            seen = len(diagnostics.metrics())
            compiled_s = timed_call(lambda: compiled_step(padded), self.device)[1]
            events = diagnostics.compile_events(diagnostics.metrics()[seen:], 0.0)
            with eager():
                eager_s = timed_call(lambda: eager_step(batch), self.device)[1]
            rows.append({"step": i, "size": size, "padded_to": w.schedule.padded(size), "eager_ms": eager_s * 1e3,
                         "compiled_ms": compiled_s * 1e3,
                         "compiles": [e["compile_id"] for e in events if e["kind"] in ("compile", "recompile")],
                         "hit_limit": any(e["kind"] == "limit" for e in events)})
            self.progress("schedule", i + 1, len(w.batches))
        return rows

    def profile(self, w: Workload, eager_step: Step, compiled_step: Step | None) -> None:
        """A few steady-state steps of each variant under the profiler: kernels per step and where the time goes."""
        self.phase("profiling")
        variants = [("eager", eager_step, w.batches[0])]
        if compiled_step is not None:
            variants.append(("compiled", compiled_step, w.compiled_batches[0]))
        for i, (name, step, batch) in enumerate(variants):
            figs = getattr(self.result, name)
            steps = profiling.steps_to_profile(figs.latency_ms_p50 and figs.latency_ms_p50 / 1e3)
            with eager() if name == "eager" else nullcontext():
                figs.kernels_per_step, found = profiling.profile_steps(lambda: step(batch), self.device, steps, name)
            if found is not None and found.source == "gpu kernels" and not w.schedule and figs.latency_ms_p50:
                found = breakdown.against_timed(found, figs.latency_ms_p50)
            if found is None:
                self.result.unavailable[f"{name}_profiled_step_ms"] = "the profiler recorded no steps"
            else:
                figs.profiled_step_ms = found.step_ms
                for category, ms in found.ms.items():
                    setattr(figs, f"{category}_ms", ms)
                if found.source == "gpu kernels":
                    figs.gpu_time_samples_per_s = figures.gpu_time_samples_per_s(found.ms, self.exp.batch_size,
                                                                                found.overlap_ms)
                self.result.details.setdefault("breakdown", {})[name] = found.to_dict()
            if figs.gpu_time_samples_per_s is None:
                self.result.unavailable[f"{name}_gpu_time_samples_per_s"] = (
                    "on the CPU the host is the device: there is no separate GPU time" if self.device != "cuda"
                    else "the profiler recorded no GPU kernels")
            self.progress("profiling", i + 1, len(variants))


def run(exp: Experiment, emit: Emit, startup: dict[str, float] | None = None,
        answers: IO[str] | None = None) -> dict[str, Any]:
    """Measure `exp`; emit phase, progress, power and code events; return {"result": record, "env": env}.

    startup: how long this process's imports took and how long it then waited for the run, said in the first
    event for the run's timeline (tcore.lab.run.runclock). answers: where the lab grants the device, when other runs
    share it (tcore.worker.device_lease; the worker's stdin)."""
    device = resolve_device(exp.device, torch.cuda.is_available())
    notes = check_on_device(exp, device)
    emit({"type": "started", "device": device, **(startup or {})})
    if exp.model.startswith("file:"):  # what the lab's processes show of it: they never import the file
        from sample_models.sources import file_models

        emit({"type": "model_card", "card": file_models.SOURCES_FILE.describe(exp.model.removeprefix("file:"))})
    notes += _configure_torch(exp, device)
    for text in notes:
        emit({"type": "note", "text": text})
    env = envinfo.collect(device)
    meter = open_meter(device)
    sampler = PowerSampler(meter, lambda s: emit({"type": "power", "samples": s})) if meter.available else None
    if sampler:
        sampler.start()
    try:
        with diagnostics.BreakRecorder().attached() as breaks, diagnostics.generated_code() as sources, \
                graph_break_errors(exp):
            measurement = GenerateMeasurement if exp.task == "generate" else Measurement
            lease = DeviceLease.from_environment(emit, answers) if answers is not None else DeviceLease(emit)
            result = measurement(exp, device, meter, emit, sampler, env, lease).measure(breaks)
    finally:
        if sampler:
            sampler.stop()
        meter.close()
    if sources:
        emit({"type": "code", "sources": sources})
    result.details["generated_graph_count"] = len(sources)
    result.notes[:0] = notes
    return {"result": result.to_record(), "env": env}


def _configure_torch(exp: Experiment, device: str) -> list[str]:
    """Process-wide settings of the experiment (the worker runs one experiment); returns notes on any that
    this torch does not have."""
    notes = []
    dynamo_config = torch._dynamo.config
    # recompile_limit is the current name; cache_size_limit the older alias (same setting)
    setattr(dynamo_config, "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit",
            exp.recompile_limit)
    set_tf32(PRECISIONS[exp.precision].tf32)
    inductor_config = torch._inductor.config
    for field_name, option in INDUCTOR_OPTIONS.items():
        if hasattr(inductor_config, option):
            setattr(inductor_config, option, getattr(exp, field_name))
        else:
            notes.append(f"this torch has no Inductor option {option}: {field_name} did nothing")
    if device == "cpu" and hasattr(inductor_config.cpp, "enable_kernel_profile"):
        # Lets the profiler see Inductor's C++ kernels, for the kernels-per-step count.
        inductor_config.cpp.enable_kernel_profile = True
    return notes


def set_tf32(on: bool) -> None:
    """TF32 for float32 matmuls and convolutions, on or off, through whichever API this torch has.

    torch 2.9 and later: the fp32_precision settings ("tf32" or "ieee"), which mixing with the older
    allow_tf32 flags makes an error; earlier: those flags (cuDNN's defaults to on, cuBLAS's to off).
    """
    value = "tf32" if on else "ieee"
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision") and hasattr(getattr(cudnn, "conv", None), "fp32_precision"):
        matmul.fp32_precision = value
        cudnn.conv.fp32_precision = value
    else:
        matmul.allow_tf32 = on
        cudnn.allow_tf32 = on
