"""Why is it slow? Graph breaks, recompilations, cold compiles against loaded artifacts, one run's graphs and generated
code, two runs' generated code side by side, and the start-up ladder and stances."""
import streamlit as st

from tcore.store import RunStore
from ui.panels import diagnose_sections, diagnose_startup, ecosystem

store = RunStore()
records = store.list(limit=300)
opened = st.query_params.get("run")  # the Compare page links here with ?run=<id>

st.title("Why is it slow?")
st.caption("Each section queues the runs it needs (they wait their turn on the device) and draws them side by "
           "side when they finish; it also draws matching runs stored earlier. The start-up tab's ladder and stances "
           "run their own processes, beside the queue.")
tabs = ["Graph breaks", "Recompilations", "Cold vs loaded artifacts", "One run: graphs and generated code",
        "Two runs' code side by side", "Start-up and stances"]
# Lazy tabs: the script runs only the open section (its charts and its store queries); the sections' widgets keep
# their values while closed and while another page is shown (persist_state="session"). The open tab is
# session_state["diagnose_tab"], a label; Streamlit drops it when another page is drawn, so it is kept under a key no
# widget owns and put back on the way in (the page came back on Graph breaks), unless a link opened a run.
KEPT_TAB = "diagnose_tab_kept"
if "diagnose_tab" not in st.session_state and not opened and st.session_state.get(KEPT_TAB) in tabs:
    st.session_state.diagnose_tab = st.session_state[KEPT_TAB]
sections = st.tabs(tabs, default=tabs[3] if opened else None, key="diagnose_tab", on_change="rerun")
st.session_state[KEPT_TAB] = next(label for label, tab in zip(tabs, sections) if tab.open)
breaks, shapes, caches, one_run, two_codes, startup = sections
if breaks.open:
    with breaks:
        diagnose_sections.breaks_section(store, records)
if shapes.open:
    with shapes:
        diagnose_sections.shapes_section(store, records)
if caches.open:
    with caches:
        diagnose_sections.caches_section(store, records)
if one_run.open:
    with one_run:
        diagnose_sections.run_section(store, records, opened)
if two_codes.open:
    with two_codes:
        ecosystem.code_side_by_side(store, records)
if startup.open:
    with startup:
        diagnose_startup.startup_section(store)
