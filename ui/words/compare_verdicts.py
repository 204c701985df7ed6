"""Verdicts that set runs against each other, from their paired speedups and intervals: which is faster, by
how much, and when the runs cannot tell them apart. No Streamlit here, so the wording is unit-tested.

A run's speedup is measured against its own eager blocks, paired round by round, so it cancels the machine's
drift within that run; two runs' compiled throughputs do not cancel the drift between runs. So runs are
ordered by speedup, and two whose intervals overlap are said to be not told apart.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from tcore import figures
from tcore.experiment.comparable import compile_key


def interval_text(result: dict[str, Any]) -> str:
    """'1.38x (1.33–1.44)', or '1.38x' for a run without an interval."""
    s, lo, hi = result.get("speedup"), result.get("speedup_low"), result.get("speedup_high")
    if s is None:
        return "n/a"
    return f"{s:.2f}x ({lo:.2f}–{hi:.2f})" if lo is not None and hi is not None else f"{s:.2f}x"


def noisy_names(named: list[tuple[str, dict[str, Any]]]) -> str | None:
    """'**Noisy**: the run with the break (its interval is too wide ...).' for the runs that flag themselves."""
    said = [f"{name} ({figures.noise_reasons(r)[0]})" for name, r in named if figures.noise_reasons(r)]
    return f"**Noisy**: {'; '.join(said)}. Read the comparison as rough." if said else None


def break_verdict(clean: dict[str, Any], broken: dict[str, Any]) -> str:
    """What the deliberate graph break cost: graphs, the speedup with and without it (with intervals), compile
    time; says when the two runs cannot be told apart and when either is noisy."""
    parts = [f"With the break, Dynamo captured **{broken.get('graph_count')} graphs** instead of "
             f"{clean.get('graph_count')}."]
    s_clean, s_broken = clean.get("speedup"), broken.get("speedup")
    if s_clean is not None and s_broken is not None:
        both = f"with the break {interval_text(broken)}, without it {interval_text(clean)}"
        apart = figures.told_apart(clean, broken)
        if apart is False:
            parts.append(f"Speedup over eager: {both}. The intervals overlap, so these runs **cannot tell the two "
                         "apart**: the break's cost is within their noise. Time them for longer (Advanced › timed "
                         "seconds) to see it.")
        elif s_broken > s_clean:
            parts.append(f"Speedup over eager: {both}. With the break it measured **faster**, which a break "
                         "should not do (it splits the graph and the fusion across it): check the noise below, "
                         "or rerun both.")
        else:
            parts.append(f"Speedup over eager: {both}: with the break compiled keeps **{s_broken / s_clean:.0%}** "
                         "of the speedup it has without it"
                         + (", beyond both runs' intervals." if apart else " (no interval to check it against)."))
    times = broken.get("compile_s"), clean.get("compile_s")
    if None not in times:
        parts.append(f"Compiling took {times[0]:.1f} s instead of {times[1]:.1f} s.")
    if noisy := noisy_names([("the run without the break", clean), ("the run with the break", broken)]):
        parts.append(noisy)
    return " ".join(parts)


def ranking_verdict(named: list[tuple[str, dict[str, Any]]], *, what: str = "setting",
                    same_work: bool = True, reruns: bool = False) -> str | None:
    """The fastest of several runs by paired speedup, those it cannot be told apart from, and a note when compiled
    throughput orders them otherwise: each speedup divides by its own run's eager, which moved between runs of the
    same work (`same_work`: one model, size, batch, task and precision); runs of different work time different
    steps, so their throughputs were never comparable. `reruns`: every run is of one setting, so none is faster
    than another; what they show is how far a rerun moves (rerun_verdict)."""
    done = [(n, r) for n, r in named if r.get("speedup") is not None]
    if len(done) < 2:  # one run is not a ranking; its own page says how sure its figure is
        return None
    if reruns:
        return rerun_verdict(done)
    ranked = sorted(done, key=lambda nr: nr[1]["speedup"], reverse=True)
    best_name, best = ranked[0]
    # A run without an interval (too few rounds) cannot be told from the fastest, nor the fastest from any run when it
    # has none: as the Sweep's verdict, crown only what the intervals tell apart.
    rivals = [(n, r) for n, r in ranked[1:] if not figures.told_apart(best, r)]
    if rivals:  # no crown: another run's interval reaches the fastest one's, or an interval is missing
        unknown = any(figures.told_apart(best, r) is None for _, r in rivals)
        text = ("These runs **cannot tell apart** "
                + ", ".join(f"**{n}** ({interval_text(r)})" for n, r in ranked[:1] + rivals)
                + ": their speedups' intervals overlap" + (" or a run has none of its own (too few rounds)"
                                                           if unknown else "")
                + f", so none of them is named the fastest {what}. Time them for longer before picking one.")
    else:
        text = f"Fastest {what}: **{best_name}**, {interval_text(best)} eager."
    by_rate = [n for n, _ in sorted(done, key=lambda nr: -(nr[1].get("compiled_samples_per_s") or 0))]
    if len(done) > 1 and by_rate != [n for n, _ in ranked] and not same_work:
        text += (f" By compiled samples/s alone the order differs ({' > '.join(by_rate)}): these runs time different "
                 "work (model, size, batch, task or precision), so their throughputs do not compare; the speedup, "
                 "each over its own eager, is the figure to compare.")
    elif len(done) > 1 and by_rate != [n for n, _ in ranked]:
        eager = [r.get("eager_samples_per_s") for _, r in done if r.get("eager_samples_per_s")]
        moved = (f" (eager read {rate_words(min(eager)).split()[0]}–{rate_words(max(eager))} across them)" if eager
                 else "")
        text += (f" By compiled samples/s alone the order differs ({' > '.join(by_rate)}): each run's throughput "
                 f"also carries the machine's speed at its time{moved}, which the speedup, paired with eager "
                 "round by round inside each run, cancels. The speedup is the figure to compare.")
    if noisy := noisy_names(done):
        text += " " + noisy
    return text


def rerun_verdict(done: list[tuple[str, dict[str, Any]]]) -> str:
    """Reruns of one setting: how far apart their headlines are, and whether their intervals hold each other."""
    speedups = [r["speedup"] for _, r in done]
    low, high = min(speedups), max(speedups)
    text = (f"These {len(done)} runs are reruns of **one setting**, so none of them is a faster setting: their "
            f"headlines read {low:.2f}–{high:.2f}x, {_apart(low, high)}, which is how far a rerun moves here.")
    apart = [(a, b) for i, (a, ra) in enumerate(done) for b, rb in done[i + 1:] if figures.told_apart(ra, rb)]
    if apart:
        text += (f" **{apart[0][0]}** and **{apart[0][1]}** lie outside each other's intervals: the machine moved "
                 "between them by more than a run can see in itself (another load, another clock).")
    elif all(r.get("speedup_low") is not None for _, r in done):
        text += " Each lies inside the others' intervals, as reruns should."
    if noisy := noisy_names(done):
        text += " " + noisy
    return text


# Backends that run the captured graph with eager kernels: Dynamo (and AOT autograd) trace, nothing is generated.
NO_CODE_BACKENDS = ("eager", "aot_eager")


def compiled_nothing(spec: dict[str, Any]) -> str | None:
    """Why a run compiled no faster code ('compile off', 'backend eager'), or None for a run that did."""
    if spec.get("compile") == "off":
        return "compile off"
    if spec.get("backend") in NO_CODE_BACKENDS:
        return f"backend {spec['backend']}"
    return None


def strategy_verdict(named: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> str | None:
    """Diagnose's verdict over its shape strategies, each (name, spec, result): the fastest of those that compiled
    code (ranking_verdict), never one that compiled nothing (eager kernels against eager: the machine's drift), as
    Compare and the Sweep rule."""
    contenders = [(n, r) for n, spec, r in named if not compiled_nothing(spec) and r.get("speedup") is not None]
    nothing = [(n, spec, r) for n, spec, r in named if compiled_nothing(spec) and r.get("speedup") is not None]
    if len(contenders) + len(nothing) < 2:
        return None
    parts = []
    if len(contenders) > 1:
        parts.append(ranking_verdict(contenders, what="strategy"))
    elif not contenders:
        why = ", ".join(sorted({compiled_nothing(spec) for _, spec, _ in nothing}))
        parts.append(f"None of these strategies compiled code ({why}: the captured graphs run eager kernels), so none "
                     "is named the fastest: each speedup is eager against eager, how far the machine moved between "
                     "rounds, not a faster strategy. Compare their compilations and compile time; pick backend "
                     "inductor to compare compiled speed.")
    if nothing and contenders:
        parts.append("Not ranked, as they compiled nothing: " + ", ".join(
            f"**{n}** ({compiled_nothing(spec)}, {interval_text(r)})" for n, spec, r in nothing)
                     + ". Each of their speedups is eager against eager: the machine's drift, not a gain.")
    return " ".join(p for p in parts if p) or None


def compare_verdict(records: list) -> str | None:
    """The Compare page's verdict over the chosen runs (RunRecords, newest first): the fastest of the runs of one
    task (the task most of them ran, else the newest's), never a run that compiled nothing (its speedup is eager
    against eager: the machine's drift); runs of one setting on one device called reruns of each other, with their
    spread; and the runs left out, with why."""
    done = [r for r in records if r.result.get("speedup") is not None]
    if len(done) < 2:  # one run is not a ranking; its own page says how sure its figure is
        return None

    def name(r) -> str:
        return f"{r.label} · {r.id[-6:]}"

    def task(r) -> str:
        return r.spec.get("task", "inference")

    main_task = Counter(task(r) for r in done).most_common(1)[0][0]  # a tie goes to the newest run's task
    other_task = [r for r in done if task(r) != main_task]
    same_task = [r for r in done if task(r) == main_task]
    def setting(r) -> str:  # what a run compiled, on which device: runs of one setting are reruns of each other
        return compile_key(r.spec, r.device or r.result.get("device") or "cpu")

    settings: dict[str, list] = {}
    for r in same_task:
        settings.setdefault(setting(r), []).append(r)
    contenders = [r for r in same_task if not compiled_nothing(r.spec)]
    nothing = [r for r in same_task if compiled_nothing(r.spec)]
    parts = []
    if len({setting(r) for r in contenders}) > 1:
        work = {tuple(r.spec.get(k) for k in ("model", "preset", "batch_size", "precision")) for r in contenders}
        parts.append(ranking_verdict([(name(r), r.result) for r in contenders], what="run", same_work=len(work) == 1))
    elif len(contenders) == 1:
        parts.append(f"Of the runs of one task here, only **{name(contenders[0])}** compiled code: "
                     f"{interval_text(contenders[0].result)} eager. There is no other to rank it against.")
    elif not contenders and len(settings) > 1:
        parts.append("None of these runs compiled code (backend eager or aot_eager runs the captured graph with eager "
                     "kernels; compile off compiles nothing), so none is crowned the fastest: a speedup of theirs is "
                     "eager against eager, how far the machine moved between the two, not a faster setting.")
    if nothing and len(settings) > 1:
        parts.append("Not ranked, as they compiled nothing: " + ", ".join(
            f"**{name(r)}** ({compiled_nothing(r.spec)}, {interval_text(r.result)})" for r in nothing)
                     + ". Each of their speedups is eager against eager: the machine's drift, not a gain.")
    for group in settings.values():  # reruns of one setting, whether ranked or not
        if len(group) > 1:
            parts.append(_reruns_sentence([(name(r), r.result) for r in group], whole=len(group) == len(done)))
    if other_task:
        parts.append("Left out of the ranking, as another task times other work: " + ", ".join(
            f"**{name(r)}** ({task(r)})" for r in other_task) + f". The ranking holds the {main_task} runs; choose "
                     "runs of one task to rank them.")
    return " ".join(parts) or None


def compare_verdict_text(records: list) -> str | None:
    """compare_verdict() for a page that is not Markdown (the HTML export): no bold marks, and each run's label as
    typed. Stand-ins take the labels' places while the bold marks go, so a label's own asterisks stay."""
    stand_ins = {f"\x00{i}\x00": r.label for i, r in enumerate(records)}
    said = compare_verdict([dataclasses.replace(r, label=k) for k, r in zip(stand_ins, records)])
    if said is None:
        return None
    said = said.replace("**", "")
    for stand_in, label in stand_ins.items():
        said = said.replace(stand_in, label)
    return said


def _reruns_sentence(named: list[tuple[str, dict[str, Any]]], *, whole: bool) -> str:
    """Runs of one setting: reruns of each other, and how far apart their headlines read."""
    if whole:
        return rerun_verdict(named)
    speedups = [r["speedup"] for _, r in named]
    low, high = min(speedups), max(speedups)
    return (f"{' and '.join(f'**{n}**' for n, _ in named)} are reruns of one setting: their headlines read "
            f"{low:.2f}–{high:.2f}x, {_apart(low, high)}, which is how far a rerun moves here.")


def _apart(low: float, high: float) -> str:
    """'8.3% apart'; 'about 32 times apart' where a percentage would run to thousands."""
    return f"about {high / low:.0f} times apart" if high >= 2 * low else f"{100 * (high / low - 1):.1f}% apart"


def rate_words(rate: float, unit: str = "samples/s") -> str:
    """'0.724 samples/s', '42.1 samples/s', '3,185 samples/s', '1 sample/s': three significant digits (a loaded CPU's
    0.72 samples/s read '1 samples/s'), the unit singular only for exactly one."""
    said = f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"
    return f"{said} {unit.replace('samples/', 'sample/') if said == '1' else unit}"
