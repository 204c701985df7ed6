"""Run one experiment: set the knobs, start it, follow it live, then read what compile did."""
import streamlit as st

from tcore import machine, runs
from tcore.spec import SpecError
from tcore.store import RunStore
from ui import knobs, live, results

if "run_id" not in st.session_state:
    st.session_state.run_id = None
store = RunStore()

st.title("Run an experiment")
if not machine.cuda_available():
    st.info("No CUDA GPU on this machine: runs use the **CPU** with the **tiny** presets, so a run takes "
            "seconds to a minute. Speedups on a CPU are small; the same page on a GPU machine uses the GPU.")

knob_col, out_col = st.columns([2, 3], gap="large")
with knob_col:
    with st.container(border=True):
        st.markdown("#### Model")
        model = knobs.model_knobs("run_")
    with st.container(border=True):
        st.markdown("#### Compiler")
        compiler = knobs.compile_knobs("run_", model["model"], model["task"])
    measure = knobs.measure_knobs("run_")
    exp, notes, error = knobs.build({**model, **compiler, **measure})

with out_col:
    busy = runs.active()
    # Two runs at once on one machine disturb each other's timings: one at a time.
    clicked = st.button("Run", key="run_start", type="primary", icon=":material/play_arrow:", width="stretch",
                        disabled=exp is None or bool(busy))
    if clicked and exp is not None and not busy:  # checked here too: disabled is only a hint to the browser
        try:
            run = runs.start(exp, store, timeout_s=60 * st.session_state["run_timeout_min"])
        except SpecError as e:  # refused by this machine or the lab's limits; the message says why
            st.error(f"**This run cannot start:** {e}")
        else:
            st.session_state.run_id = run.run_id
            st.rerun()  # redraw with the Run button greyed out while the run goes on
    if error:
        st.error(f"**These settings cannot run:** {error}")
    else:
        st.caption(f"Will run: **{exp.label}**")
    for note in notes:
        st.warning(note)

    current = runs.live(st.session_state.run_id) if st.session_state.run_id else None
    if busy and (current is None or current.done):
        # A run started elsewhere (another tab, a sweep, this tab before a refresh): follow it here.
        current = busy[0]
        st.session_state.run_id = current.run_id
    if current is not None and not current.done:
        live.run_panel(current.run_id)
    elif st.session_state.run_id:
        try:
            record = store.get(st.session_state.run_id)
        except KeyError:  # deleted on the Compare page since
            st.session_state.run_id = None
            st.rerun()
        results.show_run(record, store, key="run_result")
    else:
        st.markdown(
            "Pick a model and how to compile it, then press **Run**. A run builds the model, times eager "
            "steps, compiles it (the first compiled call), warms it up, then alternates timed blocks of "
            "eager and compiled steps. You will see its speedup, compile time, break-even point, graph "
            "breaks, recompilations and, where the hardware has a meter, power and energy.")
