"""Compile Lab: see what torch.compile does to a model. `streamlit run app.py`

The pages live in app_pages/, not pages/: while a folder named pages/ exists, Streamlit runs a fresh
server's first session in its legacy multipage mode, so a deep link (/compare) would open without
this router, its wide layout or its page titles.
"""
import sqlite3
import traceback
from pathlib import Path

import streamlit as st

from tcore.lab import api
from tcore.store import RunStore, StoreError, default_path
from ui.panels import exports, knobs, people
from ui.words import store_words


@st.cache_resource(show_spinner=False)
def start_queue(db_path: str) -> int:
    """Once per server process and store (tcore.lab.api.serve): serve.py (`make app`) has done this when the server
    started; `streamlit run app.py` does it here, when the first page opens."""
    return api.serve(RunStore(db_path))


# A file, not ":material/bolt:": Streamlit fetches a Material favicon from fonts.gstatic.com, which an
# offline workshop network cannot reach.
st.set_page_config(page_title="Compile Lab", page_icon=str(Path(__file__).parent / "ui" / "favicon.png"), layout="wide")
run_page = st.Page("app_pages/run.py", title="Run", icon=":material/play_arrow:", default=True)
sweep_page = st.Page("app_pages/sweep.py", title="Sweep", icon=":material/grid_on:")
compare_page = st.Page("app_pages/compare.py", title="Compare", icon=":material/compare_arrows:")
page = st.navigation([
    run_page,
    st.Page("app_pages/diagnose.py", title="Diagnose", icon=":material/troubleshoot:"),
    compare_page,
    sweep_page,
    st.Page("app_pages/system.py", title="System", icon=":material/memory:"),
])
try:
    start_queue(str(default_path()))
    people.identity_sidebar(RunStore())
    knobs.keep_settings(RunStore(), people.me(), drawing={run_page: "run_", sweep_page: "sweep_",
                                                          compare_page: "compare_"}.get(page))
    exports.format_picker()
    page.run()
except (StoreError, sqlite3.Error) as e:  # a store deleted, corrupted, full or locked: a sentence, not a traceback
    traceback.print_exc()  # the whole story is in the server's log, for the instructor
    st.error(store_words.store_trouble(e))
    st.stop()
except api.LimitsError as e:  # compile-lab.toml written wrongly: its one line, which names the setting
    st.error(f"The lab's settings cannot be read: {e}")
    st.stop()
exports.warm_charts()  # after the page: its own charts come first
