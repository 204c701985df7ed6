"""This machine's spread between fresh processes (System page): per kind of run, what its reruns have shown, what it
rests on and how old it is, or the measured starting value; the instructor may reset it (tcore.lab.calibrate)."""
from __future__ import annotations

import time

import streamlit as st

from tcore.lab import api
from tcore.store import RunStore
from ui.panels import people


def panel(store: RunStore, device: str) -> None:
    st.markdown("#### How far a rerun moves here")
    standing = api.spread_standing(store, device)
    st.caption("Each run's interval allows for how far its headline moves between fresh processes on this machine. "
               "The lab learns that from every setting run here more than once, pooled per kind of run, and starts "
               f"from {start_words(device, standing)} until it has.")
    now = time.time()
    rows = []
    for s in standing:
        age = (f"newest run {api.duration_words(now - s.newest_at)} ago" if s.newest_at is not None else "")
        rows.append({"kind of run": s.what,
                     "learned σ": f"{s.sigma_pct:.2f}%" if s.sigma_pct is not None else "none yet",
                     "a new setting gets σ": f"{s.used_pct:.2f}%",
                     "rests on": f"{s.runs} reruns of {s.settings} setting(s)" if s.runs else "the starting value",
                     "age": age or "n/a", "starting value": f"{s.start_pct:g}% ({s.start_where})"})
    st.dataframe(rows, hide_index=True, width="stretch")
    if (since := api.spread_reset_at(store)) is not None:
        st.caption(f"Learned from runs since the instructor's reset at "
                   f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(since))} (the server's clock).")
    if people.is_instructor():
        asking = st.session_state.get(CONFIRM, False)
        st.button("Reset this machine's spread", icon=":material/restart_alt:", key="spread_reset",
                  on_click=st.session_state.__setitem__, args=(CONFIRM, True), disabled=asking,
                  help="Runs finished from now on teach it again (after a change of machine, driver or load); the "
                       "runs are kept, and intervals start from the measured starting value meanwhile.")
        if asking:  # one click cannot be undone: ask first, as the instructor's Cancel of a person's run does
            with st.container(border=True):
                st.markdown("Reset this machine's spread? From now on it learns only from runs that finish after "
                            "this moment, and every interval starts again from the starting value meanwhile; the runs "
                            "themselves are kept. There is no undo.")
                yes, no = st.columns(2)
                yes.button("Reset it", key="spread_reset_confirm", type="primary", icon=":material/restart_alt:",
                           on_click=_reset, args=(store,))
                no.button("Keep it", key="spread_reset_keep", on_click=st.session_state.pop, args=(CONFIRM, None))


CONFIRM = "spread_confirm_reset"  # session_state: the instructor pressed Reset and has not yet said yes or no


def _reset(store: RunStore) -> None:
    st.session_state.pop(CONFIRM, None)
    api.reset_spread(store)


def start_words(device: str, standing: list) -> str:
    """Where the starting value comes from, as the kinds of run on this machine have it (rerun.starting_between): the
    CPU's own default, a GPU model's measured value, or a wide default for a GPU not measured yet."""
    if device == "cpu":
        pct = ", ".join(f"σ {s.start_pct:g}%" for s in standing)
        return ("the CPU's starting value" + (f" ({pct}, a default: a CPU run shares its cores with everything else on "
                                              "the machine)" if pct else ""))
    if standing and all(s.start_where.startswith("measured") for s in standing):
        return "what was measured on this GPU model"
    return "a wide starting value, as this GPU model has not been measured yet"
