"""The start-up ladder and the set_stance probes, started from the app's Diagnose page: each runs in a thread of the
app's process that starts its steps' fresh processes (tcore.lab.ladder's rungs; `python -m tcore.worker.stances`),
and says each step as it ends; the page follows it and reads its result from here when it ends.

They run beside the run queue, not in it: the page says so before a person starts one, and how many runs are under
way on the machine then. One of each kind at a time per app process: each keeps the CPU busy with compiles.
"""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tcore.experiment.spec import Experiment
from tcore.lab import ladder
from tcore.lab.policy import limits
from tcore.lab.settings import private
from tcore.lab.settings.config import REPO_ROOT

KINDS = ("ladder", "stances")
KEEP = 20  # ended probes kept for the pages, newest first; older ones are dropped
STEP_TIMEOUT_S = 900.0  # the most one step's process may take (a ladder rung, or all the stance probes)


@dataclass
class Probe:
    """One ladder climb or one stance probe, started here: what it runs, its steps so far, then its result."""

    id: str
    kind: str                # "ladder" or "stances"
    title: str               # what it runs, for the page
    started_at: float
    steps: list[str] = field(default_factory=list)  # one line per step, as each ends
    result: Any = None       # ladder: tcore.lab.ladder.ladder()'s dict; stances: the list of probes
    error: str | None = None  # why it ended without a result
    ended_at: float | None = None
    stop: threading.Event = field(default_factory=threading.Event, repr=False)  # set by stop_now(): end it now

    @property
    def done(self) -> bool:
        return self.ended_at is not None

    @property
    def stopped(self) -> bool:
        return self.stop.is_set()

    def stop_now(self) -> None:
        """End it at once: the step under way is killed with what it started, no later step starts."""
        self.stop.set()


_PROBES: dict[str, Probe] = {}
_LOCK = threading.Lock()
_IDS = itertools.count(1)


class Busy(RuntimeError):
    """A probe of this kind is still running in this process; the message says which."""


def get(probe_id: str | None) -> Probe | None:
    return _PROBES.get(probe_id) if probe_id else None


def latest(kind: str) -> Probe | None:
    """The newest probe of `kind` started in this process (a refreshed page finds it again)."""
    with _LOCK:
        found = [p for p in _PROBES.values() if p.kind == kind]
    return max(found, key=lambda p: p.started_at, default=None)


def start_ladder(exp: Experiment, rungs: list[str], *, timeout_s: float = STEP_TIMEOUT_S) -> Probe:
    """Climb the start-up ladder for `exp` (inference, its device resolved) in a thread; returns at once. SpecError
    for a model file the lab does not allow (its code would run here), Busy while another ladder runs."""
    limits.check_app_model(exp.model)
    def climb(probe: Probe) -> Any:
        return ladder.ladder(exp.to_json(), rungs, timeout_s=timeout_s, stop=probe.stop,
                             on_step=lambda step, report: probe.steps.append(step_words(step, report)))
    return _start("ladder", f"{exp.label}: {', '.join(rungs)}", climb)


def start_stances(exp: Experiment, *, timeout_s: float = STEP_TIMEOUT_S) -> Probe:
    """Run the three set_stance probes over `exp`'s shape schedule in a fresh worker-side process; returns at once.
    SpecError for a model file the lab does not allow, Busy while other probes run."""
    limits.check_app_model(exp.model)
    def probe_all(probe: Probe) -> Any:
        return run_stances(exp, timeout_s=timeout_s, on_line=probe.steps.append, stop=probe.stop)
    return _start("stances", exp.label, probe_all)


def stance_command(exp: Experiment) -> list[str]:
    """`python -m tcore.worker.stances` with `exp`'s settings, printing its probes as JSON."""
    return [sys.executable, "-m", "tcore.worker.stances", "--json", "--model", exp.model, "--preset", exp.preset,
            "--batch-size", str(exp.batch_size), "--shape-count", str(exp.shape_count), "--backend", exp.backend,
            "--device", exp.device]


def run_stances(exp: Experiment, *, timeout_s: float, on_line: Callable[[str], None],
                stop: threading.Event | None = None) -> list[dict[str, Any]]:
    """The stance probes' list, from a fresh process (without the lab's private environment); each line it says on
    stderr (a probe done) goes to on_line. RuntimeError with the end of its output if it fails; ladder.Stopped if
    `stop` was set."""
    env = {**private.without_private(dict(os.environ)), "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(stance_command(exp), cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    stop = stop or threading.Event()

    def kill_on_stop_or_limit() -> None:
        deadline = time.monotonic() + timeout_s
        while proc.poll() is None and time.monotonic() < deadline and not stop.wait(ladder.POLL_S):
            pass
        if proc.poll() is None:
            ladder.kill_group(proc)  # its session: what it started goes too

    timer = threading.Thread(target=kill_on_stop_or_limit, name="stances-watch", daemon=True)
    timer.start()
    said: list[str] = []
    try:
        for line in proc.stderr:
            said.append(line.rstrip("\n"))
            if line.startswith("  ") and line.rstrip().endswith(": done"):
                on_line(line.strip())
        out = proc.stdout.read()
        code = proc.wait()
    finally:
        timer.join(timeout=2 * ladder.POLL_S)
    if stop.is_set():
        raise ladder.Stopped(ladder.STOPPED_WORDS)
    if code != 0:
        tail = "\n".join(said[-15:])
        raise RuntimeError(f"the stance probes' process {ladder.exit_words(code)}:\n{tail}")
    return json.loads(out)


def step_words(step: str, report: dict[str, Any]) -> str:
    """A ladder step as it ends: 'cold: 33.1 s; first result after 28.6 s (s: interpreter 0.05, imports 3.10, build
    0.41, first_call 25.02)', or why it could not run. Its phases come with it: a step's process reports them all
    when it ends, so the climb shows each finished rung's split while the next one runs."""
    why = report.get("unavailable") or report.get("failed")
    if why:
        return f"{step}: {why.splitlines()[0]}"
    phases = report.get("phases") or {}
    first = f"; first result after {phases['first_result_s']:.1f} s" if phases.get("first_result_s") else ""
    said = ladder.phase_split(phases, compiled=step != "eager")
    split = f" (s: {said})" if said else ""
    return f"{step}: {report.get('process_wall_s', 0):.1f} s{first}{split}"


def _start(kind: str, title: str, work: Callable[[Probe], Any]) -> Probe:
    with _LOCK:
        running = [p for p in _PROBES.values() if p.kind == kind and not p.done]
        if running:
            raise Busy(f"a {kind} probe is still running on this server ({running[0].title}, started "
                       f"{time.time() - running[0].started_at:.0f} s ago): one at a time, as each keeps the CPU busy")
        probe = Probe(id=f"{kind}-{next(_IDS)}", kind=kind, title=title, started_at=time.time())
        _PROBES[probe.id] = probe
        for old in sorted((p for p in _PROBES.values() if p.done), key=lambda p: p.started_at)[:-KEEP]:
            del _PROBES[old.id]

    def body() -> None:
        try:
            probe.result = work(probe)
            if probe.stopped:
                probe.error = ladder.STOPPED_WORDS
        except ladder.Stopped:
            probe.error = ladder.STOPPED_WORDS
        except Exception as e:  # noqa: BLE001 (said on the page, which is where the person is)
            probe.error = f"{type(e).__name__}: {e}"
        finally:
            probe.ended_at = time.time()

    threading.Thread(target=body, name=f"probe-{probe.id}", daemon=True).start()
    return probe
