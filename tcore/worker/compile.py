"""How an experiment compiles: the whole model, its repeated blocks in place, and the optimizer step."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from tcore.experiment.spec import (  # one dict each for the run and its copy-as-code
    LR,
    Experiment,
    compile_kwargs,
    optimizer_compile_kwargs,
)


def apply_compile(model: nn.Module, exp: Experiment, blocks: list[nn.Module], repeated_call: str = "") -> nn.Module:
    """Return what to call: the model compiled whole, or the model with each of `blocks` compiled in place.

    Regional compilation compiles the repeated blocks only (as torchtitan and diffusers'
    compile_repeated_blocks do): identical blocks share one compiled graph, so compile time
    scales with the number of distinct blocks, not their count. A model that compiles its own repeated
    blocks (diffusers' `compile_repeated_blocks`, named by `repeated_call`) is asked to, as its users do.
    """
    if exp.compile == "whole":
        return torch.compile(model, **compile_kwargs(exp))
    if exp.compile == "hierarchical":
        mark_nested_regions(blocks)
        return torch.compile(model, **compile_kwargs(exp))
    if exp.compile == "regional":
        if not blocks:
            raise ValueError(f"{exp.model} lists no repeated blocks to compile regionally")
        if repeated_call:
            getattr(model, repeated_call)(**compile_kwargs(exp))
            return model
        for block in blocks:
            block.compile(**compile_kwargs(exp))
    return model


def block_shapes(blocks: list[nn.Module]) -> dict[str, dict[str, int]]:
    """Class name -> {"copies": how many blocks of it, "shapes": how many distinct sets of parameter and buffer shapes
    they hold}. A compiled block is reused only by copies alike in both (Dynamo guards on each tensor's shape): a class
    whose copies differ in width (timm's efficientnet_b0: 15 InvertedResidual blocks in several channel counts) is
    compiled again per width, so regional compilation saves nothing there (tcore.analysis.advice reads this)."""
    found: dict[str, tuple[int, set]] = {}
    for block in blocks:
        shapes = tuple((name, tuple(t.shape)) for name, t in [*block.named_parameters(), *block.named_buffers()])
        copies, seen = found.get(type(block).__name__, (0, set()))
        found[type(block).__name__] = (copies + 1, seen | {shapes})
    return {name: {"copies": copies, "shapes": len(seen)} for name, (copies, seen) in found.items()}


def mark_nested_regions(blocks: list[nn.Module]) -> None:
    """Mark each block's forward a nested compile region, so that a whole-model compile traces each kind of block as
    a region of its own that its copies can reuse (hierarchical compilation); eager calls are unchanged.

    Each block becomes an instance of a subclass whose forward is decorated, as a model's own source would decorate
    it; other instances of the class are untouched. Not a per-instance bound wrapper
    (`block.forward = MethodType(nested_compile_region(cls.forward), block)`): on torch 2.14 that compiled the tiny
    captioner to a silently wrong result (36% off eager), which the run's correctness check reports.
    """
    from tcore.host import features

    if not blocks:
        raise ValueError("compile=hierarchical needs repeated blocks to mark, and the model lists none")
    if reason := features.missing("nested_compile_region"):
        raise RuntimeError(f"compile=hierarchical: {reason}")
    marked: dict[type, type] = {}
    for block in blocks:
        cls = type(block)
        if cls not in marked:
            marked[cls] = type(cls.__name__, (cls,), {"forward": torch.compiler.nested_compile_region(cls.forward),
                                                      "__module__": cls.__module__, "__qualname__": cls.__qualname__})
        block.__class__ = marked[cls]


def graph_break_errors(exp: Experiment):
    """The context a run's compiled calls go in: torch._dynamo.error_on_graph_break(True) where the experiment asks
    for it (Dynamo reads the setting while it traces), else nothing."""
    from contextlib import nullcontext

    from tcore.host import features

    if not exp.error_on_graph_break:
        return nullcontext()
    if reason := features.missing("error_on_graph_break"):
        raise RuntimeError(f"error_on_graph_break: {reason}")
    return torch._dynamo.error_on_graph_break(True)


def make_optimizer(model: nn.Module, exp: Experiment, device: str) -> torch.optim.Optimizer:
    if not exp.compile_optimizer:
        return torch.optim.AdamW(model.parameters(), lr=LR)
    # A tensor learning rate keeps LR changes from recompiling the step. Eager foreach AdamW accepts
    # a tensor LR only when capturable, so the eager baseline uses the same capturable optimizer.
    return torch.optim.AdamW(model.parameters(), lr=torch.tensor(LR, device=device),
                             capturable=device == "cuda")


def optimizer_step(optimizer: torch.optim.Optimizer, exp: Experiment) -> Callable[[], None]:
    """The step the training loop calls: compiled when the experiment asks for it (the PyTorch recipe)."""

    def step() -> None:
        optimizer.step()

    if exp.compile_optimizer:
        # fullgraph=False as in the recipe: the optimizer's bookkeeping may break the graph harmlessly.
        return torch.compile(step, **optimizer_compile_kwargs(exp))
    return step
