"""The experiment knobs: the widgets, each captioned with its field's own sentence (tcore.experiment.spec), and the
Experiment their values build (build), checked against this lab's limits (ui.panels.knob_values) and this machine.

Widgets carry explicit keys under a page prefix ("run_", "sweep_"), so pages don't collide and
tests can set them. Defaults follow the device (tcore.experiment.device.practical_defaults): on a CPU the tiny
preset in float32 and a short timed stage; on a GPU the GPU preset, bf16 weights for inference or
autocast for training, channels_last for a convolutional model, and a longer timed stage.
"""
from __future__ import annotations

import streamlit as st

import sample_models
from tcore.experiment.device import practical_defaults
from tcore.experiment.spec import (
    CHOICES,
    DEFAULTS,
    INDUCTOR_OPTIONS,
    Experiment,
    SpecError,
    choice_docs,
    describe,
)
from tcore.figures import rerun
from tcore.host import features, machine
from tcore.lab import api
from tcore.store import RunStore
from ui.panels import model_picker
from ui.panels.generate import LENGTHS_FOR
from ui.panels.knob_values import cost_note, lab_limit, longest_run_min, refused_by_lab
from ui.words import sweep_matrix

# Knobs of the page that are not fields of the experiment; every field explains itself in tcore.experiment.spec.
PAGE_KNOBS = {
    "timeout_min": "A run still going after this long is stopped and recorded as timed out.",
}

DYNAMIC_NAMES = sweep_matrix.DYNAMIC_NAMES
# The radio holds the names, not None/True/False: Streamlit reads a radio whose value is None as one with nothing
# selected, so "auto" (dynamic=None) showed no option chosen, and clicking it emptied all three.
DYNAMIC_VALUES = {name: value for value, name in DYNAMIC_NAMES.items()}
PRECISION_NAMES = {"fp32": "fp32 (TF32 off)", "tf32": "fp32 with TF32 matmuls", "amp-bf16": "AMP bf16 (fp32 weights)",
                   "amp-fp16": "AMP fp16 (fp32 weights)", "bf16": "bf16 weights", "fp16": "fp16 weights"}


def explain(name: str, value=None) -> str:
    """The sentence a knob's caption shows: for a field with choices the chosen value's, else the field's own."""
    if name in PAGE_KNOBS:
        return PAGE_KNOBS[name]
    return describe(name, value) if choice_docs(name) else describe(name)


def target_device(device: str) -> str:
    """The device whose defaults apply: what 'auto' resolves to here (cuda is refused later if absent)."""
    return "cuda" if device == "cuda" or (device == "auto" and machine.cuda_available()) else "cpu"


# A generation's lengths follow the device where a page has them as number boxes (ui.panels.generate.knobs); the
# Sweep page's "sweep_new_tokens" is an axis, a list of lengths, under the same key.
LENGTHS = ("prompt_len", "new_tokens")
LENGTH_BOXES = ("run_",)


def _reset_sizes(prefix: str) -> None:
    """Model or device changed: take what a practitioner would pick for that model on the device."""
    dev = target_device(st.session_state[prefix + "device"])
    task = st.session_state.get(prefix + "task", "inference")
    for name, value in practical_defaults(st.session_state[prefix + "model"], dev, task).items():
        if name not in LENGTHS or prefix in LENGTH_BOXES:
            st.session_state[prefix + name] = value
    # a default past the lab's limit would open refused
    _set_within_limit(prefix + "batch_size", st.session_state[prefix + "batch_size"], lab_limit("max_batch_size"))
    # A CPU step of even a tiny model takes ~0.1-0.4 s on two cores: 2 s per variant keeps a run under a minute.
    st.session_state[prefix + "timed_s"] = 2.0 if dev == "cpu" else 4.0
    # At least 6 paired rounds of 0.2 s (the fewest whose interval reaches 95%); more until theirs is within ± 3%, the
    # rounds' share of the ± 5% target (tcore.figures.paired.rounds_target).
    st.session_state[prefix + "rounds"] = DEFAULTS["rounds"]
    st.session_state[prefix + "round_s"] = DEFAULTS["round_s"]
    st.session_state[prefix + "target_pct"] = DEFAULTS["target_pct"]


def _device_changed(prefix: str) -> None:
    """Device changed: take that device's practical sizes, and keep what changed for the page to say (a GPU's
    preset, batch and precision arrived without a word, and went back on 'auto')."""
    names = ("preset", "batch_size", "precision", "channels_last", "timed_s")
    before = {n: st.session_state.get(prefix + n) for n in names}
    _reset_sizes(prefix)
    changed = [f"{n} {before[n]} → {st.session_state[prefix + n]}" for n in names
               if before[n] is not None and before[n] != st.session_state[prefix + n]]
    if changed:
        dev = target_device(st.session_state[prefix + "device"])
        st.session_state[prefix + "device_changed"] = (
            f"Device {st.session_state[prefix + 'device']} takes the {'GPU' if dev == 'cuda' else 'CPU'}'s practical "
            f"settings: {', '.join(changed)}. Change them back below if you want the others.")


def _reset_precision(prefix: str) -> None:
    """Task changed: inference and training have different practical precisions on a GPU, a generation on the
    CPU writes fewer tokens than on a GPU, and a generation runs at batch 1. The batch follows the task where it is
    still a practical one of this model (one the person typed stays): else generate read bs8 when the task was
    picked after the model and bs1 when before, since a model's pick sets the batch of the task shown."""
    dev = target_device(st.session_state[prefix + "device"])
    model = st.session_state[prefix + "model"]
    defaults = practical_defaults(model, dev, st.session_state[prefix + "task"])
    for name in ("precision", *(LENGTHS if prefix in LENGTH_BOXES else ())):
        st.session_state[prefix + name] = defaults[name]
    most = lab_limit("max_batch_size")

    def capped(batch: int) -> int:
        return batch if most is None else min(batch, most)

    practical = {capped(practical_defaults(model, dev, task)["batch_size"]) for task in CHOICES["task"]}
    if st.session_state.get(prefix + "batch_size") in practical:
        _set_within_limit(prefix + "batch_size", defaults["batch_size"], most)


def _defaults(prefix: str) -> None:
    if prefix + "model" not in st.session_state:
        st.session_state[prefix + "model"] = DEFAULTS["model"]
        st.session_state[prefix + "device"] = "auto"
        _reset_sizes(prefix)


# The settings of the Run and Sweep pages (prefix + name) and the Sweep page's axes.
SETTINGS = ("model", "preset", "batch_size", "task", "precision", "device", "compile", "mode", "dynamic", "fullgraph",
            "error_on_graph_break",
            "backend", "compile_optimizer", "channels_last", "skip_full_mask", "graph_break", "cache", "timed_by",
            "timed_s",
            "timed_steps", "rounds", "round_s", "target_pct", "warmup_steps", "torch_trace", "timeout_min",
            "kv_cache", "prompt_len", "new_tokens", *INDUCTOR_OPTIONS)
SWEEP_AXES = ("sweep_compile", "sweep_mode", "sweep_dynamic", "sweep_opt", "sweep_precisions", "sweep_layouts",
              "sweep_backend", "sweep_kv_cache", "sweep_batches", "sweep_prompt_lens", "sweep_new_tokens")


KEPT = "kept_settings"  # session_state: a copy of every setting, under a key no widget owns
SAVED = "saved_settings"  # session_state: the copy last written to the store for this person


# The Compare page's choices, kept the same way: its filters and the runs chosen side by side.
COMPARE_CHOICES = ("compare_model", "compare_device", "compare_status", "compare_runs")


def kept_keys(prefix: str | None = None) -> list[str]:
    """The session_state keys of every setting the Run, Sweep and Compare pages keep; of one page's (its prefix,
    "run_", "sweep_" or "compare_") if given."""
    return [f"{p}{name}" for p in ("run_", "sweep_") if prefix in (None, p) for name in SETTINGS] + (
        [*SWEEP_AXES, LENGTHS_FOR] if prefix in (None, "sweep_") else []) + (
        list(COMPARE_CHOICES) if prefix in (None, "compare_") else [])


def keep_settings(store: RunStore, owner: str, *, drawing: str | None = None) -> None:
    """Keep the pages' settings while another page is shown, and across a reload (app.py calls this on every run,
    once `owner` is known). `drawing`: the prefix of the page about to run ("run_", "sweep_", "compare_"), None for a
    page that draws none of these.

    Streamlit drops a widget's value from the session when a run does not draw that widget, so a visit to
    Compare would put the Run page back to its defaults; storing each value again as plain state keeps it. So each
    value is also copied under KEPT, which no widget owns and Streamlit never drops, and a value found missing comes
    back from that copy.

    Only the page that draws a setting's widget copies its value into KEPT. On another page the session may hold a
    widget's default in place of the person's value: a run of the Run page cut short (a click on Compare while a
    loaded machine still read hf:gpt2's sizes) leaves its widgets registered with no value from the browser, so the
    Compare run read both token boxes at their minimum, 0, and kept that: the Run page came back at the model's
    128+256 tokens instead of the CPU's 32+32 (the batch box came back at 1 the same way after a live fragment's
    redraws). There, the kept values are only put back.

    A reload is a new session, which has none of that: so the copy is also kept in the store under the person's
    owner id, the way their name is (the address and the store carry the id), and a new session starts from it.
    """
    if KEPT not in st.session_state:  # a new session: a reload, a bookmark, a new tab
        saved = restorable(store.people.settings_of(owner) or {})
        st.session_state[KEPT], st.session_state[SAVED] = dict(saved), dict(saved)
    kept = st.session_state[KEPT]
    own = set(kept_keys(drawing)) if drawing else set()
    for key in kept_keys():
        if key in own and key in st.session_state:
            kept[key] = st.session_state[key]
        if key in kept:
            st.session_state[key] = kept[key]
    if kept != st.session_state.get(SAVED) and store.read_only is None:
        store.people.keep_settings_of(owner, kept)
        st.session_state[SAVED] = dict(kept)


def restorable(saved: dict) -> dict:
    """The kept settings a new session may start from: those of a page whose model can still be built here (a model
    file gone, or a name another version knew, would stop the page), and only keys the pages keep today."""
    keys = set(kept_keys())
    out = {}
    for prefix in ("run_", "sweep_"):
        mine = {k: v for k, v in saved.items() if k.startswith(prefix) and k in keys}
        try:
            sample_models.get(mine.get(prefix + "model", DEFAULTS["model"]))
        except ValueError:
            continue  # the page starts from its defaults, as for someone new
        out.update(mine)
    # runs deleted since, and filter values no run has now, the Compare page leaves out as it draws
    out.update({k: v for k, v in saved.items() if k in COMPARE_CHOICES and isinstance(v, list)})
    return out


def _within_limit(key: str, most: int | None) -> None:
    """Bring a widget's kept value down to `most` where that limit is new to this session (the first draw, or the
    instructor lowered it since), so what the box shows is what will run. A value typed past an unchanged limit is
    left as typed: build() refuses it with the reason. (The boxes have no maximum of their own: a browser refuses a
    number past one without telling the server, which then ran the value from before.)

    A value the limit lowered comes back as far as a raised or lifted limit allows, unless the person has changed it
    since: an instructor's limit for a quarter of an hour (a 30 s longest run) left a participant's "Stop the run
    after" at 1 min for the rest of the day, with no word, and their next run timed out at 60 s."""
    seen, before = key + "_limit_seen", key + "_before_limit"
    if st.session_state.get(seen, "unset") == most:
        return
    st.session_state[seen] = most
    value = st.session_state.get(key)
    lowered = st.session_state.pop(before, None)  # (the value before a limit lowered it, what it lowered it to)
    if lowered is not None and value != lowered[1]:
        lowered = None  # changed since by the person: theirs
    elif lowered is not None and (most is None or most > value):
        back = lowered[0] if most is None else min(lowered[0], most)
        st.session_state[key + "_lowered"] = (f"Back to {back:,}, from {value:,}: this lab's limit that lowered it "
                                              f"{'is gone' if most is None else f'was raised to {most:,}'}.")
        _set_kept(key, back)
        value = back
        lowered = (lowered[0], back) if back < lowered[0] else None  # the rest comes back with the limit
    if most is not None and value is not None and value > most:
        # said under the box, where the number changed (a toast alone goes by unseen, and the number changes silently)
        st.session_state[key + "_lowered"] = (f"Lowered from {value:,} to {most:,}: this lab's limit, which the "
                                              "instructor sets. It comes back when the limit is raised, unless you "
                                              "change it.")
        lowered = (lowered[0] if lowered else value, most)
        _set_kept(key, most)
        st.toast(f"Lowered to {most}, this lab's limit.")
    if lowered is not None:
        st.session_state[before] = lowered


def _set_within_limit(key: str, value: int, most: int | None) -> None:
    """Set a box to a default `value`, brought down to `most`: one brought down comes back with the limit, as a value
    _within_limit lowered does."""
    st.session_state.pop(key + "_before_limit", None)
    if most is not None and value > most:
        st.session_state[key + "_before_limit"] = (value, most)
        value = most
    _set_kept(key, value)


def _set_kept(key: str, value) -> None:
    """Set a box's value and its kept copy (keep_settings) together: the copy is taken as a page run starts, before the
    limit lowers or brings back the value, and a page switch then put the copy's stale value back (walk 6: "Stop the
    run after" went 10, then 1 again, after the instructor lifted the 30 s limit)."""
    st.session_state[key] = value
    if KEPT in st.session_state and key in kept_keys():
        st.session_state[KEPT][key] = value


def _say_lowered(key: str) -> None:
    """Under a box that _within_limit lowered: from what, to what and why; once."""
    if lowered := st.session_state.pop(key + "_lowered", None):
        st.info(lowered, icon=":material/vertical_align_bottom:")


def model_knobs(prefix: str) -> dict:
    """Model, preset, batch size, precision, task and device, each with its explanation."""
    _defaults(prefix)
    model = model_picker.model_picker(prefix, on_pick=_reset_sizes)
    with st.spinner(f"Reading {model}'s sizes..."):  # a real model is built once on "meta" (no memory)
        entry = sample_models.get(model)
    st.caption(entry.description)
    preset = st.selectbox("Preset", list(entry.presets), key=prefix + "preset",
                          format_func=lambda p: f"{p}: {_millions(entry.param_count(p))} parameters")
    st.caption(explain("preset"))
    most = lab_limit("max_batch_size")
    _within_limit(prefix + "batch_size", most)
    # No min_value or max_value: a browser refuses a number past them without telling the page, which went on
    # showing Run for the value from before; build() refuses it instead, with the reason.
    batch = st.number_input("Batch size (samples per step)", step=1, key=prefix + "batch_size",
                            help=f"At most {most}: this lab's limit (the instructor sets it)." if most else None)
    _say_lowered(prefix + "batch_size")
    st.caption(explain("batch_size"))
    task = st.radio("Task", CHOICES["task"], key=prefix + "task", horizontal=True, on_change=_reset_precision,
                    args=(prefix,))
    st.caption(explain("task", task))
    precision = st.selectbox("Precision", CHOICES["precision"], key=prefix + "precision",
                             format_func=PRECISION_NAMES.get)
    st.caption(explain("precision", precision))
    device = st.radio("Device", CHOICES["device"], key=prefix + "device", horizontal=True, on_change=_device_changed,
                      args=(prefix,))
    st.caption(explain("device", device))
    if changed := st.session_state.pop(prefix + "device_changed", None):
        st.info(changed, icon=":material/sync_alt:")
    return dict(model=model, preset=preset, batch_size=batch, precision=precision, task=task, device=device)


def compile_knobs(prefix: str, model: str, task: str) -> dict:
    """Scope, mode, dynamic, fullgraph, backend, optimizer compile, channels_last, graph break."""
    entry = sample_models.get(model)
    # The default through session_state, not index=: a suggestion's "Queue it" or a restored setting writes the
    # key too, and a widget given both logs Streamlit's "created with a default value" warning on every such run.
    st.session_state.setdefault(prefix + "compile", CHOICES["compile"][1])
    # An option this torch lacks stays in the list, labelled with the torch that brings it, and says so when picked.
    needs = {"hierarchical": "nested_compile_region"}
    lacking = {scope: features.missing(name) for scope, name in needs.items()}
    names = {"off": "off (eager)", "whole": "whole model", "regional": "regional (blocks)",
             "hierarchical": "hierarchical (nested regions)"}
    scope = st.radio("Compile", CHOICES["compile"], key=prefix + "compile", horizontal=True,
                     format_func=lambda c: names[c] + (f" (needs torch {features.FEATURES[needs[c]].brought_by})"
                                                      if lacking.get(c) else ""))
    st.caption(explain("compile", scope))
    if lacking.get(scope):
        st.warning(lacking[scope] + ": a run with it stops at the compile and says so", icon=":material/block:")
    off = scope == "off"
    backend = st.selectbox("Backend", CHOICES["backend"], key=prefix + "backend", disabled=off)
    st.caption(explain("backend", backend))
    inductor = backend == "inductor"
    mode = st.selectbox("Mode", CHOICES["mode"], key=prefix + "mode", disabled=off or not inductor)
    st.caption(explain("mode", mode) if inductor else
               f"Mode tunes Inductor's code: backend={backend} takes none (torch.compile refuses a mode for other "
               "backends), so it is greyed out here.")
    if st.session_state.get(prefix + "dynamic") not in DYNAMIC_VALUES:  # first draw (or a None kept from before)
        st.session_state[prefix + "dynamic"] = DYNAMIC_NAMES[DEFAULTS["dynamic"]]
    dynamic = DYNAMIC_VALUES[st.radio("Dynamic shapes", list(DYNAMIC_VALUES), key=prefix + "dynamic",
                                      horizontal=True, disabled=off)]
    st.caption(explain("dynamic", dynamic))
    fullgraph = st.toggle("fullgraph: no graph breaks allowed", key=prefix + "fullgraph", disabled=off)
    st.caption(explain("fullgraph"))
    no_error_setting = features.missing("error_on_graph_break")  # greyed, with the torch that brings it
    error_on_break = st.toggle("error_on_graph_break: a break is an error" + (
        f" (needs torch {features.FEATURES['error_on_graph_break'].brought_by})" if no_error_setting else ""),
        key=prefix + "error_on_graph_break", disabled=off or fullgraph or bool(no_error_setting))
    st.caption(no_error_setting or explain("error_on_graph_break"))
    error_on_break = error_on_break and not (off or fullgraph or no_error_setting)
    training = task == "training"
    opt = st.toggle("Compile the optimizer step", key=prefix + "compile_optimizer", disabled=not training)
    st.caption(explain("compile_optimizer") + ("" if training else " Switch Task to training to use it."))
    # A generation has no image layout to change, and its fullgraph decode step cannot hold the break: not drawn.
    generating = task == "generate"
    cl = gb = False
    if not generating:
        cl = st.toggle("channels_last memory format", key=prefix + "channels_last",
                       disabled=not entry.supports_channels_last)
        st.caption(explain("channels_last") + (CHANNELS_LAST_LESSON if entry.supports_channels_last else ""))
    hf = model.startswith("hf:")
    skip = st.toggle("Skip an all-true attention mask", key=prefix + "skip_full_mask", disabled=not hf or off)
    st.caption(explain("skip_full_mask") + ("" if hf else " Pick a transformers model (hf:NAME) to use it."))
    if not generating:
        gb = st.toggle("Insert a graph break", key=prefix + "graph_break")
        st.caption(explain("graph_break"))
    if gb and fullgraph and not off:
        st.warning("This run will fail, on purpose: fullgraph=True makes any graph break an error, and the "
                   "break switched on here is one. Run it to see the error Dynamo gives and the line it names; "
                   "turn fullgraph off to see the break split the graph instead.", icon=":material/error:")
    cache = cache_knob(prefix)
    options = inductor_knobs(prefix, disabled=backend != "inductor" or not (not off or (opt and training)),
                             training=training)
    # A greyed-out knob does nothing: the experiment gets its neutral value, not the stale widget state.
    compiler = dict(mode=mode if inductor else DEFAULTS["mode"], dynamic=dynamic, fullgraph=fullgraph, backend=backend,
                    error_on_graph_break=error_on_break) if not off else {}
    return dict(compile=scope, **compiler, compile_optimizer=opt and training,
                channels_last=cl and entry.supports_channels_last, skip_full_mask=skip and hf and not off,
                graph_break=gb, cache=cache, **options)


def inductor_knobs(prefix: str, *, disabled: bool, training: bool) -> dict:
    """Freezing, coordinate-descent tuning and fusion: Inductor options, in an expander; {} while they cannot apply."""
    with st.expander("Inductor options: freezing, tuning, fusion"):
        if disabled:
            st.caption("These tune Inductor's code: they need the inductor backend and something compiled.")
        values = {}
        for name in INDUCTOR_OPTIONS:
            # Defaults through the session, not value=: keep_settings stores every value again on each run, and a
            # widget given both logs "created with a default value but also had its value set" in a live session.
            st.session_state.setdefault(prefix + name, DEFAULTS[name])
            if name == "max_fusion_size":
                values[name] = st.number_input("Largest fusion (operations per kernel)", step=8, key=prefix + name,
                                               disabled=disabled)  # no bounds of its own: see model_knobs
            else:
                default = DEFAULTS[name]
                off = disabled or (name == "freezing" and training)
                values[name] = st.toggle(OPTION_TITLES[name], key=prefix + name, disabled=off)
                values[name] = default if off else values[name]
            st.caption(explain(name) + (" Switch Task to inference to use it." if name == "freezing" and training
                                        else ""))
    return {} if disabled else values


OPTION_TITLES = {"freezing": "Freezing (weights as constants)", "coordinate_descent": "Coordinate-descent tuning",
                 "epilogue_fusion": "Epilogue fusion into matmul templates",
                 "aggressive_fusion": "Aggressive fusion"}
CHANNELS_LAST_LESSON = (" On a GPU it is on by default, because that is how people tune a CNN's eager code; "
                        "turn it off to see the larger speedup over NCHW eager, most of which is this layout "
                        "change, which Inductor makes on its own.")


def cache_knob(prefix: str) -> str:
    cache = st.radio("Compile cache", CHOICES["cache"], key=prefix + "cache", horizontal=True)
    st.caption(explain("cache", cache))
    return cache


# A solid figure on the CPU: every one of these seconds per variant, in the default 0.2 s rounds (about 25 pairs).
# Longer rounds read worse there: the CPU's clock and its neighbours drift within a second-long round.
SOLID_CPU_TIMED_S = 10.0


def _solid_cpu(prefix: str) -> None:
    """The button's callback (before the boxes exist, so it may set them): the CPU's solid-figure measurement."""
    st.session_state[prefix + "timed_by"] = "seconds"
    st.session_state[prefix + "timed_s"] = SOLID_CPU_TIMED_S
    st.session_state[prefix + "round_s"] = DEFAULTS["round_s"]
    st.session_state[prefix + "target_pct"] = 0.0


def solid_cpu_offer(prefix: str) -> None:
    """On the CPU: a button that sets the measurement a solid figure needs, and what else it needs, said plainly."""
    if target_device(st.session_state.get(prefix + "device", "auto")) != "cpu":
        return
    solid = (st.session_state.get(prefix + "timed_s") == SOLID_CPU_TIMED_S
             and st.session_state.get(prefix + "target_pct") == 0.0)
    st.button("Measure for a solid figure", key=prefix + "solid_cpu", on_click=_solid_cpu, args=(prefix,),
              icon=":material/straighten:", disabled=solid,
              help=f"Times each variant for all of {SOLID_CPU_TIMED_S:g} s (about a minute a run with its compile).")
    st.caption(f"**A solid figure on this CPU** needs three things: a measurement long enough "
               f"({SOLID_CPU_TIMED_S:g} s a variant, all of it: {'set' if solid else 'the button sets it'}), a quiet "
               "machine (nothing else busy on its cores while it times; the run says if something was), and this "
               "machine's spread between fresh processes, which the lab learns once "
               f"{rerun.MIN_HISTORY} earlier runs of the setting are stored, or from `python -m tcore calibrate` once. "
               + default_spread_words())


def default_spread_words() -> str:
    """What the CPU's default spread between processes means for a rerun, in the figure and the words that the outlook
    before a run uses (tcore.figures.rerun.outlook): one figure for one question."""
    reach = rerun.outlook([], "cpu").reach_pct
    return (f"Until then the lab assumes a {rerun.starting_between('cpu')[0]:g}% default: "
            f"{rerun.HOLD_SHARE:.0%} of reruns should land within ± {reach:.0f}% of their median.")


def measure_knobs(prefix: str, *, with_cache: bool = True) -> dict:
    """The timed stage, warm-up, time limit and (unless the page shows it elsewhere) the cache, in an expander."""
    solid_cpu_offer(prefix)
    with st.expander("Advanced: how long and how carefully to measure"):
        by = st.radio("Timed stage length", ["seconds", "steps"], key=prefix + "timed_by", horizontal=True)
        # Both stay on the page (one greyed out): a widget left out of a rerun loses its value.
        # The boxes have no bounds of their own (see model_knobs): the spec refuses a value outside its field's.
        timed_s = st.number_input("Timed seconds per variant, at most (s)", step=0.5,
                                  key=prefix + "timed_s", disabled=by != "seconds")
        st.caption(explain("timed_s"))
        st.session_state.setdefault(prefix + "timed_steps", 6)  # what "steps" starts at (the spec's default is seconds)
        timed_steps = st.number_input("Timed steps per variant", step=1,
                                      key=prefix + "timed_steps", disabled=by != "steps")
        st.caption(explain("timed_steps"))
        rounds = st.number_input("Rounds", step=1, key=prefix + "rounds")
        st.caption(explain("rounds"))
        st.session_state.setdefault(prefix + "round_s", DEFAULTS["round_s"])
        st.session_state.setdefault(prefix + "target_pct", DEFAULTS["target_pct"])
        round_s = st.number_input("Seconds per round, each variant (s)", step=0.05,
                                  key=prefix + "round_s", disabled=by != "seconds")
        st.caption(explain("round_s"))
        target_pct = st.number_input("Aim the speedup's interval within ± (%)", step=0.5,
                                     key=prefix + "target_pct", disabled=by != "seconds")
        st.caption(explain("target_pct"))
        st.session_state.setdefault(prefix + "warmup_steps", DEFAULTS["warmup_steps"])
        warmup = st.number_input("Warm-up steps", step=1, key=prefix + "warmup_steps")
        st.caption(explain("warmup_steps"))
        st.session_state.setdefault(prefix + "torch_trace", DEFAULTS["torch_trace"])
        trace = st.toggle("Record a TORCH_TRACE for tlparse", key=prefix + "torch_trace")
        st.caption(explain("torch_trace"))
        cache = cache_knob(prefix) if with_cache else None
        longest = longest_run_min()
        _within_limit(prefix + "timeout_min", longest)
        st.session_state.setdefault(prefix + "timeout_min", min(15, longest))
        timeout = st.number_input("Stop the run after (min)", step=1, key=prefix + "timeout_min",
                                  help=f"At most {longest} min: this lab's longest run.")
        _say_lowered(prefix + "timeout_min")
        st.caption(explain("timeout_min"))
    # As typed (None for an emptied box): the spec checks each field's bounds, build() the time limit.
    knobs = dict(timed_s=timed_s, rounds=rounds, round_s=round_s, target_pct=target_pct,
                 timed_steps=(timed_steps or 0) if by == "steps" else None, warmup_steps=warmup,
                 torch_trace=bool(trace), timeout_min=timeout)
    return knobs if cache is None else {**knobs, "cache": cache}


def build(values: dict, unpicked: str | None = None
          ) -> tuple[Experiment | None, list[str], str | None, api.Checked | None]:
    """(experiment, notes, None, checked), or (None, [], why these values cannot run, None), or (None, [],
    `unpicked`, None) while the model list has no pick (unpicked(prefix)). The notes say which knobs do nothing here,
    and what a run far past the model's practical batch will cost (cost_note). `checked`: the device check's answer,
    which the page hands to what it calls next (the outlook, the queue), so a submit checks the device once.
    `values` may hold the page's time limit (timeout_min)."""
    if unpicked:
        return None, [], unpicked, None
    values = dict(values)
    timeout = {"timeout_min": values.pop("timeout_min")} if "timeout_min" in values else {}
    try:
        refused_by_lab(values, **timeout)
        exp = Experiment(**values)
        device, notes = api.preflight(exp)  # the device check, once: cost_note is told its answer
    except SpecError as e:  # returned for the page to show: the message says what to change
        return None, [], str(e), None
    return exp, notes + ([note] if (note := cost_note(exp, device)) else []), None, (device, notes)


def _millions(n: int) -> str:
    return f"{n / 1e9:.1f} B" if n >= 1e9 else f"{n / 1e6:.2f} M" if n < 1e7 else f"{n / 1e6:.0f} M"
