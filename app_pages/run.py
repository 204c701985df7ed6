"""Run one experiment: set the knobs, queue it, follow it live, then read what compile did."""
import streamlit as st

from tcore.host import machine
from tcore.lab import api
from tcore.store import RunStore
from ui.panels import generate, knob_values, knobs, live, model_picker, people, queue, results
from ui.words import run_state

store = RunStore()
# The run drawn below is session_state["run_shown"], a key no widget owns; "Show below" has a key of its own and is
# set from it before it is drawn. As the selector's own key, a value set before the selector was first drawn (a
# person's one run) came back after a page switch dropped the selector's: the run shown before Run was pressed.
PICK = "run_show_below"


def picked() -> None:
    st.session_state.run_shown = st.session_state[PICK]


def submit_run(exp, checked) -> None:
    """The Run button's callback: the run is queued before the page is drawn, so the page drawn after the click
    already follows it, with the run in its queue. Queued in the page's own run and then st.rerun(), the page was
    drawn twice before it showed the run: on a loaded machine the person's own page said "Nothing is running or
    waiting" for up to 15 s while everyone else's queue showed the run."""
    queued = queue.submit([exp], store, key="run", timeout_s=60 * st.session_state["run_timeout_min"], checked=checked)
    if queued:
        st.session_state.run_shown = queued[0]


st.title("Run an experiment")
if not machine.cuda_available():
    st.info("No CUDA GPU on this machine: runs use the **CPU** with the **tiny** presets. The default run takes about "
            "a minute, most of it compiling (the C++ compiler builds Inductor's code); a library model or training "
            "with the optimizer compiled takes several, and every run longer while other runs share the machine. "
            "Under **Run**, the page says how long runs like yours took here. Speedups on a CPU are small; the same "
            "page on a GPU machine uses the GPU.")

knob_col, out_col = st.columns([2, 3], gap="large")
with knob_col:
    with st.container(border=True):
        st.markdown("#### Model")
        model = knobs.model_knobs("run_")
    if model["task"] == "generate":
        with st.container(border=True):
            st.markdown("#### Generation")
            model.update(generate.knobs("run_", model["model"], model["preset"]))
    with st.container(border=True):
        st.markdown("#### Compiler")
        compiler = knobs.compile_knobs("run_", model["model"], model["task"])
    measure = knobs.measure_knobs("run_", with_cache=False)
    pick = model_picker.unpicked("run_")
    exp, notes, error, checked = knobs.build({**model, **compiler, **measure}, unpicked=pick)

with out_col:
    # before the run, as its interval says after; the device as build() found it
    if exp is not None and (ahead := api.rerun_words(exp, store, device=checked[0])):
        st.info(ahead, icon=":material/swap_vert:")
    # Runs wait their turn in the machine's queue, so Run is never greyed out for someone else's run.
    st.button("Run", key="run_start", type="primary", icon=":material/play_arrow:", width="stretch",
              disabled=exp is None, on_click=submit_run, args=(exp, checked))
    queue.show_refusal("run")
    if pick:
        st.warning(pick, icon=":material/search:")
    elif error:
        st.error(f"**These settings cannot run:** {error}")
    else:
        took = api.run_length_words(exp, store, checked[0])
        st.caption(f"Will run: **{people.plain(exp.label)}**" + (f". {took}" if took else ""))
    for note in notes:
        st.warning(note)
    if exp is not None and exp.cache == "artifacts":
        source = knob_values.artifacts_source(exp, store, device=checked[0])
        st.caption(f"Will load the compile artifacts saved by run {source['run_id']}." if source else
                   "No stored run of these settings has saved compile artifacts yet: this run will compile "
                   "cold (and save them). Run it once with cache=cold first to see a warm start.")

    records = queue.my_runs(store)
    mine = [r.id for r in records]
    if st.session_state.get("run_shown") not in mine:  # none yet, or deleted on the Compare page since
        st.session_state.run_shown = mine[0] if mine else None
    shown = st.session_state.run_shown
    # The run drawn live below while this process follows it (run_state.state); then live.follow, the one
    # fragment that redraws the queue, the runs table and the panel together, sends the whole page round again.
    following = shown if shown and run_state.state(shown, store).followed else None
    labels = {r.id: f"{r.label} · {r.id[-6:]}" for r in records}

    def runs_part() -> None:
        if following and st.session_state.get("run_shown") != following:  # another run picked below
            st.rerun()
        # Places first, filled out of order. At a run's end the page's round empties the live panel first, then
        # the queue and the table say the run has ended, then the result is drawn: no moment shows "Running"
        # below "finished", nor a result beside a table still saying "running". (At its start, the queue goes first.)
        queue_box = st.container(border=True)
        table_box, pick_box, shown_box = st.container(), st.container(), st.container()
        if not following:
            shown_box.empty()
        with queue_box:  # within follow's fragment, drawn by it; else a fragment of its own
            (queue.draw_queue if following else queue.queue_box)(store, key="run_queue")
        if not mine:
            return
        with table_box:
            (queue.runs_table if following else queue.my_runs_table)(store)
        if len(mine) > 1:
            if st.session_state.get(PICK) != shown:
                st.session_state[PICK] = shown
            pick_box.selectbox("Show below", mine, key=PICK, format_func=labels.get, on_change=picked)
        with shown_box:
            if following:
                live.run_panel(following, store)
            else:
                results.show_run(store.get(shown), store, key="run_result")

    if following:
        live.follow(following, store, runs_part)
    else:
        with st.container():  # a fragment draws into a container of its own: the same places as follow's
            runs_part()
    if not mine:
        st.markdown(
            "Pick a model and how to compile it, then press **Run**. The run waits in the queue while another "
            "is being timed on this device, then builds the model, times eager steps, compiles it (the first "
            "compiled call), warms it up and alternates timed blocks of eager and compiled steps. You will see "
            "its speedup, compile time, break-even point, graph breaks, recompilations and, where the hardware "
            "has a meter, power and energy. Press **Run** again to queue more.")
