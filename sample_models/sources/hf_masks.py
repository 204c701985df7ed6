"""skip_full_mask: transformers skips an attention mask that masks nothing while compiling too, as it does in eager.

transformers 5 makes its SDPA mask in masking_utils.sdpa_mask, which returns None (so SDPA may run a fused flash,
cuDNN or memory-efficient kernel) when no token is masked: _ignore_bidirectional_mask_sdpa and
_ignore_causal_mask_sdpa decide it. Both decline while tracing: 5.17 whenever torch.compiler.is_compiling()
(is_tracing(None) is true under torch.compile), later versions whenever torch.compiler.is_exporting(), which Dynamo
before torch 2.14 reads as True under torch.compile too. So a compiled encoder gets an all-true (batch, 1, seq, seq)
mask that eager never builds, and SDPA leaves its fused kernel for the math path. The upstream fix decides the skip
while tracing whenever there is no padding mask, because then it depends on sizes only (which Dynamo guards on),
never on values.

The hook does what that fix does, on any transformers 5: it wraps the "sdpa" entry of masking_utils' mask registry
(ALL_MASK_ATTENTION_FUNCTIONS, which create_bidirectional_mask and create_causal_mask look up on every call) so that
without a padding mask it returns None wherever eager would; a padding mask goes to transformers' own function
unchanged, so a padded batch keeps its mask. A batch whose attention_mask is all true is given None instead
(without_full_mask), decided on the host before the step: what eager's skip of it amounts to, and something no
compiled graph can decide without reading the mask's values.

The functions from nothing_to_mask to install are written out into the copy-as-code program (tcore.export.snippet),
so keep them self-contained.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Iterator

import torch


def nothing_to_mask(*, q_length, kv_length, q_offset=0, local_size=None, allow_is_causal_skip=True,
                    allow_is_bidirectional_skip=False, **_) -> bool:
    """transformers' eager rule for a mask without padding: full bidirectional attention, or causal attention that
    SDPA's is_causal expresses (one query, or as many queries as keys), outside any sliding window."""
    inside_window = local_size is None or kv_length < local_size
    if allow_is_bidirectional_skip and inside_window:
        return True
    return (allow_is_causal_skip and inside_window and not isinstance(q_offset, torch.Tensor)
            and (q_length == 1 or kv_length == q_length))


def skip_when_unpadded(sdpa_mask):
    """transformers' sdpa_mask, returning None without a padding mask wherever eager would, traced or not."""
    @functools.wraps(sdpa_mask)
    def mask(*args, **kwargs):
        if not args and kwargs.get("attention_mask") is None and nothing_to_mask(**kwargs):
            return None
        return sdpa_mask(*args, **kwargs)
    mask.skips_full_mask = True
    return mask


def install():
    """Wrap the "sdpa" mask function of transformers' registry; returns what it replaced (None if already wrapped)."""
    from transformers import masking_utils

    registry = getattr(masking_utils, "ALL_MASK_ATTENTION_FUNCTIONS", None)
    if registry is None or "sdpa" not in getattr(registry, "_global_mapping", {}):
        raise RuntimeError("skip_full_mask: this transformers has no SDPA entry in masking_utils' mask registry "
                           "(transformers 5 has one)")
    current = registry._global_mapping["sdpa"]
    if getattr(current, "skips_full_mask", False):
        return None
    registry._global_mapping["sdpa"] = skip_when_unpadded(current)
    return current


@contextmanager
def skipping_full_masks() -> Iterator[None]:
    """install() for the length of a with block, then transformers' own function again (for tests)."""
    from transformers import masking_utils

    replaced = install()
    try:
        yield
    finally:
        if replaced is not None:
            masking_utils.ALL_MASK_ATTENTION_FUNCTIONS._global_mapping["sdpa"] = replaced


def without_full_mask(inputs: tuple, position: int | None) -> tuple:
    """The model's inputs with the attention mask at `position` replaced by None when it masks nothing."""
    if position is None or position >= len(inputs) or inputs[position] is None or not bool(inputs[position].all()):
        return inputs
    return (*inputs[:position], None, *inputs[position + 1:])
