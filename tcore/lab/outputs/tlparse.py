"""A run's tlparse report: its compile's TORCH_TRACE log (tcore.store.artifacts) rendered by tlparse.

tlparse (https://github.com/pytorch/tlparse, `pip install tlparse`) turns the structured log that
TORCH_TRACE makes torch write into a folder of HTML: a stack of every compilation with its Dynamo graph,
guards, recompile reasons, AOT graphs, Inductor's output code and compile metrics. The report is rendered
once, the first time someone opens it, into REPORTS/<store id>/<run id>/ (a cache: the stored log is the
source; the least recently rendered go past KEEP_BYTES), and the app serves that folder as static files
(.streamlit/config.toml: enableStaticServing). Each store has its own shelf, named by its random store_id:
stores in one checkout do not serve each other's reports, a store deleted and made again does not serve
its predecessor's, and a report's address cannot be guessed from a run id.
"""
from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tcore.lab.settings.config import REPO_ROOT
from tcore.store import RunStore

# Streamlit serves <app folder>/static/ at app/static/ when static serving is on.
STATIC_ROOT = REPO_ROOT / "static"
REPORTS = STATIC_ROOT / "tlparse"
RENDER_TIMEOUT_S = 120
# Streamlit turns static serving off at start-up when static/ is over 1 GB; rendered reports are a cache,
# so the least recently opened go once they pass this.
KEEP_BYTES = 512 * 1024**2


@dataclass(frozen=True)
class Report:
    """A rendered report (folder and index page), or why there is none (reason)."""

    folder: Path | None
    reason: str | None = None

    @property
    def index(self) -> Path | None:
        return self.folder / "index.html" if self.folder else None

    def zipped(self) -> bytes:
        """The whole report folder as a zip, to open offline: unzip and open index.html."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
            for path in sorted(self.folder.rglob("*")):
                if path.is_file():
                    z.write(path, Path(f"tlparse-{self.folder.name}") / path.relative_to(self.folder))
        return buffer.getvalue()


def executable() -> str | None:
    """tlparse's binary: beside this Python (a venv's bin/, even when that is not on PATH), else on PATH."""
    beside = Path(sys.executable).parent / "tlparse"
    return str(beside) if beside.exists() else shutil.which("tlparse")


def report(run_id: str, store: RunStore, *, reports: Path = REPORTS) -> Report:
    """The run's rendered report, rendering it on first use; or the reason there is none."""
    if not _plain(run_id):
        return Report(None, f"{run_id!r} is not a run id")
    shelf = reports / store.store_id
    folder = shelf / run_id
    if (folder / "index.html").exists():
        return Report(folder)
    failed = _failure_note(shelf, run_id)
    if failed.exists():  # rendered once and failed: the page reruns every second, so say so without retrying
        return Report(None, failed.read_text())
    if store.artifacts.torch_trace(run_id, size_only=True) is None:
        return Report(None, "this run kept no TORCH_TRACE: it compiled nothing, recorded none (torch_trace off), "
                            "or ran before the lab kept them")
    tool = executable()
    if tool is None:
        return Report(None, "tlparse is not installed here: `pip install tlparse` (it is in requirements.txt)")
    reason = _render(run_id, store, tool, shelf, folder)
    if reason:
        failed.write_text(reason)
        return Report(None, reason)
    _evict(reports, keep=folder)
    return Report(folder)


def _render(run_id: str, store: RunStore, tool: str, reports: Path, folder: Path) -> str | None:
    """Render the stored log into `folder`; the reason it failed, or None."""
    reports.mkdir(parents=True, exist_ok=True)
    # Staged beside its final place and renamed into it whole: a half-written report is never served, and of
    # two sessions rendering the same run at once, the second keeps the first's.
    with tempfile.TemporaryDirectory(prefix=".render-", dir=reports) as tmp:
        source = Path(tmp) / f"{run_id}.log"
        source.write_bytes(gzip.decompress(store.artifacts.torch_trace(run_id)))
        staged = Path(tmp) / "out"
        try:
            done = subprocess.run([tool, str(source), "-o", str(staged), "--overwrite", "--no-browser"],
                                  capture_output=True, text=True, timeout=RENDER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"tlparse took over {RENDER_TIMEOUT_S} s on this run's TORCH_TRACE and was stopped"
        if done.returncode != 0 or not (staged / "index.html").exists():
            said = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"tlparse failed (exit {done.returncode}): {said[0]}"
        try:
            os.rename(staged, folder)
        except OSError:  # rendered meanwhile by another session
            if not (folder / "index.html").exists():
                raise
    return None


def _plain(run_id: str) -> bool:
    """Whether `run_id` can name one folder on a shelf: it is joined into paths, and '../x' or '/x' would name
    another's (forget() deleted what it named). The store's ids (tcore.store.records.new_id) are of these letters."""
    return re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", run_id) is not None


def _failure_note(reports: Path, run_id: str) -> Path:
    return reports / f".failed-{run_id}.txt"


def _evict(reports: Path, *, keep: Path, limit: int = KEEP_BYTES) -> None:
    """Remove the least recently rendered reports, every store's, until the rest fit in `limit` bytes (never `keep`)."""
    sizes = {d: sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
             for shelf in reports.iterdir() if shelf.is_dir() and not shelf.name.startswith(".")
             for d in shelf.iterdir() if d.is_dir() and not d.name.startswith(".")}
    total = sum(sizes.values())
    for d in sorted(sizes, key=lambda d: d.stat().st_mtime):
        if total <= limit:
            break
        if d != keep:
            shutil.rmtree(d, ignore_errors=True)
            total -= sizes[d]


def forget(run_id: str, *, reports: Path = REPORTS) -> None:
    """Remove a deleted run's rendered report (or the note that it could not be rendered), from any store's shelf."""
    if not reports.is_dir() or not _plain(run_id):  # report() renders nothing for an id that is not plain
        return
    for shelf in [d for d in reports.iterdir() if d.is_dir() and not d.name.startswith(".")]:
        shutil.rmtree(shelf / run_id, ignore_errors=True)
        _failure_note(shelf, run_id).unlink(missing_ok=True)
        try:
            shelf.rmdir()  # only if that left it empty
        except OSError:
            pass
