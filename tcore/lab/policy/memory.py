"""How much device memory one run needs, estimated before it queues by building it on the meta device."""
from __future__ import annotations

import functools
import weakref

from tcore.experiment.spec import PRECISIONS, Experiment


class NoEstimate(NotImplementedError):
    """No memory estimate for a run, and why: it then has only its own out-of-memory guard (and shares no GPU)."""


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
    A forward that cannot run on the model's own abstract device (an op without a meta kernel, an output whose size
    depends on values) runs again on fake tensors with symbolic sizes, each such size counted at its largest.
    Not included: the CUDA context (about 0.5 GiB), the caching allocator's slack, compile
    workspaces, CUDA graph pools (reduce-overhead keeps their memory) and the compiled variant's
    different fusion of intermediates. The run itself reports its measured peak.

    Raises NoEstimate (a NotImplementedError), saying why, where no estimate can be made; never anything else: a
    check before a run never stops the run.
    """
    found = _estimate_bytes(exp.model, exp.preset, exp.batch_size, exp.task, exp.precision)
    if isinstance(found, str):
        raise NoEstimate(found)
    return found / 2**30


def why_unknown(exp: Experiment) -> str | None:
    """Why `exp` has no memory estimate, or None where it has one."""
    found = _estimate_bytes(exp.model, exp.preset, exp.batch_size, exp.task, exp.precision)
    return found if isinstance(found, str) else None


def unknown_note(exp: Experiment, shares_gpu: bool) -> str:
    """The note a run without a memory estimate carries: what guards it instead, and whom it shares a GPU with."""
    return (f"the memory estimate is unknown for this model ({why_unknown(exp) or 'not made'}): it runs with the "
            "out-of-memory guard alone" + ("; it runs alone on its GPU, never sharing it with another run"
                                            if shares_gpu else ""))


@functools.lru_cache(maxsize=256)
def _estimate_bytes(model: str, preset: str, batch_size: int, task: str, precision: str) -> int | str:
    """The estimate in bytes, or why there is none (a string: cached like an estimate, and never raised)."""
    try:
        import sample_models
        from sample_models.sources.file_models import FileCard

        entry = sample_models.get(model)
    except Exception as e:  # noqa: BLE001 (the spec's own check says what is wrong with the name)
        return f"{model} could not be read ({_words(e)})"
    if isinstance(entry, FileCard):  # a model file is built in workers only: no estimate, the run's own OOM guard
        return f"{model} is built in its worker only"
    first: _Failed | None = None
    for way in ("abstract", "symbolic"):
        try:
            return _measure(entry, way, preset, batch_size, task, precision)
        except _Failed as e:
            first = first or e  # the abstract run's failure names the cause (the op, the value read)
    stage, e = first.stage, first.__cause__
    if stage == "build":
        return f"{model} cannot be built on the meta device ({_words(e)})"
    # A forward that reads a tensor's values (BART's training forward on torch 2.11 raised
    # DataDependentOutputException on fake tensors; a Python branch on a value) has no abstract run: no estimate, as
    # for an op without a meta kernel, never a traceback in place of the run.
    return f"{model}'s forward cannot run on abstract tensors ({_words(e)})"


class _Failed(Exception):
    def __init__(self, stage: str) -> None:
        super().__init__(stage)
        self.stage = stage


def _measure(entry, way: str, preset: str, batch_size: int, task: str, precision: str) -> int:
    """The estimate on the model's own abstract device ("abstract": meta, or fake tensors for models that look at
    their inputs' values), or on fake tensors with symbolic sizes ("symbolic"). Raises _Failed("build" or "run")."""
    import torch
    from torch.utils._pytree import tree_leaves

    from sample_models.interface import symbolic_sizes

    stage = "build"
    try:
        if way == "symbolic":
            net = entry.build(preset, device="meta")
            context = symbolic_sizes()
        else:
            context = entry.abstract()
        with context as device:
            if way == "abstract":
                net = entry.build(preset, device=device)  # graph_break off: .item() cannot run on meta
            batch = entry.make_batch(preset, batch_size, device=device)
            weights = sum(_nbytes(t) for t in [*net.parameters(), *net.buffers()])
            inputs = sum(_upper_bound(_nbytes(t)) for t in tree_leaves((batch.inputs, batch.target)))
            training = task == "training"
            net.train(training)
            stage = "run"
            with _live_bytes_mode()() as live, torch.set_grad_enabled(training):
                output = net(*batch.inputs)
                if training:
                    entry.loss(output, batch).backward()
    except Exception as e:  # noqa: BLE001 (an estimate only; the run itself has the OOM guard)
        raise _Failed(stage) from e
    p = PRECISIONS[precision]
    half = p.autocast is not None or p.weights != "float32"
    weights = weights // 2 if p.weights != "float32" else weights
    activations = live.peak // 2 if half else live.peak
    return weights + inputs + (3 * weights if training else 0) + activations


def _words(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:200]}" if text else type(e).__name__


def _upper_bound(n) -> int:
    """A byte count as an int: a symbolic one (an output whose size depends on values, under symbolic_sizes) at the
    top of its range (a boolean mask selects at most every element). Raises where a size has no upper end."""
    if isinstance(n, int):
        return n
    expr, env = n.node.expr, n.node.shape_env
    top = {s: env.var_to_range[s].upper for s in expr.free_symbols}
    try:
        return int(expr.xreplace(top))
    except (TypeError, ValueError, AttributeError):  # sympy's infinity: a size with no upper end
        raise ValueError(f"a size that depends on values ({expr}) has no upper bound") from None


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
                    n = _upper_bound(_nbytes(t))
                    self.live += n
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(t, self._freed, n)  # fires when the tensor is freed
            return out

    return LiveBytes
