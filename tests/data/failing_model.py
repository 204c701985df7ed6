"""A token model whose forward fails as a real one can: preset "index" feeds an id past the end of its embedding
(IndexError on the CPU, a device-side assert on a GPU); preset "cuda" raises the error CUDA raises for that assert,
so the CUDA message path is tested on a machine without a GPU. Used by tests/test_failures.py."""
import os

import torch
import torch.nn as nn

PRESETS = {"index": {"rows": 10, "cuda": False}, "cuda": {"rows": 10, "cuda": True}}
CUDA_TEXT = ("CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some "
             "other API call, so the stacktrace below might be incorrect.")


class Tokens(nn.Module):
    def __init__(self, rows: int, cuda: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(rows, 8)
        self.head = nn.Linear(8, 1)
        self.cuda_error = cuda

    def forward(self, ids):
        # a GPU reports the bad index later, as a device-side assert; the lab's rerun on the CPU sees it at the op
        gpu_like = self.cuda_error and os.environ.get("COMPILE_LAB_CPU_RERUN") != "1"
        if gpu_like:
            ids = ids.clamp(max=self.embed.num_embeddings - 1)
        x = self.embed(ids)
        if gpu_like and type(x) is torch.Tensor and x.device.type != "meta":  # not the lab's size estimate
            raise RuntimeError(CUDA_TEXT)
        return self.head(x).mean(dim=(1, 2))


def build(preset):
    return Tokens(**PRESETS[preset])


def make_batch(preset, batch_size, device, generator):
    ids = torch.randint(0, PRESETS[preset]["rows"], (batch_size, 4), device=device, generator=generator)
    ids[0, 0] = PRESETS[preset]["rows"]  # one id past the end of the table
    return (ids,), torch.zeros(batch_size, device=device)
