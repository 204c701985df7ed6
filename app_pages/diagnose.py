"""Why is it slow? Graph breaks, recompilations, cold vs warm compiles, one run's graphs and generated code, and two
runs' generated code side by side."""
import streamlit as st

from tcore.store import RunStore
from ui import diagnose, ecosystem

store = RunStore()
records = store.list(limit=300)
opened = st.query_params.get("run")  # the Compare page links here with ?run=<id>

st.title("Why is it slow?")
st.caption("Each section queues the runs it needs (they wait their turn on the device) and draws them side by "
           "side when they finish; it also draws matching runs stored earlier.")
tabs = ["Graph breaks", "Recompilations", "Cold vs warm start", "One run: graphs and generated code",
        "Two runs' code side by side"]
# Lazy tabs: the script runs only the open section (its charts and its store queries); the sections' widgets keep
# their values while closed (persist_state="page"). The open tab is session_state["diagnose_tab"], a label.
breaks, shapes, caches, one_run, two_codes = st.tabs(tabs, default=tabs[3] if opened else None, key="diagnose_tab",
                                                     on_change="rerun")
if breaks.open:
    with breaks:
        diagnose.breaks_section(store, records)
if shapes.open:
    with shapes:
        diagnose.shapes_section(store, records)
if caches.open:
    with caches:
        diagnose.caches_section(store, records)
if one_run.open:
    with one_run:
        diagnose.run_section(store, records, opened)
if two_codes.open:
    with two_codes:
        ecosystem.code_side_by_side(store, records)
