"""The experiment spec: one frozen dataclass that describes a run, validates itself and round-trips to JSON."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

DTYPES = ("float32", "bfloat16", "float16")
DEVICES = ("auto", "cuda", "cpu")
TASKS = ("inference", "training")
COMPILE_SCOPES = ("off", "whole", "regional")
# The keys of torch._inductor.list_mode_options(), the same on torch 2.11 and 2.13
# (tests/test_spec.py checks them against the installed torch). Kept here so that
# validating a spec does not import Inductor.
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs", "lite")
BACKENDS = ("inductor", "aot_eager", "eager", "cudagraphs")
SHAPE_ORDERS = ("ascending", "shuffled")
SHAPE_REMEDIES = ("none", "mark_dynamic", "buckets")
# cold: fresh compile caches; warm: the persistent local cache of earlier runs; artifacts: a fresh
# cache seeded with the portable artifacts an earlier run with the same settings saved (tcore.caches)
CACHE_MODES = ("cold", "warm", "artifacts")
# The fixed choices of each field, for validation, the command line and the app's widgets.
CHOICES = {"dtype": DTYPES, "device": DEVICES, "task": TASKS, "compile": COMPILE_SCOPES, "mode": MODES,
           "backend": BACKENDS, "cache": CACHE_MODES, "shape_order": SHAPE_ORDERS, "shape_remedy": SHAPE_REMEDIES}


class SpecError(ValueError):
    """An experiment that cannot run as written; the message says what to change."""


@dataclass(frozen=True)
class Experiment:
    model: str = "resnet50"
    preset: str = "tiny"
    batch_size: int = 4
    dtype: str = "float32"  # reduced precisions run under AMP autocast; weights stay float32
    device: str = "auto"  # auto: cuda when available, else cpu
    task: str = "inference"

    compile: str = "whole"  # off | whole model | regional (each repeated block compiled in place)
    mode: str = "default"
    dynamic: bool | None = None  # None: static first, then automatic dynamic on a shape change
    fullgraph: bool = False
    backend: str = "inductor"
    compile_optimizer: bool = False  # training only; the learning rate is a tensor so LR changes don't recompile

    recompile_limit: int = 8  # torch._dynamo.config.recompile_limit: past it a frame runs eagerly

    channels_last: bool = False
    graph_break: bool = False  # switch on each model's deliberate graph break (a .item() branch)

    # Dynamic shapes: feed `shape_count` distinct sizes of the varying dimension (0: one fixed shape).
    shape_count: int = 0
    shape_order: str = "ascending"
    shape_remedy: str = "none"  # mark_dynamic before the first call, or pad to `buckets` sizes warmed up in advance
    buckets: int = 3

    warmup_steps: int = 3
    timed_s: float = 4.0  # timed seconds per variant, split over `rounds` blocks
    timed_steps: int | None = None  # when set, replaces timed_s: timed steps per variant
    rounds: int = 5  # alternating eager/compiled timed blocks, as the Inductor harness does against drift
    seed: int = 0
    cache: str = "cold"  # cold: fresh compile caches, so compile time is the cold one

    def __post_init__(self) -> None:
        for name, choices in CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise SpecError(f"unknown {name} {value!r}; choose one of: {', '.join(choices)}")
        if self.dynamic not in (None, True, False):
            raise SpecError(f"dynamic must be None, True or False, not {self.dynamic!r}")

        import sample_models  # imported here: it imports torch, which validating the choices above does not need

        try:
            entry = sample_models.get(self.model)
        except ValueError as e:  # the registry's message already lists the valid names
            raise SpecError(str(e)) from None
        if self.preset not in entry.presets:
            raise SpecError(
                f"unknown preset {self.preset!r} for {self.model}; choose one of: {', '.join(entry.presets)}"
            )
        if self.channels_last and not entry.supports_channels_last:
            raise SpecError(f"channels_last applies to convolutional models only; turn it off for {self.model}")

        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise SpecError(f"batch_size must be a whole number of at least 1, not {self.batch_size!r}")
        if self.compile_optimizer and self.task != "training":
            raise SpecError("compile_optimizer needs task=training: an inference run has no optimizer step")
        if self.backend != "inductor" and self.mode != "default":
            raise SpecError(f"mode {self.mode!r} applies only to the inductor backend; set mode=default or backend=inductor")
        if not self.compiles and (self.mode != "default" or self.fullgraph or self.dynamic is not None
                                  or self.backend != "inductor"):
            raise SpecError("compile settings (mode, dynamic, fullgraph, backend) need compile=whole or regional")
        if self.recompile_limit < 1:
            raise SpecError("recompile_limit must be at least 1")
        if self.shape_count == 1 or self.shape_count < 0:
            raise SpecError("shape_count must be 0 (one fixed shape) or at least 2 distinct shapes")
        if self.shape_count and not self.compiles:
            raise SpecError("a shape schedule shows recompilations: it needs compile=whole or regional")
        if self.shape_remedy != "none" and not self.shape_count:
            raise SpecError(f"shape_remedy={self.shape_remedy} needs a shape schedule: set shape_count to 2 or more")
        if self.shape_remedy == "buckets" and not 1 <= self.buckets < self.shape_count:
            raise SpecError(f"buckets must be between 1 and shape_count - 1 ({self.shape_count - 1}), not {self.buckets}")
        if self.cache == "artifacts" and not self.has_compiled_variant:
            raise SpecError("cache=artifacts warms up a compile: it needs something compiled (compile or compile_optimizer)")
        if self.warmup_steps < 1:
            raise SpecError("warmup_steps must be at least 1: the first eager step sets the compile-time baseline")
        if self.rounds < 1:
            raise SpecError("rounds must be at least 1")
        if self.timed_steps is not None and self.timed_steps < self.rounds:
            raise SpecError(f"timed_steps ({self.timed_steps}) must be at least rounds ({self.rounds})")
        if not self.timed_s > 0:
            raise SpecError(f"timed_s must be a positive number of seconds, not {self.timed_s!r}")

    @property
    def compiles(self) -> bool:
        """Whether the model itself is compiled (the optimizer step may be compiled on its own)."""
        return self.compile != "off"

    @property
    def has_compiled_variant(self) -> bool:
        return self.compiles or self.compile_optimizer

    @property
    def label(self) -> str:
        """A short human name: 'resnet50/tiny bs4 bf16 inference, whole default'."""
        scope = "eager only" if not self.has_compiled_variant else (
            f"{self.compile} {self.mode}" if self.compiles else "optimizer only")
        if self.compile_optimizer and self.compiles:
            scope += " +opt"
        if self.dynamic is not None:
            scope += f" dynamic={self.dynamic}"
        if self.graph_break:
            scope += " +break"
        if self.shape_count:
            scope += f", {self.shape_count} shapes" + ("" if self.shape_remedy == "none" else f" {self.shape_remedy}")
        short = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}[self.dtype]
        return f"{self.model}/{self.preset} bs{self.batch_size} {short} {self.task}, {scope}"

    def replace(self, **changes: Any) -> Experiment:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Experiment:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(f"unknown experiment field(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> Experiment:
        return cls.from_dict(json.loads(text))


def resolve_device(requested: str, cuda_available: bool) -> str:
    """Turn 'auto' into the device this machine will run on; refuse 'cuda' where there is none."""
    if requested == "auto":
        return "cuda" if cuda_available else "cpu"
    if requested == "cuda" and not cuda_available:
        raise SpecError("device=cuda but this machine has no usable CUDA GPU; choose device=cpu or auto")
    return requested


def check_on_device(exp: Experiment, device: str) -> list[str]:
    """Refuse what cannot run on `device`; return notes on settings that run there but do nothing."""
    notes = []
    if device == "cpu":
        if exp.backend == "cudagraphs":
            raise SpecError("backend=cudagraphs needs a CUDA GPU; choose backend=inductor on the CPU")
        if exp.mode in ("reduce-overhead", "max-autotune"):
            notes.append(f"mode={exp.mode} uses CUDA graphs, which do not exist on the CPU: "
                         "here it behaves like " + ("default" if exp.mode == "reduce-overhead" else
                                                     "max-autotune-no-cudagraphs"))
    if exp.dynamic is True and exp.mode in ("reduce-overhead", "max-autotune"):
        notes.append("dynamic=True with CUDA graphs records one graph per distinct shape")
    return notes
