"""One run's figures in words and tiles, for the result the Run and Compare pages draw: the baseline, the
headline tiles, noise, break-even, correctness, the time breakdown, share of peak, caches and the environment.

No Streamlit here, so the wording is unit-tested like the charts.
"""
from __future__ import annotations

from typing import Any

from tcore import figures
from tcore.figures import paired, rerun
from tcore.lab.api import duration_words
from ui.words.compare_verdicts import compiled_nothing


def baseline_words(spec: dict, device: str | None, speedup: float | None = None) -> str:
    """What the eager baseline is, in a sentence: its precision and, for a convolutional model, its layout.

    The layout decides what a CNN's speedup teaches: Inductor converts convolutions to channels_last on
    its own, so against NCHW eager much of the "compile speedup" is a layout change eager can have too. Only
    Inductor does that: a backend that compiles no code (eager, aot_eager) keeps eager's layout.
    """
    import sample_models
    from tcore.experiment.spec import describe

    precision = spec.get("precision", "fp32")
    words = f"Eager baseline and compiled model both run in **{precision}**: {describe('precision', precision)}"
    if device == "cpu" and precision == "tf32":
        words += " (on this CPU it runs as fp32)"
    try:
        convolutional = sample_models.get(spec.get("model", "")).supports_channels_last
    except ValueError:
        return words
    if convolutional and (nothing := compiled_nothing(spec)):  # Inductor never ran: no layout of its to explain
        layout = "channels_last" if spec.get("channels_last") else "NCHW"
        words += (f" Eager and compiled both run in **{layout}**: with {nothing} nothing was compiled to code, so no "
                  "layout changed between the two.")
    elif convolutional and spec.get("channels_last"):
        words += (" Eager runs in **channels_last**, as people tune a CNN: the speedup is what compiling adds "
                  "beyond that. Against NCHW eager it would look larger, because Inductor picks channels_last "
                  "for its convolutions on its own.")
    elif convolutional and speedup is not None and speedup > 1:
        words += (" Eager runs in **NCHW**: part of this speedup is the channels_last layout Inductor picks for "
                  "its convolutions on its own, which eager can have too; turn channels_last on to see what "
                  "compiling adds beyond it.")
    elif convolutional:  # no speedup to explain: a slower compiled run owes nothing to the layout
        words += (" Eager runs in **NCHW**; Inductor picks channels_last for its convolutions on its own, which "
                  "eager can have too (turn channels_last on to compare the two in the same layout).")
    return words


def breakdown_words(result: dict) -> list[str]:
    """Sentences under the time-breakdown chart: the biggest changes, and how the profiled step compares with
    the timed one (the profiler adds overhead of its own, most to launch-bound steps)."""
    from tcore.figures.breakdown import as_timed, differences

    found = result.get("breakdown") or {}
    shown = as_timed(result)
    words = []
    off = ", ".join(f"{v} {s['off_pct']:+.0f}%" for v, s in shown.items() if s["shown"] != "profiled")
    # Why they ran off, by sign: the profiler's overhead slows a step; a profiled step faster than the timed one
    # was not slowed by it (the timed steps were, by other load, or the steps changed between the two).
    off_by = {v: s["off_pct"] for v, s in shown.items() if s["shown"] != "profiled"}
    slowed, faster = [v for v, o in off_by.items() if o > 0], [v for v, o in off_by.items() if o < 0]
    why = "; ".join(
        ([f"the profiler's own overhead slowed the {' and '.join(slowed)} steps (most on the CPU, where it records "
          "every op)"] if slowed else [])
        + ([f"the {' and '.join(faster)} steps ran faster under the profiler, which its overhead cannot do: the "
            "machine's load or the steps themselves changed between the two"] if faster else []))
    if any(s["shown"] == "withheld" for s in shown.values()):  # said first: the bars are missing because of it
        words.append(f"**No bars: the profiled steps ran far off the timed ones** ({off}). Their split would "
                     f"contradict the speedup above ({why}); the timed figures stand.")
    elif off:
        words.append(f"**The bars are scaled to the timed steps.** The profiled steps ran off the timed ones ({off}; "
                     f"{why}), so each bar keeps the profiler's shares but takes the length of the timed median step, "
                     "which the speedup above uses.")
    if ("eager" in found and "compiled" in found and all(shown[v]["ms"] for v in ("eager", "compiled"))
            and (changed := differences({**found["eager"], "ms": shown["eager"]["ms"]},
                                        {**found["compiled"], "ms": shown["compiled"]["ms"]}))):
        words.append(f"Biggest changes, eager → compiled: {changed}.")
    for variant, b in found.items():
        timed = result.get(f"{variant}_latency_ms_p50")
        if b.get("profiled_idle_ms") is not None:
            busy = sum(v for k, v in b["ms"].items() if k != "idle")
            words.append(f"{variant.capitalize()}: {busy:.2f} ms of kernels per step, measured by the profiler; idle "
                         f"is the rest of the {timed:.2f} ms timed step. Recording kernels slows their launches, "
                         f"so the profiled steps ({b['step_ms']:.2f} ms) showed {b['profiled_idle_ms']:.2f} ms of "
                         "gaps: the timed step is the truth.")
        elif timed:
            off = (b["step_ms"] - timed) / timed * 100
            words.append(f"{variant.capitalize()}: {b['steps']} profiled steps of {b['step_ms']:.2f} ms on average "
                         f"against {timed:.2f} ms timed ({off:+.0f}%).")
        if b.get("overlap_ms", 0) > 0.02 * b["step_ms"]:
            words.append(f"{variant.capitalize()}: kernels overlapped on several streams for {b['overlap_ms']:.2f} ms "
                         "per step, so the categories add up to more than the busy time.")
    return words


def peak_words(result: dict, gpu: str | None) -> str:
    """How much of the GPU a step uses: achieved compute against its peak, and the weight-read floor on bandwidth."""
    from tcore.host.peaks import lookup

    peak = lookup(gpu)
    if peak is None:
        return f"Share of peak: n/a, {result.get('unavailable', {}).get('eager_peak_pct') or 'unknown device'}."
    parts = []
    for variant in result.get("variants", ("eager",)):
        pct, tflops = result.get(f"{variant}_peak_pct"), result.get(f"{variant}_tflops")
        if pct is not None and tflops is not None:
            bw = result.get(f"{variant}_weights_bw_pct")
            parts.append(f"{variant} {tflops:.3g} TFLOP/s = **{pct:.1f}%**" +
                         (f", weight reads alone {bw:.1f}% of bandwidth" if bw is not None else ""))
    return (f"Against the {peak.name}'s dense peak: " + "; ".join(parts) + ". A step far below peak is "
            "bound by memory traffic or overhead, which fusion and CUDA graphs address.") if parts else ""


def correctness_words(result: dict, precision: str) -> tuple[bool | None, str]:
    """(ok, sentence) about the compiled output matching eager; ok is None when nothing was compared."""
    ok = result.get("correctness_ok")
    if ok is None:
        return None, "No correctness check: nothing was compiled, so there is nothing to compare with eager."
    rel, tol = result["correctness_rel_diff"], result["correctness_tolerance"]
    diff = f"largest difference {rel:.2g} of the output's scale, {'within' if ok else 'above'} the {precision} " \
           f"tolerance of {tol:g}"
    return ok, ("Compiled output matches eager: " if ok else "Compiled output DIFFERS from eager: ") + diff + "."


def headline(result: dict) -> dict[str, tuple[str, str | None]]:
    """Figure -> (value with unit, why n/a) for the run-level figures of a summary (tcore.figures.SUMMARY_RUN)."""
    return {key: (figures.text(result, key, reason=False),
                  (result.get("unavailable") or {}).get(key) if result.get(key) is None else None)
            for key in figures.SUMMARY_RUN}


# What fits a metric tile a third of the Run page's result column wide (about 145 px at a 1280-px window,
# measured in Chromium): a value in Streamlit's 36-px figures, a label in 14-px text beside its help icon.
TILE_VALUE_CHARS = 9
TILE_LABEL_CHARS = 19


def headline_tiles(result: dict) -> list[list[dict[str, Any]]]:
    """The Run page's metric tiles, two rows: speedup, compile time, break-even; then eager and compiled throughput.

    Each tile is st.metric's arguments. A unit longer than a letter goes in the label ("Break-even (steps)"),
    so a value like 59391 is not clipped; the speedup's interval is its delta, orange when noisy, and its help
    says how the figure is made.
    """
    result = as_shown(result)
    spread = speedup_range(result)
    top = [{"label": "Speedup", "value": figures.text(result, "speedup", reason=False), "delta": spread,
            "delta_color": "orange" if figures.noise_reasons(result) or single_round(result) else "off",
            "delta_arrow": "off", "help": how_words(result) or figures.RUN_FIGURES["speedup"].means}]
    for name in ("compile_s", "breakeven_steps"):
        fig = figures.RUN_FIGURES[name]
        short = len(fig.unit) <= 1
        top.append({"label": fig.title if short else fig.label, "value": figures.text(result, name, unit=short,
                                                                                     reason=False), "help": fig.means})
    delta, why = vs_eager(result, "samples_per_s")
    bottom = [{"label": f"{variant.capitalize()} {figures.VARIANT_FIGURES['samples_per_s'].unit}",
               "value": figures.text(result, f"{variant}_samples_per_s", unit=False, reason=False),
               "delta": delta if variant == "compiled" else None,
               "help": figures.VARIANT_FIGURES["samples_per_s"].means + (why if variant == "compiled" else "")}
              for variant in ("eager", "compiled")]
    return [top, bottom]


def vs_eager(result: dict, key: str) -> tuple[str | None, str]:
    """The compiled throughput tile's "+N% vs eager" and the words its help adds. A card answers "how much faster" once:
    the percentage is shown only where the two throughputs on the tiles give the headline's own figure (the same whole
    percent as the Speedup), so a reader can check it against both. Elsewhere it is left off, and the help says what the
    two throughputs give and why the Speedup differs: "Speedup 1.55x" above "+43% vs eager" read as two answers."""
    change, speedup = figures.change_pct(result, key), result.get("speedup")
    if change is None:
        return None, ""
    if not speedup:
        return f"{change:+.0f}% vs eager", ""
    said = f"{(speedup - 1) * 100:+.0f}%"
    if f"{change:+.0f}%" == said:
        return f"{said} vs eager", (f" {said} is compiled over eager of these two figures, and the Speedup above "
                                    f"({speedup:.2f}x) gives the same.")
    return None, (f" No percentage against eager here: these two throughputs give {1 + change / 100:.2f}x, the "
                  f"Speedup above {speedup:.2f}x, which is the median of each round's own ratio (eager and compiled "
                  "timed back to back), so drift between rounds does not move it; each throughput is the median of "
                  "its own rounds."
                  + (" The line under the tiles says why they differ." if figures.unpaired_gap(result) else ""))


# The stored figures that make the headline's interval: a run of one round shows none of them (as_shown).
INTERVAL_KEYS = ("speedup_low", "speedup_high", "speedup_pm_pct", "speedup_confidence_pct", "speedup_interval_words")


def single_round(result: dict) -> bool:
    """Whether the headline rests on one paired round: one ratio, so no interval of its own, whatever the figures
    stored beside it (an interval for a rerun made of the spread between fresh processes alone says nothing of how
    far this run's own figure is from the setting's: it read "95% interval for a rerun 0.11-0.16x" beside a rerun of
    the setting at 4.15x)."""
    rounds = result.get("paired_rounds")
    return rounds is not None and rounds < 2


def as_shown(result: dict) -> dict:
    """The result as a page words it: a single round's without an interval (single_round)."""
    return {**result, **dict.fromkeys(INTERVAL_KEYS)} if single_round(result) else result


def how_words(result: dict) -> str | None:
    """How the headline speedup was made (tcore.figures.speedup_words), of the result as shown (as_shown)."""
    return figures.speedup_words(as_shown(result))


MORE_ROUNDS = (f"For an interval, time more rounds: under Advanced, raise the timed seconds (the steps spent them "
               f"before a second round), or time by steps with Rounds at {paired.MIN_ROUNDS} or more, the fewest for a "
               f"{figures.LEVEL_PCT}% interval.")
ONE_ROUND = ("**One round: this speedup has no interval of its own.** It is a single round's ratio of compiled to "
             "eager, so nothing in this run says how far a rerun could read from it. " + MORE_ROUNDS)


def speedup_range(result: dict) -> str | None:
    """'97%: 1.33–1.44 x': the paired speedup's interval, shown under the headline; '1 round: no interval' for a run
    of a single round; an eager-only run's rounds' range."""
    if single_round(result):
        return "1 round: no interval"
    lo, hi, cover = result.get("speedup_low"), result.get("speedup_high"), result.get("speedup_confidence_pct")
    if lo is not None and hi is not None and cover is not None:
        name = figures.interval_name(result)
        return f"{name.split()[0]}: {lo:.2f}–{hi:.2f} x" if name.endswith("% interval") else \
            f"{result.get('paired_rounds')} rounds: {lo:.2f}–{hi:.2f} x"
    lo, hi = result.get("speedup_min"), result.get("speedup_max")
    return None if lo is None or hi is None else f"rounds: {lo:.2f}–{hi:.2f} x"


def noise_words(result: dict) -> str | None:
    """Why the headline is not solid, in a sentence a page shows beside it; None for a steady run. A single round's is
    never solid: it says so, and how to get an interval."""
    if single_round(result):  # ONE_ROUND says why there is no interval: the stored reason would say it again
        said = "; ".join(figures.noise_reasons({**as_shown(result), "speedup_no_interval": None}))
        return ONE_ROUND + (f" Besides, {said}." if said else "")
    reasons = figures.noise_reasons(result)
    said = "; ".join(reasons)
    if not reasons:
        return None
    return ("**Noisy: read these figures as rough, not solid.** " + said[0].upper() + said[1:] + ". "
            + noise_advice(result)).rstrip()


def noise_advice(result: dict) -> str:
    """What would narrow a noisy run's interval: timing longer narrows only the rounds' part of it; where the spread
    between fresh processes makes most of its width, only reruns of the setting (or a calibration) teach the lab the
    machine's real spread, and on a CPU a step with more work holds stiller."""
    n = result.get("paired_rounds")
    if n is not None and n < paired.MIN_ROUNDS:  # its own rounds are too few to say what else makes the width
        return (f"It has {n} round{'s' if n != 1 else ''}, fewer than the {paired.MIN_ROUNDS} a "
                f"{figures.LEVEL_PCT}% interval of its own needs. " + MORE_ROUNDS)
    rounds, between = result.get("speedup_rounds_pm_pct"), result.get("speedup_between_pct")
    by_rounds = rounds is not None and (between is None or rounds > 1.96 * between)
    if by_rounds or between is None:
        return ("Run it again with nothing else running on this machine, or time it for longer (Advanced › timed "
                "seconds): its rounds disagree, and more of them narrow the interval.")
    cpu = result.get("device") == "cpu"
    learned = result.get("speedup_history_runs") or 0
    rerun_it = (f"Rerun the setting (its interval already learns from the {learned} earlier runs of it here; each "
                "further rerun narrows what it learned)" if result.get("speedup_between_source") == "history" else
                f"Rerun the setting (once {rerun.MIN_HISTORY} earlier runs of it with an interval of their own are "
                "stored here since the last reset of the machine's spread, the interval learns its real spread)")
    return (f"Timing longer will not narrow it: most of its width is the spread between fresh processes (σ "
            f"{between:.1f}%), which a longer run cannot see. {rerun_it} or calibrate this machine "
            "(`python -m tcore calibrate`)"
            + ("; on the CPU a step with more work in it (a larger batch or preset) holds stiller." if cpu else "."))


def payback_words(result: dict) -> str | None:
    """Break-even in steps and in time of compiled running, with the formula. Both follow the headline: a compiled
    step is the eager step over the speedup (tcore.figures.headline_breakeven)."""
    steps, eager_sps, speedup = (figures.headline_breakeven(result), result.get("eager_steps_per_s"),
                                 result.get("speedup"))
    if steps is None or not eager_sps or not speedup:
        return None
    return (f"Compiling pays back after {steps:,.0f} steps, about {_running(steps / (eager_sps * speedup))} of "
            "compiled running (break-even = compile time / (eager step time - compiled step time), where a compiled "
            "step is the eager step over the speedup).")


def _running(s: float) -> str:
    """'40 ms', '3.2 s', '2 min 05 s': never '0 s' for a short pay-back."""
    if s < 0.001:
        return "under 1 ms"
    if s < 1:
        return f"{s * 1e3:.0f} ms"
    return f"{s:.1f} s" if s < 10 else duration_words(s)

def env_rows(env: dict, device: str | None) -> list[tuple[str, str]]:
    """The environment a run measured on, as (what, value) rows."""
    rows = [("device", device or env.get("device") or "?"), ("torch", env.get("torch")),
            ("triton", env.get("triton") or "not installed"), ("python", env.get("python"))]
    if env.get("gpu"):
        which = f"GPU {env['gpu_index']}: " if env.get("gpu_index") is not None else ""
        rows += [("GPU", f"{which}{env['gpu']}"), ("GPU UUID", env.get("gpu_uuid")), ("CUDA", env.get("cuda")),
                 ("driver", env.get("driver")),
                 ("GPU memory", f"{env['gpu_memory_gib']} GiB" if env.get("gpu_memory_gib") else None),
                 ("power limit", f"{env['power_limit_w']:.0f} W" if env.get("power_limit_w") else None),
                 ("compute capability", env.get("compute_capability"))]
    rows += [("CPU", env.get("cpu")), ("CPU cores", env.get("cpu_count")), ("torch threads", env.get("torch_threads")),
             ("host", env.get("hostname"))]
    return [(k, str(v)) for k, v in rows if v is not None]


def cache_words(result: dict, spec: dict) -> str | None:
    """What the compile caches did in a run, in a sentence; None when nothing was compiled."""
    if result.get("compile_s") is None:
        return None
    cache = spec.get("cache", "cold")
    kind = {"cold": "cold (fresh caches)",
            "warm": "warm (this machine's local cache folder, which earlier runs filled)",
            "artifacts": {"loaded": "artifacts loaded: the compile artifacts an earlier run saved (the Mega-Cache)",
                          "cold": "artifacts asked for but not loaded, so it compiled cold"}.get(
                              result.get("cache_artifacts"), "artifacts")}[cache]
    hits = (f"FX graph cache {result.get('fx_graph_cache_hits', 0)} hits / "
            f"{result.get('fx_graph_cache_misses', 0)} misses, AOT autograd cache "
            f"{result.get('aot_autograd_cache_hits', 0)} hits")
    saved = result.get("cache_artifacts_bytes")
    keep = (f" It saved {saved / 1e6:.1f} MB of compile artifacts: a run of these settings with cache=artifacts "
            "starts warm from them." if saved else "")
    return f"Compile cache: {kind}; {hits}.{keep}"


def timeout_words(error: dict, spec: dict, *, limit_s: float | None = None, longest_s: float | None = None,
                  longest_by: str = "the lab's default") -> str:
    """What to lower for a run stopped at its time limit, by the phase it was in: only knobs this run can still lower
    ("pick a smaller preset" was offered for a tiny preset, the smallest there is). `limit_s`: the time limit it ran
    under; `longest_s`: this lab's longest run now, set by `longest_by` (tcore.lab.policy.limits.Limits.set_by). Where
    that longest run is what stopped it, raising "Stop the run after" cannot help, and the words say who can."""
    import sample_models

    phase, task, generating = error.get("phase"), spec.get("task"), spec.get("task") == "generate"
    lower = []
    if phase == "compiling":
        if spec.get("mode") in ("max-autotune", "max-autotune-no-cudagraphs"):
            lower.append(f"mode=default or lite (mode={spec['mode']} benchmarks many kernels while it compiles)")
        elif spec.get("mode") != "lite":
            lower.append("mode=lite (fewer optimisation passes)")
        if spec.get("compile") == "whole" and task != "generate":
            lower.append("compile=regional, which compiles one copy of each repeated block")
        if spec.get("cache") in (None, "cold"):
            lower.append("the compile cache: run these settings once to the end with a longer limit, then "
                         "cache=warm reuses that compile")
    if generating:
        lower.append("New tokens and Prompt tokens under Generation (every generation writes every token, the first "
                     "compiled one while it compiles)")
    elif phase in ("eager", "warmup", "measuring", "schedule", "profiling") and spec.get("batch_size", 1) > 1:
        lower.append("the batch size")
    if phase in ("measuring", "schedule"):
        lower.append("the timed seconds or rounds under Advanced")
    try:
        presets = list(sample_models.get(spec.get("model", "")).presets)
    except ValueError:
        presets = []
    if spec.get("preset") in presets and presets.index(spec["preset"]) > 0:
        lower.append(f"a smaller preset ({presets[0]})")
    if limit_s is not None and longest_s is not None and limit_s >= longest_s:
        who = ("the instructor to raise Longest run on the System page" if longest_by == "the instructor" else
               f"a larger max_run_s ({longest_by})")
        capped = (f"What stopped it is this lab's longest run, {longest_s:g} s, set by {longest_by}: 'Stop the run "
                  f"after' cannot go past it, so a longer run needs {who}.")
        return ("To finish within the limit, lower " + "; or ".join(lower) + ". " if lower else "") + capped
    raise_limit = "raise 'Stop the run after' under Advanced"
    if not lower:
        return raise_limit[0].upper() + raise_limit[1:] + "."
    return "To finish within the limit, lower " + "; or ".join(lower) + f". Or {raise_limit}."
