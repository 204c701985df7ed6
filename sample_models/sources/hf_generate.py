"""Generation by a transformers causal LM with transformers' own KV caches (StaticCache or DynamicCache), through its
forward with cache_position, as its static-cache recipe does; the constructors are feature-detected per version."""
from __future__ import annotations

import inspect

import torch


class HfDecoder:
    def __init__(self, model) -> None:
        self.model, self.config = model, model.config
        params = inspect.signature(model.forward).parameters
        # newer transformers name the cache argument `cache` (past_key_values is deprecated there)
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self.last_only = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        # transformers 4.x places tokens in the cache by cache_position; 5.x caches count their own length
        self.takes_cache_position = "cache_position" in params

    def prompt(self, batch_size, prompt_len, device, generator):
        return (torch.randint(0, self.config.vocab_size, (batch_size, prompt_len), device=device, generator=generator),)

    def new_cache(self, batch_size, max_len, static, dtype, device):
        from transformers import DynamicCache, StaticCache

        if not static:
            takes_config = "config" in inspect.signature(DynamicCache.__init__).parameters
            return DynamicCache(config=self.config) if takes_config else DynamicCache()
        params = inspect.signature(StaticCache.__init__).parameters
        if "max_batch_size" in params:  # transformers 4.x: allocated by the constructor
            return StaticCache(config=self.config, max_batch_size=batch_size, max_cache_len=max_len, device=device,
                               dtype=dtype)
        cache = StaticCache(config=self.config, max_cache_len=max_len)
        if hasattr(cache, "early_initialization"):  # else allocated by its first update, inside the prefill
            c = self.config
            heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
            head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
            cache.early_initialization(batch_size, heads, head_dim, dtype, torch.device(device))
        return cache

    def reset(self, cache) -> None:
        """Empty a static cache for the next generation (in place: compiled code keeps its tensors)."""
        if hasattr(cache, "reset"):
            cache.reset()

    def prefill(self, cache, tokens):
        return self._next(cache, tokens, torch.arange(tokens.shape[1], device=tokens.device))

    def decode(self, cache, token, pos):
        return self._next(cache, token, pos)

    def _next(self, cache, tokens, pos):
        where = {"cache_position": pos} if self.takes_cache_position else {}
        out = self.model(input_ids=tokens, position_ids=pos[None], use_cache=True, **{self.cache_arg: cache},
                         **where, **self.last_only)
        return out.logits[:, -1].argmax(-1)

    def cache_bytes(self, cache) -> int:
        return sum(t.numel() * t.element_size() for t in cache_tensors(cache))


def cache_tensors(cache) -> list[torch.Tensor]:
    """The key and value tensors a transformers cache holds: per layer (5.x) or as two lists (4.x)."""
    if hasattr(cache, "layers"):
        found = [getattr(layer, name, None) for layer in cache.layers for name in ("keys", "values")]
    else:
        found = [*getattr(cache, "key_cache", []), *getattr(cache, "value_cache", [])]
    return [t for t in found if isinstance(t, torch.Tensor)]
