"""Sweep: cross a few compile settings over one model and queue them as one sweep, filling a results matrix."""
import sqlite3

import streamlit as st

import sample_models
from tcore.experiment.device import practical_defaults
from tcore.experiment.spec import CHOICES, SpecError
from tcore.lab import api
from tcore.store import RunStore, StoreError
from ui.panels import generate, knobs, live, model_picker, people, queue
from ui.words import store_words


def start_sweep(experiments: list, skipped: list[str], label: str, store: RunStore) -> None:
    """The Start button's callback; a refusal is shown under the button (queue.show_refusal)."""
    if not experiments or api.sweeps_under_way(store) > 0:  # checked here too: disabled is only a hint to the browser
        return
    try:
        st.session_state.sweep_id = api.start_sweep(experiments, store, owner=people.me(), label=label, skipped=skipped,
                                                 timeout_s=60 * st.session_state["sweep_timeout_min"])
    except SpecError as e:
        st.session_state["sweep_refusal"] = f"**The sweep cannot be queued:** {e}"
    except (StoreError, sqlite3.Error) as e:  # a callback runs outside app.py's handler: said here, in words
        st.session_state["sweep_refusal"] = f"**The sweep cannot be queued:** {store_words.store_trouble(e)}"


if "sweep_id" not in st.session_state:
    st.session_state.sweep_id = None
store = RunStore()

st.title("Sweep compile settings")
st.caption("One model, every combination of the settings you pick, run one after another through the machine's "
           "queue (two runs at once would disturb each other's timings). Each run of a sweep takes its turn behind "
           "everyone else's, and the sweep is kept in the run store: it goes on after the app restarts.")
knob_col, out_col = st.columns([2, 3], gap="large")
with knob_col:
    with st.container(border=True):
        st.markdown("#### Model")
        model = knobs.model_knobs("sweep_")
    with st.container(border=True):
        st.markdown("#### Settings to cross")
        axes = {
            "compile": st.multiselect("Compile scope", CHOICES["compile"], default=["whole", "regional"],
                                      key="sweep_compile"),
            "mode": st.multiselect("Modes", CHOICES["mode"], default=["default"], key="sweep_mode"),
            "dynamic": st.multiselect("Dynamic shapes", [None, True, False], default=[None], key="sweep_dynamic",
                                      format_func=knobs.DYNAMIC_NAMES.get),
            "compile_optimizer": st.multiselect("Optimizer step", [False, True], default=[False], key="sweep_opt",
                                                format_func={False: "eager", True: "compiled (training)"}.get),
            "precision": st.multiselect("Precisions", CHOICES["precision"], default=[model["precision"]],
                                        key="sweep_precisions", format_func=knobs.PRECISION_NAMES.get),
        }
        if model["task"] == "generate":  # mode x cache x batch x lengths, as generation recipes turn them
            axes.update(generate.sweep_axes(model, knobs.target_device(model["device"])))
        if sample_models.get(model["model"]).supports_channels_last:
            tuned = practical_defaults(model["model"], knobs.target_device(model["device"]), model["task"])
            axes["channels_last"] = st.multiselect("Memory format", [True, False], default=[tuned["channels_last"]],
                                                   key="sweep_layouts",
                                                   format_func={True: "channels_last", False: "NCHW"}.get)
        st.caption("Every combination of these runs once; combinations that cannot run are skipped with the reason.")
        backend = st.selectbox("Backend (every compiled run)", CHOICES["backend"], key="sweep_backend")
        st.caption(knobs.explain("backend", backend))
    measure = knobs.measure_knobs("sweep_")
    pick = model_picker.unpicked("sweep_")
    base, _, error, _ = knobs.build({**model, **measure, "backend": backend}, unpicked=pick)

with out_col:
    experiments, skipped = api.cross(base, axes) if base else ([], [])
    if pick:
        st.warning(pick, icon=":material/search:")
    elif error:
        st.error(f"**These settings cannot run:** {error}")
    elif not experiments:
        empty = [name for name, values in axes.items() if not values]
        st.warning("**Nothing to run.** " + (f"Pick at least one value for: {', '.join(empty)}; a setting left empty "
                                               "crosses with nothing." if empty else
                                               "Every combination was skipped: the reasons are below."))
    else:
        st.markdown(f"**{len(experiments)} run{'s' if len(experiments) != 1 else ''}** to do"
                    + (f", {len(skipped)} combination{'s' if len(skipped) != 1 else ''} skipped." if skipped else "."))
    if skipped:
        with st.expander("Skipped combinations and why"):
            st.markdown("\n".join(f"- {s}" for s in skipped))
    # Its runs take turns with everyone else's in the machine's queue; one sweep at a time, though.
    busy = api.sweeps_under_way(store) > 0
    # Started in the click's callback, so the page drawn next shows the sweep and greys the button out.
    st.button("Start sweep", key="sweep_start", type="primary", icon=":material/play_arrow:", width="stretch",
              disabled=not experiments or busy, on_click=start_sweep,
              args=(experiments, skipped,
                    f"{base.model}/{base.preset}: " + " × ".join(k for k, v in axes.items() if len(v) > 1)
                    if base else "", store),
              help="One sweep at a time: start this one when the current sweep has ended." if busy else None)
    queue.show_refusal("sweep")

    # The session's own sweep, else the latest one (a refreshed browser has a new session).
    sweep = (api.sweep(st.session_state.sweep_id, store) if st.session_state.sweep_id
             else api.latest_sweep(store, people.me()))
    if sweep is None:
        st.markdown("Pick the settings to cross, then press **Start sweep**. A matrix of speedups and compile "
                    "times fills in as the runs finish, and the best setting is named at the end.")
    else:
        if sweep.owner != people.me() and sweep.id != st.session_state.sweep_id:
            # the latest of anyone's: say whose, so no one takes it for their own
            st.info(f"This is the latest sweep here, started by {people.plain(people.display_name(sweep.owner))}; you "
                    "have not started one in this session.", icon=":material/group:")
        if sweep.done:
            live.draw_sweep(sweep)
        else:
            live.sweep_panel(sweep.id, store)
