"""Compare stored runs: a filterable table, side-by-side charts, a compile-time vs speedup scatter, CSV and HTML
exports, delete."""
import dataclasses
import sqlite3

import streamlit as st

from tcore import figures
from tcore.lab import api
from tcore.store import RunStore, StoreError
from ui.charts import compare_charts, diagnose_charts
from ui.panels import exports, people, results
from ui.words import compare_verdicts, diagnose_queries, run_table, store_words

SCATTER_WORDS = ("Each point is a run: further up is faster than eager, further left compiled sooner, so up and to the "
                 "left is best. Below the dashed line compiling made it slower. Break-even steps (in the hover) = "
                 "compile time / (eager step time - compiled step time): how many steps it takes to earn the compile "
                 "time back.")
COLD_WARM_WORDS = ("Compile time: cold vs warm groups the chosen runs by what they compiled; each cache mode is a bar, "
                   "and a second run of the same settings and cache a bar of its own (named by run id). "
                   "Cold compiles from scratch, warm reuses this machine's local cache folder, which earlier runs "
                   "filled (a cold run adds its compile once it has measured), artifacts loads what an earlier run of "
                   "the same settings saved. Hover a bar for its cache hits.")


CHART_WORDS = {"compare_scatter": SCATTER_WORDS, "compare_cold_warm": COLD_WARM_WORDS}  # under their charts
# The six charts in four tabs, in the order they stood on the page; the first opens first.
CHART_TABS = ["Compile time and throughput", "Energy and trade-off", "Where the time goes", "Cold vs warm start"]


def export_table(picked, records: list):
    """The Compare table of the chosen runs, with the Noisy flag each run's own page shows beside its headline."""
    table = run_table.run_table(picked)
    table.insert(3, "Noisy", ["; ".join(figures.noise_reasons(r.result)) or "" for r in records])
    return table


def noisy_notes(records: list) -> list[str]:
    """A line at the top of the export for each noisy run: its figures are rough, and why."""
    return [f"Noisy: {r.label} · {r.id[-6:]}: read its figures as rough, not solid: "
            + "; ".join(reasons) + "." for r in records if (reasons := figures.noise_reasons(r.result))]


def delete(run_id: str, store: RunStore) -> None:
    """The Delete button's callback; a refusal (not yours after all, or gone meanwhile) is shown under the button."""
    try:
        api.delete(run_id, store, owner=people.me(), instructor=people.is_instructor())
    except (PermissionError, KeyError) as e:
        st.session_state["compare_delete_refusal"] = str(e)
    except (StoreError, sqlite3.Error) as e:  # a callback runs outside app.py's handler: said here, in words
        st.session_state["compare_delete_refusal"] = store_words.store_trouble(e)


store = RunStore()
st.title("Compare runs")
frame = store.dataframe()
if frame.empty:
    st.info("No runs stored yet: start one on the Run page, or a few at once on the Sweep page.")
    st.stop()

# The filters and the chosen runs are kept across a page switch and a reload (ui.panels.knobs.keep_settings): a value
# no run has any more leaves them before they are drawn.
cols = st.columns(3)
filters = {}
for i, c in enumerate(("model", "device", "status")):
    options = sorted(frame[c].dropna().unique())
    if f"compare_{c}" in st.session_state:
        st.session_state[f"compare_{c}"] = [v for v in st.session_state[f"compare_{c}"] if v in options]
    filters[c] = cols[i].multiselect(c.capitalize(), options, key=f"compare_{c}", placeholder=f"every {c}")
view = frame
for column, chosen in filters.items():
    if chosen:  # nothing chosen means no filter
        view = view[view[column].isin(chosen)]
formats = {title: st.column_config.NumberColumn(format=f)
           for title, f in run_table.number_formats(run_table.RUN_TABLE_FIGURES).values()}
st.dataframe(run_table.run_table(view), hide_index=True, width="stretch", key="compare_table",
             column_config={"Started": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"), **formats})

finished = view[view.status == "finished"]
names = dict(zip(finished.id, compare_charts.run_names(finished)))
if "compare_runs" not in st.session_state:
    st.session_state.compare_runs = list(finished.id[:4])  # the newest four
# Runs hidden by a filter or deleted since leave the selection rather than break the widget.
st.session_state.compare_runs = [i for i in st.session_state.compare_runs if i in names]
# Typing part of an id (or label) finds the runs that contain it; Streamlit's default fuzzy search also matched ids
# holding its characters scattered in order.
chosen = st.multiselect("Runs to compare side by side", list(names), key="compare_runs", format_func=names.get,
                        filter_mode="contains")
picked = finished[finished.id.isin(chosen)]
figures_of, verdict, export_verdict, chosen_records = {}, None, None, []
if picked.empty:
    st.info("Choose finished runs above to compare them.")
else:
    reasons = store.get(picked.id.iloc[0]).result.get("unavailable", {})
    chosen_records = [store.get(i) for i in picked.id]
    figures_of = {  # built when drawn in their tab below, and all of them on the HTML export's click
        "compare_compile": lambda: compare_charts.compare_bars(picked, "compile_s", "Compile time", "s",
                                                               reason="nothing was compiled in these runs"),
        "compare_throughput": lambda: compare_charts.compare_variants(picked, "samples_per_s"),
        "compare_energy": lambda: compare_charts.compare_variants(picked, "energy_j_per_step",
                                                                  reason=reasons.get("eager_energy_j_per_step")),
        "compare_scatter": lambda: compare_charts.tradeoff_scatter(picked),
        "compare_breakdown": lambda: compare_charts.runs_breakdown_chart([(r.label, r.id, r.result)
                                                                              for r in chosen_records]),
        "compare_cold_warm": lambda: diagnose_charts.cold_warm_chart(diagnose_queries.cache_frame(chosen_records),
                                                                     every_run=True),
    }
    # Each run's label is anyone's words: escaped for the page's Markdown; the HTML export's shows it as typed, and
    # the template escapes it for HTML
    verdict = compare_verdicts.compare_verdict([dataclasses.replace(r, label=people.plain(r.label))
                                                for r in chosen_records])
    export_verdict = compare_verdicts.compare_verdict_text(chosen_records)
    if verdict:  # newest first, as the table lists them
        st.markdown(verdict)
    # Lazy tabs: only the open tab's charts are built and drawn (each Plotly chart costs the browser about 0.2 s).
    speed, energy, breakdown, cold_warm = st.tabs(CHART_TABS, key="compare_charts", on_change="rerun")
    if speed.open:
        left, right = speed.columns(2)
        exports.show(left, figures_of["compare_compile"](), key="compare_compile")
        exports.show(right, figures_of["compare_throughput"](), key="compare_throughput")
    if energy.open:
        left, right = energy.columns(2)
        exports.show(left, figures_of["compare_energy"](), key="compare_energy")
        exports.show(right, figures_of["compare_scatter"](), key="compare_scatter")
        right.caption(SCATTER_WORDS)
    if breakdown.open:
        exports.show(breakdown, figures_of["compare_breakdown"](), key="compare_breakdown")
    if cold_warm.open:
        left, right = cold_warm.columns(2)
        exports.show(left, figures_of["compare_cold_warm"](), key="compare_cold_warm")
        right.caption(COLD_WARM_WORDS)

down = st.columns(3)
# Files built on click: registered on every rerun, each would be fetched as its button draws, and a rerun replacing
# it meanwhile answers with a 404 in the console.
down[0].download_button("Download the chosen runs (CSV)", lambda: run_table.csv_text(picked), "compile-lab-runs.csv",
                        "text/csv", key="compare_csv_chosen", disabled=picked.empty, on_click="ignore")
down[1].download_button("Download every run (CSV)", lambda: run_table.csv_text(frame), "compile-lab-all-runs.csv",
                        "text/csv", key="compare_csv_all", on_click="ignore")
down[2].download_button(
    "Download this comparison (HTML)", key="compare_html", disabled=picked.empty,
    file_name="compile-lab-comparison.html", mime="text/html", icon=":material/download:", on_click="ignore",
    data=(lambda: exports.html_report(f"Compile Lab: {len(picked)} run{'s' * (len(picked) != 1)} compared",
                                      export_table(picked, chosen_records),
                                      [(build(), CHART_WORDS[name]) if name in CHART_WORDS else build()
                                       for name, build in figures_of.items()],
                                      notes=[n for n in (export_verdict,) if n]
                                      + noisy_notes(chosen_records))),
    help="The chosen runs' charts (interactive) and table in one HTML file that opens in any browser, offline.")

labels = dict(zip(view.id, view.label + " · " + view.id.str[-6:] + " (" + view.status + ")"))
# The runs chosen above come first, and a new choice shows its first run: the run drawn in detail is one of them
# unless a person picks another (a failed run, say) here.
shown_ids = [i for i in chosen if i in labels] + [i for i in labels if i not in chosen]
if chosen and st.session_state.get("compare_detail_for") != chosen:
    st.session_state.compare_detail = chosen[0]
st.session_state.compare_detail_for = list(chosen)
detail = st.selectbox("One run in detail", shown_ids, format_func=labels.get, key="compare_detail",
                      filter_mode="contains")
if detail:
    record = store.get(detail)
    with st.container(border=True):
        results.show_run(record, store, key="compare_detail_run")
    if not record.unreadable:  # the Diagnose page reads only the runs it can read
        st.page_link("app_pages/diagnose.py", label="Why is it slow? Open this run on the Diagnose page",
                     icon=":material/troubleshoot:", query_params={"run": detail})
    mine = record.owner == people.me()
    under_way = record.status in ("queued", "running")
    allowed = mine or people.is_instructor()
    why_not = ("A run waiting or in progress cannot be deleted; cancel it on the Run page first." if under_way
               else None if allowed else
               f"This run is {people.plain(people.display_name(record.owner))}'s: only its owner or the instructor "
               "can delete it.")
    with st.popover("Delete this run", icon=":material/delete:", disabled=under_way or not allowed, help=why_not):
        st.write(f"Delete {people.plain(labels[detail])} and its power trace from the store? This cannot be undone.")
        # In the click's callback, so the page drawn next no longer lists the run (no second rerun to lose).
        st.button("Delete", key="compare_delete", type="primary", on_click=delete, args=(detail, store))
    if refusal := st.session_state.pop("compare_delete_refusal", None):
        st.error(refusal)
