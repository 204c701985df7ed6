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
breaks, shapes, caches, one_run, two_codes = st.tabs(tabs, default=tabs[3] if opened else None)
with breaks:
    diagnose.breaks_section(store, records)
with shapes:
    diagnose.shapes_section(store, records)
with caches:
    diagnose.caches_section(store, records)
with one_run:
    diagnose.run_section(store, records, opened)
with two_codes:
    ecosystem.code_side_by_side(store, records)
