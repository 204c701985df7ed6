"""One experiment, in this process: the torch settings it asks for, the power meter, then its phases.

The worker process calls run(); nothing else should, because cold compile time means a fresh
process with fresh Inductor and Triton cache directories (the lab side's launcher sets those up).
The phases (build, eager warm-up, compile, compiled warm-up, timed blocks, profile) are the methods of
tcore.worker.measurement.Measurement, or of tcore.worker.generate_measurement.GenerateMeasurement for a generation run.
"""
from __future__ import annotations

from typing import IO, Any

import torch

from tcore.experiment.device import check_on_device, resolve_device
from tcore.experiment.spec import INDUCTOR_OPTIONS, PRECISIONS, Experiment
from tcore.host.power import PowerSampler, open_meter
from tcore.worker import diagnostics, envinfo
from tcore.worker.compile import graph_break_errors
from tcore.worker.device_lease import DeviceLease
from tcore.worker.generate_measurement import GenerateMeasurement
from tcore.worker.measurement import Measurement
from tcore.worker.phases import Emit


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
