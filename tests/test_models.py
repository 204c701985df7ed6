"""Tests for the sample model registry: shapes, training, parameter counts, FLOPs, graph breaks."""
import pytest
import torch

import sample_models
from sample_models import captioner, flux

NAMES = list(sample_models.MODELS)


def tiny_model_and_batch(name, *, graph_break=False, seed=0):
    m = sample_models.get(name)
    torch.manual_seed(seed)
    model = m.build("tiny", graph_break=graph_break)
    batch = m.make_batch("tiny", m.default_batch["cpu"], generator=torch.Generator().manual_seed(seed))
    return m, model, batch


def expected_output_shape(name, cfg, batch_size):
    if name == "captioner":
        return (batch_size, cfg.max_caption_len, cfg.vocab_size)
    if name == "resnet50":
        return (batch_size, cfg.num_classes)
    return (batch_size, cfg.img_tokens, cfg.in_channels)


def test_registry_order_and_fields():
    assert NAMES == ["captioner", "resnet50", "flux"]
    for name, m in sample_models.MODELS.items():
        assert m.name == name
        assert list(m.presets)[0] == "tiny" and list(m.presets)[-1] == "full" and len(m.presets) >= 3
        assert m.default_preset["cpu"] == "tiny" and m.default_preset["cuda"] in m.presets
        assert m.default_batch["cpu"] > 0 and m.default_batch["cuda"] > 0
        assert m.config("tiny", graph_break=True).graph_break


@pytest.mark.parametrize("name", NAMES)
def test_tiny_forward_and_training_step(name):
    m, model, batch = tiny_model_and_batch(name)
    out = model(*batch.inputs)
    bs = m.default_batch["cpu"]
    assert out.shape == expected_output_shape(name, m.config("tiny"), bs)
    loss = m.loss(out, batch)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None, pname
        assert torch.isfinite(p.grad).all(), pname


@pytest.mark.parametrize("name", NAMES)
def test_training_loss_falls(name):
    m, model, batch = tiny_model_and_batch(name)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(15):
        loss = m.loss(model(*batch.inputs), batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


@pytest.mark.parametrize("name", NAMES)
def test_the_tiny_preset_stays_small_enough_for_the_test_suite(name):
    """The suite runs every model's tiny preset many times on a 2-core CPU. Counted, not timed: its CPU batch is
    37-79 MFLOP a forward today (tens of ms); past 500 MFLOP or 2 M parameters the suite's times would grow."""
    m = sample_models.get(name)
    assert m.flops_per_sample("tiny") * m.default_batch["cpu"] < 500e6
    assert m.param_count("tiny") < 2_000_000


def test_resnet50_full_matches_torchvision_param_count():
    assert sample_models.get("resnet50").param_count("full") == 25_557_032


def test_flux_full_param_count_is_flux1():
    assert abs(sample_models.get("flux").param_count("full") - 11.9e9) / 11.9e9 < 0.02


def test_repeated_blocks_captioner():
    m = sample_models.get("captioner")
    cfg = m.config("tiny")
    blocks = m.repeated_blocks(m.build("tiny"))
    kinds = [type(b) for b in blocks]
    assert kinds == [captioner.EncoderBlock] * cfg.n_enc_layers + [captioner.DecoderBlock] * cfg.n_dec_layers


def test_repeated_blocks_flux_full_on_meta():
    m = sample_models.get("flux")
    blocks = m.repeated_blocks(m.build("full", device="meta"))
    assert [type(b) for b in blocks] == [flux.DoubleStreamBlock] * 19 + [flux.SingleStreamBlock] * 38


def test_repeated_blocks_resnet50_full_on_meta():
    m = sample_models.get("resnet50")
    assert len(m.repeated_blocks(m.build("full", device="meta"))) == 3 + 4 + 6 + 3


@pytest.mark.parametrize("seq_len", [1, 7, None])
def test_captioner_variable_caption_length(seq_len):
    m, model, _ = tiny_model_and_batch("captioner")
    cfg = m.config("tiny")
    batch = m.make_batch("tiny", 2, seq_len=seq_len)
    T = cfg.max_caption_len if seq_len is None else seq_len
    images, tokens = batch.inputs
    assert images.dtype == torch.float32 and tokens.dtype == torch.long
    assert tokens.shape == (2, T) and batch.target.shape == (2, T)
    out = model(*batch.inputs)
    assert out.shape == (2, T, cfg.vocab_size)
    assert torch.isfinite(m.loss(out, batch))


def test_captioner_rejects_too_long_caption():
    m = sample_models.get("captioner")
    with pytest.raises(ValueError, match="1..16"):
        m.make_batch("tiny", 2, seq_len=17)


def test_flux_variable_image_tokens():
    m, model, _ = tiny_model_and_batch("flux")
    batch = m.make_batch("tiny", 2, seq_len=37)
    assert batch.inputs[0].shape == (2, 37, m.config("tiny").in_channels)
    assert model(*batch.inputs).shape == batch.target.shape


@pytest.mark.parametrize("name", NAMES)
def test_make_batch_on_meta(name):
    m = sample_models.get(name)
    batch = m.make_batch("full", 2, device="meta")
    assert all(t.device.type == "meta" for t in (*batch.inputs, batch.target))
    assert all(t.dtype in (torch.float32, torch.long) for t in (*batch.inputs, batch.target))


def test_resnet50_channels_last():
    m, model, batch = tiny_model_and_batch("resnet50")
    expected = model(*batch.inputs)
    model = model.to(memory_format=torch.channels_last)
    out = model(batch.inputs[0].to(memory_format=torch.channels_last))
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_flops_per_sample(name):
    m = sample_models.get(name)
    forward = m.flops_per_sample("tiny")
    assert forward > 0
    assert m.flops_per_sample("tiny", training=True) > forward


@pytest.mark.parametrize("name", NAMES)
def test_graph_break_does_not_change_output(name):
    _, plain, batch = tiny_model_and_batch(name, graph_break=False, seed=1)
    _, broken, _ = tiny_model_and_batch(name, graph_break=True, seed=1)
    torch.testing.assert_close(broken(*batch.inputs), plain(*batch.inputs), rtol=0, atol=0)


def test_graph_break_is_seen_by_dynamo():
    torch._dynamo.reset()
    m = sample_models.get("captioner")
    x = torch.randn(2, 16, m.config("tiny").dim)
    with_break = torch._dynamo.explain(captioner.EncoderBlock(m.config("tiny", graph_break=True)))(x)
    assert with_break.graph_break_count >= 1
    without = torch._dynamo.explain(captioner.EncoderBlock(m.config("tiny")))(x)
    assert without.graph_break_count == 0


def test_unknown_names_raise_with_choices():
    with pytest.raises(ValueError, match="unknown model 'x'; choose one of: captioner, resnet50, flux"):
        sample_models.get("x")
    with pytest.raises(ValueError, match="choose one of: tiny, small, full"):
        sample_models.get("resnet50").config("huge")
    with pytest.raises(ValueError, match="tiny, medium, full"):
        sample_models.get("flux").build("huge", device="meta")
