"""One experiment, in this process: eager baseline, compile, warm-up, alternating timed blocks, one result.

The worker process calls run(); nothing else should, because cold compile time means a fresh
process with fresh Inductor and Triton cache directories (tcore.launcher sets those up).
"""
from __future__ import annotations

import itertools
import statistics
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_leaves

import sample_models
from tcore import caches, diagnostics, envinfo, shapes
from tcore.compile import apply_compile, make_optimizer, optimizer_step
from tcore.measure import PeakMemory, VariantStats, sync, time_block, timed_call
from tcore.power import PowerSampler, open_meter
from tcore.spec import Experiment, check_on_device, resolve_device

Emit = Callable[[dict[str, Any]], None]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Largest |compiled - eager| / max|eager| accepted as "the same result": Inductor reorders and
# fuses reductions, and reduced precisions round every intermediate.
TOLERANCE = {"float32": 1e-3, "bfloat16": 5e-2, "float16": 1e-2}
# NVML's energy counter updates about every 100 ms: blocks much shorter than this read coarsely.
ENERGY_BLOCK_MIN_S = 1.0


class CompilePhaseError(RuntimeError):
    """An exception raised while compiling or running compiled code for the first time."""


def _step_fn(model: Callable, entry: sample_models.SampleModel, exp: Experiment, device: str,
             optimizer=None, opt_step=None) -> Callable[[sample_models.Batch], torch.Tensor]:
    """One step on a batch: a forward (inference) or forward, backward and optimizer step (training).

    Returns the model output, detached, so the correctness check can compare variants.
    """
    autocast = (torch.autocast(device_type=device, dtype=DTYPES[exp.dtype])
                if exp.dtype != "float32" else nullcontext())
    mark_step = torch.compiler.cudagraph_mark_step_begin if device == "cuda" else (lambda: None)

    if exp.task == "inference":
        @torch.no_grad()
        def step(batch):
            mark_step()  # CUDA graphs (reduce-overhead) may reuse output memory; say a new step begins
            with autocast:
                return model(*batch.inputs)
        return step

    def train_step(batch):
        mark_step()
        with autocast:
            out = model(*batch.inputs)
            loss = entry.loss(out, batch)
        loss.backward()
        opt_step()
        optimizer.zero_grad(set_to_none=True)
        return out.detach()
    return train_step


def _compare(compiled_out, eager_out, dtype: str) -> dict[str, Any]:
    worst_abs, scale, finite = 0.0, 0.0, True
    for c, e in zip(tree_leaves(compiled_out), tree_leaves(eager_out)):
        if not isinstance(c, torch.Tensor):
            continue
        c, e = c.float(), e.float()
        finite &= bool(torch.isfinite(c).all())
        worst_abs = max(worst_abs, (c - e).abs().max().item())
        scale = max(scale, e.abs().max().item())
    rel = worst_abs / max(scale, 1e-12)
    return {
        "correctness_max_abs_diff": worst_abs,
        "correctness_rel_diff": rel,
        "correctness_tolerance": TOLERANCE[dtype],
        "correctness_ok": finite and rel <= TOLERANCE[dtype],
    }


def _clone(out):
    return [t.detach().clone() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _steps_for(exp: Experiment, step_s: float, multiple: int = 1) -> int:
    """Steps per timed block: the experiment's step count, or enough steps to fill its time;
    rounded to a multiple of the schedule length so each block sees every shape equally often."""
    steps = exp.timed_steps // exp.rounds if exp.timed_steps is not None else round(
        exp.timed_s / exp.rounds / max(step_s, 1e-6))
    return max(1, round(steps / multiple)) * multiple


def _configure_torch(exp: Experiment, device: str) -> None:
    dynamo_config = torch._dynamo.config
    # recompile_limit is the current name; cache_size_limit the older alias (same setting)
    setattr(dynamo_config, "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit",
            exp.recompile_limit)
    if device == "cpu" and hasattr(torch._inductor.config.cpp, "enable_kernel_profile"):
        # Lets the profiler see Inductor's C++ kernels, for the kernels-per-step count.
        torch._inductor.config.cpp.enable_kernel_profile = True


def run(exp: Experiment, emit: Emit) -> dict[str, Any]:
    """Measure `exp`; emit phase, progress, power and code events; return the result record."""
    device = resolve_device(exp.device, torch.cuda.is_available())
    notes = check_on_device(exp, device)
    emit({"type": "started", "device": device})
    for text in notes:
        emit({"type": "note", "text": text})
    _configure_torch(exp, device)
    entry = sample_models.get(exp.model)
    env = envinfo.collect(device)
    meter = open_meter(device)
    sampler = PowerSampler(meter, lambda s: emit({"type": "power", "samples": s})) if meter.available else None

    def phase(name: str) -> None:
        emit({"type": "phase", "phase": name})
        if sampler:
            sampler.phase = name

    if sampler:
        sampler.start()
    try:
        with diagnostics.BreakRecorder().attached() as breaks, diagnostics.generated_code() as sources:
            result = _measure(exp, device, entry, meter, phase, emit, breaks, env)
    finally:
        if sampler:
            sampler.stop()
        meter.close()
    if sources:
        emit({"type": "code", "sources": sources})
    result["generated_graph_count"] = len(sources)
    result["notes"] = notes + result["notes"]
    return {"result": result, "env": env}


def _measure(exp, device, entry, meter, phase, emit, breaks, env) -> dict[str, Any]:
    notes: list[str] = []
    unavailable: dict[str, str] = {}
    memory = PeakMemory(device)
    t_start = time.time()

    phase("building")
    torch.manual_seed(exp.seed)
    model = entry.build(exp.preset, device=device, graph_break=exp.graph_break)
    generator = torch.Generator(device).manual_seed(exp.seed)
    schedule = shapes.make_schedule(exp, entry) if exp.shape_count else None
    if schedule:
        dims = shapes.varying_dims(exp, entry)
        batches = [shapes.make_batch(exp, entry, size, device, generator) for size in schedule.sizes]
        # Eager runs each true size; the compiled model, with buckets, sees inputs padded up to a bucket.
        compiled_batches = [shapes.pad(b, dims, schedule.padded(size)) for b, size in zip(batches, schedule.sizes)]
    else:
        batches = [entry.make_batch(exp.preset, exp.batch_size, device=device, generator=generator)]
        compiled_batches = list(batches)
    if exp.channels_last:
        model = model.to(memory_format=torch.channels_last)
        batches = [_channels_last(b) for b in batches]
        compiled_batches = [_channels_last(b) for b in compiled_batches]
    model.train(exp.task == "training")
    optimizer = make_optimizer(model, exp, device) if exp.task == "training" else None
    eager_step = _step_fn(model, entry, exp, device, optimizer, optimizer and optimizer.step)

    phase("eager")
    eager_warmup_s = []
    for i in range(exp.warmup_steps):
        eager_warmup_s.append(timed_call(lambda: eager_step(batches[0]), device)[1])
        emit({"type": "progress", "phase": "eager", "done": i + 1, "total": exp.warmup_steps})
    # The first eager call pays for allocation and kernel selection; later ones are the steady state.
    eager_step_s = statistics.median(eager_warmup_s[1:] or eager_warmup_s)
    eager_out = None if optimizer else _clone(eager_step(compiled_batches[0]))  # the reference output

    result: dict[str, Any] = {
        "device": device,
        "param_count": sum(p.numel() for p in model.parameters()),
        "flops_per_step": entry.flops_per_sample(exp.preset, training=exp.task == "training") * exp.batch_size,
        "eager_first_call_s": eager_warmup_s[0],
        "eager_warmup_ms": [round(t * 1e3, 2) for t in eager_warmup_s],
        "eager_step_s": eager_step_s,
        "peak_mem_source": memory.what,
        "power_source": meter.source,
    }
    if schedule:
        result.update(schedule_sizes=schedule.sizes, schedule_dim=schedule.dim_name, schedule_buckets=schedule.buckets)
        unavailable["flops_per_step"] = "the shapes vary: FLOPs are counted at the preset's default shape only"
        result["flops_per_step"] = None
    eager = VariantStats("eager")
    compiled = VariantStats("compiled") if exp.has_compiled_variant else None
    compiled_step = None

    if compiled is not None:
        phase("compiling")
        result["cache_artifacts"], cache_note = caches.load_in_worker(env)
        if cache_note:
            notes.append(cache_note)
        diagnostics.reset()
        with _compile_errors():
            target = apply_compile(model, exp, entry.repeated_blocks(model))
            opt_step = optimizer_step(optimizer, exp) if optimizer else None
            compiled_step = _step_fn(target, entry, exp, device, optimizer, opt_step)
            if exp.shape_remedy == "mark_dynamic":
                shapes.mark_dynamic(compiled_batches[0], dims)
            snapshot = _snapshot(model) if optimizer else None
            compiled_out, first_call_s = timed_call(lambda: compiled_step(compiled_batches[0]), device)
            compiled_out = _clone(compiled_out)
        result["compiled_first_call_s"] = first_call_s
        result["compile_s"] = max(first_call_s - eager_step_s, 0.0)
        if optimizer:
            # The step changed the weights: rerun it eagerly from the same weights to compare outputs
            # (the output is computed before the optimizer step, so optimizer state does not matter).
            _restore(snapshot)
            del snapshot
            with torch.compiler.set_stance("force_eager"):
                eager_out = _clone(compiled_step(compiled_batches[0]))
        result.update(_compare(compiled_out, eager_out, exp.dtype))
        del compiled_out, eager_out

        phase("warmup")
        compiled_warmup_s = []
        with _compile_errors():
            if schedule and schedule.buckets:  # compile every bucket before the schedule starts
                for size in schedule.buckets:
                    first = next(b for b, s in zip(compiled_batches, schedule.sizes) if schedule.padded(s) == size)
                    compiled_step(first)
            for i in range(exp.warmup_steps):
                compiled_warmup_s.append(timed_call(lambda: compiled_step(compiled_batches[0]), device)[1])
                emit({"type": "progress", "phase": "warmup", "done": i + 1, "total": exp.warmup_steps})
            if schedule:
                phase("schedule")
                result["schedule"] = _first_pass(batches, compiled_batches, schedule, eager_step, compiled_step,
                                                 device, emit)
        result.update(diagnostics.collect(breaks))
        recompiles_before_timing = result["recompile_count"]
        result["cache_artifacts_bytes"] = caches.save_in_worker()
    else:
        unavailable["compile_s"] = "nothing is compiled in this run (compile=off)"

    phase("measuring")
    multiple = len(batches)
    variants = [(eager, _steps_for(exp, eager_step_s, multiple), eager_step, batches)]
    if compiled:
        variants.append((compiled, _steps_for(exp, statistics.median(compiled_warmup_s), multiple),
                         compiled_step, compiled_batches))
    for r in range(exp.rounds):
        for stats, n, step, inputs in variants:
            memory.reset()
            # Eager blocks run with Dynamo told to stand aside, so regional and optimizer compiles
            # (done in place) are off for them; the compiled blocks run as compiled.
            stance = torch.compiler.set_stance("force_eager") if stats is eager else nullcontext()
            cycle = itertools.cycle(inputs)
            with stance:
                stats.blocks.append(time_block(lambda: step(next(cycle)), n, device, meter))
            stats.peak_mem_gib = max(stats.peak_mem_gib or 0.0, memory.peak_gib())
        emit({"type": "progress", "phase": "measuring", "done": r + 1, "total": exp.rounds})
    sync(device)

    result["rounds"] = exp.rounds
    result["variants"] = [stats.name for stats, *_ in variants]
    power_reason = None if meter.available else meter.reason
    for stats in [eager] + ([compiled] if compiled else []):
        result.update(stats.summary(exp.batch_size, power_reason))
        result[f"{stats.name}_block_s"] = statistics.median(b.wall_s for b in stats.blocks)
        if result[f"{stats.name}_energy_j_per_step"] is None:
            for key in ("power_w", "energy_j_per_step", "energy_j_per_sample"):
                unavailable[f"{stats.name}_{key}"] = power_reason or (
                    "the energy counter did not advance over the timed blocks; time longer blocks")
        elif result[f"{stats.name}_block_s"] < ENERGY_BLOCK_MIN_S and meter.source == "nvml":
            notes.append(f"{stats.name} blocks last {result[f'{stats.name}_block_s']:.2f} s; NVML's energy "
                         "counter ticks every ~0.1 s, so energy figures are coarse: raise timed_s")
        if result["flops_per_step"] is not None:
            result[f"{stats.name}_tflops"] = result["flops_per_step"] * result[f"{stats.name}_steps_per_s"] / 1e12

    if compiled:
        result["speedup"] = result["compiled_steps_per_s"] / result["eager_steps_per_s"]
        saved_s = 1 / result["eager_steps_per_s"] - 1 / result["compiled_steps_per_s"]
        # Steps after which the compiled model has made up its compile time; none if it never does.
        result["breakeven_steps"] = result["compile_s"] / saved_s if saved_s > 0 else None
        if result["breakeven_steps"] is None:
            unavailable["breakeven_steps"] = "the compiled model is not faster, so compiling never pays back"
        late = diagnostics.collect()["recompile_count"] - recompiles_before_timing
        if late:
            notes.append(f"{late} recompilation(s) happened during the timed blocks; their cost is in the timings")
        if result["recompile_limit_hit"]:
            notes.append(f"the recompile limit ({exp.recompile_limit}) was hit: from then on Dynamo runs the "
                         "affected code eagerly, so new shapes get no compiled speed")
        if not result["correctness_ok"]:
            notes.append(f"compiled output differs from eager by {result['correctness_rel_diff']:.2g} "
                         f"(relative), above the {exp.dtype} tolerance of {TOLERANCE[exp.dtype]:g}")

        phase("profiling")
        with torch.compiler.set_stance("force_eager"):
            result["eager_kernels_per_step"] = diagnostics.kernels_per_step(lambda: eager_step(batches[0]), device)
        result["compiled_kernels_per_step"] = diagnostics.kernels_per_step(
            lambda: compiled_step(compiled_batches[0]), device)
        result["compile_events"] = diagnostics.compile_events(diagnostics.metrics(), t_start)
    else:
        unavailable["speedup"] = "nothing is compiled in this run (compile=off)"
    result["notes"] = notes
    result["unavailable"] = unavailable
    return result


def _first_pass(batches, compiled_batches, schedule, eager_step, compiled_step, device, emit) -> list[dict]:
    """One pass over the shape schedule: each size's compiled step (with any compile it triggers)
    and eager step, and which compilations each compiled step caused."""
    rows = []
    for i, (batch, padded, size) in enumerate(zip(batches, compiled_batches, schedule.sizes)):
        seen = len(diagnostics.metrics())
        compiled_s = timed_call(lambda: compiled_step(padded), device)[1]
        events = diagnostics.compile_events(diagnostics.metrics()[seen:], 0.0)
        with torch.compiler.set_stance("force_eager"):
            eager_s = timed_call(lambda: eager_step(batch), device)[1]
        rows.append({"step": i, "size": size, "padded_to": schedule.padded(size), "eager_ms": eager_s * 1e3,
                     "compiled_ms": compiled_s * 1e3,
                     "compiles": [e["compile_id"] for e in events if e["kind"] in ("compile", "recompile")],
                     "hit_limit": any(e["kind"] == "limit" for e in events)})
        emit({"type": "progress", "phase": "schedule", "done": i + 1, "total": len(batches)})
    return rows


def _channels_last(batch: sample_models.Batch) -> sample_models.Batch:
    images, *rest = batch.inputs
    return sample_models.Batch((images.contiguous(memory_format=torch.channels_last), *rest), batch.target)


@contextmanager
def _compile_errors():
    """Re-raise anything thrown while compiling or first running compiled code as CompilePhaseError."""
    try:
        yield
    except (torch.OutOfMemoryError, MemoryError):
        raise
    except Exception as e:
        raise CompilePhaseError(f"{type(e).__name__}: {e}") from e


def _snapshot(model) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Copies of the weights and buffers, restored in place so compiled code keeps its tensors."""
    tensors = list(model.state_dict(keep_vars=True).values())
    return tensors, [t.detach().clone() for t in tensors]


@torch.no_grad()
def _restore(snapshot) -> None:
    for tensor, saved in zip(*snapshot):
        tensor.copy_(saved)
