"""hf:MODEL_TYPE: a transformers causal LM or masked-LM encoder from its config class, token ids in."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
import torch.nn.functional as F

from sample_models.sources.common import QUIET, RealModel, Source, UnknownModel, _count, go_offline, repeated_classes


HF_TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
               intermediate_size=128, vocab_size=1024, max_position_embeddings=512)
# Published sizes that a config class's defaults do not give. Llama-3.2-1B: 1.24 B parameters (meta-llama's
# config.json: 2048 wide, 16 layers, 32 heads, 8 KV heads, 8192 MLP, 128256 tokens, tied embeddings).
HF_PUBLISHED = {
    "llama": {"3.2-1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                             intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True,
                             rope_theta=500000.0, max_position_embeddings=131072, head_dim=64)},
}


class HfSource(Source):
    """transformers models from their config class: causal LMs and masked-LM encoders, token ids in."""

    key, title = "hf", "Hugging Face transformers"

    def _mappings(self):
        go_offline()
        from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                            MODEL_FOR_MASKED_LM_MAPPING_NAMES)
        return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

    def names(self) -> list[str]:
        causal, masked = self._mappings()
        return sorted(set(causal) | set(masked))

    def kind(self, ref: str) -> str:
        causal, masked = self._mappings()
        if ref in masked:  # an encoder (BERT also has a causal head, BertLMHeadModel, which is not how it is used)
            return "masked"
        if ref in causal:
            return "causal"
        raise UnknownModel(f"transformers has no causal LM or masked-LM encoder of model type {ref!r} (hf:NAME takes "
                           f"a model type, such as llama, gpt2 or bert); list them with `python -m tcore models hf`")

    def config_kwargs(self, ref: str, sizes: dict) -> dict:
        """What AutoConfig.for_model gets beside the model type: the sizes its class has, and consistent ids."""
        go_offline()
        from transformers import AutoConfig
        defaults = AutoConfig.for_model(ref)
        wanted = {k: v for k, v in sizes.items() if k != "seq_len"}
        keep = {k: v for k, v in wanted.items() if hasattr(defaults, k)}
        if "hidden_size" in keep and getattr(defaults, "head_dim", None) and "head_dim" not in keep:
            keep["head_dim"] = keep["hidden_size"] // keep.get("num_attention_heads", defaults.num_attention_heads)
        # dropout probabilities read at call time (attention dropout) too; see quiet_dropout
        keep.update({k: QUIET for k in dir(defaults) if "drop" in k and isinstance(getattr(defaults, k, None), float)
                     and getattr(defaults, k) > 0})
        if "vocab_size" in keep:  # special tokens must lie inside a shrunk vocabulary
            for token, inside in (("pad_token_id", 0), ("bos_token_id", 1), ("eos_token_id", 2)):
                if isinstance(getattr(defaults, token, None), int) and getattr(defaults, token) >= keep["vocab_size"]:
                    keep[token] = inside
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
        with torch.device("meta"):
            counts = {name: sum(p.numel() for p in self.build(ref, sizes).parameters())
                      for name, sizes in presets.items()}
        model_class = self._auto(kind).__name__
        sizes = ", ".join(f"{name} {_count(n)}" for name, n in counts.items())
        return RealModel(
            name=f"hf:{ref}", ref=ref, source=self,
            title=f"{ref} ({'decoder' if kind == 'causal' else 'encoder'}, transformers)",
            description=(f"transformers {model_class}.from_config(AutoConfig.for_model({ref!r}, ...)): random "
                         f"weights, no download. Token ids in, use_cache=False; the varying dimension is the sequence "
                         f"length. Parameters by preset: {sizes}. 'full' is the config class's defaults"
                         + (f"; {', '.join(published)} the published size{'s' if len(published) > 1 else ''}."
                            if published else ".")),
            presets=presets, default_preset={"cpu": "tiny", "cuda": next(iter(published), "full")},
            default_batch={"cpu": 2, "cuda": 8}, varying_dim="sequence length (tokens)", seq_field="seq_len",
            supports_channels_last=False)

    def _auto(self, kind: str):
        go_offline()
        from transformers import AutoModelForCausalLM, AutoModelForMaskedLM
        return AutoModelForCausalLM if kind == "causal" else AutoModelForMaskedLM

    def build(self, ref, sizes):
        return self._auto(self.kind(ref)).from_config(self.config(ref, sizes))

    def make_batch(self, ref, sizes, batch_size, device, generator):
        vocab = sizes.get("vocab_size") or self.config(ref, sizes).vocab_size
        shape = (batch_size, sizes["seq_len"])
        tokens = torch.randint(0, vocab, shape, device=device, generator=generator)
        labels = torch.randint(0, vocab, shape, device=device, generator=generator)
        return (tokens,), labels

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


@contextmanager
def _fake(mode_cls) -> Iterator[str]:
    with mode_cls():
        yield "cpu"
