"""What the lab side and the worker process say to each other.

The lab side starts `python -m tcore.worker`, writes the experiment as one JSON line on its stdin and sets the
environment variables below; the worker answers with events, one JSON object per line on its stdout. Where runs
share the device, the stdin stays open after the experiment: the lab grants the device there (grant()).

Every event has a "type":
  started   {device}                               the worker is up and has resolved the device
  phase     {phase}                                a phase began (PHASES, in order)
  progress  {phase, done, total}                   steps or blocks done within a phase
  power     {samples: [[t_s, watts, phase, util_pct], ...]}
  note      {text}                                 something the user should know (a knob that does nothing here)
  figure    {name, value, ...}                     a figure known before the result: compile_s (final, once
                                                   compiled), speedup_so_far {rounds, of, low, high,
                                                   pm_pct} (the paired estimate after each round, of at
                                                   most `of`; provisional)
  headline  {result, env}                          the timed figures (speedup, its interval), known before the
                                                   profiling pass; the result event's record adds the profile
                                                   and may widen the interval (a host-bound verdict)
  code      {sources: [str, ...]}                  the source Inductor generated, one per graph
  model_card {card: {...}}                         a model file as the worker read it (tcore.store.model_cards)
  device    {ask: purpose} | {release: true}       the device lease (tcore.worker.device_lease): the worker wants its
                                                   device alone, or lets it go; the lab answers an ask on the
                                                   worker's stdin with a grant line, {granted, lab_processes}
  result    {result, env}                          the run finished; the last event of a good run
  error     {kind, message, traceback?, log_tail?} the run failed; the last event of a failed run
"""
from __future__ import annotations

import json
import threading
import time
from typing import IO, Any

PHASES = ("building", "eager", "compiling", "warmup", "schedule", "measuring", "new_prompt", "profiling")
PHASE_TITLES = {
    "building": "Building the model",
    "eager": "Eager baseline (warm-up)",
    "compiling": "Compiling (first call)",
    "warmup": "Warming up the compiled model",
    "schedule": "Feeding the shape schedule",
    "measuring": "Measuring eager vs compiled",
    "new_prompt": "Generating from a prompt a token shorter (recompilations)",
    "profiling": "Profiling steps: where the time goes",
}

def phases_for(exp) -> list[str]:
    """The phases a run of `exp` goes through, in order: fewer without a compiled variant or a schedule."""
    skip = set() if exp.has_compiled_variant else {"compiling", "warmup", "schedule"}
    if not exp.shape_count:
        skip.add("schedule")
    if exp.task != "generate" or not exp.compiles:
        skip.add("new_prompt")
    return [p for p in PHASES if p not in skip]


# How a worker's log begins once its imports are done (tcore.worker.__main__.prepare): a spare that
# has logged it starts a run at once (tcore.lab.launch.launcher.Worker.ready).
READY = "worker ready: imports done"

# Why a run failed. The first three are raised inside the worker; the rest are decided by the parent.
ERROR_KINDS = {
    "invalid_spec": "Invalid settings",
    "compile_error": "Compile error",
    "oom": "Out of memory",
    "timeout": "Timed out",
    "cancelled": "Cancelled",
    "crashed": "Crashed",
}
TERMINAL = ("result", "error")


class EventWriter:
    """Writes events as JSON lines; safe to call from the power-sampler thread and the main thread."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def __call__(self, event: dict[str, Any]) -> None:
        line = json.dumps({"t": round(time.perf_counter() - self._t0, 3), **event}, default=str)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def envelope(spec_json: str, env: dict[str, str]) -> str:
    """What the lab side writes on a worker's stdin: the experiment and the environment its run adds, one line."""
    return json.dumps({"experiment": json.loads(spec_json), "env": env}) + "\n"


def open_envelope(text: str) -> tuple[str, dict[str, str]]:
    """(experiment JSON, environment) from a worker's stdin; a bare experiment (older callers) adds none."""
    data = json.loads(text)
    if isinstance(data, dict) and "experiment" in data:
        return json.dumps(data["experiment"]), {str(k): str(v) for k, v in (data.get("env") or {}).items()}
    return text, {}


def grant(purpose: str, lab_processes: int, held_s: float = 0.0) -> str:
    """The line the lab writes on a worker's stdin when it holds the device for that run (tcore.lab.queue.lease);
    held_s: the seconds the lab held it still since its last grant, while another run was timed (tcore.lab.queue.quiet),
    which its compile time leaves out as it leaves out a wait for the device."""
    return json.dumps({"granted": purpose, "lab_processes": lab_processes,
                       **({"held_s": round(held_s, 3)} if held_s > 0 else {})}) + "\n"


def parse(line: str) -> dict[str, Any]:
    """One line from the worker; anything that is not an event becomes a 'log' event."""
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return {"type": "log", "line": line.rstrip("\n")}
    return event if isinstance(event, dict) and "type" in event else {"type": "log", "line": line.rstrip("\n")}


def error(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    assert kind in ERROR_KINDS, kind
    return {"type": "error", "kind": kind, "message": message, **extra}


# --- the launch environment: compile artifacts (tcore.lab.outputs.artifact_handover hands them over,
# tcore.worker.compile_artifacts uses them)
SAVE_ARTIFACTS_TO = "TCORE_SAVE_ARTIFACTS"      # where the worker writes the artifacts of this run
LOAD_ARTIFACTS_FROM = "TCORE_LOAD_ARTIFACTS"    # artifacts to load before the first compile
ARTIFACTS_MADE_ON = "TCORE_ARTIFACTS_MADE_ON"   # JSON: the torch/triton/device (and run) the artifacts came from
COLD_BECAUSE = "TCORE_COLD_BECAUSE"             # why an artifacts run has nothing to load
SAVE_TRACES_TO = "TCORE_SAVE_TRACES"            # a folder for the profiler traces of the steps profiled
# The worker's own folder (tcore.lab.launch.launcher): a worker handed no run (a spare let go, or one whose lab process
# died, even by SIGKILL) removes it itself as it exits, so no clean-up in the lab process has to outlive it.
WORKER_DIR = "TCORE_WORKER_DIR"
# "1" for a spare (tcore.lab.launch.launcher.SparePool), started before any run: it may use its wait to do what a run
# would otherwise pay for (tcore.worker.__main__.while_idle); a worker started for a run goes straight to it.
SPARE_WORKER = "TCORE_SPARE_WORKER"
# The device lease (tcore.worker.device_lease): "1" when other runs share this run's device, so the worker asks the lab
# for it (a device event) and waits for the grant on its stdin; and the cores the lab keeps for the run that holds
# the device ("3,4": the launch thread's first), from tcore.lab.queue.room.
DEVICE_LEASE = "TCORE_DEVICE_LEASE"
MEASURE_CPUS = "TCORE_MEASURE_CPUS"


def made_on(env: dict[str, Any]) -> dict[str, Any]:
    """What compile artifacts depend on: the torch and triton versions and the device they were compiled for."""
    return {"torch": env.get("torch"), "triton": env.get("triton"), "device_name": env.get("gpu") or env.get("cpu")}
