"""A two-block MLP regressor: an example of the `file:PATH.py` interface (python -m tcore run --model
file:examples/my_model.py).

The lab imports this file and calls what it defines:
    PRESETS          optional: preset name -> whatever build() and make_batch() need, small to large
    build(preset)    the model, built on the current device (the lab wraps the call in `with torch.device(...)`)
    make_batch(preset, batch_size, device, generator) -> (inputs tuple, target): the model is called as model(*inputs)
    loss(output, target)   optional: a scalar to train on (default: mean squared error against target)
    REPEATED_BLOCKS  optional: the block classes regional compilation compiles (default: the ones that repeat)
    DEFAULT_BATCH    optional: device type -> batch size
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "tiny": dict(width=64, depth=2),
    "full": dict(width=4096, depth=8),
}
DEFAULT_BATCH = {"cpu": 4, "cuda": 256}


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))  # (B, width)


class Regressor(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        return self.head(self.blocks(x)).squeeze(-1)  # (B,)


REPEATED_BLOCKS = (Block,)


def build(preset: str) -> nn.Module:
    return Regressor(**PRESETS[preset])


def make_batch(preset: str, batch_size: int, device, generator):
    width = PRESETS[preset]["width"]
    x = torch.randn(batch_size, width, device=device, generator=generator)
    return (x,), x.sum(dim=1) / width ** 0.5  # a target the model can learn


def loss(output, target):
    return F.mse_loss(output.float(), target)
