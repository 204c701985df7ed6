"""Graphs, graph breaks and recompilations of one run in sentences, and the words for a graph break: the Run
page's "what compile did" and the Diagnose page's graph-break section read them.

No Streamlit here, so the wording is unit-tested.
"""
from __future__ import annotations

import re
from pathlib import Path

from tcore.analysis.advice import EAGER_KERNEL_BACKENDS, inside_torch
from tcore.figures import breakdown


def first_line(text: str | None) -> str:
    """The headline of a multi-line torch message (graph-break reasons run to ten lines)."""
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "(no reason given)"


def graph_words(result: dict, backend: str | None = None) -> list[str]:
    """Graphs, graph breaks and recompilations in sentences, each number saying what it counts, and the list under
    a count as long as the count: breaks are counted by place in the code (Dynamo meets one place once per frame it
    traces through it, so its own counter and log can say 2 and 3 for the same two lines). `backend`: the run's
    (a backend that keeps eager's kernels fuses nothing, whatever the kernel counts say)."""
    lines = []
    graphs, breaks = result.get("graph_count"), group_breaks(result.get("graph_breaks") or [])
    recompiles = result.get("recompiles") or []
    compiled_again = sum(1 for r in recompiles if r.get("frame"))  # the attempt that hit the limit compiled nothing
    if graphs is not None:
        if not breaks and not result.get("graph_break_count"):
            lines.append(f"Dynamo captured {graphs} graph{'s' if graphs != 1 else ''} with no graph breaks.")
        else:
            pieces = graphs - compiled_again
            lines.append(f"Dynamo compiled **{graphs} graph{'s' if graphs != 1 else ''}**"
                         + (f": {pieces} piece{'s' if pieces != 1 else ''} of the model between its graph breaks, "
                            f"plus {compiled_again} recompilation{'s' if compiled_again != 1 else ''} of them (below)."
                            if compiled_again and pieces > 0
                            else ", the pieces of the model between its graph breaks."))
    theirs = sum(1 for b in breaks if inside_torch(b.get("file")))
    if breaks:
        lines.append(f"**{len(breaks)} graph break{'s' if len(breaks) != 1 else ''}**, counted by place in the code "
                     "(where Dynamo stopped tracing, ran that line in Python and started a new graph after it)"
                     + (f"; {'all' if theirs == len(breaks) else theirs} inside PyTorch itself, not in the model"
                        if theirs else "") + ":")
    for b in breaks:
        torch_file = inside_torch(b.get("file"))
        where = (f" at `{torch_file or Path(b['file']).name}:{b['line']}`" if b.get("file") and b.get("line")
                 else "")
        source = f" (`{b['source'].strip()}`)" if b.get("source") else ""
        times = f"; Dynamo met it {b['count']} times, once per frame it traced through it" if b["count"] > 1 else ""
        loop = (" (once inside a loop of the calling function, where it could not resume: it ran that function "
                "eagerly and compiled the function holding the break on its own)" if b.get("skipped_frame") else "")
        own = f" **{TORCH_BREAK_TAGS.get(torch_file, 'Inside PyTorch, not in your code')}.**" if torch_file else ""
        lines.append(f"- graph break{where}{source}: {first_line(b['reason'])}{times}{loop}{own}")
    # A generate run counts its recompilations up to the first compiled generation; the one more generation with a
    # shorter prompt, after the timing, counts its own (prompt_recompiles), said here too so the two agree.
    later = result.get("prompt_recompiles")
    during = " in the first compiled generation" if later is not None else ""
    if result.get("recompile_count") is not None:
        lines.append(f"No recompilations{during}." if not recompiles else
                     f"{len(recompiles)} recompilation{'s' if len(recompiles) != 1 else ''}{during} "
                     "(a guard failed, so the frame compiled again):")
    guarded = []  # the value guards among the recompiles, explained once below the list
    for r in recompiles:
        # The attempt that hits the recompile limit is listed too; it has no frame, since nothing was compiled.
        frame = resume_words(r["frame"]) if r.get("frame") else ""
        what = f"recompile {r['compile_id']} of {frame}" if r.get("frame") else \
            f"{r['compile_id']}: the recompile limit was hit, no compile"
        if guard := value_guard(r.get("reason") or ""):
            guarded.append(guard)
            lines.append(f"- {what}: the guard `{guard['guard']}` failed (a new value, see below)")
        else:
            lines.append(f"- {what}: {_after_id(first_line(r['reason']))}")
    if later:
        why = (result.get("prompt_recompile_reasons") or [None])[0]
        lines.append(f"After the timing, one more generation with a prompt one token shorter caused {later} "
                     f"recompilation{'s' if later != 1 else ''}" + (f": {_after_id(first_line(why))}" if why else "")
                     + ".")
    if guarded:
        lines.append(value_guard_words(guarded[0]))
    eager_k, compiled_k = result.get("eager_kernels_per_step"), result.get("compiled_kernels_per_step")
    if eager_k is not None and compiled_k is not None:
        cpu = result.get("device") == "cpu"
        # only where the page draws the bars: a run whose profiled steps ran far off the timed ones shows none
        bars = ("the bars below show where the time went" if breakdown.shown_ms(result) else
                "Where the time goes says why it shows no bars for this run")
        same = (" (no fewer: on the CPU this counts the operators the profiler sees in a step, and the fused C++ "
                "kernels of compiled code only where Inductor marks them for it, so a count that holds still does not "
                f"say fusion did nothing; {bars})." if cpu else
                f" (no fewer: fusion did not cut the kernels one step launches; {bars}).")
        if backend in EAGER_KERNEL_BACKENDS:  # aot_eager and eager trace, then run eager's own kernels
            kept = (f" (nothing is fused: backend={backend} runs eager's own kernels; "
                    + ("the count moved only where tracing changed which operators run, such as no-ops it dropped or "
                       "operators it decomposed)." if compiled_k != eager_k else "the same kernels as eager).")
                    )
            lines.append(f"Kernels launched per step: {eager_k} eager, {compiled_k} compiled{kept}")
        else:
            lines.append(f"Kernels launched per step: {eager_k} eager, {compiled_k} compiled"
                         + (" (fusion merged them)." if compiled_k < eager_k else same))
    if skips := result.get("cudagraph_skip_count"):
        reasons = "; ".join(first_line(r) for r in result.get("cudagraph_skip_reasons") or [])
        if result.get("device") == "cpu":  # Inductor counts a skip for each graph it would have captured
            reasons = "there are no CUDA graphs on the CPU, so reduce-overhead and max-autotune run without them here"
        lines.append(f"CUDA graphs were skipped {skips} time(s): {reasons or 'torch gave no reason'}.")
    return lines


_RESUME = re.compile(r"^torch_dynamo_resume_in_(\w+?)_at_(\d+)$")
# A guard on a Python number: "___stack0 == 0.46689173579216003   # if x.abs().mean().item() > 1e4:  # path:74 in ..."
_VALUE_GUARD = re.compile(r"^(?:\d+/\d+: )?(?P<name>___stack\d+|[\w.\[\]'\"]+) == "
                          r"(?P<value>-?\d+\.\d*(?:e[-+]?\d+)?)\s*"
                          r"(?:#\s*(?P<source>.*?)\s*#\s*(?P<file>\S+):(?P<line>\d+))?")


def resume_words(frame: str) -> str:
    """`forward`, or for Dynamo's resume function the code it stands for: 'the code after the break at line 74
    of `forward`'."""
    if m := _RESUME.match(frame):
        return f"the rest of `{m.group(1)}` after the break at line {m.group(2)} (Dynamo's resume function)"
    return f"`{frame}`"


def value_guard(reason: str) -> dict | None:
    """{guard, value, source, place} when a recompile's guard compared a Python number (a float Dynamo baked into
    the graph, such as what .item() returned), else None."""
    m = _VALUE_GUARD.match(first_line(reason))
    if m is None:
        return None
    place = f"{Path(m['file']).name}:{m['line']}" if m["file"] else None
    return {"guard": f"{m['name']} == {float(m['value']):.4g}", "value": m["value"],
            "source": (m["source"] or "").strip(),
            "place": place, "item": ".item()" in (m["source"] or "") or m["name"].startswith("___stack")}


def value_guard_words(guard: dict) -> str:
    """Why a guard on a number recompiles, and the two fixes: the .item() trap in words."""
    where = f" at `{guard['place']}`" if guard["place"] else ""
    source = f" (`{guard['source']}`)" if guard["source"] else ""
    origin = (f"the number that `.item()`{where}{source} took out of a tensor" if guard["item"] else
              f"a Python number{where}{source}")
    return (f"**Recompiled on a value nobody chose.** The guard `{guard['guard']}` checks {origin}: Dynamo compiled "
            "the code that uses it for that exact number, so each new value fails the guard and compiles again, up to "
            "the recompile limit (8 by default), after which that code runs eagerly. The value moves with the data, "
            "so in a real job this never settles. Fix: keep the value a tensor (compute with `torch.where(...)` "
            "instead of an `if` on `.item()`), or set `torch._dynamo.config.capture_scalar_outputs = True` so "
            "`.item()` stays in the graph as a symbolic value instead of a constant.")


def _after_id(reason: str) -> str:
    """'0/0: tensor 'x' size mismatch ...' -> "tensor 'x' size mismatch ..." (the id is shown already)."""
    head, sep, rest = reason.partition(": ")
    return rest if sep and "/" in head and " " not in head else reason

def group_breaks(breaks: list[dict]) -> list[dict]:
    """One entry per place and reason: Dynamo reports a break once per frame it hit it in."""
    grouped: dict[tuple, dict] = {}
    for b in breaks:
        key = (first_line(b.get("reason")), b.get("file"), b.get("line"))
        if key not in grouped:
            grouped[key] = {**b, "reason": key[0], "count": 0, "skipped_frame": False}
        grouped[key]["count"] += b.get("count") or 0
        grouped[key]["skipped_frame"] |= bool(b.get("skipped_frame"))
    return list(grouped.values())


def break_title(b: dict) -> str:
    """'`captioner.py:74`: Unsupported Tensor.item() call ... (hit 2 times)'."""
    where = f"`{Path(b['file']).name}:{b['line']}`: " if b.get("file") and b.get("line") else ""
    times = f"hit {b['count']} time{'s' if b['count'] != 1 else ''}" if b.get("count") else ""
    return f"{where}{b['reason']}" + (f" ({times})" if times else "")


def break_pair_words(clean: dict, broken: dict) -> str:
    """What the break changed, in a sentence: graphs, share of the throughput, compile time."""
    graphs = f"Dynamo captured **{broken.get('graph_count')} graphs** instead of {clean.get('graph_count')}"
    speed = broken.get("compiled_samples_per_s"), clean.get("compiled_samples_per_s")
    share = f"; the model runs at **{speed[0] / speed[1]:.0%}** of the throughput" if all(speed) else ""
    times = broken.get("compile_s"), clean.get("compile_s")
    took = f"; compiling took {times[0]:.1f} s instead of {times[1]:.1f} s" if None not in times else ""
    return f"With the break, {graphs}{share}{took}."


# Breaks PyTorch makes on purpose, by the file they are in, and what they mean for the user.
TORCH_BREAKS = {
    "torch/optim/optimizer.py": (
        "PyTorch breaks the graph here on purpose, before every optimizer step, so that the update compiles as "
        "its own no-grad graph that Inductor can do in place instead of allocating a copy of every parameter "
        "(pytorch/pytorch#104053). Nothing to change in your code: the update itself is still compiled."),
}


# The same in a few words, for the list of breaks; a break inside PyTorch not named here reads "inside PyTorch".
TORCH_BREAK_TAGS = {"torch/optim/optimizer.py": "PyTorch's own break, on purpose, before every optimizer step: "
                                                "nothing to change in your code"}


def torch_break_words(b: dict) -> str | None:
    """For a break inside PyTorch itself: that it is not in the user's code, and what (if anything) to do."""
    where = inside_torch(b.get("file"))
    if where is None:
        return None
    return TORCH_BREAKS.get(where) or (
        f"This break is inside PyTorch itself ({where}), not in your code: torch's hint about removing or "
        "rewriting the line is meant for code you own. Usually there is nothing to change; a newer PyTorch may "
        "trace through it, or you can compile a smaller region that leaves that call outside.")


SKIPPED_FRAME_WORDS = ("Dynamo could not resume after this break (it sits inside a loop), so it ran the **whole "
                       "enclosing function eagerly**: nothing in it was compiled.")


def registry_words(b: dict) -> str | None:
    """torch's own account of a break from its graph-break registry: the GBxxxx type linked to its page, the
    explanation and the hints, as torch words them (None where this torch's message has no registry entry)."""
    entry = b.get("registry")
    if not entry or not entry.get("gb_type"):
        return None
    name = f"[{entry['gb_id']}]({entry['link']})" if entry.get("gb_id") and entry.get("link") else (
        entry.get("gb_id") or "no id")
    # the page the id links to is on the web: offline (a workshop may be), its text is what is quoted here
    online = " (its page is online; what it says is below)" if entry.get("link") else ""
    lines = [f"torch's registry: **{name}**, {entry['gb_type']}{online}"]
    if entry.get("explanation"):
        lines.append(f"- why: {entry['explanation']}")
    hints = entry.get("hints") or []
    if hints and inside_torch(b.get("file")) is not None:
        # torch words its hints for code that makes the call itself ("Remove the graph_break() call"); this break
        # is PyTorch's own, so they are not the user's to follow
        lines.append(f"- torch's {len(hints)} hint(s) are for code that makes this call itself; the call here is in "
                     "PyTorch's own source, so there is nothing in them to do in yours")
    else:
        lines += [f"- hint: {hint}" for hint in hints]
    return "\n".join(lines)
