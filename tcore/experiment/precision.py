"""The precision choices: what each casts, autocasts or switches to TF32, and the tolerance its outputs are held to."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Precision:
    """What one precision choice does: the worker applies it, the label and the tolerance come from it."""

    weights: str            # the dtype the model and its floating-point inputs are cast to
    autocast: str | None    # the dtype torch.autocast runs matmuls and convolutions in; None for no autocast
    tf32: bool              # float32 matmuls and convolutions on tensor cores in TF32 (GPU only)
    tolerance: float        # largest |compiled - eager| / max|eager| accepted as the same result
    summary: str

    @property
    def doc(self) -> str:
        return f"{self.summary} Correctness tolerance {self.tolerance:g}."


# How each dtype a precision names is written in a program (the copy-as-code snippets).
TORCH_DTYPES = {"float32": "torch.float32", "bfloat16": "torch.bfloat16", "float16": "torch.float16"}

# Inductor reorders and fuses reductions, and reduced precisions round every intermediate (eager rounds
# after each op, fused code once per kernel), so the tolerance widens with the format's mantissa.
PRECISIONS: dict[str, Precision] = {
    "fp32": Precision("float32", None, False, 1e-3,
                      "float32 weights and math, TF32 off: the reference, and the slowest on a GPU."),
    "tf32": Precision("float32", None, True, 1e-2,
                      "float32 weights; matmuls and convolutions run on tensor cores in TF32 (a 10-bit mantissa): "
                      "the first precision knob people turn on Ampere and newer GPUs; no effect on the CPU."),
    "amp-bf16": Precision("float32", "bfloat16", False, 5e-2,
                          "Autocast to bfloat16 over float32 weights, as people train: matmuls in bf16, and the "
                          "weights are cast every step."),
    "amp-fp16": Precision("float32", "float16", False, 1e-2,
                          "Autocast to float16 over float32 weights: matmuls in fp16 (training in fp16 also "
                          "needs loss scaling, which this lab leaves out)."),
    "bf16": Precision("bfloat16", None, False, 5e-2,
                      "Model and inputs cast to bfloat16, as people run inference (diffusers' "
                      "torch_dtype=torch.bfloat16): half the weight memory and no casts."),
    "fp16": Precision("float16", None, False, 1e-2,
                      "Model and inputs cast to float16, for inference: like bf16 with a finer mantissa and a "
                      "narrower range, so large activations can overflow."),
}
