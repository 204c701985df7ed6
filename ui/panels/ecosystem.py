"""A run in the tools people already use: its settings as code to paste, its compile's tlparse report and
TORCH_TRACE, its compile artifacts; and two runs' generated code side by side.

The engine behind each: tcore.export.snippet (the code), tcore.lab.outputs.tlparse (the report), tcore.store.artifacts
(what a run kept), tcore.analysis.codediff (two runs' programs and their kernels).
"""
from __future__ import annotations

import difflib

import streamlit as st

from tcore.analysis import codediff
from tcore.experiment.device import resolve_device
from tcore.experiment.spec import SpecError
from tcore.export import snippet
from tcore.lab import api
from tcore.store import RunRecord, RunStore

STATIC_URL = "app/static"  # where Streamlit serves the app's static/ folder, relative to the page


def report_url(report: api.Report, run_id: str) -> str:
    """The report's index page, with a query: tlparse's own script on each of its pages runs `return url` (a name it
    never defines) when the page's address has no query, logging "ReferenceError: url is not defined"; with one,
    it copies the query onto the report's links instead, so no page of it logs that."""
    return f"{STATIC_URL}/{report.index.relative_to(api.STATIC_ROOT).as_posix()}?run={run_id}"


def take_away(rec: RunRecord, store: RunStore, *, key: str) -> None:
    """The run's code to paste, and what it recorded for tlparse and for a later compile."""
    st.markdown("**Take it with you**")
    with st.expander("Copy as code: this run's settings in your program", icon=":material/code:"):
        code = code_of(rec)
        if code is None:
            st.caption("n/a: these settings no longer validate, so they cannot be written as code.")
        else:
            st.caption("The exact compile calls and settings this run used, on the lab's sample model; the lines "
                       "marked <-- are the ones to carry over to your own model. Copy with the button at the "
                       "code's top right.")
            st.code(code, language="python")
            # Built on click (a callable): a file registered on every rerun is fetched as the button draws, and a
            # rerun that replaces it meanwhile answers that fetch with a 404, logged in the console.
            st.download_button("Download as a .py file", lambda: code, f"compile_lab_{rec.id}.py", "text/x-python",
                               key=f"{key}_snippet_py", icon=":material/download:", on_click="ignore")
    tlparse_links(rec, store, key=key)


def code_of(rec: RunRecord) -> str | None:
    try:
        import torch

        device = rec.device or resolve_device(rec.spec.get("device", "auto"), torch.cuda.is_available())
        return snippet.code_for(rec.spec, device, run_id=rec.id)
    except (SpecError, ValueError, TypeError, KeyError):  # settings from an older lab, or that no longer validate
        return None


def tlparse_links(rec: RunRecord, store: RunStore, *, key: str) -> None:
    """tlparse's report of the run's compile (opens in a new tab), the report zipped, the raw TORCH_TRACE log and
    the compile artifacts; or, where there is none, why."""
    if rec.status in ("queued", "running"):
        return
    with st.spinner("Rendering the tlparse report (once per run)...", show_time=True):
        report = api.tlparse_report(rec.id, store)
    if report.folder is None:  # a sentence across the box, not a narrow column of it
        st.caption(f"tlparse report: n/a, {report.reason}.")
    # A row that wraps, each button as wide as its words: four fixed columns cut them short at 1440 px
    # ("Open the tlp…", "TORCH_…") in the Run page's result column.
    row = st.container(horizontal=True, gap="small", vertical_alignment="center")
    if report.folder is not None:
        row.link_button("Open the tlparse report", report_url(report, rec.id), icon=":material/open_in_new:",
                        help="tlparse's view of this run's compile, in a new tab: each compilation with its "
                             "Dynamo graph, guards, recompile reasons, AOT graphs, Inductor's output code and "
                             "compile metrics, from the TORCH_TRACE the run recorded.")
        row.download_button("Report (.zip)", report.zipped, f"tlparse-{rec.id}.zip", "application/zip",
                            key=f"{key}_tlparse_zip", icon=":material/download:", on_click="ignore",
                            help="The same report to open offline: unzip it and open index.html.")
        row.download_button("TORCH_TRACE log (.gz)", lambda: store.artifacts.torch_trace(rec.id) or b"",
                            f"{rec.id}-torch_trace.log.gz", "application/gzip", key=f"{key}_torch_trace",
                            icon=":material/download:", on_click="ignore",
                            help="The raw log, for tlparse's own options: gunzip it, then `tlparse <file>`.")
    size = store.artifacts.saved_artifacts(rec.id, size_only=True)  # read on click, not on every rerun
    if size is not None:
        row.download_button(f"Compile artifacts ({size / 1e6:.1f} MB)",
                            lambda: store.artifacts.saved_artifacts(rec.id) or b"",
                            f"{rec.id}-compile-artifacts.bin", "application/octet-stream",
                            key=f"{key}_artifacts", icon=":material/download:", on_click="ignore",
                            help="What torch.compiler.save_cache_artifacts() returned after the compile: load "
                                 "it with torch.compiler.load_cache_artifacts() before compiling the same model "
                                 "with the same torch on the same kind of device, and the compile is warm.")


def code_side_by_side(store: RunStore, records: list[RunRecord]) -> None:
    """Pick two runs of one model: their generated programs next to each other, a diff, the kernel counts."""
    with_code = [r for r in records if r.status == "finished" and "compiled" in r.result.get("variants", ())
                 and r.spec.get("backend", "inductor") == "inductor"]
    models = sorted({r.spec["model"] for r in with_code})
    if not models:
        st.info("No stored run has generated code yet: run something with compile=whole or regional and the "
                "inductor backend.")
        return
    model = st.selectbox("Model", models, persist_state="session", key="codes_model")
    mine = [r for r in with_code if r.spec["model"] == model]
    names = {r.id: f"{r.label} · {r.id[-6:]}" for r in mine}
    if len(mine) < 2:
        st.info(f"Only one stored run of {model} has generated code: run it again with another setting (mode, "
                "precision, regional, a graph break...) to compare the code.")
        return
    left, right = st.columns(2)
    a = left.selectbox("Run A", list(names), persist_state="session", key="codes_a", format_func=names.get)
    b = right.selectbox("Run B", list(names), index=1, persist_state="session", key="codes_b", format_func=names.get)
    try:
        ra, rb = store.get(a), store.get(b)
    except KeyError:  # deleted since the list was read
        st.info("One of these runs was just deleted: pick another.")
        return
    pa, pb = store.code(a), store.code(b)
    ka, kb = codediff.kernels(pa), codediff.kernels(pb)
    counts = st.columns(3)
    counts[0].metric("Kernels in A's code", ka.total, help=codediff.KERNELS_MEANS)
    counts[1].metric("Kernels in B's code", kb.total, delta=kb.total - ka.total, delta_color="inverse",
                     help=codediff.KERNELS_MEANS)
    per_step = [(r.result.get("compiled_kernels_per_step")) for r in (ra, rb)]
    counts[2].metric("Kernels launched per step, A → B",
                     " → ".join("n/a" if k is None else f"{k:.0f}" for k in per_step),
                     help="From the profiled steps (kernels_per_step): what a step launches, loops included.")
    st.caption(codediff.kernel_words(ka, kb))
    if a == b:
        st.info("Run A and run B are the same run: pick another for B.")
        return
    pick = st.columns(2)
    ia = pick[0].selectbox("A's program", range(len(pa)), persist_state="session", key="codes_pa",
                           format_func=lambda i: f"Program {i + 1} of {len(pa)}")
    ib = pick[1].selectbox("B's program", range(len(pb)), persist_state="session", key="codes_pb",
                           format_func=lambda i: f"Program {i + 1} of {len(pb)}")
    if ia is None or ib is None:
        return
    shown = st.segmented_control("Show", ["Side by side", "Diff"], default="Side by side",
                                 persist_state="session", key="codes_view")
    if shown == "Diff":
        diff = "".join(difflib.unified_diff(pa[ia].splitlines(True), pb[ib].splitlines(True),
                                            f"A {a[-6:]} program {ia + 1}", f"B {b[-6:]} program {ib + 1}", n=2))
        st.code(diff or "(identical)", language="diff", height=600)
    else:
        cols = st.columns(2)
        cols[0].code(pa[ia], language="python", height=600, line_numbers=True)
        cols[1].code(pb[ib], language="python", height=600, line_numbers=True)
