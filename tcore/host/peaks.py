"""What a GPU can do at most: dense peak TFLOP/s per precision and memory bandwidth, from the vendors' datasheets.

Figures are the dense ones (NVIDIA's headline tensor figures count 2:4 sparsity and are twice
these). A run's achieved TFLOP/s over the peak of the precision it computed in says how much of the
GPU a step uses; an unknown GPU says so rather than borrow another's figures.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tcore.experiment.spec import PRECISIONS


@dataclass(frozen=True)
class Peak:
    name: str
    fp32: float        # TFLOP/s on the CUDA cores, no tensor cores
    tf32: float        # TFLOP/s, tensor cores, dense
    half: float        # TFLOP/s for bf16 and fp16, tensor cores, dense
    mem_tb_s: float    # memory bandwidth, TB/s

    def tflops(self, precision: str) -> float:
        """The peak for what a precision's matmuls compute in: bf16/fp16 tensor cores, TF32, or plain fp32."""
        p = PRECISIONS[precision]
        if p.autocast or p.weights != "float32":
            return self.half
        return self.tf32 if p.tf32 else self.fp32


# Matched in order against torch.cuda.get_device_name(): the first pattern that matches names the GPU.
GPUS: list[tuple[str, Peak]] = [
    (r"H200 NVL", Peak("H200 NVL", 60, 418, 835, 4.8)),
    (r"H200", Peak("H200 SXM", 67, 495, 989, 4.8)),
    (r"H100 NVL", Peak("H100 NVL", 60, 418, 835, 3.9)),
    (r"H100.*PCIe", Peak("H100 PCIe", 51, 378, 756, 2.0)),
    (r"H100", Peak("H100 SXM", 67, 495, 989, 3.35)),
    (r"A100.*(PCIe|PCIE).*80|A100 80GB PCIe", Peak("A100 PCIe 80GB", 19.5, 156, 312, 1.935)),
    (r"A100.*(PCIe|PCIE)", Peak("A100 PCIe 40GB", 19.5, 156, 312, 1.555)),
    (r"A100.*80", Peak("A100 SXM 80GB", 19.5, 156, 312, 2.039)),
    (r"A100", Peak("A100 SXM 40GB", 19.5, 156, 312, 1.555)),
    (r"L40S", Peak("L40S", 91.6, 183, 362, 0.864)),
    (r"\bL4\b", Peak("L4", 30.3, 60, 121, 0.3)),
    (r"\bA10\b", Peak("A10", 31.2, 62.5, 125, 0.6)),
]


def lookup(gpu_name: str | None) -> Peak | None:
    """The peaks of a GPU by its CUDA name ('NVIDIA H100 80GB HBM3'); None for one not in the table."""
    if not gpu_name:
        return None
    return next((peak for pattern, peak in GPUS if re.search(pattern, gpu_name)), None)
