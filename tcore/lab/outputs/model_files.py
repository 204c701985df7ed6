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
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Callable

from tcore.host import processes
from tcore.lab.settings import private
from tcore.store import RunStore

DESCRIBE_TIMEOUT_S = 120.0
STDERR_TAIL_BYTES = 64 * 1024  # of a describe child's stderr, kept for the message; the rest is read and dropped

_FILES_ALLOWED: list[Callable[[], bool]] = []  # what install() was told, for files_allowed_here()
_FAILED: dict[tuple[str, int | None], tuple[str, float | None]] = {}  # (path, mtime_ns) -> (message, timeout_s)


def install(store: RunStore, files_allowed: Callable[[], bool], time_limit_s: float | None = None) -> None:
    """From now on, this process finds a file model's card in `store`, or has one read where files are allowed
    (in at most `time_limit_s`, the run's time limit where it is known)."""
    from sample_models.sources import file_models

    file_models.card_finder = lambda name: find(name, store, files_allowed, time_limit_s)
    _FILES_ALLOWED[:] = [files_allowed]


def files_allowed_here() -> bool:
    """Whether this process may have a model file run (read, or run by its workers): False until install() says."""
    return bool(_FILES_ALLOWED) and _FILES_ALLOWED[0]()


def find(name: str, store: RunStore, files_allowed: Callable[[], bool],
         time_limit_s: float | None = None) -> dict | None:
    from sample_models.sources import file_models

    stored = store.model_cards.model_card(name)
    path = file_models.SOURCES_FILE.path(name.removeprefix("file:"))
    version = path.stat().st_mtime_ns if path.is_file() else None
    if stored is not None and (version is None or stored.get("mtime_ns") == version):
        return stored  # the file as a worker read it (or gone since: its runs still show)
    if not files_allowed():
        return stored or from_runs(name, store.model_cards.model_specs(name))
    card = describe(name, time_limit_s)
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


def describe(name: str, time_limit_s: float | None = None) -> dict:
    """The card of file model `name`, read in a child process as a worker would (UnknownModel: what is wrong).

    The child gets at most DESCRIBE_TIMEOUT_S, or the run's time limit where that is shorter; on time, it and
    whatever it started are killed. What the file prints never reaches this process (the app's server) whole: its
    stdout goes nowhere, the last STDERR_TAIL_BYTES of its stderr are kept for the message, and the card comes back
    through a file of its own. A failure is kept per (path, mtime): the page's next rerun does not start it again.
    """
    from sample_models.sources import LAB, UnknownModel, file_models

    path = file_models.SOURCES_FILE.path(name.removeprefix("file:"))
    key = (str(path), path.stat().st_mtime_ns if path.is_file() else None)
    timeout_s = DESCRIBE_TIMEOUT_S if time_limit_s is None else min(DESCRIBE_TIMEOUT_S, time_limit_s)
    failed = _FAILED.get(key)
    if failed is not None and (failed[1] is None or failed[1] >= timeout_s):  # a shorter try could not do better
        raise UnknownModel(failed[0])
    try:
        return _read_card(name, LAB, timeout_s)
    except (UnknownModel, DescribeTimeout) as e:  # a timeout is kept with its limit: a longer one may do
        _FAILED[key] = (str(e), timeout_s if isinstance(e, DescribeTimeout) else None)
        raise UnknownModel(str(e)) from None


def _read_card(name: str, lab: Path, timeout_s: float) -> dict:
    from sample_models.sources import UnknownModel

    env = private.without_private(os.environ)  # run from the lab's folder, `-m` finds tcore there
    with tempfile.TemporaryDirectory(prefix="compile-lab-describe-") as folder:
        answer_path = Path(folder) / "answer.json"
        child = subprocess.Popen([sys.executable, "-m", "tcore.worker.describe", name, str(answer_path)], cwd=lab,
                                 env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 start_new_session=True)  # its own group: a timeout kills what it started too
        tail = _Tail(child.stderr)
        try:
            code = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        _kill_group(child)  # on time or not, nothing the file started outlives its reading (or holds the pipe)
        tail.join()
        if code is None:
            raise DescribeTimeout(f"{name}: reading the file timed out after {timeout_s:g} s (it was stopped)")
        try:
            answer = json.loads(answer_path.read_text())
        except (OSError, ValueError):
            answer = {}
    if isinstance(answer, dict) and "card" in answer:
        return answer["card"]
    last = (tail.text().strip().splitlines() or ["no message"])[-1]
    raise UnknownModel((answer.get("error") if isinstance(answer, dict) else None)
                       or f"{name}: the process that reads it ended with code {code}: {last}")


class DescribeTimeout(ValueError):
    """Reading a model file took longer than it may."""


class _Tail(threading.Thread):
    """Reads a pipe to its end, keeping only its last STDERR_TAIL_BYTES."""

    def __init__(self, pipe) -> None:
        super().__init__(daemon=True)
        self.pipe, self.kept = pipe, b""
        self.start()

    def run(self) -> None:
        with self.pipe:
            while chunk := self.pipe.read1(STDERR_TAIL_BYTES):
                self.kept = (self.kept + chunk)[-STDERR_TAIL_BYTES:]

    def text(self) -> str:
        return self.kept.decode(errors="replace")


def _kill_group(child: subprocess.Popen) -> None:
    processes.end_group(child.pid)
    child.wait()


def keep(store: RunStore, card: dict) -> None:
    """Store a card a worker sent; a store that cannot take it never costs a run its result."""
    try:
        store.model_cards.save_model_card(card)
    except Exception:  # noqa: BLE001 (the card is for pages; the run's own record matters more)
        traceback.print_exc(limit=1)
