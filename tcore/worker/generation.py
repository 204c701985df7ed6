"""One greedy generation by one variant, in the worker: the prompt into the KV cache by the prefill, then one decode
step per new token, eager or compiled (compile_pair), timed with the device synchronized.
tcore.worker.rounds.DecodeRounds runs these in paired rounds and derives the run's figures from them.
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable

import torch

from sample_models import decoding
from tcore.experiment.spec import PRECISIONS, Experiment, generate_kwargs
from tcore.worker.build import DTYPES
from tcore.worker.timing import sync


@dataclass
class Generation:
    """One timed generation: its tokens, its prefill and decode times."""

    tokens: torch.Tensor  # (B, new)
    ttft_s: float
    decode_s: float
    decode_step_s: list[float] = field(default_factory=list)  # per step, only where each step was synchronized

    @property
    def total_s(self) -> float:
        return self.ttft_s + self.decode_s


def compile_pair(decoder: decoding.Decoder, exp: Experiment) -> tuple[Callable, Callable]:
    """(prefill, decode) compiled as `exp` asks (tcore.experiment.spec.generate_kwargs)."""
    prefill_kwargs, decode_kwargs = generate_kwargs(exp)
    return torch.compile(decoder.prefill, **prefill_kwargs), torch.compile(decoder.decode, **decode_kwargs)


class Generator:
    """Greedy generation of a fixed number of tokens by one variant (its prefill and decode functions)."""

    def __init__(self, decoder: decoding.Decoder, prefill: Callable, decode: Callable, exp: Experiment,
                 device: str, prompt: tuple, new: int, dtype: torch.dtype) -> None:
        self.decoder, self.prefill, self.decode, self.device, self.new = decoder, prefill, decode, device, new
        self.static, self.prompt, self.dtype = exp.kv_cache == "static", prompt, dtype
        self.batch, self.prompt_len = prompt[-1].shape
        compute = PRECISIONS[exp.precision].autocast
        self.autocast = torch.autocast(device, DTYPES[compute]) if compute else nullcontext()
        self.mark_step = torch.compiler.cudagraph_mark_step_begin if device == "cuda" else (lambda: None)
        self.cache = self._new_cache() if self.static else None  # a static cache is allocated once and reused
        self.kv_bytes = 0

    def _new_cache(self):
        return self.decoder.new_cache(self.batch, self.prompt_len + self.new, self.static, self.dtype, self.device)

    def positions(self, start: int) -> tuple[torch.Tensor, ...]:
        """The decode steps' positions, made on the device once per generation, (1,) each: no step builds a tensor
        on the host (a host-to-device copy and a wait on the stream per token)."""
        return torch.arange(start, start + self.new - 1, device=self.device).split(1)

    @torch.no_grad()
    def run(self, prompt: tuple | None = None, each_step: bool = False) -> Generation:
        """One generation; `each_step` synchronizes after every decode step to time each (the compile split)."""
        prompt = prompt or self.prompt
        start = prompt[-1].shape[1]
        cache = self.cache if self.static else self._new_cache()
        if self.static:
            self.decoder.reset(cache)
        positions = self.positions(start)
        steps: list[float] = []
        with self.autocast:
            sync(self.device)
            t0 = time.perf_counter()
            self.mark_step()
            token = self.prefill(cache, *prompt).clone()  # CUDA graphs reuse their outputs: keep a copy
            tokens = [token]
            sync(self.device)
            t1 = last = time.perf_counter()
            for pos in positions:
                self.mark_step()
                token = self.decode(cache, token[:, None], pos).clone()
                tokens.append(token)
                if each_step:
                    sync(self.device)
                    now = time.perf_counter()
                    steps.append(now - last)
                    last = now
            sync(self.device)
            t2 = time.perf_counter()
        self.kv_bytes = self.decoder.cache_bytes(cache)
        return Generation(torch.stack(tokens, 1), t1 - t0, t2 - t1, steps)


def new_steps(gen: Generator) -> int:
    return gen.new - 1  # the first new token comes from the prefill
