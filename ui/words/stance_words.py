"""What torch.compiler.set_stance would have done to a run over a shape schedule, in sentences, from the run's own
figures: where fail_on_recompile would have stopped it (with the guard torch names), and what eager_on_recompile
would have run instead of each recompilation. No Streamlit here, so the wording is unit-tested."""
from __future__ import annotations

from tcore.host import features


def stance_words(result: dict) -> list[str]:
    """Sentences for the Diagnose page's recompilation section; a stance this torch lacks says which torch brings it."""
    events = result.get("compile_events") or []
    recompiles = [e for e in events if e.get("kind") in ("recompile", "limit")]
    lines = []
    if missing := features.missing("fail_on_recompile"):
        lines.append(f"`fail_on_recompile`: {missing}.")
    elif not recompiles:
        lines.append("**Stable**: no guard failed after the first compile, so `torch.compiler.set_stance("
                     "\"fail_on_recompile\")` would let every step of this schedule run: wrap serving in it to keep "
                     "it that way.")
    else:
        first = recompiles[0]
        guard = (first.get("reason") or "a guard failed").strip().splitlines()[0]
        lines.append(f"Under `torch.compiler.set_stance(\"fail_on_recompile\")` this run would have **stopped at its "
                     f"first recompilation** ({first.get('compile_id')}, {first.get('frame')}), with torch's guard: "
                     f"`{guard}`.")
    steps = [row for row in result.get("schedule") or [] if row.get("compiles") or row.get("hit_limit")]
    if missing := features.missing("eager_on_recompile"):
        lines.append(f"`eager_on_recompile`: {missing}.")
    elif steps:
        compiled_s = sum(row["compiled_ms"] for row in steps) / 1e3
        eager_s = sum(row["eager_ms"] for row in steps) / 1e3
        lines.append(f"`eager_on_recompile` would run the {len(steps)} step{'s' if len(steps) != 1 else ''} that "
                     f"compiled here eagerly instead: {eager_s:.2f} s of eager steps in place of {compiled_s:.2f} s of "
                     "compiling and running (both measured in this run's pass over the schedule), and every later "
                     "step of those shapes stays eager.")
    return lines


STANCE_TITLES = {"fail_on_recompile": "fail_on_recompile: prove a setting stable",
                 "eager_on_recompile": "eager_on_recompile: new shapes run eagerly",
                 "eager_then_compile": "eager_then_compile: wait for two calls, then compile"}


def probe_words(probe: dict) -> list[str]:
    """What one set_stance probe (tcore.worker.stances.probe's dict) showed, in sentences, from its own calls."""
    stance, calls = probe["stance"], probe.get("calls") or []
    if probe.get("unavailable"):
        return [f"`{stance}`: {probe['unavailable']}."]
    sizes = ", ".join(str(s) for s in probe.get("sizes") or [])
    wrong = [c for c in calls if c.get("correctness_ok") is False]
    lines = []
    if stance == "fail_on_recompile":
        lines.append(f"After a warm-up on size {calls[0]['size']}, the same size ran again under the stance "
                     + ("without a compile." if not calls[1]["compiled"] else "and compiled (it was not stable)."))
        if probe.get("raised"):
            guards = "; ".join(f"`{g}`" for g in probe.get("failed_guards") or []) or "no guard named"
            lines.append(f"A new size raised instead of recompiling, as the stance promises: "
                         f"{probe['error'].rstrip('.')}. The guard that failed: {guards}.")
        else:
            lines.append("A new size needed no recompile (the compiled code covers it): the setting is stable.")
    elif stance == "eager_on_recompile":
        new = calls[1:-1]
        lines.append(f"After a warm-up on size {calls[0]['size']}, {len(new)} new size{'s' if len(new) != 1 else ''} "
                     + ("ran eagerly, none compiling" if not any(c["compiled"] for c in new) else "ran, some compiling")
                     + f"; the warmed-up size then ran its compiled code again ({calls[-1]['ms']:.1f} ms). "
                     f"{probe.get('compiles', 0)} compile in all: the warm-up's.")
    else:  # eager_then_compile
        at, inner = probe.get("top_compiled_at_call"), probe.get("inner_compiled_first") or []
        later = [c for c in calls[at:] if c["compiled"]] if at else []
        lines.append(f"Sizes {sizes}. torch applies this stance per function, not per call of the model: a function's "
                     "first call runs eagerly, its second compiles with the dynamism the two showed.")
        if at:
            lines.append(f"The model's forward (`{probe.get('top')}`) ran eagerly on call 1 and compiled on call {at}"
                         + (", once for every size: no later call compiled." if not later else
                            f"; {len(later)} later call(s) compiled again."))
        else:
            lines.append(f"The model's forward (`{probe.get('top')}`) never compiled in these calls.")
        if inner:
            lines.append(f"Yet call 1 was not all eager: {len(inner)} compile{'s' if len(inner) != 1 else ''} ran "
                         f"inside it ({', '.join(f'`{f}`' for f in dict.fromkeys(inner))}): functions the model calls "
                         "more than once per step (a repeated block's forward) were on their second call already."
                         + (" The model's own compile traces through them, so where it holds them whole those "
                            "compiles go unused." if at else ""))
    if wrong:
        lines.append(f"**{len(wrong)} call(s) gave an output that differs from eager's.**")
    return lines
