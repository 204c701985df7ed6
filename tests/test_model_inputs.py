"""Batches built from a transformers model's own config: ids inside the vocabulary and off the special ids, the
sequence inside the position table (RoBERTa's starts after its padding index), decoder inputs for encoder-decoders.
Each family's limits are read on "meta" (no weights), and one tiny forward per family proves the batch is accepted."""
from __future__ import annotations

import pytest
import torch

import sample_models
from sample_models.sources.common import UnknownModel
from sample_models.sources.hf_models import (
    decoder_start_id,
    position_limit,
    special_ids,
)


def _config(name: str, preset: str):
    entry = sample_models.get(name)
    return entry, entry.source.config(entry.ref, entry.sizes(preset))


@pytest.mark.parametrize("name", ["hf:roberta", "hf:xlm-roberta", "hf:camembert"])
def test_roberta_like_positions_start_after_padding(name):
    """The GPU failure: 512 RoBERTa tokens index position 513 of a 512-row table (a device-side assert)."""
    entry, config = _config(name, "full")
    offset = config.pad_token_id + 1
    assert entry.presets["full"]["seq_len"] + offset <= config.max_position_embeddings
    assert "Position limits" in entry.description
    with torch.device("meta"):
        limit, why = position_limit(entry.build("full"))
    assert limit == config.max_position_embeddings - offset and "padding_idx" in why


def test_a_sequence_past_the_table_is_refused_naming_the_limit():
    entry = sample_models.get("hf:roberta")
    with pytest.raises(ValueError, match=r"510 tokens or fewer"):
        entry.make_batch("full", 1, device="meta", seq_len=512)


@pytest.mark.parametrize("name", ["hf:roberta", "hf:bert", "hf:gpt2", "hf:marian", "hf:t5"])
def test_tokens_inside_the_vocabulary_and_off_the_special_ids(name):
    entry, config = _config(name, "tiny")
    batch = entry.make_batch("tiny", 64, generator=torch.Generator().manual_seed(0))
    ids = batch.inputs[0]
    assert 0 <= int(ids.min()) and int(ids.max()) < config.vocab_size
    assert not set(ids.unique().tolist()) & special_ids(config)
    for token in special_ids(config):
        assert token < config.vocab_size  # moved inside the tiny vocabulary with it (Marian's 58100)


@pytest.mark.parametrize("name", ["hf:t5", "hf:bart"])
def test_encoder_decoders_get_decoder_inputs_from_the_config(name):
    entry, config = _config(name, "tiny")
    assert "encoder-decoder" in entry.title
    batch = entry.make_batch("tiny", 2, generator=torch.Generator().manual_seed(0))
    ids, mask, decoder_ids = batch.inputs
    assert (decoder_ids[:, 0] == decoder_start_id(config)).all()  # T5: its pad id; BART: its own start id
    assert torch.equal(decoder_ids[:, 1:], batch.target[:, :-1])  # the labels, shifted right
    assert mask.dtype == ids.dtype and bool(mask.all())
    model = entry.build("tiny")
    out = model(*batch.inputs)
    loss = entry.loss(out, batch)
    loss.backward()  # training works too: a finite loss with gradients on the decoder's and the encoder's weights
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad and p.dim() > 1)


@pytest.mark.parametrize("name", ["hf:roberta", "hf:bert", "hf:gpt2", "hf:opt", "hf:llama"])
def test_each_family_accepts_its_batch(name):
    entry = sample_models.get(name)
    batch = entry.make_batch("tiny", 2, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = entry.build("tiny")(*batch.inputs)
    assert torch.isfinite(entry.loss(out, batch))


def test_models_that_cannot_be_fed_say_why():
    with pytest.raises(UnknownModel, match="decoder_input_ids"):
        sample_models.get("hf:t5gemma")  # an encoder-decoder whose forward takes other arguments
    with pytest.raises(UnknownModel, match="config class alone"):
        sample_models.get("hf:encoder-decoder")  # a composite config, nothing to build it from
