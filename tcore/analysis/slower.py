"""Where compiled costs more than eager, from the kernels: each class of kernels that grew, its top kernels on each
side, and what changed in it (a fused attention kernel lost, GEMMs raised to fp32, more launches), or that nothing in
the kernel names explains it.

Pure functions of a stored spec and result (the two breakdowns of tcore.figures.breakdown), tested on the CPU. The
milliseconds of a class are the bars "Where the time goes" draws (breakdown.shown_ms), so a sentence here never
quotes another figure than the chart beside it; its kernels' milliseconds are scaled alike (breakdown.shown_scale),
so a class and its kernels are in one unit. A class counts as grown only where it grew in the profile itself too:
the two variants' profiled steps are scaled to their timed steps by different factors, and a class that ran faster
compiled in the profile must not be blamed for a slowdown the timed steps alone show.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tcore.experiment.precision import PRECISIONS
from tcore.figures.breakdown import ATTENTION_FORMS, CATEGORIES, FUSED_ATTENTION, WORK, shown_ms, shown_scale
from tcore.figures.verdicts import slower_than_eager

# A class grew when compiled spends more than this share of eager's time on it, and more than AT_LEAST_MS and
# STEP_SHARE of the eager step: smaller changes are within what two profiles of the same step differ by.
GROWTH = 0.10
AT_LEAST_MS = 0.02
STEP_SHARE = 0.01
MORE_LAUNCHES = 0.10  # launches per step grew by more than this share (and by one or more)
KNOB = "skip_full_mask"  # the experiment's field that skips an all-true attention mask while compiling


@dataclass(frozen=True)
class Growth:
    """One class of kernels that costs the compiled step more than eager's."""

    category: str
    eager_ms: float
    compiled_ms: float
    causes: tuple[str, ...]                 # what changed, in sentences; empty: the kernel names do not say
    eager_kernels: tuple[dict[str, Any], ...]
    compiled_kernels: tuple[dict[str, Any], ...]
    attention_left_fused: bool = False      # eager ran a fused attention kernel, compiled the math path

    @property
    def title(self) -> str:
        return CATEGORIES[self.category][0]


def low_precision(precision: str) -> bool:
    """Whether a run's matmuls compute in bf16 or fp16 (cast weights or autocast)."""
    p = PRECISIONS.get(precision)
    return p is not None and "16" in (p.autocast or p.weights)


def grown(result: dict[str, Any], spec: dict[str, Any]) -> list[Growth] | None:
    """The classes compiled spends more time on than eager, largest growth first; None without an eager and a
    compiled breakdown to compare (not profiled, or the page withholds the bars)."""
    bars, found = shown_ms(result), result.get("breakdown") or {}
    if "eager" not in bars or "compiled" not in bars:
        return None
    e_bars, c_bars = bars["eager"], bars["compiled"]
    eager, compiled = found["eager"], found["compiled"]
    scale = shown_scale(result)
    out = []
    for category in WORK:
        if not (_grew(e_bars, c_bars, category) and _grew(eager["ms"], compiled["ms"], category)):
            continue
        causes, left = _causes(category, eager, compiled, spec)
        out.append(Growth(category, e_bars.get(category, 0.0), c_bars.get(category, 0.0), tuple(causes),
                          _scaled((eager.get("by_class") or {}).get(category, ()), scale.get("eager", 1.0)),
                          _scaled((compiled.get("by_class") or {}).get(category, ()), scale.get("compiled", 1.0)),
                          left))
    return sorted(out, key=lambda g: g.eager_ms - g.compiled_ms)


def _grew(eager: dict[str, float], compiled: dict[str, float], category: str) -> bool:
    """Whether compiled spends more on `category` than eager, beyond what two profiles of one step differ by."""
    before, after = eager.get(category, 0.0), compiled.get(category, 0.0)
    return after - before > max(AT_LEAST_MS, STEP_SHARE * sum(eager.values()), GROWTH * before)


def _scaled(kernels, factor: float) -> tuple[dict[str, Any], ...]:
    """A class's top kernels with their ms scaled as its bar is (breakdown.shown_scale)."""
    return tuple({**k, "ms": k["ms"] * factor} for k in kernels)


def scaled_words(result: dict[str, Any]) -> str:
    """How the milliseconds below are made, where a variant's bars are scaled to its timed step; '' where they are
    the profiler's own."""
    scale = shown_scale(result)
    if all(abs(f - 1.0) < 1e-9 for f in scale.values()):
        return ""
    found = result.get("breakdown") or {}
    profiled = " and ".join(f"{v} {sum(found[v]['ms'].values()):.2f} ms" for v in ("eager", "compiled") if v in found)
    return (" Milliseconds per timed step: each variant's profiled kernels scaled to its timed step, as Where the time "
            f"goes draws them (the profiled steps took {profiled}).")


def _causes(category: str, eager: dict, compiled: dict, spec: dict) -> tuple[list[str], bool]:
    causes, left = [], False
    e_forms, c_forms = eager.get("attention_forms") or {}, compiled.get("attention_forms") or {}
    fused = {f: ms for f, ms in e_forms.items() if f in FUSED_ATTENTION and ms > c_forms.get(f, 0.0)}
    if category == "attention" and fused and c_forms.get("math", 0.0) > e_forms.get("math", 0.0):
        left = True
        names = " and ".join(ATTENTION_FORMS[f].split(" (")[0] for f in fused)
        causes.append(f"**fused kernel lost**: eager ran {names} ({sum(fused.values()):.2f} ms per step); compiled "
                      "runs the math path instead (a softmax kernel between batched matmuls, "
                      f"{c_forms['math']:.2f} ms)")
    e32, c32 = (eager.get("fp32_gemm_ms") or {}).get(category, 0.0), \
        (compiled.get("fp32_gemm_ms") or {}).get(category, 0.0)
    precision = spec.get("precision", "fp32")
    if low_precision(precision) and c32 - e32 > AT_LEAST_MS:
        named = next((k["name"] for k in (compiled.get("by_class") or {}).get(category, ()) if k.get("fp32")), None)
        causes.append(f"**precision raised**: compiled runs GEMMs in fp32 in this {precision} run "
                      f"({c32:.2f} ms per step" + (f", {named}" if named else "") + ")"
                      + (f"; eager's took {e32:.2f} ms" if e32 else "; eager ran none"))
    e_n, c_n = (eager.get("launches") or {}).get(category, 0), (compiled.get("launches") or {}).get(category, 0)
    if e_n and c_n - e_n >= max(1, MORE_LAUNCHES * e_n):
        causes.append(f"**more launches**: {c_n:g} kernels per step against eager's {e_n:g}")
    return causes, left


def encoder_words(spec: dict[str, Any]) -> str:
    """What a transformers model that lost its fused attention under compile most likely met, and the knob for it."""
    if spec.get(KNOB):
        return (f"{KNOB} was on, so transformers was not the one to hand SDPA an all-true mask; something else gives "
                "it a mask or shapes that rule the fused kernels out (a padded batch, a head size they do not take).")
    return ("**The encoder case**: transformers skips an all-true attention mask in eager but builds it while tracing "
            "(masking_utils declines its skip under is_tracing), so SDPA under torch.compile gets a mask and leaves "
            f"its fused kernel for the math path. Turn on **{KNOB}** to skip that mask while compiling too, as eager "
            "does (a padded batch keeps its mask).")


def _kernels(kernels: tuple[dict[str, Any], ...]) -> str:
    return "; ".join(f"{k['name']} {k['ms']:.2f} ms" + (" (fp32)" if k.get("fp32") else "") for k in kernels) \
        or "none"


def words(result: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """Markdown lines: each class compiled spends more on, with its kernels and what changed; where compiled is slower
    and no class explains it, that too. [] when there is nothing to compare or nothing grew in a faster run."""
    found = grown(result, spec)
    speedup = result.get("speedup")
    slower = slower_than_eager(result) is True  # not where its interval takes in 1x: it cannot tell
    if found is None:
        return ([f"Compiled ran at {speedup:.2f}x eager, and no eager and compiled profile of this run can say which "
                 "kernels cost it (Where the time goes says why)."] if slower else [])
    if not found:
        if not slower:
            return []
        profiled = {v: sum(b["ms"].values()) for v, b in (result.get("breakdown") or {}).items()}
        if profiled.get("compiled", 0.0) < profiled.get("eager", 0.0):  # slower only in the timed steps
            return [f"Compiled ran at {speedup:.2f}x eager in the timed steps, yet in the profile it ran faster "
                    f"({profiled['compiled']:.2f} against {profiled['eager']:.2f} ms a step) and no class of kernels "
                    "cost it more: the slowdown is not in the kernels but in the timed steps themselves (other work "
                    "on the machine while they ran, or waits the profile did not see)."]
        return [f"Compiled ran at {speedup:.2f}x eager, yet no class of kernels costs it more than eager's: the time "
                "goes between kernels (idle, launches) or in steps the profile did not see."]
    head = (f"**Why compiled is slower ({speedup:.2f}x), from the kernels**" if slower else
            "**Where compiled spends more than eager, from the kernels**")
    lines = [head + scaled_words(result)]
    for g in found:
        line = f"- **{g.title}**: {g.eager_ms:.2f} → {g.compiled_ms:.2f} ms per step. "
        line += ("; ".join(g.causes) + "." if g.causes else
                 "Nothing in its kernel names explains it: the same forms, the same precision, no more launches.")
        line += f" Eager's kernels: {_kernels(g.eager_kernels)}. Compiled's: {_kernels(g.compiled_kernels)}."
        lines.append(line)
        if g.attention_left_fused and str(spec.get("model", "")).startswith("hf:"):
            lines.append(encoder_words(spec))
    return lines
