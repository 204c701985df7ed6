"""Draw one stored run: headline figures, charts against eager, what the compiler did, or why it failed.

Used by the Run page (the run just finished) and the Compare page (any run, in detail).
"""
from __future__ import annotations

import datetime

import pandas as pd
import streamlit as st

from tcore import figures
from tcore.analysis import report
from tcore.analysis.advice import launch_bound
from tcore.experiment.protocol import ERROR_KINDS
from tcore.experiment.spec import CUDAGRAPH_MODES
from tcore.figures import RUN_FIGURES
from tcore.lab import api
from tcore.store import RunRecord, RunStore
from tcore.store.records import unreadable_words
from ui.charts import diagnose_charts
from ui.charts import run_charts as charts
from ui.panels import earlier_runs, ecosystem, exports, generate, kernel_why, timeline_bar, why_faster
from ui.words import decode_words, diagnose_queries, graph_words, run_words
from ui.words.store_words import plain

# What to try next, per failure kind (tcore.experiment.protocol.ERROR_KINDS).
FAILURE_HINTS = {
    "invalid_spec": "Change the setting the message names and run again.",
    "compile_error": "Try backend=aot_eager: if that works, tracing is fine and Inductor's code generation failed.",
    "compile_error:tracing": "Dynamo could not trace this code into one graph: the message names the line. Under "
                             "fullgraph=True every graph break is an error (that is what fullgraph asks for): "
                             "remove the break at that line, or turn fullgraph off to let Dynamo split the graph "
                             "there. The backend never ran, so changing it will not help.",
    "compile_error:backend": "Tracing worked; the backend failed while generating code. Try backend=aot_eager: if "
                             "that works, Inductor's code generation is what failed, and its log below says where.",
    "oom": "Try a smaller preset or batch size, or compile=regional.",
    "timeout": "",  # by the phase it stopped in and what the run can still lower: run_words.timeout_words
    "cancelled": "",
    "crashed": "The worker died without reporting; its log below says why.",
}



def header_times(rec: RunRecord) -> str:
    """'queued 2025-01-01 10:00:00', then 'started 10:00:05' once it started: a run cancelled in the queue never
    says 'started'."""
    def clock(t: float, fmt: str) -> str:
        return datetime.datetime.fromtimestamp(t).strftime(fmt)

    queued = f"queued {clock(rec.created_at, '%Y-%m-%d %H:%M:%S')}"
    return f"{queued} · started {clock(rec.started_at, '%H:%M:%S')}" if rec.started_at else queued


def show_run(rec: RunRecord, store: RunStore, *, key: str) -> None:
    st.subheader(plain(rec.label))
    if rec.unreadable:  # its plain columns and why: nothing else of it can be drawn
        st.caption(f"Run {rec.id} · {header_times(rec)} · {rec.status}")
        words = unreadable_words(rec)
        st.error(plain(words[:1].upper() + words[1:]) + ".")
        return
    st.caption(f"Run {rec.id} · {header_times(rec)} · device {rec.device or rec.spec.get('device')}")
    if rec.status == "failed":
        show_failure(rec)
    elif rec.status == "queued":
        st.info("This run is waiting in the queue for its turn on the device.")
    elif rec.status == "running":
        st.warning("This run has no result yet: it is still running, or the app stopped while it ran.")
    else:
        show_result(rec, store.power_samples(rec.id), key=key, store=store)
    with st.container(border=True):
        ecosystem.take_away(rec, store, key=key)


def show_failure(rec: RunRecord) -> None:
    kind = rec.error.get("kind", "crashed")
    # the message carries anyone's words (a model file's exception, its preset): as typed, never as Markdown
    st.error(f"**{ERROR_KINDS.get(kind, kind)}**: {plain(rec.error.get('message') or 'no message')}")
    # a failure the worker explained (its phase, op and inputs are in the message) keeps its log folded away
    explained = kind == "crashed" and rec.error.get("traceback") is not None and "phase" in rec.error
    hint = FAILURE_HINTS.get(f"{kind}:{rec.error.get('compile_phase')}") or FAILURE_HINTS.get(kind)
    if kind == "timeout":
        try:  # this lab's longest run now: where it is what stopped the run, a larger 'Stop the run after' cannot help
            lab = api.lab_limits(RunStore())
        except api.LimitsError:
            lab = None
        longest = {"longest_s": lab.max_run_s, "longest_by": lab.set_by("max_run_s")} if lab else {}
        hint = run_words.timeout_words(rec.error, rec.spec, limit_s=rec.timeout_s, **longest)
    if explained:
        hint = "The run raised an error, said above where; the raw traceback is under Traceback below."
    if hint:
        st.caption(hint)
    with st.expander("Worker log (last lines)",
                     expanded=kind in ("crashed", "compile_error", "timeout") and not explained):
        st.code("\n".join(rec.error.get("log_tail") or ["(the log is empty)"]), language=None)
    if rec.error.get("traceback"):
        with st.expander("Traceback"):
            st.code(rec.error["traceback"], language=None)


def show_result(rec: RunRecord, power_samples: list, *, key: str, store: RunStore | None = None) -> None:
    """A finished run, top to bottom: the headline, what the compiler did, advice, charts, then every figure."""
    r = rec.result
    compiled = "compiled" in r.get("variants", ())
    show_headline(rec)
    kernel_why.show(rec, key=key)  # beside the headline: which kernels cost compiled more, and why
    timeline_bar.show(r, key=key, run_id=rec.id)  # where the wall time went: the compile, the measurement, the lab
    if store is not None:
        earlier_runs.show(rec, store, key=key)
    st.caption(run_words.baseline_words(rec.spec, rec.device, r.get("speedup")))
    generating = rec.spec.get("task") == "generate"
    ok, words = (generate.tokens_words(r) if generating else
                 run_words.correctness_words(r, rec.spec.get("precision", "fp32")))
    (st.success if ok else st.error if ok is False else st.info)(words)
    if compiled:
        show_compiler(r, rec.spec)
    if r.get("notes"):
        st.info("\n".join(f"- {n}" for n in r["notes"]))
    if store is not None:
        why_faster.side_by_side(rec, store, key=key)
    with st.container(border=True):
        why_faster.where_time_goes(rec, store, key=key)
    with st.container(border=True):
        why_faster.next_steps(rec, store, key=key)
    if store is not None and (words := run_words.cache_words(r, rec.spec)):
        show_cache(rec, store, words, key=key)
    show_charts(rec, power_samples, key=key)
    # Lazy, as the chart tabs: the script draws an expander's table only while it is open.
    with st.expander("All figures, eager vs compiled", key=f"{key}_figures_open", on_change="rerun") as box:
        if box.open:
            table = pd.DataFrame(report.variant_rows(r, rec.spec.get("task")), columns=["figure", "eager", "compiled"])
            st.dataframe(table,
                         hide_index=True, width="stretch", key=f"{key}_figures")
    with st.expander("Environment", key=f"{key}_env_open", on_change="rerun") as box:
        if box.open:
            st.dataframe(pd.DataFrame(run_words.env_rows(rec.env, rec.device), columns=["what", "value"]),
                         hide_index=True, width="stretch", key=f"{key}_env")


def show_headline(rec: RunRecord) -> None:
    """The metric tiles, why a figure is n/a, how the speedup was made, and whether to trust it."""
    r = run_words.as_shown(rec.result)  # a single round's without the interval it has not got
    shown, noise = run_words.headline(r), run_words.noise_words(r)
    generating = rec.spec.get("task") == "generate"
    for tiles in (generate.headline_tiles if generating else run_words.headline_tiles)(r):
        for col, tile in zip(st.columns(3), tiles):
            col.metric(**tile)
    if gap := figures.unpaired_gap(r):  # the card shows one speedup: why the throughputs give another
        st.info(gap, icon=":material/info:")
    for k in ("speedup", "compile_s", "breakeven_steps"):
        if shown[k][1]:
            st.caption(f"{RUN_FIGURES[k].title}: n/a, {shown[k][1]}.")
    if how := run_words.how_words(r):
        st.caption(how + (f" {r['timed_stop_words']}" if r.get("timed_stop_words") else ""))
    if noise:
        st.warning(noise, icon=":material/warning:")
    if generating:
        for line in generate.details_words(r) + decode_words.words(r, rec.spec):
            st.caption(line)
        if table := decode_words.rows(r):
            with st.expander("Where a decode step's time goes, against the bytes it reads"):
                st.dataframe(pd.DataFrame(table), hide_index=True)
    for variant, words in figures.host_bound(r, rec.device, rec.spec.get("mode")):
        if variant == "compiled" and rec.spec.get("mode") not in CUDAGRAPH_MODES and launch_bound(r, rec.device):
            words += " *What to try next* below queues mode=reduce-overhead in one click."
        st.info(words, icon=":material/speed:")
    if why := figures.disagreement(r):
        st.info(why, icon=":material/info:")
    if payback := run_words.payback_words(r):
        st.caption(payback)


def show_compiler(r: dict, spec: dict) -> None:
    """What was compiled and how, graphs, breaks and recompilations in words, with torch's full messages one click
    away."""
    with st.container(border=True):
        st.markdown("**What the compiler did**")
        if words := scope_words(r, spec):
            st.markdown(words)
        # Sentences as paragraphs; "- " lines stay together as one list.
        words = graph_words.graph_words(r, spec.get("backend"))
        st.markdown("".join(("\n" if w.startswith("- ") else "\n\n") + w for w in words))
        if r.get("graph_breaks") or r.get("recompiles"):
            with st.expander("Full messages from torch"):
                for b in graph_words.group_breaks(r.get("graph_breaks", [])):  # one per place, as counted above
                    where = f" at {b['file']}:{b['line']}" if b.get("file") else ""
                    theirs = graph_words.torch_break_words(b)
                    hint = f"\n{theirs}" if theirs else f"\n{b['hint']}" if b.get("hint") else ""
                    st.code(f"graph break{where} (met {b['count']}x):\n{b['reason']}{hint}", language=None)
                    if registry := graph_words.registry_words(b):
                        st.markdown(registry)
                for c in r.get("recompiles", []):
                    frame = c["frame"] or "nothing: the recompile limit was hit"
                    st.code(f"recompile {c['compile_id']} of {frame}:\n{c['reason']}", language=None)


def chart_tabs(rec: RunRecord, power_samples: list) -> list[str]:
    """The result's chart tabs, in order; only those with something to draw. Speed comes first and opens first."""
    compiled = "compiled" in rec.result.get("variants", ())
    return ["Speed", "Memory and energy"] + ["Compile phases"] * compiled + ["Power over the run"] * bool(power_samples)


def show_charts(rec: RunRecord, power_samples: list, *, key: str) -> None:
    """Throughput and latency, memory and energy, the compile phases and the power over the run, one tab each.

    The tabs are lazy (on_change="rerun"): the script draws only the open tab's charts, since each Plotly chart
    costs the browser about 0.2 s to draw; the tab chosen is session_state[f"{key}_charts"], a label.
    """
    r = rec.result
    labels = chart_tabs(rec, power_samples)
    tabs = dict(zip(labels, st.tabs(labels, key=f"{key}_charts", on_change="rerun")))
    if tabs["Speed"].open:
        left, right = tabs["Speed"].columns(2)
        rate = "tokens_per_s" if rec.spec.get("task") == "generate" else "samples_per_s"
        exports.show(left, charts.throughput_chart(r, rate), key=f"{key}_throughput", run_id=rec.id)
        exports.show(right, charts.latency_chart(r), key=f"{key}_latency", run_id=rec.id)
    if tabs["Memory and energy"].open:
        with tabs["Memory and energy"]:
            left, right = st.columns(2)
            exports.show(left, charts.variant_bar(r, "peak_mem_gib"), key=f"{key}_memory", run_id=rec.id)
            exports.show(right, charts.energy_chart(r), key=f"{key}_energy", run_id=rec.id)
            memory = r.get("peak_mem_source", "unknown source")
            if "RSS" in memory:  # the CPU figure counts the whole process, torch's own libraries included
                memory += ", the whole worker process with torch itself, so small models show about the same for both"
            power = r.get("power_source") if r.get("power_source") not in (None, "none") else "no meter"
            st.caption(f"Peak memory: {memory}. Power: {power}.")
    if "Compile phases" in tabs and tabs["Compile phases"].open:
        exports.show(tabs["Compile phases"], charts.compile_phases_chart(r), key=f"{key}_phases", run_id=rec.id)
    if "Power over the run" in tabs and tabs["Power over the run"].open:
        exports.show(tabs["Power over the run"], charts.power_trace_chart(power_samples), key=f"{key}_power_trace",
                     run_id=rec.id)
    if not power_samples:  # no tab for it: say why under the tabs, whichever is open
        reason = r.get("unavailable", {}).get("eager_power_w", "no power samples were recorded")
        st.caption(f"No power trace for this run: {reason}.")


def show_cache(rec: RunRecord, store: RunStore, words: str, *, key: str) -> None:
    """What the compile caches did; when the same settings also ran with another cache mode, both compile times."""
    st.caption(words)
    records = store.list(limit=200)
    same = diagnose_queries.same_settings(rec, records)
    kinds = {diagnose_charts.cache_kind(r.spec.get("cache"), r.result.get("cache_artifacts")) for r in same}
    if len(kinds) > 1:
        exports.show(st, diagnose_charts.cold_warm_chart(diagnose_queries.cache_frame(same), height=260),
                     key=f"{key}_cold_warm")


def scope_words(result: dict, spec: dict) -> str:
    """What the run's compile scope (spec "compile") compiled, and with which call; '' where nothing was compiled.

    The scope is read from the spec, so a run recorded before the worker named its call says the right one too.
    """
    scope = spec.get("compile", "whole")
    if scope == "off":
        return ""
    if spec.get("task") == "generate":
        return ("**Two functions compiled**, the prefill and the decode step, each with its own `torch.compile` "
                "(as gpt-fast does): the model's blocks are traced inside each, whole.")
    if scope == "whole":
        return ("**Whole-model compilation**: one `torch.compile(model)` traced the model's forward into as few graphs "
                "as it could, one per stretch between graph breaks; every block is inlined, so each copy of a repeated "
                "block is traced again and the compile grows with the model's depth.")
    blocks = result.get("regional_blocks") or {}
    listed = ", ".join(f"`{name}` × {copies}" for name, copies in sorted(blocks.items(), key=lambda kv: -kv[1]))
    count = f"{sum(blocks.values())} blocks of {len(blocks)} class(es)" if blocks else "the repeated blocks"
    if scope == "hierarchical":
        return ("**Hierarchical compilation**: one `torch.compile` of the whole model, with each repeated block class "
                "marked `torch.compiler.nested_compile_region`" + (f" ({listed})" if listed else "") + ": Dynamo "
                "traces one copy of each class as a region of its own and reuses it for the other copies inside the "
                "whole-model graph, so the code between the blocks is compiled too.")
    how = ("the model's own `compile_repeated_blocks()`" if result.get("regional_call") == "compile_repeated_blocks"
           else "`block.compile()` on each")
    return (f"**Regional compilation** compiled {count} with {how}" + (f": {listed}" if listed else "") + ". Copies of "
            "one class share its compiled graph (recompiling only where a guard differs); the code between the blocks "
            "runs eagerly.")
