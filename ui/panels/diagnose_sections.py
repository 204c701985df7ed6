"""The sections of the Diagnose page ("Why is it slow?"): graph breaks, recompilations, cold vs loaded artifacts, one
run (the start-up ladder and the stances are ui.panels.diagnose_startup's).

Each section queues its runs (tcore.lab.run.runs through ui.panels.queue), shows them waiting and running, then
draws them from the store; it can as well draw runs stored earlier, picked in its selectors.
"""
from __future__ import annotations

import streamlit as st

import sample_models
from tcore import figures
from tcore.experiment.device import practical_defaults
from tcore.experiment.protocol import ERROR_KINDS
from tcore.experiment.spec import CHOICES, Experiment, SpecError
from tcore.store import RunRecord, RunStore
from ui.charts import diagnose_charts
from ui.panels import ecosystem, exports, generate, knobs, queue, results
from ui.words import compare_verdicts, diagnose_queries, graph_words, stance_words
from ui.words.diagnose_queries import STRATEGIES, strategy_of, strategy_runs
from ui.words.store_words import plain

CODE_LINES_SHOWN = 400  # generated source runs to thousands of lines: the rest goes in an expander


def base_experiment(model: str, **changes) -> Experiment:
    """The model's practical defaults for this machine's device (preset, batch, precision, layout, a short
    timed stage), with `changes`."""
    dev = knobs.target_device("auto")
    cpu = dev == "cpu"
    defaults = practical_defaults(model, dev, changes.get("task", "inference"))
    return Experiment(model=model, **{**defaults, "timed_s": 2.0 if cpu else 4.0, **changes})


def _pick(key: str, options: list[str], preferred: str | None) -> None:
    """Point the selectbox `key` at `preferred` once it becomes an option (a run just finished), else keep a
    valid choice. Set before the widget is drawn, as Streamlit requires."""
    if preferred in options and st.session_state.get(f"{key}_applied") != preferred:
        st.session_state[key], st.session_state[f"{key}_applied"] = preferred, preferred
    elif st.session_state.get(key) not in options:
        st.session_state[key] = options[0] if options else None


def _start_at_shown(key: str, shown: list[RunRecord], fallback: str | None = None) -> None:
    """On a section's first draw, point its Backend picker at the backend of the runs its charts show (the
    newest first), so the picker and the charts agree; after that it is the person's choice."""
    if key not in st.session_state:
        backend = shown[0].spec.get("backend", "inductor") if shown else fallback
        if backend in CHOICES["backend"] and backend != "cudagraphs":  # the pickers do not offer cudagraphs
            st.session_state[key] = backend


def _names(records: list[RunRecord]) -> dict[str, str]:
    return {r.id: f"{r.label} · {r.id[-6:]}" for r in records}


# Real models Diagnose offers beside the built-ins (the Run page searches all of them; its pick is offered too).
REAL_PICKS = ("torchvision:resnet18", "timm:efficientnet_b0", "hf:gpt2", "hf:llama", "hf:bert", "diffusers:flux")


def pick_model(key: str, *, builtin_only: bool = False) -> str:
    """The built-ins; with real ones too unless `builtin_only` (the deliberate graph break is a built-in's)."""
    options = list(sample_models.MODELS)
    if not builtin_only:
        chosen = st.session_state.get("run_model")
        options += [m for m in (*REAL_PICKS, chosen) if m and m not in options]
    return st.selectbox("Model", options, persist_state="session", key=key,
                        format_func=lambda m: sample_models.get(m).title
                        if sample_models.is_builtin(m) else m,
                        help=None if builtin_only else "Real models (SOURCE:NAME): the Run page's Source and search "
                                                       "find any of them; the one picked there is offered here.")


def _queue(experiments: list[Experiment], store: RunStore, *, key: str, reused: list[str] = ()) -> None:
    """Queue a section's runs: what the person's bound on waiting runs lets in now, the rest as places free up.
    reused: ids of stored runs that stand in for the first of the section's runs, in its order."""
    st.session_state[key] = [*reused, *queue.submit_in_turn(experiments, store, key=key)]
    st.rerun()


def _waiting(key: str, records: list[RunRecord], store: RunStore) -> list[str]:
    """The ids this section queued in this session; draws a live line for those still under way (and queues those
    still held back by the person's bound as places free up), and says why any of them failed (not when cancelled,
    nor a fullgraph run on the deliberate break: it is meant to)."""
    # the runs the lab queued from this section's held ones since the page last drew, wherever the person was
    st.session_state[key] = ids = [*st.session_state.get(key, []), *queue.feed_pending(key, store)]
    if panel := bool((waiting := queue.live_ids(ids, store)) or queue.pending(key)):
        with st.container(border=True):
            queue.live_runs_panel(waiting, key=f"{key}_live", feed=key, store=store)
        ids = st.session_state.get(key, [])
    queue.show_refusal(key, panel=panel)
    for rec in records:
        expected = rec.error_kind == "cancelled" or (rec.spec.get("fullgraph") and rec.spec.get("graph_break"))
        if rec.id in ids and rec.status == "failed" and not expected:
            st.error(f"**{plain(rec.label)}** · {ERROR_KINDS.get(rec.error_kind, rec.error_kind)}: "
                     f"{plain(graph_words.first_line(rec.error.get('message')))}")
    return ids


# --- graph breaks --------------------------------------------------------------------------------

BREAK_PANELS = ["compiled_samples_per_s", "speedup", "graph_count", "compile_s", "compiled_kernels_per_step"]


def _start_at_newest_break(records: list[RunRecord]) -> None:
    """On the section's first draw, point its model, scope and backend at the newest stored run with the break, so
    that the pair it draws is there at once; after that they are the person's choice."""
    if "diag_break_model" in st.session_state:
        return
    newest = next((r for r in records if r.status == "finished" and r.spec.get("graph_break")
                   and sample_models.is_builtin(r.spec.get("model", ""))
                   and r.spec.get("compile") in ("whole", "regional")
                   and r.spec.get("backend", "inductor") in CHOICES["backend"]
                   and r.spec.get("backend") != "cudagraphs"), None)
    if newest is not None:
        st.session_state.diag_break_model = newest.spec["model"]
        st.session_state.diag_break_scope = newest.spec["compile"]
        st.session_state.diag_break_backend = newest.spec.get("backend", "inductor")


def breaks_section(store: RunStore, records: list[RunRecord]) -> None:
    st.markdown("A **graph break** is code Dynamo cannot put in a graph (here a Python `if` on a tensor's value, "
                "through `.item()`): the graph ends there, Python runs the line, and a new graph starts after it. "
                "Each break costs a round trip to Python and the fusion across it. Run a model with and without "
                "its deliberate break to see what that costs.")
    _start_at_newest_break(records)
    cols = st.columns(3)
    with cols[0]:
        model = pick_model("diag_break_model", builtin_only=True)
    scope = cols[1].radio("Compile", ["whole", "regional"], persist_state="session", key="diag_break_scope",
                          horizontal=True,
                          format_func={"whole": "whole model", "regional": "regional (blocks)"}.get)
    backend = cols[2].selectbox("Backend", [b for b in CHOICES["backend"] if b != "cudagraphs"],
                                persist_state="session", key="diag_break_backend")
    st.caption(knobs.explain("compile", scope) + " " + knobs.explain("backend", backend))
    fullgraph = st.toggle("Also show what fullgraph=True does: a third run, with the break, that must fail",
                          persist_state="session", key="diag_break_fullgraph")
    reuse = st.toggle("Reuse a stored run without the break, of these settings on this machine, when there is one",
                      value=True, persist_state="session", key="diag_break_reuse",
                      help="Off: the run without the break is measured again, beside the one with it.")
    if st.button("Run without and with the break", key="diag_break_start", type="primary",
                 icon=":material/play_arrow:"):
        base = base_experiment(model, compile=scope, backend=backend)
        twin = diagnose_queries.stored_twin(base.to_dict(), records, knobs.target_device("auto")) if reuse else None
        if twin is not None:
            st.session_state["diag_breaks_reused"] = twin.id
        _queue(([] if twin else [base]) + [base.replace(graph_break=True)]
               + ([base.replace(graph_break=True, fullgraph=True)] if fullgraph else []), store, key="diag_breaks",
               reused=[twin.id] if twin else [])
    session = dict(zip(("without", "with", "fullgraph"), _waiting("diag_breaks", records, store)))
    reused_box = st.container()  # the reused run's note, while the picker below (once drawn) shows that run

    # Only runs of the model, scope and backend above, and a pair only of one setting on one device: a pair of two
    # models (a ResNet without the break beside the captioner with it) read as what the break costs.
    done = [r for r in records if r.status == "finished" and r.spec.get("model") == model
            and r.spec.get("compile") == scope and r.spec.get("backend", "inductor") == backend]
    reused = st.session_state.get("diag_breaks_reused")
    reused = next((r for r in done if r.id == reused), None) if session.get("without") == reused else None
    with_break = [r for r in done if r.spec.get("graph_break")]
    title = sample_models.get(model).title
    if not with_break:
        _say_reused(reused_box, reused)
        st.info(f"No finished run of {title} ({scope}, backend {backend}) with the deliberate break is stored yet: "
                "press **Run without and with the break** above.")
        return
    names = _names(done)
    left, right = st.columns(2)
    _pick("diag_with", [r.id for r in with_break], session.get("with"))
    chosen = next(r for r in with_break if r.id == st.session_state.diag_with)
    without = diagnose_queries.without_the_break(chosen, done)
    twin = diagnose_queries.counterpart(chosen, records, graph_break=False)
    _pick("diag_without", [r.id for r in without], session.get("without") or (twin.id if twin else None))
    if without:
        left.selectbox("Without the break", [r.id for r in without], persist_state="session", key="diag_without",
                       format_func=names.get)
    right.selectbox("With the break", [r.id for r in with_break], persist_state="session", key="diag_with",
                    format_func=names.get)

    clean = next((r for r in without if r.id == st.session_state.diag_without), None)
    if reused is not None and clean is not None and clean.id == reused.id:
        _say_reused(reused_box, reused)
    if clean is None:
        left.info(f"No finished run without the break is stored with the settings of run {chosen.id[-6:]} "
                  f"({plain(chosen.label)}) on its device: press **Run without and with the break** above to "
                  "measure the pair. Its breaks are listed below.")
    pair = [("without the break", clean.result)] if clean else []
    # Drawn with the verdict's caveat when the runs cannot tell the two apart: bars of different lengths then
    # differ within the runs' noise, and the chart alone would say otherwise.
    alike = clean is not None and figures.told_apart(clean.result, chosen.result) is False
    exports.show(st, diagnose_charts.side_by_side(pair + [("with the break", chosen.result)], BREAK_PANELS,
                                         title="What the break costs", subtitle="each panel: one figure, both runs" + (
                                             "; their speedups' intervals overlap: these runs cannot tell the two "
                                             "apart (below)" if alike else "")),
                 key="diag_break_pair")
    if clean:
        st.markdown(compare_verdicts.break_verdict(clean.result, chosen.result))
    st.markdown("#### The breaks, where they are in the code")
    show_breaks(chosen.result)
    if fullgraph:
        show_fullgraph(records, chosen, session.get("fullgraph"))


def _say_reused(box, rec: RunRecord | None) -> None:
    """The stored run the section reused for the run without the break, in `box`."""
    if rec is not None:
        box.info(f"The run without the break is run {rec.id[-6:]} ({plain(rec.label)}, "
                 f"{compare_verdicts.interval_text(rec.result)}), stored earlier with these settings on this machine: "
                 "reused, so only the run with the break was queued. Turn off the reuse above to measure it again.",
                 icon=":material/recycling:")


def show_breaks(result: dict) -> None:
    """Each break in plain words: where, what Dynamo could not do, the line of code, torch's hint."""
    breaks = graph_words.group_breaks(result.get("graph_breaks") or [])
    if not breaks:
        st.success("No graph breaks: Dynamo captured each compiled function whole.")
        return
    for b in breaks:
        with st.container(border=True):
            st.markdown(f"**Graph break at {graph_words.break_title(b)}**")
            if b.get("source"):
                st.code(b["source"], language="python")
            if words := graph_words.torch_break_words(b):
                st.info(words, icon=":material/info:")
            elif b.get("hint"):
                st.caption(b["hint"].removeprefix("Hint: ").strip())
            if b.get("skipped_frame"):
                st.warning(graph_words.SKIPPED_FRAME_WORDS)
            if theirs := graph_words.registry_words(b):
                st.markdown(theirs)


def show_fullgraph(records: list[RunRecord], chosen: RunRecord, session_id: str | None) -> None:
    st.markdown("#### fullgraph=True: a break becomes an error")
    failed = [r for r in records if r.status == "failed" and r.spec.get("fullgraph") and r.spec.get("graph_break")]
    rec = next((r for r in failed if r.id == session_id), None) or next(
        (r for r in failed if r.spec.get("model") == chosen.spec.get("model")), None)
    if rec is None:
        st.caption("No such run yet: press the button with this switch on. With fullgraph=True, torch.compile "
                   "refuses to split the model, so the run fails at the break and says where.")
        return
    st.caption(f"Run {rec.id}: {plain(rec.label)}, with fullgraph=True. Instead of splitting the graph quietly, "
               "compile stops at the break, so you learn where it is the first time you run.")
    st.error(f"**{ERROR_KINDS.get(rec.error_kind, rec.error_kind)}**")
    st.code(rec.error.get("message", "no message"), language=None, wrap_lines=True)


# --- recompilations ------------------------------------------------------------------------------

STRATEGY_PANELS = ["compilations", "compiling_s", "speedup", "compiled_samples_per_s"]


def shapes_section(store: RunStore, records: list[RunRecord]) -> None:
    st.markdown("When the input's shape changes from call to call, the compiled code's **guards** fail and "
                "Dynamo compiles again. Feed a model a schedule of distinct sizes and compare the ways to handle "
                "it: every compilation is a marker on the timeline; past the **recompile limit** Dynamo gives up "
                "and runs that function eagerly.")
    strategy_form(store, records)
    session = _waiting("diag_shapes", records, store)
    show_strategies(records, session)


def strategy_form(store: RunStore, records: list[RunRecord]) -> None:
    """The schedule's knobs and the strategies to run on it; the button queues one run per strategy."""
    cols = st.columns(4)
    with cols[0]:
        model = pick_model("diag_shape_model")
    count = cols[1].number_input("Distinct shapes", min_value=2, max_value=32, value=10,
                                 persist_state="session", key="diag_shape_count")
    order = cols[2].radio("Order", CHOICES["shape_order"], persist_state="session", key="diag_shape_order",
                          horizontal=True)
    limit = cols[3].number_input("Recompile limit", min_value=1, max_value=64, value=8,
                                 persist_state="session", key="diag_shape_limit")
    cols = st.columns([1, 1, 2])
    buckets = cols[0].number_input("Buckets (for padding)", min_value=1, max_value=31, value=3,
                                   persist_state="session", key="diag_shape_buckets")
    cpu = knobs.target_device("auto") == "cpu"
    backends = [b for b in CHOICES["backend"] if b != "cudagraphs"]
    # On a CPU every Inductor compile runs g++ (20-30 s each): aot_eager shows the same guards in seconds.
    _start_at_shown("diag_shape_backend", list(strategy_runs(records).values()),
                    fallback="aot_eager" if cpu else "inductor")
    backend = cols[1].selectbox("Backend", backends, persist_state="session", key="diag_shape_backend")
    cols[2].caption(knobs.explain("backend", backend) + (" On this CPU, Inductor compiles take tens of seconds "
                                                         "each, so aot_eager is the default here." if cpu else ""))
    chosen = st.multiselect("Strategies", list(STRATEGIES), default=list(STRATEGIES), persist_state="session",
                            key="diag_shape_strategies", format_func=lambda s: STRATEGIES[s][0])
    if st.button("Run the strategies side by side", key="diag_shape_start", type="primary",
                 icon=":material/play_arrow:", disabled=not chosen):
        try:
            base = base_experiment(model, backend=backend, shape_count=int(count), shape_order=order,
                                   recompile_limit=int(limit), buckets=int(buckets))
            experiments = [base.replace(**STRATEGIES[s][1]) for s in chosen]
        except SpecError as e:
            st.error(f"**These settings cannot run:** {e}")
        else:
            _queue(experiments, store, key="diag_shapes")


def show_strategies(records: list[RunRecord], session: list[str]) -> None:
    """The finished strategy runs side by side (this session's newest by default), then each one's timeline."""
    done = [r for r in records if r.status == "finished" and strategy_of(r.spec)]
    if not done:
        st.info("No finished run with a shape schedule is stored yet: press the button above.")
        return
    mine = [i for i in session if i in {r.id for r in done}]
    default = mine or [r.id for r in strategy_runs(records).values()]
    if st.session_state.get("diag_shape_runs_applied") != default:  # new runs finished: show them
        st.session_state.diag_shape_runs, st.session_state.diag_shape_runs_applied = default, default
    st.session_state.diag_shape_runs = [i for i in st.session_state.get("diag_shape_runs", []) if i in _names(done)]
    with st.expander(f"Runs shown: {len(st.session_state.diag_shape_runs)} (pick other stored runs)"):
        picked_ids = st.multiselect("Runs shown", [r.id for r in done], persist_state="session", key="diag_shape_runs",
                                    format_func=_names(done).get)
    picked = sorted((r for r in done if r.id in picked_ids),
                    key=lambda r: list(STRATEGIES).index(strategy_of(r.spec)))
    if not picked:
        return
    items = [(STRATEGIES[strategy_of(r.spec)][0],
              {**r.result, **figures.compile_totals(r.result.get("compile_events"))}) for r in picked]
    exports.show(st, diagnose_charts.side_by_side(items, STRATEGY_PANELS, title="The strategies side by side",
                                         subtitle="compilations and their time, then the steady speed over the "
                                                  "whole schedule"), key="diag_shape_summary")
    if verdict := compare_verdicts.strategy_verdict([(n, rec.spec, r) for (n, r), rec in zip(items, picked)]):
        st.markdown(verdict)
    # One lazy tab per run (two charts each, up to five strategies): only the open one's charts are drawn.
    labels = [f"{STRATEGIES[strategy_of(rec.spec)][0]} · {rec.id[-6:]}" for rec in picked]
    for rec, tab in zip(picked, st.tabs(labels, key="diag_shape_tab", on_change="rerun")):
        if tab.open:
            title, _, words = STRATEGIES[strategy_of(rec.spec)]
            with tab:
                st.markdown(f"#### {title}")
                st.caption(f"{words} · run {rec.id}: {plain(rec.label)}")
                show_schedule(rec, key=f"diag_shape_{rec.id}")


def show_schedule(rec: RunRecord, *, key: str) -> None:
    r = rec.result
    totals = figures.compile_totals(r.get("compile_events"))
    sizes = r.get("schedule_sizes") or []
    st.markdown(f"{totals['compilations']} compilation{'s' if totals['compilations'] != 1 else ''} for "
                f"{len(set(sizes))} distinct "  # "values of the caption length (tokens)": the dimension is singular
                + (f"values of the {r['schedule_dim']}" if r.get("schedule_dim") else "sizes")
                + (f" (padded to {r['schedule_buckets']})" if r.get("schedule_buckets") else "")
                + (". **The recompile limit was hit**: later new shapes ran eagerly." if r.get("recompile_limit_hit")
                   else "."))
    for line in stance_words.stance_words(r):  # what set_stance would have done to this schedule
        st.markdown(line)
    left, right = st.columns(2)
    exports.show(left, diagnose_charts.compile_timeline(r), key=f"{key}_timeline")
    exports.show(right, diagnose_charts.schedule_chart(r), key=f"{key}_schedule")


# --- cold vs loaded artifacts ---------------------------------------------------------------------

def caches_section(store: RunStore, records: list[RunRecord]) -> None:
    st.markdown("A **cold** start compiles everything from scratch. Loading **artifacts** starts from the compile "
                "artifacts an earlier run of the same settings saved (the Mega-Cache, "
                "`torch.compiler.load_cache_artifacts`, valid for the same torch, Triton and GPU), as a new machine "
                "that ships its cache would: the Run page's cache=artifacts. (Its cache=warm, this machine's own "
                "cache folder read again, is the other way to start warm: the Start-up tab's ladder times both.) "
                "**Regional** compilation compiles one repeated block and reuses it, so there is less to compile "
                "in the first place. The four-way runs all four, cold runs first.")
    cols = st.columns([1, 2])
    with cols[0]:
        model = pick_model("diag_cache_model")
    base = base_experiment(model, backend="inductor")
    if cols[1].button("Run the four-way", key="diag_cache_start", type="primary", icon=":material/play_arrow:"):
        # The cold runs first: each saves the artifacts its warm twin loads when its turn comes.
        _queue([base.replace(compile=scope, cache=cache) for cache in ("cold", "artifacts")
                for scope in ("whole", "regional")], store, key="diag_fourway")
    _waiting("diag_fourway", records, store)
    cells = diagnose_queries.four_way(records, base.to_dict())
    if not cells:
        st.caption(f"No run of these settings yet ({plain(base.label)}, whole or regional): the chart fills in as the "
                   "four-way's runs finish. Runs with other settings (another backend, batch or shape schedule) "
                   "compile something else and are not shown here.")
    exports.show(st, diagnose_charts.four_way_chart({k: rec.result.get("compile_s") for k, rec in cells.items()}),
                 key="diag_fourway_chart")
    if cells:
        st.caption("From runs " + ", ".join(f"{scope} {temp}: {rec.id}" for (scope, temp), rec in sorted(cells.items()))
                   + ".")
    for rec in cells.values():
        for note in rec.result.get("notes", []):
            if "artifacts" in note:
                st.caption(f"{rec.spec['compile']} {rec.spec['cache']}: {note}")


# --- one run -------------------------------------------------------------------------------------

def run_section(store: RunStore, records: list[RunRecord], opened: str | None) -> None:
    candidates = [r for r in records if r.status == "finished" or r.error_kind == "compile_error"]
    if not candidates:
        st.info("No finished run is stored yet.")
        return
    _pick("diag_run", [r.id for r in candidates], opened)
    names = {r.id: f"{r.label} · {r.id[-6:]} ({r.status})" for r in candidates}
    run_id = st.selectbox("Run", list(names), persist_state="session", key="diag_run", format_func=names.get,
                          help="Any stored run; the Compare page links here with its run chosen.")
    rec = store.get(run_id)
    if rec.status == "failed":
        results.show_failure(rec)
        return
    r = rec.result
    if "compiled" not in r.get("variants", ()):
        st.info("This run compiled nothing (compile=off): there are no graphs, breaks or generated code to show.")
        return
    words = graph_words.graph_words(r, rec.spec.get("backend"))
    st.markdown("".join(("\n" if w.startswith("- ") else "\n\n") + w for w in words))
    if r.get("graph_breaks"):
        show_breaks(r)
    if rec.spec.get("task") == "generate":  # a new prompt length: recompiles without a static cache, not with one
        generate.prompt_length_section(rec, records, lambda kv: _queue(
            [Experiment.from_dict(rec.spec).replace(kv_cache=kv)], store, key="diag_prompt"))
        _waiting("diag_prompt", records, store)
    left, right = st.columns(2)
    exports.show(left, diagnose_charts.kernels_chart(r), key="diag_run_kernels")
    exports.show(right, diagnose_charts.graph_ops_chart(r), key="diag_run_ops")
    if r.get("schedule"):
        show_schedule(rec, key="diag_run")
    else:
        exports.show(st, diagnose_charts.compile_timeline(r), key="diag_run_timeline")
    with st.container(border=True):
        ecosystem.tlparse_links(rec, store, key="diag_run")
    show_code(rec, store.code(rec.id))


def show_code(rec: RunRecord, sources: list[str]) -> None:
    st.markdown("#### The code Inductor generated")
    if not sources:
        backend = rec.spec.get("backend", "inductor")
        st.caption(f"None stored: only Inductor generates code, and this run used backend={backend}." if
                   backend != "inductor" else "None stored for this run.")
        return
    if st.session_state.get("diag_code_graph", 0) >= len(sources):  # another run, with fewer graphs
        st.session_state.diag_code_graph = 0
    graph = st.selectbox("Generated program", range(len(sources)), persist_state="session", key="diag_code_graph",
                         format_func=lambda i: f"Program {i + 1} of {len(sources)} · "
                                               f"{sources[i].count(chr(10)) + 1} lines",
                         help="One per graph Inductor compiled. In training each Dynamo graph gives two, its "
                              "forward and its backward (AOT autograd splits them), and a compiled optimizer step "
                              "one more; so this count can differ from Dynamo's graphs and from the compilations.")
    lines = sources[graph].splitlines()
    st.caption("A Python wrapper that allocates buffers and calls the generated kernels (C++ on the CPU, "
               "Triton on a GPU) in order; each kernel is one fused loop over several of the model's operations.")
    st.code("\n".join(lines[:CODE_LINES_SHOWN]), language="python", line_numbers=True, height=500)
    if len(lines) > CODE_LINES_SHOWN:
        with st.expander(f"The other {len(lines) - CODE_LINES_SHOWN} lines"):
            st.code("\n".join(lines[CODE_LINES_SHOWN:]), language="python", height=500)
    st.download_button("Download this graph's code", lambda: sources[graph], f"{rec.id}-graph{graph + 1}.py",
                       "text/x-python", key="diag_code_download", icon=":material/download:", on_click="ignore")
