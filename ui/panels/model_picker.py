"""The model picker of the Run and Sweep pages: a source (the built-ins, a library, your file), then a name from a
searchable list, and why nothing can run while the list on show has no pick (unpicked).

Keys sit under the page's prefix, as the other knobs' do (ui.panels.knobs, which draws it inside its model knobs).
"""
from __future__ import annotations

from typing import Callable

import streamlit as st

import sample_models
from tcore.lab import api

SOURCE_TITLES = {"builtin": "built-in", "torchvision": "torchvision", "timm": "timm", "hf": "transformers (hf:)",
                 "diffusers": "diffusers", "file": "your file"}
# What a source starts on when it is picked: small, quick on a CPU, and a fair first look at the library.
SOURCE_FIRST = {"builtin": "captioner", "torchvision": "torchvision:resnet18", "timm": "timm:efficientnet_b0",
                "hf": "hf:gpt2", "diffusers": "diffusers:flux", "file": "file:examples/my_model.py"}
SHOWN_NAMES = 300  # a selectbox of more is hard to read: the search narrows it


@st.cache_data(show_spinner="Listing the models...")
def catalog(source: str, pattern: str) -> list[str]:
    """Model names of one source (imports its library once in this process; the page imports none)."""
    return sample_models.catalog(source, pattern)


def _pick(prefix: str, name: str, on_pick: Callable[[str], None]) -> None:
    """Take model `name` and, through on_pick, its practical sizes; a name that cannot be built stays unpicked, with
    the reason."""
    try:
        sample_models.get(name)
    except ValueError as e:  # unknown name, a file without the interface, a download it wanted
        st.session_state[prefix + "model_error"] = str(e)
        return
    st.session_state.pop(prefix + "model_error", None)
    st.session_state[prefix + "model"] = name
    on_pick(prefix)


def _source_changed(prefix: str, on_pick: Callable[[str], None]) -> None:
    source = st.session_state[prefix + "source"]
    if source != "file" or _files_allowed():
        _pick(prefix, SOURCE_FIRST[source], on_pick)


def _picked(prefix: str, key: str, source: str, on_pick: Callable[[str], None]) -> None:
    # The browser may send back a list it drew for another source (seen in Chromium: picking "your file" after
    # timm, then transformers, fired timm's list again): only the source on show picks.
    if st.session_state.get(key) and st.session_state.get(prefix + "source") == source:
        _pick(prefix, st.session_state[key], on_pick)


def _file_given(prefix: str, on_pick: Callable[[str], None]) -> None:
    _pick(prefix, sample_models.sources.file_model(st.session_state[prefix + "file_path"].strip()), on_pick)


def _files_allowed() -> bool:
    return api.files_allowed()


def model_picker(prefix: str, on_pick: Callable[[str], None]) -> str:
    """Source, then a name: the built-ins, a searchable list of a library's models, or a path to your file.
    on_pick(prefix) runs when a model is taken, to bring its practical sizes (ui.panels.knobs)."""
    model = st.session_state[prefix + "model"]
    st.session_state.pop(prefix + "unpicked", None)
    if prefix + "source" not in st.session_state:
        st.session_state[prefix + "source"] = model.partition(":")[0] if ":" in model else "builtin"
    source = st.radio("Source", list(SOURCE_TITLES), key=prefix + "source", horizontal=True,
                      format_func=SOURCE_TITLES.get, on_change=_source_changed, args=(prefix, on_pick))
    if source == "builtin":
        if sample_models.is_builtin(model):
            st.session_state[prefix + "builtin"] = model
        return st.selectbox("Model", list(sample_models.MODELS), key=prefix + "builtin", on_change=_picked,
                            args=(prefix, prefix + "builtin", "builtin", on_pick),
                            format_func=lambda m: sample_models.get(m).title)
    if source == "file":
        if not _files_allowed():  # said, and nothing runs; the rest of the page (the queue, your runs) stays
            st.info(_files_off(), icon=":material/lock:")
            st.session_state[prefix + "unpicked"] = (
                "**Your own file is off in this lab** (why: under Source). Pick another source to run a model; the "
                f"sizes below are still {model}'s.")
            return model
        st.text_input("Model file (.py)", value=model.removeprefix("file:") if model.startswith("file:") else
                      SOURCE_FIRST["file"].removeprefix("file:"), key=prefix + "file_path",
                      on_change=_file_given, args=(prefix, on_pick),
                      help=sample_models.sources.FILE_INTERFACE)
    else:
        # live: the search applies at a pause in the typing, not only at Enter, so the list, the "Pick a model"
        # line and "Will run" follow what is typed (before, "Will run" named the earlier model until Enter)
        search = st.text_input("Search names", key=f"{prefix}search_{source}", live=True,
                               placeholder="part of a name, or a glob such as convnext*")
        names = catalog(source, search.strip())
        shown = names[:SHOWN_NAMES]
        key = f"{prefix}pick_{source}_{search.strip()}"
        chosen = st.selectbox("Model", shown, index=shown.index(model) if model in shown else None, key=key,
                              placeholder=f"{matches(len(names))}: pick one" if names else "no match: search again",
                              on_change=_picked, args=(prefix, key, source, on_pick))
        if len(names) > SHOWN_NAMES:
            st.caption(f"{matches(len(names))}; the first {SHOWN_NAMES} are listed: search to narrow them.")
        if chosen is None:  # the list on show does not hold the model picked before: nothing is picked yet
            st.session_state[prefix + "unpicked"] = (
                f"**Pick a model**: the search lists {matches(len(names))} and none is picked yet. "
                f"Nothing runs until you pick one (the sizes below are still {model}'s).")
    if error := st.session_state.get(prefix + "model_error"):
        st.error(error)
    return st.session_state[prefix + "model"]


def matches(n: int) -> str:
    """'1 match', '5 matches', 'no match'."""
    return "no match" if n == 0 else f"{n:,} match" + ("" if n == 1 else "es")


def unpicked(prefix: str) -> str | None:
    """Why nothing can run yet when the model list on show has no pick (drawn by model_picker), else None.

    Without it a search that listed other names kept the model picked before, and Run ran a model the person
    had searched away from."""
    return st.session_state.get(prefix + "unpicked")


def _files_off() -> str:
    return api.FILES_OFF
