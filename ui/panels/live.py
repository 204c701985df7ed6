"""Live views: a run waiting in the queue or in progress (place, phase, elapsed time, power trace, Cancel) and a sweep.

follow and sweep_panel are fragments: each reruns itself every second or two, alone, without
rerunning the page around it; when its run or sweep ends it reruns the whole page, which then draws
the stored result.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st

from tcore.experiment.protocol import PHASE_TITLES, phases_for
from tcore.experiment.spec import Experiment, newer_fields_words, unknown_fields
from tcore.figures import paired
from tcore.host import machine
from tcore.lab import api
from tcore.store import RunRecord, RunStore
from tcore.store.records import unreadable_words
from ui.charts import compare_charts
from ui.charts import run_charts as charts
from ui.panels import exports, results
from ui.words import compare_verdicts, run_state, run_table, sweep_matrix
from ui.words.store_words import plain

# What happens in each phase, for an audience watching the progress bar.
PHASE_EXPLAIN = {
    None: "A fresh Python process takes the run, with fresh compile caches, so that its compile is a cold one. "
          "Usually a spare started ahead has already imported torch; otherwise that takes 10 s or so.",
    "building": "Building the model and a batch of inputs on the device.",
    "eager": "Plain PyTorch (eager) steps, untimed: the first one sets the baseline that compile time is "
             "measured against.",
    "compiling": "The first compiled call: Dynamo traces the Python, AOT autograd adds the backward, Inductor "
                 "generates kernels (on a CPU it runs a C++ compiler: tens of seconds, with no progress to show).",
    "warmup": "A few compiled steps, untimed, so caches and the memory allocator settle.",
    "schedule": "One pass over batches of different sizes: each new shape may recompile, and this counts how often.",
    "measuring": "On a GPU, untimed blocks of each variant until its speed settles (2 s at most); then rounds of an "
                 "eager and a compiled block back to back, added until the speedup's interval is narrow "
                 "enough (after {rounds} rounds at the fewest) or the timed seconds are spent, which may stop it "
                 "with fewer rounds and a wider interval.",
    "new_prompt": "One more compiled generation from a prompt a token shorter: does a new prompt length recompile, "
                  "and how long does that take.",
    "profiling": "A few steps of each variant under the profiler: the kernels one step launches (fusion shows up "
                 "as fewer) and where each millisecond of a step goes.",
}


# Why a run may wait for the GPU in the middle of its phases, on hover.
SHARED_EXPLAIN = ("Several runs share this GPU: while one compiles (CPU work, the GPU idle) another measures. Each "
                  "holds the GPU alone, in turn, for its eager warm-up, its compiled code's first runs and timed "
                  "rounds, and its profiling pass, so no run's figures include another's GPU work; the time it "
                  "waits for the GPU is counted apart, never as its compile time.")


# The compile's phase under a backend other than Inductor, which generates no kernels.
COMPILING_BY_BACKEND = {
    "aot_eager": "The first compiled call: Dynamo traces the Python and AOT autograd adds the backward; the graphs "
                 "then run with eager's own kernels (this backend generates none), so expect no speedup.",
    "eager": "The first compiled call: Dynamo traces the Python into graphs, which run as they are, eagerly: this "
             "isolates graph breaks from code generation.",
    "cudagraphs": "The first compiled call: Dynamo traces the Python into graphs, which are recorded as CUDA graphs "
                  "and replayed, with eager's kernels.",
}


def phase_explain(run: api.Followed, phase: str | None) -> str:
    """What happens in `phase` of this run, for the progress bar's caption."""
    if phase == "compiling" and run.exp.backend in COMPILING_BY_BACKEND:
        return COMPILING_BY_BACKEND[run.exp.backend]
    if phase == "measuring" and run.exp.timed_steps is not None:
        return (f"{run.exp.rounds} rounds of an eager and a compiled block back to back, "
                f"{run.exp.timed_steps} timed steps per variant in all, as set.")
    if phase == "measuring" and run.exp.task == "generate":  # its rounds all run (tcore.worker.rounds.DecodeRounds)
        return (f"Rounds of eager and compiled generations back to back (at least {run.exp.rounds}), added until the "
                "speedup's interval is narrow enough or the timed seconds are spent.")
    return PHASE_EXPLAIN.get(phase, PHASE_EXPLAIN[None]).format(rounds=max(run.exp.rounds, paired.MIN_ROUNDS))


def phases_of(run: api.Followed) -> list[str]:
    return phases_for(run.exp)


def progress_fraction(phases: list[str], phase: str | None, progress: dict) -> float:
    if phase not in phases:
        return 0.0
    done, total = progress.get(phase, (0, 1))
    return min((phases.index(phase) + done / max(total, 1)) / len(phases), 1.0)


FOLLOW_S = 1.0  # how often a followed run's part of the page redraws
# How long a redraw may wait, blocked, for the headline (during the timed rounds) or the run's end (after it): it draws
# the moment it comes instead of at the next redraw, a second later at worst. Half the interval, so redraws never pile
# up, and the progress shown is half a second old at most.
NEWS_WAIT_S = 0.5


def follow(run_id: str, store: RunStore, draw: Callable[[], None]) -> None:
    """Draw `draw`, the page's part around a run it follows live (the queue, the runs table, the live panel), as
    one fragment redrawn every FOLLOW_S; the first redraw after run_state.state() says the run is no longer
    followed reruns the whole page, which draws its result.

    One fragment owns that rerun and draws the three together: were the queue or the runs table to redraw on
    their own clocks, one of them would say "finished" or "nothing is running" beside a panel still saying
    "Running". `draw` must be drawn inside an st.container() where the page draws it without following, so that
    both put the same elements at the same places and a page's rerun replaces them one for one.
    """
    st.fragment(_follow, run_every=FOLLOW_S)(run_id, store, draw, redraws=[])


def _follow(run_id: str, store: RunStore, draw: Callable[[], None], redraws: list) -> None:
    # `redraws` is the same list on each of the fragment's own redraws, a new one on each page run: a page run never
    # waits, a timed redraw may (up to NEWS_WAIT_S); a click inside the fragment (Cancel) reruns the fragment alone
    # and so may wait that long before it acts
    if redraws:
        api.wait_for_news(run_id, NEWS_WAIT_S)
    redraws.append(None)
    if not run_state.state(run_id, store).followed:
        st.rerun()
    draw()


def run_panel(run_id: str, store: RunStore, *, key: str = "run") -> None:
    """The live panel of a run this process follows (drawn within follow, after the queue and the runs table).

    Whether it is still followed is asked again here, last, as run_state.state() answers it (the record first): the
    record says a run has ended a moment before its LiveRun does, so a panel drawn from the LiveRun alone said
    "Running" under a table and a queue that had just read "finished" from the record, and that page stayed up for
    the seconds the whole page's redraw took. Once the record says so, the panel is emptied and the page goes round
    to draw the result: "finished" wins everywhere."""
    if not run_state.state(run_id, store).followed or (run := api.follow(run_id)) is None:
        st.empty()  # in the panel's place, at once: not its last "Running" while the page redraws
        st.rerun()
    draw_progress(run, key=key)


def draw_progress(run: api.Followed, *, key: str) -> None:
    snap = run.snapshot
    run_id, phases, phase = run.run_id, phases_of(run), snap["phase"]
    started = snap["phase_started_at"].get(phase)
    in_phase_s = max(time.time() - started, 0.0) if started else snap["elapsed_s"]

    queued = snap["status"] == "queued"
    st.subheader(f"{'Queued' if queued else 'Running'}: {plain(run.exp.label)}")
    steps = []
    for p in phases:  # Material icons ship with Streamlit; emoji need a font the browser may lack
        if phase in phases and phases.index(p) < phases.index(phase):
            steps.append(f":green[:material/check_circle: {PHASE_TITLES[p]}]")
        elif p == phase:
            steps.append(f":orange[:material/play_circle: **{PHASE_TITLES[p]}**]")
        else:
            steps.append(f":gray[:material/radio_button_unchecked: {PHASE_TITLES[p]}]")
    st.markdown(" &nbsp;:gray[:material/arrow_forward:]&nbsp; ".join(steps))
    if queued:  # waiting for the device: other runs are ahead of it
        words = run_state.queue_words(snap["queue_position"], snap["wait"], snap["waited_s"])
        st.markdown(f":blue-background[**{words}**]",
                    help=api.wait_words(snap["wait"])[1])
        st.caption("Runs leave the queue in the order they were queued; on a GPU a few share it at once, each "
                   "holding it alone to measure, and on a CPU one runs at a time.")
    else:
        title = PHASE_TITLES.get(phase, "Starting the worker process")
        done, total = snap["progress"].get(phase, (None, None))
        counted = f" ({done}/{total})" if done is not None else ""
        st.progress(progress_fraction(phases, phase, snap["progress"]),
                    text=f"**{title}**{counted}: {in_phase_s:.0f} s in this phase, {snap['elapsed_s']:.0f} s in all")
        if device := api.device_words(run_id):  # a GPU shared with the room: where this run is, and who has the GPU
            st.markdown(f":violet-background[The run {device}.]", help=SHARED_EXPLAIN)
        st.caption(phase_explain(run, phase))
        if phase == "compiling" and run.exp.has_compiled_variant:
            st.caption(compile_left_words(_earlier_compile(run), in_phase_s))
    if snap["headline"] is not None:
        headline(run, snap["headline"])
    else:
        so_far(snap["figures_so_far"])
    for note in snap["notes"]:
        st.warning(note)
    if snap["power_samples"]:
        exports.show(st, charts.power_trace_chart(snap["power_samples"], title="Power so far, coloured by phase"),
                     key=f"{key}_live_power_trace")
    elif not queued:
        meter = machine.meter(run.device)
        st.info(f"No live power trace: {meter.reason}." if not meter.available else
                "Waiting for the first power samples...")
    if st.button("Cancel run", key=f"{key}_cancel_{run_id}", icon=":material/stop_circle:",
                 help="A queued run never starts; a running one has its worker stopped."):
        if not api.stop(run_id):
            st.toast("It had ended already, as you pressed Cancel: nothing was stopped, and its result is kept.")
        else:
            st.toast("Cancelled: it leaves the queue." if queued else
                     "Cancelling: the worker and its compile processes are being stopped.")


_EARLIER_COMPILES: dict[str, tuple[float, bool] | None] = {}  # run id -> rerun_outlook.earlier_compile_s, asked once


def _earlier_compile(run: api.Followed) -> tuple[float, bool] | None:
    if run.run_id not in _EARLIER_COMPILES:
        if len(_EARLIER_COMPILES) > 1000:
            _EARLIER_COMPILES.clear()
        _EARLIER_COMPILES[run.run_id] = api.earlier_compile_s(run.run_id)
    return _EARLIER_COMPILES[run.run_id]


def compile_left_words(earlier: tuple[float, bool] | None, in_phase_s: float) -> str:
    """What is left of the compile, under its step: from an earlier run of the setting here (`earlier`: its
    compile_s and whether it ran at this batch, rerun_outlook.earlier_compile_s), `in_phase_s` into this one."""
    if earlier is None:
        return ("No estimate yet: the first compile of this setting here. The next run of it will say how long "
                "its compile should take.")
    took, same_batch = earlier
    which = "an earlier run of this setting" + ("" if same_batch else " at another batch size")
    if (left := took - in_phase_s) >= 1:
        return f"About {left:.0f} s left ({which} compiled in {took:.0f} s)."
    return (f"Longer than {which}, which compiled in {took:.0f} s: other runs sharing the machine's cores, or a "
            "busier machine, slow a compile down.")


# Under the result's headline while the profiler still runs: what comes next, and how long it takes.
PROFILING_WORDS = ("**Profiling: where the time goes, a second or two.** The speedup above is final; its interval "
                   "may widen if the profile finds a variant host-bound. The breakdown, the charts and the rest "
                   "follow when the record is saved.")


def headline(run: api.Followed, result: dict) -> None:
    """The result's headline (the Speedup with its interval, compile time, break-even), drawn as the finished run's
    page draws it, from the timed figures the worker sent before its profiling pass."""
    results.show_headline(RunRecord(id=run.run_id, status="running", created_at=run.queued_at, label=run.exp.label,
                                    spec=run.exp.to_dict(), device=run.device, result=result))
    st.info(PROFILING_WORDS, icon=":material/hourglass_top:")


def so_far(figures: dict[str, dict]) -> None:
    """The figures known before the result: the eager warm-up step, the compile's progress then its time (final),
    and the speedup after each round."""
    if not figures:
        return
    cols = st.columns(3)
    if (eager := figures.get("eager_step_s")) is not None:
        rate = eager.get("samples_per_s")
        cols[0].metric("Eager step (warm-up)", f"{eager['value'] * 1e3:,.1f} ms",
                       delta=compare_verdicts.rate_words(rate) if rate else None, delta_color="off", delta_arrow="off",
                       help="The median eager warm-up step, known before compiling starts. The result's eager "
                            "throughput comes from the timed rounds, paired with the compiled ones.")
    if (compiled := figures.get("compile_s")) is not None:
        cols[1].metric("Compile time", f"{compiled['value']:.1f} s", help="Final: the first compiled call less one "
                       "eager step. The other figures follow once the timed rounds and the profile are done.")
    elif (going := figures.get("compile_progress")) is not None:
        cols[1].metric("Compiling", f"{going['elapsed_s']:.0f} s",
                       delta=f"{going['graphs']} graph(s), {going['kernels']} kernel(s) so far", delta_color="off",
                       delta_arrow="off", help="The first compiled call so far: graphs Dynamo has captured and "
                       "kernels Inductor has generated (on a CPU the C++ compile that follows has no count).")
    if (speedup := figures.get("speedup_so_far")) is not None:
        interval = (f"interval {speedup['low']:.2f}–{speedup['high']:.2f} x" if speedup.get("low") is not None
                    else None)
        cols[2].metric("Speedup so far", f"{speedup['value']:.2f} x", delta=interval, delta_color="off",
                       delta_arrow="off",
                       help=f"Provisional, after round {speedup['rounds']} (at most {speedup['of']}): the median of "
                            "the rounds' compiled/eager ratios so far, with its interval. Timing stops once the "
                            "interval is narrow enough; the result's figure replaces this one.")


def sweep_settings(sweep: api.SweepRecord) -> str:
    """What every run of the sweep shares, in words: the page's knobs may have moved on since it started."""
    if not sweep.runs:
        return "no runs"
    spec = sweep.runs[0].spec
    settle = max(spec.get("rounds") or 0, paired.MIN_ROUNDS)
    # rounds 2 asked, it said "after 6" with no word why
    fewer = (f"; {spec.get('rounds')} asked, and {paired.MIN_ROUNDS} are the fewest for a 95% interval"
             if (spec.get("rounds") or 0) < paired.MIN_ROUNDS else "")
    timed = (f"{spec['timed_steps']} steps per variant in {spec.get('rounds')} rounds" if spec.get("timed_steps") else
             f"at least {spec.get('rounds')} rounds, then until the interval is narrow enough or "
             f"{spec.get('timed_s')} s per variant are spent" if spec.get("task") == "generate" else
             f"at most {spec.get('timed_s')} s per variant (rounds added until the interval is narrow enough, "
             f"after {settle} at the fewest{fewer}, or the seconds are spent)")
    backend = {r.spec.get("backend") for r in sweep.runs if r.spec.get("compile") != "off"}
    return (f"{spec.get('precision')} {spec.get('task')}, batch {spec.get('batch_size')}, backend "
            f"{', '.join(sorted(backend)) or 'none'}, {timed}")


def sweep_cells(sweep: api.SweepRecord) -> list:
    """Per run, in the sweep's order: its RunRecord once it has ended, else 'waiting' (behind the sweep's
    previous run), 'queued' (taking its turn in the room's queue) or 'running'."""
    return [r if r.status in ("finished", "failed") else "waiting" if r.held else r.status for r in sweep.runs]


@st.fragment(run_every=2.0)
def sweep_panel(sweep_id: str, store: RunStore) -> None:
    """The sweep's matrix and its current run, redrawn every 2 s from the store; the whole page reruns when it ends."""
    sweep = api.sweep(sweep_id, store)
    if sweep.done:
        st.rerun()
    draw_sweep(sweep)
    running = next((r for r in sweep.runs if r.status == "running"), None)
    if running is not None and (run := api.follow(running.id)) is not None and not run.done:
        with st.container(border=True):
            draw_progress(run, key="sweep")
    if st.button("Cancel the sweep", key=f"sweep_cancel_{sweep_id}", icon=":material/stop_circle:"):
        api.cancel_sweep(sweep_id, store)
        st.toast(sweep_cancel_words(running is not None))


def sweep_cancel_words(running: bool) -> str:
    """What 'Cancel the sweep' did: it said 'Cancelling the current run' with none running yet."""
    if running:
        return "Cancelling the sweep: its current run is being stopped, and no further runs will start."
    return "Sweep cancelled: none of its runs had started, and none will."


def draw_sweep(sweep: api.SweepRecord) -> None:
    # a run whose row cannot be read, or whose settings a newer version wrote, is no cell of the matrix: said below
    left_out = [r for r in sweep.runs if r.unreadable or unknown_fields(r.spec)]
    gone = {r.id for r in left_out}
    readable = [(r, cell) for r, cell in zip(sweep.runs, sweep_cells(sweep)) if r.id not in gone]
    matrix = sweep_matrix.sweep_matrix([Experiment.from_dict(r.spec) for r, _ in readable], [c for _, c in readable])
    state = "cancelled" if sweep.cancelled else "finished" if sweep.done else "running"
    cancelled = sum(1 for r in sweep.runs if r.error_kind == "cancelled")
    failed = sum(1 for r in sweep.runs if r.status == "failed") - cancelled
    ended = "".join(f", {n} {what}" for n, what in ((failed, "failed"), (cancelled, "cancelled")) if n)
    st.subheader(f"Sweep {state}: {sweep.finished_count} of {sweep.size} runs finished{ended}")
    started = time.strftime("%H:%M", time.localtime(sweep.created_at))
    st.caption(f"{plain(sweep.label)} · {sweep_settings(sweep)} · started {started}")
    st.progress(sweep.ended_count / max(sweep.size, 1))
    if best := sweep_matrix.best_setting(matrix, final=sweep.done):
        (st.success if sweep.done else st.info)(("" if sweep.done else "So far: ") + best)
    exports.show(st, compare_charts.sweep_heatmap(matrix), key=f"sweep_heatmap_{sweep.id}")
    shown = matrix.drop(columns=["row", "col", "interval_name", "speedup_low", "speedup_high"], errors="ignore")
    if not matrix.empty:  # one cell in words: an empty number cell read "None" where a run had too few rounds
        shown.insert(shown.columns.get_loc("speedup") + 1, "interval", sweep_matrix.interval_cells(matrix))
    figures = [c for c in sweep_matrix.SWEEP_FIGURES if c not in ("speedup_low", "speedup_high")]
    st.dataframe(shown, hide_index=True, width="stretch", key=f"sweep_matrix_{sweep.id}",
                 column_config={"setting": "Setting", "status": "Status", "error": "Why it failed", "run_id": "Run id",
                                "interval": "Speedup interval",
                                **{c: st.column_config.NumberColumn(title, format=f) for c, (title, f)
                                   in run_table.number_formats(figures).items()}})
    if left_out:
        st.caption("Not in the matrix: " + "; ".join(
            plain(unreadable_words(r) if r.unreadable else f"run {r.id}: {newer_fields_words(unknown_fields(r.spec))}")
            for r in left_out) + ".")
    if sweep.skipped:
        with st.expander(f"{len(sweep.skipped)} combination{'s' if len(sweep.skipped) != 1 else ''} skipped, and why"):
            st.markdown("\n".join(f"- {s}" for s in sweep.skipped))
