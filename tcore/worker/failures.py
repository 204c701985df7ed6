"""A run that fails, said as what the lab knows: the phase it was in, the module and op the error was reported at,
and the inputs it was fed. The raw traceback travels beside this message (the error event's `traceback`), never in
place of it; the worker that hit the error then exits, so no later run shares its process (or a broken CUDA context).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from types import TracebackType

import torch
import torch.nn as nn

from tcore.experiment.protocol import PHASE_TITLES

# A test hook: "PHASE:SECONDS" makes the worker sleep that long as PHASE begins, as a run stuck there would
# (tests/test_timeouts.py checks that the time limit ends it there, and that the record names the phase).
STALL_ENV = "COMPILE_LAB_STALL_IN"
SHOWN_TABLES = 6  # embedding tables named in a message, the smallest first
# After a CUDA error, one eager forward of the same model and batch on the CPU, where an index error is raised at
# the op itself, when the model is small enough for that to be cheap (fp32 on the host: 4 bytes a parameter).
CPU_RERUN_MAX_PARAMS = 2_000_000_000
CPU_RERUN_ENV = "COMPILE_LAB_CPU_RERUN"  # set during that forward: "1"


@dataclass
class Whereabouts:
    """What the worker is doing, kept up to date by tcore.worker.measurement.Measurement."""

    phase: str | None = None
    inputs: list[str] = field(default_factory=list)            # one line per input tensor
    int_max: int | None = None                                 # the largest id in the integer inputs
    tables: list[tuple[str, int]] = field(default_factory=list)  # (embedding, rows), smallest first


HERE = Whereabouts()


def entered(phase: str) -> None:
    HERE.phase = phase
    stall = os.environ.get(STALL_ENV, "")
    if stall.partition(":")[0] == phase:
        time.sleep(float(stall.partition(":")[2] or 3600))


def note_workload(model: nn.Module, inputs: tuple) -> None:
    """The first batch's tensors (the range of any integer one: token ids, labels) and the model's embedding
    tables, read before the first step, so a failure can say which input could not fit where."""
    HERE.inputs, HERE.int_max = [], None
    for i, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            continue
        line = f"input {i}: {str(t.dtype).removeprefix('torch.')} {tuple(t.shape)}"
        if not t.is_floating_point() and not t.is_complex() and t.numel() and t.device.type != "meta":
            low, high = int(t.min()), int(t.max())
            line += f", values {low}..{high}"
            HERE.int_max = high if HERE.int_max is None else max(HERE.int_max, high)
        HERE.inputs.append(line)
    tables = [(name, m.num_embeddings) for name, m in model.named_modules() if isinstance(m, nn.Embedding)]
    HERE.tables = sorted(tables, key=lambda t: t[1])


def is_cuda_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"AcceleratorError", "CudaError"}) or "CUDA error" in str(exc)


def reported_at(tb: TracebackType | None) -> tuple[str | None, str | None]:
    """The innermost module forward and the innermost torch.nn.functional op in a traceback: where it was raised."""
    module = op = None
    while tb is not None:
        frame = tb.tb_frame
        code = frame.f_code
        owner = frame.f_locals.get("self")
        if code.co_name == "forward" and isinstance(owner, nn.Module):
            module = f"{type(owner).__name__}.forward"
        if code.co_filename.replace("\\", "/").endswith("torch/nn/functional.py"):
            op = f"F.{code.co_name}"
        tb = tb.tb_next
    return module, op


def _index_words() -> str:
    """The integer inputs against the embedding tables: the usual cause of an index error or device-side assert."""
    if HERE.int_max is None:
        return ""
    tables = ", ".join(f"{name or 'the model'} {rows} rows" for name, rows in HERE.tables[:SHOWN_TABLES])
    past = [name or "the model" for name, rows in HERE.tables if rows <= HERE.int_max]
    words = f" The integer inputs go up to {HERE.int_max} ({'; '.join(HERE.inputs)})"
    if tables:
        words += f"; the embedding tables hold {tables}"
    if past:
        words += f": {HERE.int_max} is past the end of {', '.join(past[:SHOWN_TABLES])}"
    return words + "."


def explain(exc: BaseException) -> dict:
    """The error event's message and what it knows beside it: {message, phase, op, inputs}."""
    cause = exc.__cause__ or exc
    first = next((line.strip() for line in str(cause).splitlines() if line.strip()), "")
    module, op = reported_at(cause.__traceback__)
    where = " → ".join(filter(None, (module, op)))
    phase = HERE.phase
    parts = [f"{type(cause).__name__}: {first.rstrip('.')}." if first else f"{type(cause).__name__}."]
    context = f"In the phase '{PHASE_TITLES.get(phase, phase)}'" if phase else "Before the run's first phase"
    cuda = is_cuda_error(cause)
    if where:
        context += f", {'reported' if cuda else 'raised'} at {where}"
    parts.append(context + ".")
    index_like = cuda and "device-side assert" in str(cause) or isinstance(cause, IndexError) or (
        "index" in first.lower() and "out of" in first.lower())
    if cuda:
        parts.append("CUDA reports a kernel's error at a later call, so the op that failed may come before that "
                     "place; a device-side assert is most often an index out of range (an embedding, a gather, a "
                     "loss's class index)." if "device-side assert" in str(cause) else
                     "CUDA reports a kernel's error at a later call, so the op that failed may come before that place.")
    if index_like:
        parts.append(_index_words().strip())
    if cuda:
        parts.append("The worker that hit it has ended (a CUDA error leaves its process unusable); rerunning the "
                     "same settings on the CPU, or with CUDA_LAUNCH_BLOCKING=1, shows the failing op.")
    parts.append("The raw traceback is kept with the run.")
    return {"message": " ".join(p for p in parts if p), "phase": phase, "op": where or None,
            "inputs": list(HERE.inputs)}


def cpu_rerun(exp) -> str:
    """One eager forward of `exp`'s model and first batch on the CPU, to find the op a CUDA error came from: CUDA
    reports a kernel's failure at a later call, the CPU raises at the op itself. Returns a sentence for the message."""
    import sample_models

    entry = sample_models.get(exp.model)
    params = entry.param_count(exp.preset)
    if params > CPU_RERUN_MAX_PARAMS:
        return (f"Not rerun on the CPU to find the op ({params / 1e9:.1f} B parameters is too many to run there "
                "cheaply).")
    os.environ[CPU_RERUN_ENV] = "1"
    try:
        torch.manual_seed(exp.seed)
        model = entry.build(exp.preset, device="cpu").train(exp.task == "training")
        batch = entry.make_batch(exp.preset, exp.batch_size, device="cpu",
                                 generator=torch.Generator("cpu").manual_seed(exp.seed))
        with torch.no_grad():
            model(*batch.inputs)
    except Exception as e:  # noqa: BLE001 (what it raised is the finding)
        where = " → ".join(filter(None, reported_at(e.__traceback__))) or "an unknown place"
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
        return f"Rerun on the CPU, the same forward fails at {where}: {type(e).__name__}: {first.rstrip('.')}."
    finally:
        os.environ.pop(CPU_RERUN_ENV, None)
    return ("Rerun on the CPU, the same forward runs without error: the failure is particular to the GPU run (its "
            "precision, its compiled code or its kernels).")
