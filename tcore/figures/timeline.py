"""A run's timeline: contiguous phases from the submit (the click) to the record saved, on one monotonic clock.

The lab process knows when a run was submitted, left the queue, and when each worker event arrived; the worker's
events carry its own clock ("t", seconds since it received the run). assemble() puts both on the lab's clock and
cuts the span into phases that touch end to end: where two marks leave a gap that nothing measured, the gap is a
phase of its own named "other", never dropped. Sub-phases come from what torch and the worker measured (Dynamo's
nested compile timers, the timed blocks' wall times); whatever they leave of their parent phase is named for
what it holds. Pure arithmetic on numbers, so it is tested without a worker.
"""
from __future__ import annotations

from typing import Any

COMPILE, MEASURE, LAB, WAIT = "compile", "measure", "lab", "wait"
# What each kind means on the Run page's bar and in its caption.
KIND_WORDS = {COMPILE: "the compile", MEASURE: "the measurement", LAB: "the lab's own overhead",
              WAIT: "waiting for its turn (the queue, the GPU)"}
QUEUE = "queue (waiting for a place on the device)"
DEVICE_WAIT = "waiting for the GPU (another run held it)"
HELD_STILL = "held still while another run was timed"  # tcore.lab.queue.quiet
CONTINUED = " (continued)"
NOT_RECORDED = "n/a: recorded before the lab kept a timeline"

# The worker's phase events (tcore.experiment.protocol.PHASE_TITLES) as timeline phases: (name, kind).
WORKER_PHASES = {
    "building": ("model build (weights made on the device, inputs)", LAB),
    "eager": ("eager warm-up (and the reference output)", MEASURE),
    "compiling": ("compile (first compiled call)", COMPILE),
    "warmup": ("compiled warm-up", MEASURE),
    "schedule": ("shape schedule pass (with any recompiles)", MEASURE),
    "measuring": ("paired timing", MEASURE),
    "new_prompt": ("a prompt a token shorter (recompiles)", MEASURE),
    "profiling": ("profiling, then the result assembled", LAB),
}
# Dynamo's nested compile timers (details["first_call_phases_s"]) as sub-phases of the first compiled call.
COMPILE_TIMERS = {
    "dynamo_tracing_s": "Dynamo (tracing, guards)",
    "aot_autograd_s": "AOT autograd",
    "inductor_lowering_s": "Inductor (lowering, passes)",
    "codegen_and_compile_s": "codegen + C++/Triton compile + autotuning (one torch timer)",
}
COMPILE_REST = "compile: first step, cache load, correctness check (no torch timer)"


def _phase(name: str, kind: str, start: float, end: float) -> dict[str, Any]:
    return {"name": name, "kind": kind, "start_s": start, "s": max(end - start, 0.0)}


def assemble(marks: list[tuple[str, str, float]], end: float, start: float) -> list[dict[str, Any]]:
    """Contiguous phases over [start, end] from marks (name, kind, begins at), each phase lasting to the next mark.

    Marks are put in time order; one before start or after end is clipped to the span; a mark that goes back in
    time (clocks read by two processes) is moved to where the previous one began, so the phases never overlap and
    always add up to the span. Times come back relative to start, in seconds.
    """
    out: list[dict[str, Any]] = []
    at = start
    ordered = [(n, k, min(max(t, start), end)) for n, k, t in marks]
    for i, (name, kind, t) in enumerate(ordered):
        t = max(t, at)
        if t > at + 1e-3 and not out:  # nothing measured between the start and the first mark
            out.append(_phase("other (not measured)", LAB, at - start, t - start))
        elif out:
            out[-1]["s"] = t - start - out[-1]["start_s"]
        out.append(_phase(name, kind, t - start, t - start))
        at = t
    if out:
        out[-1]["s"] = end - start - out[-1]["start_s"]
    else:
        out.append(_phase("other (not measured)", LAB, 0.0, end - start))
    return [dict(p, start_s=round(p["start_s"], 4), s=round(p["s"], 4)) for p in out if p["s"] > 1e-4]


def split(phase: dict[str, Any], parts: list[tuple[str, str, float]], rest: str) -> list[dict[str, Any]]:
    """One phase cut into measured parts (name, kind, seconds), in order, and `rest` for what they leave.

    The parts come from timers of their own: where they add up to more than the phase (timers that overlap a
    little), they are scaled down to fit rather than pushing the phases after them.
    """
    parts = [(n, k, s) for n, k, s in parts if s and s > 0]
    total = sum(s for *_, s in parts)
    if not parts:
        return [phase]
    scale = min(1.0, phase["s"] / total) if total else 1.0
    out, at = [], phase["start_s"]
    for name, kind, seconds in parts:
        out.append({"name": name, "kind": kind, "start_s": round(at, 4), "s": round(seconds * scale, 4)})
        at += seconds * scale
    left = phase["s"] - total * scale
    if left > 1e-4:
        out.append({"name": rest, "kind": phase["kind"], "start_s": round(at, 4), "s": round(left, 4)})
    return out


def cut_out(phases: list[dict[str, Any]], waits: list[tuple[float, float]],
            held: list[tuple[float, float]] = ()) -> list[dict[str, Any]]:
    """The phases with each wait (start, end in s from the timeline's start) cut out as a phase of its own, kind WAIT:
    the phase it fell in goes on after it, named with CONTINUED. `held`: spans held still while another run was timed,
    cut out the same way under their own name. Waits past the end are clipped; the phases still touch end to end and
    add up to the same span."""
    out = [dict(p) for p in phases]
    for start, end, name in sorted([(a, b, DEVICE_WAIT) for a, b in waits] + [(a, b, HELD_STILL) for a, b in held]):
        for i, p in enumerate(out):
            p_end = p["start_s"] + p["s"]
            if not (p["start_s"] <= start < p_end) or p["kind"] == WAIT:
                continue
            end = min(end, p_end)
            pieces = [dict(p, s=start - p["start_s"]),
                      {"name": name, "kind": WAIT, "start_s": start, "s": end - start},
                      dict(p, name=p["name"] if p["name"].endswith(CONTINUED) else p["name"] + CONTINUED,
                           start_s=end, s=p_end - end)]
            out[i:i + 1] = [dict(q, start_s=round(q["start_s"], 4), s=round(q["s"], 4)) for q in pieces
                            if q["s"] > 1e-4]
            break
    return out


def refine(phases: list[dict[str, Any]], result: dict[str, Any]) -> list[dict[str, Any]]:
    """The compile and the paired timing cut by what was measured inside them (from the run's record)."""
    out = []
    for p in phases:
        if p["name"] == WORKER_PHASES["compiling"][0] and (timers := result.get("first_call_phases_s")):
            out += split(p, [(title, COMPILE, timers.get(key)) for key, title in COMPILE_TIMERS.items()], COMPILE_REST)
        elif p["name"] == WORKER_PHASES["measuring"][0] and isinstance(result.get("blocks"), dict):
            walls = [(f"{v} untimed blocks until it settled", MEASURE, done.get("s"))  # first, as they ran
                     for v, done in (result.get("settle") or {}).items()]
            walls += [(f"{v} timed rounds (interleaved)", MEASURE, sum(w for _, w in blocks))
                      for v, blocks in result["blocks"].items()]
            out += split(p, walls, "calibration and time between the timed blocks")
        else:
            out.append(p)
    return out


def totals(phases: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds per kind, and the wall time: the figures a run stores beside its timeline."""
    by_kind = {kind: round(sum(p["s"] for p in phases if p["kind"] == kind), 3) for kind in KIND_WORDS}
    return {"timeline_wall_s": round(sum(p["s"] for p in phases), 3), "timeline_compile_s": by_kind[COMPILE],
            "timeline_measure_s": by_kind[MEASURE], "lab_overhead_s": by_kind[LAB],
            "timeline_wait_s": by_kind[WAIT]}


def caption(result: dict[str, Any]) -> str:
    """One line: how much of the wall time was the compile and how much the lab."""
    wall = result.get("timeline_wall_s")
    if not result.get("timeline") or not wall:
        return NOT_RECORDED
    compile_s, lab_s = result.get("timeline_compile_s") or 0.0, result.get("lab_overhead_s") or 0.0
    wait_s = result.get("timeline_wait_s") or 0.0
    shown = result.get("headline_at_s")
    waited = (f"{wait_s:.1f} s ({100 * wait_s / wall:.0f}%) waiting for its turn (the queue, the GPU), "
              if wait_s >= 0.05 else "")
    # the compile phase is the first compiled call whole; the headline's compile time takes eager's share off it
    call, less = (("generation", "an eager one") if result.get("compile_prefill_s") is not None else
                  ("call", "one eager step"))
    whole = (f" (the first compiled {call} whole; the compile time, {result['compile_s']:.1f} s, is that {call} less "
             f"{less})" if compile_s and result.get("compile_s") is not None else "")
    return (f"{wall:.1f} s from submit to saved: {waited}{compile_s:.1f} s ({100 * compile_s / wall:.0f}%) the "
            f"compile{whole}, {lab_s:.1f} s ({100 * lab_s / wall:.0f}%) the lab's own overhead, the rest the "
            "measurement."
            + (f" The speedup reached the page at {shown:.1f} s, before the profiling pass and the save."
               if shown else ""))
