"""Copy as code for a real model: what its source's make_batch and loss do (sample_models.sources), written out as
lines of the program, so that the program needs only torch and the model's own library wherever it is pasted.

Each source's batch is a function make_batch(batch_size, seq_len=...) returning Batch(inputs, target), the loss
loss(out, batch). tests/test_snippet_real.py checks that the program hands Inductor the graphs, inputs and dtypes
the run's own path does (tests/snippet_probe.py), so a source whose batches change and these lines that do not
fail there.
"""
from __future__ import annotations

import sample_models
from sample_models.sources import hf_models

# What each source's program imports beyond torch, and what a person installs for it.
LIBRARIES = {"torchvision": "torchvision", "timm": "timm", "hf": "transformers", "diffusers": "diffusers"}

BATCH_TYPE = ["",
              "class Batch(NamedTuple):  # what the model is called with, model(*inputs), and what the loss compares",
              "    inputs: tuple",
              "    target: torch.Tensor"]


def batch_lines(entry: sample_models.sources.RealModel, preset: str) -> list[str]:
    """Batch, make_batch() and loss(): the run's inputs and loss as `entry`'s source makes them."""
    sizes = entry.sizes(preset)
    make = {"torchvision": _vision, "timm": _vision, "hf": _hf, "diffusers": _diffusers, "file": _file}
    return ["", "from typing import NamedTuple", "", "import torch.nn.functional as F", "", *BATCH_TYPE, "", "",
            *make[entry.source.key](entry, sizes), ""]


def requirement(entry: sample_models.sources.RealModel) -> str:
    """What the program needs beside torch, in words for its first lines."""
    if entry.source.key == "file":
        return f"your model file, {entry.source.path(entry.ref)}"
    library = LIBRARIES[entry.source.key]
    return f"{library} (pip install {library})"


def _vision(entry, sizes) -> list[str]:
    side, classes = sizes["image_size"], sizes["num_classes"]
    return ["def make_batch(batch_size, seq_len=None):  # random images and class labels",
            f"    images = torch.randn(batch_size, 3, {side}, {side}, device=device)",
            f"    labels = torch.randint(0, {classes}, (batch_size,), device=device)",
            "    return Batch((images,), labels)",
            "", "",
            "def loss(out, batch):  # float(): under autocast the logits may be bf16",
            "    return F.cross_entropy(out.float(), batch.target)"]


def _hf(entry, sizes) -> list[str]:
    config = entry.source.config(entry.ref, sizes)
    vocab = config.vocab_size
    specials = sorted(i for i in hf_models.special_ids(config) if 0 <= i < vocab)
    lines = [f"VOCAB, SPECIAL = {vocab}, {specials}  # the config's vocabulary and its special token ids",
             "", "",
             "def token_ids(shape):  # ordinary tokens only: a pad id would change what the model attends to",
             "    ids = torch.randint(0, VOCAB - len(SPECIAL), shape, device=device)",
             "    for s in SPECIAL:  # shift past each special id in turn",
             "        ids = ids + (ids >= s).to(ids.dtype)",
             "    return ids",
             "", "",
             f"def make_batch(batch_size, seq_len={sizes['seq_len']}):  # token ids in, the next tokens as labels",
             "    tokens, labels = token_ids((batch_size, seq_len)), token_ids((batch_size, seq_len))"]
    if entry.source.kind(entry.ref) == "seq2seq":
        start = hf_models.decoder_start_id(config)
        lines += ["    # teacher forcing, as the model does from labels: the decoder sees the labels shifted right",
                  f"    first = torch.full((batch_size, 1), {start}, dtype=labels.dtype, device=device)",
                  "    decoder_ids = torch.cat([first, labels[:, :-1]], dim=1)",
                  "    return Batch((tokens, torch.ones_like(tokens), decoder_ids), labels)"]
    else:
        lines.append("    return Batch((tokens,), labels)")
    return lines + ["", "",
                    "def loss(out, batch):",
                    "    return F.cross_entropy(out.logits.float().flatten(0, 1), batch.target.flatten())"]


def _diffusers(entry, sizes) -> list[str]:
    cfg = entry.source._defaults(entry.ref, sizes)
    return [f"IN_CHANNELS, JOINT_DIM, POOLED_DIM = {cfg['in_channels']}, {cfg['joint_attention_dim']}, "
            f"{cfg['pooled_projection_dim']}",
            "", "",
            f"def make_batch(batch_size, seq_len={sizes['img_tokens']}):  # seq_len: image tokens; Flux's real inputs",
            f"    n_img, n_txt = seq_len, {sizes['txt_tokens']}",
            "    x0 = torch.randn(batch_size, n_img, IN_CHANNELS, device=device)",
            "    noise = torch.randn(batch_size, n_img, IN_CHANNELS, device=device)",
            "    t = torch.rand(batch_size, device=device)",
            "    latents = (1 - t[:, None, None]) * x0 + t[:, None, None] * noise  # rectified flow",
            "    text = torch.randn(batch_size, n_txt, JOINT_DIM, device=device)",
            "    pooled = torch.randn(batch_size, POOLED_DIM, device=device)",
            "    img_ids = torch.zeros(n_img, 3, device=device)  # each latent patch's place: zeros for timing",
            "    txt_ids = torch.zeros(n_txt, 3, device=device)",
            "    guidance = torch.full((batch_size,), 3.5, device=device)  # Flux.1 [dev]'s usual guidance scale",
            "    return Batch((latents, text, pooled, t, img_ids, txt_ids, guidance), noise - x0)",
            "", "",
            "def loss(out, batch):",
            "    return F.mse_loss(out.sample.float(), batch.target)"]


def _file(entry, sizes) -> list[str]:
    return ["def make_batch(batch_size, seq_len=None):  # your file's own",
            f"    inputs, target = my_model.make_batch({sizes['preset']!r}, batch_size, device, None)",
            "    return Batch(tuple(inputs), target)",
            "", "",
            "def loss(out, batch):  # your file's loss, or mean squared error against the target",
            "    if hasattr(my_model, 'loss'):",
            "        return my_model.loss(out, batch.target)",
            "    return F.mse_loss(out.float(), batch.target.float())"]


def decoder_lines() -> list[str]:
    """A transformers causal LM's decoder for a generate program (sample_models.sources.hf_generate.HfDecoder), its
    source written into the program, so that it needs no lab code."""
    import inspect

    from sample_models.sources import hf_generate

    return ["import inspect", "", "",
            "# prefill(cache, tokens) and decode(cache, token, pos) return the greedy next token, through",
            "# transformers' own KV caches (StaticCache or DynamicCache), as its static-cache recipe does",
            *inspect.getsource(hf_generate.HfDecoder).splitlines(), "", "",
            *inspect.getsource(hf_generate.cache_tensors).splitlines(), "", ""]
