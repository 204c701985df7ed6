"""ResNet-50 v1.5 image classifier, laid out like torchvision's so parameter names and counts match."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    layers: tuple[int, ...] = (3, 4, 6, 3)  # bottlenecks per stage; the four stages give ResNet-50 its 50 layers
    width: int = 64                         # channels after the stem; each stage doubles it, bottlenecks expand it 4x
    num_classes: int = 1000
    image_size: int = 224                   # only sets the batch: the global average pool accepts any size
    graph_break: bool = False               # put a deliberate graph break in every block, for the workshop


presets = {
    "tiny": dict(layers=(1, 1, 1, 1), width=16, num_classes=10, image_size=32),
    "small": dict(layers=(2, 2, 2, 2), width=32, num_classes=100, image_size=128),
    "full": dict(layers=(3, 4, 6, 3), width=64, num_classes=1000, image_size=224),
}


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand, each with BatchNorm, plus a residual shortcut."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int, graph_break: bool):
        super().__init__()
        out_channels = width * self.expansion
        self.graph_break = graph_break
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)  # no bias: the BatchNorm after it has one
        self.bn1 = nn.BatchNorm2d(width)
        # v1.5 strides here, not in conv1, so the downsampling conv sees every input pixel
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        # the shortcut must match the main path's shape whenever the block changes resolution or channels
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out_channels))
        else:
            self.downsample = nn.Identity()

    def forward(self, x):  # (B, C_in, H, W) -> (B, 4 * width, H / stride, W / stride)
        if self.graph_break:
            # Deliberate graph break: .item() hands a tensor value to Python and the `if` branches on it,
            # which dynamo cannot put in a graph. Real activations never get near 1e4, so results are unchanged.
            if x.abs().mean().item() > 1e4:
                x = x.clamp(-1e4, 1e4)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.downsample(x))


class ResNet(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        w = cfg.width
        self.conv1 = nn.Conv2d(3, w, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.in_channels = w
        self.layer1 = self._make_layer(w, cfg.layers[0], 1, cfg.graph_break)
        self.layer2 = self._make_layer(2 * w, cfg.layers[1], 2, cfg.graph_break)
        self.layer3 = self._make_layer(4 * w, cfg.layers[2], 2, cfg.graph_break)
        self.layer4 = self._make_layer(8 * w, cfg.layers[3], 2, cfg.graph_break)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(self.in_channels, cfg.num_classes)

    def _make_layer(self, width, n_blocks, stride, graph_break):
        blocks = []
        for i in range(n_blocks):
            # only the first block of a stage changes resolution and channel count
            blocks.append(Bottleneck(self.in_channels, width, stride if i == 0 else 1, graph_break))
            self.in_channels = width * Bottleneck.expansion
        return nn.Sequential(*blocks)

    def forward(self, x):  # (B, 3, H, W)
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))  # (B, w, H/4, W/4)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))  # (B, 32w, H/32, W/32)
        return self.fc(torch.flatten(self.avgpool(x), 1))  # (B, num_classes)


def make_batch(cfg: Config, batch_size: int, *, device, seq_len, generator):
    if seq_len is not None:
        raise ValueError("resnet50 has no sequence dimension; vary the batch size instead")
    images = torch.randn(batch_size, 3, cfg.image_size, cfg.image_size, device=device, generator=generator)
    labels = torch.randint(cfg.num_classes, (batch_size,), device=device, generator=generator)
    return (images,), labels


def loss(logits, labels):
    # float(): under autocast the logits may be bf16, and cross-entropy wants full precision
    return F.cross_entropy(logits.float(), labels)
