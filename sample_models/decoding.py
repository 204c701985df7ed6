"""Generation by the decoders the lab builds: which models can generate, how long their prompts and outputs are, and
one adapter per kind of decoder (a prefill that fills a KV cache, then one-token decode steps, greedy)."""
from __future__ import annotations

from typing import Any, Protocol

import torch

from sample_models import captioner

# gpt-fast's and the transformers recipes' setting: a 128-token prompt, 256 new tokens
DEFAULT_PROMPT, DEFAULT_NEW = 128, 256
# What a decoder without a position limit in its config is held to
UNLIMITED = 1 << 20


class Decoder(Protocol):
    """What the worker's generate task calls; prefill and decode each return the greedy next token (B,)."""

    def prompt(self, batch_size: int, prompt_len: int, device, generator) -> tuple[torch.Tensor, ...]: ...
    def new_cache(self, batch_size: int, max_len: int, static: bool, dtype, device) -> Any: ...
    def reset(self, cache) -> None: ...
    def prefill(self, cache, *prompt: torch.Tensor) -> torch.Tensor: ...
    def decode(self, cache, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor: ...
    def cache_bytes(self, cache) -> int: ...


def cannot_generate(entry) -> str | None:
    """Why a model cannot run task=generate, or None: only decoders that predict the next token can."""
    if entry.name == "captioner":
        return None
    if getattr(entry, "source", None) is not None and entry.source.key == "hf":
        if entry.source.kind(entry.ref) == "causal":
            return None
        return (f"{entry.name} is an encoder (a masked-LM head): it fills in tokens, it does not generate text one "
                "token after another; pick a decoder for task=generate, such as hf:gpt2, hf:llama or captioner")
    return (f"{entry.name} does not generate text (task=generate needs a decoder with a KV cache: captioner or a "
            "transformers causal LM such as hf:gpt2 or hf:llama); run it with task=inference or training")


def max_positions(entry, preset: str) -> int:
    """The most tokens (prompt and generated) one sequence may hold: the size of the model's position table."""
    if entry.name == "captioner":
        return entry.config(preset).max_caption_len
    config = entry.source.config(entry.ref, entry.sizes(preset))
    return getattr(config, "max_position_embeddings", None) or UNLIMITED


def lengths(entry, preset: str, prompt_len: int, new_tokens: int) -> tuple[int, int]:
    """(prompt, new tokens): those asked for, and for 0 the defaults, shrunk to fit the model's positions (a
    quarter of them for the prompt, the rest for the output)."""
    top = max_positions(entry, preset)
    prompt = prompt_len or (DEFAULT_PROMPT if DEFAULT_PROMPT + DEFAULT_NEW <= top else max(top // 4, 2))
    new = new_tokens or min(DEFAULT_NEW, top - prompt)
    return prompt, new


def decoder(entry, model: torch.nn.Module, preset: str) -> Decoder:
    if entry.name == "captioner":
        return CaptionerDecoder(model, entry.config(preset))
    from sample_models.sources.hf_generate import HfDecoder

    return HfDecoder(model)


class CaptionerDecoder:
    """The captioner writes a caption for an image: the prompt is the image and the caption's first tokens."""

    def __init__(self, model: captioner.Captioner, config: captioner.Config) -> None:
        self.model, self.config = model, config

    def prompt(self, batch_size, prompt_len, device, generator):
        c = self.config
        images = torch.randn(batch_size, c.in_channels, c.image_size, c.image_size, device=device, generator=generator)
        tokens = torch.randint(c.vocab_size, (batch_size, prompt_len), device=device, generator=generator)
        return images, tokens

    def new_cache(self, batch_size, max_len, static, dtype, device):
        return self.model.new_cache(batch_size, max_len, static, dtype, device)

    def reset(self, cache) -> None:
        pass  # every step writes at the positions it is given, and attends to those up to its own only

    def prefill(self, cache, images, tokens):
        return self.model.prefill(cache, images, tokens).argmax(-1)

    def decode(self, cache, token, pos):
        return self.model.decode(cache, token, pos).argmax(-1)

    def cache_bytes(self, cache) -> int:
        return cache.nbytes()
