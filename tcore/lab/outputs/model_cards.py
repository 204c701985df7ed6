"""Model files for the lab's own processes, which never import one: their cards, from the run store or from a
worker-like child that reads the file (tcore.worker.describe) in an environment without the lab's secrets.

install() hands sample_models the finder for this process's store; `files_allowed` says whether this process
may have a file read at all (the app: `allow_files` in compile-lab.toml; the command line: always). Where it may
not, only the cards workers already stored are used: a run stored from the command line shows on every page,
and nothing of its file runs in the app.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Callable

from tcore.lab.settings import private
from tcore.store import RunStore

DESCRIBE_TIMEOUT_S = 120.0


_FILES_ALLOWED: list[Callable[[], bool]] = []  # what install() was told, for files_allowed_here()


def install(store: RunStore, files_allowed: Callable[[], bool]) -> None:
    """From now on, this process finds a file model's card in `store`, or has one read where files are allowed."""
    from sample_models.sources import file_models

    file_models.card_finder = lambda name: find(name, store, files_allowed)
    _FILES_ALLOWED[:] = [files_allowed]


def files_allowed_here() -> bool:
    """Whether this process may have a model file run (read, or run by its workers): False until install() says."""
    return bool(_FILES_ALLOWED) and _FILES_ALLOWED[0]()


def find(name: str, store: RunStore, files_allowed: Callable[[], bool]) -> dict | None:
    from sample_models.sources import file_models

    stored = store.model_card(name)
    path = file_models.SOURCES_FILE.path(name.removeprefix("file:"))
    version = path.stat().st_mtime_ns if path.is_file() else None
    if stored is not None and (version is None or stored.get("mtime_ns") == version):
        return stored  # the file as a worker read it (or gone since: its runs still show)
    if not files_allowed():
        return stored or from_runs(name, store.model_specs(name))
    card = describe(name)
    keep(store, card)
    return card


def from_runs(name: str, specs: list[dict]) -> dict | None:
    """A card pieced together from the stored runs of `name` (runs stored before workers wrote cards): what their
    pages need to show them, nothing read from the file."""
    if not specs:
        return None
    presets = list(dict.fromkeys(s.get("preset", "default") for s in specs))
    batch = next((s["batch_size"] for s in specs if s.get("batch_size")), 2)
    return {"name": name, "ref": name.removeprefix("file:"), "title": f"{Path(name).name} (your file)",
            "description": "A model file of your own (described from its stored runs).", "presets": presets,
            "default_preset": {"cpu": presets[0], "cuda": presets[0]}, "default_batch": {"cpu": batch, "cuda": batch},
            "supports_channels_last": any(s.get("channels_last") for s in specs), "param_counts": {},
            "mtime_ns": None}


def describe(name: str) -> dict:
    """The card of file model `name`, read in a child process as a worker would (UnknownModel: what is wrong)."""
    from sample_models.sources import LAB, UnknownModel

    env = private.without_private(os.environ)  # run from the lab's folder, `-m` finds tcore there
    try:
        done = subprocess.run([sys.executable, "-m", "tcore.worker.describe", name], cwd=LAB, env=env,
                              capture_output=True, text=True, timeout=DESCRIBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UnknownModel(f"{name}: reading the file took over {DESCRIBE_TIMEOUT_S:.0f} s") from None
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        answer = {}
    if "card" in answer:
        return answer["card"]
    raise UnknownModel(answer.get("error") or f"{name}: the process that reads it ended with code {done.returncode}: "
                       f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}")


def keep(store: RunStore, card: dict) -> None:
    """Store a card a worker sent; a store that cannot take it never costs a run its result."""
    try:
        store.save_model_card(card)
    except Exception:  # noqa: BLE001 (the card is for pages; the run's own record matters more)
        traceback.print_exc(limit=1)
