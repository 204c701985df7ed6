"""torch.compiler.set_stance beyond the eager baseline, in this process: what each stance does to a run whose input
shape changes.

  fail_on_recompile   warm up on the first shape, then prove the setting stable: the same shape again runs without
                      a compile; a new shape raises, and torch's error names the guard that failed
  eager_on_recompile  warm up on the first shape, then feed new shapes: each runs eagerly instead of recompiling, so
                      the cost of a new shape is an eager step, not a compile
  eager_then_compile  the first call runs eagerly, later ones compile with the dynamism the first calls showed: one
                      compile for every size instead of a static compile then a dynamic recompile

Each probe returns one row per call: the size, whether the call compiled (Dynamo's compilation records), its
time, and how far its output is from eager's. A stance this torch lacks is reported, not run.
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
    out = {"stance": stance, "sizes": w.schedule.sizes, "calls": rows}

    def call(i: int, under: str, note: str = "") -> None:
        seen = len(diagnostics.metrics())
        with torch.compiler.set_stance(under):
            result, seconds = timed_call(lambda: compiled(w.batches[i]), device)
        compiles = [e for e in diagnostics.compile_events(diagnostics.metrics()[seen:], 0.0)
                    if e["kind"] in ("compile", "recompile")]
        rows.append({"size": w.schedule.sizes[i], "stance": under, "compiled": bool(compiles),
                     "frames": [e["frame"] for e in compiles],  # inner functions compile as frames of their own too
                     "reasons": [e["reason"] for e in compiles if e["reason"]], "ms": round(seconds * 1e3, 3),
                     "correctness_ok": compare(clone(result), references[i], exp.precision)["correctness_ok"],
                     **({"note": note} if note else {})})

    if stance == "eager_then_compile":
        for i in range(len(w.batches)):
            call(i, stance)
        out["compiles"] = sum(r["compiled"] for r in rows)
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
    exp = Experiment(model=args.model, preset=args.preset, batch_size=args.batch_size, device=args.device,
                     backend=args.backend, shape_count=args.shape_count)
    results = probe_all(exp, args.device)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        print(f"\n{r['stance']}: " + (r.get("unavailable") or f"sizes {r['sizes']}"))
        for c in r.get("calls", []):
            what = "compiled " + ", ".join(c["frames"]) if c["compiled"] else "no compile"
            wrong = "" if c["correctness_ok"] else "  OUTPUT DIFFERS FROM EAGER"
            note = f"  ({c['note']})" if c.get("note") else ""
            print(f"  size {c['size']:>4} under {c['stance']:20} {c['ms']:10.1f} ms  {what}{wrong}{note}")
        if r.get("raised"):
            print("  raised: " + r["error"])
            print("".join(f"\n    failed guard: {g}" for g in r["failed_guards"]).lstrip("\n"))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
