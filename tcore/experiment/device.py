"""An experiment on a device: 'auto' resolved, the defaults a practitioner picks there, and what refuses to run or
does nothing there. Read by the app, the command line and the worker (which resolves the device it runs on).
"""
from __future__ import annotations

from typing import Any

from tcore.experiment.spec import CUDAGRAPH_MODES, PRECISIONS, Experiment, SpecError


def resolve_device(requested: str, cuda_available: bool) -> str:
    """Turn 'auto' into the device this machine will run on; refuse 'cuda' where there is none."""
    if requested == "auto":
        return "cuda" if cuda_available else "cpu"
    if requested == "cuda" and not cuda_available:
        raise SpecError("device=cuda but this machine has no usable CUDA GPU; choose device=cpu or auto")
    return requested


def practical_defaults(model: str, device: str, task: str) -> dict[str, Any]:
    """What a practitioner would pick for `model` on `device` ("cuda" or "cpu"): the app's and the CLI's defaults.

    On a GPU: bf16 weights for inference and generation (at batch 1), autocast to bf16 for training (people keep float32
    master weights), and channels_last for a convolutional model, so the eager baseline is eager as people tune it. On
    the CPU: the tiny presets in float32, which stay quick there, and a generation of a few dozen tokens
    (generate_lengths).
    """
    import sample_models

    entry = sample_models.get(model)
    gpu = device == "cuda"
    return dict(preset=entry.default_preset[device],
                # generation is timed per sequence at batch 1, as gpt-fast and the transformers recipes do
                batch_size=1 if task == "generate" else entry.default_batch[device],
                precision=("amp-bf16" if task == "training" else "bf16") if gpu else "fp32",
                channels_last=gpu and entry.supports_channels_last,
                **generate_lengths(entry, device, task))


# A generation on the CPU: every round writes every token, eager and compiled, and the first compiled call writes
# them all while it compiles, so the GPU's lengths can outlast a run's time limit on a small CPU; a few dozen tokens
# keep the decode step's lesson (its compile, its recompilations, tokens/s) at a fraction of the time.
CPU_PROMPT_TOKENS, CPU_NEW_TOKENS = 32, 32


def generate_lengths(entry, device: str, task: str) -> dict[str, int]:
    """prompt_len and new_tokens: 0 (the model's defaults, tcore.experiment.spec) but for a generation on the CPU,
    held to CPU_PROMPT_TOKENS + CPU_NEW_TOKENS (or the model's shorter defaults)."""
    from sample_models import decoding

    if task != "generate" or device == "cuda" or decoding.cannot_generate(entry) is not None:
        return dict(prompt_len=0, new_tokens=0)
    prompt, new = decoding.lengths(entry, entry.default_preset[device], 0, 0)
    return dict(prompt_len=min(prompt, CPU_PROMPT_TOKENS), new_tokens=min(new, CPU_NEW_TOKENS))


def check_on_device(exp: Experiment, device: str) -> list[str]:
    """Refuse what cannot run on `device`; return notes on settings that run there but do nothing."""
    notes = []
    if device == "cpu":
        if PRECISIONS[exp.precision].tf32:
            notes.append("precision=tf32 changes GPU matmuls only: on the CPU it runs as fp32")
        if exp.backend == "cudagraphs":
            raise SpecError("backend=cudagraphs needs a CUDA GPU; choose backend=inductor on the CPU")
        if exp.mode in CUDAGRAPH_MODES:
            notes.append(f"mode={exp.mode} uses CUDA graphs, which do not exist on the CPU: "
                         "here it behaves like " + ("default" if exp.mode == "reduce-overhead" else
                                                     "max-autotune-no-cudagraphs"))
    if exp.dynamic is True and exp.mode in CUDAGRAPH_MODES:
        notes.append("dynamic=True with CUDA graphs records one graph per distinct shape")
    return notes
