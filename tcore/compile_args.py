"""torch.compile's keyword arguments for an experiment: the worker passes them, copy-as-code writes them out."""
from __future__ import annotations

from typing import Any

from tcore.spec import Experiment

# torch.compile's own defaults: the snippet leaves out an argument that has its default ("default" is mode=None's)
TORCH_DEFAULTS = {"backend": "inductor", "mode": "default", "fullgraph": False, "dynamic": None}


def compile_kwargs(exp: Experiment) -> dict[str, Any]:
    """What torch.compile, module.compile and a model's own compile_repeated_blocks are called with for `exp`."""
    kwargs: dict[str, Any] = {"backend": exp.backend}
    if exp.backend == "inductor":
        kwargs["mode"] = exp.mode  # torch.compile refuses a mode for other backends
    kwargs.update(fullgraph=exp.fullgraph, dynamic=exp.dynamic)
    return kwargs


def call_args(exp: Experiment) -> str:
    """compile_kwargs(exp) as Python source, less those at torch.compile's defaults: "mode='max-autotune'"."""
    return ", ".join(f"{name}={value!r}" for name, value in compile_kwargs(exp).items()
                     if value != TORCH_DEFAULTS[name])
