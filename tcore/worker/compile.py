"""How an experiment compiles: the whole model, its repeated blocks in place, and the optimizer step."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from tcore.compile_args import compile_kwargs  # one dict for the run and its copy-as-code (tcore.snippet)
from tcore.spec import LR, Experiment


def apply_compile(model: nn.Module, exp: Experiment, blocks: list[nn.Module], repeated_call: str = "") -> nn.Module:
    """Return what to call: the model compiled whole, or the model with each of `blocks` compiled in place.

    Regional compilation compiles the repeated blocks only (as torchtitan and diffusers'
    compile_repeated_blocks do): identical blocks share one compiled graph, so compile time
    scales with the number of distinct blocks, not their count. A model that compiles its own repeated
    blocks (diffusers' `compile_repeated_blocks`, named by `repeated_call`) is asked to, as its users do.
    """
    if exp.compile == "whole":
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
        return torch.compile(step, fullgraph=False)
    return step
