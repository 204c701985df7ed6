"""The Diagnose page's start-up section: the start-up ladder (every way to a model's first result, each in a fresh
process: `python -m tcore ladder`) and the set_stance probes (`python -m tcore.worker.stances`), started from the
page, followed while they run (tcore.lab.probes), then read as a table and sentences.

Its words keep the lab's names: "warm" is a local cache folder read again (the Run page's cache=warm, the ladder's
warm rung), "artifacts loaded" the Mega-Cache (the Run page's cache=artifacts, the ladder's mega_cache rung).
"""
from __future__ import annotations

import time
from typing import Callable

import streamlit as st

from tcore.experiment.device import practical_defaults
from tcore.experiment.spec import CHOICES, Experiment, SpecError
from tcore.lab import api
from tcore.store import RunStore
from ui.panels import diagnose_sections, knobs
from ui.words import stance_words

FOLLOW_S = 1.0
RUNG_WORDS = {
    "eager": "no compile: the floor",
    "cold": "torch.compile with fresh cache folders: a first-ever start",
    "warm": "torch.compile again on the cold rung's cache folders: a restart on this machine (the Run page's "
            "cache=warm)",
    "mega_cache": "fresh folders seeded with the compile artifacts the cold rung saved (the Mega-Cache, and on the "
                  "CPU the C++ kernels it leaves out): artifacts loaded, as a new machine that ships its cache (the "
                  "Run page's cache=artifacts, the same bundle)",
    "aot_compile": "torch.compile(...).aot_compile, saved and loaded in a fresh process",
    "aoti": "torch.export, then an AOTInductor package loaded in a fresh process (inference only)",
}


def startup_section(store: RunStore) -> None:
    st.markdown("How fast can a model reach its **first result**? A compile is paid at every start unless something "
                "is kept: the **start-up ladder** times every way torch has, each in a fresh Python process. "
                "**Stances** (`torch.compiler.set_stance`) change what a compiled function does when it meets a new "
                "input shape. Both run here as on the command line (`python -m tcore ladder`, "
                "`python -m tcore.worker.stances`), and this section shows each step as it ends.")
    if under_way := api.under_way(store):
        running = sum(1 for row in under_way if row["status"] == "running")
        counts = ", ".join(f"{n} {what}" for n, what in ((running, "running"), (len(under_way) - running, "waiting"))
                           if n)
        st.warning(f"On this machine's queue: {counts}. The ladder and the probes run beside the queue, not in it: "
                   "they share the CPU with the runs that run meanwhile, and each slows the other's timings.",
                   icon=":material/warning:")
    with st.container(border=True):
        ladder_part()
    with st.container(border=True):
        stances_part()


def _exp(model: str, **changes) -> Experiment:
    """The model's practical preset and batch on this machine's device, for inference."""
    device, _ = api.preflight(Experiment(model=model))
    defaults = practical_defaults(model, device, "inference")
    return Experiment(model=model, device=device, **{**defaults, **changes})


# --- the ladder -------------------------------------------------------------------------------------------------------

def ladder_part() -> None:
    st.markdown("#### The start-up ladder")
    st.markdown("\n".join(f"- **{rung}**: {RUNG_WORDS[rung]}" for rung in api.LADDER_RUNGS))
    cols = st.columns([1, 2])
    with cols[0]:
        model = diagnose_sections.pick_model("diag_ladder_model")
    rungs = cols[1].multiselect("Rungs", list(api.LADDER_RUNGS), default=list(api.LADDER_RUNGS),
                                persist_state="session", key="diag_ladder_rungs",
                                help="warm and mega_cache need the cold rung: it runs too when they are picked.")
    st.caption("Each rung is a fresh process: on this CPU a cold compile takes tens of seconds, and AOTInductor "
               "builds the whole model's C++ (minutes). The eager rung always runs first: the others compare their "
               "output with its.")
    started = st.button("Climb the ladder", key="diag_ladder_start", type="primary", icon=":material/play_arrow:",
                        disabled=not rungs)
    start_and_follow("ladder", started, lambda: api.start_ladder(_exp(model, timed_s=2.0), rungs), show_ladder)


# The probe each section follows, by kind, in session_state: the one this session started.
FOLLOWED_PROBE = {"ladder": "diag_ladder_probe", "stances": "diag_stance_probe"}


def start_and_follow(kind: str, started: bool, start: Callable[[], api.Probe],
                     show: Callable[[api.Probe], None]) -> None:
    """Start a probe of `kind` when its button was pressed (a refusal said in a line), then follow the one this
    session started, else the latest anyone started."""
    key = FOLLOWED_PROBE[kind]
    if started:
        try:
            st.session_state[key] = start().id
        except (SpecError, api.Busy) as e:
            st.error(str(e))
    probe = api.probe(st.session_state.get(key)) or api.latest_probe(kind)
    if probe is not None:
        follow(probe, show, mine=probe.id == st.session_state.get(key))


def show_ladder(probe: api.Probe) -> None:
    result = probe.result
    machine = result.get("device_name") or result.get("device")
    st.markdown(f"**{probe.title}** · {machine}, torch {result.get('torch')}")
    st.dataframe(ladder_rows(result), hide_index=True, width="stretch", key="diag_ladder_table")
    opening, *rungs = api.ladder_words(result)
    st.caption(opening)
    st.markdown("\n".join(f"- {line}" for line in rungs))
    with st.expander("As the command line prints it"):
        st.code(api.ladder_table(result), language=None)


def ladder_rows(result: dict) -> list[dict]:
    """One row per rung: its time to first result against cold's, its throughput, its artifact, or why it did not
    run; each figure as text with its unit, n/a where there is none (the table showed '1.9321', '1361.375', 'None')."""
    rows = []
    for r in result["rungs"]:
        if "unavailable" in r:
            rows.append({"rung": r["title"], "first result": "n/a", "vs cold": "n/a", "throughput": "n/a",
                         "artifact": "n/a", "output": "", "why not": r["unavailable"].splitlines()[0]})
            continue
        made = r.get("build", {}).get("process_wall_s")
        rows.append({"rung": r["title"], "first result": _unit(r.get("first_result_s"), "{:.2f} s"),
                     "vs cold": _unit(r.get("first_result_vs_cold"), "{:.2f}x"),
                     "throughput": _unit(r.get("samples_per_s"), "{:,.1f} samples/s"),
                     "artifact": _unit(r["artifact_bytes"] / 1e6 if r.get("artifact_bytes") else None, "{:.2f} MB"),
                     "output": {True: "matches eager", False: "DIFFERS from eager"}.get(r.get("correctness_ok"), ""),
                     "why not": f"making the artifact took {made:.1f} s" if made else ""})
    return rows


def _unit(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)


# --- the stances ------------------------------------------------------------------------------------------------------

def stances_part() -> None:
    st.markdown("#### Stances: what a compiled model does with a new shape")
    st.markdown("- **fail_on_recompile**: a recompile is an error that names the guard: proves a setting stable\n"
                "- **eager_on_recompile**: a new shape runs eagerly instead of compiling\n"
                "- **eager_then_compile**: a function's first call runs eagerly, its second compiles with the "
                "dynamism the two showed (per function, not per call of the model: the probe shows what that means)")
    cols = st.columns(3)
    with cols[0]:
        model = diagnose_sections.pick_model("diag_stance_model")
    count = cols[1].number_input("Distinct shapes", min_value=2, max_value=8, value=3, persist_state="session",
                                 key="diag_stance_count")
    backends = [b for b in CHOICES["backend"] if b != "cudagraphs"]
    st.session_state.setdefault("diag_stance_backend", "eager" if knobs.target_device("auto") == "cpu" else "inductor")
    backend = cols[2].selectbox("Backend", backends, persist_state="session", key="diag_stance_backend")
    st.caption(knobs.explain("backend", backend) + " The stances change Dynamo's side, which every backend shares.")
    started = st.button("Probe the stances", key="diag_stance_start", type="primary", icon=":material/play_arrow:")
    start_and_follow("stances", started,
                     lambda: api.start_stances(_exp(model, backend=backend, shape_count=int(count))), show_stances)


def show_stances(probe: api.Probe) -> None:
    st.markdown(f"**{probe.title}**")
    for found in probe.result:
        st.markdown(f"##### {stance_words.STANCE_TITLES.get(found['stance'], found['stance'])}")
        for line in stance_words.probe_words(found):
            st.markdown(line)
        if found.get("calls"):
            st.dataframe(call_rows(found), hide_index=True, width="stretch", key=f"diag_stance_{found['stance']}")


def call_rows(found: dict) -> list[dict]:
    """One row per call of a probe: its size, the stance it ran under, what it compiled, its time, its output."""
    return [{"call": n, "size": c["size"], "under": c["stance"],
             "compiled": ", ".join(c.get("where") or c["frames"]) if c["compiled"] else "nothing",
             "time": _unit(c["ms"], "{:.1f} ms"),
             "output": "matches eager" if c["correctness_ok"] else "DIFFERS from eager",
             "what happened": c.get("note", "")} for n, c in enumerate(found["calls"], 1)]


# Under a climb in progress: why the step under way shows no split yet.
LADDER_PHASES = (". Each step is a fresh process that reports its phases (interpreter, imports, build, load, first "
                 "call) when it ends: a finished rung shows its split above; the one under way shows it once its "
                 "process ends.")


# --- following one ----------------------------------------------------------------------------------------------------

def follow(probe: api.Probe, show, mine: bool = False) -> None:
    """A probe still running: its steps so far, redrawn every FOLLOW_S, until it ends and the page draws the result,
    with a Stop button for the session that started it (`mine`); an ended one: its result, or why it has none."""
    if probe.done:
        if probe.stopped:
            st.info(f"**{probe.title}** was {probe.error or 'stopped'}, after "
                    f"{(probe.ended_at or time.time()) - probe.started_at:.0f} s; the steps it finished:\n\n"
                    + ("\n".join(f"- {line}" for line in probe.steps) or "none"))
        elif probe.error:
            st.error(f"**{probe.title}** failed: {probe.error}")
        else:
            show(probe)
        return

    def progress() -> None:
        if probe.done:
            st.rerun()
        with st.status(f"Running {probe.kind}: {probe.title}", expanded=True):
            st.markdown("\n".join(f"- {line}" for line in probe.steps) or "Starting its first process...")
            st.caption(f"{time.time() - probe.started_at:.0f} s so far" + (LADDER_PHASES if probe.kind == "ladder"
                                                                          else ""))
        if mine and st.button("Stop", key=f"diag_stop_{probe.id}", icon=":material/stop:", disabled=probe.stopped,
                              help="End it now: the step under way is killed with its compile workers, and no "
                                   "later step starts. The steps that finished stay on the page."):
            probe.stop_now()  # the probe ends within a moment; the next redraw shows what it finished

    st.fragment(progress, run_every=FOLLOW_S)()
