"""Why it is faster, and what to try next: a run's time breakdown, its share of peak, the profiler traces to
download, and up to three suggestions, each with a button that queues its counterpart run.

A counterpart started here remembers the run that suggested it (in the session), so when it finishes
the two are drawn side by side.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from tcore.analysis import advice
from tcore.experiment.spec import newer_fields_words, unknown_fields
from tcore.figures import RUN_FIGURES, VARIANT_FIGURES
from tcore.figures.breakdown import CATEGORIES, as_timed
from tcore.store import RunRecord, RunStore
from ui.charts import run_charts as charts
from ui.charts import style
from ui.panels import exports, queue
from ui.words import run_words
from ui.words.store_words import plain

PAIRS = "suggested_pairs"  # session_state: counterpart run id -> the id of the run that suggested it
SIDE_BY_SIDE = ("samples_per_s", "latency_ms_p50", "peak_mem_gib", "energy_j_per_step", "kernels_per_step")


def where_time_goes(rec: RunRecord, store: RunStore | None, *, key: str) -> None:
    r = rec.result
    st.markdown("**Where the time goes**")
    exports.show(st, charts.variant_breakdown_chart(r), key=f"{key}_breakdown", run_id=rec.id)
    for words in run_words.breakdown_words(r):
        st.caption(words)
    if peak := run_words.peak_words(r, rec.env.get("gpu")):
        st.caption(peak)
    found = r.get("breakdown") or {}
    if found:
        with st.expander("Top kernels per step, by device time"):
            for variant, b in found.items():
                st.markdown(f"*{variant.capitalize()}* ({b['source']})")
                st.dataframe(pd.DataFrame([{"kernel": t["name"], "launched by": t["op"] or "",
                                            "category": CATEGORIES[t["category"]][0], "ms per step": t["ms"],
                                            "share of busy time (%)": t["share_pct"]} for t in b["top"]]),
                             hide_index=True, width="stretch", key=f"{key}_top_{variant}")
    if store is not None and found:
        cols = st.columns(len(found))
        for col, variant in zip(cols, found):
            data = store.artifacts.profiler_trace(rec.id, variant)
            # Short: the button is half of the Run page's result column; the help says what the file is.
            col.download_button(f"{variant.capitalize()} trace", data or b"",
                                file_name=f"{rec.id}-{variant}.json.gz", mime="application/gzip",
                                disabled=data is None, key=f"{key}_profiler_trace_{variant}",
                                icon=":material/download:",
                                help="The profiled steps as a Chrome trace (.json.gz): open it at ui.perfetto.dev or "
                                     "chrome://tracing (both read it locally; nothing is uploaded).")


def next_steps(rec: RunRecord, store: RunStore | None, *, key: str) -> None:
    """Up to three suggestions from the run's own evidence, each with a button that queues its counterpart."""
    st.markdown("**What to try next**")
    if unknown := unknown_fields(rec.spec):  # the advice reads the run as an experiment: a newer version's is not one
        st.caption(f"n/a: {plain(newer_fields_words(unknown))}.")
        return
    found = advice.suggest(rec.spec, rec.result, rec.device)
    if not found:
        st.caption("Nothing in this run's figures points to an obvious next step.")
        return
    for i, s in enumerate(found):
        text, button = st.columns([4, 1.4], vertical_alignment="center")
        text.markdown(f"**{s.title}.** {s.evidence}")
        if not s.changes or store is None:
            continue
        # Queued in the click's callback, which runs before the page is drawn again: the Run page's "Show below"
        # selector (key run_shown) may already be drawn above this button, and Streamlit refuses, in a live
        # session only, a change to a drawn widget's state.
        if button.button("Queue it", key=f"{key}_suggest_{i}", icon=":material/add_to_queue:",
                         help="Queue the same run with: " + ", ".join(f"{k}={v}" for k, v in s.changes.items()),
                         on_click=queue_counterpart, args=(rec, s, store)):
            if st.session_state.pop(QUEUED, None):
                st.switch_page("app_pages/run.py")  # where the counterpart is followed, then drawn beside this run
            elif refusal := st.session_state.pop("run_refusal", None):  # not shown yet: this is not the Run page
                text.error(refusal)


QUEUED = "suggestion_queued"  # session_state: the run a "Queue it" click queued, for the page drawn after it


def queue_counterpart(rec: RunRecord, suggestion: advice.Suggestion, store: RunStore) -> None:
    """The "Queue it" button's callback: queue the counterpart and show it on the Run page, paired with `rec`.
    A refusal stays in the session for the page to show (ui.panels.queue.show_refusal, or beside the suggestion)."""
    started = queue.submit([advice.counterpart(rec.spec, suggestion)], store, key="run")
    st.session_state[QUEUED] = started[0] if started else None
    if started:
        st.session_state.setdefault(PAIRS, {})[started[0]] = rec.id
        st.session_state.run_shown = started[0]


def side_by_side(rec: RunRecord, store: RunStore, *, key: str) -> None:
    """A run queued from a suggestion, next to the run that suggested it."""
    origin_id = st.session_state.get(PAIRS, {}).get(rec.id)
    if origin_id is None:
        return
    try:
        origin = store.get(origin_id)
    except KeyError:  # deleted on the Compare page since
        return
    changed = {k: v for k, v in rec.spec.items() if origin.spec.get(k) != v}
    with st.container(border=True):
        st.markdown("**Side by side with the run that suggested it** (" +
                    ", ".join(f"{k}: {origin.spec.get(k)} → {v}" for k, v in changed.items()) + ")")
        rows = []
        for variant in ("eager", "compiled"):
            for name in SIDE_BY_SIDE:
                fig = VARIANT_FIGURES[name]
                before, after = origin.result.get(f"{variant}_{name}"), rec.result.get(f"{variant}_{name}")
                if before is None and after is None:
                    continue
                rows.append({"figure": fig.column_label(variant), "before": fig.text(before, unit=False),
                             "after": fig.text(after, unit=False)})
        for name in ("speedup", "compile_s"):
            fig = RUN_FIGURES[name]
            rows.append({"figure": fig.label, "before": fig.text(origin.result.get(name), unit=False),
                         "after": fig.text(rec.result.get(name), unit=False)})
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=f"{key}_pair_table")
        if words := pair_words(origin.result, rec.result):
            st.markdown(words)
        bars, missing = [], []
        for result, when in ((origin.result, "before"), (rec.result, "after")):
            shown = as_timed(result)  # at the timed steps' lengths; none where the profiler ran far off them
            if why := charts.profiler_withheld(shown):
                missing.append(f"No bars {when}: {why}.")
            elif not shown:
                missing.append(f"No bars {when}: that run was not profiled.")
            else:
                bars += [(f"{label} ({when})", shown[v]["ms"]) for v, label, _ in style.VARIANTS if v in shown]
        if bars:
            exports.show(st, charts.breakdown_chart(bars, title="Where the time goes, before and after"),
                         key=f"{key}_pair_breakdown")
        for line in missing:  # said, so a chart of the before bars alone is not read as the whole story
            st.caption(line)


def pair_words(before: dict, after: dict) -> str | None:
    """The two runs' speedups and whether they tell them apart, in a sentence; what the suggestion expected is not
    a result, so a change that cost speed beyond both intervals says so."""
    from tcore import figures
    from ui.words.compare_verdicts import interval_text

    if before.get("speedup") is None or after.get("speedup") is None:
        return None
    both = f"Speedup {interval_text(before)} before, {interval_text(after)} after"
    apart = figures.told_apart(before, after)
    if apart is False:
        return f"{both}: the intervals overlap, so these runs cannot tell the two apart."
    if apart is None:
        return f"{both} (without both intervals, no word on whether that is beyond the noise)."
    if after["speedup"] < before["speedup"]:
        return (f"{both}: **slower**, beyond both runs' intervals. On this model and device the change cost speed, "
                "whatever the suggestion expected; the table and bars say where.")
    return f"{both}: **faster**, beyond both runs' intervals."
