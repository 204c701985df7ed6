"""hf:MODEL_TYPE: a transformers causal LM, masked-LM encoder or encoder-decoder from its config class, token ids
in, each batch built from the config (vocabulary, special ids, position limits, decoder start token)."""
from __future__ import annotations

import inspect
from contextlib import contextmanager
from typing import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from sample_models.sources.common import (
    QUIET,
    RealModel,
    Source,
    UnknownModel,
    _build_on,
    _count,
    go_offline,
    repeated_classes,
)

HF_TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
               intermediate_size=128, vocab_size=1024, max_position_embeddings=512,
               # the same sizes under the names encoder-decoders use (a config keeps only the names it has): T5's
               # d_ff and d_kv, BART's and Marian's per-half layers, heads and feed-forward widths
               d_ff=128, d_kv=16, num_decoder_layers=2, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128)
# Published sizes that a config class's defaults do not give. Llama-3.2-1B: 1.24 B parameters (meta-llama's
# config.json: 2048 wide, 16 layers, 32 heads, 8 KV heads, 8192 MLP, 128256 tokens, tied embeddings).
HF_PUBLISHED = {
    "llama": {"3.2-1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                             intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True,
                             rope_theta=500000.0, max_position_embeddings=131072, head_dim=64)},
}


# An encoder-decoder is called as model(input_ids, attention_mask, decoder_input_ids): its forward must take them
# in that order (T5, BART, Marian, Pegasus, mBART...); a speech or vision encoder-decoder takes other inputs.
SEQ2SEQ_ARGS = ["input_ids", "attention_mask", "decoder_input_ids"]
KIND_WORDS = {"causal": "decoder", "masked": "encoder", "seq2seq": "encoder-decoder"}
# What the card says of the KV cache: inference and training are one forward over the whole sequence, built with
# use_cache=False as PyTorch's dynamo harness builds them; task=generate decodes a token at a time with a KV cache.
CACHE_WORDS = {
    "causal": ("inference and training run one forward over the whole sequence (use_cache=False, as PyTorch's "
               "harness runs it); task=generate decodes a token at a time with transformers' KV cache, static or "
               "dynamic (the Generation settings)."),
    "masked": "one forward over the whole sequence (use_cache=False).",
    "seq2seq": "one forward over the whole sequence (use_cache=False).",
}


class HfSource(Source):
    """transformers models from their config class: causal LMs, masked-LM encoders and encoder-decoders
    (AutoModelForSeq2SeqLM), token ids in."""

    key, title = "hf", "Hugging Face transformers"

    def _mappings(self):
        go_offline()
        from transformers.models.auto.modeling_auto import (
            MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
            MODEL_FOR_MASKED_LM_MAPPING_NAMES,
            MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
        )
        return (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES,
                MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)

    def names(self) -> list[str]:
        return sorted(set().union(*self._mappings()))

    def kind(self, ref: str) -> str:
        causal, masked, seq2seq = self._mappings()
        if ref in seq2seq:  # BART, T5...: the whole encoder-decoder, as it is used (BART also has a causal head)
            takes = _forward_args(seq2seq[ref])
            if takes[:3] == SEQ2SEQ_ARGS:
                return "seq2seq"
            if ref not in masked and ref not in causal:
                raise UnknownModel(f"hf:{ref} is an encoder-decoder whose forward takes ({', '.join(takes[:3])}), not "
                                   "token ids for both halves (input_ids, attention_mask, decoder_input_ids), which is "
                                   "what the lab feeds, in that order")
        if ref in masked:  # an encoder (BERT also has a causal head, BertLMHeadModel, which is not how it is used)
            return "masked"
        if ref in causal:
            return "causal"
        raise UnknownModel(f"transformers has no causal LM, masked-LM encoder or encoder-decoder of model type {ref!r} "
                           f"(hf:NAME takes a model type, such as llama, gpt2, bert or t5); list them with "
                           f"`python -m tcore models hf`")

    def config_kwargs(self, ref: str, sizes: dict) -> dict:
        """What AutoConfig.for_model gets beside the model type: the sizes its class has, and consistent ids."""
        go_offline()
        from transformers import AutoConfig
        defaults = AutoConfig.for_model(ref)
        wanted = {k: v for k, v in sizes.items() if k not in ("seq_len", "max_seq_len")}
        keep = {k: v for k, v in wanted.items() if hasattr(defaults, k)}
        if "hidden_size" in keep and getattr(defaults, "head_dim", None) and "head_dim" not in keep:
            keep["head_dim"] = keep["hidden_size"] // keep.get("num_attention_heads", defaults.num_attention_heads)
        # dropout probabilities read at call time (attention dropout) too; see quiet_dropout
        keep.update({k: QUIET for k in dir(defaults) if "drop" in k and isinstance(getattr(defaults, k, None), float)
                     and getattr(defaults, k) > 0})
        if "vocab_size" in keep:  # special tokens must lie inside a shrunk vocabulary
            keep.update(_specials_inside(defaults, keep["vocab_size"]))
        return {**keep, "use_cache": False}

    def config(self, ref: str, sizes: dict):
        from transformers import AutoConfig
        return AutoConfig.for_model(ref, **self.config_kwargs(ref, sizes))

    def entry(self, ref: str) -> RealModel:
        kind = self.kind(ref)
        seq = 1024 if kind == "causal" else 512  # the dynamo harness's lengths: GPT-2-like 1024, BERT-like 512
        published = HF_PUBLISHED.get(ref, {})
        presets = {"tiny": {**HF_TINY, "seq_len": 32}}
        presets.update({name: {**sizes, "seq_len": seq} for name, sizes in published.items()})
        presets["full"] = {"seq_len": seq}  # the config class's defaults, which transformers documents as a model
        counts, shortened = {}, []
        for name, sizes in presets.items():
            try:
                if not isinstance(getattr(self.config(ref, sizes), "vocab_size", None), int):
                    raise ValueError("its config has no vocab_size of its own (a composite of other configs)")
                model = _build_on("meta", lambda: self.build(ref, sizes))
            # a config class that needs more than sizes
            except (TypeError, ValueError, AttributeError, KeyError, RuntimeError) as e:
                raise UnknownModel(f"hf:{ref} cannot be built from its config class alone ({type(e).__name__}: {e}); "
                                   "the lab builds models from AutoConfig.for_model(model_type) with no file") from e
            counts[name] = sum(p.numel() for p in model.parameters())
            limit = position_limit(model)
            # the sequence fits the position table by construction (RoBERTa's starts after its padding index)
            if limit is not None and sizes["seq_len"] > limit[0]:
                sizes["seq_len"] = limit[0]
                shortened.append(f"{name} runs {limit[0]} tokens ({limit[1]})")
            if limit is not None:
                sizes["max_seq_len"] = limit[0]
        model_class = self._auto(kind).__name__
        sizes = ", ".join(f"{name} {_count(n)}" for name, n in counts.items())
        return RealModel(
            name=f"hf:{ref}", ref=ref, source=self,
            title=f"{ref} ({KIND_WORDS[kind]}, transformers)",
            description=(f"transformers {model_class}.from_config(AutoConfig.for_model({ref!r}, ...)): random "
                         f"weights, no download. Token ids in"
                         + (" (decoder inputs: the labels shifted right after the config's decoder start token)"
                            if kind == "seq2seq" else "")
                         + f"; {CACHE_WORDS[kind]} The varying dimension is the sequence "
                         f"length. Parameters by preset: {sizes}. 'full' is the config class's defaults"
                         + (f"; {', '.join(published)} the published size{'s' if len(published) > 1 else ''}."
                            if published else ".")
                         + (f" Position limits: {'; '.join(shortened)}." if shortened else "")),
            presets=presets, default_preset={"cpu": "tiny", "cuda": next(iter(published), "full")},
            default_batch={"cpu": 2, "cuda": 8}, varying_dim="sequence length (tokens)", seq_field="seq_len",
            supports_channels_last=False)

    def _auto(self, kind: str):
        go_offline()
        from transformers import (
            AutoModelForCausalLM,
            AutoModelForMaskedLM,
            AutoModelForSeq2SeqLM,
        )
        return {"causal": AutoModelForCausalLM, "masked": AutoModelForMaskedLM, "seq2seq": AutoModelForSeq2SeqLM}[kind]

    def build(self, ref, sizes):
        return self._auto(self.kind(ref)).from_config(self.config(ref, sizes))

    def make_batch(self, ref, sizes, batch_size, device, generator):
        config = self.config(ref, sizes)
        seq, limit = sizes["seq_len"], sizes.get("max_seq_len")
        if limit is not None and seq > limit:
            raise ValueError(f"hf:{ref}: a sequence of {seq} tokens does not fit its position table, which holds "
                             f"{limit} (max_position_embeddings less any offset); use {limit} tokens or fewer")
        shape = (batch_size, seq)
        tokens = token_ids(config, shape, device, generator)
        labels = token_ids(config, shape, device, generator)
        if self.kind(ref) != "seq2seq":
            return (tokens,), labels
        # teacher forcing, as the model does itself from labels: the decoder sees the labels shifted right
        start = decoder_start_id(config)
        decoder_ids = torch.cat([torch.full((batch_size, 1), start, dtype=labels.dtype, device=labels.device),
                                 labels[:, :-1]], dim=1)
        return (tokens, torch.ones_like(tokens), decoder_ids), labels

    def mask_position(self, ref) -> int | None:
        """Where a batch carries its attention mask: an encoder-decoder's second input; the others carry none."""
        return 1 if self.kind(ref) == "seq2seq" else None

    def loss(self, ref, output, target):
        return F.cross_entropy(output.logits.float().flatten(0, 1), target.flatten())

    def block_names(self, model):
        declared = set(getattr(model, "_no_split_modules", None) or ())
        present = {type(m).__name__ for m in model.modules()}
        return (declared & present) or repeated_classes(model)

    def abstract(self):
        # A decoder checks its position ids for packed sequences with .item() unless its tensors are fake
        from torch._subclasses.fake_tensor import FakeTensorMode
        return _fake(FakeTensorMode)

    def build_code(self, ref, sizes):
        cls = self._auto(self.kind(ref)).__name__
        args = "".join(f", {k}={v!r}" for k, v in self.config_kwargs(ref, sizes).items())
        return [f"from transformers import AutoConfig, {cls}", "",
                f"config = AutoConfig.for_model({ref!r}{args})  # no file, no download",
                "with torch.device(device):",
                f"    model = {cls}.from_config(config)  # <-- your model (random weights)"]


def _forward_args(class_name: str) -> list[str]:
    """The names of a transformers model class's forward arguments, self left out ([] if it cannot be imported)."""
    import transformers

    try:
        cls = getattr(transformers, class_name)
    except (AttributeError, ImportError, RuntimeError):  # a class whose extra dependency is missing
        return []
    return list(inspect.signature(cls.forward).parameters)[1:]


def _specials_inside(defaults, vocab: int) -> dict[str, int]:
    """Every special-token id of a config past a shrunk vocabulary, moved inside it: pad 0, bos 1, eos 2, others
    after; one old id gives one new id (Marian's pad and decoder start are both 58100, and stay equal)."""
    order = ("pad_token_id", "bos_token_id", "eos_token_id")
    names = [*order, *sorted(n for n in dir(defaults) if n.endswith("_token_id") and n not in order)]
    moved: dict[int, int] = {}
    out = {}
    for name in names:
        try:
            value = getattr(defaults, name, None)
        except (AttributeError, KeyError, TypeError, ValueError, NotImplementedError):
            continue  # a config property computed from a field this config lacks: it names no id to move
        if isinstance(value, int) and not isinstance(value, bool) and value >= vocab:
            if value not in moved:
                moved[value] = next(i for i in range(vocab) if i not in moved.values())
            out[name] = moved[value]
    return out


SPECIAL_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id",
               "cls_token_id", "mask_token_id", "unk_token_id")


def special_ids(config) -> set[int]:
    found = set()
    for name in SPECIAL_IDS:
        value = getattr(config, name, None)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, int) and not isinstance(v, bool):
                found.add(v)
    return found


def token_ids(config, shape: tuple[int, int], device, generator) -> torch.Tensor:
    """Random ordinary tokens: every id inside the vocabulary, none a special id (a pad id in the text changes a
    RoBERTa's positions and what the model attends to, which real text never asks of it)."""
    vocab = config.vocab_size
    specials = sorted(i for i in special_ids(config) if 0 <= i < vocab)
    if len(specials) >= vocab:
        raise ValueError(f"vocab_size {vocab} leaves no ordinary token beside the special ids {specials}")
    ids = torch.randint(0, vocab - len(specials), shape, device=device, generator=generator)
    for s in specials:  # shift past each special id in turn (ascending): a map onto the ordinary ids
        ids = ids + (ids >= s).to(ids.dtype)
    return ids


def decoder_start_id(config) -> int:
    for name in ("decoder_start_token_id", "pad_token_id", "bos_token_id"):
        value = getattr(config, name, None)
        if isinstance(value, int) and 0 <= value < config.vocab_size:
            return value
    return 0


# The names transformers gives a learned table of absolute positions.
POSITION_TABLES = ("wpe", "position_embeddings", "embed_positions", "position_embedding", "pos_embed")


def position_limit(model: nn.Module) -> tuple[int, str] | None:
    """The longest sequence a model's learned position tables hold, and why (None: no such table, as with rotary or
    relative positions). RoBERTa and its kind number positions from padding_idx + 1, so 512 rows hold 510 tokens;
    BART's table keeps `offset` (2) rows before the first position."""
    found = []
    for name, m in model.named_modules():
        table = getattr(m, "position_embeddings", None)
        pad = getattr(m, "padding_idx", None)
        if isinstance(table, nn.Embedding) and isinstance(pad, int) and not isinstance(m, nn.Embedding):
            found.append((table.num_embeddings - pad - 1,
                          f"{type(m).__name__} has {table.num_embeddings} positions, numbered from padding_idx + 1 = "
                          f"{pad + 1}"))
        elif isinstance(m, nn.Embedding) and name.rsplit(".", 1)[-1] in POSITION_TABLES:
            offset = getattr(m, "offset", 0) if isinstance(getattr(m, "offset", 0), int) else 0
            found.append((m.num_embeddings - offset, f"{name} holds {m.num_embeddings - offset} positions"))
    return min(found) if found else None


@contextmanager
def _fake(mode_cls) -> Iterator[str]:
    with mode_cls():
        yield "cpu"
