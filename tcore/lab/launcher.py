"""Start a worker process for one experiment, follow its events, cancel it or time it out.

Each run gets a fresh process in its own process group, with fresh TORCHINDUCTOR_CACHE_DIR and
TRITON_CACHE_DIR: that is what makes its compile time a cold one. Cancelling or timing out kills
the whole group (the worker and Inductor's compile workers).
"""
from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Iterator

from tcore import protocol
from tcore.spec import Experiment

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG_TAIL_LINES = 40
_END = {"type": "_end"}


def warm_cache_dir() -> Path:
    """The compile caches that warm runs share: $COMPILE_LAB_CACHE_DIR, else ~/.cache/compile-lab."""
    if os.environ.get("COMPILE_LAB_CACHE_DIR"):
        return Path(os.environ["COMPILE_LAB_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "compile-lab"


class RunHandle:
    """A running worker. Iterate over it for events; the last one is 'result' or 'error'."""

    def __init__(self, exp: Experiment, *, timeout_s: float | None = None, extra_env: dict[str, str] | None = None,
                 workdir: Path | None = None):
        self.exp = exp
        self.timeout_s = timeout_s
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="tcore-run-"))
        self.log_path = self.workdir / "worker.log"
        self.final: dict[str, Any] | None = None
        self.finished_at: float | None = None
        self._stop_reason: str | None = None  # "cancelled" or "timeout", set before the group is killed
        self._queue: queue.Queue = queue.Queue()

        cache_root = warm_cache_dir() if exp.cache == "warm" else self.workdir
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   TORCHINDUCTOR_CACHE_DIR=str(cache_root / "inductor"),
                   TRITON_CACHE_DIR=str(cache_root / "triton"))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env.update(extra_env or {})
        self._log = open(self.log_path, "w")
        self.started_at = time.time()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tcore.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log, text=True, env=env, cwd=REPO_ROOT, start_new_session=True)
        self.proc.stdin.write(exp.to_json())
        self.proc.stdin.close()
        self._timer = None
        if timeout_s is not None:
            self._timer = threading.Timer(timeout_s, self._stop, args=("timeout",))
            self._timer.daemon = True
            self._timer.start()
        threading.Thread(target=self._read, name=f"events-{self.proc.pid}", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cancel(self) -> None:
        self._stop("cancelled")

    def _stop(self, reason: str) -> None:
        if self.proc.poll() is not None or self._stop_reason:
            return
        self._stop_reason = reason
        _kill_group(self.proc)

    def _read(self) -> None:
        terminal = None
        for line in self.proc.stdout:
            event = protocol.parse(line)
            if event["type"] in protocol.TERMINAL:
                terminal = event  # held back: the log tail is added once the process has ended
            else:
                self._queue.put(event)
        returncode = self.proc.wait()
        if self._timer:
            self._timer.cancel()
        self._log.close()
        if terminal is None:  # the worker said nothing final: it was stopped, or it died
            if self._stop_reason == "timeout":
                terminal = protocol.error("timeout", f"stopped after the {self.timeout_s:g} s time limit")
            elif self._stop_reason == "cancelled":
                terminal = protocol.error("cancelled", "cancelled by the user")
            else:
                terminal = protocol.error("crashed", _death_message(returncode))
        if terminal["type"] == "error":
            terminal["log_tail"] = self.log_tail()
        self.final = terminal
        self.finished_at = time.time()
        self._queue.put(terminal)
        self._queue.put(_END)
        shutil.rmtree(self.workdir / "inductor", ignore_errors=True)  # fresh caches are single-use
        shutil.rmtree(self.workdir / "triton", ignore_errors=True)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        with open(self.log_path, errors="replace") as f:
            return [line.rstrip("\n") for line in deque(f, maxlen=lines)]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while (event := self._queue.get()) is not _END:
            yield event


def _death_message(returncode: int) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = " (the kernel's OOM killer sends SIGKILL when memory runs out)" if name == "SIGKILL" else ""
        return f"the worker process died from {name}{hint} before reporting a result"
    return f"the worker process exited with code {returncode} before reporting a result"


def _kill_group(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """SIGTERM the process group, then SIGKILL it if anything is left after `grace_s`."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is already gone, which is what we wanted
