"""A run's tlparse report: its compile's TORCH_TRACE log (tcore.lab.artifacts.torch_trace) rendered by tlparse.

tlparse (https://github.com/pytorch/tlparse, `pip install tlparse`) turns the structured log that
TORCH_TRACE makes torch write into a folder of HTML: a stack of every compilation with its Dynamo graph,
guards, recompile reasons, AOT graphs, Inductor's output code and compile metrics. The report is rendered
once, the first time someone opens it, into REPORTS/<run id>/ (a cache: the stored log is the source), and
the app serves that folder as static files (.streamlit/config.toml: enableStaticServing).
"""
from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tcore.lab import artifacts
from tcore.lab.launcher import REPO_ROOT

# Streamlit serves <app folder>/static/ at app/static/ when static serving is on.
STATIC_ROOT = REPO_ROOT / "static"
REPORTS = STATIC_ROOT / "tlparse"
RENDER_TIMEOUT_S = 120


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


def report(run_id: str, db_path: Path, *, reports: Path = REPORTS) -> Report:
    """The run's rendered report, rendering it on first use; or the reason there is none."""
    folder = reports / run_id
    if (folder / "index.html").exists():
        return Report(folder)
    log = artifacts.torch_trace(run_id, db_path)
    if log is None:
        return Report(None, "this run kept no TORCH_TRACE: it compiled nothing, recorded none (torch_trace off), "
                            "or ran before the lab kept them")
    tool = executable()
    if tool is None:
        return Report(None, "tlparse is not installed here: `pip install tlparse` (it is in requirements.txt)")
    with tempfile.TemporaryDirectory(prefix="tlparse-") as tmp:
        source = Path(tmp) / f"{run_id}.log"
        source.write_bytes(gzip.decompress(log))
        staged = Path(tmp) / "out"
        try:
            done = subprocess.run([tool, str(source), "-o", str(staged), "--overwrite", "--no-browser"],
                                  capture_output=True, text=True, timeout=RENDER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return Report(None, f"tlparse took over {RENDER_TIMEOUT_S} s on this run's trace and was stopped")
        if done.returncode != 0 or not (staged / "index.html").exists():
            said = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return Report(None, f"tlparse failed (exit {done.returncode}): {said[0]}")
        reports.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.move(str(staged), folder)  # whole, so a half-written report is never served
    return Report(folder)


def forget(run_id: str, *, reports: Path = REPORTS) -> None:
    """Remove a deleted run's rendered report."""
    shutil.rmtree(reports / run_id, ignore_errors=True)
