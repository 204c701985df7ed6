"""A run's worker followed: its events in order, its end, a cancel or a time limit that stops it, wherever it runs
(RunEvents); a worker on this machine (RunHandle); a Ray task's is tcore.lab.launch.cluster.RayRunHandle."""
from __future__ import annotations

import os
import queue
import shutil
import signal
import threading
import time
from collections import deque
from typing import Any, Iterator

from tcore.experiment import protocol
from tcore.experiment.spec import Experiment
from tcore.lab.launch import fork_server_client
from tcore.lab.launch.launcher import (
    IMPORT_TIME_ENV,
    Worker,
    _end_group,
    _kill_group,
    _without_private,
    warm_cache_dir,
)
from tcore.lab.launch.remote import LOG_TAIL_LINES
from tcore.lab.outputs import artifact_handover

_END = {"type": "_end"}


class RunEvents:
    """What whoever follows a run gets from its handle, wherever the worker runs: its events in order (iterate over
    it), the final one, when it ended; cancel() or the time limit stops it, and an end the worker did not say itself
    says which stopped it (_unsaid)."""

    def __init__(self, exp: Experiment, timeout_s: float | None) -> None:
        self.exp = exp
        self.timeout_s = timeout_s
        self.phase: str | None = None  # the worker's latest phase event; None while it starts (imports)
        self.final: dict[str, Any] | None = None
        self.finished_at: float | None = None
        self._stop_reason: str | None = None  # "cancelled" or "timeout", set before the worker is stopped
        self._last_word = False  # the worker's final event has been read: a stop can no longer change the outcome
        self._ending = threading.Lock()  # a stop and the reading of the final event, one at a time
        self._queue: queue.Queue = queue.Queue()
        self._timer: threading.Timer | None = None

    def _start_timer(self, left_s: float) -> None:
        self._deadline = time.monotonic() + left_s
        self._timer = threading.Timer(left_s, self._stop, args=("timeout",))
        self._timer.daemon = True
        self._timer.start()

    def extend_limit(self, s: float) -> None:
        """Push the time limit `s` later: the seconds another run's timed rounds held this worker still
        (tcore.lab.queue.quiet) are not the run's to spend."""
        timer = self._timer
        if timer is None or not timer.is_alive() or s <= 0:
            return
        timer.cancel()
        self._start_timer(max(0.0, self._deadline - time.monotonic()) + s)

    def cancel(self) -> bool:
        """Stop the worker; False where its outcome was settled already (it said its last word, or ended), so the run
        ends as it would have: a Cancel pressed as the result came answered "Cancelled" beside a finished run."""
        return self._stop("cancelled") is not False

    def _stop(self, reason: str) -> bool | None:
        raise NotImplementedError

    def _unsaid(self, timed_out: str, otherwise: str) -> dict[str, Any]:
        """The final event of a run whose worker said nothing final: stopped at its limit, cancelled, or else lost."""
        if self._stop_reason == "timeout":
            return protocol.error("timeout", timed_out, phase=self.phase)
        if self._stop_reason == "cancelled":
            return protocol.error("cancelled", "cancelled by the user")
        return protocol.error("crashed", otherwise)

    def _finish(self, terminal: dict[str, Any]) -> None:
        self.final = terminal
        self.finished_at = time.time()
        self._queue.put(terminal)
        self._queue.put(_END)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while (event := self._queue.get()) is not _END:
            yield event


class RunHandle(RunEvents):
    """A running worker on this machine. Iterate over it for events; the last one is 'result' or 'error'.

    worker: a spare (SparePool.take) or one just started. extra_env is what this run adds (artifact
    and profiler trace paths); a warm run also gets the shared caches.
    """

    def __init__(self, exp: Experiment, worker: Worker, *, timeout_s: float | None = None,
                 extra_env: dict[str, str] | None = None, launched_at: float | None = None):
        """timeout_s counts from launched_at (when the run left the queue; default now), so the time its worker
        took to start, or to be forked once the fork server's imports were done, is inside the limit."""
        super().__init__(exp, timeout_s)
        self.waiting_for_device = False  # it asked for its device and another run holds it (tcore.lab.queue.lease)
        self.worker = worker
        self.workdir = self.worker.workdir
        self.log_path = self.worker.log_path
        self._log = self.worker._log
        self.proc = self.worker.proc
        self.worker.taken = True

        env = {k: v for k, v in _without_private(dict(os.environ)).items()  # set here since the worker started
               if not k.startswith(IMPORT_TIME_ENV) and self.worker.spawn_env.get(k) != v}
        env.update(extra_env or {})
        if exp.cache == "warm":
            env.update(TORCHINDUCTOR_CACHE_DIR=str(warm_cache_dir() / "inductor"),
                       TRITON_CACHE_DIR=str(warm_cache_dir() / "triton"))
        self.started_at = time.time()
        launched_at = launched_at or self.started_at
        # Where other runs share the device, the stdin stays open: the device is granted there (grant()).
        self.shares_device = env.get(protocol.DEVICE_LEASE) == "1"
        self._stdin_lock = threading.Lock()
        try:
            self.proc.stdin.write(protocol.envelope(exp.to_json(), env))
            self.proc.stdin.flush()
            if not self.shares_device:
                self.proc.stdin.close()
        except BrokenPipeError:  # it died before reading; _read() reports how
            pass
        if timeout_s is not None:
            self._start_timer(max(0.0, launched_at + timeout_s - time.time()))
        threading.Thread(target=self._read, name=f"events-{self.proc.pid}", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def grant(self, purpose: str, lab_processes: int, held_s: float = 0.0) -> bool:
        """Tell the worker it holds its device now (tcore.lab.queue.lease), and how long it was held still since its
        last grant (tcore.lab.queue.quiet); False if it can no longer hear it (it ended)."""
        with self._stdin_lock:
            try:
                self.proc.stdin.write(protocol.grant(purpose, lab_processes, held_s))
                self.proc.stdin.flush()
                return True
            except (BrokenPipeError, ValueError, OSError):  # ended, or its stdin closed at its end
                return False

    def _stop(self, reason: str) -> bool:
        with self._ending:
            if self.proc.poll() is not None or self._stop_reason or self._last_word:
                return False
            self._stop_reason = reason
        _kill_group(self.proc)
        return True

    def _read(self) -> None:
        terminal = None
        for line in self.proc.stdout:
            event = protocol.parse(line)
            if event["type"] in protocol.TERMINAL:
                with self._ending:  # a cancel answered before this line was read stands: the run ends cancelled
                    self._last_word = self._stop_reason != "cancelled"
                    terminal = event if self._last_word else None  # held back: the log tail comes at the end
            else:
                if event["type"] == "phase":
                    self.phase = event["phase"]
                self._queue.put(event)
        returncode = self.proc.wait()
        _end_group(self.proc)  # compile workers the worker left when it exited without teardown
        if self._timer:
            self._timer.cancel()
        with self._stdin_lock:
            try:
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        self._log.close()
        if terminal is None:  # the worker said nothing final: it was stopped, or it died
            terminal = self._unsaid(timeout_message(self.timeout_s, self.phase, self.waiting_for_device),
                                    _death_message(returncode))
        if terminal["type"] == "error":
            terminal["log_tail"] = self.log_tail()
        elif self.exp.cache == "cold":  # before the run counts as ended: a warm run queued behind it must find it
            self._share_compile(terminal["result"])
        self._finish(terminal)
        shutil.rmtree(self.workdir / "inductor", ignore_errors=True)  # fresh caches are single-use
        shutil.rmtree(self.workdir / "triton", ignore_errors=True)

    def _share_compile(self, result: dict[str, Any]) -> None:
        """What this cold run compiled goes into the caches warm runs share, now that its own figures are measured;
        a copy that fails (a full disk) leaves the run as it is and says so in its notes."""
        try:
            artifact_handover.share_compiled(self.workdir, warm_cache_dir())
        except OSError as e:
            result["notes"] = [*result.get("notes", []), f"its compile could not be added to the cache warm runs "
                                                          f"share ({type(e).__name__}: {e})"]

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        with open(self.log_path, errors="replace") as f:
            return [line.rstrip("\n") for line in deque(f, maxlen=lines)]


def timeout_message(limit_s: float | None, phase: str | None, waiting_for_device: bool = False) -> str:
    """What a run stopped at its time limit was doing: its phase in the words the pages use, and whether it was
    waiting for its GPU while other runs held it. Made for every run whose worker said nothing final, a run without
    a limit too (queued with none, then taken over): its None ended the reading thread in a TypeError, and the
    command that had taken the run over waited on it for ever."""
    doing = protocol.PHASE_TITLES.get(phase, phase) if phase else "Starting the worker (imports)"
    waited = (", waiting for the GPU while other runs of the room held it (a larger time limit, or fewer runs at "
              "once, lets it through)") if waiting_for_device else ""
    limit = f"{limit_s:g} s " if limit_s is not None else ""
    return f"stopped at the {limit}time limit, in the phase '{doing}'{waited}"


def _death_message(returncode: int) -> str:
    if returncode == fork_server_client.STATUS_LOST:
        return ("the worker process ended before reporting a result (how, nobody knows: the fork server that started "
                "it ended, or was stopped, first)")
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = " (the kernel's OOM killer sends SIGKILL when memory runs out)" if name == "SIGKILL" else ""
        return f"the worker process died from {name}{hint} before reporting a result"
    return f"the worker process exited with code {returncode} before reporting a result"


