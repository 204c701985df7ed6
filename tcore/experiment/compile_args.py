"""torch.compile's keyword arguments for an experiment: the worker passes them, copy-as-code writes them out."""
from __future__ import annotations

from typing import Any

from tcore.experiment.spec import Experiment

# torch.compile's own defaults: the snippet leaves out an argument that has its default ("default" is mode=None's)
TORCH_DEFAULTS = {"backend": "inductor", "mode": "default", "fullgraph": False, "dynamic": None}


def compile_kwargs(exp: Experiment) -> dict[str, Any]:
    """What torch.compile, module.compile and a model's own compile_repeated_blocks are called with for `exp`."""
    kwargs: dict[str, Any] = {"backend": exp.backend}
    if exp.backend == "inductor":
        kwargs["mode"] = exp.mode  # torch.compile refuses a mode for other backends
    kwargs.update(fullgraph=exp.fullgraph, dynamic=exp.dynamic)
    return kwargs


# Modes whose CUDA graphs would be recorded once per prompt length: a generation's prefill is compiled without them
# (gpt-fast leaves its prefill out of CUDA graphs too)
NO_CUDAGRAPHS = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}


def generate_kwargs(exp: Experiment) -> tuple[dict[str, Any], dict[str, Any]]:
    """torch.compile's arguments for a generation's (prefill, decode step): the decode step fullgraph with a static
    cache, so its shapes never change and CUDA graphs can replay it; the prefill without CUDA graphs."""
    kwargs = compile_kwargs(exp)
    prefill = dict(kwargs)
    if kwargs.get("mode") in NO_CUDAGRAPHS:
        prefill["mode"] = NO_CUDAGRAPHS[kwargs["mode"]]
    return prefill, {**kwargs, "fullgraph": kwargs["fullgraph"] or exp.kv_cache == "static"}


def call_args(exp: Experiment) -> str:
    """compile_kwargs(exp) as Python source, less those at torch.compile's defaults: "mode='max-autotune'"."""
    return kwargs_source(compile_kwargs(exp))


def kwargs_source(kwargs: dict[str, Any]) -> str:
    """torch.compile's arguments as Python source, less those at its defaults."""
    return ", ".join(f"{name}={value!r}" for name, value in kwargs.items() if value != TORCH_DEFAULTS[name])
