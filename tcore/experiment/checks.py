"""Whether an experiment can run as written: the rules across its fields, each refusing with the fix (SpecError).

tcore.experiment.spec's Experiment calls check() when it is made, so a spec that exists can run; the app shows
the message beside the knobs and the command line prints it. The rules read the fields' own metadata (choices and
bounds, from knob()) off the experiment's class, and the model's registry entry (sample_models imports torch, so it
is imported only where a spec is checked).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any


class SpecError(ValueError):
    """An experiment that cannot run as written; the message says what to change."""


# Experiment field -> the torch._inductor.config setting it sets (the worker applies them, feature-detected).
INDUCTOR_OPTIONS = {"freezing": "freezing", "coordinate_descent": "coordinate_descent_tuning",
                    "epilogue_fusion": "epilogue_fusion", "aggressive_fusion": "aggressive_fusion",
                    "max_fusion_size": "max_fusion_size"}


@functools.cache
def choices_of(cls: type) -> dict[str, tuple[Any, ...]]:
    """The fixed choices of each field that has them (dynamic's None/True/False are checked apart)."""
    return {f.name: tuple(f.metadata["choices"]) for f in dataclasses.fields(cls)
            if f.metadata["choices"] and f.name != "dynamic"}


@functools.cache
def defaults_of(cls: type) -> dict[str, Any]:
    """Each field's default."""
    return {f.name: f.default for f in dataclasses.fields(cls)}


def check(exp) -> None:
    """Refuse an experiment that cannot run as written, with the fix; Experiment calls it when made."""
    for name, choices in choices_of(type(exp)).items():
        value = getattr(exp, name)
        if value not in choices:
            raise SpecError(f"unknown {name} {value!r}; choose one of: {', '.join(choices)}")
    if exp.dynamic not in (None, True, False):
        raise SpecError(f"dynamic must be None, True or False, not {exp.dynamic!r}")

    import sample_models  # imported here: it imports torch, which validating the choices above does not need

    try:
        entry = sample_models.get(exp.model)
    except ValueError as e:  # the registry's message already lists the valid names
        raise SpecError(str(e)) from None
    if exp.graph_break and not entry.builtin:
        raise SpecError(f"graph_break is the built-in models' teaching switch; {exp.model} is a real model and "
                        "shows its own graph breaks: turn it off")
    if exp.preset not in entry.presets:
        raise SpecError(
            f"unknown preset {exp.preset!r} for {exp.model}; choose one of: {', '.join(entry.presets)}"
        )
    if exp.skip_full_mask and not exp.model.startswith("hf:"):
        raise SpecError(f"skip_full_mask changes how transformers builds its attention mask; {exp.model} is not a "
                        "transformers model (hf:NAME): turn it off")
    if exp.channels_last and not entry.supports_channels_last:
        raise SpecError(f"channels_last applies to convolutional models only; turn it off for {exp.model}")

    _check_bounds(exp)
    _check_compile(exp, entry)
    _check_weights_and_shapes(exp, entry)


def _check_compile(exp, entry) -> None:
    """What is compiled and how: the settings that need something compiled, a backend, or a task."""
    if exp.error_on_graph_break and (exp.fullgraph or not exp.compiles):
        raise SpecError("error_on_graph_break needs something compiled and does nothing beside fullgraph=True "
                        "(fullgraph already makes every break an error): turn one of them off")
    if exp.compile == "hierarchical" and not entry.repeats_blocks:
        raise SpecError(f"compile=hierarchical marks the repeated blocks, and {exp.model} lists none: choose whole")
    if exp.task == "generate":
        _check_generate(exp, entry)
    elif (exp.kv_cache, exp.prompt_len, exp.new_tokens) != (defaults_of(type(exp))["kv_cache"], 0, 0):
        raise SpecError("kv_cache, prompt_len and new_tokens set how text is generated: they need task=generate")
    if exp.compile_optimizer and exp.task != "training":
        raise SpecError("compile_optimizer needs task=training: an inference run has no optimizer step")
    if exp.backend != "inductor" and exp.mode != "default":
        raise SpecError(f"mode {exp.mode!r} applies only to the inductor backend; set mode=default or backend=inductor")
    if not exp.compiles and (exp.mode != "default" or exp.fullgraph or exp.dynamic is not None
                              or exp.backend != "inductor"):
        raise SpecError("compile settings (mode, dynamic, fullgraph, backend) need compile=whole or regional")
    changed = [name for name in INDUCTOR_OPTIONS if getattr(exp, name) != defaults_of(type(exp))[name]]
    if changed and not (exp.has_compiled_variant and exp.backend == "inductor"):
        raise SpecError(f"{', '.join(changed)} set(s) Inductor options: it needs the inductor backend and "
                        "something compiled")


def _check_weights_and_shapes(exp, entry) -> None:
    """The weights a task can train, the shape schedule and its remedy, the cache and the timed steps."""
    if exp.freezing and exp.task != "inference":
        raise SpecError("freezing treats the weights as constants: it applies to task=inference only")
    if exp.weights_cast_for_training:
        raise SpecError(f"precision={exp.precision} casts the weights to float16, which training cannot update "
                        "without loss scaling and float32 master weights; choose amp-fp16, amp-bf16 or bf16")
    if exp.shape_count == 1:
        raise SpecError("shape_count must be 0 (one fixed shape) or at least 2 distinct shapes")
    if exp.shape_count and entry.seq_field and exp.shape_count > (top := entry.default_seq_len(exp.preset) or 0):
        raise SpecError(f"shape_count={exp.shape_count}: the {exp.preset} preset's {entry.varying_dim} go up to "
                        f"{top}, so it has at most {top} distinct sizes")
    if exp.shape_count and not exp.compiles:
        raise SpecError("a shape schedule shows recompilations: it needs compile=whole or regional")
    if exp.shape_remedy != "none" and not exp.shape_count:
        raise SpecError(f"shape_remedy={exp.shape_remedy} needs a shape schedule: set shape_count to 2 or more")
    if exp.shape_remedy == "buckets" and not 1 <= exp.buckets < exp.shape_count:
        raise SpecError(f"buckets must be between 1 and shape_count - 1 ({exp.shape_count - 1}), not {exp.buckets}")
    if exp.cache == "artifacts" and not exp.has_compiled_variant:
        raise SpecError("cache=artifacts warms up a compile: it needs something compiled "
                        "(compile or compile_optimizer)")
    if exp.timed_steps is not None and exp.timed_steps < exp.rounds:
        raise SpecError(f"timed_steps ({exp.timed_steps}) must be at least rounds ({exp.rounds})")


def _check_generate(exp, entry) -> None:
    from sample_models import decoding  # torch, as above

    if why := decoding.cannot_generate(entry):
        raise SpecError(why)
    if exp.compile in ("regional", "hierarchical"):
        raise SpecError(f"task=generate compiles the prefill and the decode step as two functions (as gpt-fast "
                        f"does), so compile={exp.compile} has no blocks of its own to compile; set compile=whole "
                        "(or off)")
    if exp.graph_break:
        raise SpecError("graph_break puts a .item() in every block, which a fullgraph decode step cannot hold: "
                        "turn it off for task=generate")
    if exp.shape_count or exp.freezing:
        raise SpecError("task=generate varies the prompt and cache lengths itself; shape_count and freezing "
                        "apply to inference and training")
    prompt, new = decoding.lengths(entry, exp.preset, exp.prompt_len, exp.new_tokens)
    top = decoding.max_positions(entry, exp.preset)
    if prompt < 2 or new < 2:
        raise SpecError(f"prompt_len and new_tokens must be at least 2 (got {prompt} and {new})")
    if prompt + new > top:
        raise SpecError(f"prompt_len + new_tokens = {prompt + new} is more than the {top} positions "
                        f"{exp.model}/{exp.preset} has; shorten one of them")


def _check_bounds(exp) -> None:
    """Every number within its field's bounds (knob(bounds=...)), and of its type: no nan, no bool for an int."""
    for f in dataclasses.fields(exp):
        if f.metadata.get("bounds") is None or (value := getattr(exp, f.name)) is None and f.default is None:
            continue
        low, high = f.metadata["bounds"]
        whole = f.type.startswith("int")
        if whole:
            ok = isinstance(value, int) and not isinstance(value, bool)
            kind = f"a whole number from {low} to {high}"
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            kind = f"a number from {low:g} to {high:g}"
        if not ok or not low <= value <= high:
            why = {"warmup_steps": " (the first eager step sets the compile-time baseline)",
                   "timed_s": " seconds"}.get(f.name, "")
            raise SpecError(f"{f.name} must be {kind}{why}, not {value!r}")
