"""The experiment spec: one frozen dataclass that describes a run, validates itself and round-trips to JSON.

Each field documents itself where it is defined: one sentence, and one per choice. The Run page's
captions and `python -m tcore run --help` both read that text (describe()). The rules across fields that an
experiment is checked by when it is made are tcore.experiment.checks; what it becomes on a device (auto resolved,
the defaults there, what does nothing there) is tcore.experiment.device. Below the class: the keyword arguments
torch.compile is called with for an experiment (compile_kwargs), which the worker passes and copy-as-code writes out.
"""
from __future__ import annotations

import dataclasses
import json
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from tcore.experiment.checks import (
    INDUCTOR_OPTIONS,
    SpecError,
    check,
    choices_of,
    defaults_of,
)

# the precision choices (each field's sentence names them), and the rules an experiment is checked by, with the error
# that names the fix
from tcore.experiment.precision import PRECISIONS


def knob(default: Any, doc: str, choices: dict[Any, str] | None = None,
         bounds: tuple[float, float] | None = None) -> Any:
    """A field of the experiment with its sentence and, for a field with fixed choices, one sentence per choice.

    bounds: (lowest, highest) a number may be, both allowed: what a run can finish with, or what the worker
    can take (a seed past 2**32 crashes it). Experiment checks them; the message gives them.
    """
    return field(default=default, metadata={"doc": doc, "choices": choices or {}, "bounds": bounds})


# The AdamW learning rate of training runs (tcore.worker.compile builds the optimizer; the snippet writes it).
LR = 1e-4

# Runs stored before the precision field said "dtype", which meant autocast over float32 weights.
LEGACY_DTYPES = {"float32": "fp32", "bfloat16": "amp-bf16", "float16": "amp-fp16"}


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """A stored spec in today's fields: older records said dtype=bfloat16 for what is now precision=amp-bf16."""
    if "dtype" not in data:
        return data
    data = dict(data)
    legacy = data.pop("dtype")
    data.setdefault("precision", LEGACY_DTYPES.get(legacy, legacy))
    return data


@dataclass(frozen=True)
class Experiment:
    model: str = knob("captioner", "Which model to run: a built-in sample model (captioner, resnet50, flux) or a real "
                                  "one named SOURCE:NAME (torchvision, timm, hf, diffusers, file).")
    preset: str = knob("tiny", "How big the model is: tiny runs in seconds on a CPU, the larger presets want a GPU.")
    batch_size: int = knob(4, "Samples per step: bigger batches keep the device busier (more samples/s) until "
                              "memory runs out.", bounds=(1, 65536))
    precision: str = knob("fp32", "The number formats the model runs in: its weights, and what its matmuls and "
                                  "convolutions compute in.", {name: p.doc for name, p in PRECISIONS.items()})
    device: str = knob("auto", "Where the run executes.", {
        "auto": "The CUDA GPU when there is one, else the CPU.",
        "cuda": "The first CUDA GPU; refused on a machine without one.",
        "cpu": "The CPU: Inductor writes C++ and runs a C++ compiler, so compiles are slow but work anywhere.",
    })
    task: str = knob("inference", "What one timed step does.", {
        "inference": "Forward pass only, no gradients: the cheapest thing to compile.",
        "training": "Forward, backward and an AdamW step: compile also builds the backward graph, so it takes "
                    "longer.",
        "generate": "Greedy text generation by a decoder with a KV cache: a prefill over the prompt, then one "
                    "decode step per new token; prefill and decode are compiled separately, as gpt-fast does.",
    })

    compile: str = knob("whole", "What torch.compile is applied to.", {
        "off": "Eager only: the baseline, nothing is compiled (the compiler settings do nothing).",
        "whole": "torch.compile the whole model into as few graphs as it can: most fusion, longest compile.",
        "regional": "Compile each repeated block once and reuse it for its copies: much shorter compile, usually "
                    "nearly the same speed.",
        "hierarchical": "Compile the whole model, with each repeated block marked as a nested compile region "
                        "(torch.compiler.nested_compile_region, torch 2.8+): the block is traced and compiled once "
                        "and its copies reuse it inside one whole-model graph.",
    })
    # The keys of torch._inductor.list_mode_options(), the same on torch 2.11 and 2.13 (tests/test_spec.py
    # checks them against the installed torch), kept here so that validating a spec does not import Inductor.
    mode: str = knob("default", "Inductor's mode: how hard it tunes, and whether it adds CUDA graphs.", {
        "default": "Inductor's balanced setting: fused kernels without extra tuning.",
        "reduce-overhead": "Adds CUDA graphs, which replay a whole step with one launch: less CPU overhead, more "
                           "GPU memory.",
        "max-autotune": "Benchmarks many kernel variants and adds CUDA graphs: fastest code, much longer compile.",
        "max-autotune-no-cudagraphs": "Benchmarks many kernel variants, without CUDA graphs: longer compile.",
        "lite": "Fewer optimisation passes: a quicker compile, less speedup.",
    })
    dynamic: bool | None = knob(None, "How torch.compile treats sizes that change between calls.", {
        None: "Automatic: compile for the first shapes, recompile once with symbolic sizes if a shape changes.",
        True: "Symbolic sizes from the start: one graph for every size, some static optimisations lost.",
        False: "Always static: one compile per new shape, until the recompile limit falls back to eager.",
    })
    fullgraph: bool = knob(False, "Make any graph break an error instead of quietly splitting the model: proves it "
                                  "compiles as one graph.")
    error_on_graph_break: bool = knob(False, "Make a graph break an error through torch._dynamo.error_on_graph_break "
                                             "(torch 2.9+), not fullgraph: a setting code can switch off again around "
                                             "a region it accepts breaks in, and which, unlike fullgraph, does not "
                                             "promise one graph.")
    backend: str = knob("inductor", "The compiler Dynamo hands its graphs to.", {
        "inductor": "Generates fused C++ (CPU) or Triton (GPU) kernels: where the speedups come from.",
        "aot_eager": "Traces forward and backward but runs them with eager kernels: compiles in seconds, no "
                     "speedup; checks that tracing works.",
        "eager": "Only Dynamo's graph capture, run eagerly: isolates graph breaks from code generation.",
        "cudagraphs": "Records CUDA graphs of the captured graphs, without Inductor (GPU only).",
    })
    compile_optimizer: bool = knob(False, "Also compile the AdamW step into a few fused kernels (training only): "
                                          "faster optimizer steps for one more compile; the learning rate is a "
                                          "tensor, so changing it does not recompile.")
    recompile_limit: int = knob(8, "Compiles one function may have (torch._dynamo.config.recompile_limit): past it "
                                   "the function runs eagerly.", bounds=(1, 1024))

    # Inductor options that tuning guides name, each one torch._inductor.config setting (INDUCTOR_OPTIONS).
    freezing: bool = knob(False, "Inductor freezing (inference only): treat the weights as constants, so Inductor "
                                 "can fold them into the graph and lay them out for its kernels ahead of time; a "
                                 "longer compile, often faster inference, and the weights can no longer change.")
    coordinate_descent: bool = knob(False, "Coordinate-descent tuning: after choosing a kernel's block sizes, try "
                                           "neighbouring sizes one at a time and keep the fastest; a longer compile, "
                                           "sometimes faster pointwise and reduction kernels (the max-autotune modes "
                                           "turn it on already). On a GPU it also has Inductor write a batch-1 "
                                           "matrix-vector product as a reduction it can fuse, instead of a cuBLAS "
                                           "call: gpt-fast turns it on for decoding.")
    epilogue_fusion: bool = knob(True, "Fuse the pointwise work after a matmul (bias, activation) into the matmul "
                                       "kernel when Inductor writes that kernel itself (max-autotune templates); off "
                                       "leaves it as separate kernels.")
    aggressive_fusion: bool = knob(False, "Fuse operations even when they share no memory reads, to cut kernel "
                                          "launches further: fewer, larger kernels, not always faster ones.")
    max_fusion_size: int = knob(64, "The most operations Inductor fuses into one kernel (the fusion granularity of "
                                    "tuning guides): smaller gives more, simpler kernels; larger, fewer and longer "
                                    "ones.", bounds=(1, 1024))

    channels_last: bool = knob(False, "Store images as NHWC: GPU convolutions prefer this layout (convolutional "
                                      "models only).")
    skip_full_mask: bool = knob(False, "transformers models only: skip an attention mask that masks nothing while "
                                       "compiling too, as eager does. transformers builds that all-true mask while "
                                       "tracing, so SDPA under torch.compile leaves its fused flash kernel for a "
                                       "slower math path; this passes no mask for a batch without padding and has "
                                       "transformers' mask builder skip it under compile as in eager (its upstream "
                                       "fix). A padded batch keeps its mask.")
    graph_break: bool = knob(False, "Switch on a deliberate graph break (a .item() branch) in every block, to see "
                                    "what breaks cost: more graphs, less fusion.")

    shape_count: int = knob(0, "Feed this many distinct sizes of the varying dimension, to see recompilations "
                               "(0: one fixed shape).", bounds=(0, 64))
    shape_order: str = knob("ascending", "The order the distinct sizes come in.", {
        "ascending": "Smallest first, each size once.",
        "shuffled": "A random order (from the seed), as real inputs arrive.",
    })
    shape_remedy: str = knob("none", "What is done about the varying size.", {
        "none": "Nothing: torch.compile's dynamic setting decides.",
        "mark_dynamic": "Mark the varying dimension dynamic before the first call: one compile for every size.",
        "buckets": "Pad every input up to one of a few sizes, each compiled during warm-up.",
    })
    buckets: int = knob(3, "How many padded sizes the buckets remedy compiles.", bounds=(1, 63))

    # Generation (task=generate) only.
    kv_cache: str = knob("static", "How the decoder keeps the keys and values of earlier tokens (generate only).", {
        "static": "Allocated once at prompt + new tokens long and written in place: every decode step has the same "
                  "shapes, so the decode step compiles once, fullgraph, and CUDA graphs can replay it.",
        "dynamic": "Grows by one token per step (concatenation): each step has a new shape, so the compiled decode "
                   "step recompiles, then runs with symbolic sizes (and CUDA graphs record one graph per length).",
    })
    prompt_len: int = knob(0, "Prompt tokens per sequence, read by the prefill (generate only; 0: the model's "
                              "default, 128 where its positions allow).", bounds=(0, 1_000_000))
    new_tokens: int = knob(0, "Tokens generated per sequence, greedily and always this many (generate only; 0: the "
                              "model's default, 256 where its positions allow).", bounds=(0, 1_000_000))

    warmup_steps: int = knob(3, "Untimed steps before timing each variant; the first eager one is the "
                                "compile-time baseline.", bounds=(1, 100))
    timed_s: float = knob(4.0, "The most timed seconds per variant (eager and compiled): rounds are added until their "
                               "interval is within its share of the target, or until this is spent.",
                          bounds=(0.1, 3600.0))
    timed_steps: int | None = knob(None, "Timed steps per variant, instead of seconds: for a fixed, quick "
                                         "measurement (exactly `rounds` rounds, no early stop).", bounds=(1, 100_000))
    rounds: int = knob(6, "The rounds before timing may stop on a narrow interval (with timed_steps: exactly these). "
                          "Each round times an eager and a compiled block back to back (the order alternating), so "
                          "drift hits both alike; the headline is the median of the rounds' ratios, and 6 rounds are "
                          "the fewest whose interval reaches 95%. The timed seconds stop a step run first when they "
                          "run out, with fewer rounds and a wider interval (a generation run times all of these).",
                       bounds=(1, 100))
    round_s: float = knob(0.2, "Seconds each variant is timed per round: shorter rounds pair eager and compiled "
                               "closer in time, so more of the machine's drift cancels, and give more rounds.",
                          bounds=(0.01, 60.0))
    target_pct: float = knob(5.0, "Aim the speedup's stated 95% interval within ± this many percent (0: always use "
                                  "the whole timed seconds): timing stops once the rounds alone are within 60% of it, "
                                  "which leaves the rest for the spread between fresh processes that the interval "
                                  "adds. A run whose interval ends wider than ± 5% is marked Noisy.",
                             bounds=(0.0, 100.0))
    seed: int = knob(0, "Seeds the weights, the inputs and a shuffled shape order.", bounds=(0, 2**32 - 1))
    torch_trace: bool = knob(True, "Record the compile's structured trace (TORCH_TRACE), which the app renders "
                                   "with tlparse: every graph, guard, recompile reason and Inductor's code, per "
                                   "compilation. It writes while compiling only, so timed steps are untouched, and "
                                   "what it adds to the compile is within a cold compile's noise.")
    cache: str = knob("cold", "Where the compile's work may come from.", {
        "cold": "Fresh compile caches: the compile time of a first ever launch.",
        "warm": "Reuse this machine's local compile cache, which earlier runs filled (a cold run adds its compile "
                "after it has measured): the compile time of a restart.",
        "artifacts": "A fresh cache seeded with the compile artifacts an earlier run of the same settings saved: "
                     "the compile time of a new machine that ships its compile cache. Needs such a run first (run "
                     "these settings once cold); without one, or made with another torch or device, it compiles "
                     "cold and says why.",
    })

    def __post_init__(self) -> None:
        check(self)

    @property
    def compiles(self) -> bool:
        """Whether the model itself is compiled (the optimizer step may be compiled on its own)."""
        return self.compile != "off"

    @property
    def weights_cast_for_training(self) -> bool:
        return self.task == "training" and PRECISIONS[self.precision].weights == "float16"

    @property
    def has_compiled_variant(self) -> bool:
        return self.compiles or self.compile_optimizer

    @property
    def label(self) -> str:
        """A short human name that tells apart runs that differ: 'resnet50/tiny bs4 bf16 inference, whole default'.

        The backend shows in place of the mode when it is not Inductor (only Inductor has modes), and
        fullgraph and a cache other than cold are named, so a warm or aot_eager run never reads as a cold
        Inductor one.
        """
        how = self.mode if self.backend == "inductor" else self.backend
        scope = "eager only" if not self.has_compiled_variant else (
            f"{self.compile} {how}" if self.compiles else "optimizer only")
        if self.fullgraph:
            scope += " fullgraph"
        if self.error_on_graph_break:
            scope += " error-on-break"
        if self.compile_optimizer and self.compiles:
            scope += " +opt"
        if self.dynamic is not None:
            scope += f" dynamic={self.dynamic}"
        if self.graph_break:
            scope += " +break"
        if self.skip_full_mask:
            scope += " +skip-full-mask"
        scope += "".join(_option_label(name, getattr(self, name)) for name in INDUCTOR_OPTIONS
                         if getattr(self, name) != DEFAULTS[name])
        if self.shape_count:
            scope += f", {self.shape_count} shapes" + ("" if self.shape_remedy == "none" else f" {self.shape_remedy}")
        if self.cache != "cold" and self.has_compiled_variant:
            scope += f", {self.cache} cache"
        if self.task == "generate":
            from sample_models import decoding

            prompt, new = decoding.lengths(_entry(self.model), self.preset, self.prompt_len,
                                           self.new_tokens)
            scope += f", {self.kv_cache} KV, {prompt}+{new} tokens"
        return f"{self.model}/{self.preset} bs{self.batch_size} {self.precision} {self.task}, {scope}"

    def replace(self, **changes: Any) -> Experiment:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Experiment:
        data = upgrade(data)
        if unknown := unknown_fields(data):
            known = {f.name for f in dataclasses.fields(cls)}
            raise SpecError(f"unknown experiment field(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> Experiment:
        return cls.from_dict(json.loads(text))


def unknown_fields(data: dict[str, Any]) -> list[str]:
    """The fields of a spec (as stored, or upgraded) that this version does not know, sorted: what
    Experiment.from_dict refuses. A stored run's can only be a newer version's, sharing the store."""
    return sorted(set(upgrade(data)) - {f.name for f in dataclasses.fields(Experiment)})


def newer_fields_words(unknown: list[str]) -> str:
    """Why a stored run's settings cannot be read as an experiment here, naming the fields."""
    return (f"its settings have {'fields' if len(unknown) > 1 else 'a field'} this version of Compile Lab does not "
            f"know ({escaped_label(', '.join(unknown))}), written by a newer version sharing the run store")


# The fixed choices of each field that has them, for validation, the command line and the app's widgets.
CHOICES: dict[str, tuple[str, ...]] = choices_of(Experiment)
MODES = CHOICES["mode"]
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes whose compiled step replays CUDA graphs
_FIELDS = {f.name: f for f in dataclasses.fields(Experiment)}
DEFAULTS = defaults_of(Experiment)


def _entry(name: str):
    import sample_models  # imports torch: only where a spec is checked or named

    return sample_models.get(name)


def _option_label(name: str, value: Any) -> str:
    if name == "max_fusion_size":
        return f" fusion<={value}"
    return f" +{name.replace('_', '-')}" if value else f" -{name.replace('_', '-')}"


_NO_CHOICE = object()


# Unicode's explicit bidirectional formatting characters (UAX #9: marks, embeddings, overrides, isolates): format
# characters that reorder how the text after them is shown (Trojan Source, CVE-2021-42574)
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def escaped_label(text: str) -> str:
    """`text` (a run's label: a model file's preset and path, anyone's words) with each control, line-separator and
    bidirectional character written as its escape, as repr() writes it (a newline reads \\n, ESC \\x1b, a
    right-to-left override \\u202e): on one line, shown in the order it was typed, wherever it is printed (a terminal's
    `tcore list`, a snippet's # comment, where a line break would make the rest code)."""
    return "".join(ascii(c)[1:-1] if unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in BIDI_CONTROLS else c
                   for c in text)


def describe(name: str, value: Any = _NO_CHOICE) -> str:
    """A field's sentence or, given one of its choices, that choice's sentence ('' for a choice without one)."""
    meta = _FIELDS[name].metadata
    return meta["doc"] if value is _NO_CHOICE else meta["choices"].get(value, "")


def choice_docs(name: str) -> dict[Any, str]:
    """A field's choices, each with its sentence; empty for a field without fixed choices."""
    return dict(_FIELDS[name].metadata["choices"])


# torch.compile's keyword arguments for an experiment: one dict, beside the fields it is made of, that the worker
# passes (tcore.worker.compile) and copy-as-code writes out (tcore.export.snippet).

# torch.compile's own defaults: the snippet leaves out an argument that has its default ("default" is mode=None's)
TORCH_DEFAULTS = {"backend": "inductor", "mode": "default", "fullgraph": False, "dynamic": None}
# Backends that trace the model and then run its graphs with eager's own kernels: nothing is generated or fused, so
# their "compiled" variant is not a compiled speedup, and there is no compile to pay back (no break-even).
EAGER_KERNEL_BACKENDS = frozenset({"eager", "aot_eager"})


def compile_kwargs(exp: Experiment) -> dict[str, Any]:
    """What torch.compile, module.compile and a model's own compile_repeated_blocks are called with for `exp`."""
    kwargs: dict[str, Any] = {"backend": exp.backend}
    if exp.backend == "inductor":
        kwargs["mode"] = exp.mode  # torch.compile refuses a mode for other backends
    kwargs.update(fullgraph=exp.fullgraph, dynamic=exp.dynamic)
    return kwargs


def optimizer_compile_kwargs(exp: Experiment) -> dict[str, Any]:
    """What the optimizer step is compiled with (compile_optimizer): the PyTorch recipe's fullgraph=False, by Inductor;
    by the run's own backend where that one generates no kernels (eager, aot_eager), so that nothing of such a run is
    code-generated, as its backend says (a run with backend=eager had compiled its AdamW step through Inductor)."""
    if exp.backend in EAGER_KERNEL_BACKENDS:
        return {"backend": exp.backend, "fullgraph": False}
    return {"fullgraph": False}


# Modes whose CUDA graphs would be recorded once per prompt length: a generation's prefill is compiled without them
# (gpt-fast leaves its prefill out of CUDA graphs too)
NO_CUDAGRAPHS = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}


def generate_kwargs(exp: Experiment) -> tuple[dict[str, Any], dict[str, Any]]:
    """torch.compile's arguments for a generation's (prefill, decode step): the decode step fullgraph with a static
    cache, so its shapes never change and CUDA graphs can replay it; the prefill without CUDA graphs."""
    kwargs = compile_kwargs(exp)
    prefill = dict(kwargs)
    if kwargs.get("mode") in NO_CUDAGRAPHS:
        prefill["mode"] = NO_CUDAGRAPHS[kwargs["mode"]]
    return prefill, {**kwargs, "fullgraph": kwargs["fullgraph"] or exp.kv_cache == "static"}


def call_args(exp: Experiment) -> str:
    """compile_kwargs(exp) as Python source, less those at torch.compile's defaults: "mode='max-autotune'"."""
    return kwargs_source(compile_kwargs(exp))


def kwargs_source(kwargs: dict[str, Any]) -> str:
    """torch.compile's arguments as Python source, less those at its defaults."""
    return ", ".join(f"{name}={value!r}" for name, value in kwargs.items() if value != TORCH_DEFAULTS[name])
