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
