"""Every family's `tiny` preset is tiny: what a CPU runs by default. Counted on the meta device (nothing allocated,
nothing downloaded). Transformers of every source shrink their layers and widths through their library's own
constructor (a ViT, which takes only its own resolution, included); convolutional image models keep their real
weights and run at 64 px."""
import pytest
import torch

import sample_models

TINY_PARAMS = 1_000_000  # the built-ins, transformers and diffusers tiny presets are 0.1-0.5 M parameters
SMALL_SIDE = 64

SHRUNK = ["captioner", "resnet50", "flux", "hf:gpt2", "hf:llama", "hf:bert", "hf:t5", "diffusers:flux",
          "torchvision:vit_b_16", "torchvision:vit_h_14", "timm:vit_base_patch16_224", "timm:deit_small_patch16_224",
          "timm:beit_base_patch16_224", "timm:eva02_tiny_patch14_224"]
# Real weights at a small resolution: what the architecture accepts below its own size.
SMALL_IMAGES = ["torchvision:resnet18", "torchvision:convnext_tiny", "torchvision:swin_t", "timm:efficientnet_b0",
                "timm:swin_tiny_patch4_window7_224", "timm:mixer_b16_224"]


@pytest.mark.parametrize("name", SHRUNK + SMALL_IMAGES)
def test_every_family_has_a_tiny_preset(name):
    m = sample_models.get(name)
    tiny, full = m.param_count("tiny"), m.param_count(max(m.presets, key=m.param_count))
    assert m.default_preset["cpu"] == "tiny"
    if name in SHRUNK:
        assert tiny <= TINY_PARAMS and tiny * 20 <= full, f"{name} tiny: {tiny:,} parameters of {full:,}"
    else:
        side = m.sizes("tiny")["image_size"]
        assert side <= SMALL_SIDE and side < m.sizes("full")["image_size"], f"{name} tiny at {side} px"


@pytest.mark.parametrize("name", ["torchvision:vit_b_16", "timm:vit_base_patch16_224"])
def test_a_vit_tiny_is_its_own_class_made_small_and_runs_on_the_cpu(name):
    m = sample_models.get(name)
    sizes = m.sizes("tiny")
    assert sizes["image_size"] == SMALL_SIDE and m.sizes("full")["image_size"] == 224
    model = m.build("tiny").eval()
    assert type(model).__name__ == "VisionTransformer"  # the library's own class, not a stand-in
    assert sum(p.numel() for p in model.parameters()) == m.param_count("tiny") < 250_000
    assert len(m.repeated_blocks(model)) == 2  # two encoder blocks: regional compilation still has copies
    batch = m.make_batch("tiny", 2, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert model(*batch.inputs).shape == (2, 1000)
    code = "\n".join(m.build_code("tiny"))
    assert "num_layers=2" in code or "depth=2" in code  # copy-as-code builds the same tiny model
    assert "built small through its constructor: " in m.description
