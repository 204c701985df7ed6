"""torch.compiler.set_stance beyond the eager baseline, in this process: what each stance does to a run whose input
shape changes.

  fail_on_recompile   warm up on the first shape, then prove the setting stable: the same shape again runs without
                      a compile; a new shape raises, and torch's error names the guard that failed
  eager_on_recompile  warm up on the first shape, then feed new shapes: each runs eagerly instead of recompiling, so
                      the cost of a new shape is an eager step, not a compile
  eager_then_compile  torch applies it per function (code object), not per call of the compiled model: a function's
                      first call runs eagerly and its second compiles, with the dynamism those two calls showed. So
                      the model's own forward runs eagerly on the first call and compiles on the second, once for
                      every size (not a static compile, then a dynamic recompile); but a function the model calls
                      more than once per step (a repeated block's forward) is on its second call inside the first
                      step, and compiles there, statically, while the model around it runs eagerly. Torch's own
                      docs say "run the first invocation in eager mode": true of each function, not of the step.

Each probe returns one row per call: the size, whether the call compiled (Dynamo's compilation records), which
functions it compiled (name, file and line) and whether one was the model's own forward ("top"), its time, and how
far its output is from eager's. A stance this torch lacks is reported, not run.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import torch

from tcore.experiment.spec import Experiment
from tcore.host import features
from tcore.worker import diagnostics
from tcore.worker.build import build, clone, compare, step_fn
from tcore.worker.compile import apply_compile
from tcore.worker.timing import timed_call

STANCES = ("fail_on_recompile", "eager_on_recompile", "eager_then_compile")
_GUARDS = re.compile(r"triggered by the following guard failure\(s\):\s*\n(.*)", re.S)


def failed_guards(message: str) -> list[str]:
    """The guard failures in fail_on_recompile's error ("- tensor 'x' size mismatch at index 1. expected 8, ...")."""
    found = _GUARDS.search(message)
    if not found:
        return []
    return [line.strip().removeprefix("- ").strip() for line in found.group(1).splitlines()
            if line.strip().startswith("- ")]


def probe(exp: Experiment, stance: str, device: str = "cpu") -> dict[str, Any]:
    """Run `exp`'s shape schedule (one batch per size) under `stance`; see the module's docstring."""
    if stance not in STANCES:
        raise ValueError(f"unknown stance {stance!r}; choose one of: {', '.join(STANCES)}")
    if reason := features.missing(stance):
        return {"stance": stance, "unavailable": reason}
    if exp.task != "inference" or not exp.compiles or exp.shape_count < 2:
        raise ValueError("a stance probe needs task=inference, something compiled and shape_count >= 2")
    torch._dynamo.reset()
    w = build(exp, device)
    eager_step = step_fn(w.model, w, exp, device, None)
    references = [clone(eager_step(b)) for b in w.batches]
    compiled = step_fn(apply_compile(w.model, exp, w.entry.repeated_blocks(w.model), w.entry.repeated_call),
                       w, exp, device, None)
    diagnostics.reset()
    rows: list[dict[str, Any]] = []
    out = {"stance": stance, "sizes": w.schedule.sizes, "calls": rows, "top": where(type(w.model).forward.__code__)}

    def call(i: int, under: str, note: str = "") -> None:
        seen = len(diagnostics.metrics())
        with torch.compiler.set_stance(under):
            result, seconds = timed_call(lambda: compiled(w.batches[i]), device)
        entries = diagnostics.metrics()[seen:]
        compiles = [(entry, e) for entry, e in zip(entries, diagnostics.compile_events(entries, 0.0))
                    if e["kind"] in ("compile", "recompile")]
        at = [where(entry) for entry, _ in compiles]
        rows.append({"size": w.schedule.sizes[i], "stance": under, "compiled": bool(compiles),
                     "frames": [e["frame"] for _, e in compiles],  # inner functions compile as frames of their own too
                     "where": at, "top": out["top"] in at,
                     "reasons": [e["reason"] for _, e in compiles if e["reason"]], "ms": round(seconds * 1e3, 3),
                     "correctness_ok": compare(clone(result), references[i], exp.precision)["correctness_ok"],
                     **({"note": note} if note else {})})

    if stance == "eager_then_compile":
        for i in range(len(w.batches)):
            call(i, stance)
        out["compiles"] = sum(r["compiled"] for r in rows)
        # per function, as torch does it: the call that compiled the model's own forward, and the functions compiled
        # before it (a step's inner functions, at their second call inside one step)
        out["top_compiled_at_call"] = next((n + 1 for n, r in enumerate(rows) if r["top"]), None)
        first_top = out["top_compiled_at_call"] or len(rows) + 1
        out["inner_compiled_first"] = [f for r in rows[:first_top - 1] for f in r["where"]]
        for n, r in enumerate(rows, 1):
            r["note"] = eager_then_compile_note(n, r, out["top"])
        return out

    call(0, "default", "warm-up: the first shape compiles as usual")
    if stance == "fail_on_recompile":
        call(0, stance, "the same shape again: no compile, so the setting is stable for it")
        try:
            call(1, stance)
        except RuntimeError as e:  # the stance's purpose: a recompile is an error that names its guard
            out.update(raised=True, error=str(e).splitlines()[0], failed_guards=failed_guards(str(e)))
        else:
            out["raised"] = False  # this shape did not need a recompile (dynamic, or a remedy): proved stable
        return out
    for i in range(1, len(w.batches)):  # eager_on_recompile
        call(i, stance, "a new shape: runs eagerly instead of recompiling")
    call(0, stance, "the warmed-up shape: its compiled code still runs")
    out["compiles"] = sum(r["compiled"] for r in rows)
    return out


def eager_then_compile_note(n: int, row: dict[str, Any], top: str) -> str:
    """What call `n` under eager_then_compile did, in words: torch's stance is per function."""
    inner = [f for f in row["where"] if f != top]
    if row["top"]:
        return "the model's forward compiled, at its second call, with the dynamism its two calls showed"
    if inner:
        return (f"the model's forward ran eagerly, yet {len(inner)} compile{'s' if len(inner) != 1 else ''} ran inside "
                "it: each function it calls more than once per step compiles at its own second call")
    return "the model's forward ran eagerly, its first call" if n == 1 else "no compile: code compiled earlier ran"


def where(code_or_entry: Any) -> str:
    """'captioner.py:185 forward': a function by its file, first line and name, from its code object or from one of
    Dynamo's compilation records (which carry the compiled frame's co_filename, co_firstlineno and co_name)."""
    name = getattr(code_or_entry, "co_name", None) or "?"
    path = getattr(code_or_entry, "co_filename", None) or "?"
    return f"{path.rsplit('/', 1)[-1]}:{getattr(code_or_entry, 'co_firstlineno', None) or '?'} {name}"


def probe_all(exp: Experiment, device: str = "cpu",
              on_probe: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    results = []
    for stance in STANCES:
        results.append(probe(exp, stance, device))
        if on_probe:
            on_probe(results[-1])
    return results


def main(argv: list[str] | None = None) -> int:
    """python -m tcore.worker.stances --model captioner --preset tiny --shape-count 3: each stance's calls, printed."""
    import argparse
    import json
    import sys

    p = argparse.ArgumentParser(prog="python -m tcore.worker.stances", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="captioner")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--shape-count", type=int, default=3, help="distinct sizes of the model's varying dimension")
    p.add_argument("--backend", default="inductor")
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", action="store_true", help="print the probes as JSON")
    args = p.parse_args(argv)
    from sample_models.sources import file_models

    file_models.allow_imports()  # a worker's fresh process: a model file's code runs here (tcore.lab.probes checked)
    exp = Experiment(model=args.model, preset=args.preset, batch_size=args.batch_size, device=args.device,
                     backend=args.backend, shape_count=args.shape_count)
    results = probe_all(exp, args.device, on_probe=lambda r: print(f"  {r['stance']}: done", file=sys.stderr,
                                                                       flush=True))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        print(f"\n{r['stance']}: " + (r.get("unavailable") or f"sizes {r['sizes']}"))
        for c in r.get("calls", []):
            what = ("compiled " + ", ".join(c.get("where") or c["frames"])
                    + (" (the model's forward)" if c.get("top") else "")) if c["compiled"] else "no compile"
            wrong = "" if c["correctness_ok"] else "  OUTPUT DIFFERS FROM EAGER"
            note = f"  ({c['note']})" if c.get("note") else ""
            print(f"  size {c['size']:>4} under {c['stance']:20} {c['ms']:10.1f} ms  {what}{wrong}{note}")
        if r["stance"] == "eager_then_compile" and r.get("calls"):
            at, inner = r.get("top_compiled_at_call"), r.get("inner_compiled_first") or []
            print(f"  the model's forward compiled at call {at}" if at else "  the model's forward never compiled",
                  end="")
            print(f"; before it, {len(inner)} inner function compile(s) ran inside call 1 (torch's stance is per "
                  "function: each one's second call compiles)" if inner else "")
        if r.get("raised"):
            print("  raised: " + r["error"])
            print("".join(f"\n    failed guard: {g}" for g in r["failed_guards"]).lstrip("\n"))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
