"""How much device memory one run needs, estimated before it queues by building it on the meta device."""
from __future__ import annotations

import functools
import weakref

from tcore.experiment.spec import PRECISIONS, Experiment


def estimate_memory_gib(exp: Experiment) -> float:
    """An estimate, in GiB, of the device memory one run of `exp` needs; the UI must call it an estimate.

    Measured on the meta device, where tensors have shapes but no storage, so nothing is allocated:
      weights and buffers (float32, or half that for bf16 and fp16 weights; autocast keeps them float32)
      + the batch
      + for training, gradients and AdamW's two moments: 3 x the weights
      + activations: the peak of the bytes held by tensors that the forward (and for training the
        loss and backward) creates, while they are alive. With grad on, autograd keeps the saved
        activations alive, so for training this is roughly the sum of the forward's saved outputs;
        under no_grad it is the largest set of intermediates alive at once. Views are not counted
        twice. bfloat16 and float16 (autocast or cast weights) halve the activations (a rough figure:
        autocast keeps some ops, such as softmax and norms, in float32).
    Not included: the CUDA context (about 0.5 GiB), the caching allocator's slack, compile
    workspaces, CUDA graph pools (reduce-overhead keeps their memory) and the compiled variant's
    different fusion of intermediates. The run itself reports its measured peak.
    """
    return _estimate_bytes(exp.model, exp.preset, exp.batch_size, exp.task, exp.precision) / 2**30


@functools.lru_cache(maxsize=256)
def _estimate_bytes(model: str, preset: str, batch_size: int, task: str, precision: str) -> int:
    import torch
    from torch.utils._pytree import tree_leaves

    import sample_models

    from sample_models.sources.file_models import FileCard

    entry = sample_models.get(model)
    if isinstance(entry, FileCard):  # a model file is built in workers only: no estimate, the run's own OOM guard
        raise NotImplementedError(f"{model} is built in its worker only")
    with entry.abstract() as device:  # "meta", or fake tensors for models that look at their inputs' values
        net = entry.build(preset, device=device)  # graph_break off: .item() cannot run on meta, and costs no memory
        batch = entry.make_batch(preset, batch_size, device=device)
        weights = sum(_nbytes(t) for t in [*net.parameters(), *net.buffers()])
        inputs = sum(_nbytes(t) for t in tree_leaves((batch.inputs, batch.target)))
        training = task == "training"
        net.train(training)
        try:
            with _live_bytes_mode()() as live, torch.set_grad_enabled(training):
                output = net(*batch.inputs)
                if training:
                    entry.loss(output, batch).backward()
        except Exception as e:  # noqa: BLE001: an estimate only; the run itself has the OOM guard
            # A forward that reads a tensor's values (BART's training forward on torch 2.11 raised
            # DataDependentOutputException on fake tensors) has no abstract run: no estimate, as for an op
            # without a meta kernel, never a traceback in place of the run.
            raise NotImplementedError(f"{model}'s forward cannot run on abstract tensors "
                                      f"({type(e).__name__}): no memory estimate") from e
    p = PRECISIONS[precision]
    half = p.autocast is not None or p.weights != "float32"
    weights = weights // 2 if p.weights != "float32" else weights
    activations = live.peak // 2 if half else live.peak
    return weights + inputs + (3 * weights if training else 0) + activations


def _nbytes(t) -> int:
    return t.numel() * t.element_size()


@functools.cache
def _live_bytes_mode() -> type:
    """The TorchDispatchMode class below, defined on first use so that importing this module needs no torch."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class LiveBytes(TorchDispatchMode):
        """Tracks the bytes of the tensors that ops create while those tensors are alive, and their peak."""

        def __init__(self) -> None:
            super().__init__()
            self.live = self.peak = 0

        def _freed(self, n: int) -> None:
            self.live -= n

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if any(r.alias_info is not None for r in func._schema.returns):
                return out  # a view or an in-place result: its memory is counted already
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    n = _nbytes(t)
                    self.live += n
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(t, self._freed, n)  # fires when the tensor is freed
            return out

    return LiveBytes
